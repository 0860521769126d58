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
reach on this machine, and every row is also given as a ratio to it ("x floor").

CPU per run counts every process of the method (this one, its subprocesses, the zygote, the
runs; for the docker pool, its containers), measured by a cpuacct cgroup put around this process
(root only; "-" otherwise). It does not count kernel threads (a network namespace is torn down
by one) nor, for ``docker run``, the Docker daemon, containerd and runc. Unlike wall time, it
hardly depends on what else the machine runs.

Two more tables put the local fast path beside the floor alone:

- by runs in flight (``--sweep``, default 1, 2, 4, 8): throughput and CPU per run of both,
  taking turns, and their ratios (the targets: >= 0.6x the floor's throughput, CPU per run
  <= 1.5x the floor's, p99 <= 2x p50 one run at a time);
- what each step of a run's isolation costs (``--steps``): each step done alone, many times, in
  a fork of an interpreter built as the zygote is (same script, same preloaded modules, inside
  the same kind of read-only root), its CPU measured precisely (the child's whole CPU from
  ``wait4``, its exit and namespace teardown included, less that of a child that does nothing),
  and the cgroup steps timed where they happen; beside each, its share of the fast path's CPU
  per run measured in the same run. What no step covers (this process's supervision, the
  messages, the zygote's bookkeeping, Python's copy-on-write faults) is the rest.

    python benchmarks/sandbox.py [--quick] [--rounds N] [--tables main,sweep,steps] [--sweep 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
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
from llmgym.sandbox import local as local_backend
from llmgym.sandbox._cgroup import CgroupManager
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


# ----------------------------------------------------------------------------------------------
# The fast path beside the floor, by runs in flight
# ----------------------------------------------------------------------------------------------


def sweep(levels: list[int], rounds: int, k: float, meter: CpuMeter) -> list[str]:
    """Rows of the table of the fast path beside the floor at each number of runs in flight."""
    forks = ForkServers(max(levels))
    local = get_sandbox("local")
    try:

        def floor() -> object:
            out = forks.run(TRIVIAL)
            assert out, "the forked child printed nothing"
            return out

        def fast() -> object:
            res = local.run(code=TRIVIAL, limits=LIMITS)
            assert res.ok, res
            return res

        got: dict[tuple[str, int], Method] = {}
        for r in range(rounds):
            for n in levels:
                pair = [("floor", floor), ("fast path", fast)]
                for name, fn in pair if r % 2 == 0 else pair[::-1]:
                    m = got.setdefault((name, n), Method(name, fn, lambda: 0.0))
                    seq = max(2, int(300 * k)) if n == 1 else 0
                    measure(m, seq, max(n, int(400 * k)), n, meter)
    finally:
        forks.close()
        local.close()
    rows = [
        "| runs in flight | floor runs/s | fast path runs/s | x floor | floor CPU ms/run "
        "| fast path CPU ms/run | x floor |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in levels:
        f, p = got[("floor", n)], got[("fast path", n)]
        fr, pr = f.par_runs / f.par_time, p.par_runs / p.par_time
        if f.cpu_known and p.cpu_known:
            fc, pc = f.cpu / f.cpu_runs * 1e3, p.cpu / p.cpu_runs * 1e3
            cpu = f"| {fc:.2f} | {pc:.2f} | {pc / fc:.2f}x |"
        else:
            cpu = "| - | - | - |"
        rows.append(f"| {n} | {fr:.1f} | {pr:.1f} | {pr / fr:.2f}x {cpu}")
    for name in ("floor", "fast path"):
        lat = sorted(got[(name, 1)].latencies) if 1 in levels else []
        if lat:
            p50 = statistics.median(lat) * 1e3
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3
            rows.append(
                f"\n{name}, one run at a time ({len(lat)} runs): p50 {p50:.2f} ms, "
                f"p99 {p99:.2f} ms, p99/p50 {p99 / p50:.1f}x"
            )
    return rows


# ----------------------------------------------------------------------------------------------
# What each step of a run's isolation costs
# ----------------------------------------------------------------------------------------------

# Runs as root in a root built as the zygote builds its own (``enter_sandbox``), with the
# zygote's script and preloaded modules, so that a fork of it is a fork of a zygote. For each
# request "STEP N" it does STEP N times, each in a fresh fork (but "pidns+init", done here as
# the zygote's init spawner does it), and answers the mean CPU in nanoseconds of: the fork in
# this process, the whole child (wait4: its fork return, the step, its exit and teardown), the
# step itself (the child's thread clock around it).
STEPPER = r"""
import gc, json, mmap, os, signal, struct, sys, time
cfg = json.loads(sys.argv[1])
sys.path.insert(0, cfg.pop("zygote_dir"))
import _zygote as Z
sys.path.pop(0)
Z.enter_sandbox(cfg)
Z._preload(cfg["preload"])
Z._drop_bounding_set()
gc.collect()
gc.freeze()
own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
shared = mmap.mmap(-1, 8)
clock = time.thread_time_ns
INIT = next(p for p in (Z.INIT_PATH, *Z._SLEEP) if os.access(p, os.X_OK))
TMP_OPTS = "size=64m,mode=1777,nr_inodes=16k"

def tmpfs():
    for point in ("/tmp", "/dev/shm"):
        Z.mount("tmpfs", point, "tmpfs", Z.MS_NOSUID | Z.MS_NODEV, TMP_OPTS)
    Z._resize_tmp(256)

def seccomp():
    Z.prctl(Z.PR_SET_NO_NEW_PRIVS, 1)
    Z._SECCOMP.install()

new_mnt = lambda: Z.unshare(Z.CLONE_NEWNS)
STEPS = {  # name: (untimed setup in the child, the timed step)
    "nothing": (None, lambda: None),
    "mnt": (None, new_mnt),
    "ipc": (None, lambda: Z.unshare(Z.CLONE_NEWIPC)),
    "net": (None, lambda: Z.unshare(Z.CLONE_NEWNET)),
    "mnt+tmpfs": (new_mnt, tmpfs),
    "mnt+proc": (new_mnt, lambda: Z.mount("proc", "/proc", "proc", Z.MS_NOSUID | Z.MS_NODEV | Z.MS_NOEXEC)),
    "privileges": (None, lambda: Z._drop_privileges(cfg)),
    "seccomp": (None, seccomp),
}

def forked(name):
    setup, step = STEPS[name]
    t0 = clock()
    pid = os.fork()
    if pid == 0:
        try:
            if setup is not None:
                setup()
            a = clock()
            step()
            shared[:8] = struct.pack("q", clock() - a)
        finally:
            os._exit(0)
    t1 = clock()
    _, _, ru = os.wait4(pid, 0)
    return t1 - t0, round((ru.ru_utime + ru.ru_stime) * 1e9), struct.unpack("q", shared[:8])[0]

def pidns_init():
    t0 = clock()
    Z.unshare(Z.CLONE_NEWPID)
    try:
        pid = os.posix_spawn(INIT, [INIT, Z._FOREVER], {}, setsid=True, file_actions=Z._NULL_STDIO)
    finally:
        Z.setns(own_pidns, Z.CLONE_NEWPID)
    fd = os.pidfd_open(pid)
    t1 = clock()
    signal.pidfd_send_signal(fd, signal.SIGKILL)
    _, _, ru = os.wait4(pid, 0)
    os.close(fd)
    return t1 - t0, round((ru.ru_utime + ru.ru_stime) * 1e9), 0

for line in sys.stdin:
    name, n = line.split()
    total = [0, 0, 0]
    for _ in range(int(n)):
        got = pidns_init() if name == "pidns+init" else forked(name)
        total = [a + b for a, b in zip(total, got)]
    print(json.dumps([t / int(n) for t in total]), flush=True)
"""

STEP_ROWS = [
    # (label, how it is computed from the measured parts)
    ("fork of the zygote and the child's exit (what the floor pays too)", "fork"),
    ("mount namespace (a copy of the zygote's mounts, torn down at the end)", "mnt"),
    ("IPC namespace", "ipc"),
    ("network namespace (its teardown by a kernel thread not counted)", "net"),
    ("private /tmp and /dev/shm (two tmpfs, sized for the run)", "tmpfs"),
    ("/proc of the run's pid namespace", "proc"),
    ("pid namespace and its init (spawned, killed)", "pidns+init"),
    ("privileges dropped (groups, gid, uid 65534, no_new_privs)", "privileges"),
    ("seccomp filter installed", "seccomp"),
    ("run cgroups made: memory, pids, cpuacct (v1), limits written", "cg_make"),
    ("the program joins them", "cg_join"),
    ("counters read (CPU, peak memory)", "cg_read"),
    ("run cgroups removed", "cg_remove"),
]


def step_costs(n: int, rounds: int) -> dict[str, float]:
    """Microseconds of CPU per run of each step (keys of ``STEP_ROWS``)."""
    probe = local_backend.LocalSandbox(zygotes=1)
    cfg = dict(probe._config, network=False)
    probe.close()
    cfg["zygote_dir"] = os.path.dirname(local_backend.ZYGOTE_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, "-E", "-s", "-B", "-c", STEPPER, json.dumps(cfg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    names = ["nothing", "mnt", "ipc", "net", "mnt+tmpfs", "mnt+proc", "privileges", "seccomp"]
    names.append("pidns+init")
    got: dict[str, list[list[float]]] = {name: [] for name in names}
    cg: dict[str, list[float]] = {"cg_make": [], "cg_join": [], "cg_read": [], "cg_remove": []}
    manager = CgroupManager()
    try:
        for r in range(rounds):
            order = names[:]
            random.Random(r).shuffle(order)
            for name in order:
                proc.stdin.write(f"{name} {n}\n")
                proc.stdin.flush()
                got[name].append(json.loads(proc.stdout.readline()))
            if manager.available:
                for key, value in _cgroup_steps(manager, n).items():
                    cg[key].append(value)
    finally:
        proc.stdin.close()
        proc.wait()
        manager.close()

    def extra(name: str, base: str) -> float:
        """What a child doing ``name`` costs more than one doing ``base`` (its whole CPU, fork
        return and exit included): the median over rounds of the difference in each round,
        so that a change of load between rounds cancels out."""
        pairs = zip(got[name], got[base], strict=True)
        return statistics.median(a[1] - b[1] for a, b in pairs) / 1e3

    out = {
        "fork": statistics.median(g[0] + g[1] for g in got["nothing"]) / 1e3,
        "mnt": extra("mnt", "nothing"),
        "ipc": extra("ipc", "nothing"),
        "net": extra("net", "nothing"),
        "tmpfs": extra("mnt+tmpfs", "mnt"),
        "proc": extra("mnt+proc", "mnt"),
        "pidns+init": statistics.median(g[0] + g[1] for g in got["pidns+init"]) / 1e3,
        "privileges": extra("privileges", "nothing"),
        "seccomp": extra("seccomp", "nothing"),
    }
    for key, values in cg.items():
        if values:
            out[key] = statistics.median(values)
    return out


def _cgroup_steps(manager: CgroupManager, n: int) -> dict[str, float]:
    """Microseconds per run of each cgroup step, on this thread's clock (the join: a child's)."""
    clock = time.thread_time_ns
    total = dict.fromkeys(("cg_make", "cg_join", "cg_read", "cg_remove"), 0)
    import mmap

    shared = mmap.mmap(-1, 8)
    for _ in range(n):
        a = clock()
        run = manager._make(LIMITS.memory_mb, LIMITS.max_processes + 1)
        fds = run.open_procs()
        b = clock()
        pid = os.fork()
        if pid == 0:
            try:
                x = clock()
                for fd in fds:
                    os.write(fd, b"0")
                shared[:8] = struct.pack("q", clock() - x)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        for fd in fds:
            os.close(fd)
        c = clock()
        run.cpu_time_s()
        run.peak_memory_bytes()
        d = clock()
        run.remove()
        e = clock()
        total["cg_make"] += b - a
        total["cg_join"] += struct.unpack("q", shared[:8])[0]
        total["cg_read"] += d - c
        total["cg_remove"] += e - d
    return {key: value / n / 1e3 for key, value in total.items()}


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _stat(pid: int) -> tuple[float, float, int, int]:
    """(CPU seconds, CPU seconds of its reaped children, minor faults, children's minor faults)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / tick
    reaped = (int(fields[13]) + int(fields[14])) / tick
    return own, reaped, int(fields[7]), int(fields[8])


def by_process(n: int, meter: CpuMeter) -> list[str]:
    """Where the fast path's CPU goes, by process, over ``n`` runs one at a time (one zygote)."""
    sb = local_backend.LocalSandbox(zygotes=1)
    try:
        for _ in range(20):
            sb.run(code=TRIVIAL, limits=LIMITS)
        (launcher,) = [z.proc.pid for z in sb._zygotes[False]]
        (zygote,) = _children(launcher)
        spawners = [p for p in _children(zygote) if _comm(p) == "llmgym-spawner"]
        c0, p0, z0 = meter.seconds(), os.times(), _stat(zygote)
        s0 = _stat(spawners[0]) if spawners else None
        for _ in range(n):
            sb.run(code=TRIVIAL, limits=LIMITS)
        c1, p1, z1 = meter.seconds(), os.times(), _stat(zygote)
        s1 = _stat(spawners[0]) if spawners else None
    finally:
        sb.close()
    if c0 is None or c1 is None:
        return ["(by process: skipped, no CPU meter)"]
    total = (c1 - c0) / n * 1e6
    caller = ((p1.user - p0.user) + (p1.system - p0.system)) / n * 1e6
    parts: list[tuple[str, float, float | None]] = [
        ("this process (the caller, supervision, the cgroup helper thread)", caller, None),
        ("the zygote (requests, forks, reaping, reports)", (z1[0] - z0[0]) / n * 1e6,
         (z1[2] - z0[2]) / n),
        ("the runs' program processes (setup, the code, exit)", (z1[1] - z0[1]) / n * 1e6,
         (z1[3] - z0[3]) / n),
    ]  # fmt: skip
    if s0 is not None and s1 is not None:
        label = "the init spawner (inits, closing finished runs' namespaces)"
        parts.append((label, (s1[0] - s0[0]) / n * 1e6, (s1[2] - s0[2]) / n))
    parts.append(("the runs' inits, and what no process above is charged for", 0.0, None))
    parts[-1] = (parts[-1][0], total - sum(us for _, us, _ in parts), None)
    rows = [
        "| process | CPU µs per run | share | minor page faults per run |",
        "|---|---:|---:|---:|",
    ]
    for label, us, faults in parts:
        f = f"{faults:.0f}" if faults is not None else "-"
        rows.append(f"| {label} | {us:.0f} | {us / total * 100:.0f}% | {f} |")
    rows.append(f"| **all, per run** | {total:.0f} | 100% | |")
    return rows


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def steps_table(costs: dict[str, float], per_run_ms: float | None) -> list[str]:
    rows = ["| step | CPU µs per run | share of the fast path's CPU per run |", "|---|---:|---:|"]
    listed = 0.0
    for label, key in STEP_ROWS:
        if key not in costs:
            continue
        us = costs[key]
        listed += us
        share = f"{us / (per_run_ms * 1e3) * 100:.0f}%" if per_run_ms else "-"
        rows.append(f"| {label} | {us:.0f} | {share} |")
    if per_run_ms:
        rest = per_run_ms * 1e3 - listed
        rows.append(
            f"| the rest: this process's supervision, messages, the zygote's bookkeeping, "
            f"copy-on-write faults of Python's setup code | {rest:.0f} | "
            f"{rest / (per_run_ms * 1e3) * 100:.0f}% |"
        )
        rows.append(
            f"| **the fast path's CPU per run, measured in this run** | {per_run_ms * 1e3:.0f} | 100% |"
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--rounds", type=int, default=3, help="turns each method takes")
    ap.add_argument(
        "--tables",
        default="main,sweep,steps",
        help="which tables: main (every method, 2 workloads), sweep (the fast path beside the "
        "floor by runs in flight), steps (what each isolation step costs)",
    )
    ap.add_argument("--sweep", default="1,2,4,8", help="runs in flight for the sweep table")
    args = ap.parse_args()
    tables_wanted = set(args.tables.split(","))
    k = (0.3 if args.quick else 1.0) / args.rounds
    workers = default_concurrency()
    py = sys.executable
    meter = CpuMeter()
    load_before = os.getloadavg()
    if "main" not in tables_wanted:
        return extra_tables(args, tables_wanted, k, meter, load_before)
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
    except BaseException:
        meter.close()
        raise
    finally:
        forks.close()
        local.close()
        fresh.close()
        if docker is not None:
            docker.close()
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
        "| x floor | CPU ms/run | CPU x subprocess | CPU x floor |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
                print(f"| {work} | {name} | - | - | - | - | - | - | - | - | {docker_note} |")
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
            c_floor = cpu[FORK_FLOOR]
            xf = f"{rate[name] / rate[FORK_FLOOR]:.2f}x"
            cf = f"{c / c_floor:.2f}x" if c is not None and c_floor else "-"
            print(
                f"| {work} | {name} | {p50:.1f} | {p99:.1f} | {rate[name]:.1f} | {xs:.1f}x "
                f"| {xd} | {xf} | {cpu_txt} | {cx} | {cf} |"
            )
    return extra_tables(args, tables_wanted, k, meter, load_after)


def extra_tables(
    args: argparse.Namespace, wanted: set[str], k: float, meter: CpuMeter, load: tuple[float, ...]
) -> int:
    """The sweep and steps tables (see the module docstring)."""
    per_run_ms = None
    try:
        if "sweep" in wanted:
            levels = [int(x) for x in args.sweep.split(",")]
            rows = sweep(levels, args.rounds, k, meter)
            print(
                "\nThe local fast path beside the floor (a bare fork of a warm interpreter), "
                f"trivial program, by runs in flight; {args.rounds} rounds, taking turns; load "
                f"average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after.\n"
            )
            print("\n".join(rows))
            cpu_rows = [r for r in rows if r.startswith("| 1 |")]
            if cpu_rows and cpu_rows[0].count("|") > 6:
                cell = cpu_rows[0].split("|")[6].strip()
                per_run_ms = float(cell) if cell not in ("", "-") else None
        if "steps" in wanted:
            if os.geteuid() != 0:
                print("\n(steps: skipped, they need root)")
                return 0
            if per_run_ms is None:
                fast = Method("fast path", lambda: None, lambda: 0.0)
                with get_sandbox("local") as sb:
                    fast.fn = lambda: sb.run(code=TRIVIAL, limits=LIMITS)
                    measure(fast, max(2, int(300 * k)), max(2, int(300 * k)), 1, meter)
                if fast.cpu_known and fast.cpu_runs:
                    per_run_ms = fast.cpu / fast.cpu_runs * 1e3
            n, step_rounds = max(10, int(120 * k)), max(5, args.rounds * 3)
            costs = step_costs(n, step_rounds)
            print(
                f"\nWhat each step of a run's isolation costs, each done alone ({n} times a "
                f"round, {step_rounds} rounds, medians of each round's difference), beside the "
                "fast path's CPU per run one run at a time in this run:\n"
            )
            print("\n".join(steps_table(costs, per_run_ms)))
            n = max(50, int(600 * k))
            print(
                f"\nWhere the fast path's CPU goes, by process ({n} runs one at a time, one "
                "zygote; utime and stime from /proc, page faults are copy-on-write faults for "
                "the most part):\n"
            )
            print("\n".join(by_process(n, meter)))
    finally:
        meter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
