"""Normalise a math answer string and parse it into a small tuple AST (LaTeX, plain text, Unicode).

The parser is a hand-written recursive descent over a regex tokenizer: it never ``eval``s, has a
hard depth limit (deeply nested input is a parse error, not a ``RecursionError``) and refuses
answers longer than :data:`MAX_ANSWER_CHARS`. A parse error means "not math we understand";
callers then fall back to comparing normalised text.

AST nodes are plain, hashable tuples (so parses can be cached and sent to a worker process):

===================================  ===========================================================
``("num", Fraction, digits)``        a literal (``digits`` = significant digits written)
``("based", digits, base)``          ``1010_2``
``("sym", name)``                    a variable: ``x``, ``a_1``, ``alpha``
``("const", name)``                  ``pi``, ``e``, ``i``
``("inf", sign)``                    ``+oo`` (1) or ``-oo`` (-1)
``("add", (terms))``                 ``("mul", (factors))``, ``("div", a, b)``, ``("neg", a)``
``("pow", base, exp)``               ``("pm", a, b, sign)``: ``a +- b`` (sign ``+`` or ``-``)
``("fn", name, (args))``             sqrt, root (n, x), sin ..., ln, log, logb (base, x), exp, abs,
                                     floor, ceil, fact, binom, gcd, lcm, max, min
``("tuple", open, close, (items))``  ``(1, 2)``, ``[1, 3)``
``("set", (items))``                 ``\\{1, 2\\}``
``("matrix", (rows))``               ``\\begin{pmatrix} ... \\end{pmatrix}``
``("rel", (exprs), (ops))``          ``x = 3``, ``1 < x <= 2``, ``x \\in [0, 1]``
``("list", (items))``                a bare comma list: ``1, 2``
``("or", (items))``                  ``x = 1 or x = 2``
``("setop", op, a, b)``              ``\\cup``, ``\\cap``, ``\\setminus``
``("deg", node)``                     an angle in degrees: ``60^\\circ``
``("special", name)``                ``empty``, ``undefined``, ``reals``
``("text", words)``                  an answer in words: ``\\text{Monday}``
===================================  ===========================================================
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

Node = tuple[Any, ...]

MAX_ANSWER_CHARS = 200_000
"""Longer answers are not parsed (they can only match by normalised text). Tokenizing and
parsing are linear in the length, so an answer this long (a degree-1000 polynomial written
out) costs tens of milliseconds; comparing it is bounded by the caller's ``timeout_s``."""
MAX_DEPTH = 100
"""Nesting deeper than this is a parse error."""
MAX_LITERAL_DIGITS = 4000
"""Number literals with more digits are a parse error (and Python refuses them anyway)."""


class ParseError(ValueError):
    """The answer is not math this parser understands."""


_F = TypeVar("_F", bound=Callable[..., Any])
_CACHES: list[Any] = []


def short_input_cache(maxsize: int = 4096, max_len: int = 1000) -> Callable[[_F], _F]:
    """``functools.lru_cache`` for strings of at most ``max_len`` characters (the answers a
    training run sees again and again); longer inputs are computed each time, so the cache
    holds at most ``maxsize * max_len`` characters."""

    def wrap(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        last: list[Any] = [None]  # the last long input and its result: one call reads it twice

        def clear() -> None:
            cached.cache_clear()
            last[0] = None

        _CACHES.append(clear)

        @functools.wraps(fn)
        def call(s: str, *args: Any) -> Any:
            if len(s) <= max_len:
                return cached(s, *args)
            hit = last[0]
            if hit is not None and hit[1] == args and hit[0] == s:
                return hit[2]
            result = fn(s, *args)
            last[0] = (s, args, result)
            return result

        call.cache_clear = clear  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def clear_caches() -> None:
    """Empty every parse cache (benchmarks time cold parses with it)."""
    for clear in _CACHES:
        clear()


# ---------------------------------------------------------------------------------------------
# String normalisation
# ---------------------------------------------------------------------------------------------

_GREEK = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "rho",
    "varrho",
    "sigma",
    "varsigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Pi",
    "Sigma",
    "Upsilon",
    "Phi",
    "Psi",
    "Omega",
]

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
        # degrees, percent and currency are units (see math.py)
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
        _known_commands.update(_COMMANDS, FUNCTIONS, _TEXT_COMMANDS, _GREEK, _EXTRA_COMMANDS)
        _known_commands.update(_IGNORED_COMMANDS)
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


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------

FUNCTIONS = {
    "sin",
    "cos",
    "tan",
    "sec",
    "csc",
    "cot",
    "arcsin",
    "arccos",
    "arctan",
    "arcsec",
    "arccsc",
    "arccot",
    "sinh",
    "cosh",
    "tanh",
    "ln",
    "log",
    "exp",
    "sqrt",
    "abs",
    "gcd",
    "lcm",
    "max",
    "min",
    "floor",
    "ceil",
}
_FN_ALIASES = {"cosec": "csc", "asin": "arcsin", "acos": "arccos", "atan": "arctan", "tg": "tan"}
_PLAIN_ONLY_FUNCTIONS = {"sqrt", "abs", "floor", "ceil"}  # \sqrt is a command, not a function

UNITS = {
    # length, area, volume
    *[
        "mm",
        "cm",
        "km",
        "dm",
        "meter",
        "meters",
        "metre",
        "metres",
        "kilometer",
        "kilometers",
        "centimeter",
        "centimeters",
    ],
    *[
        "millimeter",
        "millimeters",
        "inch",
        "inches",
        "ft",
        "feet",
        "foot",
        "yd",
        "yard",
        "yards",
        "mile",
        "miles",
    ],
    *[
        "sq",
        "square",
        "squared",
        "cubic",
        "cu",
        "units",
        "unit",
        "ml",
        "mL",
        "liter",
        "liters",
        "litre",
        "litres",
        "gallon",
        "gallons",
    ],
    *["cup", "cups", "quart", "quarts", "pint", "pints"],
    # mass, time, speed
    *[
        "kg",
        "mg",
        "gram",
        "grams",
        "kilogram",
        "kilograms",
        "lb",
        "lbs",
        "pound",
        "pounds",
        "oz",
        "ounce",
        "ounces",
        "ton",
        "tons",
    ],
    *[
        "sec",
        "secs",
        "second",
        "seconds",
        "minute",
        "minutes",
        "mins",
        "hour",
        "hours",
        "hr",
        "hrs",
        "day",
        "days",
        "week",
        "weeks",
    ],
    *["month", "months", "year", "years", "yr", "yrs", "mph", "kph", "kmh"],
    # money, angles, counts
    *[
        "dollar",
        "dollars",
        "cent",
        "cents",
        "euro",
        "euros",
        "usd",
        "USD",
        "degree",
        "degrees",
        "deg",
        "rad",
        "radian",
        "radians",
    ],
    *[
        "percent",
        "percentage",
        "pct",
        "points",
        "point",
        "ways",
        "times",
        "people",
        "persons",
        "students",
        "items",
    ],
}
KNOWN_WORDS = (
    {w.lower() for w in UNITS}
    | FUNCTIONS
    | set(_FN_ALIASES)
    | {
        "thousand",
        "million",
        "billion",
        "trillion",
        "infinity",
        "infty",
        "undefined",
        "none",
        "emptyset",
        "varnothing",
        "nothing",
        "either",
        "infinitelymany",
    }
)
_UNIT_PHRASES = re.compile(
    r"(?:km/h|m/s\^?\{?2?\}?|ft/s|km/hr|mi/h|m\^\{?[23]\}?|cm\^\{?[23]\}?|ft\^\{?[23]\}?)$"
)
_SPECIAL_WORDS = {
    "infinity": ("special", "inf"),
    "infty": ("special", "inf"),
    "inf": ("special", "inf"),
    "oo": ("special", "inf"),
    "undefined": ("special", "undefined"),
    "none": ("special", "empty"),
    "emptyset": ("special", "empty"),
    "varnothing": ("special", "empty"),
    "nothing": ("special", "empty"),
    "pi": ("const", "pi"),
    "or": ("or", "or"),
    "and": ("and", "and"),
    "either": ("either", "either"),
    "per": ("per", "per"),
    "thousand": ("scale", 10**3),
    "million": ("scale", 10**6),
    "billion": ("scale", 10**9),
    "trillion": ("scale", 10**12),
}

_COMMANDS: dict[str, tuple[str, str]] = {
    "cdot": ("op", "*"),
    "times": ("op", "*"),
    "ast": ("op", "*"),
    "div": ("op", "/"),
    "over": ("op", "/"),
    "pm": ("pm", "+"),
    "mp": ("pm", "-"),
    "le": ("rel", "<="),
    "leq": ("rel", "<="),
    "leqslant": ("rel", "<="),
    "ge": ("rel", ">="),
    "geq": ("rel", ">="),
    "geqslant": ("rel", ">="),
    "lt": ("rel", "<"),
    "gt": ("rel", ">"),
    "ne": ("rel", "!="),
    "neq": ("rel", "!="),
    "approx": ("rel", "~"),
    "sim": ("rel", "~"),
    "equiv": ("rel", "="),
    "doteq": ("rel", "="),
    "in": ("rel", "in"),
    "cup": ("setop", "cup"),
    "cap": ("setop", "cap"),
    "setminus": ("setop", "minus"),
    "backslash": ("setop", "minus"),
    "lor": ("or", "or"),
    "vee": ("or", "or"),
    "land": ("and", "and"),
    "wedge": ("and", "and"),
    "infty": ("special", "inf"),
    "infinity": ("special", "inf"),
    "emptyset": ("special", "empty"),
    "varnothing": ("special", "empty"),
    "undefinedvalue": ("special", "undefined"),
    "pi": ("const", "pi"),
    "lfloor": ("open", "floor"),
    "rfloor": ("close", "floor"),
    "lceil": ("open", "ceil"),
    "rceil": ("close", "ceil"),
    "langle": ("open", "("),
    "rangle": ("close", ")"),
    "lvert": ("op", "|"),
    "rvert": ("op", "|"),
    "vert": ("op", "|"),
    "mid": ("op", "|"),
    "lbrace": ("open", "{s"),
    "rbrace": ("close", "{s"),
    "lbrack": ("open", "["),
    "rbrack": ("close", "]"),
    "degreeunit": ("deg", "deg"),
    "percentunit": ("unit", "%"),
    "circ": ("deg", "deg"),
    "frac": ("cmd", "frac"),
    "sqrt": ("cmd", "sqrt"),
    "binom": ("cmd", "binom"),
    "choose": ("op", "choose"),
    "overline": ("cmd", "overline"),
    "sum": ("cmd", "sum"),
    "prod": ("cmd", "prod"),
    "begin": ("cmd", "begin"),
    "end": ("cmd", "end"),
    "operatorname": ("cmd", "operatorname"),
    "mathbb": ("cmd", "mathbb"),
    "exp": ("fn", "exp"),
}
_TEXT_COMMANDS = {
    "text",
    "textbf",
    "textit",
    "textrm",
    "textsf",
    "texttt",
    "textup",
    "textnormal",
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "mathtt",
    "mathcal",
    "mathscr",
    "mathfrak",
    "mbox",
    "hbox",
    "boldsymbol",
    "bm",
    "emph",
    "underline",
    "mathnormal",
}
_STRUCTURAL_COMMANDS = {
    # commands with a meaning the parser does not model: never read as a variable's name
    "to", "rightarrow", "Rightarrow", "leftarrow", "Leftarrow", "implies", "iff", "mapsto",
    "forall", "exists", "therefore", "because", "int", "iint", "iiint", "oint", "lim", "limsup",
    "liminf", "sup", "inf", "pmod", "bmod", "mod", "partial", "nabla", "prime", "dots", "ldots",
    "cdots", "vdots", "ddots", "hline", "newline", "label", "tag", "item", "par", "not", "neg",
    "angle", "triangle", "perp", "parallel", "cong", "subset", "subseteq", "supset", "supseteq",
    "notin", "ni", "colon", "det", "dim", "ker", "deg", "arg", "Re", "Im", "atop", "hat", "bar",
    "vec", "tilde", "dot", "ddot", "widehat", "widetilde", "overrightarrow", "overleftarrow",
    "mathring", "check", "breve", "acute", "grave", "boxed", "fbox", "framebox", "end", "begin",
    "circ", "bullet", "star", "dagger", "ell", "hbar", "aleph", "emptyset", "varnothing",
    "infty", "approx", "propto", "equiv", "nmid", "divides", "gcd", "lcm", "max", "min",
    "left", "right", "middle", "big", "Big", "bigg", "Bigg", "quad", "qquad", "text", "ne",
}  # fmt: skip
_IGNORED_COMMANDS = {"displaystyle", "limits", "phantom", "noindent", "hfill", "cr", "nonumber"}

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+(?![.\d]))?)
  | (?P<cmd>\\(?:[A-Za-z]+|[{}|\\]))
  | (?P<word>[A-Za-z]+)
  | (?P<op><=|>=|!=|=<|=>|==|:=|[-+*/^_=<>!,;|()\[\]{}&:'])
    """,
    re.VERBOSE,
)
_THOUSANDS_RE = re.compile(r"(?:,\d{3})+(?![\d])")

Token = tuple[str, Any]


def _read_group(s: str, i: int) -> tuple[str, int]:
    """The raw text of a braced group starting at ``s[i] == '{'``; returns (content, end)."""
    depth = 0
    j = i
    n = len(s)
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ParseError("nesting too deep")
        elif c == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j], j + 1
        j += 1
    raise ParseError("unbalanced braces")


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _classify_word(w: str) -> list[Token]:
    """Tokens for a run of letters: a function, a special word, a unit, or single-letter
    variables multiplied together (``xy``)."""
    lw = w.lower()
    if lw in FUNCTIONS or lw in _FN_ALIASES:
        return [("fn", _FN_ALIASES.get(lw, lw))]
    if lw in _SPECIAL_WORDS:
        return [_SPECIAL_WORDS[lw]]
    if lw in ("degree", "degrees", "deg"):
        return [("deg", "deg")]
    if w in UNITS or lw in UNITS:
        return [("unit", lw)]
    if lw in ("dne",):
        return [("special", "undefined")]
    if lw == "infinitelymany":
        return [("special", "infinitely_many")]
    if len(w) <= 3:
        return [("id", c) for c in w]
    return [("word", w)]


def _classify_text(content: str, depth: int) -> list[Token]:
    """Tokens for the argument of ``\\text{...}`` and friends."""
    c = " ".join(content.split())
    if not c:
        return []
    lc = c.lower().strip(" .,:")
    if lc in ("or", "and", "either", "or possibly", "or maybe"):
        return [("or", "or")] if lc != "and" else [("and", "and")]
    if lc in ("undefined", "dne", "none", "infinity", "degree", "degrees", "deg"):
        return _classify_word(lc)
    unit = re.fullmatch(r"([A-Za-z]+)(?:\s*[/^]\s*[A-Za-z0-9]+)+", c)
    if unit and unit.group(1).lower() in UNITS:
        return [("unit", lc)]
    if re.fullmatch(r"[A-Za-z]+(?:[ -][A-Za-z]+)*", c):
        words = c.replace("-", " ").split()
        if all(w.lower() in UNITS for w in words):
            return [("unit", lc)]
        if len(words) == 1 and len(c) <= 1:
            return [("id", c)]
        if len(words) == 1 and (c.lower() in FUNCTIONS or c.lower() in _SPECIAL_WORDS):
            return _classify_word(c)
        return [("word", c)]
    return tokenize(c, depth + 1)


@short_input_cache()
def tokenize(s: str, depth: int = 0) -> list[Token]:
    """Split a normalised answer into tokens.

    >>> tokenize(r"2\\frac{x}{3}")
    [('num', '2'), ('cmd', 'frac'), ('open', '{'), ('id', 'x'), ('close', '}'), ('open', '{'), ('num', '3'), ('close', '}')]
    """
    if depth > 8:
        raise ParseError("nesting too deep")
    toks: list[Token] = []
    i = 0
    n = len(s)
    bracket_depth = 0
    while i < n:
        m = _TOKEN_RE.match(s, i)
        if m is None:
            raise ParseError(f"unexpected character {s[i]!r}")
        kind = m.lastgroup
        text = m.group(0)
        i = m.end()
        if kind == "ws":
            continue
        if kind == "num":
            if (
                bracket_depth == 0
                and text.isdigit()
                and len(text) <= 3
                and text[0] != "0"
                and i < n
                and s[i] == ","
            ):
                mt = _THOUSANDS_RE.match(s, i)
                if mt and not (mt.end() < n and s[mt.end()] == "."):
                    text = text + mt.group(0).replace(",", "")
                    i = mt.end()
                elif mt:
                    # 1,234.5 style: a thousands group followed by a decimal part
                    md = re.compile(r"(?:,\d{3})+\.\d+").match(s, i)
                    if md:
                        text = text + md.group(0).replace(",", "")
                        i = md.end()
            if len(text) > MAX_LITERAL_DIGITS:
                raise ParseError("number literal too long")
            toks.append(("num", text))
        elif kind == "word":
            toks.extend(_classify_word(text))
        elif kind == "op":
            if text in "([{":
                bracket_depth += 1
                toks.append(("open", text))
            elif text in ")]}":
                bracket_depth -= 1
                toks.append(("close", text))
            elif text in ("<", ">", "<=", ">=", "!=", "=<", "=>", "=", "==", ":="):
                norm = {"=<": "<=", "=>": ">=", "==": "=", ":=": "="}.get(text, text)
                toks.append(("rel", norm))
            elif text == ",":
                toks.append(("comma", ","))
            elif text == ";":
                toks.append(("comma", ";"))
            elif text == "&":
                toks.append(("amp", "&"))
            else:
                toks.append(("op", text))
        else:  # command
            name = text[1:]
            if name == "{":
                bracket_depth += 1
                toks.append(("open", "{s"))
            elif name == "}":
                bracket_depth -= 1
                toks.append(("close", "{s"))
            elif name == "|":
                toks.append(("op", "|"))
            elif name == "\\":
                toks.append(("rowsep", "\\\\"))
            elif name in _TEXT_COMMANDS:
                j = _skip_ws(s, i)
                if j < n and s[j] == "{":
                    content, i = _read_group(s, j)
                    toks.extend(_classify_text(content, depth))
                # a bare \mathrm x applies to the next token: nothing to do
            elif name in _IGNORED_COMMANDS:
                continue
            elif name in ("operatorname", "mathbb"):
                j = _skip_ws(s, i)
                if j >= n or s[j] != "{":
                    raise ParseError(f"\\{name} without argument")
                content, i = _read_group(s, j)
                c = content.strip().replace("*", "")
                if name == "mathbb":
                    toks.append(("special", "reals") if c == "R" else ("word", f"mathbb{c}"))
                elif c.lower() in FUNCTIONS or c.lower() in _FN_ALIASES:
                    toks.append(("fn", _FN_ALIASES.get(c.lower(), c.lower())))
                else:
                    toks.append(("word", c))
            elif name in ("begin", "end"):
                j = _skip_ws(s, i)
                if j >= n or s[j] != "{":
                    raise ParseError(f"\\{name} without environment")
                env, i = _read_group(s, j)
                toks.append((name, env.strip().rstrip("*")))
                if name == "begin" and env.strip() == "array":
                    j = _skip_ws(s, i)
                    if j < n and s[j] == "{":
                        _, i = _read_group(s, j)
            elif name in _COMMANDS:
                tok = _COMMANDS[name]
                if tok[0] == "open" and tok[1] in ("(", "["):
                    bracket_depth += 1
                elif tok[0] == "close" and tok[1] in (")", "]"):
                    bracket_depth -= 1
                toks.append(tok)
            elif name in FUNCTIONS or name in _FN_ALIASES:
                fname = _FN_ALIASES.get(name, name)
                if fname in _PLAIN_ONLY_FUNCTIONS:
                    raise ParseError(f"unknown command \\{name}")
                toks.append(("fn", fname))
            elif name in _GREEK:
                toks.append(("id", name))
            elif (
                name.isalpha()
                and name not in _STRUCTURAL_COMMANDS
                and s[_skip_ws(s, i) : _skip_ws(s, i) + 1] not in ("{", "[", "_", "^")
            ):
                # a macro this parser does not know, standing alone: a name (\zzz = x = 0)
                toks.append(("id", "\\" + name))
            else:
                raise ParseError(f"unknown command \\{name}")
    return toks


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------


def _num(value: Fraction | int, digits: int = 0) -> Node:
    return ("num", Fraction(value), digits)


ONE = _num(1)
ZERO = _num(0)
_PI = ("const", "pi")


def _literal(text: str) -> Node:
    """A number literal, exactly: ``0.1`` is 1/10, ``1.5e3`` is 1500."""
    if text.isascii() and text.isdigit():  # the common case, without Fraction's string parsing
        return ("num", Fraction(int(text)), len(text.lstrip("0")) or 1)
    digits = len(text.split("e")[0].split("E")[0].replace(".", "").lstrip("0")) or 1
    try:
        return ("num", Fraction(text), digits)
    except (ValueError, ZeroDivisionError) as e:
        raise ParseError(f"bad number {text[:20]!r}") from e


_FUNCTION_LETTERS = {"f", "g", "h", "F", "G", "H", "P", "Q", "p", "q"}
_CLOSERS = {"(": (")", "]"), "[": (")", "]"), "{": ("}",), "{s": ("{s",)}
_MATRIX_ENVS = {"pmatrix", "bmatrix", "Bmatrix", "matrix", "smallmatrix", "array"}
_STOP_UNITS = {"unit", "word", "per", "deg"}


class _Parser:
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.abs_depth = 0
        self.fn_depth = 0

    # -- helpers -------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", None)

    def next(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, kind: str, value: Any = None) -> Token:
        tok = self.next()
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise ParseError(f"expected {value or kind}, got {tok[1]!r}")
        return tok

    def at(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        return tok[0] == kind and (value is None or tok[1] == value)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("nesting too deep")

    # -- grammar -------------------------------------------------------------------------------
    def parse(self) -> Node:
        if self.at("either"):
            self.next()
        # "\text{The answer is } 5", "= 5", "\approx 3.14": a lead-in before the math
        while self.peek()[0] in ("word", "unit") and self.peek(1)[0] not in ("eof", "word", "unit"):
            self.next()
        if self.at("rel") and self.peek()[1] in ("=", "~"):
            self.next()
        node = self.parse_or()
        self.skip_units()
        if not self.at("eof"):
            raise ParseError(f"unexpected {self.peek()[1]!r}")
        return node

    def parse_or(self) -> Node:
        items = [self.parse_list()]
        while self.at("or"):
            self.next()
            items.append(self.parse_list())
        return items[0] if len(items) == 1 else ("or", tuple(items))

    def parse_list(self) -> Node:
        groups: list[list[Node]] = [[self.parse_setop()]]
        while self.at("comma") or self.at("and"):
            if self.next() == ("comma", ";"):
                groups.append([])
            if self.at("and"):  # ", and"
                self.next()
            if self.at("eof") or self.at("or"):
                break
            groups[-1].append(self.parse_setop())
        groups = [g for g in groups if g]
        if len(groups) > 1 and any(len(g) > 1 for g in groups):
            # "p = 5, q = 2; p = 7, q = 2": semicolons separate solutions, commas their parts
            items = [g[0] if len(g) == 1 else ("list", tuple(g)) for g in groups]
        else:
            items = [node for g in groups for node in g]
        return items[0] if len(items) == 1 else ("list", tuple(items))

    def parse_setop(self) -> Node:
        node = self.parse_relation()
        while self.at("setop"):
            op = self.next()[1]
            node = ("setop", op, node, self.parse_relation())
        return node

    def parse_relation(self) -> Node:
        exprs = [self.parse_additive()]
        ops: list[str] = []
        while self.at("rel"):
            ops.append(self.next()[1])
            exprs.append(self.parse_additive())
        self.skip_units()
        if not ops:
            return exprs[0]
        return ("rel", tuple(exprs), tuple(ops))

    def skip_units(self) -> None:
        """Drop unit annotations: ``cm``, ``\\text{ cm}^2``, ``m/s``, ``dollars per hour``."""
        while self.peek()[0] in _STOP_UNITS:
            self.next()
            if self.at("op", "^"):
                self.next()
                if self.at("num"):
                    self.next()
                elif self.at("open", "{"):
                    self.parse_primary()
            if self.at("op", "/") and self.peek(1)[0] in _STOP_UNITS:
                self.next()

    def parse_additive(self) -> Node:
        self.enter()
        terms: list[Node] = []
        pm: list[tuple[str, Node]] = []
        if self.at("op", "-"):
            self.next()
            terms.append(("neg", self.parse_term()))
        elif self.at("pm"):
            sign = self.next()[1]
            pm.append((sign, self.parse_term()))
        else:
            if self.at("op", "+"):
                self.next()
            terms.append(self.parse_term())
        while True:
            if self.at("op", "+"):
                self.next()
                terms.append(self.parse_term())
            elif self.at("op", "-"):
                self.next()
                terms.append(("neg", self.parse_term()))
            elif self.at("pm"):
                sign = self.next()[1]
                pm.append((sign, self.parse_term()))
            else:
                break
        self.depth -= 1
        if len(pm) > 2:
            raise ParseError("too many \\pm")
        node = (terms[0] if len(terms) == 1 else ("add", tuple(terms))) if terms else ZERO
        for sign, t in pm:
            node = ("pm", node, t, sign)
        return node

    def starts_factor(self) -> bool:
        kind, val = self.peek()
        if kind == "begin":  # a matrix times a matrix: \begin{pmatrix}..\end{pmatrix}\begin{...
            return val in _MATRIX_ENVS
        if kind in ("num", "id", "const", "fn", "cmd", "special"):
            return not (kind == "cmd" and val in ("end",))
        if kind == "open":
            return val in ("(", "[", "{", "floor", "ceil")
        return kind == "op" and val == "|" and self.abs_depth == 0

    def parse_term(self) -> Node:
        self.enter()
        factors = [self.parse_unary()]
        divs: list[bool] = [False]
        while True:
            if self.at("op", "*"):
                self.next()
                factors.append(self.parse_unary())
                divs.append(False)
            elif self.at("op", "/"):
                self.next()
                factors.append(self.parse_unary())
                divs.append(True)
            elif self.at("op", ":") and len(factors) == 1 and self.depth <= 4:
                # a ratio 1:2 is the fraction 1/2 (only two parts, at the top level)
                self.next()
                factors.append(self.parse_unary())
                divs.append(True)
                if self.at("op", ":"):
                    raise ParseError("a ratio of three parts")
            elif self.at("op", "choose"):
                self.next()
                k = self.parse_unary()
                factors[-1] = ("fn", "binom", (factors[-1], k))
            elif self.starts_factor():
                prev = factors[-1]
                if self.at("num") and prev[0] == "num":
                    raise ParseError("two numbers in a row")
                if (
                    self.at("cmd", "frac")
                    and prev[0] == "num"
                    and len(factors) == 1
                    and prev[1].denominator == 1
                ):
                    frac = self.parse_unary()
                    if (
                        frac[0] == "div"
                        and frac[1][0] == "num"
                        and frac[2][0] == "num"
                        and frac[1][1].denominator == 1
                        and frac[2][1].denominator == 1
                    ):
                        # a mixed number: 2\frac{1}{2} is 5/2
                        factors[-1] = ("add", (prev, frac))
                        continue
                    factors.append(frac)
                    divs.append(False)
                    continue
                factors.append(self.parse_unary(implicit=True))
                divs.append(False)
            else:
                break
        self.depth -= 1
        node = factors[0]
        run: list[Node] = [node]
        for f, d in zip(factors[1:], divs[1:], strict=False):
            if d:
                node = ("div", _mul(run), f)
                run = [node]
            else:
                run.append(f)
        return _mul(run)

    def parse_unary(self, implicit: bool = False) -> Node:
        self.enter()
        if not implicit and self.at("op", "-"):
            self.next()
            node: Node = ("neg", self.parse_unary())
        elif not implicit and self.at("op", "+"):
            self.next()
            node = self.parse_unary()
        else:
            node = self.parse_power()
        self.depth -= 1
        return node

    def parse_power(self) -> Node:
        base = self.parse_postfix()
        if self.at("op", "^"):
            self.next()
            exp = self.parse_exponent()
            base = ("pow", base, exp)
            # postfix after a power: 2^3! is unusual; degrees after power handled by the caller
        return base

    def parse_exponent(self) -> Node:
        self.enter()
        if self.at("op", "-"):
            self.next()
            node: Node = ("neg", self.parse_exponent())
        elif self.at("op", "+"):
            self.next()
            node = self.parse_exponent()
        else:
            node = _literal(self.next()[1]) if self.at("num") else self.parse_primary()
            if self.at("op", "^"):  # a^b^c = a^(b^c)
                self.next()
                node = ("pow", node, self.parse_exponent())
        self.depth -= 1
        return node

    def parse_postfix(self) -> Node:
        node = self.parse_primary()
        while True:
            if self.at("op", "!"):
                self.next()
                if self.at("op", "!"):
                    self.next()
                    node = ("fn", "fact2", (node,))
                else:
                    node = ("fn", "fact", (node,))
            elif self.at("scale"):  # 1.5 million
                node = ("mul", (node, _num(self.next()[1])))
            elif self.at("deg"):
                self.next()
                # inside sin(...) an angle in degrees converts; an angle answer is kept as one
                # (60 degrees is also pi/3, see _math_values)
                in_function = self.fn_depth > 0
                node = ("div", _mul([node, _PI]), _num(180)) if in_function else ("deg", node)
            elif self.at("op", "'"):
                raise ParseError("primes are not supported")
            else:
                return node

    def parse_group(self, opener: str) -> Node:
        """The content of ``{...}`` (an expression, no commas)."""
        node = self.parse_or()
        self.expect("close", "}" if opener == "{" else opener)
        return node

    def parse_braced_arg(self) -> Node:
        """A LaTeX argument: ``{...}`` or a single token (``\\frac34``)."""
        if self.at("open", "{"):
            self.next()
            return self.parse_group("{")
        tok = self.peek()
        if tok[0] == "num":
            self.next()
            text = tok[1]
            if text.isdigit() and len(text) > 1:
                # \frac34: one digit per argument; the rest stays the next token (rewritten
                # in place: rebuilding the token list would make \frac12\frac12... quadratic)
                self.i -= 1
                self.toks[self.i] = ("num", text[1:])
                return _literal(text[0])
            return _literal(text)
        return self.parse_primary()

    def parse_primary(self) -> Node:
        self.enter()
        node = self._primary()
        self.depth -= 1
        return node

    def _primary(self) -> Node:
        kind, val = self.next()
        if kind == "num":
            node = _literal(val)
            if self.at("op", "_") and val.isdigit():  # 1010_2
                self.next()
                base = self.parse_braced_arg()
                if base[0] != "num" or base[1].denominator != 1 or not 2 <= base[1] <= 36:
                    raise ParseError("bad base")
                node = ("based", val, int(base[1]))
            return node
        if kind == "id":
            name = val
            if self.at("op", "_"):
                self.next()
                name = f"{name}_{self._subscript()}"
            if name in _FUNCTION_LETTERS and self.at("open", "("):
                call = self._function_call(name)
                if call is not None:
                    return call
            elif (
                name.isupper()
                and len(name) == 1
                and self.at("open", "(")
                and self.peek(1)[0] == "id"
                and self.peek(2) == ("close", ")")
            ):
                # W(n): a function of one variable (A(1, 2), a point, stays a product)
                return self._function_call(name)  # type: ignore[return-value]
            if name == "e":
                return ("const", "e")
            if name == "i":
                return ("const", "i")
            return ("sym", name)
        if kind == "const":
            return ("const", val)
        if kind == "special":
            if val == "inf":
                return ("inf", 1)
            return ("special", val)
        if kind == "word":
            return ("text", val)
        if kind == "fn":
            return self.parse_function(val)
        if kind == "open":
            return self.parse_bracket(val)
        if kind == "op" and val == "|":
            self.abs_depth += 1
            inner = self.parse_additive()
            self.abs_depth -= 1
            self.expect("op", "|")
            return ("fn", "abs", (inner,))
        if kind == "cmd":
            return self.parse_command(val)
        if kind == "begin":
            return self.parse_env(val)
        raise ParseError(f"unexpected {val!r}")

    def _function_call(self, name: str) -> Node | None:
        """``f(x)``, ``g(2)``: function notation, read as one opaque name (so ``f(x) = 2x``
        is an assignment); None (and nothing consumed) for anything else, e.g. ``f(x+1)``."""
        args = []
        j = self.i + 1
        while True:
            kind, val = self.toks[j] if j < len(self.toks) else ("eof", None)
            if kind not in ("id", "num"):
                return None
            args.append(str(val))
            kind, val = self.toks[j + 1] if j + 1 < len(self.toks) else ("eof", None)
            if kind == "close" and val == ")":
                self.i = j + 2
                return ("sym", f"{name}({','.join(args)})")
            if kind != "comma":
                return None
            j += 2

    def _subscript(self) -> str:
        if self.at("open", "{"):
            self.next()
            parts = []
            while not self.at("close", "}"):
                kind, val = self.next()
                if kind not in ("num", "id", "op", "comma", "word") or (
                    kind == "op" and val not in "+-"
                ):
                    raise ParseError("complex subscript")
                parts.append(str(val))
                if len(parts) > 10:
                    raise ParseError("long subscript")
            self.next()
            return "".join(parts)
        kind, val = self.next()
        if kind not in ("num", "id"):
            raise ParseError("bad subscript")
        return str(val)

    def parse_bracket(self, opener: str) -> Node:
        if opener in ("floor", "ceil"):
            inner = self.parse_additive()
            self.expect("close", opener)
            return ("fn", opener, (inner,))
        items: list[Node] = []
        if self.at("close") and self.peek()[1] in _CLOSERS[opener]:
            closer = self.next()[1]
            if opener in ("{", "{s"):
                return ("special", "empty")
            return ("tuple", opener, closer, ())
        if (
            opener in ("{", "{s")
            and self.peek()[0] == "id"
            and self.peek(1) in (("op", "|"), ("op", ":"))
        ):
            # set-builder notation {x | x > 2}: the set is what the condition describes
            self.next()
            self.next()
            condition = self.parse_or()
            self.expect("close", "}" if opener == "{" else opener)
            return condition
        while True:
            items.append(self.parse_setop() if opener in ("(", "[") else self.parse_or())
            if self.at("comma"):
                self.next()
                continue
            break
        tok = self.next()
        if tok[0] != "close" or tok[1] not in _CLOSERS[opener]:
            raise ParseError("unbalanced brackets")
        closer = tok[1]
        if opener in ("{", "{s"):
            if len(items) == 1 and opener == "{":
                return items[0]
            return ("set", tuple(items))
        if len(items) == 1 and closer == {"(": ")", "[": "]"}[opener]:
            return items[0]
        return ("tuple", opener, closer, tuple(items))

    def parse_function(self, name: str) -> Node:
        power: Node | None = None
        base: Node | None = None
        if self.at("op", "^"):
            self.next()
            power = self.parse_exponent()
            inverse = power[0] == "neg" and power[1][0] == "num" and power[1][1] == 1
            if inverse and name in ("sin", "cos", "tan", "sec", "csc", "cot"):
                name, power = "arc" + name, None
        if self.at("op", "_") and name == "log":
            self.next()
            base = self.parse_braced_arg()
        self.fn_depth += 1
        try:
            if name in ("gcd", "lcm", "max", "min"):
                self.expect("open", "(")
                args = [self.parse_additive()]
                while self.at("comma"):
                    self.next()
                    args.append(self.parse_additive())
                self.expect("close", ")")
                node: Node = ("fn", name, tuple(args))
            else:
                arg = self.parse_fn_arg()
                if base is not None:
                    node = ("fn", "logb", (base, arg))
                elif name == "exp":
                    node = ("pow", ("const", "e"), arg)
                else:
                    node = ("fn", name, (arg,))
        finally:
            self.fn_depth -= 1
        if power is not None:
            node = ("pow", node, power)
        return node

    def parse_fn_arg(self) -> Node:
        """``sin(x)``, ``\\sin{x}``, or ``\\sin 2x`` (a product without + or -)."""
        if self.at("open", "(") or self.at("open", "{"):
            opener = self.next()[1]
            inner = self.parse_additive()
            self.expect("close", ")" if opener == "(" else "}")
            node = inner
            while self.at("deg"):
                self.next()
                node = ("div", _mul([node, _PI]), _num(180))
            return node
        factors = [self.parse_unary()]
        while self.starts_factor() and not self.at("fn"):
            factors.append(self.parse_unary(implicit=True))
        return _mul(factors)

    def parse_command(self, name: str) -> Node:
        if name == "frac":
            num = self.parse_braced_arg()
            den = self.parse_braced_arg()
            return ("div", num, den)
        if name == "binom":
            n = self.parse_braced_arg()
            k = self.parse_braced_arg()
            return ("fn", "binom", (n, k))
        if name == "sqrt":
            if self.at("open", "["):
                self.next()
                index = self.parse_additive()
                self.expect("close", "]")
                self.fn_depth += 1
                arg = self.parse_braced_arg()
                self.fn_depth -= 1
                return ("fn", "root", (index, arg))
            return ("fn", "sqrt", (self.parse_braced_arg(),))
        if name in ("sum", "prod"):
            return self.parse_series(name)
        if name == "overline":
            raise ParseError("\\overline outside a decimal")
        raise ParseError(f"unexpected \\{name}")

    def parse_series(self, name: str) -> Node:
        """``\\sum_{k=0}^{n-1} F_k F_{n-k-1}``: summed out when its bounds are small integers,
        else one opaque symbol named by its canonical form (factors in any order, any index
        name), so equal sums written differently are one symbol."""
        index: Node | None = None
        hi: Node | None = None
        for _ in range(2):
            if self.at("op", "_") and index is None:
                self.next()
                index = self.parse_braced_arg()
            elif self.at("op", "^") and hi is None:
                self.next()
                hi = self.parse_braced_arg()
        if (
            index is None
            or hi is None
            or index[0] != "rel"
            or index[2] != ("=",)
            or index[1][0][0] not in ("sym", "const")
        ):
            raise ParseError(f"\\{name} without index and bounds")
        var, lo = index[1][0][1], index[1][1]
        body = self.parse_fn_arg()
        if index[1][0][0] == "const":  # \sum_{i=1}: i is the index, not the imaginary unit
            body = _const_to_sym(body, var)
        return _series(name, var, lo, hi, body)

    def parse_env(self, env: str) -> Node:
        if env not in _MATRIX_ENVS:
            raise ParseError(f"unsupported environment {env}")
        rows: list[tuple[Node, ...]] = []
        row: list[Node] = []
        while True:
            if self.at("end"):
                self.next()
                break
            if self.at("eof"):
                raise ParseError("unterminated matrix")
            row.append(self.parse_additive())
            if self.at("amp"):
                self.next()
            elif self.at("rowsep"):
                self.next()
                rows.append(tuple(row))
                row = []
        if row:
            rows.append(tuple(row))
        if not rows or any(len(r) != len(rows[0]) for r in rows):
            raise ParseError("ragged matrix")
        return ("matrix", tuple(rows))


MAX_SERIES_NODES = 20_000
"""A sum or product with numeric bounds is written out only while terms x body size stays
under this (nested sums would otherwise multiply); beyond it, it stays one opaque symbol."""


def _size(node: Any, limit: int) -> int:
    """The number of tuples in ``node``, counting stops past ``limit``."""
    count, stack = 0, [node]
    while stack and count <= limit:
        n = stack.pop()
        if isinstance(n, tuple):
            count += 1
            stack.extend(c for c in n if isinstance(c, tuple))
    return count


def _int_value(node: Node) -> int | None:
    if node[0] == "num" and node[1].denominator == 1:
        return int(node[1])
    if node[0] == "neg" and node[1][0] == "num" and node[1][1].denominator == 1:
        return -int(node[1][1])
    return None


def _index_re(var: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z]){re.escape(var)}(?![A-Za-z])")


def _subscript_uses(name: str, var: str) -> bool:
    """Whether a subscripted name (``F_n-k-1``) has the index ``var`` in its subscript."""
    _, _, sub = name.partition("_")
    return bool(sub) and _index_re(var).search(sub) is not None


def _map_syms(node: Any, fn: Callable[[str], Node | None]) -> Any:
    if isinstance(node, tuple) and node:
        if node[0] == "sym" and len(node) == 2:
            replaced = fn(node[1])
            return node if replaced is None else replaced
        return tuple(_map_syms(c, fn) for c in node)
    return node


def _const_to_sym(node: Any, name: str) -> Any:
    if isinstance(node, tuple) and node:
        if node == ("const", name):
            return ("sym", name)
        return tuple(_const_to_sym(c, name) for c in node)
    return node


def _substitute(node: Node, var: str, value: Node) -> Node:
    def at(sym: str) -> Node | None:
        return value if sym == var else None

    return _map_syms(node, at)  # type: ignore[no-any-return]


def _canonical(node: Any) -> Any:
    """``node`` with the terms of sums and the factors of products sorted (by their repr)."""
    if isinstance(node, tuple) and node and isinstance(node[0], str):
        children = tuple(_canonical(c) for c in node[1:])
        if node[0] in ("add", "mul"):
            return (node[0], tuple(sorted(children[0], key=repr)))
        return (node[0], *children)
    if isinstance(node, tuple):
        return tuple(_canonical(c) for c in node)
    return node


def _syms_in(node: Any) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple) and n:
            if n[0] == "sym" and len(n) == 2:
                out.add(n[1])
            else:
                stack.extend(c for c in n if isinstance(c, tuple))
    return out


def _series(name: str, var: str, lo: Node, hi: Node, body: Node) -> Node:
    a, b = _int_value(lo), _int_value(hi)
    # a_k in the body: writing the sum out would need a_1, a_2, ... (kept opaque instead)
    indexed = any(s != var and _subscript_uses(s, var) for s in _syms_in(body))
    count = b - a + 1 if a is not None and b is not None else MAX_SERIES_NODES + 1
    small = count <= 0 or count * _size(body, MAX_SERIES_NODES // count) <= MAX_SERIES_NODES
    if a is not None and not indexed and small:
        terms = [_substitute(body, var, _num(i)) for i in range(a, a + count)]
        if not terms:
            return _num(0 if name == "sum" else 1)
        if len(terms) == 1:
            return terms[0]  # type: ignore[no-any-return]
        return ("add" if name == "sum" else "mul", tuple(terms))
    pattern = _index_re(var)

    def rename(sym: str) -> Node | None:
        if sym == var:
            return ("sym", "#")
        if _subscript_uses(sym, var):
            base, _, sub = sym.partition("_")
            return ("sym", base + "_" + pattern.sub("#", sub))
        return None

    key = repr(_canonical((lo, hi, _map_syms(body, rename))))
    digest = hashlib.sha1(key.encode("utf-8", "replace")).hexdigest()[:16]
    return ("sym", f"\\{name}#{digest}")


def _mul(factors: list[Node]) -> Node:
    return factors[0] if len(factors) == 1 else ("mul", tuple(factors))


def _wrap_depth(s: str, left: str, right: str) -> int:
    """How many ``left ... right`` pairs wrap all of ``s`` (``((1))`` -> 2), in linear time."""
    n = len(s)
    depth = [0] * n
    d = 0
    for i, ch in enumerate(s):
        if ch == left:
            d += 1
        elif ch == right:
            d -= 1
            if d < 0:
                return 0
        depth[i] = d
    if d != 0:
        return 0
    # layer j+1 wraps s[j:n-j] iff every depth in s[j : n-j-1] stays >= j+1
    half = n // 2
    window_min = [0] * (half + 1)
    best = n
    for j in range(half - 1, -1, -1):
        if j <= n - j - 2:
            best = min(best, depth[j], depth[n - j - 2])
        window_min[j] = best
    w = 0
    while w < half and s[w] == left and s[n - 1 - w] == right and window_min[w] >= w + 1:
        w += 1
    return w


def strip_redundant_grouping(s: str) -> str:
    """``((((1))))`` -> ``(1)`` and ``{{{x}}}`` -> ``{x}``: doubled grouping is meaningless, and
    removing it keeps thousands of redundant levels from hitting the depth limit."""
    for left, right in (("(", ")"), ("{", "}")):
        if s.startswith(left * 2) and not (left == "{" and ("\\{" in s or "\\}" in s)):
            w = _wrap_depth(s, left, right)
            if w >= 2:
                s = s[w - 1 : len(s) - (w - 1)]
    return s


_REPEATING_RE = re.compile(r"(\d*)\.(\d*)\\overline\{(\d+)\}|(\d*)\.(\d*)\((\d+)\)$")


def _repeating(m: re.Match[str]) -> str:
    whole, fixed, rep = (m.group(1), m.group(2), m.group(3)) if m.group(3) else m.group(4, 5, 6)
    whole = whole or "0"
    value = Fraction(
        int(whole + fixed + rep) - int(whole + fixed), 10 ** len(fixed) * (10 ** len(rep) - 1)
    )
    return f"({value.numerator}/{value.denominator})"


_ELLIPSIS_RE = re.compile(r"(\d*)\.(\d+)\s*(?:\.\.\.|\\[lc]?dots|…)")


def _ellipsis(m: re.Match[str]) -> str:
    """``0.1666...`` -> ``(1/6)``: the shortest period repeated at least twice (thrice for a
    single digit) at the end of the digits; no repetition -> ParseError."""
    whole, digits = m.group(1) or "0", m.group(2)
    for period in range(1, len(digits) // 2 + 1):
        rep = digits[-period:]
        copies = 3 if period == 1 else 2
        if len(digits) >= period * copies and digits.endswith(rep * copies):
            fixed = digits[: len(digits) - period * copies]
            while fixed.endswith(rep):
                fixed = fixed[:-period]
            value = Fraction(
                int(whole + fixed + rep) - int(whole + fixed),
                10 ** len(fixed) * (10**period - 1),
            )
            return f"({value.numerator}/{value.denominator})"
    raise ParseError("an ellipsis without a repeating pattern")


@short_input_cache()
def parse(answer: str) -> Node:
    """Parse a normalised answer (see :func:`normalize`) into an AST; raise :class:`ParseError`.

    >>> parse(r"\\frac{3}{4}")
    ('div', ('num', Fraction(3, 1), 1), ('num', Fraction(4, 1), 1))
    >>> parse("x = 1, 2")[0]
    'list'
    """
    if answer.startswith(("((", "{{")):
        answer = strip_redundant_grouping(answer)
    if len(answer) > MAX_ANSWER_CHARS:
        raise ParseError("answer too long")
    if not answer:
        raise ParseError("empty answer")
    if "overline" in answer or answer.endswith(")"):
        answer = _REPEATING_RE.sub(_repeating, answer)
    if "..." in answer or "dots" in answer or "…" in answer:
        answer = _ELLIPSIS_RE.sub(_ellipsis, answer)
    if _UNIT_PHRASES.search(answer):
        answer = _UNIT_PHRASES.sub("", answer).strip()
    toks = tokenize(answer)
    if not toks:
        raise ParseError("empty answer")
    return _Parser(list(toks)).parse()
