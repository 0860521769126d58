"""Multiple-choice answers: the letter A-J that an answer or a gold names (``(B)``, ``B.``,
``\\textbf{B}``), and the one letter a response chooses in prose. A second letter is no
choice (a shotgun). Comparing letters is the verifier's job."""

from __future__ import annotations

import re

_CHOICE_WRAPPER_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|mbox)\s*\{([^{}]*)\}")
_GOLD_CHOICE_RE = re.compile(r"\(?\s*([A-J])\s*\)?[.:]?")
_ANSWER_CHOICE_RE = re.compile(r"\(\s*([A-Ja-j])\s*\)|([A-J])(?=[.:)]|\s|$)")
_ANOTHER_CHOICE_RE = re.compile(
    r"\)?[.:]?\s*(?:(?:,|;|/|&|\band\b|\bor\b)\s*\(?[A-Ja-j]\)?(?![A-Za-z])"
    r"|\([A-Ja-j]\)|[A-J](?=[\s.,;:)]|$))"
)  # a second letter after the first: "(A), (C)", "(C) (D)", "C D" (a shotgun, no choice)
_CHOICE_PREFIX_RE = re.compile(r"^(?:option|choice|answer)\s*:?\s*", re.I)


def choice_letter(s: str, *, gold: bool) -> str | None:
    """The letter A-J that ``s`` (a normalised answer) names, or None. A gold is the letter
    alone (``(B)``, ``B.``); an answer may go on after it (``B. 42``) but names no second one.

    >>> choice_letter(r"\\textbf{(C)}", gold=False), choice_letter("(A), (C)", gold=False)
    ('C', None)
    >>> choice_letter("B. 42", gold=False), choice_letter("B. 42", gold=True)
    ('B', None)
    """
    t = _CHOICE_WRAPPER_RE.sub(r"\1", s).strip()
    t = _CHOICE_PREFIX_RE.sub("", t).strip()
    if gold:
        m = _GOLD_CHOICE_RE.fullmatch(t)
        return m.group(1) if m else None
    m = _ANSWER_CHOICE_RE.match(t)
    if not m or _ANOTHER_CHOICE_RE.match(t, m.end()):
        return None  # no letter, or several: "(A), (C)"
    return (m.group(1) or m.group(2)).upper()


_LEADING_CHOICE_RE = re.compile(r"\s*(?:\*\*|__)?\(?([A-J])\)?(?:[.:)]|\*\*|__)(?:\s|$)")
_LONE_LETTER_RE = re.compile(r"(?<![A-Za-z\\$_^{])\(?([A-J])\)?(?![A-Za-z0-9_^(])( [a-z]+)?")
_LETTER_VERBS = {" is", " was", " would", " should", " must", " seems", " appears", " looks",
                 " and", " or"}  # fmt: skip


def choice_in_text(text: str) -> str | None:
    """The choice a response makes in prose, for a letter gold: a letter opening it ("A.
    Because ..."), or the one letter A-J a short response names ("Because B is valid"); the
    pronoun I and the article A ("A car ...") are no choices, and two letters are none."""
    m = _LEADING_CHOICE_RE.match(text)
    if m:
        return None if _ANOTHER_CHOICE_RE.match(text, m.end() - 1) else m.group(1)
    if len(text) > 300:
        return None
    letters = set()
    for m in _LONE_LETTER_RE.finditer(text):
        letter, word = m.group(1), m.group(2)
        if letter == "I" and not m.group(0).startswith("("):
            continue
        if letter == "A" and word and word not in _LETTER_VERBS and not m.group(0).startswith("("):
            continue
        letters.add(letter)
    return letters.pop() if len(letters) == 1 else None
