"""Coding rewards: output comparators, return-value comparison, the sandbox rubric, and the
compliance and safety checks of code repair.

Everything here is pure scoring on plain data: strings a program printed, plain values
(``None``, bool, int, float, str, list, tuple, dict, set) the judge decoded from a program's
return value, and *static facts* (signatures, imports, calls). Nothing here runs, parses or
evaluates model code: the judge (:mod:`llmgym.envs.coding.judge`) runs it, and reads its static
facts inside the sandbox (:func:`llmgym.envs.coding.judge.program.static_facts`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llmgym.rewards.base import RewardResult, Rubric

# --- comparing what a program printed --------------------------------------------------------

OUTPUT_MODES = ("tokens", "exact", "lines", "float", "unordered")
"""How stdout is compared with the expected output (``tokens`` is the default)."""

VALUE_MODES = ("exact", "float", "unordered")
"""How a returned value is compared with the expected one."""

DEFAULT_ABS_TOL = 1e-6
DEFAULT_REL_TOL = 1e-6


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _parse_float(token: str) -> float | None:
    try:
        value = float(token)
    except (ValueError, OverflowError):
        return None
    return value


def numbers_close(
    got: float,
    expected: float,
    *,
    abs_tol: float = DEFAULT_ABS_TOL,
    rel_tol: float = DEFAULT_REL_TOL,
) -> bool:
    """Whether ``got`` is within ``abs_tol`` or ``rel_tol`` (relative to ``expected``) of it.

    >>> numbers_close(0.1 + 0.2, 0.3), numbers_close(1.0, 1.1)
    (True, False)
    >>> numbers_close(float("nan"), float("nan")), numbers_close(float("inf"), float("inf"))
    (True, True)
    """
    if math.isnan(expected) or math.isnan(got):
        return math.isnan(expected) and math.isnan(got)
    if math.isinf(expected) or math.isinf(got):
        return got == expected
    diff = abs(got - expected)
    return diff <= abs_tol or diff <= rel_tol * abs(expected)


def _float_tokens_equal(got: str, expected: str, abs_tol: float, rel_tol: float) -> bool:
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        fx, fy = _parse_float(x), _parse_float(y)
        if fx is None or fy is None or not numbers_close(fx, fy, abs_tol=abs_tol, rel_tol=rel_tol):
            return False
    return True


def compare_output(
    got: str,
    expected: str,
    mode: str = "tokens",
    *,
    abs_tol: float = DEFAULT_ABS_TOL,
    rel_tol: float = DEFAULT_REL_TOL,
) -> bool:
    """Whether a program's stdout matches the expected output under ``mode``.

    - ``tokens``: the same whitespace-separated tokens (spacing and line breaks are free);
    - ``exact``: identical text;
    - ``lines``: the same lines, trailing spaces and trailing blank lines ignored;
    - ``float``: the same tokens, numbers within ``abs_tol`` or ``rel_tol``;
    - ``unordered``: the same lines in any order (as a multiset, blank lines ignored).

    >>> compare_output("1 2\\n3\\n", "1  2 3")
    True
    >>> compare_output("1 2 3", "1 2 3\\n", "exact"), compare_output("a \\nb\\n\\n", "a\\nb", "lines")
    (False, True)
    >>> compare_output("0.3333333", "0.333333333", "float"), compare_output("0.34", "0.33", "float")
    (True, False)
    >>> compare_output("b\\na\\n", "a\\nb\\n", "unordered"), compare_output("a\\na\\n", "a\\n", "unordered")
    (True, False)
    >>> compare_output("x", "x", "fuzzy")
    Traceback (most recent call last):
    ...
    ValueError: unknown output comparison mode 'fuzzy'; choose one of ('tokens', 'exact', 'lines', 'float', 'unordered')
    """
    if mode == "tokens":
        return got.split() == expected.split()
    if mode == "exact":
        return got == expected
    if mode == "lines":
        return _lines(got) == _lines(expected)
    if mode == "float":
        return _float_tokens_equal(got, expected, abs_tol, rel_tol)
    if mode == "unordered":
        return sorted(x for x in _lines(got) if x) == sorted(x for x in _lines(expected) if x)
    raise ValueError(f"unknown output comparison mode {mode!r}; choose one of {OUTPUT_MODES}")


# --- comparing returned values ---------------------------------------------------------------


def _sort_key(value: Any) -> str:
    if type(value) is int:
        return f"int:{value:x}"  # hex: no digit limit (repr refuses ints past 4300 digits)
    try:
        return f"{type(value).__name__}:{value!r}"
    except (ValueError, RecursionError):  # an int past the limit inside, or nested too deeply
        return f"{type(value).__name__}:?"


def values_equal(
    got: Any,
    expected: Any,
    mode: str = "exact",
    *,
    abs_tol: float = DEFAULT_ABS_TOL,
    rel_tol: float = DEFAULT_REL_TOL,
) -> bool:
    """Whether a returned plain value equals the expected one.

    Both sides are plain data decoded by the judge, so no object of the program's making
    takes part in the comparison (an ``__eq__`` that always says yes never gets here).
    ``exact`` is Python's ``==`` except that lists and tuples of equal items are equal (JSON
    does not tell them apart); ``float`` compares numbers within a tolerance, recursively;
    ``unordered`` compares a top-level list as a multiset, its items as ``exact`` (or as
    ``float`` for numbers).

    It never raises on a value: one that no comparison can take (an int beyond any float
    against a float answer compares exactly; a value nested past the stack) is not equal.

    >>> values_equal([1, 2], (1, 2)), values_equal({"a": [1]}, {"a": (1,)}), values_equal(1, 1.0)
    (True, True, True)
    >>> values_equal([0.1 + 0.2], [0.3]), values_equal([0.1 + 0.2], [0.3], "float")
    (False, True)
    >>> values_equal([3, 1, 2], [1, 2, 3], "unordered"), values_equal([1, 1], [1], "unordered")
    (True, False)
    >>> values_equal({1, 2}, {2, 1}), values_equal("1", 1)
    (True, False)
    >>> values_equal(10**400, 0.5, "float"), values_equal([10**400], [1e308], "unordered")
    (False, False)
    """
    if mode not in VALUE_MODES:
        raise ValueError(f"unknown value comparison mode {mode!r}; choose one of {VALUE_MODES}")
    try:
        if mode == "exact":
            return _equal(got, expected, None)
        if mode == "float":
            return _equal(got, expected, (abs_tol, rel_tol))
        if not isinstance(got, (list, tuple)) or not isinstance(expected, (list, tuple)):
            return _equal(got, expected, (abs_tol, rel_tol))
        if len(got) != len(expected):
            return False
        a, b = sorted(got, key=_sort_key), sorted(expected, key=_sort_key)
        return all(_equal(x, y, (abs_tol, rel_tol)) for x, y in zip(a, b, strict=True))
    except (RecursionError, OverflowError, ValueError, TypeError, MemoryError):
        return False  # nested past the stack, or otherwise beyond comparing: not the answer


_SCALARS = frozenset({int, float, str, bool, type(None)})


def _close(got: int | float, expected: int | float, tol: tuple[float, float]) -> bool:
    """``numbers_close`` for any two numbers, ints beyond the float range included (exactly)."""
    try:
        return numbers_close(float(got), float(expected), abs_tol=tol[0], rel_tol=tol[1])
    except OverflowError:  # an int past 1.8e308 on one side: compare exactly
        pass
    if isinstance(got, float) and not math.isfinite(got):
        return False
    if isinstance(expected, float) and not math.isfinite(expected):
        return False
    abs_tol, rel_tol = tol
    if math.isinf(abs_tol) or math.isinf(rel_tol):
        return True
    diff = abs(Fraction(got) - Fraction(expected))
    return diff <= Fraction(abs_tol) or diff <= Fraction(rel_tol) * abs(Fraction(expected))


def _equal(got: Any, expected: Any, tol: tuple[float, float] | None) -> bool:
    if (
        tol is None
        and type(got) is list
        and type(expected) is list
        and set(map(type, got)) <= _SCALARS
        and set(map(type, expected)) <= _SCALARS
    ):
        return bool(got == expected)  # flat lists: Python's own comparison, in C
    if isinstance(expected, bool) or isinstance(got, bool):
        return bool(got == expected)  # Python's semantics: True == 1
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if tol is None or (isinstance(expected, int) and isinstance(got, int)):
            return bool(got == expected)
        return _close(got, expected, tol)
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(got) == len(expected) and all(
            _equal(x, y, tol) for x, y in zip(got, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(got, dict):
        if got.keys() != expected.keys():
            return False
        return all(_equal(got[k], expected[k], tol) for k in expected)
    if isinstance(expected, (set, frozenset)) and isinstance(got, (set, frozenset)):
        return got == expected
    if type(got) is not type(expected):
        return False
    return bool(got == expected)


# --- the sandbox rubric ----------------------------------------------------------------------

DEFAULT_WEIGHTS: dict[str, float] = {
    "pass_rate": 10.0,
    "memory": 2.0,
    "time": 1.0,
    "compile_error": -5.0,
    "timeout": -2.0,
}
"""The sandbox reward of the background articles: ``10 * pass_rate``, ``+2`` memory under the
threshold, ``+1`` time under the limit (both only when every test passes), ``-5`` compile or
syntax error, ``-2`` timeout."""

PASS_RATE_WEIGHTS: dict[str, float] = {"pass_rate": 1.0}
"""``reward="pass_rate"``: the plain pass rate in [0, 1]."""

_BONUSES = ("pass_rate", "memory", "time")
_PENALTIES = ("compile_error", "timeout")


def coding_rubric(weights: Mapping[str, float] | str | None = None) -> Rubric:
    """The rubric for ``weights``: ``None``/``"default"``, ``"pass_rate"`` or a dict that
    overrides some of :data:`DEFAULT_WEIGHTS` (bonuses >= 0, penalties <= 0).

    >>> coding_rubric().combine({"pass_rate": 1.0, "memory": 1.0, "time": 1.0})
    13.0
    >>> coding_rubric("pass_rate").combine({"pass_rate": 0.5, "compile_error": 1.0})
    0.5
    >>> coding_rubric({"timeout": -1.0}).weights["timeout"]
    -1.0
    >>> coding_rubric({"speed": 1.0})
    Traceback (most recent call last):
    ...
    ValueError: unknown reward component(s) ['speed']; expected some of ['compile_error', 'memory', 'pass_rate', 'time', 'timeout']
    """
    if weights is None or weights == "default":
        return Rubric(dict(DEFAULT_WEIGHTS))
    if weights == "pass_rate":
        return Rubric(dict(PASS_RATE_WEIGHTS))
    if isinstance(weights, str) or not isinstance(weights, Mapping):
        raise ValueError(
            f"reward expects 'default', 'pass_rate' or a dict of weights, actual: {weights!r}"
        )
    unknown = sorted(set(weights) - set(DEFAULT_WEIGHTS))
    if unknown:
        raise ValueError(
            f"unknown reward component(s) {unknown}; expected some of {sorted(DEFAULT_WEIGHTS)}"
        )
    merged = {**DEFAULT_WEIGHTS, **{k: float(v) for k, v in weights.items()}}
    for name in _BONUSES:
        if merged[name] < 0:
            raise ValueError(f"the weight of {name!r} is a bonus and must be >= 0")
    for name in _PENALTIES:
        if merged[name] > 0:
            raise ValueError(f"the weight of {name!r} is a penalty and must be <= 0")
    return Rubric(merged)


def rubric_range(rubric: Rubric) -> tuple[float, float]:
    """The lowest and highest score of one graded answer under a coding rubric.

    A compile error and a timeout never happen together (nothing runs after a compile error).

    >>> rubric_range(coding_rubric())
    (-5.0, 13.0)
    >>> rubric_range(coding_rubric("pass_rate"))
    (0.0, 1.0)
    """
    w = rubric.weights
    low = min(0.0, w.get("compile_error", 0.0), w.get("timeout", 0.0))
    high = sum(w.get(name, 0.0) for name in _BONUSES)
    return (float(low), float(high))


@dataclass(frozen=True)
class ExecFacts:
    """What grading one program established, as the rubric needs it."""

    pass_rate: float
    """Fraction of the hidden tests passed, in [0, 1]."""
    all_passed: bool
    """Every test (hidden and visible) passed."""
    compile_error: bool = False
    timeout: bool = False
    peak_memory_mb: float | None = None
    memory_threshold_mb: float | None = None
    time_s: float | None = None
    time_limit_s: float | None = None


def sandbox_reward(facts: ExecFacts, rubric: Rubric | None = None) -> RewardResult:
    """The sandbox reward: pass rate, efficiency bonuses (only when every test passes) and
    penalties, combined by ``rubric`` (default :func:`coding_rubric`).

    ``components`` holds each weighted term, so they add up to the score.

    >>> facts = ExecFacts(1.0, True, peak_memory_mb=12, memory_threshold_mb=64, time_s=0.1, time_limit_s=2)
    >>> sandbox_reward(facts).score
    13.0
    >>> sandbox_reward(ExecFacts(0.5, False, peak_memory_mb=1, memory_threshold_mb=64)).components
    {'pass_rate': 5.0, 'memory': 0.0, 'time': 0.0, 'compile_error': 0.0, 'timeout': 0.0}
    >>> sandbox_reward(ExecFacts(0.0, False, compile_error=True)).score
    -5.0
    >>> sandbox_reward(ExecFacts(0.0, False, timeout=True)).score
    -2.0
    """
    rubric = rubric or coding_rubric()
    memory_ok = (
        facts.all_passed
        and facts.peak_memory_mb is not None
        and facts.memory_threshold_mb is not None
        and facts.peak_memory_mb <= facts.memory_threshold_mb
    )
    time_ok = (
        facts.all_passed
        and facts.time_s is not None
        and facts.time_limit_s is not None
        and facts.time_s <= facts.time_limit_s
    )
    raw = {
        "pass_rate": min(max(float(facts.pass_rate), 0.0), 1.0),
        "memory": float(memory_ok),
        "time": float(time_ok),
        "compile_error": float(facts.compile_error),
        "timeout": float(facts.timeout and not facts.compile_error),
    }
    success = facts.all_passed and not facts.compile_error
    components = {name: value + 0.0 for name, value in rubric.weighted(raw).items()}  # no -0.0
    return RewardResult(rubric.combine(raw) + 0.0, components, "", success)


# --- compliance and safety: what static facts say about a fix ------------------------------


def signature_changes(
    original: Mapping[str, str], candidate: Mapping[str, str], *, exempt: Iterable[str] = ()
) -> list[str]:
    """Public functions of ``original`` whose signature ``candidate`` changed or dropped.

    Both arguments map function names to signatures (the ``"functions"`` of a program's static
    facts);
    names starting with ``_`` are private and names in ``exempt`` may change.

    >>> signature_changes({"f": "a", "g": "a, b=1", "_h": "x"}, {"f": "a, b", "_h": "y"}, exempt=["f"])
    ['g: removed']
    >>> signature_changes({"g": "a, b=1"}, {"g": "a, b=2"})
    ['g: (a, b=1) became (a, b=2)']
    """
    skip = set(exempt)
    changes = []
    for name, sig in original.items():
        if name.startswith("_") or name in skip:
            continue
        if name not in candidate:
            changes.append(f"{name}: removed")
        elif candidate[name] != sig:
            changes.append(f"{name}: ({sig}) became ({candidate[name]})")
    return changes


def compliance_score(
    original: Mapping[str, str], candidate: Mapping[str, str], *, exempt: Iterable[str] = ()
) -> float:
    """Fraction of the untouched public functions whose signature is unchanged (1 if none).

    >>> compliance_score({"f": "a", "g": "b", "h": "c"}, {"f": "a", "g": "b, c"}, exempt=["h"])
    0.5
    """
    skip = set(exempt)
    guarded = [n for n in original if not n.startswith("_") and n not in skip]
    if not guarded:
        return 1.0
    broken = len(signature_changes(original, candidate, exempt=exempt))
    return (len(guarded) - broken) / len(guarded)


def forbidden_uses(
    facts: Mapping[str, Sequence[str]],
    *,
    imports: Iterable[str] = (),
    calls: Iterable[str] = (),
) -> list[str]:
    """The forbidden imports (a module or any submodule of it) and calls found in ``facts``.

    >>> facts = {"imports": ["os.path", "subprocess"], "calls": ["eval"]}
    >>> forbidden_uses(facts, imports=["os", "socket"], calls=["eval", "exec"])
    ['import os.path', 'call eval()']
    """
    banned_modules = set(imports)
    banned_calls = set(calls)
    found = []
    for module in facts.get("imports", ()):
        root = module.lstrip(".").split(".")[0]
        if module in banned_modules or root in banned_modules:
            found.append(f"import {module}")
    found.extend(f"call {name}()" for name in facts.get("calls", ()) if name in banned_calls)
    return found


__all__ = [
    "DEFAULT_WEIGHTS",
    "OUTPUT_MODES",
    "PASS_RATE_WEIGHTS",
    "VALUE_MODES",
    "ExecFacts",
    "coding_rubric",
    "compare_output",
    "compliance_score",
    "forbidden_uses",
    "numbers_close",
    "rubric_range",
    "sandbox_reward",
    "signature_changes",
    "values_equal",
]
