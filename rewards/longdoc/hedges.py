"""Signs that a long-document answer offers more than one answer, so that hedging never pays.

An optimizing policy pays for hedging wherever a hedge earns more than a committed answer. These
detectors find the signs: a word of alternatives or doubt (:func:`find_hedge`), a second value
beside the gold (:func:`other_values`, :func:`extra_words`), a distractor named
(:func:`mentions_distractor`, :func:`f1_intrusion`, :func:`distractor_facts`), a summary value
that is not one of its facts (:func:`stray_numbers`, :func:`second_reading`) and "not stated"
beside a value (:func:`second_verdict`). Each returns what it found; turning that into a score
is :func:`llmgym.rewards.longdoc.grade.correctness`'s job.

The value rule reads the shape of words, so a single-value answer that explains itself with
other proper names ("Ana Ruiz, who heads the Iberia division") counts as naming a second value.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from llmgym.rewards.longdoc.matching import (
    MAX_RESPONSE_CHARS,
    NOT_STATED,
    as_texts,
    normalize_answer,
)

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
_NON_WORD = re.compile(r"[^\w/]+")


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


def mentions_distractor(
    answer: str, golds: Sequence[str], distractors: Sequence[str]
) -> str | None:
    """The first distractor an answer names once its gold wordings are set aside, or None."""
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


def distractor_facts(facts: Sequence[Any], distractors: Sequence[Any]) -> list[list[str]]:
    """The distractor facts that share no wording with a gold fact (another incident of the
    same severity is not a wrong fact)."""
    gold_words = {normalize_answer(o) for f in facts for o in as_texts(f)}
    out = []
    for d in distractors:
        options = as_texts(d)
        if not any(normalize_answer(o) in gold_words for o in options):
            out.append(options)
    return out


def f1_intrusion(answer: str, golds: Sequence[str], distractors: Sequence[str]) -> bool:
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


def extra_words(answer: str, golds: Sequence[str], question: str) -> list[str]:
    """Words of a single-value answer that neither the gold, the question nor plain connecting
    words account for: a single value may be wrapped in the question's own words ("The code
    for the Marlow depot is RF-7341") but not given beside anything else."""
    allowed = {_stem(w) for text in [*golds, question] for w in normalize_answer(str(text)).split()}
    return [
        w
        for w in normalize_answer(answer[:MAX_RESPONSE_CHARS]).split()
        if w not in _FILLER and _stem(w) not in allowed and not _SECTION_REF.fullmatch(w)
    ]


def stray_numbers(answer: str, wordings: Sequence[str], question: str) -> list[str]:
    """Plain numbers (``2022``, ``15%``, ``1.5``) in a summary that no fact's wording or the
    question holds: values besides the facts."""
    allowed = {w for t in [*wordings, question] for w in re.findall(r"\d+(?:[.,]\d+)*", t)}
    out = []
    for m in re.finditer(r"(?<![\w-])\d+(?:[.,]\d+)*%?(?![\w-])", answer[:MAX_RESPONSE_CHARS]):
        digits = m.group().rstrip("%")
        if digits not in allowed:
            out.append(m.group())
    return out


def second_reading(answer: str, wordings: Sequence[str]) -> bool:
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


def second_verdict(answer: str, golds: Sequence[str]) -> bool:
    """Whether an answer to a question the document answers also says "not stated"."""
    text = f" {normalize_answer(answer)} "
    if any(normalize_answer(g) in NOT_STATED for g in golds):
        return False  # a value beside it is a second value (:func:`other_values`)
    return any(f" {p} " in text for p in NOT_STATED)
