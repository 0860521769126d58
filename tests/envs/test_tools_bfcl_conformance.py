"""llmgym's verdicts against BFCL's own checkers on BFCL's shipped data: the AST checker on gold and
perturbed calls of every AST category, the multi-turn checker on ground-truth and perturbed
trajectories of every multi-turn category (played in the env on BFCL's backends)."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip(
    "bfcl_eval",
    reason="BFCL's checkers come from the optional bfcl-eval package: "
    "pip install --no-deps bfcl-eval==2026.3.23",
)

from llmgym.envs.tools.bfcl import CATEGORIES, conformance, kind_of, load_bfcl  # noqa: E402

AST_CATEGORIES = [c for c in CATEGORIES if kind_of(c) == "ast"]
MULTI_TURN_CATEGORIES = [c for c in CATEGORIES if kind_of(c) == "multi_turn"]
AGREEMENT = 0.999


@pytest.mark.slow
@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_ast_verdicts_agree_with_bfcls_ast_checker(category: str) -> None:
    cases = [case for task in load_bfcl(category) for case in conformance.ast_cases(task)]
    differ = []
    for case in cases:
        ours, theirs = conformance.llmgym_ast(case), conformance.bfcl_ast(case)
        if ours != theirs:
            differ.append((case, ours))
    assert len(cases) > 10 * len(load_bfcl(category))
    assert sum(c.label == "gold" for c in cases) == len(load_bfcl(category))
    assert 1 - len(differ) / len(cases) >= AGREEMENT, [conformance.describe(c) for c, _ in differ]
    # The one rule that differs: BFCL pairs parallel calls with the answers greedily, in the
    # answers' order, and so rejects some correct orderings that a maximum matching accepts.
    assert all(ours and case.label == "reorder calls" for case, ours in differ), [
        conformance.describe(c) for c, _ in differ
    ]


def test_ast_gold_is_accepted_by_both_checkers_everywhere() -> None:
    for category in AST_CATEGORIES:
        for task in load_bfcl(category):
            gold = next(conformance.ast_cases(task))
            assert conformance.llmgym_ast(gold), task.id
            assert conformance.bfcl_ast(gold), task.id


@pytest.mark.slow
@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_multi_turn_verdicts_agree_with_bfcls_multi_turn_checker(category: str) -> None:
    env = gym.make("llm/FunctionCalling-v0", call_format="python")
    cases = [case for task in load_bfcl(category) for case in conformance.multi_turn_cases(task)]
    verdicts = [
        (conformance.llmgym_multi_turn(c, env), conformance.bfcl_multi_turn(c)) for c in cases
    ]
    differ = [conformance.describe(c) for c, (a, b) in zip(cases, verdicts, strict=True) if a != b]
    assert len(cases) >= 8 * len(load_bfcl(category))
    assert 1 - len(differ) / len(cases) >= AGREEMENT, differ[:10]
    labels = {(c.label, b) for c, (_, b) in zip(cases, verdicts, strict=True)}
    assert ("gold", True) in labels and ("skip a turn", False) in labels  # both verdicts occur


def test_checker_alone_gives_the_env_verdicts() -> None:
    env = gym.make("llm/FunctionCalling-v0", call_format="hermes")
    for category in MULTI_TURN_CATEGORIES:
        for task in load_bfcl(category)[:15]:
            for case in conformance.multi_turn_cases(task):
                assert conformance.llmgym_multi_turn_checker(case) == conformance.llmgym_multi_turn(
                    case, env
                ), conformance.describe(case)
