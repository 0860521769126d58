"""Verifiers and reward composition; the verifier name table that declarative envs use.

A verifier is ``verifier(response: str, gold, **options) -> RewardResult``. Names map to
``"module:function"`` paths imported on first use, so the table costs nothing at import.

>>> from llmgym.rewards import get_verifier
>>> get_verifier("numeric", abs_tol=0.01)("about 3.14", 3.14159).success
True
"""

from __future__ import annotations

import functools
import importlib
import math as _math
from collections.abc import Callable
from typing import Any

from llmgym import error
from llmgym.rewards.base import RewardResult, Rubric

Verifier = Callable[..., RewardResult]

_TABLE: dict[str, str | Verifier] = {
    "exact": "llmgym.rewards.text:exact_match",
    "numeric": "llmgym.rewards.text:numeric_match",
    "regex": "llmgym.rewards.text:regex_match",
    "json": "llmgym.rewards.text:json_match",
    "json_schema": "llmgym.rewards.text:json_schema_match",
    "math": "llmgym.rewards.math:math_verifier",
    "longdoc": "llmgym.rewards.longdoc:grade_answer",
    "math_process": "llmgym.rewards.math_process:process_verifier",
    "tool_calls": "llmgym.rewards.tools:tool_call_match",
    "unit_tests": "llmgym.envs.coding.verify:unit_tests_verifier",
}


def register_verifier(name: str, verifier: str | Verifier, *, overwrite: bool = False) -> None:
    """Add a verifier under ``name``: a callable or a ``"module:function"`` path."""
    if not isinstance(name, str) or not name or ":" in name:
        raise error.UnknownVerifier(
            f"Verifier names are non-empty and have no ':', actual: {name!r}"
        )
    if name in _TABLE and not overwrite:
        raise error.UnknownVerifier(
            f"A verifier named {name!r} exists; pass overwrite=True to replace it"
        )
    if not (callable(verifier) or (isinstance(verifier, str) and ":" in verifier)):
        raise error.UnknownVerifier(
            f"Expects a callable or a 'module:function' path, actual: {verifier!r}"
        )
    _TABLE[name] = verifier


def list_verifiers() -> list[str]:
    """The names in the verifier table."""
    return sorted(_TABLE)


def import_callable(path: str) -> Callable[..., Any]:
    """Import ``"package.module:function"``; errors say what is wrong."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise error.UnknownVerifier(f"Expects 'module:function', actual: {path!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise error.UnknownVerifier(f"Cannot import {path!r}: {e}") from None
    if not callable(obj):
        raise error.UnknownVerifier(f"{path!r} is not callable")
    return obj  # type: ignore[no-any-return]


def get_verifier(name: str | Verifier, **options: Any) -> Verifier:
    """The verifier for a table name, a ``"module:function"`` path or a callable, with
    ``options`` bound as keyword arguments.
    """
    if callable(name):
        fn: Verifier = name
    elif isinstance(name, str) and name in _TABLE:
        entry = _TABLE[name]
        fn = import_callable(entry) if isinstance(entry, str) else entry
    elif isinstance(name, str) and ":" in name:
        fn = import_callable(name)
    else:
        raise error.UnknownVerifier(
            f"No verifier named {name!r}; available: {list_verifiers()} or a 'module:function' path"
        )
    return functools.partial(fn, **options) if options else fn


def safe_verify(verifier: Verifier, response: str, gold: Any) -> RewardResult:
    """Run a verifier; a user-supplied one that raises or returns junk scores 0 with feedback."""
    try:
        result = verifier(response, gold)
    except Exception as e:  # a verifier bug must not end a training run
        return RewardResult(0.0, {"correctness": 0.0}, f"verifier error: {type(e).__name__}: {e}")
    if isinstance(result, RewardResult):
        return result
    if isinstance(result, bool):
        return RewardResult.of(result)
    try:
        score = float(result)
    except (TypeError, ValueError, OverflowError):
        score = _math.nan
    if not _math.isfinite(score):
        return RewardResult(0.0, {"correctness": 0.0}, f"verifier returned {result!r:.80}")
    return RewardResult(score, {"correctness": score}, "", score >= 1.0)


__all__ = [
    "RewardResult",
    "Rubric",
    "Verifier",
    "get_verifier",
    "import_callable",
    "list_verifiers",
    "register_verifier",
    "safe_verify",
]
