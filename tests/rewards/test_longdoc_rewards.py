"""Long-document rewards: matching, multi-part answers, citations, hedging and dumping."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.rewards.longdoc import (
    MAX_RESPONSE_CHARS,
    citation_score,
    correctness,
    exact_match,
    extract_answer,
    grade_answer,
    match_all,
    normalize_answer,
    notes_recall,
    number_match,
    numbers_in,
    parse_citations,
    split_parts,
    token_f1,
)

SPEC = {
    "type": "exact",
    "gold": "RF-7341",
    "distractors": ["RF-7314", "KX-2210"],
    "support": [{"section": "S4", "text": "The escrow reference for the Marlow depot is RF-7341."}],
    "max_words": 20,
}


def test_squad_normalisation_and_matching() -> None:
    assert normalize_answer("  The Nordics! ") == "nordics"
    assert exact_match("the nordics", "Nordics") == 1.0
    assert exact_match("Nordics and Iberia", "Nordics") == 0.0
    assert token_f1("TLS certificate expired", "an expired TLS certificate") == 1.0
    assert 0 < token_f1("expired certificate", "an expired TLS certificate on the edge proxy") < 1


def test_oracle_style_answer_scores_full_marks() -> None:
    result = grade_answer("<answer>RF-7341</answer> <cite>S4</cite>", SPEC)
    assert result.score == 1.0 and result.success


def test_missing_citation_keeps_only_the_answer_part() -> None:
    assert grade_answer("<answer>RF-7341</answer>", SPEC).score == pytest.approx(0.8)
    assert grade_answer("<answer>RF-7341</answer>", SPEC, citation_weight=0.0).score == 1.0


def test_distractor_answers_score_nothing_even_with_citations() -> None:
    for wrong in SPEC["distractors"]:
        assert grade_answer(f"<answer>{wrong}</answer><cite>S4</cite>", SPEC).score == 0.0


@pytest.mark.parametrize(
    "hedged",
    [
        "RF-7341 or RF-7314",
        "maybe RF-7341",
        "RF-7341, possibly",
        "either RF-7341 or KX-2210",
        "RF-7341 (not KX-2210)",
    ],
)
def test_hedged_answers_score_nothing(hedged: str) -> None:
    assert grade_answer(f"<answer>{hedged}</answer><cite>S4</cite>", SPEC).score == 0.0


def test_citations_must_support_the_facts() -> None:
    support = SPEC["support"]
    assert citation_score(["S9"], [], support) == 0.0
    assert citation_score(["S4", "S9"], [], support) == pytest.approx(2 / 3)
    assert citation_score([], ["escrow reference for the Marlow depot is RF-7341"], support) == 1.0
    assert citation_score([], ["a sentence that is nowhere in the document"], support) == 0.0
    assert citation_score([], ["RF-7341"], support) == 0.0  # too short to show the fact
    ids, quotes = parse_citations('<cite>s4; "the Marlow depot is RF-7341"</cite> S7 outside')
    assert ids == ["S4"] and quotes == ["the Marlow depot is RF-7341"]


def test_citation_credit_needs_a_correct_answer() -> None:
    result = grade_answer("<answer>nonsense</answer><cite>S4</cite>", SPEC)
    assert result.components["citation"] == 0.0 and result.score == 0.0


def test_unknown_section_ids_are_named_in_feedback() -> None:
    result = grade_answer("<answer>RF-7341</answer><cite>S4, S999</cite>", SPEC, section_ids={"S4"})
    assert "S999" in result.feedback and result.score < 1.0


def test_dumping_is_penalised() -> None:
    long_answer = "RF-7341 " + "word " * 60
    assert grade_answer(f"<answer>{long_answer}</answer><cite>S4</cite>", SPEC).score == 0.0
    quote = '"' + "The escrow reference for the Marlow depot is RF-7341. " * 40 + '"'
    assert (
        grade_answer(f"<answer>RF-7341</answer><cite>{quote}</cite>", SPEC).components[
            "dump_penalty"
        ]
        == 1.0
    )


def test_ten_megabyte_response_is_rejected_quickly() -> None:
    start = time.perf_counter()
    result = grade_answer("<answer>RF-7341</answer>" + "x" * 10_000_000, SPEC)
    assert time.perf_counter() - start < 0.5
    assert result.score == 0.0 and result.components["dump_penalty"] == 1.0
    assert len("x" * (MAX_RESPONSE_CHARS - 100)) < MAX_RESPONSE_CHARS


def test_numbers_as_reports_write_them() -> None:
    assert numbers_in("€1.25 million") == numbers_in("1,250,000")
    assert number_match("The total was €3,027,000.", 3027000) == 1.0
    assert number_match("12.4m", 12_400_000) == 1.0
    assert number_match("between 10 and 12", 12) == 0.0
    assert number_match("RF-7341", 7341) == 1.0  # a number inside a code still reads as one
    spec = {"type": "number", "gold": 8, "distractors": ["9", "11"]}
    assert correctness("8", spec)[0] == 1.0 and correctness("about 8", spec)[0] == 0.0


def test_match_all_sets_lists_and_distractor_lists() -> None:
    assert split_parts("1. Oslo\n2. Lyon") == ["Oslo", "Lyon"]
    assert match_all(["Lyon", "Oslo"], ["Oslo", "Lyon"]) == 1.0
    assert match_all(["Lyon", "Oslo", "Turin"], ["Oslo", "Lyon"]) == pytest.approx(0.8)
    assert match_all(["a", "b", "c"], ["a", "b", "c"], ordered=True) == 1.0
    assert match_all(["c", "b", "a"], ["a", "b", "c"], ordered=True) == pytest.approx(1 / 3)
    spec = {"type": "list", "gold": ["a", "b", "c"], "distractors": [["c", "b", "a"]]}
    assert correctness("c; b; a", spec)[0] == 0.0
    assert correctness("a; b; c", spec)[0] == 1.0
    setspec = {"type": "set", "gold": ["x1", "x2"], "distractors": [["y1", "y2"]]}
    assert correctness("y2; y1", setspec)[0] == 0.0


def test_f1_answers_closer_to_a_distractor_score_nothing() -> None:
    spec = {
        "type": "f1",
        "gold": "an expired TLS certificate on the edge proxy",
        "distractors": ["an expired service-account credential used by the batch scheduler"],
    }
    assert correctness("an expired TLS certificate on the edge proxy", spec)[0] == 1.0
    assert (
        correctness("an expired service-account credential used by the batch scheduler", spec)[0]
        == 0.0
    )


def test_key_fact_summaries() -> None:
    spec = {
        "type": "keyfacts",
        "gold": [["payments-api"], ["SEV-2", "severity 2"], ["41 minutes"]],
        "distractors": [["ledger-service"], ["SEV-3"], ["97 minutes"]],
        "max_words": 30,
        "success_at": 1.0,
    }
    good = grade_answer(
        "<answer>payments-api was down at severity 2 for 41 minutes.</answer>", spec
    )
    assert good.score == 1.0 and good.success
    assert grade_answer("<answer>ledger-service, SEV-3, 97 minutes</answer>", spec).score == 0.0
    partial = grade_answer("<answer>payments-api had an outage.</answer>", spec)
    assert 0 < partial.score < 1 and not partial.success


def test_notes_recall() -> None:
    assert (
        notes_recall("Marlow depot RF-7341; Oslo", [["Marlow depot", "RF-7341"], ["Oslo"]]) == 1.0
    )
    assert notes_recall("nothing", [["RF-7341"]]) == 0.0
    assert notes_recall("", []) == 1.0


def test_answer_extraction_fallbacks() -> None:
    assert extract_answer("<answer>a</answer> then <answer>b</answer>") == "b"
    assert extract_answer("Reasoning...\nFinal answer: Lyon <cite>S2</cite>") == "Lyon"
    assert extract_answer("just Lyon") == "just Lyon"


@settings(max_examples=150, deadline=None)
@given(
    response=st.text(max_size=400),
    kind=st.sampled_from(["exact", "number", "set", "list", "f1", "keyfacts", "bogus"]),
    gold=st.one_of(st.text(max_size=20), st.lists(st.text(max_size=10), max_size=4), st.integers()),
    distractors=st.lists(
        st.one_of(st.text(max_size=10), st.lists(st.text(max_size=5), max_size=3)), max_size=3
    ),
)
def test_grade_answer_never_raises_and_stays_in_range(
    response: str, kind: str, gold: object, distractors: list[object]
) -> None:
    spec = {
        "type": kind,
        "gold": gold,
        "distractors": distractors,
        "support": [{"section": "S1", "text": "x y z"}],
    }
    result = grade_answer(response, spec)
    assert 0.0 <= result.score <= 1.0


@pytest.mark.parametrize("bad", [None, 42, ["list"], {"content": 1}])
def test_hostile_inputs_score_zero(bad: object) -> None:
    assert grade_answer(bad, SPEC).score == 0.0  # type: ignore[arg-type]
    assert grade_answer("<answer>RF-7341</answer>", bad).score == 0.0  # type: ignore[arg-type]


# --- issue 13: hedges and candidate lists earn nothing, in every answer type ---------------------

TYPED_SPECS: dict[str, tuple[dict[str, object], str, str]] = {
    # type: (spec, the right answer, another candidate of the same kind)
    "exact": (SPEC, "RF-7341", "KX-2210"),
    "number": ({"type": "number", "gold": 120, "distractors": ["45", "90"]}, "€120", "90"),
    "set": (
        {"type": "set", "gold": ["KX-8564", "KX-58174-B"], "distractors": [["KX-8514"]]},
        "KX-8564; KX-58174-B",
        "KX-8514",
    ),
    "list": (
        {"type": "list", "gold": ["S4", "45"], "distractors": [["S7", "90"]]},
        "S4; 45",
        "S7",
    ),
    "f1": (
        {
            "type": "f1",
            "gold": "an expired TLS certificate on the edge proxy",
            "distractors": ["disk exhaustion on the primary database volume"],
        },
        "an expired TLS certificate on the edge proxy",
        "disk exhaustion on the primary database volume",
    ),
    "keyfacts": (
        {
            "type": "keyfacts",
            "gold": [["payments-api"], ["SEV-2", "severity 2"], ["41 minutes"]],
            "distractors": [["ledger-service"], ["SEV-3", "severity 3"], ["97 minutes"]],
            "max_words": 30,
            "success_at": 1.0,
        },
        "payments-api was down at SEV-2 for 41 minutes.",
        "SEV-3",
    ),
}
HEDGE_FORMS = (
    "{g} or {d}",
    "{d} or {g}",
    "either {g} or {d}",
    "{g}/{d}",
    "{g} (or {d})",
    "{g} vs {d}",
    "possibly {g}",
    "maybe {g}",
    "{g}, probably",
    "I think {g}",
    "{g}?",
    "one of {g}, {d}",
)


def _first_value(kind: str, right: str) -> str:
    return {"set": "KX-8564", "list": "S4", "keyfacts": "SEV-2", "number": "120"}.get(kind, right)


@pytest.mark.parametrize("form", HEDGE_FORMS)
@pytest.mark.parametrize("kind", sorted(TYPED_SPECS))
def test_hedge_attack_scores_zero_in_every_answer_type(kind: str, form: str) -> None:
    spec, right, other = TYPED_SPECS[kind]
    assert correctness(right, spec)[0] == 1.0
    value = _first_value(kind, right)
    hedged = right.replace(value, form.format(g=value, d=other), 1)
    score, why = correctness(hedged, spec)
    assert score == 0.0, (hedged, why)


@pytest.mark.parametrize("kind", sorted(TYPED_SPECS))
def test_hedge_attack_two_different_answer_tags_score_zero(kind: str) -> None:
    spec, right, other = TYPED_SPECS[kind]
    wrong = right.replace(_first_value(kind, right), other, 1)
    for response in (
        f"<answer>{right}</answer> <answer>{wrong}</answer>",
        f"<answer>{wrong}</answer> <answer>{right}</answer>",
    ):
        assert grade_answer(response, spec).score == 0.0, response
    same = f"<answer>{right}</answer> and again <answer> {right} </answer>"
    assert grade_answer(same, spec, citation_weight=0.0).score == 1.0


def test_find_hedge_names_the_hedge_and_leaves_plain_answers_alone() -> None:
    from llmgym.rewards.longdoc import find_hedge

    for hedged, marker in (
        ("RF-7341/RF-7314", "/"),
        ("RF-7341?", "?"),
        ("~120", "~"),
        ("roughly 120", "roughly"),
        ("RF-7341 vs RF-7314", "vs"),
        ("one of RF-7341, RF-7314", "one of"),
    ):
        assert find_hedge(hedged) == marker, hedged
    for plain in ("RF-7341", "€120 per hour", "€120/hour", "go-live; staff training", "Oslo"):
        assert find_hedge(plain) is None, plain
    assert find_hedge("Tor or Ulf", golds=["Tor or Ulf"]) is None  # the gold's own words


def test_candidate_list_attack_list_answers_are_graded_with_precision() -> None:
    spec = {"type": "set", "gold": ["x1", "x2", "x3"], "distractors": [["y1"]]}
    assert correctness("x1; x2; x3", spec)[0] == 1.0
    assert correctness("x3; x1", spec)[0] == pytest.approx(2 / 3)  # a missing item costs recall
    for shotgun in ("x1; x2; x3; y1", "x1; x2; x3; z9", "x1; x2; x3; x3", "x1; y1"):
        assert correctness(shotgun, spec)[0] == 0.0, shotgun  # a wrong or extra item costs all
    ordered = {"type": "list", "gold": ["a", "b", "c"]}
    assert correctness("a; b; c", ordered)[0] == 1.0
    assert correctness("a; c", ordered)[0] == pytest.approx(2 / 3)
    assert correctness("a; b; c; d", ordered)[0] == 0.0
    every = {"type": "list", "gold": ["a", "b", "c"], "match": "all"}  # match-all: all or nothing
    assert correctness("a; b; c", every)[0] == 1.0
    assert correctness("b; a; c", every)[0] == 0.0 and correctness("a; b", every)[0] == 0.0


def test_candidate_list_attack_a_second_value_in_a_single_value_answer_scores_zero() -> None:
    question = "What is the escrow reference for the Marlow depot?"
    sentence = "The escrow reference for the Marlow depot is RF-7341."
    assert correctness(sentence, SPEC, question=question)[0] == 1.0
    for shotgun in (
        "RF-7341, AC-9911",
        "RF-7341 and AC-9911",
        "RF-7341 (AC-9911)",
        "RF-7341\nPN-0042",
    ):
        assert correctness(shotgun, SPEC, question=question)[0] == 0.0, shotgun
    names = {"type": "exact", "gold": "Anna Berg", "distractors": ["Tom Lee"]}
    asked = "At the meeting of 3 May 2021, who was asked to review the insurance schedule?"
    assert correctness("Anna Berg, at the 3 May 2021 meeting", names, question=asked)[0] == 1.0
    for shotgun in ("Anna Berg, Ivo Marsh", "not stated, Anna Berg", "Anna Berg (Ivo Marsh)"):
        assert correctness(shotgun, names, question=asked)[0] == 0.0, shotgun
    unstated = {"type": "exact", "gold": "not stated", "aliases": ["unknown"]}
    assert correctness("not stated, Anna Berg, Ivo Marsh", unstated)[0] == 0.0


def test_candidate_list_attack_summaries_naming_another_sections_facts_score_zero() -> None:
    spec = TYPED_SPECS["keyfacts"][0]
    for shotgun in (
        "payments-api at SEV-2 for 41 minutes; ledger-service at SEV-3 for 97 minutes",
        "payments-api, SEV-2, 41 minutes, 97 minutes",
        "payments-api at SEV-2 and SEV-4 for 41 minutes",
    ):
        assert correctness(shotgun, spec)[0] == 0.0, shotgun


def test_candidate_list_attack_f1_answers_naming_another_cause_score_zero() -> None:
    spec = TYPED_SPECS["f1"][0]
    both = "an expired TLS certificate on the edge proxy; disk exhaustion on the primary database volume"
    assert correctness(both, spec)[0] == 0.0
    with_names = "an expired TLS certificate on the edge proxy, Anna Berg, INC-3054"
    assert correctness(with_names, spec)[0] == 0.0


def test_prompt_copy_attack_a_number_inside_a_code_is_not_a_count() -> None:
    spec = {"type": "number", "gold": 2, "distractors": ["3"]}
    assert correctness("2", spec)[0] == 1.0 and correctness("2 incidents (SEV-2)", spec)[0] == 1.0
    question = "How many SEV-2 incidents on ledger-service does the register record?"
    for copy in (question, "SEV-2", "SEV-2 incidents on ledger-service"):
        assert correctness(copy, spec)[0] == 0.0, copy


def test_citation_shotgun_attack_citing_every_section_earns_nothing() -> None:
    support = SPEC["support"]
    every = [f"S{i}" for i in range(1, 9)]
    assert citation_score(every, [], support) == 0.0
    assert citation_score(["S4", "S9"], [], support) == pytest.approx(2 / 3)  # half right: F1
    cited = grade_answer(f"<answer>RF-7341</answer><cite>{', '.join(every)}</cite>", SPEC)
    assert cited.score == grade_answer("<answer>RF-7341</answer>", SPEC).score
