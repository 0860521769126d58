"""What a long-document response gives: its answer (or answers) and its citations.

The answer is the last ``<answer>`` tag, else the last "Answer:" line, else the response without
its ``<cite>`` tags; citations are the section ids and quoted spans inside ``<cite>`` tags. Reading
only: how right the answer is and how well it is cited is :mod:`llmgym.rewards.longdoc.grade`'s job.
"""

from __future__ import annotations

import re

from llmgym.answers import ANSWER_LINE, ANSWER_TAG
from llmgym.rewards.longdoc.matching import normalize_answer

_CITE_TAG = re.compile(r"<cite>(.*?)</cite>", re.DOTALL | re.IGNORECASE)
_SECTION_ID = re.compile(r"\b[Ss](\d{1,6})\b")
_QUOTE = re.compile(r"\"([^\"]{4,})\"|\u201c([^\u201d]{4,})\u201d")


def given_answers(response: str) -> list[str]:
    """The distinct answers a response gives (normalised): its ``<answer>`` tags, else its
    "Answer:" lines. More than one is a hedge.

    >>> given_answers("<answer>Oslo</answer> ... <answer> oslo </answer>")
    ['oslo']
    >>> given_answers("Answer: Oslo\\nFinal answer: Lyon")
    ['oslo', 'lyon']
    """
    found = ANSWER_TAG.findall(response) or ANSWER_LINE.findall(response)
    return list(dict.fromkeys(normalize_answer(_CITE_TAG.sub("", str(a))) for a in found))


def extract_answer(response: str) -> str:
    """The last ``<answer>`` tag's text, else the last "Answer:" line, else the response
    without its ``<cite>`` tags.

    >>> extract_answer("thinking <answer> 42 </answer> <cite>S3</cite>")
    '42'
    >>> extract_answer("Answer: Oslo")
    'Oslo'
    """
    tags = ANSWER_TAG.findall(response)
    if tags:
        return str(tags[-1]).strip()
    lines = ANSWER_LINE.findall(response)
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
