"""``llmgym eval --search``: search success beside pass@k at equal calls, in the summary, the
CLI and the HTML report (checked in headless chromium, as the report tests do)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from search_envs import LetterPolicy, LetterTreeEnv
from test_eval_report import _check_page, _self_contained

import llmgym
from llmgym import error
from llmgym.evaluation import evaluate
from llmgym.evaluation.search import summarize_search, tree_viewer

LETTERS_ID = "searchtest/Letters-v0"


@pytest.fixture(scope="module", autouse=True)
def _letters_env() -> Iterator[None]:
    llmgym.register(LETTERS_ID, LetterTreeEnv)
    yield
    gym.registry.pop(LETTERS_ID, None)


@pytest.fixture(scope="module")
def search_run(tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("search") / "run"
    evaluate(LETTERS_ID, LetterPolicy(0), out=out, samples=40, progress=False,
             search=["best_of_n:8", "beam:2x4", "mcts:120"])  # fmt: skip
    return out


def test_the_summary_puts_search_beside_pass_at_k_at_equal_calls(search_run: Path) -> None:
    summary = json.loads((search_run / "summary.json").read_text())
    block = summary["search"]["by_env"][LETTERS_ID]
    assert block["pass_at_k"]["turns_per_episode"] == 3.0
    mcts = block["methods"]["mcts:120"]
    assert mcts["success_rate"] == 1.0 and mcts["mean_calls"] <= 120
    eq = mcts["pass_at_equal_calls"]
    assert eq["calls"] <= mcts["mean_calls"] and eq["k"] == int(mcts["mean_calls"] // 3)
    bon = block["methods"]["best_of_n:8"]
    assert bon["mean_calls"] == 24 and bon["pass_at_equal_calls"]["k"] == 8
    assert not bon["pass_at_equal_calls"]["samples_short"]
    for m in block["methods"].values():
        xs = [x for x, _ in m["curve"]]
        assert xs == sorted(xs) and m["curve"][-1][1] == m["success_rate"]
    assert set(summary["search"]["trees"]) == {"best_of_n:8", "beam:2x4", "mcts:120"}
    lines = (search_run / "search.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all("tree" not in json.loads(x) for x in lines)


@pytest.mark.slow
def test_the_search_report_renders_in_a_browser(browser: Any, search_run: Path) -> None:
    path = search_run / "report.html"
    text = path.read_text()
    _self_contained(text)
    assert 'id="search"' in text and "Tree of mcts:120" in text and "<details open" in text
    result = browser(path, extra="document.querySelectorAll('#search ~ details').length")
    _check_page(result, min_images=3, title="llmgym evaluation")
    assert result["extra"] >= 3  # one tree viewer per search


def test_the_tree_viewer_escapes_and_clips() -> None:
    tree = {"root": 0, "best_path": [0, 1], "nodes": [
        {"id": 0, "action": None, "children": [1], "visits": 2, "reward": 0.0, "return": 0.0},
        {"id": 1, "action": "<script>alert(1)</script>" + "x" * 500, "children": [],
         "visits": 1, "reward": 1.0, "return": 1.0, "terminal": True, "success": True},
    ]}  # fmt: skip
    html = tree_viewer(tree)
    assert "&lt;script&gt;" in html and "<script>" not in html and "x" * 200 not in html


def test_bad_search_specs_fail_before_any_episode(tmp_path: Path) -> None:
    with pytest.raises(error.Error, match="Unknown search"):
        evaluate(LETTERS_ID, LetterPolicy(0), out=tmp_path / "r", search=["greedy:3"],
                 progress=False)  # fmt: skip
    assert not (tmp_path / "r").exists()


def test_the_cli_reports_search_and_refuses_a_bad_spec(tmp_path: Path, capsys: Any) -> None:
    from llmgym.cli import main

    assert main(["eval", LETTERS_ID, "--search", "mcts:x", "--out", str(tmp_path / "bad")]) == 2
    assert "mcts:CALLS" in capsys.readouterr().err
    code = main(["eval", LETTERS_ID, "--policy", "tests.search.search_envs:letter_c",
                 "--search", "best_of_n:2", "--out", str(tmp_path / "ok"), "--no-progress",
                 "--no-report"])  # fmt: skip
    assert code == 0
    assert "best_of_n:2: success" in capsys.readouterr().out


def test_summarize_search_with_an_errored_search() -> None:
    searches = [
        {
            "env": "e",
            "task_id": "t",
            "spec": "mcts:4",
            "success": False,
            "calls": 2,
            "tokens": 2,
            "first_success_call": None,
            "wall_s": 0.1,
            "status": "search_error",
        }
    ]
    summary = summarize_search(searches, [])
    m = summary["by_env"]["e"]["methods"]["mcts:4"]
    assert m["errors"] == 1 and m["success_rate"] == 0.0 and m["pass_at_equal_calls"] is None
