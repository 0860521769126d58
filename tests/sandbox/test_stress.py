"""Stress: 2,000 mixed runs at concurrency 32 lose nothing, mix nothing up and leak nothing."""

from __future__ import annotations

import os
import random

import pytest

from llmgym.sandbox import Limits, Sandbox

KINDS = {
    "ok": ("import sys; print('run', {i}); print('err', {i}, file=sys.stderr)", "ok"),
    "timeout": ("import time; print('run', {i}, flush=True); time.sleep(30)", "timeout"),
    "memory": (
        "x = bytearray(96 << 20)\nfor j in range(0, len(x), 4096): x[j] = 1",
        "memory_limit",
    ),
    "crash": ("import os; print('run', {i}, flush=True); os.abort()", "runtime_error"),
    "flood": ("import os\nwhile True: os.write(1, b'run {i} ' * 4096)", "output_limit"),
}
WEIGHTS = {"ok": 10, "timeout": 2, "memory": 2, "crash": 3, "flood": 3}
LIMITS = Limits(wall_time_s=0.5, memory_mb=48, max_processes=16, max_output_bytes=64 << 10)


@pytest.mark.slow
def test_two_thousand_mixed_runs_at_concurrency_32(local_sandbox: Sandbox) -> None:
    rng = random.Random(1234)
    kinds = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=2000)
    # Memory bombs get time to reach their limit even on a loaded machine.
    mem_limits = LIMITS.replace(wall_time_s=20)
    items = [
        {"code": KINDS[k][0].format(i=i), "limits": mem_limits if k == "memory" else LIMITS}
        for i, k in enumerate(kinds)
    ]
    fds_before = len(os.listdir("/proc/self/fd"))
    results = local_sandbox.run_many(items, concurrency=32)
    assert len(results) == len(items)
    wrong = []
    for i, (kind, res) in enumerate(zip(kinds, results, strict=True)):
        want = KINDS[kind][1]
        if res.status != want:
            wrong.append((i, kind, res.status, res.detail))
            continue
        if kind == "ok" and (res.stdout != f"run {i}\n" or res.stderr != f"err {i}\n"):
            wrong.append((i, kind, "mixed output", res.stdout, res.stderr))
        if kind in ("timeout", "crash") and res.stdout != f"run {i}\n":
            wrong.append((i, kind, "mixed output", res.stdout))
        if (
            kind == "flood"
            and res.stdout_bytes != (b"run %d " % i * 20000)[: len(res.stdout_bytes)]
        ):
            wrong.append((i, kind, "mixed output", res.stdout[:40]))
    assert not wrong, wrong[:10]
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2
