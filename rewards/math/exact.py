"""Exact arithmetic on parse trees: rationals (``Fraction``) and Gaussian rationals
(:class:`GaussQ`), with bounded sizes. The first tier of comparison: ``0.5 == 1/2``,
``\\sqrt{16} == 4``. What has no exact value raises :class:`~llmgym.rewards.math.limits.NotExact`
(numerics are :mod:`~llmgym.rewards.math.numeric`'s job).
"""

from __future__ import annotations

import math
from fractions import Fraction

from llmgym.rewards.math.limits import (
    HasSymbols,
    NotExact,
    NotScalar,
    TooBig,
    Undefined,
    check_time,
    tick,
)
from llmgym.rewards.math.nodes import Node

MAX_BITS = 1 << 17
"""Exact rationals larger than this (numerator plus denominator bits) switch to numerics."""
MAX_FACTORIAL = 2000


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


def re_im(x: Exact) -> tuple[Fraction, Fraction]:
    """The real and imaginary parts of an exact value."""
    return (x.re, x.im) if isinstance(x, GaussQ) else (x, Fraction(0))


def _mk(re: Fraction, im: Fraction) -> Exact:
    return re if im == 0 else GaussQ(re, im)


def _check(x: Exact) -> Exact:
    for part in re_im(x):
        bits = part.numerator.bit_length() + part.denominator.bit_length()
        if bits > MAX_BITS:
            raise TooBig
        if bits > 8192:
            check_time()  # arithmetic on numbers this long is slow: look at the clock
    return x


def _add(a: Exact, b: Exact) -> Exact:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check(a + b)
    (ar, ai), (br, bi) = re_im(a), re_im(b)
    return _check(_mk(ar + br, ai + bi))


def _mul2(a: Exact, b: Exact) -> Exact:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check(a * b)
    (ar, ai), (br, bi) = re_im(a), re_im(b)
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
    return max(max(p.numerator.bit_length(), p.denominator.bit_length()) for p in re_im(x))


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
        re, im = re_im(args[0])
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

    >>> from llmgym.rewards.math.parser import parse
    >>> exact(parse(r"\\frac{3}{4} + 0.25")), exact(parse(r"\\sqrt[3]{-8}"))
    (Fraction(1, 1), Fraction(-2, 1))
    """
    tick()
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
