"""A served llmgym on loopback (OS-chosen port), started and stopped by the tests."""

from __future__ import annotations

from collections.abc import Iterator

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
