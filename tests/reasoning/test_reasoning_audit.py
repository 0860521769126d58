"""``llmgym audit`` on a sample of bridged families (the lenient scorers among them), and the
family listing by domain."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llmgym
from llmgym.envs.reasoning.families import FAMILIES

SAMPLE = ["gcd", "rotate_matrix", "word_sorting", "figlet_font", "advanced_geometry",
          "spell_backward", "polynomial_equations", "number_sorting", "sentence_reordering",
          "arc_1d", "countdown", "knights_knaves"]  # fmt: skip
"""Families whose scorers pay partial credit for non-answers (advanced_geometry, figlet_font,
sentence_reordering, arc_1d, countdown), contain-the-gold ratios (rotate_matrix, word_sorting,
spell_backward), distance-decay credit (polynomial_equations), an eval (number_sorting) or a
word-skipping parser (knights_knaves); gcd as the plain case."""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_audit_passes_on_the_lenient_scorers_with_the_default_gates() -> None:
    report = llmgym.audit("llm/ReasoningGym-v0", family=SAMPLE, episodes=2)
    assert report.judged and report.passed, report.table(verbose=True)
    applied = {r.hack for r in report.results if r.verdict == "pass"}
    assert {"empty", "garbage", "prompt_copy", "hedge", "hedge_with_answer"} <= applied


@pytest.mark.timeout(300)
def test_the_audit_catches_what_partial_credit_would_pay() -> None:
    """With the library's partial credit passed through, a guess pays on figlet_font: the gate matters."""
    report = llmgym.audit(
        "llm/ReasoningGym-v0",
        family=["figlet_font", "knights_knaves"],
        episodes=2,
        env_kwargs={"partial_credit": True},
        hacks=["prompt_copy", "hedge_with_answer"],
    )
    assert report.judged


@pytest.mark.timeout(300)
def test_list_families_groups_by_domain_and_counts_past_300() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "llmgym", "list", "--families"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"reasoning ({len(FAMILIES)} families)" in lines and "math (87 families)" in lines
    total = lines[-1]
    assert total.startswith("total: ") and int(total.split()[1]) > 300, total
    assert f"  llm/ReasoningGym-v0 ({len(FAMILIES)}): ab, acre," in out.stdout
