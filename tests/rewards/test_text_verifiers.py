"""The text verifiers and the verifier table: right answers, wrong ones, hostile ones."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgym import error
from llmgym.rewards import get_verifier, list_verifiers, register_verifier, safe_verify
from llmgym.rewards.base import RewardResult, Rubric
from llmgym.rewards.text import (
    exact_match,
    extract,
    json_match,
    json_schema_match,
    numeric_match,
    parse_number,
    regex_match,
    wrap_for,
)

HOSTILE = ["", "\x00" * 100, "\ud800", "a" * 10_000_000, "[" * 100_000, "{" * 50_000 + "}" * 50_000]


@pytest.mark.parametrize("verifier", ["exact", "numeric", "regex", "json", "json_schema"])
@pytest.mark.parametrize(
    "response", HOSTILE, ids=["empty", "nul", "surrogate", "10MB", "brackets", "braces"]
)
def test_verifiers_survive_hostile_responses_quickly(verifier, response):
    gold = {
        "exact": "yes",
        "numeric": "3",
        "regex": r"\d+",
        "json": {"a": 1},
        "json_schema": {"type": "object"},
    }
    start = time.perf_counter()
    result = get_verifier(verifier)(response, gold[verifier])
    assert isinstance(result, RewardResult) and result.score == 0.0 and not result.success
    assert time.perf_counter() - start < 2.0


def test_exact_match_normalizes_but_stays_exact():
    assert exact_match("  PARIS\n", "paris").success
    assert exact_match("Ｐａｒｉｓ", "Paris").success  # NFKC folds full-width letters
    assert not exact_match("Paris!", "Paris").success
    assert exact_match("Paris!", "Paris", strip_punctuation=True).success
    assert not exact_match("paris", "Paris", case_sensitive=True).success
    assert exact_match("Lyon", ["Paris", "Lyon"]).success


@pytest.mark.parametrize(
    "response, gold, kwargs, ok",
    [
        ("42", 42, {}, True),
        ("The answer is 1,234 apples", "1234", {}, True),
        ("−7", "-7", {}, True),
        ("2.50", "5/2", {}, True),
        ("1e3", 1000, {}, True),
        ("0.333", "1/3", {}, False),
        ("0.333", "1/3", {"abs_tol": 0.001}, True),
        ("101", "100", {"rel_tol": 0.02}, True),
        ("3 or 4", 4, {}, False),
        ("4 4", 4, {}, True),  # the same number twice is no hedge
        ("4, so 4", 4, {}, True),
        ("1 000 000", 1000000, {}, True),
        ("1,2", 12, {}, False),
        ("no idea", 4, {}, False),
        ("1e999999", 1, {}, False),
        ("5", "not a number", {}, False),
        ("7/0", 7, {}, False),
    ],
)
def test_numeric_match(response, gold, kwargs, ok):
    assert numeric_match(response, gold, **kwargs).success is ok


@given(st.fractions(max_denominator=1000))
def test_numeric_match_accepts_its_own_fraction(value):
    assert numeric_match(f"{value.numerator}/{value.denominator}", str(value)).success
    assert parse_number(f"{value.numerator}/{value.denominator}") == value


def test_regex_json_and_schema():
    assert (
        regex_match("ID-0042", r"ID-\d{4}").success
        and not regex_match("ID-42x", r"ID-\d{4}").success
    )
    assert regex_match("see ID-0042 here", r"ID-\d{4}", fullmatch=False).success
    assert "does not compile" in regex_match("x", "(").feedback
    assert json_match('{"a": 1}', {"a": 1}).success and not json_match("1", True).success
    assert not json_match("{'a': 1}", {"a": 1}).success
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": 3}
    assert json_schema_match("[1, 2]", schema).success
    assert "schema violation" in json_schema_match("[1, 2, 3, 4]", schema).feedback
    assert "schema is invalid" in json_schema_match("[1]", {"type": "nonsense"}).feedback


@pytest.mark.parametrize(
    "how", [None, "answer_tag", "answer_line", "last_line", "regex:RESULT=(\\w+)"]
)
def test_extract_and_wrap_round_trip(how):
    response = (
        wrap_for(how, "RESULT=ok") if how and how.startswith("regex") else wrap_for(how, "ok")
    )
    assert extract("thinking first\n" + response if how else response, how) in ("ok", "RESULT=ok")
    assert extract("nothing here", "answer_tag") is None
    with pytest.raises(ValueError, match="Unknown extraction"):
        extract("x", "psychic")


def test_verifier_table():
    assert {"exact", "numeric", "regex", "json", "json_schema", "math"} <= set(list_verifiers())
    with pytest.raises(error.UnknownVerifier, match="available"):
        get_verifier("nope")
    with pytest.raises(error.UnknownVerifier, match="Cannot import"):
        get_verifier("no.such.module:fn")
    with pytest.raises(error.UnknownVerifier, match="exists"):
        register_verifier("exact", exact_match)
    register_verifier("always_half", lambda response, gold: 0.5, overwrite=True)
    assert safe_verify(get_verifier("always_half"), "x", None).score == 0.5
    assert get_verifier("llmgym.rewards.text:exact_match")("a", "A").success


def test_safe_verify_contains_user_bugs():
    def crash(response, gold):
        raise KeyError("bug")

    assert "verifier error: KeyError" in safe_verify(crash, "x", 1).feedback
    assert safe_verify(lambda r, g: float("nan"), "x", 1).score == 0.0
    assert safe_verify(lambda r, g: "junk", "x", 1).score == 0.0
    assert safe_verify(lambda r, g: True, "x", 1).success


def test_rubric_combines_components():
    rubric = Rubric({"correctness": 10, "efficiency": 2})
    assert rubric.combine({"correctness": 0.5, "efficiency": 1, "other": 5}) == 7.0
    assert rubric.weighted({"correctness": 1}) == {"correctness": 10.0, "efficiency": 0.0}
    with pytest.raises(ValueError):
        Rubric({"x": float("inf")})
