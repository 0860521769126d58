"""Answer extraction: the part of a response a verifier grades, named by a short string.

Declarative envs and subtasks say how their answer is marked (``"answer_tag"``, ``"boxed"``,
``"regex:<pattern>"``...); :func:`extract` finds it and :func:`wrap_for` writes an oracle's
answer that way. Scoring what was found is the verifiers' job (``llmgym.rewards``).
"""

from __future__ import annotations

import re
from typing import Any

from llmgym.registry import import_callable

MAX_REGEX_INPUT = 100_000
"""Regexes see at most this many characters of a response: a trusted pattern can still
backtrack on huge input."""

_BOXED = "llmgym.rewards.math:extract_answer"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
"""An ``<answer>...</answer>`` tag; group 1 is its text."""
ANSWER_LINE = re.compile(r"(?im)^\W*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$")
"""An "Answer: ..." (or "Final answer: ...") line; group 1 is the answer."""


def extract(response: str, how: str | None) -> str | None:
    """The part of a response a verifier grades.

    ``how``: None (the whole response), ``"answer_tag"`` (last ``<answer>...</answer>``),
    ``"answer_line"`` (last "Answer: ..." line), ``"last_line"``, ``"boxed"`` (last
    ``\\boxed{}``), or ``"regex:<pattern>"`` (group 1 of the last match, else the match).
    None when nothing is found.

    >>> extract("thinking... <answer> 42 </answer>", "answer_tag")
    '42'
    >>> extract("so\\nFinal answer: Paris", "answer_line")
    'Paris'
    """
    if how is None:
        return response
    if how == "answer_tag":
        found = ANSWER_TAG.findall(response)
        return found[-1].strip() if found else None
    if how == "answer_line":
        lines = ANSWER_LINE.findall(response)
        return lines[-1].strip() if lines else None
    if how == "last_line":
        lines = [ln for ln in response.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else None
    if how == "boxed":
        # The math verifier's reader of \\boxed{} (nested braces, \\fbox, several boxes),
        # reached by name as verifiers are: the core names it without importing it.
        return _text_or_none(import_callable(_BOXED)(response))
    if how.startswith("regex:"):
        matches = list(re.finditer(how[len("regex:") :], response[:MAX_REGEX_INPUT]))
        if not matches:
            return None
        last = matches[-1]
        return (last.group(1) if last.groups() else last.group()).strip()
    raise ValueError(
        f"Unknown extraction {how!r}; expected None, 'answer_tag', 'answer_line', 'last_line', "
        "'boxed' or 'regex:<pattern>'"
    )


def wrap_for(how: str | None, answer: str) -> str:
    """A response that ``extract(response, how)`` turns back into ``answer`` (for oracles)."""
    if how == "answer_tag":
        return f"<answer>{answer}</answer>"
    if how == "answer_line":
        return f"Answer: {answer}"
    if how == "boxed":
        return f"\\boxed{{{answer}}}"
    return answer
