"""Long-document rewards: SQuAD-style matching, multi-part answers, citations and penalties.

Covered: SQuAD normalisation, exact match, token F1, numbers written as reports write them
("€1.25 million"), match-all over multi-part answers (sets and ordered lists), key-fact
recall for summaries, citation checking (section ids or quoted spans that must contain the
supporting facts), and penalties for hedged answers, answers that copy a distractor, and
answers that dump large parts of the document. :func:`grade_answer` combines them:

    score = correctness * ((1 - w) + w * citation) * (1 - dump_penalty)     in [0, 1]

where ``w`` is the citation weight (0 when the gold names no supporting facts) and the
citation part counts only for answers that are at least partly correct. Not covered:
paraphrase (an answer must use the document's wording or number), ROUGE or model-based
judging of free text.

Every function is pure, never raises on model output and bounds its work: a response past
:data:`MAX_RESPONSE_CHARS` is treated as a dump and scores 0 without being read.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from llmgym.rewards.base import RewardResult

MAX_RESPONSE_CHARS = 40_000
"""A response longer than this (about 10k tokens) is a dump of the document: score 0."""
QUOTE_CHARS = 600
"""Quoted citation text allowed beyond twice the supporting facts' length."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_LINE = re.compile(r"(?im)^\W*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$")
_CITE_TAG = re.compile(r"<cite>(.*?)</cite>", re.DOTALL | re.IGNORECASE)
_SECTION_ID = re.compile(r"\b[Ss](\d{1,6})\b")
_QUOTE = re.compile(r"\"([^\"]{4,})\"|\u201c([^\u201d]{4,})\u201d")
_NUMBER = re.compile(
    r"(?<![\w.])(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)"
    r"(?:\s*(?P<word>million|billion|thousand|bn)\b|(?P<suffix>[mk])\b)?",
    re.IGNORECASE,
)
_SCALE = {"thousand": 1000, "k": 1000, "million": 10**6, "m": 10**6, "billion": 10**9, "bn": 10**9}
_HEDGES = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|likely|might|unsure|not sure|i think|"
    r"i believe|could be|somewhere between|approximately|around|roughly|about)\b",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[;\n|]+")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
NOT_STATED = (
    "not stated",
    "not mentioned",
    "not specified",
    "not given",
    "unknown",
    "no information",
)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace.

    >>> normalize_answer("The  Marlow Depot's code: RF-7341!")
    'marlow depots code rf7341'
    """
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold.

    >>> exact_match("the Nordics", ["Nordics"]), exact_match("Nordics or Iberia", "Nordics")
    (1.0, 0.0)
    """
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _as_list(golds)))


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """SQuAD token F1, the best over the golds.

    >>> round(token_f1("expired TLS certificate", "an expired TLS certificate on the edge proxy"), 3)
    0.667
    >>> token_f1("", "x")
    0.0
    """
    pred = normalize_answer(prediction).split()
    best = 0.0
    for gold in _as_list(golds):
        ref = normalize_answer(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            p, r = common / len(pred), common / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether the normalised phrase occurs in the normalised text as whole tokens.

    >>> contains_phrase("Code RF-7341, confirmed.", "rf-7341"), contains_phrase("RF-73410", "RF-7341")
    (True, False)
    """
    needle = normalize_answer(phrase)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def numbers_in(text: str) -> set[Decimal]:
    """The distinct numbers a text states, with thousands separators and scale words.

    >>> sorted(numbers_in("€1.25 million, or 1,250,000 in total; 3 items"))
    [Decimal('3'), Decimal('1250000.00')]
    """
    found = set()
    for m in _NUMBER.finditer(text[:MAX_RESPONSE_CHARS]):
        scale = (m.group("word") or m.group("suffix") or "").lower()
        try:
            found.add(Decimal(m.group("num").replace(",", "")) * _SCALE.get(scale, 1))
        except InvalidOperation:
            continue
    return found


def number_match(prediction: str, gold: Any) -> float:
    """1.0 if the prediction states exactly one number and it equals the gold.

    >>> number_match("The total is €1,275,000.", 1275000), number_match("12 or 13", 12)
    (1.0, 0.0)
    """
    try:
        target = Decimal(str(gold).replace(",", ""))
    except InvalidOperation:
        return 0.0
    values = numbers_in(prediction)
    return float(len(values) == 1 and values.pop() == target)


def split_parts(text: str, expected: int = 0) -> list[str]:
    """The items of a multi-part answer: split on semicolons, newlines or bars (bullets
    dropped); a single line splits on commas when ``expected`` items are more than one.

    >>> split_parts("- S4\\n- S19")
    ['S4', 'S19']
    >>> split_parts("Oslo, Lyon and Turin", expected=3)
    ['Oslo', 'Lyon', 'Turin']
    """
    parts = [_BULLET.sub("", p).strip() for p in _SPLIT.split(text)]
    parts = [p for p in parts if p]
    if len(parts) == 1 and expected > 1:
        parts = [p.strip() for p in re.split(r",(?!\d{3})|\band\b", parts[0]) if p.strip()]
    return parts


def part_matches(prediction: str, gold: str) -> bool:
    """One item: a number equal to a numeric gold, else a normalised exact match.

    >>> part_matches("90 days", "90"), part_matches("Lyon", "lyon"), part_matches("9", "90")
    (True, True, False)
    """
    if re.fullmatch(r"[-+]?[\d,]+(?:\.\d+)?", gold.strip()):
        return number_match(prediction, gold) == 1.0
    return exact_match(prediction, gold) == 1.0


def match_all(predicted: Sequence[str], golds: Sequence[str], *, ordered: bool = False) -> float:
    """Multi-part credit: F1 of the items matched one to one (ordered: longest common
    subsequence). 1.0 only when every gold item is there and nothing else.

    >>> match_all(["Lyon", "Oslo"], ["oslo", "lyon"]), match_all(["Lyon", "Oslo"], ["oslo", "lyon"], ordered=True)
    (1.0, 0.5)
    >>> match_all(["Lyon"], ["oslo", "lyon"])
    0.6666666666666666
    """
    if not predicted or not golds:
        return 0.0
    if ordered:
        n, m = len(predicted), len(golds)
        lcs = [[0] * (m + 1) for _ in range(n + 1)]
        for i in range(n):
            for j in range(m):
                lcs[i + 1][j + 1] = (
                    lcs[i][j] + 1
                    if part_matches(predicted[i], golds[j])
                    else max(lcs[i][j + 1], lcs[i + 1][j])
                )
        matched = lcs[n][m]
    else:
        free = list(golds)
        matched = 0
        for p in predicted:
            for k, g in enumerate(free):
                if part_matches(p, g):
                    matched += 1
                    del free[k]
                    break
    if not matched:
        return 0.0
    precision, recall = matched / len(predicted), matched / len(golds)
    return 2 * precision * recall / (precision + recall)


def key_fact_recall(summary: str, facts: Sequence[str | Sequence[str]]) -> float:
    """The fraction of key facts a summary states (a fact may list alternative wordings).

    >>> key_fact_recall("Revenue rose 4.2% to €12.4 million in Iberia.", ["4.2%", ["€12.4 million", "12.4m"], "Nordics"])
    0.6666666666666666
    """
    if not facts:
        return 0.0
    hit = 0
    for fact in facts:
        options = [str(o) for o in fact] if isinstance(fact, (list, tuple)) else [str(fact)]
        hit += any(contains_phrase(summary, o) for o in options)
    return hit / len(facts)


def find_hedge(answer: str) -> str | None:
    """The hedging word of an answer that offers more than one possibility, or None.

    >>> find_hedge("RF-7341 or RF-7314"), find_hedge("RF-7341")
    ('or', None)
    """
    m = _HEDGES.search(answer[:MAX_RESPONSE_CHARS])
    return m.group().lower() if m else None


def extract_answer(response: str) -> str:
    """The last ``<answer>`` tag's text, else the last "Answer:" line, else the response
    without its ``<cite>`` tags.

    >>> extract_answer("thinking <answer> 42 </answer> <cite>S3</cite>")
    '42'
    >>> extract_answer("Answer: Oslo")
    'Oslo'
    """
    tags = _ANSWER_TAG.findall(response)
    if tags:
        return str(tags[-1]).strip()
    lines = _ANSWER_LINE.findall(response)
    if lines:
        return _CITE_TAG.sub("", str(lines[-1])).strip()
    return _CITE_TAG.sub("", response).strip()


def parse_citations(response: str) -> tuple[list[str], list[str]]:
    """Section ids and quoted spans inside ``<cite>`` tags.

    >>> parse_citations('<cite>S4, s19; "the code is RF-7341"</cite>')
    (['S4', 'S19'], ['the code is RF-7341'])
    """
    ids: list[str] = []
    quotes: list[str] = []
    for body in _CITE_TAG.findall(response):
        for m in _QUOTE.finditer(body):
            quotes.append(m.group(1) or m.group(2))
        rest = _QUOTE.sub(" ", body)
        ids.extend(f"S{int(n)}" for n in _SECTION_ID.findall(rest))
    return list(dict.fromkeys(ids)), list(dict.fromkeys(quotes))


def citation_score(
    ids: Sequence[str], quotes: Sequence[str], support: Sequence[Mapping[str, str]]
) -> float:
    """F1 of citations against supporting facts (``{"section": sid, "text": sentence}``).

    A section id supports a fact in that section; a quote supports a fact when, normalised,
    it lies inside the fact's sentence and covers at least half of it (or contains it).

    >>> facts = [{"section": "S4", "text": "The code for the Marlow depot is RF-7341."}]
    >>> citation_score(["S4"], [], facts), citation_score(["S4", "S9"], [], facts)
    (1.0, 0.6666666666666666)
    >>> citation_score([], ["code for the Marlow depot is RF-7341"], facts)
    1.0
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
    precision, recall = valid / items, sum(covered) / len(support)
    return 0.0 if not valid else 2 * precision * recall / (precision + recall)


def dump_penalty(words: int, max_words: int) -> float:
    """0 within ``max_words``, rising linearly to 1 at twice that.

    >>> dump_penalty(30, 40), dump_penalty(60, 40), dump_penalty(500, 40)
    (0.0, 0.5, 1.0)
    """
    if max_words <= 0 or words <= max_words:
        return 0.0
    return min(1.0, (words - max_words) / max_words)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def _mentions_distractor(
    answer: str, golds: Sequence[str], distractors: Sequence[str]
) -> str | None:
    text = f" {normalize_answer(answer)} "
    for g in golds:
        ng = normalize_answer(g)
        if ng:
            text = text.replace(f" {ng} ", "  ")
    for d in distractors:
        nd = normalize_answer(d)
        if nd and f" {nd} " in text:
            return d
    return None


def correctness(answer: str, spec: Mapping[str, Any]) -> tuple[float, str]:
    """How right the extracted answer is, in [0, 1], and why (no citations or penalties).

    >>> correctness("RF-7341", {"type": "exact", "gold": "RF-7341", "distractors": ["RF-7314"]})
    (1.0, 'correct')
    >>> correctness("RF-7314", {"type": "exact", "gold": "RF-7341", "distractors": ["RF-7314"]})[0]
    0.0
    """
    kind = spec.get("type", "exact")
    gold = spec.get("gold")
    distractors = [d for d in _as_list(spec.get("distractors") or []) if not d.startswith("[")]
    if kind in ("exact", "number"):
        golds = _as_list(gold) + _as_list(spec.get("aliases") or [])
        hedge = find_hedge(answer)
        if hedge and not any(hedge in normalize_answer(g).split() for g in golds):
            return 0.0, f"hedged answer ({hedge!r}): give one answer"
        other = _mentions_distractor(answer, golds, distractors)
        if other is not None:
            return 0.0, "the answer names a value the question does not ask for"
        if kind == "number":
            ok = number_match(answer, gold)
            return ok, "correct" if ok else "wrong number (or more than one number)"
        if exact_match(answer, golds):
            return 1.0, "correct"
        norm = normalize_answer(answer).split()
        for g in golds:
            ng = normalize_answer(g).split()
            if ng and contains_phrase(answer, g) and len(norm) <= max(2 * len(ng), len(ng) + 8):
                return 1.0, "correct"
        return 0.0, "wrong answer"
    if kind in ("set", "list"):
        golds = _as_list(gold)
        parts = split_parts(answer, expected=len(golds))
        ordered = kind == "list"
        for wrong in spec.get("distractors") or []:
            if (
                isinstance(wrong, list)
                and match_all(parts, _as_list(wrong), ordered=ordered) == 1.0
            ):
                return 0.0, "the answer lists items the question does not ask for"
        score = match_all(parts, golds, ordered=ordered)
        return score, "all parts correct" if score == 1.0 else f"parts score {score:.2f}"
    if kind == "f1":
        f = token_f1(answer, _as_list(gold))
        d = token_f1(answer, distractors) if distractors else 0.0
        if d >= f:
            return 0.0, "the answer matches another part of the document better than the asked one"
        return f, f"token F1 {f:.2f}"
    if kind == "keyfacts":
        facts: list[Any] = gold if isinstance(gold, list) else [gold]
        recall = key_fact_recall(answer, facts)
        wrong = key_fact_recall(answer, distractors) if distractors else 0.0
        if wrong > recall:
            return 0.0, "the summary describes another section"
        return recall, f"{round(recall * len(facts))} of {len(facts)} key facts"
    return 0.0, f"unknown answer type {kind!r}"


def grade_answer(
    response: str,
    spec: Mapping[str, Any],
    *,
    citation_weight: float = 0.2,
    section_ids: Collection[str] | None = None,
) -> RewardResult:
    """Grade a response against an answer spec; the score is in [0, 1].

    ``spec``: ``type`` (``exact``, ``number``, ``set``, ``list``, ``f1``, ``keyfacts``),
    ``gold``, optional ``aliases``, ``distractors`` (values found elsewhere in the document
    that must not be given), ``support`` (``[{"section", "text"}]``), ``max_words`` and
    ``success_at`` (the score that counts as solved for graded types; default 0.8).

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
    try:
        c, why = correctness(answer, spec)
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
