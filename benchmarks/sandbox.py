"""Sandbox speed, side by side in one run: unisolated subprocess, `docker run`, and llmgym's sandboxes.

For a trivial program and for a 10-unit-test file (a candidate module plus a harness that
reports through the result channel), each method is measured three ways: latency of sequential
runs (p50/p99), throughput with as many runs in flight as there are cores, and the CPU time all
of its processes spent per run. Ratios are against the unisolated
``subprocess.run([python, "-c", ...])`` and against ``docker run`` per execution, measured here,
in the same run, the methods taking turns in several rounds so that a change of load on a shared
machine falls on all of them alike (absolute times there mean little; the load average is
printed with the table).

One more row is a reference, not a sandbox: a warm interpreter that forks a child per run and
nothing else (no isolation at all). It is the floor of every design that gives each run a
process of its own, which the sandbox must (all of a run's processes end with it, and no run
sees another's state); its ratio to the subprocess baseline bounds what any such sandbox can
reach on this machine.

CPU per run counts every process of the method (this one, its subprocesses, the zygote, the
runs; for the docker pool, its containers), measured by a cpuacct cgroup put around this process
(root only; "-" otherwise). It does not count kernel threads (a network namespace is torn down
by one) nor, for ``docker run``, the Docker daemon, containerd and runc. Unlike wall time, it
hardly depends on what else the machine runs.

    python benchmarks/sandbox.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _cpumeter import CpuMeter, cgroup_cpu

from llmgym.sandbox import BackendUnavailable, Limits, get_sandbox
from llmgym.sandbox.base import default_concurrency

TRIVIAL = "print(1)"
SOLUTION = "def add(a, b):\n    return a + b\n"
HARNESS = """
import json, os
out = os.fdopen(3, "w")
from solution import add
results = []
for i in range(10):
    try:
        results.append(add(i, i + 1) == 2 * i + 1)
    except Exception:
        results.append(False)
out.write(json.dumps(results))
out.close()
"""
INLINE_TESTS = SOLUTION + HARNESS.replace("from solution import add", "").replace(
    'out = os.fdopen(3, "w")', "import sys; out = sys.stdout"
)
LIMITS = Limits(wall_time_s=10, memory_mb=256)
SUBPROCESS = "subprocess.run (unisolated)"
DOCKER_RUN = "docker run per execution"
FORK_FLOOR = "bare fork of a warm interpreter (no isolation)"

# The reference floor of every design that gives each run a process of its own: a warm
# interpreter forks a child per request, the child execs the code with stdout on a pipe and
# leaves with os._exit (no interpreter teardown). No namespaces, no cgroups, no seccomp, no
# limits, no result checks: nothing a sandbox needs, so no sandbox that forks can beat it.
FORK_SERVER = r"""
import json, os, struct, sys  # json: preloaded, as the zygote preloads it
inp, out = sys.stdin.buffer, sys.stdout.buffer
def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = inp.read(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
while True:
    code = read_exact(struct.unpack(">I", read_exact(4))[0])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            sys.stdout = os.fdopen(w, "w")
            exec(compile(code, "main.py", "exec"), {"__name__": "__main__"})
            if not sys.stdout.closed:
                sys.stdout.flush()
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    reply = b"".join(chunks)
    out.write(struct.pack(">I", len(reply)) + reply)
    out.flush()
"""


class ForkServers:
    """One fork server per thread in flight (each serves one request at a time)."""

    def __init__(self, n: int) -> None:
        self.free: queue.SimpleQueue[subprocess.Popen[bytes]] = queue.SimpleQueue()
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            for _ in range(n)
        ]
        for p in self.procs:
            self.free.put(p)

    def run(self, code: str) -> bytes:
        proc = self.free.get()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            data = code.encode()
            proc.stdin.write(struct.pack(">I", len(data)) + data)
            proc.stdin.flush()
            (n,) = struct.unpack(">I", proc.stdout.read(4))
            return proc.stdout.read(n)
        finally:
            self.free.put(proc)

    def close(self) -> None:
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.close()
            p.wait()


def _containers_cpu(docker_sb: Any) -> float | None:
    """CPU seconds of the docker pool's containers (as the host's cgroups count them)."""
    total = 0.0
    for agent in list(docker_sb._all):
        cid = agent.container.id
        for path in (
            f"/sys/fs/cgroup/cpuacct/docker/{cid}",
            f"/sys/fs/cgroup/system.slice/docker-{cid}.scope",
            f"/sys/fs/cgroup/docker/{cid}",
        ):
            cpu = cgroup_cpu(path)
            if cpu is not None:
                total += cpu
                break
        else:
            return None
    return total


class Method:
    """One way of running a program, with what was measured of it so far."""

    def __init__(self, name: str, fn: Callable[[], object], extra_cpu: Callable[[], float | None]):
        self.name, self.fn, self.extra_cpu = name, fn, extra_cpu
        self.latencies: list[float] = []
        self.par_runs = 0
        self.par_time = 0.0
        self.cpu = 0.0
        self.cpu_runs = 0
        self.cpu_known = True


def measure(m: Method, seq: int, par: int, workers: int, meter: CpuMeter) -> None:
    def cpu_now() -> float | None:
        own = meter.seconds()
        extra = m.extra_cpu()
        return None if own is None or extra is None else own + extra

    m.fn()  # warm
    c0 = cpu_now()
    for _ in range(seq):
        t = time.perf_counter()
        m.fn()
        m.latencies.append(time.perf_counter() - t)
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: m.fn(), range(par)))
    m.par_time += time.perf_counter() - t
    m.par_runs += par
    c1 = cpu_now()
    if c0 is None or c1 is None:
        m.cpu_known = False
    else:
        m.cpu += c1 - c0
        m.cpu_runs += seq + par


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--rounds", type=int, default=3, help="turns each method takes")
    args = ap.parse_args()
    k = (0.3 if args.quick else 1.0) / args.rounds
    workers = default_concurrency()
    py = sys.executable
    meter = CpuMeter()
    load_before = os.getloadavg()
    forks = ForkServers(workers)
    local = get_sandbox("local")
    fresh = get_sandbox("local", fast_path=False)
    docker: Any = None
    docker_note = ""
    try:
        docker = get_sandbox("docker", pool_size=workers)
    except BackendUnavailable as exc:
        docker_note = f"skipped: {exc}"
    tables: dict[str, list[Method]] = {}
    try:
        for work, code in (("trivial", TRIVIAL), ("10 tests", INLINE_TESTS)):
            files = {"solution.py": SOLUTION} if work == "10 tests" else None
            prog = HARNESS if work == "10 tests" else TRIVIAL

            def sb_fn(sb: Any, prog: str = prog, files: Any = files) -> Callable[[], object]:
                def f() -> object:
                    res = sb.run(code=prog, files=files, limits=LIMITS)
                    assert res.ok, res
                    return res

                return f

            def sub(code: str = code) -> object:
                return subprocess.run([py, "-c", code], capture_output=True, check=True)

            def fork(code: str = code) -> object:
                out = forks.run(code)
                assert out, "the forked child printed nothing"
                return out

            none: Callable[[], float | None] = lambda: 0.0  # noqa: E731
            plan: list[tuple[Method, int, int]] = [
                (Method(SUBPROCESS, sub, none), 40, 40),
                (Method(FORK_FLOOR, fork, none), 200, 400),
                (Method("llmgym local, fast path", sb_fn(local), none), 200, 400),
                (Method("llmgym local, fresh interpreter", sb_fn(fresh), none), 40, 60),
            ]
            if docker is not None:
                cmd = ["docker", "run", "--rm", "--network", "none", docker.image]
                cmd += [docker.python, "-c", code]

                def drun(cmd: list[str] = cmd) -> object:
                    return subprocess.run(cmd, capture_output=True, check=True)

                def unknown() -> float | None:
                    return None  # the daemon's, containerd's and runc's CPU is not ours

                def pool_cpu(d: Any = docker) -> float | None:
                    return _containers_cpu(d)

                plan += [
                    (Method(DOCKER_RUN, drun, unknown), 10, 12),
                    (Method("llmgym docker pool", sb_fn(docker), pool_cpu), 60, 100),
                ]
            for _ in range(args.rounds):
                for m, seq, par in plan:
                    measure(m, max(2, int(seq * k)), max(workers, int(par * k)), workers, meter)
            tables[work] = [m for m, _, _ in plan]
    finally:
        forks.close()
        local.close()
        fresh.close()
        if docker is not None:
            docker.close()
        meter.close()
    load_after = os.getloadavg()

    print(
        f"\n{workers} runs in flight for throughput; latency = sequential runs; "
        f"{args.rounds} rounds, methods taking turns. Python {platform.python_version()}, "
        f"Linux {platform.release()}, {os.cpu_count()} CPUs; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after.\n"
    )
    order = [
        SUBPROCESS,
        DOCKER_RUN,
        FORK_FLOOR,
        "llmgym local, fast path",
        "llmgym local, fresh interpreter",
        "llmgym docker pool",
    ]
    print(
        "| workload | method | p50 ms | p99 ms | runs/s | x subprocess | x docker run "
        "| CPU ms/run | CPU x subprocess |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for work, methods in tables.items():
        by_name = {m.name: m for m in methods}
        rate = {m.name: m.par_runs / m.par_time for m in methods}
        cpu = {
            m.name: m.cpu / m.cpu_runs * 1e3 if m.cpu_known and m.cpu_runs else None
            for m in methods
        }
        for name in order:
            row = by_name.get(name)
            if row is None:
                print(f"| {work} | {name} | - | - | - | - | - | - | {docker_note} |")
                continue
            lat = sorted(row.latencies)
            p50 = statistics.median(lat) * 1e3
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3
            xs = rate[name] / rate[SUBPROCESS]
            xd = f"{rate[name] / rate[DOCKER_RUN]:.1f}x" if DOCKER_RUN in rate else "-"
            c = cpu[name]
            c_sub = cpu[SUBPROCESS]
            cpu_txt = f"{c:.1f}" if c is not None else "-"
            cx = f"{c_sub / c:.1f}x" if c is not None and c_sub is not None else "-"
            print(
                f"| {work} | {name} | {p50:.1f} | {p99:.1f} | {rate[name]:.1f} | {xs:.1f}x "
                f"| {xd} | {cpu_txt} | {cx} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
