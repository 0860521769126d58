"""Evaluate and compare parsed answers: exact rationals first, then high-precision numerics,
then (rarely) sympy in a worker process.

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
   shows (see :func:`modular_eq`).

In-process evaluation stops when the deadline of :func:`time_limit` passes (the caller's
``timeout_s``): what is left is then compared by structure, so a hostile answer costs bounded
time, not minutes.

Numbers too large to evaluate (``10^{10^{10}}``, ``9^{9^{9^9}}``) are compared by structure
after folding every sub-expression that can be evaluated, or by logarithm.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llmgym.rewards._math_parse import Node

MAX_BITS = 1 << 17
"""Exact rationals larger than this (numerator plus denominator bits) switch to numerics."""
MAX_FACTORIAL = 2000
MAX_LOG2_MAGNITUDE = 1 << 40
"""Numeric values with |log2(x)| beyond this are "too big": compared by structure only."""
_SAMPLES = 5


class NotExact(Exception):
    """The value is not a rational (or Gaussian rational) we can compute exactly."""


class TooBig(Exception):
    """The value is too large to compute."""


class Undefined(Exception):
    """Division by zero, log of zero, and the like."""


class NotScalar(Exception):
    """The node is not a number (a set, an interval, infinity...)."""


class HasSymbols(Exception):
    """The node has free variables and no values were given."""


class OutOfTime(TooBig):
    """The deadline of :func:`time_limit` passed during evaluation. A kind of :class:`TooBig`:
    every caller then stops evaluating and compares what is left by structure."""


_work = threading.local()
_ticks = 0
_expired_somewhere = False


@contextlib.contextmanager
def time_limit(deadline: float) -> Iterator[None]:
    """Bound the in-process evaluation of this thread: past ``deadline`` (a
    ``time.monotonic()`` value) :func:`exact` and :func:`numeric` raise :class:`OutOfTime`."""
    saved = getattr(_work, "deadline", math.inf), getattr(_work, "expired", False)
    _work.deadline, _work.expired = deadline, False
    try:
        yield
    finally:
        _work.deadline, _work.expired = saved


def _tick() -> None:
    """Count a step of evaluation; every 256 steps, look at the clock."""
    global _ticks, _expired_somewhere
    _ticks += 1
    if _expired_somewhere and getattr(_work, "expired", False):
        raise OutOfTime
    if not _ticks & 255:
        _check_time()


def _check_time() -> None:
    global _expired_somewhere
    if time.monotonic() > getattr(_work, "deadline", math.inf):
        _work.expired = _expired_somewhere = True
        raise OutOfTime


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


# ---------------------------------------------------------------------------------------------
# Exact arithmetic: Fraction, or GaussQ for complex rationals
# ---------------------------------------------------------------------------------------------


class GaussQ:
    """A complex number with rational parts."""

    __slots__ = ("re", "im")

    def __init__(self, re: Fraction, im: Fraction) -> None:
        self.re = re
        self.im = im

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GaussQ):
            return self.re == other.re and self.im == other.im
        return False

    def __hash__(self) -> int:
        return hash((self.re, self.im))

    def __repr__(self) -> str:
        return f"GaussQ({self.re}, {self.im})"


Exact = Fraction | GaussQ


def _parts(x: Exact) -> tuple[Fraction, Fraction]:
    return (x.re, x.im) if isinstance(x, GaussQ) else (x, Fraction(0))


def _mk(re: Fraction, im: Fraction) -> Exact:
    return re if im == 0 else GaussQ(re, im)


def _check(x: Exact) -> Exact:
    for part in _parts(x):
        bits = part.numerator.bit_length() + part.denominator.bit_length()
        if bits > MAX_BITS:
            raise TooBig
        if bits > 8192:
            _check_time()  # arithmetic on numbers this long is slow: look at the clock
    return x


def _add(a: Exact, b: Exact) -> Exact:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check(a + b)
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    return _check(_mk(ar + br, ai + bi))


def _mul2(a: Exact, b: Exact) -> Exact:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check(a * b)
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    return _check(_mk(ar * br - ai * bi, ar * bi + ai * br))


def _inv(a: Exact) -> Exact:
    if isinstance(a, Fraction):
        if a == 0:
            raise Undefined
        return 1 / a
    d = a.re * a.re + a.im * a.im
    return _check(_mk(a.re / d, -a.im / d))


def _neg(a: Exact) -> Exact:
    return -a if isinstance(a, Fraction) else GaussQ(-a.re, -a.im)


def _bits(x: Exact) -> int:
    return max(max(p.numerator.bit_length(), p.denominator.bit_length()) for p in _parts(x))


def _ipow(a: Exact, k: int) -> Exact:
    if k < 0:
        return _inv(_ipow(a, -k))
    if isinstance(a, Fraction):
        if a in (0, 1, -1):
            return a**k
        if k * _bits(a) > MAX_BITS:
            raise TooBig
        return a**k
    if k * (_bits(a) + 1) > MAX_BITS:
        raise TooBig
    result: Exact = Fraction(1)
    base: Exact = a
    while k:
        if k & 1:
            result = _mul2(result, base)
        k >>= 1
        if k:
            base = _mul2(base, base)
    return result


def _iroot(n: int, q: int) -> int | None:
    """The exact integer q-th root of n >= 0, or None."""
    if n < 2:
        return n
    if q == 2:
        r = math.isqrt(n)
        return r if r * r == n else None
    if n.bit_length() < 1000:
        r = round(n ** (1.0 / q))
    else:
        r = 1 << -(-n.bit_length() // q)  # Newton from above
        while True:
            s = ((q - 1) * r + n // r ** (q - 1)) // q
            if s >= r:
                break
            r = s
    for c in (r - 1, r, r + 1):
        if c >= 0 and c**q == n:
            return c
    return None


def _rational_root(x: Fraction, q: int) -> Fraction:
    if q > 64:
        raise NotExact
    n, d = _iroot(x.numerator, q), _iroot(x.denominator, q)
    if n is None or d is None:
        raise NotExact
    return Fraction(n, d)


def _pow(base: Exact, exp: Exact) -> Exact:
    if not isinstance(exp, Fraction):
        raise NotExact
    if exp.denominator == 1:
        k = int(exp)
        if base == 0 and k < 0:
            raise Undefined
        if base == 0 and k == 0:
            return Fraction(1)
        if abs(k) > MAX_BITS and base not in (0, 1, -1):
            raise TooBig
        return _ipow(base, k)
    if not isinstance(base, Fraction):
        raise NotExact
    p, q = exp.numerator, exp.denominator
    if base >= 0:
        return _ipow(_rational_root(base, q), p)
    if q % 2 == 1:  # real odd root of a negative number
        return _ipow(-_rational_root(-base, q), p)
    if q == 2:
        return _ipow(GaussQ(Fraction(0), _rational_root(-base, 2)), p)
    raise NotExact


def _as_int(x: Exact) -> int:
    if isinstance(x, Fraction) and x.denominator == 1:
        return int(x)
    raise NotExact


def _real(x: Exact) -> Fraction:
    if isinstance(x, Fraction):
        return x
    raise NotExact


def _exact_fn(name: str, args: list[Exact]) -> Exact:
    if name == "sqrt":
        return _pow(args[0], Fraction(1, 2))
    if name == "root":
        n = _as_int(args[0])
        if n <= 0:
            raise Undefined if n == 0 else NotExact
        return _pow(args[1], Fraction(1, n))
    if name == "abs":
        if isinstance(args[0], Fraction):
            return abs(args[0])
        re, im = _parts(args[0])
        return _pow(re * re + im * im, Fraction(1, 2))
    if name == "floor":
        return Fraction(math.floor(_real(args[0])))
    if name == "ceil":
        return Fraction(math.ceil(_real(args[0])))
    if name in ("fact", "fact2"):
        n = _as_int(args[0])
        if n < 0:
            raise Undefined
        if n > MAX_FACTORIAL:
            raise TooBig
        if name == "fact":
            return Fraction(math.factorial(n))
        return Fraction(math.prod(range(n, 0, -2)))
    if name == "binom":
        n, k = _as_int(args[0]), _as_int(args[1])
        if n > 10 * MAX_FACTORIAL:
            raise TooBig
        if n < 0 or k < 0:
            raise NotExact
        return Fraction(math.comb(n, k))
    if name in ("gcd", "lcm"):
        ints = [_as_int(a) for a in args]
        return Fraction(math.gcd(*ints) if name == "gcd" else math.lcm(*ints))
    if name in ("max", "min"):
        reals = [_real(a) for a in args]
        return max(reals) if name == "max" else min(reals)
    if name in ("sin", "tan", "arcsin", "arctan", "sinh", "tanh") and args[0] == 0:
        return Fraction(0)
    if name in ("cos", "cosh") and args[0] == 0:
        return Fraction(1)
    if name in ("ln", "log") and args[0] == 1:
        return Fraction(0)
    if name in ("ln", "log", "logb") and args[-1] == 0:
        raise Undefined
    raise NotExact


def exact(node: Node, env: dict[str, Exact] | None = None) -> Exact:
    """The exact value of a scalar node; raises NotExact/TooBig/Undefined/NotScalar/HasSymbols.

    >>> from llmgym.rewards._math_parse import parse
    >>> exact(parse(r"\\frac{3}{4} + 0.25")), exact(parse(r"\\sqrt[3]{-8}"))
    (Fraction(1, 1), Fraction(-2, 1))
    """
    _tick()
    kind = node[0]
    if kind == "num":
        return node[1]  # type: ignore[no-any-return]
    if kind == "add":
        total: Exact = Fraction(0)
        for t in node[1]:
            total = _add(total, exact(t, env))
        return total
    if kind == "mul":
        prod: Exact = Fraction(1)
        for f in node[1]:
            prod = _mul2(prod, exact(f, env))
        return prod
    if kind == "div":
        return _mul2(exact(node[1], env), _inv(exact(node[2], env)))
    if kind == "neg":
        return _neg(exact(node[1], env))
    if kind == "pow":
        base = node[1]
        if base == ("const", "e"):
            if exact(node[2], env) == 0:
                return Fraction(1)
            raise NotExact
        return _pow(exact(base, env), exact(node[2], env))
    if kind == "sym":
        if env is None or node[1] not in env:
            raise HasSymbols
        return env[node[1]]
    if kind == "const":
        if node[1] == "i":
            return GaussQ(Fraction(0), Fraction(1))
        raise NotExact
    if kind == "fn":
        return _exact_fn(node[1], [exact(a, env) for a in node[2]])
    if kind == "based":
        try:
            return Fraction(int(node[1], node[2]))
        except ValueError:
            raise Undefined from None
    raise NotScalar


# ---------------------------------------------------------------------------------------------
# Numeric evaluation (mpmath, lazily imported, one private context per thread)
# ---------------------------------------------------------------------------------------------

_local = threading.local()


def _ctx() -> Any:
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        import mpmath

        ctx = mpmath.MPContext()
        _local.ctx = ctx
    return ctx


def _log2abs(ctx: Any, x: Any) -> Any:
    return ctx.log(abs(x), 2) if x != 0 else -ctx.inf


def _guard(ctx: Any, x: Any) -> Any:
    if ctx.isnan(x):
        raise Undefined
    if ctx.isinf(x):
        raise TooBig
    if x != 0 and abs(_log2abs(ctx, x)) > MAX_LOG2_MAGNITUDE:
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
    _tick()
    ctx = _ctx()
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


# ---------------------------------------------------------------------------------------------
# Scalar equality
# ---------------------------------------------------------------------------------------------


def _close_exact(a: Exact, b: Exact, opts: Options) -> bool:
    if a == b:
        return True
    if not opts.tolerant:
        return False
    (ar, ai), (br, bi) = _parts(a), _parts(b)
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


# ---------------------------------------------------------------------------------------------
# Identity testing modulo a prime: large rational expressions in linear time
# ---------------------------------------------------------------------------------------------

MODULAR_MIN_NODES = 256
"""Expressions this large (both sides together, in nodes) that are rational functions with
rational or Gaussian-rational coefficients and integer powers are compared modulo a prime
(:func:`modular_eq`); exact rationals at random points grow with the degree (the values of
``x^500`` have thousands of digits), so that costs time quadratic in the length."""
_MODULAR_POINTS = 4


class _NotModular(Exception):
    """The expression is not a rational function that evaluates modulo a prime."""


class _NoInverse(Exception):
    """A division by zero modulo the prime at this point (try another point)."""


_SMALL_PRIMES = [q for q in range(3, 300) if all(q % d for d in range(2, math.isqrt(q) + 1))]


def _is_probable_prime(n: int, rng: random.Random) -> bool:
    """Miller-Rabin with 32 pseudo-random bases (a composite passes with probability < 2^-64)."""
    for q in _SMALL_PRIMES:
        if n % q == 0:
            return n == q
    d, r = n - 1, 0
    while not d & 1:
        d, r = d >> 1, r + 1
    for _ in range(32):
        x = pow(rng.randrange(2, n - 2), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _modulus(rng: random.Random) -> tuple[int, int]:
    """A pseudo-random 127-bit prime p = 1 (mod 4) and a square root of -1 modulo p (the image
    of ``i``: the map from Gaussian rationals to the integers modulo p is a ring map)."""
    while True:
        p = (1 << 126) | (rng.getrandbits(124) << 2) | 1
        if _is_probable_prime(p, rng):
            break
    g = 2
    while pow(g, (p - 1) // 2, p) != p - 1:
        g += 1
    return p, pow(g, (p - 1) // 4, p)


def _mod_fraction(q: Fraction, p: int) -> int:
    d = q.denominator % p
    if d == 0:
        raise _NotModular  # a literal divisible by the prime: never by chance
    return q.numerator * pow(d, -1, p) % p if d != 1 else q.numerator % p


_NO_EXACT_VALUE = (NotExact, TooBig, Undefined, NotScalar, HasSymbols, ArithmeticError, ValueError)


def _exact_constant(node: Node) -> Any:
    """The exact value of a constant node; :class:`_NotModular` when it has none."""
    try:
        return exact(node)
    except _NO_EXACT_VALUE:
        raise _NotModular from None


def _exact_integer(node: Node) -> int:
    """The value of a node that must be a constant integer; :class:`_NotModular` otherwise."""
    if symbols(node):
        raise _NotModular
    k = _exact_constant(node)
    if not isinstance(k, Fraction) or k.denominator != 1:
        raise _NotModular
    return int(k)


def _integer_exponent(node: Node, p: int, memo: dict[Node, int]) -> int:
    """An integer exponent reduced modulo ``p - 1`` (Fermat: x^(p-1) = 1 for x != 0, so
    ``x^{2^{60000}}`` costs little); the sign of a zero exponent is kept as 0."""
    if node[0] == "num" and node[1].denominator == 1:
        return int(node[1].numerator) % (p - 1)
    key = ("exponent", node)  # apart from the node's value modulo p, which memo also keeps
    if key not in memo:
        memo[key] = _exact_integer(node) % (p - 1)
    return memo[key]


def _mod_value(node: Node, env: dict[str, int], p: int, i_root: int, memo: dict[Node, int]) -> int:
    """The value of a rational-function node modulo ``p`` at the point ``env`` (``memo`` keeps
    the values of constant parts, the same at every point)."""
    _tick()
    kind = node[0]
    if kind == "num":
        return _mod_fraction(node[1], p)
    if kind == "sym":
        if node[1] not in env:
            raise _NotModular
        return env[node[1]]
    if kind == "add":
        return sum(_mod_value(t, env, p, i_root, memo) for t in node[1]) % p
    if kind == "mul":
        prod = 1
        for f in node[1]:
            prod = prod * _mod_value(f, env, p, i_root, memo) % p
        return prod
    if kind == "neg":
        return -_mod_value(node[1], env, p, i_root, memo) % p
    if kind == "div":
        den = _mod_value(node[2], env, p, i_root, memo)
        if den == 0:
            raise _NoInverse
        return _mod_value(node[1], env, p, i_root, memo) * pow(den, -1, p) % p
    if kind == "const" and node[1] == "i":
        return i_root
    if kind == "pow" and node[1] != ("const", "e"):
        exp = node[2]
        base = _mod_value(node[1], env, p, i_root, memo)
        if base == 0:  # 0^k: 0 for k > 0, 1 for k = 0, undefined for k < 0
            sign = _exact_sign(exp)
            if sign < 0:
                raise _NoInverse
            return 0 if sign > 0 else 1
        return pow(base, _integer_exponent(exp, p, memo), p)
    if kind in ("fn", "based", "pow") and not symbols(node):
        if node not in memo:
            value = _exact_constant(node)  # a constant part: \binom{500}{3}, \sqrt{4}, 3!
            re, im = _parts(value)
            memo[node] = (_mod_fraction(re, p) + _mod_fraction(im, p) * i_root) % p
        return memo[node]
    raise _NotModular


def _exact_sign(node: Node) -> int:
    k = _exact_integer(node)
    return (k > 0) - (k < 0)


def modular_eq(a: Node, b: Node, names: list[str]) -> bool | None:
    """Whether two rational functions (in ``names``; none for constants) are equal, tested
    modulo a 127-bit prime p at pseudo-random points; None when either side is no rational
    function (a root, pi, a sine...) or no point is defined.

    Exact in each test: "unequal" means unequal (a point where both sides are defined and
    differ modulo p). "Equal" can err only when the prime divides the difference's
    coefficients or a point is one of its roots (probability under deg/p per point), and the
    prime and the points are drawn from a seed that is a hash of both expressions, so an
    answer cannot be written to fit them. Time is linear in the size of the expressions (an
    integer power costs its logarithm).

    >>> from llmgym.rewards._math_parse import parse
    >>> modular_eq(parse("(x+1)^3"), parse("x^3 + 3x^2 + 3x + 1"), ["x"])
    True
    >>> modular_eq(parse("(x+1)^3"), parse("x^3 + 3x^2 + 4x + 1"), ["x"])
    False
    >>> modular_eq(parse("(x+i)(x-i)"), parse("x^2 + 1"), ["x"]), modular_eq(parse(r"\\sqrt{x}"), parse("x"), ["x"])
    (True, None)
    """
    digest = hashlib.blake2b(repr((a, b)).encode("utf-8", "replace"), digest_size=16).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    p, i_root = _modulus(rng)
    needed = 2 if names else 1
    agreed = 0
    memo: dict[Node, int] = {}
    for _ in range(_MODULAR_POINTS):
        env = {name: rng.randrange(2, p - 1) for name in names}
        try:
            va, vb = _mod_value(a, env, p, i_root, memo), _mod_value(b, env, p, i_root, memo)
        except _NoInverse:
            continue
        except (_NotModular, RecursionError, OutOfTime):
            return None
        if va != vb:
            return False
        agreed += 1
        if agreed >= needed:
            return True
    return None


def _large(a: Node, b: Node) -> bool:
    nodes = subnodes(("pair", a, b))
    return next(itertools.islice(nodes, MODULAR_MIN_NODES, None), None) is not None


def scalar_eq(a: Node, b: Node, opts: Options) -> bool:
    """Whether two scalar expressions are equal (see the module docstring for the tiers).

    >>> from llmgym.rewards._math_parse import parse
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
    ctx = _ctx()
    dps = _precision(a, b)
    try:
        with ctx.workdps(dps):
            va, vb = numeric(a), numeric(b)
            magnitude = max(_log2abs(ctx, va), _log2abs(ctx, vb)) * 0.30103
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
    ctx = _ctx()
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
    ctx = _ctx()
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
    _tick()
    if node[0] in ("num", "sym", "const", "inf", "based"):
        return False
    if not symbols(node):
        try:
            exact(node)
        except TooBig:
            return True
        except NotExact:
            try:
                with _ctx().workdps(15):
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
    ctx = _ctx()
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
    ctx = _ctx()
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
