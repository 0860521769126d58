"""Numeric evaluation of parse trees with mpmath (imported lazily, one private context per
thread): the second tier of comparison, for constants that have no exact value (``\\pi``,
``\\sqrt{2}``). Deciding equality from the numbers is :mod:`~llmgym.rewards.math.evaluate`'s job.
"""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.exact import exact
from llmgym.rewards.math.limits import HasSymbols, NotExact, NotScalar, TooBig, Undefined, tick
from llmgym.rewards.math.nodes import Node

MAX_LOG2_MAGNITUDE = 1 << 40
"""Numeric values with |log2(x)| beyond this are "too big": compared by structure only."""


_local = threading.local()


def mpmath_context() -> Any:
    """This thread's own mpmath context (precision is per context; mpmath is imported here)."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        import mpmath

        ctx = mpmath.MPContext()
        _local.ctx = ctx
    return ctx


def log2abs(ctx: Any, x: Any) -> Any:
    """log2 |x|, and -inf for 0."""
    return ctx.log(abs(x), 2) if x != 0 else -ctx.inf


def _guard(ctx: Any, x: Any) -> Any:
    if ctx.isnan(x):
        raise Undefined
    if ctx.isinf(x):
        raise TooBig
    if x != 0 and abs(log2abs(ctx, x)) > MAX_LOG2_MAGNITUDE:
        raise TooBig
    return x


def _npow(ctx: Any, base: Any, exp: Any, exact_exp: Fraction | None) -> Any:
    if base == 0:
        if exp == 0:
            return ctx.mpf(1)
        if ctx.re(exp) < 0:
            raise Undefined
        return ctx.mpf(0)
    size = ctx.re(exp * ctx.log(base)) / ctx.ln2
    if abs(size) > MAX_LOG2_MAGNITUDE:
        raise TooBig
    if exact_exp is not None and exact_exp.denominator % 2 == 1 and ctx.im(base) == 0:
        b = ctx.re(base)
        if b < 0:  # real odd root convention: (-8)^(1/3) = -2
            mag = ctx.power(-b, ctx.mpf(exact_exp.numerator) / exact_exp.denominator)
            return -mag if exact_exp.numerator % 2 else mag
    return ctx.power(base, exp)


def _try_exact_fraction(node: Node) -> Fraction | None:
    try:
        v = exact(node)
    except (NotExact, TooBig, Undefined, NotScalar, HasSymbols, ZeroDivisionError):
        return None
    return v if isinstance(v, Fraction) else None


_TRIG = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "sec": "sec",
    "csc": "csc",
    "cot": "cot",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsec": "asec",
    "arccsc": "acsc",
    "arccot": "acot",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
}


def numeric(node: Node, env: dict[str, Any] | None = None) -> Any:
    """The value of a scalar node as an mpmath number at the current thread's precision."""
    tick()
    ctx = mpmath_context()
    kind = node[0]
    if kind == "num":
        q: Fraction = node[1]
        return ctx.mpf(q.numerator) / q.denominator if q.denominator != 1 else ctx.mpf(q.numerator)
    if kind == "add":
        return _guard(ctx, ctx.fsum(numeric(t, env) for t in node[1]))
    if kind == "mul":
        prod = ctx.mpf(1)
        for f in node[1]:
            prod = _guard(ctx, prod * numeric(f, env))
        return prod
    if kind == "div":
        den = numeric(node[2], env)
        if den == 0:
            raise Undefined
        return _guard(ctx, numeric(node[1], env) / den)
    if kind == "neg":
        return -numeric(node[1], env)
    if kind == "pow":
        exp_node = node[2]
        exp = numeric(exp_node, env)
        if node[1] == ("const", "e"):
            if abs(ctx.re(exp)) > MAX_LOG2_MAGNITUDE:
                raise TooBig
            return _guard(ctx, ctx.exp(exp))
        exact_exp = _try_exact_fraction(exp_node)
        return _guard(ctx, _npow(ctx, numeric(node[1], env), exp, exact_exp))
    if kind == "sym":
        if env is None or node[1] not in env:
            raise HasSymbols
        return env[node[1]]
    if kind == "const":
        return {"pi": ctx.pi, "e": ctx.e, "i": ctx.mpc(0, 1)}[node[1]]
    if kind == "based":
        try:
            return ctx.mpf(int(node[1], node[2]))
        except ValueError:
            raise Undefined from None
    if kind == "fn":
        return _guard(ctx, _numeric_fn(ctx, node, env))
    raise NotScalar


def _numeric_fn(ctx: Any, node: Node, env: dict[str, Any] | None) -> Any:
    name = node[1]
    args = [numeric(a, env) for a in node[2]]
    x = args[-1]
    try:
        if name == "sqrt":
            return ctx.sqrt(x)
        if name == "root":
            exact_n = _try_exact_fraction(node[2][0])
            if args[0] == 0:
                raise Undefined
            return _npow(ctx, x, 1 / args[0], (1 / exact_n) if exact_n else None)
        if name in _TRIG:
            if abs(x) > 2**64:
                raise TooBig
            return getattr(ctx, _TRIG[name])(x)
        if name in ("ln", "log"):
            if x == 0:
                raise Undefined
            return ctx.ln(x)
        if name == "logb":
            if x == 0 or args[0] == 0 or args[0] == 1:
                raise Undefined
            return ctx.ln(x) / ctx.ln(args[0])
        if name == "abs":
            return abs(x)
        if name in ("floor", "ceil"):
            return getattr(ctx, name)(x)
        if name in ("fact", "fact2"):
            if ctx.re(x) > 1e15:
                raise TooBig
            if ctx.isint(x) and x < 0:
                raise Undefined
            return ctx.factorial(x) if name == "fact" else ctx.fac2(x)
        if name == "binom":
            if abs(args[0]) > 1e15:
                raise TooBig
            return ctx.binomial(args[0], args[1])
        if name in ("max", "min"):
            if any(ctx.im(a) != 0 for a in args):
                raise Undefined
            return max(args) if name == "max" else min(args)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise Undefined from None
    raise NotExact  # gcd/lcm of non-integers
