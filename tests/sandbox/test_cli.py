"""``llmgym sandbox check|run|bench`` through ``python -m llmgym.sandbox.cli``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgym.sandbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_check_reports_isolation() -> None:
    out = cli("check", "--json")
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    assert report["backend"] == "local"
    if out.returncode == 0:
        assert report["usable"] and all(report["probes"].values())
        assert "degraded" in report


def test_run_a_file(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nprint(open('extra.txt').read(), sys.stdin.read())\nsys.exit(3)\n")
    extra = tmp_path / "e.txt"
    extra.write_text("EXTRA")
    stdin = tmp_path / "in.txt"
    stdin.write_text("IN")
    out = cli("run", str(prog), "--file", f"extra.txt={extra}", "--stdin", str(stdin), "--json")
    res = json.loads(out.stdout)
    assert out.returncode == 1
    assert res["status"] == "runtime_error" and res["exit_code"] == 3
    assert res["stdout"] == "EXTRA IN\n"


def test_run_reports_limits_in_plain_text(tmp_path: Path) -> None:
    prog = tmp_path / "loop.c"
    prog.write_text("int main(void){ for(;;); }")
    out = cli("run", str(prog), "--wall-time", "1", "--cpu-time", "1")
    assert out.returncode == 1
    assert "status=timeout" in out.stderr or "status=compile_error" in out.stderr


@pytest.mark.parametrize("args", [["bogus"], ["run"]])
def test_usage_errors(args: list[str]) -> None:
    assert cli(*args).returncode == 2


def test_bench_runs() -> None:
    out = cli("bench", "--runs", "20")
    assert out.returncode == 0, out.stderr
    assert "latency p50=" in out.stdout and "runs/s" in out.stdout
