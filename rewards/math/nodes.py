"""The parse tree of a math answer: its node shapes, the limits of parsing, and walks over it.

This module only describes trees; :mod:`llmgym.rewards.math.parser` builds them and the
evaluation modules read them.

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

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

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


def subnodes(node: Node) -> Iterator[Node]:
    """Every node inside ``node`` (itself included), through nested tuples of children such
    as a matrix's rows."""
    stack: list[Any] = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, tuple) or not n:
            continue
        if isinstance(n[0], str):
            yield n
            stack.extend(c for c in n[1:] if isinstance(c, tuple))
        else:  # a container of nodes (or of rows of nodes)
            stack.extend(c for c in n if isinstance(c, tuple))


def literal_digits(node: Node) -> int:
    """The most significant digits written in any literal of ``node``."""
    return max((n[2] for n in subnodes(node) if n[0] == "num" and len(n) == 3), default=0)


def symbols(node: Node, out: set[str] | None = None) -> set[str]:
    """The free variable names in ``node``."""
    out = set() if out is None else out
    out.update(n[1] for n in subnodes(node) if n[0] == "sym" and len(n) == 2)
    return out


def contains_kind(node: Node, kinds: set[str]) -> bool:
    """Whether any sub-node of ``node`` is of one of ``kinds``."""
    return any(n[0] in kinds for n in subnodes(node))


def num(value: Fraction | int, digits: int = 0) -> Node:
    """A number node (``digits``: the significant digits written; 0 for a computed value)."""
    return ("num", Fraction(value), digits)
