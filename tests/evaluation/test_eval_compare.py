"""`llmgym compare` and the evaluation CLI commands."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from eval_envs import ADD_ID, GUESS_ID, add_policy, bisect_policy

from llmgym import error
from llmgym.evaluation import compare, evaluate
from llmgym.evaluation.cli import main
from llmgym.evaluation.compare import comparison_text


def _eval(out: Path, envs: Any, policy: Any, **kwargs: Any) -> Path:
    evaluate(envs, policy, out=out, report=False, progress=False, **kwargs)
    return out


ENVS = [ADD_ID, {"id": GUESS_ID, "episodes": 30}]  # Add: all of its 12 tasks


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cmp")
    return {
        "oracle": _eval(root / "oracle", ENVS, "oracle", samples=2),
        "oracle2": _eval(root / "oracle2", ENVS, "oracle", samples=2),
        "half": _eval(root / "half", ENVS, _half, samples=2),
    }


def _half(messages: Any, tools: Any) -> str:
    """Right on even operands of Add (6 of 12 tasks), and on Guess games with an even range."""
    first = messages[0]["content"]
    if "Guess" in first:
        return (
            bisect_policy(messages, tools)
            if int(first.split(" to ")[1].split(".")[0]) % 2 == 0
            else "0"
        )
    return add_policy(messages, tools)


def test_identical_runs_show_no_difference(runs: dict[str, Path]) -> None:
    c = compare(runs["oracle"], runs["oracle2"])
    for row in [*c["by_env"].values(), c["overall"]]:
        for metric in ("success", "reward"):
            assert row[metric]["diff"] == 0.0
            assert row[metric]["p"] == 1.0 and not row[metric]["significant"]
        assert "paired" in row["method"]
    # (the git commit may move between the two runs: others commit to this checkout)
    assert [d for d in c["provenance_diff"] if not d["field"].startswith("git")] == []
    assert c["warnings"] == []


def test_a_real_difference_is_significant_and_paired(runs: dict[str, Path]) -> None:
    c = compare(runs["half"], runs["oracle"])
    add = c["by_env"][ADD_ID]
    assert add["success"]["a"] == 0.5 and add["success"]["b"] == 1.0
    assert add["success"]["diff"] == 0.5
    assert add["matched_tasks"] == 12 and "paired" in add["method"]  # a dataset env: all 12 tasks
    lo, hi = add["success"]["ci"]
    assert 0 < lo <= 0.5 <= hi
    # exact sign-flip test: 6 tasks differ by +1, 6 by 0 -> only all-plus or all-minus reach 0.5
    assert add["success"]["p"] == pytest.approx(2 / 2**6)
    guess = c["by_env"][GUESS_ID]
    assert guess["matched_tasks"] == 30
    assert 0.2 < guess["success"]["diff"] < 0.8
    assert guess["success"]["p"] < 0.001 and guess["success"]["significant"]
    # Holm: the smaller p is doubled, the larger one kept if above it
    assert guess["success"]["p_holm"] == pytest.approx(min(1.0, 2 * guess["success"]["p"]))
    assert add["success"]["p_holm"] == pytest.approx(
        max(add["success"]["p"], guess["success"]["p_holm"])
    )
    assert c["overall"]["success"]["significant"]
    assert any(d["field"] == "policy" for d in c["provenance_diff"])
    text = comparison_text(c)
    assert ADD_ID in text and "+0.500" in text and "*" in text


def test_unmatched_tasks_use_unpaired_tests(tmp_path: Path) -> None:
    a = _eval(tmp_path / "a", GUESS_ID, "oracle", episodes=30, seed=1)
    b = _eval(tmp_path / "b", GUESS_ID, lambda m, t: "1", episodes=30, seed=1000)
    c = compare(a, b)
    row = c["by_env"][GUESS_ID]
    assert row["matched_tasks"] == 0 and "unpaired" in row["method"]
    assert row["success"]["a"] == 1.0 and row["success"]["b"] < 0.3
    assert row["success"]["p"] < 1e-6 and row["success"]["significant"]
    lo, hi = row["success"]["ci"]
    assert lo <= row["success"]["diff"] <= hi < 0
    assert row["reward"]["p"] < 0.01


def test_envs_in_one_run_only_and_different_kwargs_are_flagged(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    a = _eval(
        tmp_path / "a", [{"id": GUESS_ID, "kwargs": {"max_turns": 3}, "episodes": 30}], "oracle"
    )
    c = compare(a, runs["oracle"])
    assert c["by_env"][ADD_ID]["method"] == "missing in one run"
    assert math.isnan(c["by_env"][ADD_ID]["success"]["p"])
    assert any("one run only" in w for w in c["warnings"])
    assert any("kwargs differ" in w for w in c["warnings"])


def test_compare_needs_evaluation_folders(tmp_path: Path, runs: dict[str, Path]) -> None:
    with pytest.raises(error.Error, match="not an evaluation folder"):
        compare(tmp_path, runs["oracle"])
    with pytest.raises(error.Error, match="alpha"):
        compare(runs["oracle"], runs["oracle"], alpha=2)


# --- the CLI -------------------------------------------------------------------------------------


def test_compare_cli_writes_json_and_html(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "compare",
        str(runs["half"]),
        str(runs["oracle"]),
        "--json",
        str(tmp_path / "c.json"),
        "--html",
        str(tmp_path / "c.html"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| env |" in out and ADD_ID in out
    assert json.loads((tmp_path / "c.json").read_text())["by_env"][GUESS_ID]["success"][
        "significant"
    ]
    assert "<img" in (tmp_path / "c.html").read_text()


def test_eval_cli_runs_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    args = ["eval", ADD_ID, GUESS_ID, "--episodes", "4", "--samples", "2", "--k", "1,2", "--out", str(out),
            "--set", "temperature=0.7", "--set", "stop=[\"\\n\"]", "--set", "name=plain text",
            "--env-kwargs", "{}", "--no-progress", "--concurrency", "3"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "16 episodes over 8 tasks: success 1.0000" in printed and "report:" in printed
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["settings"] == {"temperature": 0.7, "stop": ["\n"], "name": "plain text"}
    assert (out / "report.html").exists()
    assert main([*args, "--no-report"]) == 0  # a finished run resumes as a no-op
    assert len(json.loads((out / "provenance.json").read_text())["sessions"]) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["eval", ADD_ID, "--k", "one,two"],
        ["eval", ADD_ID, "--set", "novalue"],
        ["eval", ADD_ID, "--env-kwargs", "[1, 2]"],
        ["eval", "nope/Missing-v0"],
        ["eval", "--suite", "no-such-suite-v0"],
        ["report", "/nonexistent/folder"],
        ["compare", "/nonexistent/a", "/nonexistent/b"],
        ["reverify", "/nonexistent/folder"],
    ],
)
def test_cli_errors_exit_2_with_a_message(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if args[0] == "eval":
        args = [*args, "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(args) == 2
    assert "error:" in capsys.readouterr().err


def test_report_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "kl": i / 10}) + "\n" for i in range(5))
    )
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 0
    assert str(tmp_path / "r.html") in capsys.readouterr().out
    assert "kl" in (tmp_path / "r.html").read_text()


def test_the_main_llmgym_cli_has_the_evaluation_commands() -> None:
    from llmgym.cli import build_parser

    parser = build_parser()
    for argv in (
        ["eval", ADD_ID],
        ["compare", "a", "b"],
        ["report", "x"],
        ["reverify", "x"],
        ["export-rollouts", "x", "-o", "y"],
    ):
        assert callable(parser.parse_args(argv).func)


def test_compare_stays_the_function_after_its_module_is_imported() -> None:
    """``llmgym.evaluation.compare`` is a function and a submodule's name: loading the submodule
    later (the CLI does) must not turn the package's ``compare`` into the module."""
    import subprocess
    import sys

    code = (
        "import llmgym.evaluation as e, llmgym.evaluation.compare, importlib;"
        "importlib.import_module('llmgym.evaluation.compare');"
        "from llmgym.evaluation import compare;"
        "assert callable(compare) and compare is e.compare, type(compare)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
