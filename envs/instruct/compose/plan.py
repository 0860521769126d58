"""A task being composed: its request, the content a good response carries, and the chosen
instructions with their arguments. ``constraints.py`` fills the arguments, ``draft.py`` writes
the compliant response from the plan; this module only holds the state and the wording.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from llmgym.envs.instruct.compose.material import LANGUAGE_NAMES, Subject


@dataclass
class Plan:
    """Everything a family decided about one task."""

    rng: random.Random
    difficulty: float
    kind: str
    """``write``, ``answer`` (a yes/no question), ``summarize``, ``rewrite`` or ``format``."""
    subject: Subject
    request: str
    body: list[list[str]]
    """Paragraphs of sentences: what the compliant response says."""
    passage: str = ""
    """Text the prompt gives to work on (summarize, rewrite, format)."""
    terms: list[str] = field(default_factory=list)
    min_terms: int = 0
    bullets: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None
    """The JSON object of a schema task."""
    kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Instruction id -> arguments, in the order they are stated."""

    def has(self, instruction_id: str) -> bool:
        return instruction_id in self.kwargs


def describe(instruction_id: str, kwargs: dict[str, Any]) -> str:
    """The instruction as the prompt states it."""
    k = kwargs
    texts = {
        "keywords:existence": lambda: (
            f"Include the keywords {', '.join(k.get('keywords', []))} in the response."
        ),
        "keywords:frequency": lambda: (
            f"In your response the word {k.get('keyword')} should appear {k.get('relation')} {k.get('frequency')} times."
        ),
        "keywords:forbidden_words": lambda: (
            f"Do not include the keywords {', '.join(k.get('forbidden_words', []))} in the response."
        ),
        "keywords:letter_frequency": lambda: (
            f"In your response the letter {k.get('letter')} should appear {k.get('let_relation')} {k.get('let_frequency')} times."
        ),
        "language:response_language": lambda: (
            f"Your ENTIRE response should be in {LANGUAGE_NAMES.get(str(k.get('language')), k.get('language'))} language and no other language is allowed."
        ),
        "length_constraints:number_sentences": lambda: (
            f"Your response should contain {k.get('relation')} {k.get('num_sentences')} sentences."
        ),
        "length_constraints:number_paragraphs": lambda: (
            f"There should be {k.get('num_paragraphs')} paragraphs. Paragraphs are separated with the markdown divider: ***"
        ),
        "length_constraints:number_words": lambda: (
            f"Answer with {k.get('relation')} {k.get('num_words')} words."
        ),
        "length_constraints:nth_paragraph_first_word": lambda: (
            f"There should be {k.get('num_paragraphs')} paragraphs. Paragraphs and only paragraphs are separated from each other by two new lines. Paragraph {k.get('nth_paragraph')} must start with the word {k.get('first_word')}."
        ),
        "detectable_content:number_placeholders": lambda: (
            f"The response must contain at least {k.get('num_placeholders')} placeholders represented by square brackets such as [address]."
        ),
        "detectable_content:postscript": lambda: (
            f"At the end of your response please explicitly add a postscript starting with {k.get('postscript_marker')}"
        ),
        "detectable_format:number_bullet_lists": lambda: (
            f"Your answer must contain exactly {k.get('num_bullets')} bullet points. Use markdown bullet points such as:\n* This is point 1."
        ),
        "detectable_format:constrained_response": lambda: (
            "Answer with one of the following options: My answer is yes. / My answer is no. / My answer is maybe. Then explain why."
        ),
        "detectable_format:number_highlighted_sections": lambda: (
            f"Highlight at least {k.get('num_highlights')} sections in your answer with markdown such as *highlighted section*."
        ),
        "detectable_format:multiple_sections": lambda: (
            f"Your response must have {k.get('num_sections')} sections. Mark the beginning of each section with {k.get('section_spliter')} X such as: {k.get('section_spliter')} 1"
        ),
        "detectable_format:json_format": lambda: (
            "Your entire output should be wrapped in JSON format. You can use markdown ticks such as ```."
        ),
        "detectable_format:json_schema": lambda: (
            "Your entire output must be one JSON object that is valid against this JSON Schema: "
            + json.dumps(k.get("schema"), sort_keys=True)
        ),
        "detectable_format:title": lambda: (
            "Your answer must contain a title wrapped in double angular brackets such as <<poem of joy>>."
        ),
        "combination:two_responses": lambda: (
            "Give two different responses. Responses and only responses should be separated by 6 asterisk symbols: ******."
        ),
        "combination:repeat_prompt": lambda: (
            "First repeat the first sentence of this prompt word for word without change and then give your answer (do not say anything before repeating it)."
        ),
        "startend:end_checker": lambda: (
            f"Finish your response with this exact phrase: {k.get('end_phrase')} No other words should follow this phrase."
        ),
        "startend:start_checker": lambda: (
            f"Begin your response with this exact phrase: {k.get('start_phrase')}"
        ),
        "change_case:capital_word_frequency": lambda: (
            f"In your response words with all capital letters should appear {k.get('capital_relation')} {k.get('capital_frequency')} times."
        ),
        "change_case:english_capital": lambda: (
            "Your entire response should be in English and in all capital letters."
        ),
        "change_case:english_lowercase": lambda: (
            "Your entire response should be in English and in all lowercase letters. No capital letters are allowed."
        ),
        "punctuation:no_comma": lambda: (
            "In your entire response refrain from the use of any commas."
        ),
        "startend:quotation": lambda: "Wrap your entire response with double quotation marks.",
    }
    return texts[instruction_id]()


REQUIRED_TEXT = ("keywords", "keyword", "end_phrase", "start_phrase", "prompt_to_repeat",
                 "postscript_marker", "section_spliter", "first_word", "forbidden_words")  # fmt: skip
"""Arguments whose text a response may (or must) contain: never counted as an echo."""


def literal_free(text: str, kwargs_list: list[dict[str, Any]]) -> list[str]:
    """The instructions' own words with the text they require (phrases, keywords) cut out: what
    a response must not echo (a required phrase is no echo)."""
    pieces = [text]
    for kwargs in kwargs_list:
        for key in REQUIRED_TEXT:
            value = kwargs.get(key)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item.strip():
                    pattern = re.compile(
                        r"(?<!\w)" + re.escape(item.strip()) + r"(?!\w)", re.IGNORECASE
                    )
                    pieces = [part for p in pieces for part in pattern.split(p)]
    return [p for p in pieces if p.strip()]
