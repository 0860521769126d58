"""The llmgym command: list, show, play, export, register, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

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
