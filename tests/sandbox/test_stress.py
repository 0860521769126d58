"""Stress: 2,000 mixed runs at concurrency 32 lose nothing, mix nothing up and leak nothing."""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import pytest

from llmgym.sandbox import Limits, Sandbox
from llmgym.sandbox._cgroup import settled_everywhere

from .conftest import _descendants, _mounts, _our_fds, _own_run_cgroups

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


def _run_processes(*, zombies: bool) -> list[int]:
    """Pids below this process that belong to runs (inits, programs), spares included.

    A run's init is ``sleep`` (spawned for it) or ``llmgym-init`` (forked from the zygote)."""
    out = []
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if name in ("llmgym-init", "llmgym-run", "sleep") and (zombies or state != "Z"):
            out.append(pid)
    return out


@pytest.mark.slow
def test_two_thousand_mixed_runs_at_concurrency_32(
    local_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(1234)
    kinds = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=2000)
    items = [{"code": KINDS[k][0].format(i=i), "limits": LIMITS} for i, k in enumerate(kinds)]
    local_sandbox.run(code="1", limits=LIMITS)  # the zygote and its spare run are up
    spares = len(_run_processes(zombies=True))
    fds_before = len(os.listdir("/proc/self/fd"))
    pipes_before = len(_our_fds("pipe:"))
    mounts_before = _mounts()
    # Anything the parent side would leave in a temporary directory lands here.
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    results = local_sandbox.run_many(items, concurrency=32)

    assert len(results) == len(items)
    wrong = []
    for i, (kind, res) in enumerate(zip(kinds, results, strict=True)):
        want = KINDS[kind][1]
        if res.status != want:
            wrong.append((i, kind, res.status, res.detail, res.wall_time_s, res.cpu_time_s))
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
    assert not wrong, (len(wrong), wrong[:10])
    # Nothing of the 2,000 runs is left: processes, fds, pipes, temporary files, cgroups, mounts.
    assert len(_run_processes(zombies=False)) <= spares, _run_processes(zombies=False)
    deadline = time.monotonic() + 5  # and the zygote reaps what ended, promptly
    while len(_run_processes(zombies=True)) > spares and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_run_processes(zombies=True)) <= spares, _run_processes(zombies=True)
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2
    assert len(_our_fds("pipe:")) <= pipes_before
    assert not _our_fds("/memfd:llmgym")
    assert list(temp.iterdir()) == []
    # The cgroups of the runs are gone; only the next runs' ones, made ahead, wait (this
    # sandbox's and those of the other sandboxes this test process holds).
    made_ahead = settled_everywhere()
    assert sorted(_own_run_cgroups()) == sorted(made_ahead)
    assert _mounts() == mounts_before
