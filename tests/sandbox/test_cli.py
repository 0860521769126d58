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


# --- issue 15: the language from the extension, one-line errors -------------------------------


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], out.stderr
    return lines[0]


def test_run_refuses_a_file_whose_language_it_cannot_tell(tmp_path: Path) -> None:
    prog = tmp_path / "main.rs"
    prog.write_text('fn main() { println!("hi"); }\n')
    line = one_line_error(cli("run", str(prog)))
    assert "main.rs" in line and ".rs" in line and "--language" in line
    for language, ext in (("python", ".py"), ("c", ".c"), ("cpp", ".cpp"), ("shell", ".sh")):
        assert language in line and ext in line, line
    line = one_line_error(cli("run", str(tmp_path / "no_extension")))
    assert "no extension" in line
    line = one_line_error(cli("run", str(prog), "--language", "rust"))
    assert "rust" in line and "python" in line


@pytest.mark.parametrize(
    ("name", "code", "language", "stdout"),
    [
        ("prog.py", "print('py-ok')\n", "python", "py-ok\n"),
        ("prog.PY", "print('py-ok')\n", "python", "py-ok\n"),
        ("prog.sh", "echo sh-ok\n", "shell", "sh-ok\n"),
        ("prog.c", '#include <stdio.h>\nint main(void){puts("c-ok");}\n', "c", "c-ok\n"),
        ("prog.cc", '#include <cstdio>\nint main(){std::puts("cc-ok");}\n', "cpp", "cc-ok\n"),
        ("prog.cxx", '#include <cstdio>\nint main(){std::puts("cx-ok");}\n', "cpp", "cx-ok\n"),
    ],
)
def test_run_takes_the_language_from_the_extension(
    tmp_path: Path, name: str, code: str, language: str, stdout: str
) -> None:
    (tmp_path / name).write_text(code)
    out = cli("run", str(tmp_path / name), "--json")
    res = json.loads(out.stdout)
    assert res["language"] == language, res
    assert res["status"] == "ok" and res["stdout"] == stdout or res["status"] == "compile_error"


def test_an_explicit_language_overrides_the_extension(tmp_path: Path) -> None:
    prog = tmp_path / "script.rs"
    prog.write_text("print(6 * 7)\n")
    out = cli("run", str(prog), "--language", "py", "--json")
    res = json.loads(out.stdout)
    assert out.returncode == 0 and res["language"] == "python" and res["stdout"] == "42\n"
    shell = tmp_path / "script.py"
    shell.write_text("echo from-shell\n")
    res = json.loads(cli("run", str(shell), "--language", "bash", "--json").stdout)
    assert res["language"] == "shell" and res["stdout"] == "from-shell\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "missing.py"], "missing.py"),
        (["run", "ok.py", "--memory-mb", "-1"], "--memory-mb must be >= 8"),
        (["run", "ok.py", "--memory-mb", "4"], "--memory-mb"),
        (["run", "ok.py", "--wall-time", "0"], "--wall-time"),
        (["run", "ok.py", "--wall-time", "nan"], "--wall-time"),
        (["run", "ok.py", "--cpu-time", "-1"], "--cpu-time"),
        (["run", "ok.py", "--max-processes", "0"], "--max-processes"),
        (["run", "ok.py", "--max-output-bytes", "-1"], "--max-output-bytes"),
        (["run", "ok.py", "--memory-mb", "lots"], "--memory-mb"),
        (["run", "ok.py", "--stdin", "missing.txt"], "missing.txt"),
        (["run", "ok.py", "--file", "data.txt"], "NAME=PATH"),
        (["run", "ok.py", "--file", "data.txt=missing.txt"], "missing.txt"),
        (["run", "missing_dir/"], "missing_dir"),
        (["bench", "--runs", "0"], "--runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ok.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    line = one_line_error(cli(*args))
    assert expected in line, line
