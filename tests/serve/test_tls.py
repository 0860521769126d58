"""HTTPS and mutual TLS: a client without the CA or without a certificate is refused at the
handshake; with both, every client (sync, async HTTP, WebSocket) plays the same episodes."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from llmgym import error, remote
from llmgym.serve import ServeConfig, Server
from llmgym.serve.server import TLS, check_bind

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def _certificate(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple | None,
    *,
    ca: bool,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> None:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it; and a
    second CA with its own client, which the server must not trust."""
    root = tmp_path_factory.mktemp("pki")
    for prefix in ("", "rogue-"):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate(f"{prefix}test CA", ca_key, None, ca=True)
        _write(root / f"{prefix}ca", ca, ca_key)
        client_key = ec.generate_private_key(ec.SECP256R1())
        _write(
            root / f"{prefix}client",
            _certificate("trainer", client_key, (ca.subject, ca_key), ca=False),
            client_key,
        )
        if not prefix:
            server_key = ec.generate_private_key(ec.SECP256R1())
            server = _certificate("llmgym", server_key, (ca.subject, ca_key), ca=False, server=True)
            _write(root / "server", server, server_key)
    return root


@pytest.fixture(scope="module")
def mtls_server(pki: Path) -> Iterator[Server]:
    tls = TLS(str(pki / "server.crt"), str(pki / "server.key"), client_ca=str(pki / "ca.crt"))
    srv = Server(ServeConfig(env_ids=["llm/Math-v0"]), tls=tls).start()
    try:
        yield srv
    finally:
        srv.stop()


def _context(pki: Path, client: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if client is not None:
        ctx.load_cert_chain(str(pki / f"{client}.crt"), str(pki / f"{client}.key"))
    return ctx


@pytest.mark.timeout(60)
def test_clients_with_a_certificate_play_over_mutual_tls(mtls_server: Server, pki: Path) -> None:
    assert mtls_server.url.startswith("https://127.0.0.1:")
    ctx = _context(pki, "client")
    env = remote.make(mtls_server.url, "llm/Math-v0", ssl_context=ctx)
    obs, _ = env.reset(seed=3)
    _, reward, terminated, _, info = env.step(env.unwrapped.oracle_action())
    assert reward == 1.0 and terminated and info["is_success"]
    env.close()

    local = gym.make("llm/Math-v0")
    local.reset(seed=3)
    answer = local.unwrapped.oracle_action()

    async def play(transport: str) -> float:
        async with remote.AsyncClient(mtls_server.url, transport=transport, ssl_context=ctx) as c:
            aenv = await c.make("llm/Math-v0")
            assert (await aenv.reset(seed=3))[0] == obs
            return float((await aenv.step(answer))[1])

    assert [asyncio.run(play(t)) for t in ("http", "ws")] == [1.0, 1.0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("client", [None, "rogue-client"])
def test_no_certificate_or_another_cas_is_refused_at_the_handshake(
    mtls_server: Server, pki: Path, client: str | None
) -> None:
    ctx = _context(pki, None)
    if client is not None:
        ctx.load_cert_chain(str(pki / f"{client}.crt"), str(pki / f"{client}.key"))
    # TLS 1.3 finishes the client's side of the handshake before the server checks its
    # certificate: the server then drops the connection, and nothing reaches the app
    with pytest.raises((error.Error, OSError), match="(?i)certificate|alert|closed connection|EOF"):
        remote.make(mtls_server.url, "llm/Math-v0", ssl_context=ctx, timeout_s=10)
    assert len(mtls_server.app.pool) == 0


@pytest.mark.timeout(60)
def test_a_client_that_does_not_trust_the_server_refuses_it(mtls_server: Server, pki: Path) -> None:
    ctx = ssl.create_default_context()  # the system's CAs: not our test CA
    ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    with pytest.raises((error.Error, OSError), match="(?i)certificate"):
        remote.make(mtls_server.url, "llm/Math-v0", ssl_context=ctx, timeout_s=10)


def test_mutual_tls_stands_in_for_a_token_off_loopback_and_bad_files_are_refused(
    pki: Path,
) -> None:
    check_bind("0.0.0.0", [], client_certs=True)  # mTLS authenticates every client
    with pytest.raises(error.Error, match="client authentication"):
        check_bind("0.0.0.0", [])
    with pytest.raises(error.Error, match="No TLS key file"):
        TLS(str(pki / "server.crt"), str(pki / "missing.key"))
    with pytest.raises(error.Error, match="No client CA file"):
        TLS(str(pki / "server.crt"), str(pki / "server.key"), client_ca=str(pki / "none.crt"))
