"""Served envs beside the same env in-process and beside an OpenEnv server, in one run.

Math-v0 (a cheap step: ~0.2 ms of grading) and Coding-v0 (a sandboxed step: the oracle's
program against the task's tests), each episode one reset and one step with the oracle's action
(computed here beforehand, untimed), the reward checked against the in-process one. Rows:

- ``in-process``: ``gym.make`` in this process, ``--workers`` threads each stepping its own env,
  and ``in-process xN`` with ``--concurrency`` threads (a sandboxed step waits on its run, so
  more episodes at once can help); each target is taken against the better of the two;
- ``llmgym sync``: ``llmgym.remote.make`` (HTTP/1.1, one kept-alive connection per env),
  ``--workers`` threads;
- ``llmgym async http``: ``llmgym.remote.AsyncClient`` over HTTP/1.1, ``--concurrency``
  episodes in flight (one session each, as many connections);
- ``llmgym async http batch``: the same sessions stepped together by ``step_batch`` (one
  request per round of ``--concurrency`` steps), resets concurrent;
- ``llmgym async ws``: ``AsyncClient(transport="ws")``, ``--concurrency`` episodes over 4
  WebSocket connections;
- ``openenv``: an OpenEnv server written as OpenEnv's template writes one (an ``Environment``
  subclass wrapping ``gym.make(ENV_ID)``, Action/Observation pydantic models, openenv-core's
  ``create_app`` run by ``uvicorn.run`` with its defaults, ``max_concurrent_envs`` =
  concurrency), driven by OpenEnv's own ``GenericEnvClient`` (a WebSocket per session),
  ``--concurrency`` sessions.

The llmgym rows share one ``llmgym serve`` process (both envs, ``--openenv off``, defaults
otherwise); each OpenEnv row has its own server process (one env per app, as OpenEnv serves).
Every server runs in a subprocess of its own on loopback, so client and server use a core
each.

Measures per row: steps/s on the wall clock (each step with its reset), p50/p99 latency of
the step call, and CPU: this process (the client, or the env for ``in-process``) and the
server's process with everything it starts, each in a cpuacct cgroup (root; else getrusage and
/proc, which miss the sandbox's unreaped runs), from which steps per CPU-second = throughput
per core if the cores were kept busy; ``all`` counts client + server, ``server`` the server
alone. Rows take turns over ``--rounds`` rounds (medians shown; the latency percentiles pool
every round) so a change of load on a shared machine falls on all alike.

Run: python benchmarks/serve.py [--seconds 3] [--rounds 3] [--concurrency 32] [--workers 2]
         [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from _cpumeter import CpuMeter, cgroup_cpu

import llmgym  # noqa: F401  (registers the envs)

ENVS = {"Math-v0": "llm/Math-v0", "Coding-v0": "llm/Coding-v0"}
WS_CONNECTIONS = 4


# --- the OpenEnv server, as an OpenEnv user writes one (this file run with --openenv-server) ---


def openenv_server(env_id: str, port: int, sessions: int) -> None:
    import gymnasium as gym
    import uvicorn
    from openenv.core.env_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field

    class LLMAction(Action):
        content: str = ""

    class LLMObservation(Observation):
        text: str = ""
        info: dict[str, Any] = Field(default_factory=dict)

    class LLMGymEnvironment(Environment):  # type: ignore[type-arg]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.env = gym.make(env_id)
            self._state = State()

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
            obs, info = self.env.reset(seed=seed)
            self._state = State(episode_id=episode_id, step_count=0)
            return LLMObservation(text=obs, info=json.loads(json.dumps(info, default=str)))

        def step(self, action: LLMAction, timeout_s: float | None = None, **kw: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action.content)
            self._state.step_count += 1
            return LLMObservation(
                text=obs,
                info=json.loads(json.dumps(info, default=str)),
                reward=float(reward),
                done=bool(terminated or truncated),
            )

        @property
        def state(self) -> State:
            return self._state

        def close(self) -> None:
            self.env.close()

    app = create_app(
        LLMGymEnvironment, LLMAction, LLMObservation, env_name=env_id, max_concurrent_envs=sessions
    )
    uvicorn.run(app, host="127.0.0.1", port=port)


# --- processes and their CPU ----------------------------------------------------------------


METER: CpuMeter | None = None


def own_cpu() -> float:
    """CPU seconds of this process and what it started (servers aside: they have their own)."""
    seconds = METER.seconds() if METER is not None else None
    if seconds is not None:
        return seconds
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A server in a subprocess, moved at once into a cgroup of its own (its children follow)."""

    def __init__(self, name: str, argv: list[str], port: int):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.cgroup = None
        if METER is not None and METER.path is not None:
            path = f"{METER.path}-{name}"
            try:
                os.makedirs(path, exist_ok=True)
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(self.proc.pid))
                self.cgroup = path
            except OSError:
                pass

    def wait_ready(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc.poll() is None, f"server exited: {self.proc.args}"
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def cpu(self) -> float:
        if self.cgroup is not None:
            seconds = cgroup_cpu(self.cgroup)
            if seconds is not None:
                return seconds
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # uvicorn re-raises SIGTERM and skips atexit
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=60)
        if self.cgroup is not None:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass


# --- rows -----------------------------------------------------------------------------------


@dataclass
class Sample:
    steps: int = 0
    elapsed: float = 0.0
    failures: int = 0
    cpu_all: float = 0.0
    cpu_server: float = 0.0
    latencies: list[float] = field(default_factory=list)


Task = tuple[int, str, float]  # seed, oracle action, its in-process reward


def oracle_tasks(env_id: str, n: int) -> list[Task]:
    import gymnasium as gym

    env = gym.make(env_id)
    out = []
    for seed in range(n):
        env.reset(seed=seed)
        action = env.unwrapped.oracle_action()
        out.append((seed, action, float(env.step(action)[1])))
    env.close()
    return out


class ThreadRow:
    """``workers`` threads, each with its own env (in-process, or the blocking client)."""

    def __init__(self, name: str, make: Any, tasks: list[Task], workers: int, config: str):
        self.name, self.tasks, self.config = name, tasks, config
        self.envs = [make() for _ in range(workers)]

    def run(self, seconds: float) -> Sample:
        sample, lock = Sample(), threading.Lock()
        stop = time.perf_counter() + seconds
        n = len(self.envs)

        def loop(k: int) -> None:
            env, i, lat, steps, fails = self.envs[k], k, [], 0, 0
            while time.perf_counter() < stop:
                seed, action, reward = self.tasks[i % len(self.tasks)]
                env.reset(seed=seed)
                t = time.perf_counter()
                got = env.step(action)[1]
                lat.append(time.perf_counter() - t)
                steps, fails, i = steps + 1, fails + (float(got) != reward), i + n
            with lock:
                sample.latencies += lat
                sample.steps += steps
                sample.failures += fails

        start = time.perf_counter()
        threads = [threading.Thread(target=loop, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sample.elapsed = time.perf_counter() - start
        return sample

    def close(self) -> None:
        for env in self.envs:
            env.close()


class AsyncRow:
    """``concurrency`` episodes in flight from one event loop (kept between rounds)."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, tasks: list[Task], config: str):
        self.name, self.loop, self.tasks, self.config = name, loop, tasks, config

    def run(self, seconds: float) -> Sample:
        return self.loop.run_until_complete(self._run(seconds))

    async def _run(self, seconds: float) -> Sample:
        sample, stop, n = Sample(), time.perf_counter() + seconds, len(self.envs)

        async def worker(k: int) -> None:
            i = k
            while time.perf_counter() < stop:
                seed, action, reward = self.tasks[i % len(self.tasks)]
                await self.reset(self.envs[k], seed)
                t = time.perf_counter()
                got = await self.step(self.envs[k], action)
                sample.latencies.append(time.perf_counter() - t)
                sample.steps += 1
                sample.failures += got != reward
                i += n

        start = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(n)))
        sample.elapsed = time.perf_counter() - start
        return sample


class LlmgymAsync(AsyncRow):
    def __init__(
        self, name: str, loop: Any, tasks: list[Task], url: str, env_id: str, n: int, **kw: Any
    ):
        from llmgym.remote import AsyncClient

        options = ", ".join(f"{k}={v}" for k, v in kw.items())
        batch = ", stepped by step_batch (latency: the whole batch)" if "batch" in name else ""
        super().__init__(name, loop, tasks, f"AsyncClient({options}), {n} sessions{batch}")
        self.client = AsyncClient(url, **kw)
        self.envs = loop.run_until_complete(
            asyncio.gather(*(self.client.make(env_id) for _ in range(n)))
        )

    async def reset(self, env: Any, seed: int) -> None:
        await env.reset(seed=seed)

    async def step(self, env: Any, action: str) -> float:
        return float((await env.step(action))[1])

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())


class LlmgymBatch(LlmgymAsync):
    """Every session reset together, then stepped in one ``step_batch`` request, per round."""

    async def _run(self, seconds: float) -> Sample:
        sample, stop, n, i = Sample(), time.perf_counter() + seconds, len(self.envs), 0
        start = time.perf_counter()
        while time.perf_counter() < stop:
            round_tasks = [self.tasks[(i + k) % len(self.tasks)] for k in range(n)]
            pairs = list(zip(self.envs, round_tasks, strict=True))
            await asyncio.gather(*(env.reset(seed=task[0]) for env, task in pairs))
            start_batch = time.perf_counter()
            results = await self.client.step_batch([(env, task[1]) for env, task in pairs])
            sample.latencies.append(time.perf_counter() - start_batch)
            sample.steps += n
            for result, task in zip(results, round_tasks, strict=True):
                sample.failures += result[1] != task[2]  # type: ignore[index]
            i += n
        sample.elapsed = time.perf_counter() - start
        return sample


class OpenEnvRow(AsyncRow):
    def __init__(self, name: str, loop: Any, tasks: list[Task], url: str, n: int):
        from openenv.core.generic_client import GenericEnvClient

        super().__init__(name, loop, tasks, f"GenericEnvClient (a WebSocket each), {n} sessions")
        self.envs = [GenericEnvClient(base_url=url) for _ in range(n)]
        loop.run_until_complete(asyncio.gather(*(e.connect() for e in self.envs)))

    async def reset(self, env: Any, seed: int) -> None:
        await env.reset(seed=seed)

    async def step(self, env: Any, action: str) -> float:
        return float((await env.step({"content": action})).reward)

    def close(self) -> None:
        self.loop.run_until_complete(asyncio.gather(*(e.close() for e in self.envs)))


def measure(row: Any, server: ServerProcess | None, seconds: float) -> Sample:
    cpu0, srv0 = own_cpu(), server.cpu() if server else 0.0
    sample = row.run(seconds)
    sample.cpu_server = (server.cpu() - srv0) if server else 0.0
    sample.cpu_all = own_cpu() - cpu0 + sample.cpu_server
    return sample


# --- the run --------------------------------------------------------------------------------


def build_rows(
    env_name: str, env_id: str, tasks: list[Task], args: Any, servers: dict, loop: Any
) -> list[tuple[Any, Any]]:
    import gymnasium as gym

    from llmgym import remote

    url, n = servers["llmgym"].url, args.concurrency
    return [
        (ThreadRow("in-process", lambda: gym.make(env_id), tasks, args.workers, f"gym.make, {args.workers} threads"), None),
        (ThreadRow(f"in-process x{n}", lambda: gym.make(env_id), tasks, n, f"gym.make, {n} threads (as many episodes at once as the async rows)"), None),
        (ThreadRow("llmgym sync", lambda: remote.make(url, env_id), tasks, args.workers, f"remote.make (HTTP/1.1), {args.workers} threads"), servers["llmgym"]),
        (LlmgymAsync("llmgym async http", loop, tasks, url, env_id, n, max_connections=n), servers["llmgym"]),
        (LlmgymBatch("llmgym async http batch", loop, tasks, url, env_id, n, max_connections=4), servers["llmgym"]),
        (LlmgymAsync("llmgym async ws", loop, tasks, url, env_id, n, transport="ws", max_connections=WS_CONNECTIONS), servers["llmgym"]),
        (OpenEnvRow("openenv", loop, tasks, servers[env_name].url, n), servers[env_name]),
    ]  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(
    env_name: str, rows: list[tuple[Any, Any]], samples: dict[str, list[Sample]]
) -> dict[str, dict[str, float]]:
    print(f"\n{env_name}: one reset + one step per episode, oracle actions\n")
    print(
        "| row | steps/s (range) | p50 ms | p99 ms | CPU ms/step all (server) | steps per CPU-s all | steps per server CPU-s | wrong |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    figures = {}
    for row, _ in rows:
        runs = samples[row.name]
        rates = [s.steps / s.elapsed for s in runs]
        steps = sum(s.steps for s in runs)
        cpu_all = statistics.median(s.cpu_all / max(s.steps, 1) for s in runs)
        cpu_srv = statistics.median(s.cpu_server / max(s.steps, 1) for s in runs)
        lat = [x for s in runs for x in s.latencies]
        figures[row.name] = {
            "rate": statistics.median(rates),
            "per_cpu": 1 / cpu_all if cpu_all else 0.0,
            "per_server_cpu": 1 / cpu_srv if cpu_srv else 0.0,
        }
        srv = f" ({1e3 * cpu_srv:.2f})" if cpu_srv else ""
        per_srv = f"{1 / cpu_srv:,.0f}" if cpu_srv else "-"
        print(
            f"| {row.name} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) "
            f"| {1e3 * percentile(lat, 0.5):.2f} | {1e3 * percentile(lat, 0.99):.2f} "
            f"| {1e3 * cpu_all:.2f}{srv} | {1 / cpu_all:,.0f} | {per_srv} "
            f"| {sum(s.failures for s in runs)}/{steps} |"
        )  # fmt: skip
    print("\nConfigurations:")
    for row, _ in rows:
        print(f"- {row.name}: {row.config}")
    return figures


def best(rows: dict[str, dict[str, float]], key: str) -> dict[str, float]:
    """The in-process row best by ``key`` (threads as many as cores, or as episodes in flight)."""
    return max((v for k, v in rows.items() if k.startswith("in-process")), key=lambda v: v[key])


def ratios(figures: dict[str, dict[str, dict[str, float]]]) -> None:
    print("\nTargets (issue 18), from the medians above, against the better in-process row:\n")
    math, coding = figures.get("Math-v0"), figures.get("Coding-v0")
    if math:
        base, peer = best(math, "per_cpu"), math["openenv"]
        for name in (
            "llmgym async http",
            "llmgym async http batch",
            "llmgym async ws",
            "llmgym sync",
        ):
            row = math[name]
            print(
                f"- Math-v0 {name}: per CPU-s {row['per_cpu'] / base['per_cpu']:.2f}x in-process "
                f"(server CPU alone: {row['per_server_cpu'] / base['per_cpu']:.2f}x; target >= 0.5), "
                f"{row['per_cpu'] / peer['per_cpu']:.2f}x OpenEnv "
                f"(server alone vs OpenEnv's server: {row['per_server_cpu'] / peer['per_server_cpu']:.2f}x; target >= 2)"
            )  # fmt: skip
    if coding:
        base = best(coding, "rate")
        for name in (
            "llmgym async http",
            "llmgym async http batch",
            "llmgym async ws",
            "llmgym sync",
            "openenv",
        ):
            print(
                f"- Coding-v0 {name}: steps/s {coding[name]['rate'] / base['rate']:.2f}x in-process (target >= 0.9)"
            )


def main() -> None:
    global METER
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="timed span of each row, each round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=32, help="episodes in flight (async rows)"
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="threads (thread rows)"
    )
    parser.add_argument("--envs", default=",".join(ENVS), help="Math-v0,Coding-v0")
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s: a smoke run")
    parser.add_argument(
        "--openenv-server", nargs=3, metavar=("ENV_ID", "PORT", "SESSIONS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.openenv_server:
        env_id, port, sessions = args.openenv_server
        openenv_server(env_id, int(port), int(sessions))
        return
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    METER = CpuMeter()
    names = [n for n in args.envs.split(",") if n]
    start = time.perf_counter()
    servers: dict[str, ServerProcess] = {}
    port = free_port()
    servers["llmgym"] = ServerProcess("llmgym", [sys.executable, "-m", "llmgym", "serve", *(ENVS[n] for n in names), "--port", str(port), "--openenv", "off", "--max-sessions", str(4 * args.concurrency + 64)], port)  # fmt: skip
    for name in names:
        port = free_port()
        argv = [
            sys.executable,
            os.path.abspath(__file__),
            "--openenv-server",
            ENVS[name],
            str(port),
            str(args.concurrency + 8),
        ]
        servers[name] = ServerProcess(f"openenv-{name}", argv, port)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # the rows gather their sessions on it
    try:
        tasks = {name: oracle_tasks(ENVS[name], 200 if name == "Math-v0" else 64) for name in names}
        for server in servers.values():
            server.wait_ready()
        print(
            f"benchmarks/serve.py: {args.rounds} rounds of {args.seconds:g} s per row, rows taking "
            f"turns; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; CPU from "
            f"{'cgroups' if METER.path else 'getrusage and /proc (sandbox runs partly missed)'}"
        )
        figures = {}
        for name in names:
            rows = build_rows(name, ENVS[name], tasks[name], args, servers, loop)
            for row, server in rows:
                measure(row, server, min(0.5, args.seconds))  # warm-up: connections, caches
            samples: dict[str, list[Sample]] = {row.name: [] for row, _ in rows}
            for _ in range(args.rounds):
                for row, server in rows:
                    samples[row.name].append(measure(row, server, args.seconds))
            figures[name] = report(name, rows, samples)
            for row, _ in rows:
                row.close()
        ratios(figures)
        print(
            f"\nload average after: {os.getloadavg()[0]:.2f}; wall {time.perf_counter() - start:.0f} s"
        )
    finally:
        loop.close()
        for server in servers.values():
            server.stop()
        METER.close()


if __name__ == "__main__":
    main()
