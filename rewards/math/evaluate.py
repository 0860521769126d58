"""Whether two scalar expressions are equal: exact rationals first, then high-precision
numerics, then (rarely) sympy in a worker process. The arithmetic of each tier is in
:mod:`~llmgym.rewards.math.exact`, :mod:`~llmgym.rewards.math.numeric` and
:mod:`~llmgym.rewards.math.modular`; containers (tuples, sets, intervals) are compared by
:mod:`~llmgym.rewards.math.values`.

Scalars are compared in three tiers:

1. exact: both sides evaluate in exact rational (or Gaussian-rational) arithmetic with bounded
   sizes: ``0.5 == 1/2``, ``3+2i == 2i+3``, ``\\sqrt{16} == 4``; ``0.333 != 1/3``;
2. numeric: constants evaluate with mpmath at 50+ significant digits (more when literals are
   long), so ``2\\sqrt{2} == \\sqrt{8}`` but ``3.14 != \\pi`` and ``1.4142135623 != \\sqrt{2}``;
3. identity testing: expressions with variables are evaluated at several pseudo-random
   points (exact rationals when the expressions are rational functions, where agreement at
   random points proves equality with overwhelming probability, else mpmath), and only when
   that is inconclusive does sympy run, in a worker process under a real timeout. Large
   rational expressions (a polynomial of degree 500 written out) are evaluated modulo a
   pseudo-random 127-bit prime instead: linear time, and exact, so one changed coefficient
   shows (see :func:`~llmgym.rewards.math.modular.modular_eq`).

In-process evaluation stops when the deadline of :func:`~llmgym.rewards.math.limits.time_limit`
passes (the caller's ``timeout_s``): what is left is then compared by structure, so a hostile
answer costs bounded time, not minutes.

Numbers too large to evaluate (``10^{10^{10}}``, ``9^{9^{9^9}}``) are compared by structure
after folding every sub-expression that can be evaluated, or by logarithm.
"""

from __future__ import annotations

import itertools
import math
import random
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.exact import Exact, exact, re_im
from llmgym.rewards.math.limits import (
    HasSymbols,
    NotExact,
    NotScalar,
    OutOfTime,
    TooBig,
    Undefined,
    tick,
)
from llmgym.rewards.math.modular import MODULAR_MIN_NODES, modular_eq
from llmgym.rewards.math.nodes import Node, literal_digits, subnodes, symbols
from llmgym.rewards.math.numeric import log2abs, mpmath_context, numeric

_SAMPLES = 5


@dataclass(frozen=True)
class Options:
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    timeout_s: float = 2.0
    deadline: float = math.inf
    """``time.monotonic()`` after which no more symbolic work starts."""
    lists_as_tuples: bool = False
    """A bare list or a set, read in the order written, equals a tuple (``(1, 3) == {1,3}``)."""

    @property
    def tolerant(self) -> bool:
        return self.rel_tol > 0 or self.abs_tol > 0


def _close_exact(a: Exact, b: Exact, opts: Options) -> bool:
    if a == b:
        return True
    if not opts.tolerant:
        return False
    (ar, ai), (br, bi) = re_im(a), re_im(b)
    diff = math.hypot(float(ar - br), float(ai - bi))
    scale = max(math.hypot(float(ar), float(ai)), math.hypot(float(br), float(bi)))
    return diff <= max(opts.rel_tol * scale, opts.abs_tol)


def _close_numeric(ctx: Any, a: Any, b: Any, opts: Options, eps: Any) -> bool:
    diff = abs(a - b)
    scale = max(abs(a), abs(b))
    if diff <= eps * scale or diff <= eps:
        return True
    if opts.tolerant:
        return bool(diff <= max(opts.rel_tol * scale, opts.abs_tol))
    return False


def _signed_inf(node: Node) -> int | None:
    if node[0] == "inf":
        return int(node[1])
    if node[0] == "neg" and node[1][0] == "inf":
        return -int(node[1][1])
    return None


def fold(node: Node) -> Node:
    """``node`` with every sub-expression that evaluates exactly (and small) replaced by its
    value, and sums/products sorted: a canonical form for values too large to evaluate."""
    kind = node[0]
    if kind in ("num", "sym", "const", "inf", "based"):
        return node
    if kind in ("add", "mul", "div", "neg", "pow", "fn"):
        try:
            v = exact(node)
            if isinstance(v, Fraction):
                return ("num", v, 0)
        except (NotExact, TooBig, Undefined, NotScalar, HasSymbols, ZeroDivisionError):
            pass
    if kind in ("add", "mul"):
        return (kind, tuple(sorted((fold(c) for c in node[1]), key=repr)))
    if kind in ("div", "neg", "pow"):
        return (kind, *(fold(c) for c in node[1:]))
    if kind == "fn":
        return ("fn", node[1], tuple(fold(a) for a in node[2]))
    return node


def _log_value(ctx: Any, node: Node) -> Any:
    """log(x) of a positive node built from products and powers, for numbers too big to hold."""
    kind = node[0]
    if kind == "pow":
        return numeric(node[2]) * _log_value(ctx, node[1])
    if kind == "mul":
        return ctx.fsum(_log_value(ctx, f) for f in node[1])
    if kind == "div":
        return _log_value(ctx, node[1]) - _log_value(ctx, node[2])
    if kind == "fn" and node[1] == "fact":
        return ctx.loggamma(numeric(node[2][0]) + 1)
    if kind not in ("num", "const", "fn"):
        raise NotExact  # a sum of huge numbers: its logarithm cannot separate +1
    v = numeric(node)
    if ctx.im(v) != 0 or v <= 0:
        raise NotExact
    return ctx.ln(v)


_SymbolicFallback = Callable[[Node, Node, Options], bool | None]
_symbolic_fallback: list[_SymbolicFallback] = []


def set_symbolic_fallback(fn: _SymbolicFallback) -> None:
    """Install the function consulted when sampling is inconclusive (the sympy worker)."""
    _symbolic_fallback[:] = [fn]


def _precision(a: Node, b: Node) -> int:
    return min(1000, max(50, 2 * max(literal_digits(a), literal_digits(b)) + 30))


def _large(a: Node, b: Node) -> bool:
    nodes = subnodes(("pair", a, b))
    return next(itertools.islice(nodes, MODULAR_MIN_NODES, None), None) is not None


def scalar_eq(a: Node, b: Node, opts: Options) -> bool:
    """Whether two scalar expressions are equal (see the module docstring for the tiers).

    >>> from llmgym.rewards.math.parser import parse
    >>> eq = lambda x, y: scalar_eq(parse(x), parse(y), Options())
    >>> eq(r"2\\sqrt{2}", r"\\sqrt{8}"), eq("3.14", r"\\pi"), eq("x^2-1", "(x-1)(x+1)")
    (True, False, True)
    """
    if a == b:
        return True
    ia, ib = _signed_inf(a), _signed_inf(b)
    if ia is not None or ib is not None:
        return ia == ib
    syms = symbols(a) | symbols(b)
    if not opts.tolerant and _large(a, b):
        verdict = modular_eq(a, b, sorted(syms))
        if verdict is not None:
            return verdict
    if syms:
        return _identity_eq(a, b, sorted(syms), opts)
    too_big = False
    try:
        ea, eb = exact(a), exact(b)
        return _close_exact(ea, eb, opts)
    except (NotExact, Undefined):
        pass
    except TooBig:
        verdict = None if opts.tolerant else modular_eq(a, b, [])
        if verdict is not None:
            return verdict
        too_big = True
    except NotScalar:
        return False
    except (ZeroDivisionError, ValueError, ArithmeticError):
        return False
    ctx = mpmath_context()
    dps = _precision(a, b)
    try:
        with ctx.workdps(dps):
            va, vb = numeric(a), numeric(b)
            magnitude = max(log2abs(ctx, va), log2abs(ctx, vb)) * 0.30103
            if too_big or magnitude > dps - 20:
                # a difference of 1 in a number this large is below the precision: decide
                # by structure or logarithm, never by a rounded difference
                if magnitude > 900 or opts.tolerant:
                    return (
                        _close_numeric(ctx, va, vb, opts, ctx.mpf(0))
                        if opts.tolerant
                        else _big_eq(a, b)
                    )
                with ctx.workdps(int(magnitude) + 60):
                    va, vb = numeric(a), numeric(b)
                    return _close_numeric(ctx, va, vb, opts, ctx.mpf(10) ** (-50 - int(magnitude)))
            return _close_numeric(ctx, va, vb, opts, ctx.mpf(10) ** (10 - dps))
    except (Undefined, NotExact):
        return False
    except (TooBig, NotScalar):
        return _big_eq(a, b)
    except (ZeroDivisionError, ValueError, ArithmeticError):
        return False


def _big_eq(a: Node, b: Node) -> bool:
    fa, fb = fold(a), fold(b)
    if fa == fb:
        return True
    ctx = mpmath_context()
    try:
        with ctx.workdps(60):
            la, lb = _log_value(ctx, fa), _log_value(ctx, fb)
            return bool(abs(la - lb) <= ctx.mpf(10) ** -50 * max(abs(la), abs(lb), 1))
    except Exception:  # too big even for logarithms: distinct structures are unequal
        return False


def _sample_points(names: list[str], a: Node, b: Node) -> list[dict[str, Fraction]]:
    seed = zlib.crc32(repr((a, b)).encode("utf-8", "replace"))
    rng = random.Random(seed)
    primes = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]
    points = []
    for k in range(_SAMPLES):
        point: dict[str, Fraction] = {}
        for name in names:
            value = Fraction(rng.randint(2, 60), rng.choice(primes)) + Fraction(
                rng.randint(1, 9), 97
            )
            point[name] = value if (k + len(point)) % 3 else -value
        points.append(point)
    return points


def _identity_eq(a: Node, b: Node, names: list[str], opts: Options) -> bool:
    """Polynomial/rational identity testing at random points, exact when possible."""
    points = _sample_points(names, a, b)
    agreed = 0
    numeric_needed = False
    for point in points:
        try:
            va, vb = exact(a, point), exact(b, point)  # type: ignore[arg-type]
        except (Undefined, ZeroDivisionError):
            continue
        except TooBig:
            # x^{7000}: rationals too long to hold, and numerics would lose a changed term
            verdict = None if opts.tolerant else modular_eq(a, b, names)
            if verdict is not None:
                return verdict
            numeric_needed = True
            break
        except (NotExact, NotScalar):
            numeric_needed = True
            break
        if not _close_exact(va, vb, opts):
            return False
        agreed += 1
    if not numeric_needed:
        if agreed >= 3:
            return True
        return _fallback(a, b, opts)
    ctx = mpmath_context()
    agreed = 0
    with ctx.workdps(40):
        eps = ctx.mpf(10) ** -30
        for point in points:
            env = {k: ctx.mpf(v.numerator) / v.denominator for k, v in point.items()}
            try:
                va, vb = numeric(a, env), numeric(b, env)
            except (Undefined, ZeroDivisionError, ValueError, ArithmeticError):
                continue
            except (TooBig, NotExact, NotScalar):
                return _fallback(a, b, opts)
            if not _close_numeric(ctx, va, vb, opts, eps):
                return False
            agreed += 1
    if agreed >= 3:
        return True
    return _fallback(a, b, opts)


def _has_big_constant(node: Node) -> bool:
    """Whether a variable-free part of ``node`` is too large to evaluate (sympy would try)."""
    tick()
    if node[0] in ("num", "sym", "const", "inf", "based"):
        return False
    if not symbols(node):
        try:
            exact(node)
        except TooBig:
            return True
        except NotExact:
            try:
                with mpmath_context().workdps(15):
                    numeric(node)
            except TooBig:
                return True
            except Exception:
                return False
            return False
        except Exception:
            return False
        return False
    children = [c for c in node[1:] if isinstance(c, tuple) and c]
    flat: list[Node] = []
    for c in children:
        if isinstance(c[0], str):
            flat.append(c)
        else:
            flat.extend(x for x in c if isinstance(x, tuple) and x and isinstance(x[0], str))
    return any(_has_big_constant(c) for c in flat)


def _fallback(a: Node, b: Node, opts: Options) -> bool:
    if fold(a) == fold(b):
        return True
    try:
        if _has_big_constant(a) or _has_big_constant(b):
            return False
    except OutOfTime:
        return False
    if _symbolic_fallback:
        verdict = _symbolic_fallback[0](a, b, opts)
        return bool(verdict)
    return False


def equations_equivalent(l1: Node, r1: Node, l2: Node, r2: Node, opts: Options) -> bool:
    """``l1 = r1`` and ``l2 = r2`` are the same equation: l1 - r1 = c (l2 - r2), c != 0."""
    d1: Node = ("add", (l1, ("neg", r1)))
    d2: Node = ("add", (l2, ("neg", r2)))
    names = sorted(symbols(d1) | symbols(d2))
    if not names:
        return False
    ratio: Any = None
    agreed = 0
    ctx = mpmath_context()
    with ctx.workdps(40):
        eps = ctx.mpf(10) ** -30
        for point in _sample_points(names, d1, d2):
            env = {k: ctx.mpf(v.numerator) / v.denominator for k, v in point.items()}
            try:
                v1, v2 = numeric(d1, env), numeric(d2, env)
            except (Undefined, ZeroDivisionError, ValueError, ArithmeticError):
                continue
            except (TooBig, NotExact, NotScalar):
                return False
            if abs(v1) <= eps and abs(v2) <= eps:
                continue
            if abs(v1) <= eps or abs(v2) <= eps:
                return False
            r = v1 / v2
            if ratio is None:
                ratio = r
            elif abs(r - ratio) > eps * max(1, abs(ratio)):
                return False
            agreed += 1
    return agreed >= 3


def real_key(node: Node) -> Any:
    """A sortable real value for an interval endpoint (mpmath number or +-inf); raises if not
    real or not evaluable."""
    ctx = mpmath_context()
    s = _signed_inf(node)
    if s is not None:
        return ctx.inf if s > 0 else -ctx.inf
    if symbols(node):
        raise HasSymbols
    with ctx.workdps(50):
        v = numeric(node)
    if ctx.im(v) != 0:
        raise NotExact
    return ctx.re(v)


def all_pairs_match(xs: Iterable[Any], ys: Iterable[Any], eq: Callable[[Any, Any], bool]) -> bool:
    """Every x equals some y and every y equals some x (set equality under ``eq``)."""
    xs, ys = list(xs), list(ys)
    return all(any(eq(x, y) for y in ys) for x in xs) and all(any(eq(x, y) for x in xs) for y in ys)
