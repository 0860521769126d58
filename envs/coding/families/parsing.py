"""Parsing families: arithmetic expressions, query strings, Roman numerals, durations, CSV."""

from __future__ import annotations

import random

from llmgym.envs.coding.families.strings import WORDS, random_word
from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

# --- evaluate_expression ------------------------------------------------------------------------


def evaluate_expression(expr: str) -> int:
    tokens = []
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch.isdigit():
            j = i
            while j < len(expr) and expr[j].isdigit():
                j += 1
            tokens.append(expr[i:j])
            i = j
        else:
            if not ch.isspace():
                tokens.append(ch)
            i += 1
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expression() -> int:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    def term() -> int:
        value = factor()
        while peek() == "*":
            take()
            value *= factor()
        return value

    def factor() -> int:
        tok = take()
        if tok == "-":
            return -factor()
        if tok == "(":
            value = expression()
            take()
            return value
        return int(tok)

    return expression()


def _evaluate_expression(rng: random.Random, d: float) -> Task:
    size = scale(d, 2, 40)

    def build(n: int, depth: int = 0) -> str:
        if n <= 1 or depth > 12:
            v = str(rng.randint(0, 30))
            return ("-" + v) if rng.random() < 0.1 * d else v
        left = rng.randint(1, n - 1)
        op = rng.choice("+-*")
        s = f"{build(left, depth + 1)} {op} {build(n - left, depth + 1)}"
        return f"({s})" if rng.random() < 0.4 else s

    return call_task(
        rng, d, fn=evaluate_expression, theme="parsing",
        make=lambda: (build(rng.randint(1, size)).replace(" ", "" if rng.random() < 0.3 else " "),),
        edge=[("7",), ("2+3*4",), ("(2+3)*4",), ("-3*-2",), ("10-4-3",)],
        description="Evaluate the integer expression `expr`: non-negative integer literals, "
        "binary `+`, `-`, `*`, unary minus and parentheses, with the usual precedence (`*` "
        "before `+`/`-`, left to right within a level; unary minus binds tightest). Spaces may "
        "appear between tokens. Do not use `eval`.",
    )  # fmt: skip


# --- parse_query_string -------------------------------------------------------------------------


def parse_query_string(query: str) -> dict[str, list[str]]:
    from urllib.parse import unquote_plus

    out: dict[str, list[str]] = {}
    for part in query.lstrip("?").split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        out.setdefault(unquote_plus(key), []).append(unquote_plus(value))
    return out


def _parse_query_string(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 12)

    def enc(s: str) -> str:
        return "".join("+" if c == " " else f"%{ord(c):02X}" if c in "&=%+?" else c for c in s)

    def make() -> tuple[str]:
        parts = []
        keys = [rng.choice(WORDS) for _ in range(3)]
        for _ in range(rng.randint(0, n)):
            key = rng.choice(keys)
            value = " ".join(random_word(rng, "abc&=%+", 4) for _ in range(rng.randint(0, 2)))
            parts.append(enc(key) + ("=" + enc(value) if rng.random() < 0.9 else ""))
        return (("?" if rng.random() < 0.3 else "") + "&".join(parts),)

    return call_task(
        rng, d, fn=parse_query_string, make=make, theme="parsing",
        edge=[("",), ("?",), ("a=1&a=2&b",), ("x=%26%3D&&y=a+b",)],
        description="Parse a URL query string (an optional leading `?`, then `key=value` pairs "
        "joined by `&`). Return a dict from each decoded key to the list of its decoded values "
        "in order. Decoding turns `+` into a space and `%XX` into the character with that hex "
        "code. A pair without `=` has the value `''`; empty pairs are skipped.",
    )  # fmt: skip


# --- roman numerals -----------------------------------------------------------------------------


def int_to_roman(n: int) -> str:
    table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
             (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]  # fmt: skip
    out = []
    for value, symbol in table:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)


def roman_to_int(s: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = values[ch]
        total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v
    return total


def _roman_to_int(rng: random.Random, d: float) -> Task:
    top = scale(d, 50, 3999)
    return call_task(
        rng, d, fn=roman_to_int, helpers=[], theme="parsing",
        make=lambda: (int_to_roman(rng.randint(1, top)),),
        edge=[("I",), ("IV",), ("MCMXCIV",), ("MMMCMXCIX",)],
        description="Convert a valid Roman numeral (1 to 3999, subtractive notation such as "
        "`IV`, `IX`, `XL`, `XC`, `CD`, `CM`) to an integer.",
    )  # fmt: skip


def _int_to_roman(rng: random.Random, d: float) -> Task:
    top = scale(d, 50, 3999)
    return call_task(
        rng, d, fn=int_to_roman, theme="parsing",
        make=lambda: (rng.randint(1, top),),
        edge=[(1,), (4,), (1994,), (3999,)],
        description="Write `n` (1 to 3999) as a Roman numeral in standard subtractive form "
        "(`4` -> `'IV'`, `1994` -> `'MCMXCIV'`).",
    )  # fmt: skip


# --- parse_duration -----------------------------------------------------------------------------


def parse_duration(text: str) -> int:
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    total = 0
    number = ""
    for ch in text.replace(" ", ""):
        if ch.isdigit():
            number += ch
        elif ch in units and number:
            total += int(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"bad duration: {text!r}")
    if number:
        raise ValueError(f"bad duration: {text!r}")
    return total


def _parse_duration(rng: random.Random, d: float) -> Task:
    def make() -> tuple[str]:
        if rng.random() < 0.2 + 0.2 * d:
            return (rng.choice(["5x", "h", "1h5", "3m m", "1.5h", "--", "4 d 2"]),)
        parts = []
        for unit in "dhms":
            if rng.random() < 0.6:
                parts.append(f"{rng.randint(0, scale(d, 9, 500))}{unit}")
        if rng.random() < 0.3 * d:
            rng.shuffle(parts)
        return ((" " if rng.random() < 0.4 else "").join(parts),)

    return call_task(
        rng, d, fn=parse_duration, make=make, raises=True, theme="parsing",
        edge=[("",), ("90s",), ("1d 2h 3m 4s",), ("2h2h",), ("7",)],
        description="Parse a duration such as `'1d 2h 30m 5s'` into seconds: a sequence of "
        "non-negative integers each directly followed by a unit (`d`=86400, `h`=3600, `m`=60, "
        "`s`=1). Units may repeat and come in any order; spaces are ignored; the empty string "
        "is 0 seconds. Raise `ValueError` for anything else (a unit without a number, a number "
        "without a unit, any other character).",
    )  # fmt: skip


# --- split_csv_line -----------------------------------------------------------------------------


def split_csv_line(line: str) -> list[str]:
    fields = []
    field: list[str] = []
    quoted = False
    i = 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    field.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                field.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ",":
            fields.append("".join(field))
            field = []
        else:
            field.append(ch)
        i += 1
    fields.append("".join(field))
    return fields


def _split_csv_line(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 15)

    def make() -> tuple[str]:
        cells = []
        for _ in range(rng.randint(1, n)):
            raw = (
                random_word(rng, 'ab ,"', scale(d, 3, 10))
                if rng.random() < 0.6
                else rng.choice(WORDS)
            )
            if any(c in raw for c in ',"') or rng.random() < 0.2:
                raw = '"' + raw.replace('"', '""') + '"'
            cells.append(raw)
        return (",".join(cells),)

    return call_task(
        rng, d, fn=split_csv_line, make=make, theme="parsing",
        edge=[("",), ("a,,b",), ('"x,y",z',), ('"say ""hi"""',)],
        description="Split one CSV line into its fields: fields are separated by commas; a "
        'field may be wrapped in double quotes, inside which commas are literal and `""` '
        "stands for one `\"`. Quotes are removed from the result. An empty line is one empty "
        "field.",
    )  # fmt: skip


FAMILIES = [
    Family("evaluate_expression", _evaluate_expression, "recursive-descent expression parser"),
    Family("parse_query_string", _parse_query_string, "URL query decoding"),
    Family("roman_to_int", _roman_to_int, "Roman numerals to integers"),
    Family("int_to_roman", _int_to_roman, "integers to Roman numerals"),
    Family("parse_duration", _parse_duration, "duration parsing with error cases"),
    Family("split_csv_line", _split_csv_line, "CSV field splitting with quotes"),
]
