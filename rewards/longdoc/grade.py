"""The long-document reward: correctness, citations and the dump penalty in one score.

:func:`grade_answer` reads a response (:mod:`~llmgym.rewards.longdoc.extract`), grades its
answer against an answer spec (:func:`correctness`, built on
:mod:`~llmgym.rewards.longdoc.matching` and :mod:`~llmgym.rewards.longdoc.hedges`), checks its
citations (:func:`citation_score`) and penalises dumps (:func:`dump_penalty`);
:func:`notes_recall` grades a reader's notes in chunked reading.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llmgym.rewards.base import RewardResult
from llmgym.rewards.longdoc.extract import extract_answer, given_answers, parse_citations
from llmgym.rewards.longdoc.hedges import (
    distractor_facts,
    extra_words,
    f1_intrusion,
    find_hedge,
    mentions_distractor,
    other_values,
    second_reading,
    second_verdict,
    stray_numbers,
)
from llmgym.rewards.longdoc.matching import (
    MAX_RESPONSE_CHARS,
    as_texts,
    contains_phrase,
    exact_match,
    key_fact_recall,
    list_credit,
    normalize_answer,
    number_match,
    split_parts,
    token_f1,
)

QUOTE_CHARS = 600
"""Quoted citation text allowed beyond twice the supporting facts' length."""


def citation_score(
    ids: Sequence[str], quotes: Sequence[str], support: Sequence[Mapping[str, str]]
) -> float:
    """F1 of citations against supporting facts (``{"section": sid, "text": sentence}``), and 0
    when fewer than half the citations support a fact (citing every section does not pay).

    A section id supports a fact in that section; a quote supports a fact when, normalised,
    it lies inside the fact's sentence and covers at least half of it (or contains it).

    >>> facts = [{"section": "S4", "text": "The code for the Marlow depot is RF-7341."}]
    >>> citation_score(["S4"], [], facts), citation_score(["S4", "S9"], [], facts)
    (1.0, 0.6666666666666666)
    >>> citation_score([], ["code for the Marlow depot is RF-7341"], facts)
    1.0
    >>> citation_score(["S1", "S2", "S3", "S4", "S5"], [], facts)
    0.0
    """
    items = len(ids) + len(quotes)
    if not support or not items:
        return 0.0
    texts = [normalize_answer(f.get("text", "")) for f in support]
    covered = [False] * len(support)
    valid = 0
    for sid in ids:
        hits = [k for k, f in enumerate(support) if f.get("section") == sid]
        valid += bool(hits)
        for k in hits:
            covered[k] = True
    for quote in quotes:
        q = normalize_answer(quote)
        hits = [
            k
            for k, t in enumerate(texts)
            if q and t and ((q in t and 2 * len(q) >= len(t)) or t in q)
        ]
        valid += bool(hits)
        for k in hits:
            covered[k] = True
    if 2 * valid < items:  # most citations support nothing: a shotgun, not a citation
        return 0.0
    precision, recall = valid / items, sum(covered) / len(support)
    return 2 * precision * recall / (precision + recall)


def dump_penalty(words: int, max_words: int) -> float:
    """0 within ``max_words``, rising linearly to 1 at twice that.

    >>> dump_penalty(30, 40), dump_penalty(60, 40), dump_penalty(500, 40)
    (0.0, 0.5, 1.0)
    """
    if max_words <= 0 or words <= max_words:
        return 0.0
    return min(1.0, (words - max_words) / max_words)


def correctness(answer: str, spec: Mapping[str, Any], *, question: str = "") -> tuple[float, str]:
    """How right the extracted answer is, in [0, 1], and why (no citations or penalties).

    Every answer type scores 0 when the answer hedges (:func:`find_hedge`) or names a
    distractor. Single values (``exact``, ``f1``) score 0 with a second value besides the
    gold's and the question's own words (:func:`other_values`); numbers must state exactly
    one quantity (digits inside a code are not one); lists are graded precision first
    (:func:`list_credit`); summaries (``keyfacts``) score 0 when they state another
    section's fact, a second value shaped like one of its facts (``SEV-4`` beside ``SEV-2``) or
    a plain number that no fact or the question holds.

    >>> correctness("RF-7341", {"type": "exact", "gold": "RF-7341", "distractors": ["RF-7314"]})
    (1.0, 'correct')
    >>> correctness("RF-7314", {"type": "exact", "gold": "RF-7341", "distractors": ["RF-7314"]})[0]
    0.0
    >>> correctness("RF-7341 or RF-7314", {"type": "exact", "gold": "RF-7341"})[0]
    0.0
    """
    kind = spec.get("type", "exact")
    gold = spec.get("gold")
    raw_distractors = list(spec.get("distractors") or [])
    distractors = [str(d) for d in raw_distractors if not isinstance(d, (list, tuple))]
    question = question if isinstance(question, str) else ""
    if kind == "keyfacts":
        fact_list: list[Any] = gold if isinstance(gold, list) else [gold]
        golds = [o for f in fact_list for o in as_texts(f)]
    else:
        golds = as_texts(gold) + as_texts(spec.get("aliases") or [])
    hedge = find_hedge(answer, golds)
    if hedge is not None:
        return 0.0, f"hedged answer ({hedge!r}): give one answer"
    if kind in ("exact", "number"):
        if mentions_distractor(answer, golds, distractors) is not None:
            return 0.0, "the answer names a value the question does not ask for"
        if kind == "number":
            ok = number_match(answer, gold, codes=False)
            return ok, "correct" if ok else "wrong number (or more than one number)"
        if other_values(answer, golds, question) or second_verdict(answer, golds):
            return 0.0, "the answer names more than one value: give one answer"
        if extra_words(answer, golds, question):
            return 0.0, "the answer says more than its value: give the value alone"
        if exact_match(answer, golds):
            return 1.0, "correct"
        norm = normalize_answer(answer).split()
        for g in golds:
            ng = normalize_answer(g).split()
            if ng and contains_phrase(answer, g) and len(norm) <= max(2 * len(ng), len(ng) + 8):
                return 1.0, "correct"
        return 0.0, "wrong answer"
    if kind in ("set", "list"):
        items = as_texts(gold)
        parts = split_parts(answer, expected=len(items))
        for wrong in raw_distractors:
            if isinstance(wrong, (list, tuple)) and list_credit(
                parts, as_texts(wrong), ordered=kind == "list", all_or_nothing=True
            ):
                return 0.0, "the answer lists items the question does not ask for"
        score = list_credit(
            parts, items, ordered=kind == "list", all_or_nothing=spec.get("match") == "all"
        )
        if score == 1.0:
            return 1.0, "all parts correct"
        if score == 0.0:
            return 0.0, "a part is wrong, repeated or not asked for (or none is right)"
        return score, f"{score:.2f} of the parts, none wrong"
    if kind == "f1":
        f = token_f1(answer, golds)
        if distractors and f1_intrusion(answer, golds, distractors):
            return 0.0, "the answer states another part of the document besides the asked one"
        if distractors and token_f1(answer, distractors) >= f:
            return 0.0, "the answer matches another part of the document better than the asked one"
        if other_values(answer, golds, question):
            return 0.0, "the answer names values the question does not ask for"
        return f, f"token F1 {f:.2f}"
    if kind == "keyfacts":
        wrong = distractor_facts(fact_list, raw_distractors)
        if wrong and key_fact_recall(answer, wrong) > 0:
            return 0.0, "the summary states facts of another section"
        if second_reading(answer, golds) or stray_numbers(answer, golds, question):
            return 0.0, "the summary states a value that is not one of its facts"
        recall = key_fact_recall(answer, fact_list)
        return recall, f"{round(recall * len(fact_list))} of {len(fact_list)} key facts"
    return 0.0, f"unknown answer type {kind!r}"


def grade_answer(
    response: str,
    spec: Mapping[str, Any],
    *,
    citation_weight: float = 0.2,
    section_ids: Collection[str] | None = None,
    question: str = "",
) -> RewardResult:
    """Grade a response against an answer spec; the score is in [0, 1].

    ``spec``: ``type`` (``exact``, ``number``, ``set``, ``list``, ``f1``, ``keyfacts``),
    ``gold``, optional ``aliases``, ``distractors`` (values found elsewhere in the document
    that must not be given), ``support`` (``[{"section", "text"}]``), ``max_words``,
    ``success_at`` (the score that counts as solved for graded types; default 0.8) and
    ``match`` (``"all"``: a list scores 1 only when complete, else 0). ``question``: the
    question asked (its words may appear in a single-value answer without counting as a second
    value). A response that gives two different answers (two ``<answer>`` tags or "Answer:"
    lines) scores 0.

    >>> spec = {"type": "exact", "gold": "RF-7341", "distractors": ["RF-7314"],
    ...         "support": [{"section": "S4", "text": "The code is RF-7341."}]}
    >>> grade_answer("<answer>RF-7341</answer><cite>S4</cite>", spec).score
    1.0
    >>> grade_answer("<answer>RF-7341</answer>", spec).score
    0.8
    >>> grade_answer("<answer>RF-7314</answer><cite>S4</cite>", spec).score
    0.0
    """
    if not isinstance(response, str) or not isinstance(spec, Mapping):
        return RewardResult(0.0, {"correctness": 0.0}, "expects a text response and an answer spec")
    if len(response) > MAX_RESPONSE_CHARS:
        return RewardResult(
            0.0,
            {"correctness": 0.0, "citation": 0.0, "dump_penalty": 1.0},
            f"the response has {len(response):,} characters: answer briefly instead of copying the document",
        )
    answer = extract_answer(response)
    if len(given_answers(response)) > 1:
        return RewardResult(
            0.0,
            {"correctness": 0.0, "citation": 0.0, "dump_penalty": 0.0},
            "more than one answer given: give one answer",
        )
    try:
        c, why = correctness(answer, spec, question=question)
        support = [f for f in spec.get("support") or [] if isinstance(f, Mapping)]
    except (TypeError, ValueError, AttributeError) as e:  # a malformed spec, not the model's fault
        return RewardResult(0.0, {"correctness": 0.0}, f"malformed answer spec: {type(e).__name__}")
    weight = min(max(float(citation_weight), 0.0), 1.0) if support else 0.0
    ids, quotes = parse_citations(response)
    k = citation_score(ids, quotes, support) if weight and c > 0 else 0.0
    max_words = int(spec.get("max_words") or 60)
    penalty = dump_penalty(len(answer.split()), max_words)
    support_chars = sum(len(f.get("text", "")) for f in support)
    quoted = sum(len(q) for q in quotes)
    penalty = max(penalty, dump_penalty(quoted, 2 * support_chars + QUOTE_CHARS))
    score = c * ((1.0 - weight) + weight * k) * (1.0 - penalty)
    notes = [why]
    if weight:
        missing = [s for s in ids if section_ids is not None and s not in section_ids]
        notes.append(
            f"citations {k:.2f}" + (f" (no section {', '.join(missing)})" if missing else "")
        )
    if penalty:
        notes.append(f"too long: penalty {penalty:.2f}")
    threshold = (
        1.0
        if spec.get("type", "exact") in ("exact", "number", "set", "list")
        else float(spec.get("success_at", 0.8))
    )
    return RewardResult(
        min(max(score, 0.0), 1.0),
        {"correctness": c, "citation": k, "dump_penalty": penalty},
        "; ".join(notes),
        c >= threshold - 1e-9 and penalty < 1.0,
    )


def notes_recall(notes: str, facts: Sequence[Sequence[str]]) -> float:
    """The fraction of facts whose every part a reader's notes keep (1.0 when there are none).

    >>> notes_recall("Marlow depot: RF-7341", [["Marlow depot", "RF-7341"], ["Oslo"]])
    0.5
    """
    if not facts:
        return 1.0
    text = f" {normalize_answer(notes[:MAX_RESPONSE_CHARS])} "
    kept = 0
    for fact in facts:
        parts = [normalize_answer(p) for p in ([fact] if isinstance(fact, str) else fact)]
        kept += all(f" {p} " in text for p in parts if p)
    return kept / len(facts)
