"""``unit_tests``: the coding judge as a verifier, for declarative envs and other domains.

``unit_tests_verifier(response, gold)`` extracts the program from ``response`` and runs it in
the sandbox against ``gold``, a coding task answer (see :mod:`llmgym.envs.coding.problem`): it
returns the pass rate of the hidden tests, full success only when every test passes. It is the
verifier table's entry point into the judge, not a reward of its own: the coding envs score
verdicts with :mod:`llmgym.rewards.coding`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmgym import error
from llmgym.envs.coding.extract import extract_code
from llmgym.envs.coding.judge.job import run_tests
from llmgym.envs.coding.judge.verdicts import describe
from llmgym.envs.coding.problem import Problem
from llmgym.rewards.base import RewardResult
from llmgym.sandbox import Sandbox


def unit_tests_verifier(
    response: str,
    gold: Mapping[str, Any],
    *,
    language: str = "python",
    sandbox: Sandbox | None = None,
) -> RewardResult:
    """The hidden-test pass rate of the program in ``response`` (``gold``: a coding answer).

    Never raises on the response; a malformed ``gold`` scores 0 with feedback saying why.
    """
    try:
        problem = Problem.from_answer(gold, where="unit_tests gold")
    except error.InvalidTask as e:
        return RewardResult(0.0, {"correctness": 0.0}, f"cannot grade: {e}", False)
    code = extract_code(response if isinstance(response, str) else "", language)
    if code is None:
        return RewardResult(0.0, {"correctness": 0.0}, "no code found in the answer", False)
    if problem.header and language == "python":
        code = problem.header.rstrip("\n") + "\n" + code
    verdict = run_tests(code, problem, language=language, sandbox=sandbox)
    rate = verdict.pass_rate if verdict.status != "sandbox_error" else 0.0
    return RewardResult(rate, {"correctness": rate}, describe(verdict, problem), verdict.all_passed)
