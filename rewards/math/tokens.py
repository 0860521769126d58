"""Split a normalised math answer into tokens with one regex scan (the words and commands it
knows are in :mod:`~llmgym.rewards.math.vocab`). Tokens are ``(kind, text)`` pairs; building
a tree from them is :mod:`~llmgym.rewards.math.parser`'s job.
"""

from __future__ import annotations

import re
from typing import Any

from llmgym.rewards.math.cache import short_input_cache
from llmgym.rewards.math.nodes import MAX_DEPTH, MAX_LITERAL_DIGITS, ParseError
from llmgym.rewards.math.vocab import (
    COMMANDS,
    FN_ALIASES,
    FUNCTIONS,
    GREEK,
    IGNORED_COMMANDS,
    PLAIN_ONLY_FUNCTIONS,
    SPECIAL_WORDS,
    STRUCTURAL_COMMANDS,
    TEXT_COMMANDS,
    UNITS,
)

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
    if lw in FUNCTIONS or lw in FN_ALIASES:
        return [("fn", FN_ALIASES.get(lw, lw))]
    if lw in SPECIAL_WORDS:
        return [SPECIAL_WORDS[lw]]
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
        if len(words) == 1 and (c.lower() in FUNCTIONS or c.lower() in SPECIAL_WORDS):
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
            elif name in TEXT_COMMANDS:
                j = _skip_ws(s, i)
                if j < n and s[j] == "{":
                    content, i = _read_group(s, j)
                    toks.extend(_classify_text(content, depth))
                # a bare \mathrm x applies to the next token: nothing to do
            elif name in IGNORED_COMMANDS:
                continue
            elif name in ("operatorname", "mathbb"):
                j = _skip_ws(s, i)
                if j >= n or s[j] != "{":
                    raise ParseError(f"\\{name} without argument")
                content, i = _read_group(s, j)
                c = content.strip().replace("*", "")
                if name == "mathbb":
                    toks.append(("special", "reals") if c == "R" else ("word", f"mathbb{c}"))
                elif c.lower() in FUNCTIONS or c.lower() in FN_ALIASES:
                    toks.append(("fn", FN_ALIASES.get(c.lower(), c.lower())))
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
            elif name in COMMANDS:
                tok = COMMANDS[name]
                if tok[0] == "open" and tok[1] in ("(", "["):
                    bracket_depth += 1
                elif tok[0] == "close" and tok[1] in (")", "]"):
                    bracket_depth -= 1
                toks.append(tok)
            elif name in FUNCTIONS or name in FN_ALIASES:
                fname = FN_ALIASES.get(name, name)
                if fname in PLAIN_ONLY_FUNCTIONS:
                    raise ParseError(f"unknown command \\{name}")
                toks.append(("fn", fname))
            elif name in GREEK:
                toks.append(("id", name))
            elif (
                name.isalpha()
                and name not in STRUCTURAL_COMMANDS
                and s[_skip_ws(s, i) : _skip_ws(s, i) + 1] not in ("{", "[", "_", "^")
            ):
                # a macro this parser does not know, standing alone: a name (\zzz = x = 0)
                toks.append(("id", "\\" + name))
            else:
                raise ParseError(f"unknown command \\{name}")
    return toks
