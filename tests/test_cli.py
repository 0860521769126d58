"""The llmgym command: list, show, play, export, register, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

from llmgym.cli import main

TASKS = [
    {"id": "a", "prompt": "Reply with the word yes.", "answer": "yes"},
    {"id": "b", "prompt": "Reply with the word no.", "answer": "no"},
]


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in TASKS))
    path = tmp_path / "spec.yaml"
    path.write_text("id: testcli/YesNo-v0\ntasks: tasks.jsonl\nverifier: exact\n")
    return str(path)


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgym.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_and_show(spec, capsys):
    assert main(["--spec", spec, "list", "--namespace", "testcli"]) == 0
    assert capsys.readouterr().out.strip() == "testcli/YesNo-v0"
    assert main(["--spec", spec, "show", "testcli/YesNo-v0", "--task-id", "b"]) == 0
    out = capsys.readouterr().out
    assert "Reply with the word no." in out and "task b" in out and "[gold answer]" not in out
    assert main(["--spec", spec, "show", "testcli/YesNo-v0", "--task-id", "b", "--answer"]) == 0
    assert '[gold answer]\n"no"' in capsys.readouterr().out


def test_play_reads_turns_from_stdin(spec):
    out = run_cli("--spec", spec, "play", "testcli/YesNo-v0", "--task-id", "a", stdin="yes\n.\n")
    assert out.returncode == 0, out.stderr
    assert "reward +1.000" in out.stdout and "solved" in out.stdout
    out = run_cli(
        "--spec", spec, "play", "testcli/YesNo-v0", "--task-id", "a", stdin="/oracle\n.\n"
    )
    assert "(oracle) yes" in out.stdout and "return +1.000" in out.stdout
    out = run_cli("--spec", spec, "play", "testcli/YesNo-v0", stdin="")
    assert out.returncode == 0 and "bye" in out.stdout


def test_export_tasks_and_sft(spec, tmp_path):
    tasks_out, sft_out = tmp_path / "t.jsonl", tmp_path / "sft.jsonl"
    assert (
        main(
            [
                "--spec",
                spec,
                "export",
                "testcli/YesNo-v0",
                "--n",
                "5",
                "--out",
                str(tasks_out),
                "--quiet",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in tasks_out.read_text().splitlines()]
    assert len(rows) == 5 and {r["id"] for r in rows} <= {"a", "b"}
    args = [
        "--spec",
        spec,
        "export",
        "testcli/YesNo-v0",
        "--n",
        "3",
        "--out",
        str(sft_out),
        "--format",
        "sft",
    ]
    assert main([*args, "--quiet"]) == 0
    convs = [json.loads(line) for line in sft_out.read_text().splitlines()]
    assert len(convs) == 3
    for conv in convs:
        roles = [m["role"] for m in conv["messages"]]
        assert roles == ["user", "assistant"]
        assert conv["messages"][1]["content"] == {"a": "yes", "b": "no"}[conv["task_id"]]


def test_show_by_seed_prints_tools_and_metadata_and_hides_the_gold_unless_asked():
    out = run_cli("show", "llm/ToolCalling-v0", "--seed", "3")
    assert out.returncode == 0, out.stderr
    again = run_cli("show", "llm/ToolCalling-v0", "--seed", "3")
    assert again.stdout == out.stdout  # the same seed shows the same task
    assert "[tools]" in out.stdout and '"parameters"' in out.stdout
    assert "[metadata]" in out.stdout and "db_seed: (int; --answer shows it)" in out.stdout
    math = run_cli("show", "llm/Math-v0", "--seed", "0")
    assert "solution: (str; --answer shows it)" in math.stdout
    assert "The answer is" not in math.stdout
    shown = run_cli("show", "llm/Math-v0", "--seed", "0", "--answer")
    assert 'solution: "The answer is' in shown.stdout and "[gold answer]" in shown.stdout


def test_register_checks_the_spec(spec):
    out = run_cli("register", spec)
    assert out.returncode == 0, out.stderr
    assert "testcli/YesNo-v0: ok" in out.stdout and "LLMGYM_SPECS" in out.stdout


def test_register_exits_1_when_an_env_breaks_the_contract(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"id": "a", "prompt": "say anything", "answer": ".*"}\n')
    (tmp_path / "s.yaml").write_text(
        "envs:\n  - id: testcli/Lax-v0\n    tasks: t.jsonl\n    verifier: regex\n"
    )
    out = run_cli("register", str(tmp_path / "s.yaml"))
    assert out.returncode == 1
    assert "testcli/Lax-v0: CONTRACT VIOLATION" in out.stdout and "garbage" in out.stdout
    assert "1 of 1 env(s) break the contract" in out.stderr


def test_errors_are_one_line_messages(tmp_path, spec):
    out = run_cli("show", "llm/NoSuchEnv-v0")
    assert out.returncode == 2 and "error:" in out.stderr and "Traceback" not in out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x/Y-v0\n")
    out = run_cli("register", str(bad))
    assert out.returncode == 2 and "missing 'tasks'" in out.stderr
    out = run_cli("--spec", spec, "show", "testcli/YesNo-v0", "--kwargs", "[1]")
    assert out.returncode != 0 and "JSON object" in out.stderr
    out = run_cli("--spec", spec, "show", "testcli/YesNo-v0", "--kwargs", '{"max_turns": -1}')
    assert out.returncode == 2 and "max_turns" in out.stderr
    out = run_cli("--spec", spec, "show", "testcli/YesNo-v0", "--kwargs", '{"colour": 1}')
    assert out.returncode == 2 and "colour" in out.stderr


def test_spec_with_custom_template_shows_rendered_prompt(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        json.dumps({"id": "q", "prompt": "2+2?", "answer": "4", "metadata": {"unit": "apples"}})
    )
    (tmp_path / "s.toml").write_text(
        textwrap.dedent("""
        id = "testcli/Tpl-v0"
        tasks = "t.jsonl"
        verifier = "numeric"
        prompt_template = "{prompt} Answer in {unit}."
        """)
    )
    out = run_cli("--spec", str(tmp_path / "s.toml"), "show", "testcli/Tpl-v0")
    assert "2+2? Answer in apples." in out.stdout, out.stderr


# --- issue 15: errors, suggestions, broken pipes, help texts ----------------------------------


def run_llmgym(
    *args: str, env: dict[str, str] | None = None, cwd: object = None, stdout: object = None
) -> subprocess.CompletedProcess[str]:
    """``python -m llmgym ARGS`` (stdout captured unless ``stdout`` is given)."""
    return subprocess.run(
        [sys.executable, "-m", "llmgym", *args],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=300,
        env=None if env is None else {**os.environ, **env},
        cwd=cwd,
    )


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (no traceback, non-zero status)."""
    assert out.returncode != 0, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "error" in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def regex_specs(tmp_path):
    """A spec whose extract option is a broken regex, and a plain one to pass it as a kwarg."""
    (tmp_path / "t.jsonl").write_text('{"id": "a", "prompt": "p", "answer": "1"}\n')
    bad = tmp_path / "bad_regex.yaml"
    bad.write_text('id: testcli/Regex-v0\ntasks: t.jsonl\nverifier: exact\nextract: "regex:("\n')
    good = tmp_path / "plain.yaml"
    good.write_text("id: testcli/Plain-v0\ntasks: t.jsonl\nverifier: exact\n")
    return str(bad), str(good)


BAD_JSON = "{bad"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["eval", "llm/Math-v0", "--env-kwargs", BAD_JSON], "--env-kwargs"),
        (["eval", "llm/Math-v0", "--env-kwargs", "[1, 2]"], "JSON object"),
        (["eval", "llm/Math-v0", "--k", "1,x"], "--k"),
        (["eval", "llm/Math-v0", "--set", "temperature"], "--set"),
        (["show", "llm/Math-v0", "--kwargs", BAD_JSON], "--kwargs"),
        (["play", "llm/Math-v0", "--kwargs", BAD_JSON], "--kwargs"),
        (
            ["export", "llm/Math-v0", "--n", "1", "--out", "x.jsonl", "--kwargs", BAD_JSON],
            "--kwargs",
        ),
        (["audit", "llm/Math-v0", "--kwargs", BAD_JSON], "--kwargs"),
        (["audit", "llm/Math-v0", "--set", "=1"], "--set"),
        (["export", "llm/Math-v0", "--n", "-1", "--out", "x.jsonl"], "--n"),
        (["register", "no_such_spec.yaml"], "no_such_spec.yaml"),
        (["--spec", "no_such_spec.yaml", "list"], "no_such_spec.yaml"),
        (["eval", "--suite", "no_such_suite.json"], "no_such_suite.json"),
        (["report", "no_such_run"], "no_such_run"),
        (["reverify", "no_such_run"], "no_such_run"),
        (["compare", "no_such_run_a", "no_such_run_b"], "no_such_run_a"),
        (["export-rollouts", "no_such_run", "-o", "x.jsonl"], "no_such_run"),
        (["sandbox", "run", "no_such_file.py"], "no_such_file.py"),
        (["sandbox", "run", "ok.py", "--memory-mb", "-1"], "--memory-mb"),
        (["sandbox", "run", "ok.py", "--wall-time", "0"], "--wall-time"),
        (["sandbox", "run", "ok.py", "--stdin", "no_such_input.txt"], "no_such_input.txt"),
        (["bogus-command"], "bogus-command"),
        ([], "command"),
    ],
)
def test_bad_input_is_one_line_on_stderr(args, expected, tmp_path):
    (tmp_path / "ok.py").write_text("print(1)\n")
    line = one_line_error(run_llmgym(*args, cwd=tmp_path))
    assert expected in line, line
    assert not list(tmp_path.glob("evals")), "a refused eval must not start a run folder"


def test_a_bad_regex_extract_is_one_line_everywhere_the_cli_takes_one(regex_specs, tmp_path):
    bad, good = regex_specs
    for args in (
        ["register", bad],
        ["--spec", bad, "list"],
        ["--spec", bad, "show", "testcli/Regex-v0"],
        ["--spec", good, "show", "testcli/Plain-v0", "--kwargs", '{"extract": "regex:("}'],
        ["--spec", good, "audit", "testcli/Plain-v0", "--set", "extract=regex:("],
    ):
        line = one_line_error(run_llmgym(*args, cwd=tmp_path))
        assert "unterminated subpattern" in line, (args, line)
    out = run_llmgym(
        "--spec", good, "eval", "testcli/Plain-v0", "--env-kwargs", '{"extract": "regex:("}',
        "--out", str(tmp_path / "ev"), "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "unterminated subpattern" in out.stderr.strip().splitlines()[-1], out.stderr


def test_debug_env_var_and_flag_show_the_traceback(tmp_path):
    out = run_llmgym("sandbox", "run", "missing.py", env={"LLMGYM_DEBUG": "1"}, cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" in out.stderr and "FileNotFoundError" in out.stderr
    out = run_llmgym("--debug", "show", "llm/Math-v0", "--kwargs", '{"colour": 1}', cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" in out.stderr
    out = run_llmgym("show", "llm/Math-v0", "--kwargs", '{"colour": 1}', env={"LLMGYM_DEBUG": "0"})
    assert "colour" in one_line_error(out)


def test_an_internal_bug_keeps_its_traceback(monkeypatch):
    import llmgym.cli as cli_module

    def broken(args):
        raise RuntimeError("a genuine bug")

    monkeypatch.setattr(cli_module, "cmd_list", broken)
    with pytest.raises(RuntimeError, match="a genuine bug"):
        main(["list"])


def _closed_pipe_run(*args: str, cwd: object = None) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader is already gone (``| head -0`` at its fastest)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return run_llmgym(*args, stdout=write_end, cwd=cwd)
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["show", "llm/Math-v0"],
        ["show", "llm/LongDoc-v0"],  # large: the pipe breaks while writing, not at exit
        ["list"],
        ["list", "--families"],
        ["--help"],
        ["show", "--help"],
        ["--version"],
        ["audit", "--list-hacks"],
        ["sandbox", "run", "hello.py"],
        ["eval", "llm/Math-v0", "--episodes", "2", "--no-progress", "--no-report", "--out", "ev"],
    ],
)
def test_a_broken_pipe_exits_quietly_with_a_nonzero_status(args, tmp_path):
    (tmp_path / "hello.py").write_text("print('hello ' * 1000)\n")
    out = _closed_pipe_run(*args, cwd=tmp_path)
    # eval says where it writes before it prints its summary on stdout; nothing else may appear
    noise = [ln for ln in out.stderr.splitlines() if not ln.startswith("writing to ")]
    assert noise == [], out.stderr
    assert out.returncode == 141, (out.returncode, out.stderr)


def test_head_on_a_pipe(tmp_path):
    out = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {sys.executable} -m llmgym show llm/LongDoc-v0 | head -1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.startswith("# llm/LongDoc-v0") and out.stdout.count("\n") == 1
    # 141 when head left before llmgym finished writing, 0 when the pipe held it all
    assert out.stderr == "" and out.returncode in (0, 141), out


def test_unknown_env_suggestions_come_from_llmgyms_own_envs(capsys):
    assert main(["show", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Hopper" not in err and "nope" in err and "llm/Math-v0" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["show", "math"]) == 2
    assert "did you mean llm/Math-v0" in capsys.readouterr().err
    assert main(["show", "llm/Math-v9"]) == 2
    assert "did you mean llm/Math-v0" in capsys.readouterr().err
    assert main(["export", "llm/Cdoing-v0", "--n", "1", "--out", "x.jsonl"]) == 2
    assert "did you mean llm/Coding-v0" in capsys.readouterr().err
    assert main(["show", "CartPole-v1"]) == 2
    assert "not an llmgym env" in capsys.readouterr().err


def test_eval_suggests_llmgym_envs_too(tmp_path):
    line = one_line_error(run_llmgym("eval", "llm/Mat-v0", "--out", "ev", cwd=tmp_path))
    assert "did you mean llm/Math-v0" in line and "Hopper" not in line


def test_list_of_an_unknown_namespace_says_so_and_exits_1(capsys):
    assert main(["list", "--namespace", "nope"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no environments in namespace 'nope'" in captured.err and "llm" in captured.err
    assert main(["list", "--namespace", "llm"]) == 0
    assert "llm/Math-v0" in capsys.readouterr().out


def test_version(capsys):
    import llmgym

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"llmgym {llmgym.__version__}\n"


def test_python_dash_m_llmgym_is_the_llmgym_command(capsys):
    assert main(["list", "--namespace", "llm"]) == 0  # other tests register envs elsewhere
    expected = capsys.readouterr().out
    out = run_llmgym("list", "--namespace", "llm")
    assert out.returncode == 0 and out.stdout == expected, out.stderr
    out = run_llmgym("--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: llmgym ")


def _every_command_path() -> list[list[str]]:
    import argparse

    from llmgym.cli import build_parser

    paths: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        paths.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])

    walk(build_parser(), [])
    return paths


MARKUP = re.compile(r"``|%%|%\(|:(?:func|class|meth|mod|attr|data|obj|exc|ref|doc):`")


def test_every_help_text_is_free_of_markup(capsys):
    paths = _every_command_path()
    assert ["sandbox", "run"] in paths and ["eval"] in paths and ["train"] in paths
    for path in paths:
        assert main([*path, "--help"]) == 0
        text = capsys.readouterr().out
        assert text.startswith("usage: llmgym"), (path, text[:200])
        found = MARKUP.findall(text)
        assert not found, (path, found, text)


def test_eval_exits_1_when_too_many_episodes_errored(tmp_path):
    (tmp_path / "down_policy.py").write_text(
        "def policy(messages, tools):\n    raise ConnectionError('the model server is down')\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    args = ["eval", "llm/Math-v0", "--policy", "down_policy:policy", "--episodes", "2"]
    out = run_llmgym(*args, "--out", "a", "--no-progress", "--no-report", env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("llmgym: error: 2 of 2 episodes (100%) errored (2 policy_error)")
    assert "--max-error-rate 5%" in last and "Traceback" not in out.stderr
    out = run_llmgym(
        *args, "--out", "b", "--no-progress", "--max-error-rate", "1", env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("llmgym: warning: 2 of 2 episodes")
    assert "This run failed" not in (tmp_path / "b" / "report.html").read_text()
    assert 'role="alert"' in (tmp_path / "b" / "report.html").read_text()
    line = one_line_error(run_llmgym(*args, "--max-error-rate", "2", cwd=tmp_path))
    assert "--max-error-rate" in line


def test_serve_takes_spec_files_after_the_command_too(spec, tmp_path) -> None:
    from llmgym.cli import _setup, build_parser

    other = tmp_path / "other.yaml"
    other.write_text("id: testcli/Other-v0\ntasks: tasks.jsonl\nverifier: exact\n")
    args = build_parser().parse_args(
        ["--spec", str(other), "serve", "testcli/YesNo-v0", "--spec", spec]
    )
    assert (args.spec_files, args.command_spec_files) == ([str(other)], [spec])
    _setup(args)  # registers both, then checks the env ids named
    assert "testcli/YesNo-v0" in gym.registry and "testcli/Other-v0" in gym.registry
    assert build_parser().parse_args(["serve"]).command_spec_files == []


def test_serve_on_ray_flags_and_a_bad_replica_count() -> None:
    from llmgym import error
    from llmgym.cli import build_parser
    from llmgym.serve.cli import _serve_on_ray, config_from

    args = build_parser().parse_args(["serve", "llm/Math-v0", "--ray", "auto", "--replicas", "3"])
    assert (args.ray, args.replicas) == ("auto", 3)
    assert build_parser().parse_args(["serve"]).ray is None  # local serving by default
    args.replicas = 0
    with pytest.raises(error.Error, match="--replicas >= 1"):
        _serve_on_ray(config_from(args), args)  # refused before any cluster is reached
