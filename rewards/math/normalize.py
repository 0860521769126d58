"""Normalise a math answer string: Unicode mapped to LaTeX, doubled backslashes undone,
thousands separators, number words, mixed numbers, math delimiters and trailing punctuation.

String to string only: tokenizing and parsing are :mod:`~llmgym.rewards.math.tokens` and
:mod:`~llmgym.rewards.math.parser`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from llmgym.rewards.math.cache import short_input_cache
from llmgym.rewards.math.vocab import COMMANDS, FUNCTIONS, GREEK, IGNORED_COMMANDS, TEXT_COMMANDS

_UNICODE = {
    "\u2212": "-",  # minus sign
    "\u2013": "-",  # en dash
    "\u2012": "-",
    "\ufe63": "-",
    "\uff0d": "-",
    "\u00d7": r" \times ",
    "\u2715": r" \times ",
    "\u22c5": r" \cdot ",
    "\u00b7": r" \cdot ",
    "\u2219": r" \cdot ",
    "\u2217": "*",
    "\u00f7": " / ",
    "\u2215": "/",
    "\u2044": "/",
    "\u221a": r"\sqrt",
    "\u221b": r"\sqrt[3]",
    "\u221c": r"\sqrt[4]",
    "\u03c0": r"\pi ",
    "\u2264": r" \le ",
    "\u2a7d": r" \le ",
    "\u2265": r" \ge ",
    "\u2a7e": r" \ge ",
    "\u2260": r" \ne ",
    "\u2248": r" \approx ",
    "\u221e": r"\infty ",
    "\u00b1": r" \pm ",
    "\u2213": r" \mp ",
    "\u222a": r" \cup ",
    "\u2229": r" \cap ",
    "\u2205": r" \emptyset ",
    "\u2208": r" \in ",
    "\u211d": r" \mathbb{R} ",
    "\u00b0": r"^\circ ",
    "\u2032": "'",
    "\u27e8": r"\langle ",
    "\u27e9": r"\rangle ",
    "\u2228": r" \lor ",
    "\u2227": r" \land ",
    "\u2016": "|",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u2002": " ",
    "\u2003": " ",
    "\u200b": "",
    "\u2061": "",
}
for _i, _g in enumerate("αβγδεζηθικλμνξοπρστυφχψω"):
    _UNICODE.setdefault(
        _g,
        "\\"
        + [
            "alpha",
            "beta",
            "gamma",
            "delta",
            "epsilon",
            "zeta",
            "eta",
            "theta",
            "iota",
            "kappa",
            "lambda",
            "mu",
            "nu",
            "xi",
            "omicron",
            "pi",
            "rho",
            "sigma",
            "tau",
            "upsilon",
            "phi",
            "chi",
            "psi",
            "omega",
        ][_i]
        + " ",
    )
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+", strict=False))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉", "0123456789", strict=False))
_VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅕": "1/5", "⅛": "1/8"}
_UNI_RE = re.compile(
    "[" + re.escape("".join(_UNICODE)) + "]|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+|[₀₁₂₃₄₅₆₇₈₉]+|(\\d?)([½⅓⅔¼¾⅕⅛])"
)


def _uni_sub(m: re.Match[str]) -> str:
    s = m.group(0)
    if m.group(2):
        frac = _VULGAR[m.group(2)]
        return f"({m.group(1)}+{frac})" if m.group(1) else f"({frac})"
    if s[0] in _SUPERSCRIPTS:
        return "^{" + "".join(_SUPERSCRIPTS[c] for c in s) + "}"
    if s[0] in _SUBSCRIPTS:
        return "_{" + "".join(_SUBSCRIPTS[c] for c in s) + "}"
    return _UNICODE[s]


# (pattern, replacement, needles): a pattern runs only when one of its needles (literal text
# every match contains; lowercase for the case-insensitive ones) is in the string. Each scan is
# linear, but two dozen of them over a long answer add up: most never apply.
_SUBS: list[tuple[re.Pattern[str], Any, tuple[str, ...]]] = [
    (re.compile(p), r, needles)
    for p, r, needles in [
        # thousands separators written with LaTeX spacing or {,}: 1\,000 / 1{,}000 / 1\!000
        (
            r"(\d)(?:\{,\}|\\[,;:! ]|~)(?=\d{3}(?!\d))",
            r"\1",
            ("{,}", "\\,", "\\;", "\\:", "\\!", "\\ ", "~"),
        ),
        # ... with a space as well: 11,\! 111 / 14 {, }916 (a comma kept tight, then spaced)
        (r"(\d)\s*(?:,\s*\\!\s*|\{\s*,\s*\}\s*)(?=\d{3}(?!\d))", r"\1", (",",)),
        # ... or with plain spaces: 1 000 000 (groups of exactly three digits)
        (
            r"(?<![\d.,])(\d{1,3})((?: \d{3})+)(?![\d.])",
            lambda m: m.group(1) + m.group(2).replace(" ", ""),
            (" ",),
        ),
        # sizing and style commands that carry no meaning
        (
            r"\\(?:left|right|[bB]igg?[lrm]?|middle)(?![a-zA-Z])\s*\.?",
            "",
            ("\\left", "\\right", "\\big", "\\Big", "\\middle"),
        ),
        (
            r"(?<!\\)\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits|!|/)",
            "",
            ("style", "limits", "\\!", "\\/"),
        ),
        (r"\\(?:[dtc]frac)(?![a-zA-Z])", r"\\frac", ("frac",)),
        (r"\\(?:[dt]binom)(?![a-zA-Z])", r"\\binom", ("binom",)),
        (r"(?<!\\)\\[,;: >]", " ", ("\\,", "\\;", "\\:", "\\ ", "\\>")),
        (
            r"(?<!\\)\\(?:quad|qquad|enspace|thinspace|medspace|thickspace)(?![a-zA-Z])",
            " ",
            ("quad", "space"),
        ),
        (r"(?<!\\)\\q?quad(?=[a-zA-Z])", " ", ("quad",)),  # \quadx_2: the space after \quad lost
        (r"\\(?:hspace|vspace)\*?\{[^{}]*\}", " ", ("space",)),
        # degrees, percent and currency are units (see llmgym.rewards.math)
        (
            r"\^\s*\{?\s*\\circ\s*\}?|\^\s*\{\s*\\text\{\s*o\s*\}\s*\}|\\(?:degree|textdegree)(?![a-zA-Z])",
            r" \\degreeunit ",
            ("\\circ", "\\text", "degree"),
        ),
        (r"(?<!\\)\\%|%", " \\\\percentunit ", ("%",)),
        (r"(?<!\\)\\\$|\$", " ", ("$",)),
        (
            r"\\(?:euro|pounds|yen)(?![a-zA-Z])|[€£¥]",
            " ",
            ("\\euro", "\\pounds", "\\yen", "€", "£", "¥"),
        ),
        # phrases that name special answers
        (
            r"(?i)\b(?:there\s+(?:is|are)\s+)?no\s+(?:real\s+|possible\s+|such\s+)?(?:solutions?|roots?|values?|answers?)\b",
            r" \\emptyset ",
            ("no",),
        ),
        (r"(?i)\b(?:the\s+)?empty\s+set\b", r" \\emptyset ", ("empty",)),
        (
            r"(?i)\bdoes\s+not\s+exist\b|\bdoesn't\s+exist\b|\bd\.n\.e\.?|\bDNE\b",
            r" \\undefinedvalue ",
            ("exist", "d.n.e", "dne"),
        ),
        (
            r"(?i)\ball\s+real\s+(?:numbers|values)(?:\s+of\s+[a-z])?\b",
            r" \\mathbb{R} ",
            ("real",),
        ),
        (r"(?i)\binfinitely\s+many(?:\s+solutions)?\b", " infinitelymany ", ("infinitely",)),
        # "=1orW(x)=-1": the spaces around a connective lost between a value and a name
        (r"(?<=[\d)}])(or|and)(?=[A-Z][(_]?)", r" \1 ", ("or", "and")),
        (r"\*\*", "^", ("**",)),
    ]
]
_PLAIN_MIXED_RE = re.compile(r"(-?)(\d+) (\d+)/(\d+)")
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS |= {"hundred": 100, "a hundred": 100, "one hundred": 100, "a thousand": 1000}
_TRAILING = re.compile(r"(?:[\s.;:]|\\\\|\\(?:quad|qquad)\b)+$")
_DELIMS = [("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")]


def _strip_trailing(s: str) -> str:
    """``_TRAILING.sub("", s)``, looking at the end of ``s`` only (a scan of the whole string
    is linear, but slow on a long answer)."""
    start = max(0, len(s) - 256)
    m = _TRAILING.search(s, start)
    if m is None:
        return s
    if start == 0 or m.start() >= start + 8:
        return s[: m.start()]
    return _TRAILING.sub("", s)  # the trailing run reaches back before the window


# Doubled backslashes: text that went through one escaping too many (a JSON or Python string
# written out raw) reads ``\\frac{1}{2}``, ``\\left(``, ``-2 \\le x``. A LaTeX line break
# followed by the letters of a command name is never what anyone means, so exactly two
# backslashes before a known command name are one; in text where every command is doubled,
# the doubled escapes of symbols (``\\{``, ``\\%``, ``\\,``) and row breaks (four) are too.
_DOUBLED_CMD_RE = re.compile(r"(?<!\\)\\\\([A-Za-z]+)")
_SINGLE_CMD_RE = re.compile(r"(?<!\\)\\([A-Za-z]+)")
_DOUBLED_SYMBOL_RE = re.compile(r"(?<!\\)\\\\([{}%$,;:!() \[\]]|\\\\)")
_EXTRA_COMMANDS = {
    "left", "right", "boxed", "fbox", "dfrac", "tfrac", "cfrac", "dbinom", "tbinom", "quad",
    "qquad", "cdots", "ldots", "dots", "degree", "hspace", "bigl", "bigr", "Bigl", "Bigr",
    "sum", "prod", "not", "mathbb",
}  # fmt: skip
_known_commands: set[str] = set()


def _is_known_command(name: str) -> bool:
    if not _known_commands:
        _known_commands.update(COMMANDS, FUNCTIONS, TEXT_COMMANDS, GREEK, _EXTRA_COMMANDS)
        _known_commands.update(IGNORED_COMMANDS)
    return name in _known_commands or name.startswith(("quad", "qquad"))


def undouble_backslashes(text: str) -> str:
    """``\\\\frac{1}{2}`` (doubled escapes) read as ``\\frac{1}{2}``; other text unchanged.

    >>> undouble_backslashes(r"-2 \\\\le x \\\\le 7"), undouble_backslashes(r"1 \\\\ x")
    ('-2 \\\\le x \\\\le 7', '1 \\\\\\\\ x')
    """
    if "\\\\" not in text:
        return text
    doubled = False

    def one(m: re.Match[str]) -> str:
        nonlocal doubled
        if _is_known_command(m.group(1)):
            doubled = True
            return "\\" + m.group(1)
        return m.group(0)

    out = _DOUBLED_CMD_RE.sub(one, text)
    if doubled and not any(_is_known_command(c) for c in _SINGLE_CMD_RE.findall(text)):
        out = _DOUBLED_SYMBOL_RE.sub(lambda m: "\\" + m.group(1)[-1], out)
    return out


@short_input_cache()
def normalize(answer: str) -> str:
    """Canonical surface form of an answer string: Unicode mapped to LaTeX, spacing, sizing and
    style commands removed, degrees/percent/currency turned into unit markers, math delimiters
    and trailing punctuation stripped, whitespace collapsed.

    >>> normalize(r"$\\left( \\dfrac{1}{2}, 3 \\right)$.")
    '( \\\\frac{1}{2}, 3 )'
    >>> normalize("−2 × 10³")
    '-2 \\\\times 10^{3}'
    """
    s = undouble_backslashes(answer)
    if not s.isascii():
        s = _UNI_RE.sub(_uni_sub, s)
        s = unicodedata.normalize("NFKC", s)
    for pattern, repl, needles in _SUBS:
        text = s.lower() if pattern.flags & re.IGNORECASE else s
        if any(n in text for n in needles):
            s = pattern.sub(repl, s)
    s = s.strip()
    mixed = _PLAIN_MIXED_RE.fullmatch(s)
    if mixed:  # 2 1/3 is two and a third
        sign, whole, num, den = mixed.groups()
        s = f"{sign}({whole}+{num}/{den})"
    if s.lower() in _NUMBER_WORDS or s.lower().removeprefix("\\text{").rstrip("}") in _NUMBER_WORDS:
        s = str(_NUMBER_WORDS[s.lower().removeprefix("\\text{").rstrip("}").strip()])
    if s.endswith("..."):  # 0.333... repeats; it is not the end of a sentence
        s = s[:-3] + r"\ldots"
    for _ in range(3):
        changed = False
        for left, right in _DELIMS:
            if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
                s = s[len(left) : len(s) - len(right)].strip()
                changed = True
        s = _strip_trailing(s)
        if not changed:
            break
    return " ".join(s.split())
