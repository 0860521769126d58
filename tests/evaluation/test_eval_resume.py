"""Resume after SIGKILL: a killed `llmgym eval` run, resumed, ends with exactly the results of an
uninterrupted one, with no duplicates and no gaps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmgym.evaluation.rollouts import load_jsonl

N_TASKS = 30
SAMPLES = 2
TIMING = ("wall_time_s", "policy_time_s")

POLICY = '''
import time


def policy(messages, tools):
    """Slow enough to be killed mid-run; right on multiples of 3, wrong elsewhere."""
    time.sleep(0.01)
    n = int(messages[-1]["content"].split()[-1].rstrip("?"))
    return str(n * 2) if n % 3 == 0 else "dunno"
'''


def _setup(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Double {i}?", "answer": str(2 * i)}) + "\n"
            for i in range(N_TASKS)
        )
    )
    (tmp_path / "spec.yaml").write_text(
        "id: killtest/Double-v0\ntasks: tasks.jsonl\nverifier: exact\ndomain: arith\n"
    )
    (tmp_path / "killpolicy.py").write_text(POLICY)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH", "")]))
    args = [
        "--spec", str(tmp_path / "spec.yaml"), "eval", "killtest/Double-v0",
        "--policy", "killpolicy:policy", "--samples", str(SAMPLES), "--concurrency", "3",
        "--no-report", "--no-progress",
    ]  # fmt: skip
    return args, env


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _kill_after(cmd: list[str], env: dict[str, str], results: Path, lines: int) -> None:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while _lines(results) < lines:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before it was killed: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise AssertionError("the run made no progress")
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def _strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


@pytest.mark.slow
def test_sigkilled_run_resumes_to_exactly_the_uninterrupted_results(tmp_path: Path) -> None:
    args, env = _setup(tmp_path)
    total = N_TASKS * SAMPLES
    full, part = tmp_path / "full", tmp_path / "part"

    done = subprocess.run(
        [sys.executable, "-m", "llmgym.cli", *args, "--out", str(full)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    cmd = [sys.executable, "-m", "llmgym.evaluation", *args, "--out", str(part)]
    _kill_after(cmd, env, part / "results.jsonl", 12)
    first = _lines(part / "results.jsonl")
    assert 12 <= first < total  # really interrupted
    assert not (part / "summary.json").exists()
    _kill_after(cmd, env, part / "results.jsonl", first + 10)  # killed again while resuming
    assert _lines(part / "results.jsonl") < total

    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr

    expected = load_jsonl(full / "results.jsonl")
    got = load_jsonl(part / "results.jsonl")
    assert len(expected) == total
    keys = [r["key"] for r in got]
    assert len(keys) == len(set(keys)) == total  # no duplicates, no gaps
    assert _strip(got) == _strip(expected)  # same episodes, same order, same content
    summary_a = json.loads((full / "summary.json").read_text())
    summary_b = json.loads((part / "summary.json").read_text())
    assert summary_a["overall"] == summary_b["overall"]
    assert summary_b["overall"]["success_rate"] == pytest.approx(10 / 30)
    assert len(json.loads((part / "provenance.json").read_text())["sessions"]) == 3
