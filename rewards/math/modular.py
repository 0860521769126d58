"""Identity testing modulo a prime: large rational expressions (a degree-500 polynomial written
out) compared in linear time, exactly, at pseudo-random points modulo a 127-bit prime
(:func:`modular_eq`). Used by :mod:`~llmgym.rewards.math.evaluate` for large answers only.
"""

from __future__ import annotations

import hashlib
import math
import random
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.exact import exact, re_im
from llmgym.rewards.math.limits import (
    HasSymbols,
    NotExact,
    NotScalar,
    OutOfTime,
    TooBig,
    Undefined,
    tick,
)
from llmgym.rewards.math.nodes import Node, symbols

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
    tick()
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
            re, im = re_im(value)
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

    >>> from llmgym.rewards.math.parser import parse
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
