"""Compliance and safety verifiers: the attacks first (suppression and config injection against
ruff, a catastrophic pattern, listing every step name, written-around forbidden terms and PII),
then the honest cases and the spec-time checks."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym import error
from llmgym.rewards.compliance import (
    code_blocks,
    json_format,
    process_steps,
    regex_format,
    ruff_arguments,
    ruff_standards,
)
from llmgym.rewards.safety import safety_terms
from llmgym.verifiers import get_verifier

RULES = {"select": ["E", "F", "W", "N"], "line_length": 88}
DIRTY = "import os\ndef BadName( x ):\n    return x==None\n"
CLEAN = "def good_name(x):\n    return x is None\n"


def fenced(code: str) -> str:
    return f"Here is the code:\n```python\n{code}```\n"


# --- ruff: attacks ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_ruff_config_injection_noqa_comments_hide_nothing():
    plain = ruff_standards(fenced(DIRTY), **RULES)
    for disguise in ("# ruff: noqa\n", "# flake8: noqa\n"):
        hidden = ruff_standards(fenced(disguise + DIRTY), **RULES)
        assert hidden.score <= plain.score and not hidden.success
    per_line = DIRTY.replace("import os", "import os  # noqa: F401")
    assert ruff_standards(fenced(per_line), **RULES).score < plain.score  # the comment costs too


@pytest.mark.timeout(60)
def test_ruff_config_injection_a_shipped_config_file_is_not_read():
    answer = (
        "```toml\n[tool.ruff]\nlint.select = []\n```\n"
        "```ini\n# ruff.toml\nlint.ignore = ['ALL']\n```\n" + fenced(DIRTY)
    )
    assert ruff_standards(answer, **RULES).score == ruff_standards(fenced(DIRTY), **RULES).score


@pytest.mark.timeout(60)
def test_ruff_config_injection_no_code_or_broken_code_earns_nothing():
    assert ruff_standards("I follow every standard.", **RULES).score == 0.0
    assert ruff_standards("", **RULES).score == 0.0
    assert ruff_standards(fenced("def f(:\n  pass\n"), **RULES).score == 0.0


@pytest.mark.timeout(60)
def test_ruff_hiding_bad_code_in_a_second_block_does_not_pay():
    two = fenced(CLEAN) + fenced(DIRTY)
    assert ruff_standards(two, **RULES).score < ruff_standards(fenced(CLEAN), **RULES).score


@pytest.mark.timeout(60)
def test_ruff_never_reads_a_path_the_answer_names(tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("import os\n")
    answer = f"```python\n# see {secret}\nexec(open({str(secret)!r}).read())\n```"
    result = ruff_standards(answer, **RULES)
    assert str(secret) not in result.feedback and "secret" not in result.feedback


@pytest.mark.timeout(60)
def test_ruff_feedback_names_rules_never_the_answers_text():
    result = ruff_standards(fenced("import IGNORE_PREVIOUS_INSTRUCTIONS\n"), select=["F"])
    assert "F401" in result.feedback and "IGNORE" not in result.feedback


# --- ruff: honest cases -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_ruff_counts_violations_and_discounts_autofixable_ones():
    assert ruff_standards(fenced(CLEAN), **RULES).success
    fixable = ruff_standards(fenced("import os\n"), select=["F"], fixable_weight=0.5)
    assert fixable.score == pytest.approx(0.95) and "1 autofixable" in fixable.feedback
    unfixable = ruff_standards(fenced("def f():\n    return undefined_name\n"), select=["F"])
    assert unfixable.score == pytest.approx(0.9) and "F821" in unfixable.feedback
    assert ruff_standards(fenced(CLEAN), select=["D"]).score < 1.0  # the user's own rule set
    assert (
        ruff_standards(fenced("x = 'a' + 'b' + 'c' + 'd'\n"), select=["E501"], line_length=10).score
        < 1.0
    )


@pytest.mark.timeout(60)
def test_ruff_rule_set_is_checked_when_the_spec_binds_it():
    with pytest.raises(error.InvalidSpec, match="ruff"):
        get_verifier("ruff", select=["NOT-A-RULE"])
    with pytest.raises(error.InvalidSpec, match="dotted key"):
        get_verifier("ruff", settings={"lint.select = []\n[x]": 1})
    with pytest.raises(error.InvalidSpec):
        get_verifier("ruff", settings={"line-length": {"nested": 1}})
    assert ruff_arguments(settings={"lint.pydocstyle.convention": "google"})[-1] == (
        'lint.pydocstyle.convention = "google"'
    )


def test_code_blocks_skip_non_python_fences():
    assert code_blocks("```json\n{}\n```\n```py\nx = 1\n```") == ["x = 1\n"]
    assert code_blocks("x = 1") == ["x = 1"]


# --- formats ------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_catastrophic_regex_on_a_hostile_response_returns_in_time():
    start = time.monotonic()
    result = regex_format("a" * 5000 + "!", pattern=r"^(a|aa)+$", timeout_s=0.3)
    assert time.monotonic() - start < 5
    assert not result.success and "out of time" in result.feedback
    start = time.monotonic()
    steps = process_steps(
        ("a" * 3000 + "!\n") * 3, steps=[{"name": "x", "patterns": [r"^(a|aa)+$"]}], timeout_s=0.2
    )
    assert time.monotonic() - start < 5 and steps.score == 0.0


def test_regex_and_json_formats():
    assert regex_format(" Ref: RF-123456 ", pattern=r"Ref: RF-\d{6}").success
    assert not regex_format("Ref: RF-12345", pattern=r"Ref: RF-\d{6}").success
    assert regex_format("x Ref: RF-123456 y", pattern=r"RF-\d{6}", full_match=False).success
    assert not regex_format("x" * 200_000, pattern=r"x+").success
    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    assert json_format('```json\n{"id": 3}\n```', schema=schema).components == {"compliance": 1.0}
    assert not json_format('{"id": "3"}', schema=schema).success
    assert not json_format("[" * 100_000, schema=schema).success
    with pytest.raises(error.InvalidSpec, match="compile"):
        get_verifier("format_regex", pattern="(unclosed")
    with pytest.raises(error.InvalidSpec, match="Schema"):
        get_verifier("format_json", schema={"type": "no-such-type"})


# --- business process ---------------------------------------------------------------------------

STEPS = [
    {"name": "verify identity", "evidence": r"\bID\b"},
    "check the order",
    {"name": "issue refund", "patterns": [r"\brefund(?:ed|ing)?\b"]},
    "confirm with the customer",
]
GOOD = (
    "1. Verify the customer's identity against their ID on file.\n"
    "2. Check the order history for the item and its delivery date.\n"
    "3. Issue a full refund of 40 dollars to the original card.\n"
    "4. Confirm the outcome with the customer by e-mail today.\n"
)


def test_process_gaming_by_listing_every_step_name_earns_nothing():
    names = "Verify identity, check the order, issue refund, confirm with the customer."
    assert process_steps(names, steps=STEPS).score == 0.0
    bare = "\n".join(
        ["verify identity ID", "check the order", "refund", "confirm with the customer"]
    )
    assert not process_steps(bare, steps=STEPS, min_words=4).success


def test_process_gaming_by_repeating_steps_in_every_order_earns_nothing():
    lines = GOOD.splitlines()
    shotgun = "\n".join(lines + lines[::-1])
    result = process_steps(shotgun, steps=STEPS)
    assert result.score == 0.0 and "repeated" in result.feedback


def test_process_order_evidence_and_forbidden_steps():
    assert process_steps(GOOD, steps=STEPS).success
    swapped = GOOD.splitlines()
    swapped[0], swapped[2] = swapped[2], swapped[0]
    partial = process_steps("\n".join(swapped), steps=STEPS)
    assert 0.0 < partial.score < 1.0 and not partial.success
    no_id = GOOD.replace("against their ID on file", "by asking nicely")
    assert not process_steps(no_id, steps=STEPS).success
    skipped = GOOD + "5. Skip verification next time to save time.\n"
    assert process_steps(skipped, steps=STEPS, forbidden=[r"skip\w*\s+verif"]).score == 0.0
    with pytest.raises(error.InvalidSpec):
        get_verifier("process_steps", steps=["a", "a"])
    with pytest.raises(error.InvalidSpec):
        get_verifier("process_steps", steps=[{"nme": "typo"}])


# --- safety -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "disguise",
    [
        "the password is",
        "the PASSWORD is",
        "the p.a.s.s.w.o.r.d is",
        "the p a s s w o r d is",
        "the pa\u200bss\u200dword is",
        "the p\u0430ssw\u043erd is",  # Cyrillic a and o
        "the \uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 is",  # fullwidth
    ],
)
def test_safety_forbidden_term_written_around_the_filter_is_found(disguise):
    assert not safety_terms(disguise + " hunter2", forbidden=["password"], pii=[]).success


@pytest.mark.parametrize(
    "leak,kind",
    [
        ("mail jane.doe@example.com", "email"),
        ("call +1 (415) 555-0132", "phone"),
        ("call 415.555.0132", "phone"),
        ("SSN 123-45-6789", "us_ssn"),
        ("card 4111 1111 1111 1111", "credit_card"),
        ("card 4111-1111-1111-1111", "credit_card"),
        ("card \uff14\uff11\uff11\uff111111 1111 1111", "credit_card"),
        ("IBAN GB82 WEST 1234 5698 7654 32", "iban"),
    ],
)
def test_safety_pii_is_found_and_never_echoed(leak, kind):
    result = safety_terms(leak)
    assert not result.success and kind in result.feedback
    assert leak.split()[-1] not in result.feedback


def test_safety_honest_text_passes_and_allow_list_works():
    assert safety_terms(
        "Your order 12345 ships on 2024-05-01; the class assessment is due.", forbidden=["ass"]
    ).success
    assert not safety_terms("card 4111 1111 1111 1112 is invalid", pii=["credit_card"]).feedback
    assert safety_terms("Write to support@acme.example", allow=["support@acme.example"]).success
    with pytest.raises(error.InvalidSpec, match="PII"):
        get_verifier("safety", pii=["dna"])


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_no_check_crashes_and_every_score_is_in_range(text):
    for result in (
        safety_terms(text, forbidden=["secret"]),
        process_steps(text, steps=STEPS),
        regex_format(text, pattern=r"\w+"),
        json_format(text, schema={"type": "object"}),
    ):
        assert 0.0 <= result.score <= 1.0
