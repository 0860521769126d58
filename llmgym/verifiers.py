"""Verifiers in the core: the reward types, and the name table every verifier is reached by.

A verifier is ``verifier(response: str, gold, **options) -> RewardResult``. The table maps
names to ``"module:function"`` paths, imported on first use (as env entry points are), so the
core names the built-in verifiers of ``llmgym.rewards`` and of the domains without importing
them; ``llmgym.rewards`` re-exports all of this. What a verifier scores lives in the rewards
layer, never here.

>>> from llmgym.verifiers import get_verifier
>>> get_verifier("numeric", abs_tol=0.01)("about 3.14", 3.14159).success
True
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llmgym import error
from llmgym.registry import import_callable


@dataclass(frozen=True)
class RewardResult:
    """What a verifier says about one answer.

    ``score`` is the scalar reward, ``components`` its named parts (the reward matrix),
    ``feedback`` what the model may be told, ``success`` whether the answer is right. When
    ``success`` is not given it follows the score: ``score >= 1.0`` (full marks on the usual
    0..1 scale); a verifier on another scale says ``success=`` itself.

    >>> RewardResult.of(True, "correct")
    RewardResult(score=1.0, components={'correctness': 1.0}, feedback='correct', success=True)
    >>> RewardResult(1.0).success, RewardResult(0.5).success, RewardResult(0.5, success=True).success
    (True, False, True)
    """

    score: float
    components: dict[str, float] = field(default_factory=dict)
    feedback: str = ""
    success: bool = None  # type: ignore[assignment]  # None: derived from the score

    def __post_init__(self) -> None:
        score = float(self.score)
        if not math.isfinite(score):
            raise ValueError(f"A reward must be finite, actual: {self.score!r}")
        object.__setattr__(self, "score", score)
        object.__setattr__(
            self, "success", score >= 1.0 if self.success is None else bool(self.success)
        )
        object.__setattr__(
            self, "components", {str(k): float(v) for k, v in self.components.items()}
        )

    @classmethod
    def of(cls, correct: bool, feedback: str = "") -> RewardResult:
        """A 0/1 result with a single ``correctness`` component."""
        value = 1.0 if correct else 0.0
        return cls(value, {"correctness": value}, feedback, bool(correct))


@dataclass(frozen=True)
class Rubric:
    """Weights that combine named reward components into one scalar.

    >>> Rubric({"correctness": 10.0, "format": 1.0}).combine({"correctness": 0.5, "format": 1.0})
    6.0
    """

    weights: Mapping[str, float]

    def __post_init__(self) -> None:
        for name, w in self.weights.items():
            if not math.isfinite(float(w)):
                raise ValueError(f"Rubric weight {name!r} must be finite, actual: {w!r}")
        object.__setattr__(self, "weights", {k: float(v) for k, v in self.weights.items()})

    def combine(self, components: Mapping[str, float]) -> float:
        """Sum of ``weight * component`` over the rubric's components (missing ones count 0)."""
        return sum(w * float(components.get(name, 0.0)) for name, w in self.weights.items())

    def weighted(self, components: Mapping[str, float]) -> dict[str, float]:
        """Each component times its weight: what ``reward_components`` reports."""
        return {name: w * float(components.get(name, 0.0)) for name, w in self.weights.items()}


Verifier = Callable[..., RewardResult]

_TABLE: dict[str, str | Verifier] = {
    "exact": "llmgym.rewards.text:exact_match",
    "numeric": "llmgym.rewards.text:numeric_match",
    "regex": "llmgym.rewards.text:regex_match",
    "json": "llmgym.rewards.text:json_match",
    "json_schema": "llmgym.rewards.text:json_schema_match",
    "math": "llmgym.rewards.math:math_verifier",
    "longdoc": "llmgym.rewards.longdoc:grade_answer",
    "math_process": "llmgym.rewards.math.process:process_verifier",
    "tool_calls": "llmgym.rewards.tools:tool_call_match",
    "unit_tests": "llmgym.envs.coding.judge.verifier:unit_tests_verifier",
    "ruff": "llmgym.rewards.compliance:ruff_standards",
    "format_regex": "llmgym.rewards.compliance:regex_format",
    "format_json": "llmgym.rewards.compliance:json_format",
    "process_steps": "llmgym.rewards.compliance:process_steps",
    "safety": "llmgym.rewards.safety:safety_terms",
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


def _option_kinds(fn: Callable[..., Any]) -> tuple[dict[str, Any], bool] | None:
    """A verifier's options (every parameter after the response and the gold) with their
    annotations, and whether it takes any keyword (``**options``); None when unknowable."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: names are still checked
        hints = {}
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][
        :2
    ]  # the response and the gold
    options = {
        p.name: hints.get(p.name, p.annotation)
        for p in params
        if p not in positional and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    return options, any(p.kind == p.VAR_KEYWORD for p in params)


_SIMPLE = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def check_options(fn: Callable[..., Any], options: Mapping[str, Any], name: str = "") -> None:
    """Refuse options a verifier does not take (with a did-you-mean) and values of the wrong
    plain type (a ``bool`` option given ``"no"``); raises :class:`llmgym.error.InvalidSpec`."""
    kinds = _option_kinds(fn)
    if kinds is None:
        return
    accepted, free = kinds
    label = f"verifier {name!r}" if name else "the verifier"
    for key, value in options.items():
        if key not in accepted:
            if free:
                continue
            hint = error.did_you_mean(str(key), accepted)
            raise error.InvalidSpec(
                f"{label} has no option {key!r}{hint} Its options: {sorted(accepted) or 'none'}"
            )
        kind = accepted[key]
        allowed = _SIMPLE.get(kind)
        if allowed is not None and (
            not isinstance(value, allowed) or (kind is not bool and isinstance(value, bool))
        ):
            raise error.InvalidSpec(
                f"{label}: option {key!r} expects {kind.__name__}, actual: {value!r}"
            )


def get_verifier(name: str | Verifier, **options: Any) -> Verifier:
    """The verifier for a table name, a ``"module:function"`` path or a callable, with
    ``options`` bound as keyword arguments (checked against its signature: an option it does
    not take, or a plain value of the wrong type, is an :class:`llmgym.error.InvalidSpec`).
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
    if options:
        label = name if isinstance(name, str) else ""
        check_options(fn, options, label)
        validate_options(fn, options, label)
        return functools.partial(fn, **options)
    return fn


def validate_options(fn: Callable[..., Any], options: Mapping[str, Any], name: str = "") -> None:
    """Run a verifier's own check of its option values (``fn.validate_options(**options)``,
    when it has one: a pattern that does not compile, a rule set ruff refuses), so a bad spec
    fails when it is registered; raises :class:`llmgym.error.InvalidSpec`."""
    check = getattr(fn, "validate_options", None)
    if check is None:
        return
    try:
        check(**options)
    except (ValueError, TypeError) as e:
        label = f"verifier {name!r}" if name else "the verifier"
        raise error.InvalidSpec(f"{label}: {e}") from None


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
        score = math.nan
    if not math.isfinite(score):
        return RewardResult(0.0, {"correctness": 0.0}, f"verifier returned {result!r:.80}")
    return RewardResult(score, {"correctness": score}, "", score >= 1.0)


__all__ = [
    "RewardResult",
    "Rubric",
    "Verifier",
    "check_options",
    "get_verifier",
    "list_verifiers",
    "register_verifier",
    "safe_verify",
    "validate_options",
]
