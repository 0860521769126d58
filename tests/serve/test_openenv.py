"""OpenEnv's own client (openenv-core) against `llmgym serve`, unchanged."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core")

from openenv.core.generic_client import GenericEnvClient  # noqa: E402


@pytest.fixture(scope="module")
def served_url() -> Iterator[str]:
    """`llmgym serve llm/Math-v0 --port 0` as a subprocess: the real command."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmgym", "serve", "llm/Math-v0", "--port", "0", "--openenv", "on"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "LLMGYM_SERVE_TOKEN": ""},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server prints its URL (or exits)
        match = re.search(r"listening on (http://\S+)", line)
        assert match, f"no URL from llmgym serve: {line!r}"
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=60)


def test_openenv_client_plays_an_episode_like_in_process(served_url: str) -> None:
    local = gym.make("llm/Math-v0")

    async def play(seed: int) -> tuple[Any, ...]:
        client = GenericEnvClient(base_url=f"{served_url}/openenv/llm/Math-v0")
        deadline = time.monotonic() + 120
        while True:  # the server may still be importing openenv when the socket is open
            try:
                await client.connect()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        try:
            first = await client.reset(seed=seed)
            obs = first.observation
            local_obs, info = local.reset(seed=seed)
            assert obs["text"] == local_obs
            assert obs["info"]["task_id"] == info["task_id"]
            action = local.unwrapped.oracle_action()
            result = await client.step({"content": action})
            expected = local.step(action)
            return (result.reward, result.done, result.observation["text"]), (
                expected[1],
                expected[2],
                expected[0],
            )
        finally:
            await client.close()

    for seed in (0, 5):
        got, want = asyncio.run(play(seed))
        assert got == want
    local.close()
