"""Sets of real numbers as sorted, disjoint intervals: intervals, unions, complements and
intersections, linear inequalities solved exactly, and equality of two such sets. Reading an
answer into one is :func:`to_realset`; nonlinear relations go to sympy (see
:mod:`~llmgym.rewards.math.values`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from llmgym.rewards.math.evaluate import Options, real_key, scalar_eq
from llmgym.rewards.math.exact import exact
from llmgym.rewards.math.limits import HasSymbols, NotExact, NotScalar, TooBig, Undefined
from llmgym.rewards.math.nodes import Node
from llmgym.rewards.math.numeric import mpmath_context

if TYPE_CHECKING:
    from llmgym.rewards.math.values import Value

Interval = tuple[Any, Node, bool, Any, Node, bool]  # lo_key, lo, lo_closed, hi_key, hi, hi_closed

POS_INF: Node = ("inf", 1)
NEG_INF: Node = ("inf", -1)
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}


def interval(lo: Node, lo_closed: bool, hi: Node, hi_closed: bool) -> Interval:
    """One interval with its ends' sort keys; a closed bracket at infinity reads as open."""
    lo_key, hi_key = real_key(lo), real_key(hi)
    ctx = mpmath_context()
    # a closed bracket at infinity ("[2, \infty]") is read as open
    if lo_key == -ctx.inf:
        lo_closed = False
    if hi_key == ctx.inf:
        hi_closed = False
    return (lo_key, lo, lo_closed, hi_key, hi, hi_closed)


def normalize_realset(intervals: list[Interval]) -> tuple[Interval, ...]:
    """Sorted, disjoint, non-empty intervals (overlapping or touching ones merged)."""
    live = [iv for iv in intervals if iv[0] < iv[3] or (iv[0] == iv[3] and iv[2] and iv[5])]
    live.sort(key=lambda iv: (iv[0], not iv[2]))
    out: list[Interval] = []
    for iv in live:
        if out:
            cur = out[-1]
            touches = iv[0] < cur[3] or (iv[0] == cur[3] and (cur[5] or iv[2]))
            if touches:
                if iv[3] > cur[3] or (iv[3] == cur[3] and iv[5] and not cur[5]):
                    out[-1] = (cur[0], cur[1], cur[2], iv[3], iv[4], iv[5])
                continue
        out.append(iv)
    return tuple(out)


def complement(ivs: tuple[Interval, ...]) -> tuple[Interval, ...]:
    """The reals outside a normalised set of reals."""
    ctx = mpmath_context()
    out: list[Interval] = []
    lo_key, lo, lo_closed = -ctx.inf, NEG_INF, False
    for iv in ivs:
        out.append((lo_key, lo, lo_closed, iv[0], iv[1], not iv[2]))
        lo_key, lo, lo_closed = iv[3], iv[4], not iv[5]
    out.append((lo_key, lo, lo_closed, ctx.inf, POS_INF, False))
    return normalize_realset(out)


def intersect(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> tuple[Interval, ...]:
    """The reals in both sets."""
    out: list[Interval] = []
    for x in a:
        for y in b:
            lo = x if (x[0] > y[0] or (x[0] == y[0] and not x[2])) else y
            hi = x if (x[3] < y[3] or (x[3] == y[3] and not x[5])) else y
            out.append((lo[0], lo[1], lo[2], hi[3], hi[4], hi[5]))
    return normalize_realset(out)


def to_realset(v: Value) -> tuple[Interval, ...] | None:
    """The value as a set of reals, or None (an ordered pair of non-reals, symbols...)."""
    try:
        kind = v[0]
        if kind == "I":
            return v[1]  # type: ignore[no-any-return]
        if kind == "A":
            return to_realset(v[2])
        if kind == "T" and len(v[3]) == 2 and all(x[0] == "S" for x in v[3]):
            lo, hi = v[3][0][1], v[3][1][1]
            iv = interval(lo, v[1] == "[", hi, v[2] == "]")
            if not iv[0] < iv[3]:
                return None
            return (iv,)
        if kind in ("F", "L") and all(x[0] == "S" for x in v[1]):
            return normalize_realset([interval(x[1], True, x[1], True) for x in v[1]])
        if kind == "S":
            return normalize_realset([interval(v[1], True, v[1], True)])
    except (HasSymbols, NotExact, Undefined, TooBig, NotScalar, ValueError, ArithmeticError):
        return None
    return None


_LINEAR_POINTS = (Fraction(0), Fraction(1), Fraction(-2), Fraction(7, 3), Fraction(-13, 5))


def _linear(expr: Node, var: str) -> tuple[Fraction, Fraction] | None:
    """(slope, intercept) if ``expr`` is linear in ``var`` with rational coefficients."""
    try:
        values = [exact(expr, {var: x}) for x in _LINEAR_POINTS]
    except (NotExact, TooBig, Undefined, NotScalar, HasSymbols, ZeroDivisionError):
        return None
    if not all(isinstance(x, Fraction) for x in values):
        return None
    v0, v1 = values[0], values[1]
    slope = v1 - v0
    if any(v != v0 + slope * x for v, x in zip(values, _LINEAR_POINTS, strict=True)):
        return None
    return slope, v0  # type: ignore[return-value]


def _half_line(op: str, point: Fraction) -> tuple[Interval, ...]:
    """{x : x op point}."""
    p: Node = ("num", point, 0)
    if op == "=":
        return normalize_realset([interval(p, True, p, True)])
    if op == "!=":
        return complement(normalize_realset([interval(p, True, p, True)]))
    if op in ("<", "<="):
        return normalize_realset([interval(NEG_INF, False, p, op == "<=")])
    return normalize_realset([interval(p, op == ">=", POS_INF, False)])


def solve_linear_chain(
    exprs: tuple[Node, ...], ops: tuple[str, ...], var: str
) -> tuple[Interval, ...] | None:
    """Solve ``e0 op1 e1 op2 e2 ...`` for ``var`` when every link is linear; else None."""
    ctx = mpmath_context()
    result: tuple[Interval, ...] = ((-ctx.inf, NEG_INF, False, ctx.inf, POS_INF, False),)
    for left, op, right in zip(exprs, ops, exprs[1:], strict=False):
        if op not in _FLIP:
            return None
        if left[0] == "inf" or right[0] == "inf" or (left[0] == "neg" and left[1][0] == "inf"):
            continue  # -oo < x: no constraint
        lin = _linear(("add", (left, ("neg", right))), var)
        if lin is None:
            return None
        slope, intercept = lin
        if slope == 0:
            holds = {
                "<": intercept < 0,
                "<=": intercept <= 0,
                ">": intercept > 0,
                ">=": intercept >= 0,
                "=": intercept == 0,
                "!=": intercept != 0,
            }[op]
            if not holds:
                return ()
            continue
        # slope * x + intercept op 0  <=>  x op' -intercept / slope
        link_op = op if slope > 0 else _FLIP[op]
        result = intersect(result, _half_line(link_op, -intercept / slope))
    return result


def realset_eq(a: tuple[Interval, ...], b: tuple[Interval, ...], opts: Options) -> bool:
    """Whether two normalised sets of reals are equal: the same brackets, equal ends."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=False):
        if x[2] != y[2] or x[5] != y[5]:
            return False
        if not (scalar_eq(x[1], y[1], opts) and scalar_eq(x[4], y[4], opts)):
            return False
    return True
