"""Final forms: whether an answer that equals the gold is also written as an answer, not as a
question (``3929 + 3359`` is equal to ``7288`` but is not an answer to "compute").

A form is checked on the parsed answer (see :mod:`llmgym.rewards.math.parser`), after equality,
so it costs one walk of a cached tree and only for answers that are already equal. Containers
(tuples, sets, lists, intervals, unions, matrices, assignments ``x = ...``, inequalities on a
variable, ``\\pm``) are in a form when every element is. Not in any value form: an operation on
numbers left to do (``3 + 4``, ``\\frac{14}{2}``, ``\\sqrt{8}``, ``\\log_2 8``, ``\\sin 30^\\circ``),
a set operation other than a union of disjoint intervals or points taken out of the reals or an
interval (``\\mathbb{R} \\setminus \\{0\\}``), an equation or inequality that still needs solving
(``2x + 1 = 7``, ``2x \\le 6``), a false equation between numbers (``9 = 0``).

Scalars are read as a sum of distinct *atoms* with rational coefficients: the rational part,
``\\sqrt{m}`` (``m`` square-free), ``\\pi``, ``e`` and ``i``; each form allows some atoms. A coefficient is
one number (an integer, a decimal, or ``p/q`` in lowest terms); ``\\frac{a + b\\sqrt{m}}{q}`` is in
form when ``gcd(a, b, q) = 1``; a root in a denominator is not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.exact import exact
from llmgym.rewards.math.nodes import Node, symbols
from llmgym.rewards.math.realsets import to_realset
from llmgym.rewards.math.values import to_value

FORMS: dict[str, str] = {
    "number": "a single number (an integer, a decimal, or a fraction in lowest terms)",
    "fraction": "an integer or a fraction p/q in lowest terms",
    "radical": "simplest radical form (square-free radicands, reduced coefficients, "
    "no root in a denominator)",
    "pi": "a number or a reduced multiple of \\pi",
    "complex": "a + bi, with numbers a and b",
    "exact": "an exact value in simplest form (numbers, square roots, \\pi, e, i)",
    "polynomial": "an expanded polynomial with like terms collected",
    "factored": "a product of linear factors",
    "expression": "an expression with no arithmetic on numbers left to do",
    "auto": "the final form of the gold answer",
    "any": "any form (equality alone)",
}
"""Every form name and what it asks for (the text of the feedback)."""


@dataclass(frozen=True)
class _Rules:
    atoms: frozenset[str]
    decimals: bool = True
    symbols: bool = False


_RULES = {
    "number": _Rules(frozenset()),
    "fraction": _Rules(frozenset(), decimals=False),
    "radical": _Rules(frozenset({"sqrt"})),
    "pi": _Rules(frozenset({"pi"})),
    "complex": _Rules(frozenset({"i"})),
    "exact": _Rules(frozenset({"sqrt", "pi", "i", "e"})),
    "expression": _Rules(frozenset({"sqrt", "pi", "i", "e"}), symbols=True),
}
_EXACT = _RULES["exact"]

_MIXED_RE = re.compile(
    r"-?\s*(?:\d+\s*\\frac\s*(?:\{\s*\d+\s*\}|\d)\s*(?:\{\s*\d+\s*\}|\d)|\(\d+\+\d+/\d+\))"
)
"""A mixed number as written (``2\\frac{1}{2}``, or ``2 1/2`` as :func:`normalize` rewrites it);
its tree is a sum, so the text tells it from ``2 + \\frac{1}{2}``."""

_FACTOR_RE = re.compile(r"-?\d*x?(?:\([^()]*\)(?:\^\{?\d+\}?)?){2,}|-?\d*x?\([^()]*\)\^\{?\d+\}?")


def is_factored(answer: str) -> bool:
    """Whether an answer is written as a product of parenthesized linear factors.

    >>> is_factored("(x - 2)(x + 3)"), is_factored("2(x+1)^2"), is_factored("x^2 + x - 6")
    (True, True, False)
    >>> is_factored("(x^2 + x - 6)(1)")
    False
    """
    text = re.sub(r"\\left|\\right|\\cdot|\*|\s", "", answer)
    if not _FACTOR_RE.fullmatch(text):
        return False
    return all("^" not in inner for inner in re.findall(r"\(([^()]*)\)", text))


def in_form(node: Node, text: str, form: str) -> bool:
    """Whether a parsed answer (``text`` is its normalised string) is written in ``form``
    (a name in :data:`FORMS` other than ``"auto"``/``"any"``).

    >>> from llmgym.rewards.math.parser import parse
    >>> in_form(parse("3 + 4"), "3 + 4", "number"), in_form(parse("7"), "7", "number")
    (False, True)
    >>> in_form(parse("\\\\sqrt{8}"), "\\\\sqrt{8}", "radical")
    False
    """
    if form == "factored":
        return is_factored(text)
    if form == "polynomial":
        return _final(node, _polynomial, symbolic=False)
    rules = _RULES[form]
    if not rules.symbols and _MIXED_RE.fullmatch(text) and _mixed(node):
        return True
    if rules.symbols:
        return _final(node, _expression, symbolic=True)
    return _final(node, lambda n: _combo(n, rules) is not None, symbolic=False)


def infer(node: Node, text: str) -> str | None:
    """The form ``auto`` asks for, read off the gold: ``"exact"`` for a gold without symbols
    that is itself in that form, ``"expression"`` for one with symbols; None (no form) for a
    gold written in neither (``2^{10}``, ``\\ln 2``)."""
    if in_form(node, text, "exact"):
        return "exact"
    if in_form(node, text, "expression"):
        return "expression"
    return None


# ---------------------------------------------------------------------------------------------
# Structures
# ---------------------------------------------------------------------------------------------


def _final(node: Node, leaf: Any, *, symbolic: bool) -> bool:
    kind = node[0]
    if kind in ("list", "set", "or"):
        return all(_final(x, leaf, symbolic=symbolic) for x in node[1])
    if kind == "tuple":
        return all(_final(x, leaf, symbolic=symbolic) for x in node[3])
    if kind == "matrix":
        return all(_final(x, leaf, symbolic=symbolic) for row in node[1] for x in row)
    if kind == "setop":
        if node[1] == "minus" and node[3][0] == "set":
            # \mathbb{R} \setminus \{0\}: points taken out of the reals or an interval
            whole = node[2][0] == "special" and node[2][1] == "reals"
            whole = whole or (node[2][0] == "tuple" and len(node[2][3]) == 2)
            return (
                whole
                and _final(node[2], leaf, symbolic=symbolic)
                and _final(node[3], leaf, symbolic=symbolic)
            )
        return _union_final(node, leaf, symbolic=symbolic)
    if kind == "rel":
        return _relation_final(node, leaf, symbolic=symbolic)
    if kind == "deg":
        return _final(node[1], leaf, symbolic=symbolic)
    if kind in ("special", "text", "based", "inf"):
        return True
    if kind == "neg" and node[1][0] == "inf":
        return True
    return bool(leaf(node))


def _union_final(node: Node, leaf: Any, *, symbolic: bool) -> bool:
    """A union of intervals (and at most one set of points), pairwise disjoint: what
    ``\\cup`` between the pieces of a solution set looks like when nothing is left to merge."""
    pieces: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] == "setop":
            if n[1] != "cup":
                return False
            stack += [n[2], n[3]]
        elif n[0] == "tuple" and len(n[3]) == 2 or n[0] == "set":
            pieces.append(n)
        else:
            return False
    if sum(p[0] == "set" for p in pieces) > 1:
        return False
    if not all(_final(p, leaf, symbolic=symbolic) for p in pieces):
        return False
    try:
        merged = to_realset(to_value(node))
    except Exception:  # not a set of reals: no verdict of final form
        return False
    parts = sum(len(p[1]) if p[0] == "set" else 1 for p in pieces)
    return merged is not None and len(merged) == parts


def _is_const(node: Node) -> bool:
    return not symbols(node)


def _relation_final(node: Node, leaf: Any, *, symbolic: bool) -> bool:
    """Mirrors how :mod:`~llmgym.rewards.math.values` reads a relation: only what gives the
    value (the right side of ``x = ...``) must be final; an equation or inequality that still
    needs solving is not, unless symbols are the answer (``symbolic``)."""
    exprs: tuple[Node, ...] = node[1]
    ops: tuple[str, ...] = node[2]

    def fin(n: Node) -> bool:
        return _final(n, leaf, symbolic=symbolic)

    if "~" in ops and not all(op == "~" for op in ops):
        k = ops.index("~")  # what follows "approximately" is commentary
        exprs, ops = exprs[: k + 1], ops[:k]
        if not ops:
            return fin(exprs[0])
    if all(op == "~" for op in ops):
        if _is_const(exprs[0]):
            return fin(exprs[0])
        ops = tuple("=" for _ in ops)
    if all(op == "=" for op in ops):
        lhs, rhs = exprs[0], exprs[-1]
        if lhs[0] == "sym":
            return fin(rhs)
        if rhs[0] == "sym" and len(exprs) == 2:
            return fin(lhs)
        if lhs[0] == "tuple" and rhs[0] == "tuple" and all(x[0] == "sym" for x in lhs[3]):
            return fin(rhs)
        if _is_const(rhs) and (_is_const(lhs) or len(exprs) > 2):
            # "3 \times 4 = 12": the value is what it equals, if the statement is true
            return fin(rhs) and _holds([e for e in exprs if _is_const(e)])
        return symbolic and all(fin(e) for e in exprs)
    if ops == ("in",) and exprs[0][0] == "sym":
        return fin(exprs[1])
    if symbolic:
        return all(fin(e) for e in exprs)
    # x < 3, -2 < x <= 5, x != 1: a variable bounded by values
    return any(e[0] == "sym" for e in exprs) and all(e[0] == "sym" or fin(e) for e in exprs)


def _holds(exprs: list[Node]) -> bool:
    """Whether constants said to be equal are (when exact arithmetic can tell): ``9 = 0`` copied
    from ``x^2 + 9 = 0`` does not state the value 0."""
    try:
        values = [exact(e) for e in exprs]
    except Exception:  # irrational, too big, undefined: the values decide
        return True
    return all(v == values[0] for v in values[1:])


# ---------------------------------------------------------------------------------------------
# Scalars: sums of atoms with rational coefficients
# ---------------------------------------------------------------------------------------------

Atom = Any  # 1 (the rational part), ("sqrt", m), "pi", "e", "i"; ("pm", atom) after a \pm


def _int(node: Node) -> int | None:
    """An integer as written (not one the parser made up, such as the 0 of a leading ``\\pm``)."""
    if node[0] == "num" and node[2] > 0 and node[1].denominator == 1:
        return int(node[1])
    return None


def _signed_int(node: Node) -> int | None:
    if node[0] == "neg":
        value = _int(node[1])
        return -value if value else None
    return _int(node)


def _rational(node: Node, rules: _Rules) -> Fraction | None:
    """A rational written as one number: ``7``, ``-0.5``, ``\\frac{3}{4}``, ``-3/4``,
    ``\\frac{-3}{4}``, ``1.5 \\times 10^{3}``; None for anything with an operation left."""
    kind = node[0]
    if kind == "num":
        if node[2] == 0 or (node[1].denominator != 1 and not rules.decimals):
            return None
        return node[1]  # type: ignore[no-any-return]
    if kind == "neg":
        if node[1][0] == "neg":
            return None
        value = _rational(node[1], rules)
        return -value if value else None  # "-0" and "--3" are not final
    if kind == "div":
        p, q = _signed_int(node[1]), _int(node[2])
        if p is None or q is None or q < 2 or p == 0 or math.gcd(p, q) != 1:
            return None
        return Fraction(p, q)
    if kind == "mul" and rules.decimals and len(node[1]) == 2:
        mantissa, scale = node[1]
        if mantissa[0] != "num" or mantissa[2] == 0:
            return None
        m = mantissa[1]
        if scale[0] == "num" and scale[2] == 0:  # 1.5 million
            return m * scale[1]  # type: ignore[no-any-return]
        if scale[0] == "pow" and _int(scale[1]) == 10 and 1 <= abs(m) < 10:
            k = _signed_int(scale[2])
            if k is not None and abs(k) <= 400:
                return m * Fraction(10) ** k  # type: ignore[no-any-return]
    return None


def _squarefree(m: int) -> bool:
    if m > 10**12:
        return False  # not worth factoring: no task has such a radicand
    f = 2
    while f * f <= m:
        if m % (f * f) == 0:
            return False
        f += 1
    return True


def _atom(node: Node, rules: _Rules) -> Atom | None:
    kind = node[0]
    if kind == "fn" and node[1] == "sqrt" and "sqrt" in rules.atoms:
        m = _int(node[2][0])
        if m is not None and m >= 2 and _squarefree(m):
            return ("sqrt", m)
    if kind == "const" and node[1] in rules.atoms:
        return node[1]
    return None


def _term(node: Node, rules: _Rules) -> tuple[Atom, Fraction] | None:
    """One atom times a coefficient: ``3``, ``\\sqrt{2}``, ``-2\\pi``, ``\\frac{1}{2}i``,
    ``\\frac{3\\sqrt{5}}{2}``, ``\\sqrt{2}/2``."""
    r = _rational(node, rules)
    if r is not None:
        return 1, r
    kind = node[0]
    if kind == "neg":
        if node[1][0] == "neg":
            return None
        t = _term(node[1], rules)
        return (t[0], -t[1]) if t is not None and t[1] else None
    atom = _atom(node, rules)
    if atom is not None:
        return atom, Fraction(1)
    if kind == "mul" and len(node[1]) == 2:
        coef, rest = node[1]
        atom, c = _atom(rest, rules), _rational(coef, rules)
        if atom is not None and c is not None and c > 0 and c != 1:
            return atom, c
        return None
    if kind == "div":
        q = _int(node[2])
        if q is None or q < 2:
            return None
        num, sign = node[1], 1
        if num[0] == "neg":
            num, sign = num[1], -1
        atom = _atom(num, rules)
        if atom is not None:
            return atom, Fraction(sign, q)
        if num[0] == "mul" and len(num[1]) == 2:
            k, atom = _int(num[1][0]), _atom(num[1][1], rules)
            if atom is not None and k is not None and k >= 2 and math.gcd(k, q) == 1:
                return atom, Fraction(sign * k, q)
    return None


def _combo(node: Node, rules: _Rules) -> dict[Atom, Fraction] | None:
    """The atoms and coefficients of a scalar written in simplest form, or None."""
    kind = node[0]
    if kind == "add":
        out: dict[Atom, Fraction] = {}
        for child in node[1]:
            t = _term(child, rules)
            if t is None or not t[1] or t[0] in out:
                return None  # an operation left, a zero term, or like terms not collected
            out[t[0]] = t[1]
        return out
    if kind == "pm":
        base = {} if node[1][0] == "num" and node[1][2] == 0 else _combo(node[1], rules)
        part = _combo(node[2], rules)
        if base is None or not part or any(_bare(k) in base for k in part):
            return None  # "1 \pm 2" is two numbers left to add
        return {**base, **{("pm", k): v for k, v in part.items()}}
    if kind == "div" and node[1][0] in ("add", "pm"):
        q, inner = _int(node[2]), _combo(node[1], rules)
        if q is None or q < 2 or not inner or any(c.denominator != 1 for c in inner.values()):
            return None
        if math.gcd(q, *(int(c) for c in inner.values())) != 1:
            return None  # \frac{2 + 2\sqrt{3}}{2} has a common factor left
        return {k: v / q for k, v in inner.items()}
    t = _term(node, rules)
    return None if t is None else {t[0]: t[1]}


def _bare(atom: Atom) -> Atom:
    while isinstance(atom, tuple) and atom[0] == "pm":
        atom = atom[1]
    return atom


def _mixed(node: Node) -> bool:
    """``2\\frac{1}{2}``: a whole number and a proper fraction in lowest terms."""
    if node[0] == "neg":
        node = node[1]
    if node[0] != "add" or len(node[1]) != 2:
        return False
    whole, frac = _int(node[1][0]), node[1][1]
    if whole is None or whole < 1 or frac[0] != "div":
        return False
    p, q = _int(frac[1]), _int(frac[2])
    return p is not None and q is not None and 0 < p < q and math.gcd(p, q) == 1


# ---------------------------------------------------------------------------------------------
# Expressions with symbols
# ---------------------------------------------------------------------------------------------


def _expression(node: Node) -> bool:
    """Symbols may stay; every part made of numbers alone is in the ``exact`` form, and the
    numbers of a sum or product are combined (``(1 + 2)x``, ``2 \\cdot 3x``, ``x + 1 + 2`` are
    not in form)."""
    return _expr(node)[1]


def _expr(node: Node) -> tuple[bool, bool]:
    """(has symbols, in form)."""
    kind = node[0]
    if kind == "sym":
        return True, True
    if kind in ("num", "const", "inf", "based"):
        return False, _combo(node, _EXACT) is not None or kind in ("inf", "based")
    children: list[Node] = []
    if kind in ("add", "mul"):
        children = list(node[1])
    elif kind in ("div", "pow"):
        children = [node[1], node[2]]
    elif kind in ("neg", "deg"):
        children = [node[1]]
    elif kind == "fn":
        children = list(node[2])
    elif kind == "pm":
        children = [node[2]] if node[1][0] == "num" and node[1][2] == 0 else [node[1], node[2]]
    else:
        return False, False
    parts = [_expr(c) for c in children]
    if not any(has for has, _ in parts):
        return False, _combo(node, _EXACT) is not None
    if kind == "neg" and node[1][0] == "neg":
        return True, False
    if kind in ("add", "mul"):
        consts = [c for c, (has, _) in zip(children, parts, strict=True) if not has]
        if consts:
            joined = consts[0] if len(consts) == 1 else (kind, tuple(consts))
            combo = _combo(joined, _EXACT)
            if combo is None or (kind == "mul" and combo in ({1: 1}, {1: 0})):
                return True, False  # 1x and 0x are not simplified either
            if kind == "add" and combo == {1: 0}:
                return True, False
        return True, all(ok for has, ok in parts if has)
    return True, all(ok for _, ok in parts)


def _polynomial(node: Node) -> bool:
    """An expanded polynomial: monomials ``c x^k y^j`` with number coefficients, each set of
    powers once."""
    terms = node[1] if node[0] == "add" else (node,)
    seen: set[frozenset[tuple[str, int]]] = set()
    for term in terms:
        mono = _monomial(term)
        if mono is None or mono[0] in seen or (not mono[1] and len(terms) > 1):
            return False
        seen.add(mono[0])
    return True


_NUMBER = _RULES["number"]


def _monomial(node: Node) -> tuple[frozenset[tuple[str, int]], Fraction] | None:
    r = _rational(node, _NUMBER)
    if r is not None:
        return frozenset(), r
    kind = node[0]
    if kind == "neg":
        if node[1][0] == "neg":
            return None
        mono = _monomial(node[1])
        return (mono[0], -mono[1]) if mono is not None else None
    if kind == "div":
        q = _int(node[2])
        mono = _monomial(node[1])
        if q is None or q < 2 or mono is None or not mono[0] or mono[1].denominator != 1:
            return None
        if math.gcd(int(mono[1]), q) != 1:
            return None
        return mono[0], mono[1] / q
    factors = node[1] if kind == "mul" else (node,)
    coef = Fraction(1)
    if factors and _rational(factors[0], _NUMBER) is not None and len(factors) > 1:
        coef = _rational(factors[0], _NUMBER)  # type: ignore[assignment]
        if coef <= 0 or coef == 1:
            return None
        factors = factors[1:]
    powers: dict[str, int] = {}
    for f in factors:
        if f[0] == "sym":
            name, k = f[1], 1
        elif f[0] == "pow" and f[1][0] == "sym" and (_int(f[2]) or 0) >= 2:
            name, k = f[1][1], _int(f[2]) or 0
        else:
            return None
        if name in powers:
            return None  # x \cdot x is x^2
        powers[name] = k
    return frozenset(powers.items()), coef
