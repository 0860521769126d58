"""Text verifiers: exact, numeric, regex, JSON and JSON Schema.

Each verifier is ``verifier(response, gold, **options) -> RewardResult``: pure, never raises
on model output, never evaluates it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from llmgym.answers import MAX_REGEX_INPUT, extract, wrap_for
from llmgym.rewards.base import RewardResult

_WS = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]")


def normalize_text(
    text: str, *, case_sensitive: bool = False, strip_punctuation: bool = False
) -> str:
    """NFKC, collapsed whitespace, stripped; lowercased unless ``case_sensitive``;
    ``strip_punctuation`` drops every character that is neither a word character nor space.

    >>> normalize_text("  Hello,\\n  World ")
    'hello, world'
    >>> normalize_text("Hello, World!", strip_punctuation=True)
    'hello world'
    """
    text = unicodedata.normalize("NFKC", text)
    if strip_punctuation:
        text = _PUNCT.sub("", text)
    text = _WS.sub(" ", text).strip()
    return text if case_sensitive else text.casefold()


def _golds(gold: Any) -> list[str]:
    if isinstance(gold, (list, tuple)):
        return [str(g) for g in gold]
    return [str(gold)]


def exact_match(
    response: str,
    gold: str | Sequence[str],
    *,
    case_sensitive: bool = False,
    strip_punctuation: bool = False,
) -> RewardResult:
    """1 if the normalized response equals the gold (or any of a list of golds).

    >>> exact_match(" Paris ", "paris").success
    True
    >>> exact_match("Paris or Lyon", "Paris").score
    0.0
    """
    got = normalize_text(
        response, case_sensitive=case_sensitive, strip_punctuation=strip_punctuation
    )
    ok = any(
        got == normalize_text(g, case_sensitive=case_sensitive, strip_punctuation=strip_punctuation)
        for g in _golds(gold)
    )
    return RewardResult.of(ok, "correct" if ok else "the answer does not match")


_NUMBER = re.compile(
    r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+)?|[-+\u2212]?\.\d+"
)


_GROUP_SEP = re.compile(r"(?<=\d)[,\s\u2009\u00a0](?=\d{3}(?!\d))")


def parse_number(text: str) -> Fraction | None:
    """An exact number from a string: integers with thousands separators, decimals,
    scientific notation and simple fractions. None if the text is not one number.

    >>> parse_number("1,234.5"), parse_number("-3/4"), parse_number("2e3"), parse_number("x")
    (Fraction(2469, 2), Fraction(-3, 4), Fraction(2000, 1), None)
    >>> parse_number("1 000 000"), parse_number("1,2"), parse_number("4 4")
    (Fraction(1000000, 1), None, None)
    """
    s = text.strip().replace("\u2212", "-")
    if not s or len(s) > 400:
        return None
    s = _GROUP_SEP.sub("", s).replace(" ", "") if "/" in s else _GROUP_SEP.sub("", s)
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            d = Decimal(den)
            if d == 0:
                return None
            return Fraction(Decimal(num)) / Fraction(d)
        value = Decimal(s)
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite() or abs(value.adjusted()) > 1000:
        return None
    return Fraction(value)


def numeric_match(
    response: str,
    gold: Any,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
) -> RewardResult:
    """1 if the response states exactly one number and it equals the gold within tolerance.

    Exact by default (rationals, no float rounding). Text around the number is fine; a
    response with several different numbers is a hedge and scores 0.

    >>> numeric_match("The total is 1,250 dollars.", 1250).success
    True
    >>> numeric_match("0.333", "1/3").success, numeric_match("0.333", "1/3", abs_tol=1e-3).success
    (False, True)
    >>> numeric_match("either 3 or 4", 4).success
    False
    """
    target = parse_number(str(gold))
    if target is None:
        return RewardResult.of(False, f"the gold {gold!r} is not a number")
    value = parse_number(response)
    if value is None:
        found = {parse_number(m.group()) for m in _NUMBER.finditer(response[:MAX_REGEX_INPUT])}
        found.discard(None)
        if len(found) != 1:
            what = "no number" if not found else f"{len(found)} different numbers"
            return RewardResult.of(False, f"expected one number, found {what}")
        value = found.pop()
    assert value is not None
    diff = abs(value - target)
    ok = diff == 0 or diff <= max(Fraction(abs_tol), Fraction(rel_tol) * abs(target))
    return RewardResult.of(ok, "correct" if ok else "the number is wrong")


def regex_match(
    response: str, gold: str, *, fullmatch: bool = True, ignore_case: bool = False
) -> RewardResult:
    """1 if the stripped response matches the gold pattern (whole response by default).

    >>> regex_match("ID-1234", r"ID-\\d{4}").success
    True
    """
    if len(response) > MAX_REGEX_INPUT:
        return RewardResult.of(False, f"response longer than {MAX_REGEX_INPUT} characters")
    try:
        pattern = re.compile(gold, re.IGNORECASE if ignore_case else 0)
    except (re.error, TypeError) as e:
        return RewardResult.of(False, f"the gold pattern does not compile: {e}")
    text = response.strip()
    ok = (pattern.fullmatch(text) if fullmatch else pattern.search(text)) is not None
    return RewardResult.of(ok, "correct" if ok else "the answer does not match the pattern")


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n(.*?)```", re.DOTALL)


def _parse_json(response: str) -> tuple[bool, Any, str]:
    fenced = _FENCE.findall(response)
    text = fenced[-1] if fenced else response
    try:
        return True, json.loads(text), ""
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        return False, None, f"the answer is not valid JSON: {str(e)[:200]}"


def json_match(response: str, gold: Any) -> RewardResult:
    """1 if the response (or its last fenced block) parses as JSON equal to the gold value.

    >>> json_match('```json\\n{"a": [1, 2]}\\n```', {"a": [1, 2]}).success
    True
    """
    ok, value, why = _parse_json(response)
    if not ok:
        return RewardResult.of(False, why)
    equal = value == gold and type(value) is type(gold)
    return RewardResult.of(
        equal, "correct" if equal else "the JSON value differs from the expected one"
    )


def json_schema_match(response: str, gold: dict[str, Any]) -> RewardResult:
    """1 if the response parses as JSON that validates against the gold JSON Schema.

    >>> schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    >>> json_schema_match('{"name": "Ada"}', schema).success, json_schema_match('{"name": 1}', schema).success
    (True, False)
    """
    import jsonschema

    ok, value, why = _parse_json(response)
    if not ok:
        return RewardResult.of(False, why)
    try:
        validator_cls = jsonschema.validators.validator_for(gold)
        validator_cls.check_schema(gold)
        errors = list(validator_cls(gold).iter_errors(value))
    except jsonschema.SchemaError as e:
        return RewardResult.of(False, f"the gold schema is invalid: {e.message}")
    except RecursionError:
        return RewardResult.of(False, "the JSON value is nested too deeply to validate")
    if errors:
        return RewardResult.of(False, f"schema violation: {errors[0].message[:300]}")
    return RewardResult.of(True, "valid")


__all__ = [
    "MAX_REGEX_INPUT",
    "exact_match",
    "extract",
    "json_match",
    "json_schema_match",
    "normalize_text",
    "numeric_match",
    "parse_number",
    "regex_match",
    "wrap_for",
]
