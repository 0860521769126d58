"""Answer matching for long-document questions: SQuAD normalisation, numbers, items, key facts.

The matchers that :mod:`llmgym.rewards.longdoc.grade` builds its score from: exact match, token
F1, numbers written as reports write them ("€1.25 million"), multi-part answers split into items
and matched one to one, and key-fact recall. Each is pure and never raises on model output.
Not here: reading the answer out of a response (:mod:`~llmgym.rewards.longdoc.extract`), the
signs of a hedged answer (:mod:`~llmgym.rewards.longdoc.hedges`) and the reward itself.
"""

from __future__ import annotations

import bisect
import re
import string
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

MAX_RESPONSE_CHARS = 40_000
"""A response longer than this (about 10k tokens) is a dump of the document: score 0."""
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014")
_NUMBER = re.compile(
    r"(?<![\w.])(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)"
    r"(?:\s*(?P<word>million|billion|thousand|bn)\b|(?P<suffix>[mk])\b)?",
    re.IGNORECASE,
)
_SCALE = {"thousand": 1000, "k": 1000, "million": 10**6, "m": 10**6, "billion": 10**9, "bn": 10**9}
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
    return float(any(pred == normalize_answer(g) for g in as_texts(golds)))


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """SQuAD token F1, the best over the golds.

    >>> round(token_f1("expired TLS certificate", "an expired TLS certificate on the edge proxy"), 3)
    0.667
    >>> token_f1("", "x")
    0.0
    """
    pred = normalize_answer(prediction).split()
    best = 0.0
    for gold in as_texts(golds):
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


def numbers_in(text: str, *, codes: bool = True) -> set[Decimal]:
    """The distinct numbers a text states, with thousands separators and scale words.
    ``codes=False`` skips numbers that belong to a code (``SEV-2``, ``RF-7341``): a count or an
    amount is not the digits of an identifier.

    >>> sorted(numbers_in("€1.25 million, or 1,250,000 in total; 3 items"))
    [Decimal('3'), Decimal('1250000.00')]
    >>> numbers_in("SEV-2 on RF-7341", codes=False), numbers_in("SEV-2")
    (set(), {Decimal('2')})
    """
    found = set()
    text = text[:MAX_RESPONSE_CHARS]
    for m in _NUMBER.finditer(text):
        at = m.start()
        if not codes and at >= 2 and text[at - 1] == "-" and text[at - 2].isalpha():
            continue
        scale = (m.group("word") or m.group("suffix") or "").lower()
        try:
            found.add(Decimal(m.group("num").replace(",", "")) * _SCALE.get(scale, 1))
        except InvalidOperation:
            continue
    return found


def number_match(prediction: str, gold: Any, *, codes: bool = True) -> float:
    """1.0 if the prediction states exactly one number and it equals the gold (``codes``: as
    in :func:`numbers_in`).

    >>> number_match("The total is €1,275,000.", 1275000), number_match("12 or 13", 12)
    (1.0, 0.0)
    >>> number_match("SEV-2", 2, codes=False)
    0.0
    """
    try:
        target = Decimal(str(gold).replace(",", ""))
    except InvalidOperation:
        return 0.0
    values = numbers_in(prediction, codes=codes)
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
    """One item: a number equal to a numeric gold (not the digits of a code), else a
    normalised exact match.

    >>> part_matches("90 days", "90"), part_matches("Lyon", "lyon"), part_matches("9", "90")
    (True, True, False)
    """
    if re.fullmatch(r"[-+]?[\d,]+(?:\.\d+)?", gold.strip()):
        return number_match(prediction, gold, codes=False) == 1.0
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


def list_credit(
    predicted: Sequence[str],
    golds: Sequence[str],
    *,
    ordered: bool = False,
    all_or_nothing: bool = False,
) -> float:
    """Precision-first credit for a multi-part answer: 0 when any item is not a gold item (a
    wrong item, an extra one, a repeat), else the share of the gold items named (ordered: the
    longest run in the gold's order). ``all_or_nothing``: 1.0 for exactly the gold list, else 0.
    An item that says "not stated" is an honest gap, not a wrong item (except all-or-nothing).

    >>> list_credit(["Lyon", "Oslo"], ["oslo", "lyon"]), list_credit(["Lyon"], ["oslo", "lyon"])
    (1.0, 0.5)
    >>> list_credit(["Lyon", "Oslo", "Turin"], ["oslo", "lyon"])
    0.0
    >>> list_credit(["b", "a", "c"], ["a", "b", "c"], ordered=True)
    0.6666666666666666
    >>> list_credit(["b", "a", "c"], ["a", "b", "c"], ordered=True, all_or_nothing=True)
    0.0
    """
    if not predicted or not golds:
        return 0.0
    items = list(predicted)
    if not all_or_nothing:
        items = [p for p in items if normalize_answer(p) not in NOT_STATED]
    free = list(range(len(golds)))
    matched: list[int] = []
    for item in items:
        k = next((k for k in free if part_matches(item, golds[k])), None)
        if k is None:
            return 0.0
        free.remove(k)
        matched.append(k)
    if not matched:
        return 0.0
    if all_or_nothing:
        complete = len(matched) == len(golds)
        return float(complete and (not ordered or matched == sorted(matched)))
    if not ordered:
        return len(matched) / len(golds)
    tails: list[int] = []  # longest increasing run of gold positions (patience sorting)
    for k in matched:
        at = bisect.bisect_left(tails, k)
        tails[at : at + 1] = [k]
    return len(tails) / len(golds)


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


def as_texts(value: Any) -> list[str]:
    """A gold, or a list of them, as a list of strings.

    >>> as_texts("Oslo"), as_texts(["Oslo", 90])
    (['Oslo'], ['Oslo', '90'])
    """
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]
