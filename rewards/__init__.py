"""Verifiers: what each domain's answers are scored by, and the reward types they return.

A verifier is ``verifier(response: str, gold, **options) -> RewardResult``. The modules here
score (``text``, ``math``, ``tools``, ``longdoc``, ``coding``); the name table and the reward
types live in the core (:mod:`llmgym.verifiers`) and are re-exported here, so
``from llmgym.rewards import get_verifier`` and ``register_verifier`` work as before.

>>> from llmgym.rewards import get_verifier
>>> get_verifier("numeric", abs_tol=0.01)("about 3.14", 3.14159).success
True
"""

from __future__ import annotations

from llmgym._moved import keep_former_paths
from llmgym.registry import import_callable
from llmgym.verifiers import (
    RewardResult,
    Rubric,
    Verifier,
    check_options,
    get_verifier,
    list_verifiers,
    register_verifier,
    safe_verify,
)

# The math verifier is a package now (llmgym.rewards.math); its process reward's former path
# still imports.
keep_former_paths(__name__, {"math_process": "llmgym.rewards.math.process"})

__all__ = [
    "RewardResult",
    "Rubric",
    "Verifier",
    "check_options",
    "get_verifier",
    "import_callable",
    "list_verifiers",
    "register_verifier",
    "safe_verify",
]
