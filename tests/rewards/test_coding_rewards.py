"""rewards/coding.py: comparators, the sandbox rubric, compliance and safety checks."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmgym.envs.coding.judge.program import static_facts
from llmgym.rewards.base import Rubric
from llmgym.rewards.coding import (
    DEFAULT_WEIGHTS,
    OUTPUT_MODES,
    VALUE_MODES,
    ExecFacts,
    coding_rubric,
    compare_output,
    compliance_score,
    forbidden_uses,
    rubric_range,
    sandbox_reward,
    signature_changes,
    values_equal,
)

# --- output comparators -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("got", "expected", "mode", "ok"),
    [
        ("1 2\n3", "1 2 3\n", "tokens", True),
        ("1 2 3", "1 2 4", "tokens", False),
        ("", "", "tokens", True),
        ("", "0", "tokens", False),
        ("a\n", "a\n", "exact", True),
        ("a", "a\n", "exact", False),
        ("a  \nb\n\n\n", "a\nb", "lines", True),
        ("a b\n", "a  b\n", "lines", False),
        ("3.14159265", "3.1415926", "float", True),
        ("3.15", "3.14", "float", False),
        ("x 1.0", "x 1", "float", True),
        ("x 1.0", "y 1", "float", False),
        ("nan", "nan", "float", True),
        ("inf", "1e308", "float", False),
        ("b\na\n", "a\nb", "unordered", True),
        ("a\na\nb", "a\nb\nb", "unordered", False),
    ],
)
def test_compare_output_modes(got, expected, mode, ok):
    assert compare_output(got, expected, mode) is ok


def test_float_tolerances_are_honoured():
    assert compare_output("1.05", "1.0", "float", abs_tol=0.1)
    assert not compare_output("1.05", "1.0", "float", abs_tol=0.01, rel_tol=0.0)
    assert compare_output("1000001", "1000000", "float", abs_tol=0.0, rel_tol=1e-5)


def test_unknown_mode_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="unknown output comparison mode"):
        compare_output("a", "a", "close-enough")


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(OUTPUT_MODES))
def test_any_text_equals_itself_and_never_raises(text, mode):
    assert compare_output(text, text, mode)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text(), st.sampled_from(OUTPUT_MODES))
def test_comparison_never_raises_on_hostile_output(got, expected, mode):
    assert isinstance(compare_output(got, expected, mode), bool)


# --- value comparison ---------------------------------------------------------------------------

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_plain_values_equal_themselves(value):
    assert values_equal(value, value)
    assert values_equal(value, value, "float")


def test_values_equal_semantics():
    assert values_equal([1, 2], (1, 2))
    assert not values_equal([1, 2], [2, 1])
    assert values_equal([2, 1], [1, 2], "unordered")
    assert not values_equal({"a": 1}, {"a": 1, "b": 2})
    assert not values_equal("1", 1)
    assert not values_equal(None, 0)
    assert values_equal(0.1 + 0.2, 0.3, "float")
    assert not values_equal(0.1 + 0.2, 0.3)
    assert values_equal(float("nan"), float("nan"), "float")
    assert not values_equal([[1, 2]], [[1, 2, 3]], "unordered")
    with pytest.raises(ValueError):
        values_equal(1, 1, "approximately")


# --- hostile values: a wrong answer, never an exception --------------------------------------

huge_ints = st.integers(min_value=10**300, max_value=10**500) | st.integers(
    min_value=-(10**500), max_value=-(10**300)
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | huge_ints
    | st.floats()  # NaN and infinities included
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
hashable = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
hostile = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | hashable, inner, max_size=3)
        | st.sets(hashable, max_size=3)
        | st.frozensets(hashable, max_size=3)
    ),
    max_leaves=20,
)
tolerances = st.floats(min_value=0, max_value=1e300) | st.sampled_from([0.0, 1e-6, float("inf")])


@settings(max_examples=500, deadline=None, derandomize=True)
@given(hostile, hostile, st.sampled_from(VALUE_MODES), tolerances, tolerances)
@example(10**400, 0.5, "float", 1e-6, 1e-6)
@example([10**400], [0.5], "unordered", 1e-6, 1e-6)
@example({"a": (1, -(10**4000))}, {"a": (1, 2.5)}, "float", 0.0, 0.0)
def test_hostile_values_never_crash_the_comparator(got, expected, mode, abs_tol, rel_tol):
    """Huge ints against floats (OverflowError in float()), NaN, infinities, bytes, sets of
    mixed types, dicts with tuple keys: values_equal answers, it never raises."""
    out = values_equal(got, expected, mode, abs_tol=abs_tol, rel_tol=rel_tol)
    assert isinstance(out, bool)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(huge_ints | st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=4),
    st.sampled_from(VALUE_MODES),
)
def test_a_value_holding_a_huge_int_never_equals_a_float_answer(got, mode):
    if not any(isinstance(x, int) for x in got):
        got = [*got, 10**400]
    expected = [0.5] * len(got)
    assert not values_equal(got, expected, mode)
    assert not values_equal(got[0] if isinstance(got[0], int) else got[-1], 0.5, mode)


def test_huge_ints_are_wrong_answers_in_every_mode():
    for mode in VALUE_MODES:
        assert not values_equal(10**400, 0.5, mode)
        assert not values_equal([10**400, 1], [0.5, 1.0], mode)
        assert not values_equal({"a": -(10**400)}, {"a": 1e308}, mode)
        assert not values_equal(0.5, 10**400, mode)
        assert values_equal(10**400, 10**400, mode)
    assert values_equal(10**20, 1e20, "float") and not values_equal(10**400, float("inf"), "float")
    assert not values_equal([b"x", 1], [1, b"x"], "exact")
    assert values_equal([b"x", 1, 10**5000], [1, 10**5000, b"x"], "unordered")


deep = st.recursive(
    st.just([]), lambda inner: st.lists(inner, min_size=1, max_size=1), max_leaves=3
)


def _nest(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_values_are_compared_or_refused_never_crash():
    for depth in (10, 500, 5000):
        for mode in VALUE_MODES:
            assert isinstance(values_equal(_nest(depth), _nest(depth), mode), bool)
            assert not values_equal(_nest(depth), [1.0], mode)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.text() | st.sampled_from(["9" * 5000, "1e999 -1e999 nan inf", "\udcff\x00", "0.5 " * 3000]),
    st.text(max_size=30) | st.sampled_from(["0.5 1.5", "nan", "inf", "9" * 400]),
    st.sampled_from(OUTPUT_MODES),
    tolerances,
    tolerances,
)
def test_hostile_output_never_crashes_the_stdio_comparator(got, expected, mode, abs_tol, rel_tol):
    assert isinstance(compare_output(got, expected, mode, abs_tol=abs_tol, rel_tol=rel_tol), bool)


# --- the rubric ---------------------------------------------------------------------------------


def _facts(**kw):
    base = {"pass_rate": 1.0, "all_passed": True, "peak_memory_mb": 10.0, "memory_threshold_mb": 64.0,
            "time_s": 0.1, "time_limit_s": 2.0}  # fmt: skip
    base.update(kw)
    return ExecFacts(**base)


def test_full_marks_are_13_with_each_term_reported():
    result = sandbox_reward(_facts())
    assert result.score == 13.0 and result.success
    assert result.components == {"pass_rate": 10.0, "memory": 2.0, "time": 1.0,
                                 "compile_error": 0.0, "timeout": 0.0}  # fmt: skip
    assert sum(result.components.values()) == result.score


def test_bonuses_only_when_every_test_passes():
    partial = sandbox_reward(_facts(pass_rate=0.9, all_passed=False))
    assert partial.score == pytest.approx(9.0)
    assert partial.components["memory"] == 0.0 and partial.components["time"] == 0.0
    empty = sandbox_reward(_facts(pass_rate=0.0, all_passed=False))
    assert empty.score == 0.0  # an empty program earns nothing


def test_efficiency_bonuses_follow_their_thresholds():
    assert sandbox_reward(_facts(peak_memory_mb=100.0)).score == 11.0
    assert sandbox_reward(_facts(time_s=3.0)).score == 12.0
    assert sandbox_reward(_facts(time_s=None, peak_memory_mb=None)).score == 10.0


def test_penalties():
    assert sandbox_reward(_facts(pass_rate=0, all_passed=False, compile_error=True)).score == -5.0
    assert sandbox_reward(_facts(pass_rate=0.5, all_passed=False, timeout=True)).score == 3.0
    both = sandbox_reward(_facts(pass_rate=0, all_passed=False, compile_error=True, timeout=True))
    assert both.score == -5.0  # nothing ran, so no timeout on top


def test_rubric_options():
    assert coding_rubric().weights == DEFAULT_WEIGHTS
    assert rubric_range(coding_rubric()) == (-5.0, 13.0)
    plain_rate = coding_rubric("pass_rate")
    assert rubric_range(plain_rate) == (0.0, 1.0)
    assert sandbox_reward(_facts(pass_rate=0.25, all_passed=False), plain_rate).score == 0.25
    assert (
        sandbox_reward(_facts(compile_error=True, pass_rate=0, all_passed=False), plain_rate).score
        == 0.0
    )
    custom = coding_rubric({"memory": 0.0, "compile_error": -1.0})
    assert rubric_range(custom) == (-2.0, 11.0)
    for bad in ({"pass_rate": -1.0}, {"timeout": 1.0}, {"style": 1.0}, "strict", 3):
        with pytest.raises(ValueError):
            coding_rubric(bad)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, 1), st.booleans(), st.booleans(), st.booleans(),
    st.floats(0, 500), st.floats(0, 10),
)  # fmt: skip
def test_reward_stays_in_range(rate, all_passed, compile_error, timeout, memory, time_s):
    facts = ExecFacts(rate, all_passed, compile_error, timeout, memory, 64.0, time_s, 2.0)
    for rubric in (coding_rubric(), coding_rubric("pass_rate")):
        lo, hi = rubric_range(rubric)
        score = sandbox_reward(facts, rubric).score
        assert lo - 1e-9 <= score <= hi + 1e-9 and math.isfinite(score)


def test_rubric_type_accepts_a_rubric():
    assert sandbox_reward(_facts(), Rubric({"pass_rate": 2.0})).score == 2.0


# --- static facts, compliance, safety -----------------------------------------------------------

MODULE = """
import os.path as osp
from collections import Counter
def public(a, b=1, *args, key=None, **kw):
    return eval("1")
async def fetch(url, /, timeout=3.0):
    pass
def _private(x):
    return open(x)
class Thing:
    def method(self):
        __import__("sys")
"""


def test_static_facts_reads_signatures_imports_and_calls():
    facts = static_facts(MODULE)
    assert facts["functions"] == {
        "public": "a, b=1, *args, key=None, **kw",
        "fetch": "url, /, timeout=3.0",
        "_private": "x",
    }
    assert facts["imports"] == ["collections", "os.path"]
    assert {"eval", "open", "__import__"} <= set(facts["calls"])


@pytest.mark.parametrize(
    "source", ["def f(:\n", "(" * 5000, "x = " + "-" * 100000 + "1", "\x00"]
)  # fmt: skip
def test_static_facts_on_hostile_source_raises_the_documented_errors(source):
    with pytest.raises((SyntaxError, RecursionError, MemoryError, ValueError)):
        static_facts(source)


def test_signature_changes_and_compliance():
    original = static_facts("def a(x): pass\ndef b(x, y=2): pass\ndef c(): pass\ndef _h(): pass")[
        "functions"
    ]
    same = static_facts("def a(x, z=0): pass\ndef b(x, y=2):\n    return 1\ndef c(): pass")[
        "functions"
    ]
    assert signature_changes(original, same, exempt=["a"]) == []
    assert compliance_score(original, same, exempt=["a"]) == 1.0
    changed = static_facts("def a(x): pass\ndef b(x, y=3): pass")["functions"]
    assert signature_changes(original, changed, exempt=["a"]) == [
        "b: (x, y=2) became (x, y=3)",
        "c: removed",
    ]
    assert compliance_score(original, changed, exempt=["a"]) == 0.0
    assert compliance_score({}, {}) == 1.0


def test_forbidden_uses():
    facts = static_facts(
        "import subprocess\nfrom os import path\nimport ossify\nexec('1')\nprint(2)"
    )
    found = forbidden_uses(facts, imports=["os", "subprocess"], calls=["exec", "eval"])
    assert found == ["import os", "import subprocess", "call exec()"]
    assert (
        forbidden_uses(static_facts("import json\njson.dumps(1)"), imports=["os"], calls=["eval"])
        == []
    )
