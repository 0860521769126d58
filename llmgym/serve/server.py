"""Run the served app with uvicorn: on a socket bound here (port 0 picks a free one).

uvicorn runs with the app's connection cap (``limit_concurrency``), its frame cap
(``ws_max_size``) and the request deadline of :mod:`llmgym.serve.deadline` against slow
clients, and HTTPS (mutual TLS with a client CA) when given :class:`TLS`. One process, one
event loop; env calls run on the app's own threads.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from llmgym import error
from llmgym.serve.app import ServeConfig, create_app, is_loopback
from llmgym.serve.deadline import deadline_protocol
from llmgym.serve.sessions import SessionPool

TOKEN_ENV = "LLMGYM_SERVE_TOKEN"
"""Client tokens (comma-separated) when ``--token`` is not given."""


def check_bind(host: str, tokens: list[str], *, client_certs: bool = False) -> None:
    """Refuse to serve beyond loopback unless clients authenticate: a token, or mutual TLS."""
    if not tokens and not client_certs and not is_loopback(host):
        raise error.Error(
            f"Serving on {host} (not loopback) needs client authentication: pass --token TOKEN "
            f"(or set {TOKEN_ENV}; every request then needs 'Authorization: Bearer TOKEN'), or "
            "mutual TLS with --tls-cert, --tls-key and --tls-client-ca"
        )


@dataclass(frozen=True)
class TLS:
    """HTTPS for the server: its certificate chain and key (PEM files), and with ``client_ca`` mutual
    TLS: every client must present a certificate signed by that CA, or the handshake fails."""

    certfile: str
    keyfile: str
    client_ca: str | None = None

    def __post_init__(self) -> None:
        for what, path in (("certificate", self.certfile), ("key", self.keyfile)):
            if not os.path.isfile(path):
                raise error.Error(f"No TLS {what} file {path!r}")
        if self.client_ca is not None and not os.path.isfile(self.client_ca):
            raise error.Error(f"No client CA file {self.client_ca!r}")

    def uvicorn_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"ssl_certfile": self.certfile, "ssl_keyfile": self.keyfile}
        if self.client_ca is not None:
            options.update(ssl_ca_certs=self.client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        return options


def tokens_from(given: list[str] | None) -> list[str]:
    tokens = [t for t in (given or []) if t]
    if not tokens:
        tokens = [t.strip() for t in os.environ.get(TOKEN_ENV, "").split(",") if t.strip()]
    return tokens


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, scheme: str = "http") -> str:
    host, port = sock.getsockname()[:2]
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class Server:
    """A uvicorn server on its own socket; ``start()`` in a thread, ``stop()`` ends it.

    ``pool``: a :class:`SessionPool` (subclass) to serve with; ``http``: uvicorn's HTTP parser
    (``auto``: httptools when installed, else ``h11``); ``tls``: serve HTTPS (mutual TLS with a
    client CA); other keywords go to ``uvicorn.Config``.

    >>> srv = Server(ServeConfig(env_ids=["llm/Math-v0"]))  # doctest: +SKIP
    >>> srv.start(); srv.url  # doctest: +SKIP
    'http://127.0.0.1:40123'
    """

    def __init__(
        self,
        config: ServeConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        pool: SessionPool | None = None,
        http: str = "auto",
        tls: TLS | None = None,
        **uvicorn: Any,
    ):
        import uvicorn as uv

        check_bind(host, config.tokens, client_certs=tls is not None and tls.client_ca is not None)
        self.app = create_app(config, pool=pool)
        self.sock = bind(host, port)
        self.url = url_of(self.sock, "https" if tls is not None else "http")
        options = {
            "log_level": "warning",
            "access_log": False,
            "lifespan": "on",
            "http": deadline_protocol(config.request_timeout_s, http),
            "limit_concurrency": config.max_connections,
            "ws_max_size": config.max_body_bytes,
            **(tls.uvicorn_options() if tls is not None else {}),
            **uvicorn,
        }
        self.server = uv.Server(uv.Config(self.app, **options))
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve in this thread until stopped (or SIGINT/SIGTERM when in the main thread)."""
        self.server.run(sockets=[self.sock])

    def start(self, timeout_s: float = 60.0) -> Server:
        self._thread = threading.Thread(target=self.run, name="llmgym-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # polls uvicorn's own flag, under a deadline
        if not self.server.started:
            self.stop()
            raise error.Error(f"The llmgym server did not start within {timeout_s} s")
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.sock.close()
        self.app.service.shutdown()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
