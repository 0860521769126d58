"""Long-document rewards: SQuAD-style matching, multi-part answers, citations and penalties.

Covered: SQuAD normalisation, exact match, token F1, numbers written as reports write them
("€1.25 million"), multi-part answers graded precision first (sets and ordered lists), key-fact
recall for summaries, citation checking (section ids or quoted spans that must contain the
supporting facts), and penalties for answers that offer more than one possibility, answers that
copy a distractor, and answers that dump large parts of the document. :func:`grade_answer`
combines them:

    score = correctness * ((1 - w) + w * citation) * (1 - dump_penalty)     in [0, 1]

where ``w`` is the citation weight (0 when the gold names no supporting facts) and the
citation part counts only for answers that are at least partly correct.

An optimizing policy pays for hedging wherever a hedge earns more than a committed answer, so
correctness is 0 for every answer type when the answer hedges (:func:`find_hedge`: "X or Y",
"either", "X/Y", "possibly X", "X?", two different ``<answer>`` tags...), names a distractor,
or names a second value: a single-value answer may wrap its value in words but not add another
code, number, name or quoted string that neither the gold nor the question holds
(:func:`other_values`); a count or amount states exactly one quantity (a number inside a code
such as ``SEV-2`` is not one); a list earns nothing when any item is not asked for
(:func:`list_credit`); a summary earns nothing when it states a fact of another section or a
second value for one of its facts. Citing more sections than support the answer earns no
citation credit once fewer than half the citations support a fact.

Not covered: paraphrase (an answer must use the document's wording or number), ROUGE or
model-based judging of free text; the value rule reads the shape of words, so a single-value
answer that explains itself with other proper names ("Ana Ruiz, who heads the Iberia division")
scores 0 like a candidate list would.

Every function is pure, never raises on model output and bounds its work: a response past
:data:`MAX_RESPONSE_CHARS` is treated as a dump and scores 0 without being read.
"""

from __future__ import annotations

import bisect
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
_HEDGE_WORDS = (
    # alternatives
    "or",
    "either",
    "neither",
    "nor",
    "and/or",
    "vs",
    "versus",
    "otherwise",
    "alternatively",
    "whichever",
    "one of",
    "any of",
    # uncertainty
    "maybe",
    "perhaps",
    "possibly",
    "possible",
    "probably",
    "probable",
    "likely",
    "unlikely",
    "might",
    "could be",
    "may be",
    "unsure",
    "not sure",
    "uncertain",
    "unclear",
    "i think",
    "i believe",
    "i guess",
    "presumably",
    "supposedly",
    "seemingly",
    "seems",
    "appears to",
    "somewhere",
    "potentially",
    "conceivably",
    # approximations
    "approximately",
    "approx",
    "roughly",
    "around",
    "about",
    "circa",
    "nearly",
    "almost",
    "between",
)
_UNITS = (
    "hour|hr|h|day|d|week|wk|month|mo|year|yr|annum|night|person|head|unit|item|"
    "km|kg|m|min|minute|s|sec|second"
)
_HEDGES = re.compile(
    r"\b(?P<word>"
    + "|".join(
        re.escape(w).replace(r"\ ", r"\s+") for w in sorted(_HEDGE_WORDS, key=len, reverse=True)
    )
    + r")\b"
    + r"|(?P<mark>\?)"
    + r"|(?P<tilde>~)(?=\s*[\d€$£])"
    + rf"|(?<=[\w)\]\"'])\s*(?P<slash>/)\s*(?!(?:{_UNITS})\b)(?=[\w€$£\"'(])",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[;\n|]+")
_NON_WORD = re.compile(r"[^\w/]+")
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


def find_hedge(answer: str, golds: Sequence[str] = ()) -> str | None:
    """The first sign that an answer offers more than one possibility or doubts its own, or
    None: a word of alternatives or uncertainty ("or", "either", "vs", "one of", "maybe",
    "possibly", "I think", "about"...), a question mark, ``~`` before a number, or a slash
    between two values (``X/Y``; a unit such as ``€120/hour`` is not one). A word that is part
    of a gold (``golds``) is not a hedge there.

    >>> find_hedge("RF-7341 or RF-7314"), find_hedge("RF-7341"), find_hedge("possibly Oslo")
    ('or', None, 'possibly')
    >>> find_hedge("45/S3"), find_hedge("€120/hour"), find_hedge("Oslo?")
    ('/', None, '?')
    """
    gold_words = [f" {' '.join(str(g).lower().split())} " for g in golds]
    for m in _HEDGES.finditer(answer[:MAX_RESPONSE_CHARS]):
        word = m.group("word")
        if word is not None:
            marker = " ".join(word.lower().split())
            spaced = " " + " ".join(_NON_WORD.sub(" ", marker).split()) + " "
            if any(spaced in " " + _NON_WORD.sub(" ", g) + " " for g in gold_words):
                continue
            return marker
        marker = m.group("mark") or m.group("tilde") or m.group("slash") or ""
        if marker and not any(marker in str(g) for g in golds):
            return marker
    return None


_SECTION_REF = re.compile(r"[Ss]\d{1,6}")
_QUOTES = "\"'`\u2018\u2019\u201c\u201d"
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "he",
        "she",
        "they",
        "his",
        "her",
        "their",
        "there",
        "here",
        "in",
        "on",
        "at",
        "by",
        "for",
        "of",
        "to",
        "and",
        "so",
        "yes",
        "no",
        "answer",
        "final",
        "according",
        "per",
    ]
)


def other_values(answer: str, golds: Sequence[str], question: str = "") -> list[str]:
    """Words of a single-value answer that name a value besides the gold: a word with a digit
    (a code, a number), a capitalised word (a name; an opening "The" or "It" is not one), a
    snake_case name or a quoted string, unless the gold or the question holds it. A section id
    (``S4``) is a reference, not a value.

    >>> other_values("The code for the Marlow depot is RF-7341.", ["RF-7341"], "What is the code for the Marlow depot?")
    []
    >>> other_values("RF-7341, AC-9911 or Anna Berg (S4)", ["RF-7341"])
    ['AC-9911', 'Anna', 'Berg']
    """
    allowed = {w for text in [*golds, question] for w in normalize_answer(str(text)).split()}
    out: list[str] = []
    sentence_start = True
    for m in re.finditer(r"\S+", answer[:MAX_RESPONSE_CHARS]):
        raw = m.group()
        starts, sentence_start = sentence_start, raw.endswith((".", "!"))
        word = raw.strip(string.punctuation + _QUOTES)
        norm = normalize_answer(raw)
        if not norm or not word or _SECTION_REF.fullmatch(word):
            continue
        if all(w in allowed for w in norm.split()):
            continue
        quoted = raw[0] in _QUOTES or raw.rstrip(".,;:!)")[-1:] in _QUOTES
        capital = any(c.isupper() for c in word) and not (starts and norm in _FUNCTION_WORDS)
        if quoted or capital or "_" in word or any(c.isdigit() for c in word):
            out.append(word)
    return out


def given_answers(response: str) -> list[str]:
    """The distinct answers a response gives (normalised): its ``<answer>`` tags, else its
    "Answer:" lines. More than one is a hedge.

    >>> given_answers("<answer>Oslo</answer> ... <answer> oslo </answer>")
    ['oslo']
    >>> given_answers("Answer: Oslo\\nFinal answer: Lyon")
    ['oslo', 'lyon']
    """
    found = _ANSWER_TAG.findall(response) or _ANSWER_LINE.findall(response)
    return list(dict.fromkeys(normalize_answer(_CITE_TAG.sub("", str(a))) for a in found))


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


def _distractor_facts(facts: Sequence[Any], distractors: Sequence[Any]) -> list[list[str]]:
    """The distractor facts that share no wording with a gold fact (another incident of the
    same severity is not a wrong fact)."""
    gold_words = {normalize_answer(o) for f in facts for o in _as_list(f)}
    out = []
    for d in distractors:
        options = _as_list(d)
        if not any(normalize_answer(o) in gold_words for o in options):
            out.append(options)
    return out


def _f1_intrusion(answer: str, golds: Sequence[str], distractors: Sequence[str]) -> bool:
    """Whether a free-text answer also states a distractor: it holds at least half of the
    words of some distractor that the gold does not have."""
    said = set(normalize_answer(answer).split())
    gold_words = {w for g in golds for w in normalize_answer(g).split()}
    for d in distractors:
        own = set(normalize_answer(d).split()) - gold_words - _FUNCTION_WORDS
        if own and 2 * len(own & said) >= len(own):
            return True
    return False


_FILLER = _FUNCTION_WORDS | frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "as",
        "with",
        "from",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "how",
        "why",
        "than",
        "then",
        "also",
        "only",
        "one",
        "value",
        "name",
        "called",
        "named",
        "document",
        "states",
        "stated",
        "says",
        "said",
        "section",
    ]
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _extra_words(answer: str, golds: Sequence[str], question: str) -> list[str]:
    """Words of a single-value answer that neither the gold, the question nor plain connecting
    words account for: a single value may be wrapped in the question's own words ("The code
    for the Marlow depot is RF-7341") but not given beside anything else."""
    allowed = {_stem(w) for text in [*golds, question] for w in normalize_answer(str(text)).split()}
    return [
        w
        for w in normalize_answer(answer[:MAX_RESPONSE_CHARS]).split()
        if w not in _FILLER and _stem(w) not in allowed and not _SECTION_REF.fullmatch(w)
    ]


def _stray_numbers(answer: str, wordings: Sequence[str], question: str) -> list[str]:
    """Plain numbers (``2022``, ``15%``, ``1.5``) in a summary that no fact's wording or the
    question holds: values besides the facts."""
    allowed = {w for t in [*wordings, question] for w in re.findall(r"\d+(?:[.,]\d+)*", t)}
    out = []
    for m in re.finditer(r"(?<![\w-])\d+(?:[.,]\d+)*%?(?![\w-])", answer[:MAX_RESPONSE_CHARS]):
        digits = m.group().rstrip("%")
        if digits not in allowed:
            out.append(m.group())
    return out


def _second_reading(answer: str, wordings: Sequence[str]) -> bool:
    """Whether a summary states a value shaped like one of its facts' numeric wordings but not
    one of them ("SEV-4" beside the fact "SEV-2", "97 minutes" beside "41 minutes")."""
    allowed = {normalize_answer(w) for w in wordings}
    text = answer[:MAX_RESPONSE_CHARS]
    for w in wordings:
        if not any(c.isdigit() for c in w):
            continue
        shape = r"\d+(?:[.,]\d+)*".join(re.escape(p) for p in re.split(r"\d+(?:[.,]\d+)*", w))
        for m in re.finditer(rf"(?<![\w-]){shape}(?![\w-])", text, re.IGNORECASE):
            if normalize_answer(m.group()) not in allowed:
                return True
    return False


def _second_verdict(answer: str, golds: Sequence[str]) -> bool:
    """Whether an answer to a question the document answers also says "not stated"."""
    text = f" {normalize_answer(answer)} "
    if any(normalize_answer(g) in NOT_STATED for g in golds):
        return False  # a value beside it is a second value (:func:`other_values`)
    return any(f" {p} " in text for p in NOT_STATED)


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
        golds = [o for f in fact_list for o in _as_list(f)]
    else:
        golds = _as_list(gold) + _as_list(spec.get("aliases") or [])
    hedge = find_hedge(answer, golds)
    if hedge is not None:
        return 0.0, f"hedged answer ({hedge!r}): give one answer"
    if kind in ("exact", "number"):
        if _mentions_distractor(answer, golds, distractors) is not None:
            return 0.0, "the answer names a value the question does not ask for"
        if kind == "number":
            ok = number_match(answer, gold, codes=False)
            return ok, "correct" if ok else "wrong number (or more than one number)"
        if other_values(answer, golds, question) or _second_verdict(answer, golds):
            return 0.0, "the answer names more than one value: give one answer"
        if _extra_words(answer, golds, question):
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
        items = _as_list(gold)
        parts = split_parts(answer, expected=len(items))
        for wrong in raw_distractors:
            if isinstance(wrong, (list, tuple)) and list_credit(
                parts, _as_list(wrong), ordered=kind == "list", all_or_nothing=True
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
        if distractors and _f1_intrusion(answer, golds, distractors):
            return 0.0, "the answer states another part of the document besides the asked one"
        if distractors and token_f1(answer, distractors) >= f:
            return 0.0, "the answer matches another part of the document better than the asked one"
        if other_values(answer, golds, question):
            return 0.0, "the answer names values the question does not ask for"
        return f, f"token F1 {f:.2f}"
    if kind == "keyfacts":
        wrong = _distractor_facts(fact_list, raw_distractors)
        if wrong and key_fact_recall(answer, wrong) > 0:
            return 0.0, "the summary states facts of another section"
        if _second_reading(answer, golds) or _stray_numbers(answer, golds, question):
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
