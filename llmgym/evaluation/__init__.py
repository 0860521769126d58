"""Standardized evaluation: suites, pass@k with confidence intervals, reports, provenance,
and the data closed loop (stored rollouts, reverification, SFT export).

>>> from llmgym.evaluation import pass_at_k, load_suite
>>> pass_at_k(n=10, c=3, k=1)
0.3
>>> [e.id for e in load_suite("core-v0").envs][0]
'llm/Math-v0'
"""

from pathlib import Path
from typing import Any

# The submodule named like the function below is loaded first, so that the function is the
# package's ``compare`` for good (a submodule loaded later would replace the attribute).
from llmgym.evaluation.compare import compare_runs
from llmgym.evaluation.metrics import bootstrap_ci, pass_at_k, summarize
from llmgym.evaluation.rollouts import export_sft, read_rollouts, reverify, write_rollouts
from llmgym.evaluation.runner import EvalConfig, EvalResult, evaluate, run_evaluation
from llmgym.evaluation.suites import EnvEntry, Suite, list_suites, load_suite


def compare(a: str | Path, b: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Compare two evaluation folders (see :func:`llmgym.evaluation.compare.compare_runs`)."""
    return compare_runs(a, b, **kwargs)


__all__ = [
    "EnvEntry",
    "EvalConfig",
    "EvalResult",
    "Suite",
    "bootstrap_ci",
    "compare",
    "evaluate",
    "export_sft",
    "list_suites",
    "load_suite",
    "pass_at_k",
    "read_rollouts",
    "reverify",
    "run_evaluation",
    "summarize",
    "write_rollouts",
]
