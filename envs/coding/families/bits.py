"""Bit-manipulation and number-theory families."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

# --- bits ---------------------------------------------------------------------------------------


def hamming_distance(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


def _hamming_distance(rng: random.Random, d: float) -> Task:
    bits = scale(d, 8, 128)
    return call_task(
        rng, d, fn=hamming_distance, theme="bits",
        make=lambda: (rng.getrandbits(bits), rng.getrandbits(bits)),
        edge=[(0, 0), (1, 4), (2**64 - 1, 0)],
        description="Return the number of bit positions in which the non-negative integers "
        "`a` and `b` differ (they may be arbitrarily large).",
    )  # fmt: skip


def single_number(nums: list[int]) -> int:
    result = 0
    for x in nums:
        result ^= x
    return result


def _single_number(rng: random.Random, d: float) -> Task:
    n = scale(d, 1, 1000)

    def make() -> tuple[list[int]]:
        values = rng.sample(range(-(10**6), 10**6), rng.randint(1, n) + 1)
        nums = values[1:] * 2 + values[:1]
        rng.shuffle(nums)
        return (nums,)

    return call_task(
        rng, d, fn=single_number, make=make, theme="bits",
        edge=[([7],), ([1, 2, 1],), ([-3, 5, 5],)],
        description="Every value in `nums` appears exactly twice except one, which appears "
        "once. Return that value (values may be negative). Aim for O(1) extra memory.",
    )  # fmt: skip


def reverse_bits32(n: int) -> int:
    out = 0
    for _ in range(32):
        out = (out << 1) | (n & 1)
        n >>= 1
    return out


def _reverse_bits32(rng: random.Random, d: float) -> Task:
    return call_task(
        rng, d, fn=reverse_bits32, theme="bits",
        make=lambda: (rng.getrandbits(rng.choice([4, 16, 31, 32])),),
        edge=[(0,), (1,), (2**32 - 1,), (0x80000000,)],
        description="Treat `n` (0 <= n < 2**32) as a 32-bit unsigned integer and return the "
        "integer whose 32 bits are those of `n` in reverse order.",
    )  # fmt: skip


def gray_code(n: int) -> list[int]:
    return [i ^ (i >> 1) for i in range(1 << n)]


def _gray_code(rng: random.Random, d: float) -> Task:
    top = scale(d, 11, 14)
    return call_task(
        rng, d, fn=gray_code, theme="bits",
        make=lambda: (rng.randint(0, top),),
        edge=[(0,), (1,), (2,)],
        description="Return the `n`-bit reflected binary Gray code as a list of `2**n` "
        "integers: element `i` is `i XOR (i >> 1)` (for `n = 0`, `[0]`).",
    )  # fmt: skip


def count_bits_upto(n: int) -> list[int]:
    out = [0] * (n + 1)
    for i in range(1, n + 1):
        out[i] = out[i >> 1] + (i & 1)
    return out


def _count_bits_upto(rng: random.Random, d: float) -> Task:
    top = scale(d, 20, 5000)
    return call_task(
        rng, d, fn=count_bits_upto, theme="bits",
        make=lambda: (rng.randint(0, top),),
        edge=[(0,), (1,), (8,)],
        description="Return a list of length `n + 1` whose element `i` is the number of 1 bits "
        "in the binary form of `i`.",
    )  # fmt: skip


# --- number theory ------------------------------------------------------------------------------


def primes_up_to(n: int) -> list[int]:
    if n < 2:
        return []
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(range(p * p, n + 1, p)))
    return [i for i, flag in enumerate(sieve) if flag]


def _primes_up_to(rng: random.Random, d: float) -> Task:
    top = scale(d, 30, 20000)
    return call_task(
        rng, d, fn=primes_up_to, theme="number theory",
        make=lambda: (rng.randint(0, top),),
        edge=[(0,), (1,), (2,), (30,)],
        description="Return all prime numbers `<= n`, ascending.",
    )  # fmt: skip


def prime_factors(n: int) -> list[list[int]]:
    out = []
    p = 2
    while p * p <= n:
        if n % p == 0:
            k = 0
            while n % p == 0:
                n //= p
                k += 1
            out.append([p, k])
        p += 1 if p == 2 else 2
    if n > 1:
        out.append([n, 1])
    return out


def _prime_factors(rng: random.Random, d: float) -> Task:
    bits = scale(d, 8, 40)
    return call_task(
        rng, d, fn=prime_factors, theme="number theory",
        make=lambda: (rng.randint(2, 2**bits),),
        edge=[(2,), (1,), (97,), (2**10 * 3**5,), (999983 * 2,)],
        description="Return the prime factorization of `n >= 1` as a list of `[prime, "
        "exponent]` pairs with ascending primes (`[]` for 1).",
    )  # fmt: skip


def mod_pow(base: int, exponent: int, modulus: int) -> int:
    result = 1 % modulus
    base %= modulus
    while exponent:
        if exponent & 1:
            result = result * base % modulus
        base = base * base % modulus
        exponent >>= 1
    return result


def _mod_pow(rng: random.Random, d: float) -> Task:
    bits = scale(d, 8, 200)
    return call_task(
        rng, d, fn=mod_pow, theme="number theory",
        make=lambda: (rng.getrandbits(bits), rng.getrandbits(bits), rng.randint(1, 2**min(bits, 62))),
        edge=[(2, 0, 1), (0, 0, 7), (5, 3, 13), (-2, 3, 5)],
        description="Return `base ** exponent % modulus` for integers with `exponent >= 0` and "
        "`modulus >= 1` (the result lies in `[0, modulus)`, as Python's `%` gives). Exponents "
        "can be huge: use fast exponentiation.",
    )  # fmt: skip


def gcd_lcm(nums: list[int]) -> list[int]:
    from math import gcd

    g, lcm = 0, 1
    for x in nums:
        g = gcd(g, x)
        lcm = lcm * x // gcd(lcm, x)
    return [g, lcm]


def _gcd_lcm(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 30)
    return call_task(
        rng, d, fn=gcd_lcm, theme="number theory",
        make=lambda: ([rng.randint(1, scale(d, 30, 10**6)) for _ in range(rng.randint(1, n))],),
        edge=[([1],), ([12, 18],), ([7, 7, 7],), ([2, 3, 5, 7, 11, 13],)],
        description="Return `[gcd, lcm]` of the positive integers in `nums` (non-empty).",
    )  # fmt: skip


def to_base(n: int, base: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    n = abs(n)
    out = []
    while n:
        n, r = divmod(n, base)
        out.append(digits[r])
    return sign + "".join(reversed(out))


def _to_base(rng: random.Random, d: float) -> Task:
    bits = scale(d, 8, 120)
    return call_task(
        rng, d, fn=to_base, theme="number theory",
        make=lambda: (rng.getrandbits(bits) * rng.choice([1, -1]), rng.randint(2, 36)),
        edge=[(0, 2), (-255, 16), (35, 36), (10, 10)],
        description="Write the integer `n` in base `base` (2 to 36) with digits `0-9` then "
        "lowercase `a-z`, a leading `-` for negatives, and no leading zeros (`'0'` for zero).",
    )  # fmt: skip


FAMILIES = [
    Family("hamming_distance", _hamming_distance, "popcount of XOR"),
    Family("single_number", _single_number, "XOR trick"),
    Family("reverse_bits32", _reverse_bits32, "bit reversal"),
    Family("gray_code", _gray_code, "Gray codes"),
    Family("count_bits_upto", _count_bits_upto, "popcount DP"),
    Family("primes_up_to", _primes_up_to, "sieve of Eratosthenes"),
    Family("prime_factors", _prime_factors, "trial division"),
    Family("mod_pow", _mod_pow, "fast modular exponentiation"),
    Family("gcd_lcm", _gcd_lcm, "gcd and lcm of a list"),
    Family("to_base", _to_base, "base conversion"),
]
