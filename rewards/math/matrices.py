"""Matrix arithmetic in answers: sums, products, scalar multiples and small powers of matrices
worked out entry by entry (entries stay expressions), within size bounds. Comparing matrices
is :mod:`~llmgym.rewards.math.values`' job.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from llmgym.rewards.math.exact import exact
from llmgym.rewards.math.limits import NotScalar
from llmgym.rewards.math.nodes import Node, contains_kind

MAX_MATRIX_DIM = 12
MAX_MATRIX_POWER = 16
MAX_MATRIX_NODES = 20_000
"""Matrix arithmetic whose symbolic entries grow past this many nodes (as trees: products of
products share their parts in memory, not when evaluated) is not done."""


def _checked(m: Node) -> Node:
    count, stack = 0, [m]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            count += 1
            if count > MAX_MATRIX_NODES:
                raise NotScalar  # too large to work out: not compared
            stack.extend(c for c in n if isinstance(c, tuple))
    return m


def _entry(node: Node) -> Node:
    """A matrix entry, folded to a number when it is one (keeps products of products small)."""
    try:
        value = exact(node)
    except Exception:  # symbolic or irrational: kept as an expression
        return node
    return ("num", value, 0) if isinstance(value, Fraction) else node


def _matmul(a: Node, b: Node) -> Node:
    ra, rb = a[1], b[1]
    if len(ra[0]) != len(rb):
        raise NotScalar  # shapes that do not multiply
    cols = range(len(rb[0]))
    return _checked(
        (
            "matrix",
            tuple(
                tuple(
                    _entry(("add", tuple(("mul", (row[k], rb[k][j])) for k in range(len(rb)))))
                    for j in cols
                )
                for row in ra
            ),
        )
    )


def _entrywise(m: Node, fn: Callable[[Node], Node]) -> Node:
    return _checked(("matrix", tuple(tuple(_entry(fn(x)) for x in row) for row in m[1])))


def _scaled(m: Node, c: Node, *, matrix_first: bool) -> Node:
    """``m`` times the scalar ``c`` (in the order written)."""

    def times(x: Node) -> Node:
        return ("mul", (x, c) if matrix_first else (c, x))

    return _entrywise(m, times)


def matrix_arith(node: Node) -> Node:
    """Sums, products, scalar multiples and small powers of matrices, done (entries stay
    expressions): the matrix it equals, or a scalar node; NotScalar when shapes disagree."""
    kind = node[0]
    if kind == "matrix":
        rows = node[1]
        if len(rows) > MAX_MATRIX_DIM or len(rows[0]) > MAX_MATRIX_DIM:
            raise NotScalar
        return node
    if not contains_kind(node, {"matrix"}):
        return node
    if kind == "neg":
        inner = matrix_arith(node[1])
        return _entrywise(inner, lambda x: ("neg", x))
    if kind == "add":
        terms = [matrix_arith(t) for t in node[1]]
        if any(t[0] != "matrix" for t in terms):
            raise NotScalar  # a matrix plus a number
        shape = (len(terms[0][1]), len(terms[0][1][0]))
        if any((len(t[1]), len(t[1][0])) != shape for t in terms):
            raise NotScalar
        return (
            "matrix",
            tuple(
                tuple(_entry(("add", tuple(t[1][i][j] for t in terms))) for j in range(shape[1]))
                for i in range(shape[0])
            ),
        )
    if kind == "mul":
        acc = matrix_arith(node[1][0])
        for factor in node[1][1:]:
            f = matrix_arith(factor)
            if acc[0] == "matrix" and f[0] == "matrix":
                acc = _matmul(acc, f)
            elif acc[0] == "matrix":
                acc = _scaled(acc, f, matrix_first=True)
            elif f[0] == "matrix":
                acc = _scaled(f, acc, matrix_first=False)
            else:
                acc = ("mul", (acc, f))
        return acc
    if kind == "div":
        num, den = matrix_arith(node[1]), matrix_arith(node[2])
        if num[0] != "matrix" or den[0] == "matrix":
            raise NotScalar
        return _entrywise(num, lambda x: ("div", x, den))
    if kind == "pow":
        base = matrix_arith(node[1])
        try:
            k = exact(node[2])
        except Exception:  # a symbolic power of a matrix
            raise NotScalar from None
        if base[0] != "matrix" or not isinstance(k, Fraction) or k.denominator != 1:
            raise NotScalar
        if not 1 <= k <= MAX_MATRIX_POWER or len(base[1]) != len(base[1][0]):
            raise NotScalar
        result = base
        for _ in range(int(k) - 1):
            result = _matmul(result, base)
        return result
    raise NotScalar
