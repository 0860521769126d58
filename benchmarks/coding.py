"""Coding-v0 steps/s with the oracle policy beside one fresh subprocess per test, in one run.

Each step is reset + step: it builds (or, for a repeated task id, looks up) a task with 10
hidden tests plus its visible ones, and grades the oracle's program. llmgym runs the whole
suite in one sandbox run on the warm zygote (namespaces, cgroups, seccomp; for call tests the
worker alone in the run, the judge's loop in this process; for stdin/stdout tests a judge and a
process per test inside the run); the baseline runs every test as its own unisolated
``subprocess.run([python, "-c", ...])`` and compares the printed result in the parent. Both
grade the same tasks with the same oracle programs and the same number of worker threads.

How the cores are driven: ``--workers`` threads (default: one per core), each stepping its own
env, all envs sharing one sandbox, as a trainer's rollout threads would; the sandbox runs as
many programs at once as there are threads stepping.

Three measures per row: steps/s on the wall clock (it depends on whatever else the machine is
running); CPU time per step of every process involved (this one, the sandbox's zygote and
every process it starts, the runs' inits included, or the baseline's subprocesses: from a
cpuacct cgroup put around this process, as root; else getrusage of this process and the ones
it reaped, which misses the runs' inits), from which "steps/s if the cores were free" = cores
/ CPU per step; and the whole machine's busy time per step (/proc/stat), which also counts
the kernel threads that tear down each run's network namespace and cgroups and, on a shared
machine, everyone else's work: an upper bound, close to the truth only when the load average
(printed before and after) is about ``--workers``.

Each row is measured in ``--rounds`` turns (default 3), the baseline and llmgym taking turns, so
that a change of load on a shared VM falls on both; the table shows each measure's median and the
range of the rates.

Run: python benchmarks/coding.py [--seconds 6] [--rounds 3] [--workers 2] [--rows call,grpo,stdio]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from _cpumeter import CpuMeter

import llmgym
from llmgym.envs.coding import CodingEnv
from llmgym.envs.coding.env import CachingSource
from llmgym.envs.coding.families import FAMILIES
from llmgym.envs.coding.harness import make_sandbox
from llmgym.envs.coding.problem import Problem
from llmgym.envs.coding.runner import decode
from llmgym.rewards.coding import compare_output, values_equal
from llmgym.tasks import ProceduralSource

CALL_FAMILIES = [f.name for f in FAMILIES if not f.has_subtasks and not f.name.startswith("stdio_")]
STDIO_FAMILIES = [f.name for f in FAMILIES if f.name.startswith("stdio_")]


def task_ids(families: list[str], n: int, group: int) -> list[str]:
    """``n`` task ids over ``families`` and difficulties, each repeated ``group`` times in a row
    (a GRPO group samples one task G times)."""
    source = ProceduralSource(FAMILIES, domain="coding")
    ids = [source.build(families[i % len(families)], (i % 5) / 4, i).id for i in range(n)]
    return [task_id for task_id in ids for _ in range(group)]


METER: CpuMeter | None = None
"""Set by main(): the cgroup put around this process (and what it starts)."""


def _cpu() -> float:
    """CPU seconds of this process and everything it started (see the module docstring)."""
    seconds = METER.seconds() if METER is not None else None
    if seconds is not None:
        return seconds
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _machine_cpu() -> float:
    """Seconds the whole machine's CPUs have been busy (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:8]]
    return (sum(ticks[:3]) + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def _drive(
    step: Callable[[int, int], bool], n: int, seconds: float, workers: int
) -> dict[str, Any]:
    """Call ``step(worker, i)`` from ``workers`` threads for ``seconds``; worker k takes items
    k, k + workers, ... so a group of repeated ids is shared out as a trainer would."""
    counts = [0] * workers
    failures = [0] * workers
    stop = time.perf_counter() + seconds

    def loop(k: int) -> None:
        i = k
        while time.perf_counter() < stop:
            failures[k] += not step(k, i % n)
            counts[k] += 1
            i += workers

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"steps": sum(counts), "elapsed": time.perf_counter() - start, "failures": sum(failures)}


def _summary(run: dict[str, Any], cpu: float, machine: float) -> dict[str, float]:
    return {
        "rate": run["steps"] / run["elapsed"],
        "cpu_ms": 1000 * cpu / run["steps"],
        "machine_ms": 1000 * machine / run["steps"],
        "failures": run["failures"],
    }


def llmgym_rate(
    ids: list[str], seconds: float, workers: int, cache: int, families: list[str]
) -> dict[str, float]:
    """reset + oracle step over ``workers`` threads (one env each, one sandbox)."""
    sandbox = make_sandbox("local")
    envs = [CodingEnv(sandbox=sandbox, task_cache=cache, families=families) for _ in range(workers)]
    envs[0].reset(options={"task_id": ids[0]})
    envs[0].step(envs[0].oracle_action())  # the zygote is up before the clock starts

    def step(k: int, i: int) -> bool:
        env = envs[k]
        env.reset(options={"task_id": ids[i]})
        return bool(env.step(env.oracle_action())[4]["is_success"])

    cpu0, machine0 = _cpu(), _machine_cpu()
    run = _drive(step, len(ids), seconds, workers)
    machine = _machine_cpu() - machine0
    sandbox.close()  # the zygote exits: its CPU time, and its runs', lands in RUSAGE_CHILDREN
    return _summary(run, _cpu() - cpu0, machine)


_ONE_CALL = """
import json, sys
{code}
args = json.loads(sys.argv[1])
print(json.dumps(globals()[{fn!r}](*args)))
"""


def grade_per_subprocess(problem: Problem) -> bool:
    """Grade the oracle with one fresh, unisolated interpreter per test."""
    code = problem.reference["python"]
    ok = True
    for test in problem.tests:
        if problem.kind == "stdio":
            out = subprocess.run([sys.executable, "-c", code], input=test["input"],
                                 capture_output=True, text=True, timeout=10)  # fmt: skip
            ok &= compare_output(out.stdout, test["output"], problem.compare["mode"])
            continue
        program = _ONE_CALL.format(code=code, fn=test["fn"])
        out = subprocess.run([sys.executable, "-c", program, json.dumps(decode(test["args"]))],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        try:
            got = json.loads(out.stdout)
        except ValueError:
            return False
        ok &= values_equal(got, decode(test["expected"]), problem.compare["mode"])
    return ok


def baseline_rate(ids: list[str], seconds: float, workers: int, cache: int) -> dict[str, float]:
    source = CachingSource(FAMILIES, domain="coding", size=cache)

    def step(k: int, i: int) -> bool:
        return grade_per_subprocess(Problem.from_answer(source.get(ids[i]).answer))

    cpu0, machine0 = _cpu(), _machine_cpu()
    run = _drive(step, len(ids), seconds, workers)
    return _summary(run, _cpu() - cpu0, _machine_cpu() - machine0)


ROWS = {
    "call": ("function-level, each task new", CALL_FAMILIES, 1),
    "grpo": ("function-level, GRPO groups of 8", CALL_FAMILIES, 8),
    "stdio": ("stdin/stdout, each task new", STDIO_FAMILIES, 1),
}


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each measure's median over the rounds; ``lo``/``hi``: the range of the rates."""
    out = {k: statistics.median(r[k] for r in runs) for k in ("rate", "cpu_ms", "machine_ms")}
    rates = [r["rate"] for r in runs]
    return {**out, "lo": min(rates), "hi": max(rates), "failures": sum(r["failures"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0, help="per row and round")
    parser.add_argument("--rounds", type=int, default=3, help="turns each method takes")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of {list(ROWS)}")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    global METER
    METER = CpuMeter()  # before any sandbox: its run cgroups then nest under this one
    how = "a cpuacct cgroup" if METER.seconds() is not None else "getrusage"
    rows = []
    for key in args.rows.split(","):
        label, families, group = ROWS[key]
        ids = task_ids(families, 600 // group, group)
        cache = 0 if group == 1 else 256
        bases, ourss = [], []
        for _ in range(args.rounds):  # taking turns: a change of load falls on both alike
            bases.append(baseline_rate(ids, args.seconds, args.workers, cache))
            ourss.append(llmgym_rate(ids, args.seconds, args.workers, cache, families))
        base, ours = _median(bases), _median(ourss)
        rows.append((f"{label}: a fresh subprocess per test (baseline)", base, base))
        rows.append((f"{label}: llm/Coding-v0, one sandbox run per step", ours, base))
    METER.close()
    print(
        f"llmgym {llmgym.__version__}: {args.workers} thread(s) each stepping its own env, one "
        f"sandbox shared; {cores} cores; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; {args.rounds} rounds of {args.seconds:g} s per row, "
        f"methods taking turns, medians shown; 10 hidden tests per task; CPU of our processes "
        f"from {how}\n"
    )
    print("| reset + oracle step | steps/s (wall) | range over rounds | CPU ms/step "
          "| machine CPU ms/step | steps/s if the cores were free | vs baseline | failed |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, b in rows:
        free = cores * 1000 / r["cpu_ms"]
        print(
            f"| {name} | {r['rate']:,.1f} | {r['lo']:,.1f}-{r['hi']:,.1f} | {r['cpu_ms']:,.1f} | "
            f"{r['machine_ms']:,.1f} | {free:,.0f} | {b['cpu_ms'] / r['cpu_ms']:.1f}x | "
            f"{r['failures']:.0f} |"
        )


if __name__ == "__main__":
    main()
