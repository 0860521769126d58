"""Whole-response forms: JSON, two responses, the request repeated first, another language,
and a fixed yes/no/maybe answer; each allows only the few instructions that fit it."""

from __future__ import annotations

from llmgym.envs.instruct.compose.task import InstructFamily

_TEXTUAL = ("keywords:existence", "keywords:forbidden_words", "keywords:letter_frequency")

FAMILIES = [
    InstructFamily("form.json", "write", ("detectable_format:json_format",), "the whole response as JSON", extras=_TEXTUAL),
    InstructFamily("form.two_responses", "write", ("combination:two_responses",), "two different responses divided by ******",
                   extras=(*_TEXTUAL, "punctuation:no_comma", "change_case:english_lowercase")),
    InstructFamily("form.repeat_request", "write", ("combination:repeat_prompt",), "repeat the request word for word, then answer",
                   extras=("keywords:existence", "keywords:forbidden_words", "punctuation:no_comma")),
    InstructFamily("form.language", "write", ("language:response_language",), "answer in German, French, Spanish, Italian or Portuguese",
                   extras=("punctuation:no_comma", "length_constraints:number_words", "keywords:letter_frequency")),
    InstructFamily("form.yes_no_maybe", "answer", ("detectable_format:constrained_response",), "answer a question with a fixed option, then explain",
                   extras=("keywords:forbidden_words", "length_constraints:number_sentences", "punctuation:no_comma")),
]  # fmt: skip
