"""A served llmgym on loopback (OS-chosen port), started and stopped by the tests."""

from __future__ import annotations

import http.client as http_client
import json
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import llmgym  # noqa: E402
from llmgym.serve import ServeConfig, Server  # noqa: E402

DECLARATIVE_ID = "servetest/Capitals-v0"
CAPITALS = [
    {"id": "fr", "prompt": "Capital of France?", "answer": "Paris", "family": "europe"},
    {"id": "jp", "prompt": "Capital of Japan?", "answer": "Tokyo", "family": "asia"},
    {"id": "pe", "prompt": "Capital of Peru?", "answer": "Lima", "family": "americas"},
]
ENV_IDS = ["llm/Math-v0", "llm/ToolCalling-v0", DECLARATIVE_ID]
TOKENS = ["alice-token", "bob-token"]


def register_declarative() -> None:
    llmgym.register_task_env(DECLARATIVE_ID, tasks=CAPITALS, overwrite=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    register_declarative()
    srv = Server(ServeConfig(env_ids=ENV_IDS, max_sessions=64)).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def secure_server() -> Iterator[Server]:
    register_declarative()
    config = ServeConfig(
        env_ids=ENV_IDS,
        tokens=TOKENS,
        max_sessions=4,
        idle_timeout_s=1.0,
        max_body_bytes=64 * 1024,
        max_action_chars=10_000,
    )
    srv = Server(config).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start servers of any config for one test; all are stopped after it, failed or not."""
    started: list[Server] = []

    def start(config: ServeConfig, **options: Any) -> Server:
        register_declarative()
        srv = Server(config, **options).start()
        started.append(srv)
        return srv

    try:
        yield start
    finally:
        for srv in started:
            srv.stop()


def ws_url(server: Server) -> str:
    """The WebSocket route of a served llmgym."""
    return server.url.replace("http://", "ws://", 1) + "/v1/ws"


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def http(
    server: Server,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One raw HTTP request: status, headers (lower-case names) and the JSON (or text) reply."""
    parts = urllib.parse.urlsplit(server.url)
    conn = http_client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    try:
        conn.request(method, path, body=data, headers={**auth(token), **(headers or {})})
        response = conn.getresponse()
        raw = response.read()
        reply_headers = {k.lower(): v for k, v in response.getheaders()}
        if reply_headers.get("content-type", "").startswith("application/json"):
            return response.status, reply_headers, json.loads(raw)
        return response.status, reply_headers, raw.decode()
    finally:
        conn.close()
