"""Sandbox speed, side by side in one run: unisolated subprocess, `docker run`, and llmgym's sandboxes.

For a trivial program and for a 10-unit-test file (a candidate module plus a harness that
reports through the result channel), each method is measured twice: latency of sequential runs
(p50/p99) and throughput with as many runs in flight as there are cores. Ratios are against the
unisolated ``subprocess.run([python, "-c", ...])`` and against ``docker run`` per execution,
measured here, in the same run (absolute times on shared machines mean little).

    python benchmarks/sandbox.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

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


def measure(fn: Callable[[], object], seq: int, par: int, workers: int) -> dict[str, float]:
    fn()  # warm
    lat = []
    for _ in range(seq):
        t = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t)
    lat.sort()
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: fn(), range(par)))
    rate = par / (time.perf_counter() - t)
    return {
        "p50": statistics.median(lat) * 1e3,
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
        "rate": rate,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    args = ap.parse_args()
    k = 0.3 if args.quick else 1.0
    workers = default_concurrency()
    rows: list[tuple[str, str, dict[str, float] | None, str]] = []
    py = sys.executable

    def sub(code: str) -> Callable[[], object]:
        return lambda: subprocess.run([py, "-c", code], capture_output=True, check=True)

    local = get_sandbox("local")
    fresh = get_sandbox("local", fast_path=False)
    try:
        docker = get_sandbox("docker", pool_size=workers)
        docker_note = ""
    except BackendUnavailable as exc:
        docker, docker_note = None, f"skipped: {exc}"
    try:
        for work, code in (("trivial", TRIVIAL), ("10 tests", INLINE_TESTS)):
            files = {"solution.py": SOLUTION} if work == "10 tests" else None
            prog = HARNESS if work == "10 tests" else TRIVIAL

            def sb_fn(sb, prog=prog, files=files):  # type: ignore[no-untyped-def]
                def f() -> object:
                    res = sb.run(code=prog, files=files, limits=LIMITS)
                    assert res.ok, res
                    return res

                return f

            rows.append(
                (
                    work,
                    "subprocess.run (unisolated)",
                    measure(sub(code), int(40 * k), int(40 * k), workers),
                    "",
                )
            )
            if docker is not None:
                image = docker.image  # type: ignore[attr-defined]
                cmd = [
                    "docker",
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    image,
                    docker.python,
                    "-c",
                    code,
                ]  # type: ignore[attr-defined]
                drun = lambda cmd=cmd: subprocess.run(cmd, capture_output=True, check=True)  # noqa: E731
                rows.append(
                    (
                        work,
                        "docker run per execution",
                        measure(drun, int(10 * k) or 3, int(12 * k) or 4, workers),
                        "",
                    )
                )
            else:
                rows.append((work, "docker run per execution", None, docker_note))
            rows.append(
                (
                    work,
                    "llmgym local, fast path",
                    measure(sb_fn(local), int(200 * k), int(400 * k), workers),
                    "",
                )
            )
            rows.append(
                (
                    work,
                    "llmgym local, fresh interpreter",
                    measure(sb_fn(fresh), int(40 * k), int(60 * k), workers),
                    "",
                )
            )
            if docker is not None:
                rows.append(
                    (
                        work,
                        "llmgym docker pool",
                        measure(sb_fn(docker), int(60 * k), int(100 * k), workers),
                        "",
                    )
                )
            else:
                rows.append((work, "llmgym docker pool", None, docker_note))
    finally:
        local.close()
        fresh.close()
        if docker is not None:
            docker.close()

    print(f"\n{workers} runs in flight for throughput; latency = sequential runs.\n")
    print("| workload | method | p50 ms | p99 ms | runs/s | x subprocess | x docker run |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for work in ("trivial", "10 tests"):
        base = {m: r for w, m, r, _ in rows if w == work and r is not None}
        sub_rate = base["subprocess.run (unisolated)"]["rate"]
        drun_rate = base.get("docker run per execution", {}).get("rate")
        for w, m, r, note in rows:
            if w != work:
                continue
            if r is None:
                print(f"| {w} | {m} | - | - | - | - | {note} |")
                continue
            xd = f"{r['rate'] / drun_rate:.1f}x" if drun_rate else "-"
            print(
                f"| {w} | {m} | {r['p50']:.1f} | {r['p99']:.1f} | {r['rate']:.1f} | "
                f"{r['rate'] / sub_rate:.1f}x | {xd} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
