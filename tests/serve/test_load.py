"""Load on loopback: 10,000 episodes from 64 concurrent clients, none lost, doubled or mixed up.

One ``llmgym serve`` (the real command, a subprocess) serves Math-v0, ToolCalling-v0, LongDoc-v0
(small documents) and Coding-v0. 64 asyncio clients, each its own :class:`AsyncClient` (a
quarter over HTTP, a quarter over WebSocket, a quarter over each with ``step_batch``), play
four episodes at a time on sessions they reuse, each episode the oracle's actions or a fixed
wrong answer. Every step's observation (hashed), reward, termination and ``is_success`` must
equal the same (env, seed, actions) episode played in this process, every episode must come
back once, the server's step counter must equal the steps sent (none run twice), and every
session must be closed at the end.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import pytest

import llmgym  # noqa: F401  (registers the envs)
from llmgym import error
from llmgym.remote import AsyncClient, AsyncRemoteEnv

EPISODES = 10_000
CLIENTS = 64
WAVE = 4
"""Episodes each client plays at once."""
LONGDOC = {"length_range": [256, 1024]}
MIX = [
    ("llm/Math-v0", 55),
    ("llm/ToolCalling-v0", 20),
    ("llm/LongDoc-v0", 23),
    ("llm/Coding-v0", 2),
]
"""Env ids and their share of the episodes, in percent."""
WRONG = "I am not sure."


@contextmanager
def served(*args: str, port: int = 0) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``llmgym serve ARGS --port PORT`` as a subprocess; yields its URL and the process."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmgym",
                "serve",
                *args,
                "--port",
                str(port),
                "--openenv",
                "off",
            ],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LLMGYM_SERVE_TOKEN": ""},
        )
        try:
            yield wait_listening(out, proc), proc
        finally:
            proc.send_signal(
                signal.SIGINT
            )  # on SIGTERM uvicorn dies by the signal, skipping atexit
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=60)


def wait_listening(out: Any, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> str:
    """The URL the server prints once its socket is bound, then wait for /health to answer."""
    deadline = time.monotonic() + timeout_s
    url = None
    while url is None:
        assert proc.poll() is None, "llmgym serve exited"
        assert time.monotonic() < deadline, "llmgym serve printed no URL"
        out.seek(0)
        match = re.search(rb"listening on (http://\S+)", out.read())
        url = match.group(1).decode() if match else None
        time.sleep(0.05)
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
                if response.status == 200:
                    return url
        except OSError:
            assert time.monotonic() < deadline, "llmgym serve never answered /health"
            time.sleep(0.05)


def plan(episodes: int) -> list[tuple[str, int, str]]:
    """(env id, seed, policy) of each episode: the mix, seeds distinct, oracle or wrong."""
    ids = [env_id for env_id, share in MIX for _ in range(share)]
    return [(ids[i % len(ids)], i, "wrong" if i % 3 == 0 else "oracle") for i in range(episodes)]


def kwargs_of(env_id: str) -> dict[str, Any]:
    return LONGDOC if env_id == "llm/LongDoc-v0" else {}


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def in_process(jobs: list[tuple[str, int, str]]) -> dict[tuple, tuple[list[Any], list[tuple]]]:
    """Each episode played here: its actions and what each reset and step gave."""
    envs = {env_id: gym.make(env_id, **kwargs_of(env_id)) for env_id, _ in MIX}
    out = {}
    for job in jobs:
        env_id, seed, policy = job
        env = envs[env_id]
        try:
            obs, info = env.reset(seed=seed)
        except Exception as exc:  # an env's own bug (8 ToolCalling seeds in 10,000): the
            out[job] = ([], [("error", type(exc).__name__)])  # server must say the same
            continue
        actions, trace = [], [(digest(obs), info["task_id"])]
        while True:
            action = env.unwrapped.oracle_action() if policy == "oracle" else WRONG
            obs, reward, terminated, truncated, info = env.step(action)
            actions.append(action)
            trace.append((digest(obs), float(reward), terminated, truncated, info["is_success"]))
            if terminated or truncated:
                break
        out[job] = (actions, trace)
    for env in envs.values():
        env.close()
    return out


async def client_plays(
    k: int, url: str, jobs: list[tuple], actions: dict[tuple, list[Any]]
) -> list[tuple[tuple, list[tuple]]]:
    """Client ``k``: ``WAVE`` episodes at a time on sessions it reuses (its kind: k % 4)."""
    transport = "ws" if k % 2 else "http"
    batched = k % 4 >= 2
    results = []
    async with AsyncClient(url, transport=transport, max_connections=2, timeout_s=120) as client:
        idle: dict[str, list[AsyncRemoteEnv]] = {}

        async def session(env_id: str) -> AsyncRemoteEnv:
            if idle.get(env_id):
                return idle[env_id].pop()
            return await client.make(env_id, **kwargs_of(env_id))

        for start in range(0, len(jobs), WAVE):
            wave = jobs[start : start + WAVE]
            envs = [await session(job[0]) for job in wave]
            resets = await asyncio.gather(
                *(e.reset(seed=j[1]) for e, j in zip(envs, wave, strict=True)),
                return_exceptions=True,
            )
            traces = [
                [error_of(r) if isinstance(r, BaseException) else (digest(r[0]), r[1]["task_id"])]
                for r in resets
            ]
            turn = 0
            while live := [i for i in range(len(wave)) if turn < len(actions[wave[i]])]:
                steps = [(envs[i], actions[wave[i]][turn]) for i in live]
                if batched:
                    stepped = await client.step_batch(steps)
                else:
                    stepped = await asyncio.gather(*(env.step(a) for env, a in steps))
                for i, (obs, reward, terminated, truncated, info) in zip(
                    live, stepped, strict=True
                ):  # type: ignore[misc]
                    traces[i].append(
                        (digest(obs), reward, terminated, truncated, info["is_success"])
                    )
                turn += 1
            results += list(zip(wave, traces, strict=True))
            for env, job in zip(envs, wave, strict=True):
                idle.setdefault(job[0], []).append(env)
    return results


def error_of(exc: BaseException) -> tuple[str, str]:
    """("error", the class the env raised): the server's 500s come back as llmgym's Error
    whose message starts with the original class name."""
    if type(exc) is error.Error:
        return ("error", str(exc).split(":", 1)[0])
    return ("error", type(exc).__name__)


def served_steps(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(v) for v in re.findall(r"^llmgym_serve_steps_total\{[^}]*\} (\S+)$", text, re.M)
    )


def health_sessions(url: str) -> int:
    import json

    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        return int(json.loads(response.read())["sessions"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_10000_episodes_from_64_clients_match_in_process() -> None:
    jobs = plan(EPISODES)
    env_ids = [env_id for env_id, _ in MIX]
    with served(*env_ids, "--max-sessions", "2048", "--workers", "16") as (url, _):
        start = time.monotonic()
        expected = in_process(jobs)  # while the server starts
        local_s = time.monotonic() - start
        actions = {job: expected[job][0] for job in jobs}

        async def everyone() -> list[list[tuple]]:
            return await asyncio.gather(
                *(client_plays(k, url, jobs[k::CLIENTS], actions) for k in range(CLIENTS))
            )

        start = time.monotonic()
        results = [r for part in asyncio.run(everyone()) for r in part]
        served_s = time.monotonic() - start
        print(f"\n{EPISODES} episodes: in-process {local_s:.1f} s, served {served_s:.1f} s")
        assert len(results) == EPISODES
        assert len({job for job, _ in results}) == EPISODES  # none lost, none twice
        wrong = [job for job, trace in results if trace != expected[job][1]]
        assert wrong == [], f"{len(wrong)} episodes differ from in-process, e.g. {wrong[:3]}"
        assert served_steps(url) == sum(len(a) for a in actions.values())  # none run twice
        deadline = time.monotonic() + 30
        while health_sessions(url) and time.monotonic() < deadline:
            time.sleep(0.1)  # a WebSocket's sessions close as the server sees it go
        assert health_sessions(url) == 0
