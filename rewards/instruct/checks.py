"""The instruction checkers: one pure function per IFEval instruction id, and their arguments.

Every IFEval instruction type (``keywords:existence`` ... ``startend:quotation``, with IFEval's
own ids and argument names, so IFEval's ``input_data.jsonl`` grades as it is) plus two more:
``startend:start_checker`` (a start phrase) and ``detectable_format:json_schema`` (JSON valid
against a JSON Schema). A checker reads the response and its arguments and says whether the
instruction is followed; it never raises on the response. :func:`validate` checks arguments
when a task is loaded, so a malformed task fails there and not in the middle of training.

Where IFEval can be paid for doing nothing, these are stricter (the conformance benchmark lists
each): keywords and frequencies match whole words, placeholders must name something (``[]`` is
no placeholder), a postscript starts a line, a constrained response gives one option (not all
three), and text whose language cannot be detected follows no language instruction. Not here:
the loose variants and the reward (``grade.py``), the prompt text (the env's composer).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from llmgym import error
from llmgym.rewards.instruct.text import (
    capital_words,
    count_sentences,
    count_words,
    detect_language,
)

RELATIONS = ("less than", "at least")
CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
TWO_RESPONSES_SEPARATOR = "******"
PARAGRAPH_DIVIDER = re.compile(r"\s?\*\*\*\s?")

Checker = Callable[..., bool]


def _compare(count: int, relation: str, threshold: int) -> bool:
    return count < threshold if relation == "less than" else count >= threshold


@functools.lru_cache(maxsize=4096)
def _whole_word(word: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(word.strip()) + r"(?!\w)", re.IGNORECASE)


# --- keywords -------------------------------------------------------------------------------


def keywords_existence(text: str, *, keywords: list[str]) -> bool:
    return all(_whole_word(k).search(text) for k in keywords)


def keyword_frequency(text: str, *, keyword: str, frequency: int, relation: str) -> bool:
    return _compare(len(_whole_word(keyword).findall(text)), relation, frequency)


def forbidden_words(text: str, *, forbidden_words: list[str]) -> bool:
    return not any(_whole_word(w).search(text) for w in forbidden_words)


def letter_frequency(text: str, *, letter: str, let_frequency: int, let_relation: str) -> bool:
    return _compare(text.lower().count(letter.lower()), let_relation, let_frequency)


# --- language and case ------------------------------------------------------------------------


def response_language(text: str, *, language: str) -> bool:
    return detect_language(text) == language


def capital_word_frequency(text: str, *, capital_frequency: int, capital_relation: str) -> bool:
    return _compare(capital_words(text), capital_relation, capital_frequency)


def english_capital(text: str) -> bool:
    return text.isupper() and detect_language(text) == "en"


def english_lowercase(text: str) -> bool:
    return text.islower() and detect_language(text) == "en"


# --- length -----------------------------------------------------------------------------------


def number_sentences(text: str, *, num_sentences: int, relation: str) -> bool:
    return _compare(count_sentences(text), relation, num_sentences)


def number_words(text: str, *, num_words: int, relation: str) -> bool:
    return _compare(count_words(text), relation, num_words)


def number_paragraphs(text: str, *, num_paragraphs: int) -> bool:
    """Paragraphs divided by ``***``; an empty one is allowed only before the first divider or
    after the last."""
    parts = PARAGRAPH_DIVIDER.split(text)
    inner = [p for p in parts[1:-1] if not p.strip()]
    if inner:
        return False
    count = len(parts) - (not parts[0].strip()) - (len(parts) > 1 and not parts[-1].strip())
    return count == num_paragraphs


def nth_paragraph_first_word(
    text: str, *, num_paragraphs: int, nth_paragraph: int, first_word: str
) -> bool:
    """``num_paragraphs`` paragraphs divided by blank lines, the ``nth`` starting with a word."""
    parts = text.split("\n\n")
    count = sum(1 for p in parts if p.strip())
    if not 1 <= nth_paragraph <= min(count, len(parts)):
        return False
    paragraph = parts[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].lstrip("'\"")
    word = re.split(r"[.,?!'\"]", word, maxsplit=1)[0].lower()
    return count == num_paragraphs and word == first_word.lower()


# --- content and format -----------------------------------------------------------------------


def number_placeholders(text: str, *, num_placeholders: int) -> bool:
    return len(re.findall(r"\[[^\[\]\n]*\w[^\[\]\n]*\]", text)) >= num_placeholders


def postscript(text: str, *, postscript_marker: str) -> bool:
    marker = postscript_marker.strip().lower()
    if marker == "p.p.s":
        pattern = r"^\s*p\.\s?p\.\s?s\b"
    elif marker == "p.s.":
        pattern = r"^\s*p\.\s?s\."
    else:
        pattern = r"^\s*" + re.escape(marker)
    return re.search(pattern, text.lower(), flags=re.MULTILINE) is not None


def number_bullet_lists(text: str, *, num_bullets: int) -> bool:
    stars = re.findall(r"^\s*\*[^*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def constrained_response(text: str) -> bool:
    return sum(option in text for option in CONSTRAINED_OPTIONS) == 1


def number_highlighted_sections(text: str, *, num_highlights: int) -> bool:
    single = [h for h in re.findall(r"\*[^\n*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n*]*\*\*", text) if h.strip("*").strip()]
    return len(single) + len(double) >= num_highlights


def multiple_sections(text: str, *, section_spliter: str, num_sections: int) -> bool:
    pattern = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(pattern, text)) - 1 >= num_sections


def _json_body(text: str) -> str:
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(fence)
    return body.removesuffix("```").strip()


def json_format(text: str) -> bool:
    try:
        json.loads(_json_body(text))
    except (ValueError, RecursionError):
        return False
    return True


def json_schema(text: str, *, schema: dict[str, Any]) -> bool:
    try:
        value = json.loads(_json_body(text))
    except (ValueError, RecursionError):
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def title(text: str) -> bool:
    return any(t.strip("<>").strip() for t in re.findall(r"<<[^\n]+>>", text))


# --- combination and start/end ----------------------------------------------------------------


def two_responses(text: str) -> bool:
    parts = text.split(TWO_RESPONSES_SEPARATOR)
    if any(not p.strip() for p in parts[1:-1]):
        return False
    kept = [p.strip() for p in parts if p.strip()]
    return len(kept) == 2 and kept[0] != kept[1]


def repeat_prompt(text: str, *, prompt_to_repeat: str) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.strip().lower())


def end_checker(text: str, *, end_phrase: str) -> bool:
    return text.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def start_checker(text: str, *, start_phrase: str) -> bool:
    return text.strip().strip('"').lower().startswith(start_phrase.strip().lower())


def no_comma(text: str) -> bool:
    return "," not in text


def quotation(text: str) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


CHECKS: dict[str, Checker] = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keyword_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:json_schema": json_schema,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "startend:start_checker": start_checker,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
    "startend:quotation": quotation,
}
"""Instruction id -> checker; 25 IFEval types and two of llmgym's own."""

_INT_ARGS = frozenset(
    {"frequency", "let_frequency", "num_sentences", "num_words", "num_paragraphs",
     "nth_paragraph", "num_placeholders", "num_bullets", "num_highlights", "num_sections",
     "capital_frequency"}
)  # fmt: skip
_RELATION_ARGS = frozenset({"relation", "let_relation", "capital_relation"})
_LIST_ARGS = frozenset({"keywords", "forbidden_words"})


def _arguments(checker: Checker) -> list[str]:
    code = checker.__code__
    return list(code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])


def validate(instruction_id: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments of one instruction, checked (IFEval's ``None`` values dropped); raises
    :class:`llmgym.error.InvalidTask` saying what is wrong.

    >>> validate("keywords:existence", {"keywords": ["tea"], "unused": None})
    {'keywords': ['tea']}
    """
    checker = CHECKS.get(instruction_id)
    if checker is None:
        hint = error.did_you_mean(str(instruction_id), CHECKS)
        raise error.InvalidTask(f"Unknown instruction id {instruction_id!r}{hint}")
    given = {k: v for k, v in dict(kwargs or {}).items() if v is not None}
    wanted = _arguments(checker)
    if sorted(given) != sorted(wanted):
        raise error.InvalidTask(
            f"Instruction {instruction_id!r} takes the arguments {wanted}, actual: {sorted(given)}"
        )
    for name, value in given.items():
        if name in _INT_ARGS and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise error.InvalidTask(
                f"{instruction_id}: {name} must be an int >= 0, actual: {value!r}"
            )
        elif name in _RELATION_ARGS and value not in RELATIONS:
            raise error.InvalidTask(
                f"{instruction_id}: {name} must be one of {RELATIONS}, actual: {value!r}"
            )
        elif name in _LIST_ARGS and not (
            isinstance(value, list)
            and value
            and all(isinstance(v, str) and v.strip() for v in value)
        ):
            raise error.InvalidTask(f"{instruction_id}: {name} must be a non-empty list of words")
        elif name == "schema":
            _check_schema(instruction_id, value)
        elif name not in _INT_ARGS | _RELATION_ARGS | _LIST_ARGS and not (
            isinstance(value, str) and value.strip()
        ):
            raise error.InvalidTask(
                f"{instruction_id}: {name} must be a non-empty str, actual: {value!r}"
            )
    return given


def _check_schema(instruction_id: str, schema: Any) -> None:
    if not isinstance(schema, dict):
        raise error.InvalidTask(f"{instruction_id}: schema must be a JSON Schema object")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise error.InvalidTask(f"{instruction_id}: not a valid JSON Schema: {e.message}") from None


def check(instruction_id: str, kwargs: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` follows one (validated) instruction; an empty response follows none,
    as in IFEval.

    >>> check("punctuation:no_comma", {}, "No commas here.")
    True
    """
    if not text.strip():
        return False
    return bool(CHECKS[instruction_id](text, **kwargs))
