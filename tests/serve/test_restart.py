"""The server killed mid-run and started again: clear errors, never a hang or a wrong result.

``llmgym serve`` (a subprocess) is killed (SIGKILL) while 48 episodes loop on it over HTTP, over
WebSocket and from the blocking client. Every loop must end in a :class:`RemoteError` that says
what happened (a reply lost with the call in flight, or the server unreachable), each episode
finished before that must equal the same episode in-process, and nothing may wait past its
timeout. The server is then started again on the same port: the old sessions answer that they
are gone (HTTP: no such session; WebSocket: its connection closed), and new sessions, from the
very same client objects, work.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import urllib.parse
from typing import Any

import gymnasium as gym
import pytest

from llmgym.remote import (
    AsyncClient,
    AsyncRemoteEnv,
    RemoteError,
    ReplyLost,
    ServerUnreachable,
    make,
)

from .test_load import served

SEEDS = 64


def expected() -> dict[int, tuple[str, float]]:
    """The oracle's action and its reward for each seed of Math-v0, in-process."""
    env = gym.make("llm/Math-v0")
    out = {}
    for seed in range(SEEDS):
        env.reset(seed=seed)
        action = env.unwrapped.oracle_action()
        out[seed] = (action, float(env.step(action)[1]))
    env.close()
    return out


async def loop_episodes(env: AsyncRemoteEnv, plan: dict[int, tuple[str, float]], k: int) -> Any:
    """Episodes until the first error; each reward checked. Returns the error."""
    i = k
    while True:
        seed = i % SEEDS
        try:
            await env.reset(seed=seed)
            reward = (await env.step(plan[seed][0]))[1]
        except Exception as exc:
            return exc
        assert reward == plan[seed][1], (seed, reward)
        i += 1


def sync_loop(url: str, plan: dict[int, tuple[str, float]], errors: list[Any]) -> None:
    env = make(url, "llm/Math-v0", timeout_s=30)
    errors.append(env)
    for i in range(10**9):
        seed = i % SEEDS
        try:
            env.reset(seed=seed)
            reward = env.step(plan[seed][0])[1]
        except Exception as exc:
            errors.append(exc)
            return
        assert reward == plan[seed][1], (seed, reward)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_server_killed_mid_run_gives_clear_errors_and_comes_back() -> None:
    plan = expected()
    with served("llm/Math-v0") as (url, proc):
        port = urllib.parse.urlsplit(url).port
        clients = {
            t: AsyncClient(url, transport=t, timeout_s=20, retries=2) for t in ("http", "ws")
        }
        sync_results: list[Any] = []
        sync_thread = threading.Thread(target=sync_loop, args=(url, plan, sync_results))

        async def first_run() -> tuple[list[AsyncRemoteEnv], list[Any]]:
            envs = [await clients[("http", "ws")[k % 2]].make("llm/Math-v0") for k in range(48)]
            loops = [asyncio.ensure_future(loop_episodes(e, plan, k)) for k, e in enumerate(envs)]
            sync_thread.start()
            await asyncio.sleep(1.0)  # episodes in full flow
            proc.send_signal(signal.SIGKILL)
            start = time.monotonic()
            errors = await asyncio.wait_for(asyncio.gather(*loops), 60)
            assert time.monotonic() - start < 30  # each ended by an error, none waited it out
            return envs, errors

        loop = asyncio.new_event_loop()
        try:
            envs, errors = loop.run_until_complete(first_run())
            sync_thread.join(60)
            assert not sync_thread.is_alive()
            for exc in [*errors, sync_results[1]]:
                assert isinstance(exc, RemoteError), repr(exc)
                # in flight: "may have run"; sent after the drop: "cannot reach", or on a
                # WebSocket already known closed, that its sessions closed with it
                clear = ("cannot reach", "may have run", "closed its sessions with it")
                assert any(text in str(exc) for text in clear), str(exc)
            assert any(isinstance(exc, ReplyLost) for exc in errors)  # calls were in flight
            loop.run_until_complete(while_down(clients, envs, plan))
            with pytest.raises(ServerUnreachable, match="cannot reach"):
                sync_results[0].reset(seed=0)

            with served("llm/Math-v0", port=port):  # the same port, a fresh server
                loop.run_until_complete(after_restart(clients, envs, plan))
                with pytest.raises(RemoteError, match="No session"):
                    sync_results[0].reset(seed=0)
                fresh = make(url, "llm/Math-v0")
                fresh.reset(seed=3)
                assert fresh.step(plan[3][0])[1] == plan[3][1]
                fresh.close()
                sync_results[0].close()
                for client in clients.values():
                    loop.run_until_complete(client.aclose())
        finally:
            loop.close()


async def while_down(
    clients: dict[str, AsyncClient],
    envs: list[AsyncRemoteEnv],
    plan: dict[int, tuple[str, float]],
) -> None:
    """Calls on the old sessions with no server: refused at once (HTTP: after the retries of a
    call that never left, or, when the step went out on a kept-alive connection the dead server
    had not closed yet, the truthful "may have run" without a retry of the step; WebSocket: its
    connection is known closed)."""
    for env in envs[:2]:  # one of each transport
        http = env.client is clients["http"]
        down = "cannot reach|may have run on the server" if http else "closed its sessions"
        with pytest.raises(RemoteError, match=down):
            await env.step(plan[0][0])
    with pytest.raises(ServerUnreachable, match="cannot reach"):
        await clients["ws"].make("llm/Math-v0")


async def after_restart(
    clients: dict[str, AsyncClient],
    envs: list[AsyncRemoteEnv],
    plan: dict[int, tuple[str, float]],
) -> None:
    for env in envs[:2]:  # one of each transport
        gone = "No session" if env.client is clients["http"] else "closed its sessions"
        with pytest.raises(RemoteError, match=gone):
            await env.step(plan[0][0])
        with pytest.raises(RemoteError, match=gone):
            await env.get_state()
    for client in clients.values():
        env = await client.make("llm/Math-v0")
        await env.reset(seed=5)
        assert (await env.step(plan[5][0]))[1] == plan[5][1]
