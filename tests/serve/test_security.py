"""The service's promises, each attacked: tokens, ownership, size limits, bad input, leaks."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import pytest

from llmgym import error, remote
from llmgym.serve import Server
from llmgym.serve.server import check_bind

from .conftest import TOKENS

ALICE, BOB = TOKENS


def _raw(server: Server, method: str, path: str, body: bytes | None, token: str | None = ALICE):
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_unauthenticated_calls_are_refused(secure_server: Server) -> None:
    for token in (None, "wrong-token"):
        status, doc = _raw(secure_server, "GET", "/metadata", None, token)
        assert status == 401 and doc["error"]["type"] == "Unauthorized"
        status, _ = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id":"llm/Math-v0"}', token)
        assert status == 401
    assert _raw(secure_server, "GET", "/health", None, None)[0] == 200


def test_another_clients_token_cannot_touch_a_session(secure_server: Server) -> None:
    env = remote.make(secure_server.url, "llm/Math-v0", token=ALICE)
    try:
        env.reset(seed=0)
        path = f"/v1/sessions/{env.session_id}"
        for method, suffix, body in (
            ("POST", "/step", b'{"action": "1"}'),
            ("GET", "/state", None),
            ("GET", "/oracle", None),
            ("DELETE", "", None),
        ):
            status, doc = _raw(secure_server, method, path + suffix, body, BOB)
            assert status == 404 and doc["error"]["type"] == "UnknownSession", (method, suffix)
        env.step("1")  # still Alice's, and untouched
    finally:
        env.close()


def test_bad_requests_get_clear_4xx(secure_server: Server) -> None:
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b"{not json")
    assert status == 400 and "not valid JSON" in doc["error"]["message"]
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b"[1, 2]")
    assert status == 400 and "JSON object" in doc["error"]["message"]
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id": "llm/Nope-v0"}')
    assert status == 404 and doc["error"]["type"] == "UnknownEnv"
    status, doc = _raw(secure_server, "POST", "/v1/sessions/nope/step", b'{"action": "1"}')
    assert status == 404 and doc["error"]["type"] == "UnknownSession"
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id": 3}')
    assert status == 400


def test_oversized_bodies_and_actions_are_refused(secure_server: Server) -> None:
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b" " * (128 * 1024))
    assert status == 413 and doc["error"]["type"] == "PayloadTooLarge"
    env = remote.make(secure_server.url, "llm/Math-v0", token=ALICE)
    try:
        env.reset(seed=0)
        with pytest.raises(remote.RemoteError, match="limit of 10000 characters"):
            env.step("9" * 20_000)
        env.step("1")  # the session lives on
    finally:
        env.close()


def test_session_limit_then_idle_sessions_expire_and_close_their_env(
    secure_server: Server,
) -> None:
    pool = secure_server.app.pool
    envs = []
    deadline = time.monotonic() + 60
    while len(envs) < 4:  # the module's other tests may hold a slot for a moment
        try:
            envs.append(remote.make(secure_server.url, "llm/ToolCalling-v0", token=ALICE))
        except remote.RemoteError as exc:
            assert exc.status == 503 and time.monotonic() < deadline
    with pytest.raises(remote.RemoteError, match="limit of 4 sessions"):
        remote.make(secure_server.url, "llm/Math-v0", token=BOB)
    for env in envs:
        env.reset(seed=0)
    closed: list[str] = []
    for session in list(pool._sessions.values()):
        real_close = session.env.close

        def spy(real_close=real_close, sid=session.id) -> None:
            closed.append(sid)
            real_close()

        session.env.close = spy  # type: ignore[method-assign]
    deadline = time.monotonic() + 60
    while len(pool) and time.monotonic() < deadline:  # idle timeout 1 s, reaped by the server
        time.sleep(0.05)
    assert len(pool) == 0
    assert len(closed) == 4  # every expired session closed its env (its SQLite database)
    with pytest.raises(error.Error, match="No session"):
        envs[0].step("hello")
    assert pool.expired >= 4


def test_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(error.Error, match="needs a client token"):
        check_bind("0.0.0.0", [])
    check_bind("0.0.0.0", ["t"])
    check_bind("127.0.0.1", [])
    check_bind("::1", [])
