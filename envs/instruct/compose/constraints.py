"""Choosing each instruction's arguments so that one response can follow them all.

Arguments that shape the response (keywords, phrases, counts of bullets, sections, paragraphs)
are chosen before it is written (:func:`prepare`); thresholds (words, sentences, letters, capital
words, keyword counts) are read off the finished response afterwards (:func:`measure`), each on
the side of its relation with a margin, so every task has a compliant response by construction.
:data:`CONFLICTS` keeps out pairs no response can satisfy at once (IFEval keeps a similar table).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from llmgym.envs.instruct.compose import material as m
from llmgym.envs.instruct.compose.plan import Plan
from llmgym.rewards.instruct.text import capital_words, count_sentences, count_words

K = "keywords:"
FMT = "detectable_format:"
LEN = "length_constraints:"
CASE = "change_case:"
STRUCTURE = {
    LEN + "number_paragraphs", LEN + "nth_paragraph_first_word", FMT + "multiple_sections",
    FMT + "number_bullet_lists", FMT + "number_highlighted_sections", FMT + "title",
    "detectable_content:postscript", "detectable_content:number_placeholders",
    "startend:start_checker", "startend:end_checker", "startend:quotation",
}  # fmt: skip
WHOLE = {FMT + "json_format", FMT + "json_schema", "combination:two_responses",
         "combination:repeat_prompt", FMT + "constrained_response", "language:response_language"}  # fmt: skip

_PAIRS = [
    (LEN + "number_paragraphs", LEN + "nth_paragraph_first_word"),
    (LEN + "number_paragraphs", FMT + "multiple_sections"),
    (LEN + "nth_paragraph_first_word", FMT + "multiple_sections"),
    (LEN + "nth_paragraph_first_word", FMT + "title"),
    (LEN + "nth_paragraph_first_word", "startend:start_checker"),
    (LEN + "nth_paragraph_first_word", "detectable_content:postscript"),
    (LEN + "nth_paragraph_first_word", FMT + "number_bullet_lists"),
    (FMT + "multiple_sections", CASE + "english_lowercase"),
    (FMT + "multiple_sections", CASE + "english_capital"),
    (CASE + "english_lowercase", CASE + "english_capital"),
    (CASE + "capital_word_frequency", CASE + "english_lowercase"),
    (CASE + "capital_word_frequency", CASE + "english_capital"),
    ("startend:quotation", "combination:repeat_prompt"),
]
CONFLICTS: dict[str, set[str]] = {}
for _a, _b in _PAIRS:
    CONFLICTS.setdefault(_a, set()).add(_b)
    CONFLICTS.setdefault(_b, set()).add(_a)
for _w in WHOLE:  # a whole-response form goes only with what its family allows
    CONFLICTS.setdefault(_w, set()).update(STRUCTURE | WHOLE - {_w})
    for _s in STRUCTURE | WHOLE - {_w}:
        CONFLICTS.setdefault(_s, set()).add(_w)


def compatible(chosen: list[str], candidate: str) -> bool:
    return candidate not in chosen and not any(candidate in CONFLICTS.get(c, set()) for c in chosen)


# --- before writing -------------------------------------------------------------------------------


def _words_pick(rng: random.Random, n: int, avoid: set[str]) -> list[str]:
    pool = [w for w in m.EXTRA_WORDS if w not in avoid]
    return rng.sample(pool, n)


def _used(plan: Plan) -> set[str]:
    return {
        w for kw in plan.kwargs.values() for v in kw.values() if isinstance(v, list) for w in v
    } | {str(kw.get("keyword")) for kw in plan.kwargs.values() if kw.get("keyword")}


def _sentence_with(rng: random.Random, word: str) -> str:
    return rng.choice(
        (f"Someone even brought a {word} along.", f"The {word} became a running joke among us.",
         f"A {word} sits by the door for good luck.", f"We still talk about the {word} story.")
    )  # fmt: skip


def _insert(plan: Plan, text: str) -> None:
    para = plan.body[plan.rng.randrange(len(plan.body))]
    para.insert(plan.rng.randint(1, len(para)), text)


def _keywords(plan: Plan) -> dict[str, Any]:
    words = _words_pick(plan.rng, 1 + round(plan.difficulty), _used(plan))
    for w in words:
        _insert(plan, _sentence_with(plan.rng, w))
    return {"keywords": words}


def _keyword_frequency(plan: Plan) -> dict[str, Any]:
    word = _words_pick(plan.rng, 1, _used(plan))[0]
    times = plan.rng.randint(1, 3)
    for _ in range(times):
        _insert(plan, _sentence_with(plan.rng, word))
    return {"keyword": word, "frequency": times, "relation": ""}  # relation: measured


def _forbidden(plan: Plan) -> dict[str, Any]:
    return {"forbidden_words": _words_pick(plan.rng, 2 + round(2 * plan.difficulty), _used(plan))}


def _paragraph_count(plan: Plan, n: int) -> None:
    sentences = [s for p in plan.body for s in p]
    while len(sentences) < 2 * n:
        sentences.append(m.sentence(plan.rng, plan.subject))
    size = len(sentences) // n
    plan.body[:] = [sentences[i * size : (i + 1) * size if i < n - 1 else None] for i in range(n)]


def _paragraphs(plan: Plan) -> dict[str, Any]:
    n = plan.rng.randint(2, 3 + round(2 * plan.difficulty))
    _paragraph_count(plan, n)
    return {"num_paragraphs": n}


def _nth_word(plan: Plan) -> dict[str, Any]:
    n = plan.rng.randint(2, 3 + round(2 * plan.difficulty))
    _paragraph_count(plan, n)
    return {"num_paragraphs": n, "nth_paragraph": plan.rng.randint(1, n),
            "first_word": plan.rng.choice(m.FIRST_WORDS)}  # fmt: skip


def _sections(plan: Plan) -> dict[str, Any]:
    n = plan.rng.randint(2, 3 + round(2 * plan.difficulty))
    _paragraph_count(plan, n)
    return {"section_spliter": plan.rng.choice(m.SECTION_WORDS), "num_sections": n}


def _bullets(plan: Plan) -> dict[str, Any]:
    if not plan.bullets:
        n = plan.rng.randint(2, 3 + round(3 * plan.difficulty))
        plan.bullets = m.sentences(plan.rng, plan.subject, n)
    return {"num_bullets": len(plan.bullets)}


def _highlights(plan: Plan) -> dict[str, Any]:
    n = plan.rng.randint(1, 2 + round(2 * plan.difficulty))
    for para in plan.body:
        while len(para) < 2:
            para.append(m.sentence(plan.rng, plan.subject))
    while sum(len(p) - 1 for p in plan.body) < n:  # the first sentence of each is never marked
        plan.body[-1].append(m.sentence(plan.rng, plan.subject))
    return {"num_highlights": n}


def _placeholders(plan: Plan) -> dict[str, Any]:
    n = plan.rng.randint(1, 2 + round(2 * plan.difficulty))
    marks = plan.rng.sample(m.PLACEHOLDERS, n)
    plan.body[-1].append("Please reply to " + " and ".join(marks) + " before the end of the month.")
    return {"num_placeholders": n}


def _language(plan: Plan) -> dict[str, Any]:
    code = plan.rng.choice(sorted(m.FOREIGN))
    bank = list(m.FOREIGN[code])
    plan.rng.shuffle(bank)
    half = len(bank) // 2
    plan.body[:] = [bank[:half], bank[half:]]
    plan.terms, plan.min_terms = [], 0
    return {"language": code}


PREPARE: dict[str, Callable[[Plan], dict[str, Any]]] = {
    K + "existence": _keywords,
    K + "frequency": _keyword_frequency,
    K + "forbidden_words": _forbidden,
    LEN + "number_paragraphs": _paragraphs,
    LEN + "nth_paragraph_first_word": _nth_word,
    FMT + "multiple_sections": _sections,
    FMT + "number_bullet_lists": _bullets,
    FMT + "number_highlighted_sections": _highlights,
    "detectable_content:number_placeholders": _placeholders,
    "detectable_content:postscript": lambda p: {
        "postscript_marker": p.rng.choice(m.POSTSCRIPT_MARKERS)
    },
    "startend:start_checker": lambda p: {"start_phrase": p.rng.choice(m.START_PHRASES)},
    "startend:end_checker": lambda p: {"end_phrase": p.rng.choice(m.END_PHRASES)},
    "combination:repeat_prompt": lambda p: {"prompt_to_repeat": p.request},
    "language:response_language": _language,
    CASE + "capital_word_frequency": lambda p: _shout(p),
}


def _shout(plan: Plan) -> dict[str, Any]:
    for word in plan.rng.sample(m.SHOUTED, plan.rng.randint(1, 4)):
        _insert(plan, f"This part is {word} for everyone.")
    return {"capital_frequency": 0, "capital_relation": ""}  # measured


def prepare(plan: Plan, instruction_id: str) -> dict[str, Any]:
    """The arguments of ``instruction_id`` that shape the response (the plan may grow)."""
    step = PREPARE.get(instruction_id)
    return step(plan) if step else {}


# --- after writing --------------------------------------------------------------------------------


def _threshold(rng: random.Random, count: int, relation: str) -> int:
    """A threshold ``count`` satisfies under ``relation``, with a margin of at least one."""
    if relation == "at least":
        return max(1, math.floor(count * rng.uniform(0.6, 0.9)))
    return count + max(2, math.ceil(count * rng.uniform(0.1, 0.4)))


def _relation(plan: Plan, count: int) -> str:
    if plan.kind == "summarize":
        return "less than"
    return "at least" if count >= 3 and plan.rng.random() < 0.5 else "less than"


def measure(plan: Plan, instruction_id: str, kwargs: dict[str, Any], text: str) -> dict[str, Any]:
    """The thresholds of ``instruction_id`` read off the compliant response ``text``."""
    rng = plan.rng
    counters = {
        LEN + "number_words": ("num_words", "relation", lambda: count_words(text)),
        LEN + "number_sentences": ("num_sentences", "relation", lambda: count_sentences(text)),
        CASE + "capital_word_frequency": ("capital_frequency", "capital_relation", lambda: capital_words(text)),
    }  # fmt: skip
    if instruction_id in counters:
        value_key, relation_key, count = counters[instruction_id]
        n = count()
        relation = _relation(plan, n)
        # capital words are tokenised differently by IFEval (nltk): keep a wider margin
        margin = 2 if instruction_id.startswith(CASE) else 0
        t = _threshold(rng, n, relation)
        t = max(1, t - margin) if relation == "at least" else t + margin
        return {value_key: t, relation_key: relation}
    if instruction_id == K + "letter_frequency":
        letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
        n = text.lower().count(letter)
        relation = "at least" if n >= 3 and rng.random() < 0.5 else "less than"
        return {
            "letter": letter,
            "let_frequency": _threshold(rng, n, relation),
            "let_relation": relation,
        }
    if instruction_id == K + "frequency":
        n = int(kwargs["frequency"])
        relation = "at least" if rng.random() < 0.5 else "less than"
        t = rng.randint(1, n) if relation == "at least" else n + rng.randint(1, 2)
        return {"keyword": kwargs["keyword"], "frequency": t, "relation": relation}
    return kwargs
