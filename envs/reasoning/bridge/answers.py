"""Reading the final answer out of a response: the last ``<answer>...</answer>``, bounded.

The protocol reasoning-gym's prompts and scorers assume (its ``extract_answer``), read here in
linear time (``rfind``, not a lazy regex that goes quadratic on a response of many opening tags)
and refused past a length where no answer of the item's size could be (so a ten-megabyte
response never reaches a scorer). Scoring is not here.
"""

from __future__ import annotations

OPEN, CLOSE = "<answer>", "</answer>"
ANSWER_INSTRUCTION = "Give only your final answer inside <answer></answer> tags, in the format the question asks for."


def extract_answer(text: str) -> str | None:
    """The stripped text of the last complete ``<answer>`` element, or None.

    >>> extract_answer("I think <answer>3</answer>, no: <answer> 4 </answer>")
    '4'
    >>> extract_answer("<answer>unclosed") is None
    True
    """
    end = text.rfind(CLOSE)
    if end < 0:
        return None
    start = text.rfind(OPEN, 0, end)
    if start < 0:
        return None
    return text[start + len(OPEN) : end].strip()


def answer_limit(gold: str | None) -> int:
    """The longest answer read for an item whose gold has this length: room for spacing and
    another valid form (reasoning-gym accepts some answers as a Python list), not for a dump."""
    return 1024 + 3 * len(gold or "")
