"""Discrete families: sequences and series, combinatorics, probability, number theory, sets, statistics."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from itertools import product as cartesian

from llmgym.envs.math.build import (
    NAMES,
    Step,
    build,
    family,
    nonzero,
    paren,
    scale,
    tex,
    tex_set,
    up_to,
)
from llmgym.tasks import Task

FRACTION_FORMAT = "Write a probability as a fraction \\frac{p}{q} in lowest terms."


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def seq_arithmetic(rng: random.Random, d: float) -> Task:
    a = rng.randint(-up_to(d, 9, 200), up_to(d, 20, 200))
    diff = nonzero(rng, scale(d, 6, 25)) if d >= 0.3 else rng.randint(2, 9)
    if d >= 0.8:
        diff = Fraction(nonzero(rng, 15), 2)
    n = rng.randint(scale(d, 8, 30), scale(d, 15, 200))
    shown = ", ".join(tex(a + i * diff) for i in range(4))
    return build(
        f"The sequence ${shown}, \\ldots$ is arithmetic.",
        f"What is its {_ordinal(n)} term?",
        tex(a + (n - 1) * diff),
        steps=[
            Step("What is the common difference?", tex(diff), f"{paren(a + diff)} - {paren(a)}")
        ],
        final_work=f"{paren(a)} + ({n} - 1) \\cdot {paren(diff)}",
    )


def seq_geometric(rng: random.Random, d: float) -> Task:
    a = nonzero(rng, scale(d, 5, 12)) if d >= 0.3 else rng.randint(1, 5)
    ratio: Fraction = Fraction(rng.randint(2, scale(d, 3, 5)))
    if d >= 0.3 and rng.random() < 0.5:
        ratio = -ratio
    if d >= 0.7:
        ratio = Fraction(rng.choice([1, -1]), rng.randint(2, 3))
        a = a * int(1 / abs(ratio)) ** 6
    n = rng.randint(5, scale(d, 6, 10))
    shown = ", ".join(tex(a * ratio**i) for i in range(3))
    return build(
        f"The sequence ${shown}, \\ldots$ is geometric.",
        f"What is its {_ordinal(n)} term?",
        tex(a * ratio ** (n - 1)),
        steps=[
            Step("What is the common ratio?", tex(ratio), f"\\frac{{{tex(a * ratio)}}}{{{tex(a)}}}")
        ],
        final_work=f"{paren(a)} \\cdot {paren(ratio)}^{{{n - 1}}}",
    )


def seq_recursive(rng: random.Random, d: float) -> Task:
    k = scale(d, 3, 7)
    if d < 0.5:
        p, q = rng.randint(2, 3), rng.randint(-5, 5)
        terms = [Fraction(rng.randint(1, 6))]
        rule = f"a_{{n+1}} = {p}a_n {'+' if q >= 0 else '-'} {abs(q)}"
        works = []
        while len(terms) < k:
            works.append(f"{p} \\cdot {paren(terms[-1])} {'+' if q >= 0 else '-'} {abs(q)}")
            terms.append(p * terms[-1] + q)
        given = f"$a_1 = {tex(terms[0])}$"
    else:
        p, q = rng.randint(1, 3), nonzero(rng, 3)
        terms = [Fraction(rng.randint(-5, 5)), Fraction(rng.randint(1, 6))]
        rule = f"a_{{n+2}} = {'' if p == 1 else p}a_{{n+1}} {'+' if q > 0 else '-'} {'' if abs(q) == 1 else abs(q)}a_n"
        works = []
        while len(terms) < k:
            works.append(f"{p} \\cdot {paren(terms[-1])} + {paren(q)} \\cdot {paren(terms[-2])}")
            terms.append(p * terms[-1] + q * terms[-2])
        given = f"$a_1 = {tex(terms[0])}$, $a_2 = {tex(terms[1])}$"
    first = len(terms) - len(works)
    steps = [
        Step(f"What is $a_{{{first + i + 1}}}$?", tex(terms[first + i]), w)
        for i, w in enumerate(works[:-1])
    ]
    return build(
        f"A sequence has {given} and ${rule}$ for every $n \\ge 1$.",
        f"What is $a_{{{k}}}$?",
        tex(terms[-1]),
        steps=steps,
        final_work=works[-1],
    )


def series_arithmetic(rng: random.Random, d: float) -> Task:
    a = rng.randint(-up_to(d, 5, 100), up_to(d, 10, 100))
    diff = rng.randint(1, scale(d, 4, 15)) * (1 if d < 0.5 or rng.random() < 0.5 else -1)
    n = rng.randint(scale(d, 5, 20), scale(d, 12, 150))
    last = a + (n - 1) * diff
    shown = ", ".join(str(a + i * diff) for i in range(3))
    total = n * (a + last) // 2
    return build(
        f"Consider the arithmetic series ${shown.replace(', ', ' + ')} + \\cdots + {paren(last)}$.",
        "What is its sum?",
        str(total),
        steps=[
            Step(
                "How many terms does the series have?",
                str(n),
                f"\\frac{{{paren(last)} - {paren(a)}}}{{{diff}}} + 1",
            )
        ],
        final_work=f"\\frac{{{n}({paren(a)} + {paren(last)})}}{{2}}",
    )


def series_geometric(rng: random.Random, d: float) -> Task:
    a = rng.randint(1, scale(d, 5, 20))
    if d < 0.6:
        ratio = Fraction(rng.randint(2, 4)) * (-1 if d >= 0.3 and rng.random() < 0.4 else 1)
        n = rng.randint(4, scale(d, 6, 9))
        total = a * (ratio**n - 1) / (ratio - 1)
        question = f"What is the sum of its first {n} terms?"
        work = f"{a} \\cdot \\frac{{{paren(ratio)}^{n} - 1}}{{{paren(ratio)} - 1}}"
    else:
        ratio = Fraction(nonzero(rng, 4), rng.randint(5, 9))
        a *= ratio.denominator**2
        total = a / (1 - ratio)
        question = "What is the sum of the infinite series?"
        work = f"\\frac{{{a}}}{{1 - {paren(ratio)}}}"
    terms = " + ".join(paren(a * ratio**i) for i in range(3))
    return build(
        f"Consider the geometric series ${terms} + \\cdots$.",
        question,
        tex(total),
        steps=[Step("What is the common ratio?", tex(ratio), f"\\frac{{{tex(a * ratio)}}}{{{a}}}")],
        final_work=work,
    )


def choose(rng: random.Random, d: float) -> Task:
    n = rng.randint(scale(d, 4, 15), scale(d, 8, 40))
    k = rng.randint(2, max(2, min(n - 2, scale(d, 3, 10))))
    who = rng.choice(NAMES)
    thing = rng.choice(["books", "songs", "toppings", "shirts", "plants", "puzzles"])
    return build(
        f"{who} has {n} different {thing} and picks {k} of them (order does not matter).",
        "In how many ways can this be done?",
        str(math.comb(n, k)),
    )


def permutations(rng: random.Random, d: float) -> Task:
    n = rng.randint(scale(d, 4, 10), scale(d, 8, 30))
    k = rng.randint(2, min(n - 1, scale(d, 3, 6)))
    return build(
        f"{n} runners finish a race and the first {k} places each get a different medal.",
        "In how many ways can the medals be awarded (no ties)?",
        str(math.perm(n, k)),
    )


_WORDS = (
    "NOON", "LEVEL", "APPLE", "LETTER", "BANANA", "COFFEE", "PEPPER", "BALLOON", "ASSESS",
    "CALCULUS", "COMMITTEE", "TENNESSEE", "STATISTICS", "BOOKKEEPER", "MISSISSIPPI",
    "MATHEMATICS", "PROBABILITY", "ABRACADABRA",
)  # fmt: skip


def arrangements(rng: random.Random, d: float) -> Task:
    hi = scale(d, 6, len(_WORDS))
    word = _WORDS[rng.randrange(max(0, hi - 6), hi)]
    count = math.factorial(len(word))
    for letter in set(word):
        count //= math.factorial(word.count(letter))
    return build(
        "",
        f"How many distinct arrangements of the letters of the word {word} are there?",
        str(count),
    )


def committee(rng: random.Random, d: float) -> Task:
    m = rng.randint(scale(d, 3, 8), scale(d, 6, 15))
    w = rng.randint(scale(d, 2, 6), scale(d, 5, 12))
    k = rng.randint(2, min(m, scale(d, 3, 6)))
    total, none = math.comb(m + w, k), math.comb(m, k)
    return build(
        f"A club has {m} juniors and {w} seniors. A committee of {k} is chosen.",
        "How many committees include at least one senior?",
        str(total - none),
        steps=[
            Step(
                "How many committees are possible in all?", str(total), f"\\binom{{{m + w}}}{{{k}}}"
            ),
            Step(
                "How many committees have no senior?", str(none), f"\\binom{{{m}}}{{{k}}}", after=()
            ),
        ],
        final_work=f"{total} - {none}",
        after=(0, 1),
    )


def dice(rng: random.Random, d: float) -> Task:
    n = 2 if d < 0.6 else 3
    sides = 6 if d < 0.8 else rng.choice([4, 8])
    sums = [sum(r) for r in cartesian(range(1, sides + 1), repeat=n)]
    target = rng.randint(n + 1, n * sides - 1)
    at_least = d >= 0.3 and rng.random() < 0.5
    favorable = sum(1 for s in sums if (s >= target if at_least else s == target))
    what = f"at least {target}" if at_least else f"exactly {target}"
    dice_text = "two" if n == 2 else "three"
    return build(
        f"{dice_text.capitalize()} fair {sides}-sided dice (faces 1 to {sides}) are rolled.",
        f"What is the probability that the sum is {what}?",
        tex(Fraction(favorable, len(sums))),
        steps=[
            Step(f"In how many outcomes is the sum {what}?", str(favorable), "N", after=()),
            Step(
                "How many equally likely outcomes are there in all?",
                str(len(sums)),
                f"{sides}^{n}",
                after=(),
            ),
        ],
        final_work=f"\\frac{{{favorable}}}{{{len(sums)}}}",
        fmt=FRACTION_FORMAT,
        after=(0, 1),
    )


def draw(rng: random.Random, d: float) -> Task:
    r, b = rng.randint(2, scale(d, 6, 20)), rng.randint(2, scale(d, 6, 20))
    g = rng.randint(1, scale(d, 1, 10)) if d >= 0.5 else 0
    total = r + b + g
    color, count = rng.choice([("red", r), ("blue", b)])
    p1, p2 = Fraction(count, total), Fraction(count - 1, total - 1)
    colors = (
        f"{r} red and {b} blue marbles" if not g else f"{r} red, {b} blue and {g} green marbles"
    )
    return build(
        f"A bag holds {colors}. Two marbles are drawn at random without replacement.",
        f"What is the probability that both are {color}?",
        tex(p1 * p2),
        steps=[
            Step(
                f"What is the probability that the first marble is {color}?",
                tex(p1),
                f"\\frac{{{count}}}{{{total}}}",
            ),
            Step(
                f"Given that the first marble is {color}, what is the probability that the second is {color}?",
                tex(p2),
                f"\\frac{{{count - 1}}}{{{total - 1}}}",
                after=(),
            ),
        ],
        final_work=f"{tex(p1)} \\cdot {tex(p2)}",
        fmt=FRACTION_FORMAT,
        after=(0, 1),
    )


def complement(rng: random.Random, d: float) -> Task:
    sides = rng.choice([4, 6]) if d < 0.5 else rng.choice([6, 8, 10, 12])
    n = rng.randint(2, scale(d, 3, 6))
    face = rng.randint(1, sides)
    none = Fraction(sides - 1, sides) ** n
    return build(
        f"A fair {sides}-sided die (faces 1 to {sides}) is rolled {n} times.",
        f"What is the probability of rolling at least one {face}?",
        tex(1 - none),
        steps=[
            Step(
                f"What is the probability that no roll shows a {face}?",
                tex(none),
                f"\\left(\\frac{{{sides - 1}}}{{{sides}}}\\right)^{n}",
            )
        ],
        final_work=f"1 - {tex(none)}",
        fmt=FRACTION_FORMAT,
    )


def expected(rng: random.Random, d: float) -> Task:
    k = scale(d, 2, 5)
    weights = [rng.randint(1, 6) for _ in range(k)]
    total = sum(weights)
    values = rng.sample(range(-up_to(d, 5, 50) if d >= 0.4 else 1, up_to(d, 10, 100)), k)
    mean = sum(Fraction(w * v, total) for w, v in zip(weights, values, strict=True))
    lines = "; ".join(
        f"${tex(Fraction(w, total))}$ chance of {'winning' if v >= 0 else 'losing'} {abs(v)} point{'' if abs(v) == 1 else 's'}"
        for w, v in zip(weights, values, strict=True)
    )
    return build(
        f"A game gives: {lines}.",
        "What is the expected number of points won?",
        tex(mean),
        fmt="Give an exact value (a fraction if needed).",
    )


def gcd_lcm(rng: random.Random, d: float) -> Task:
    k = 2 if d < 0.6 else 3
    g = rng.randint(2, up_to(d, 6, 60))
    nums = [g * rng.randint(2, up_to(d, 9, 60)) for _ in range(k)]
    if rng.random() < 0.5:
        return build(
            "",
            f"What is the greatest common divisor of {', '.join(map(str, nums))}?",
            str(math.gcd(*nums)),
        )
    return build(
        "",
        f"What is the least common multiple of {', '.join(map(str, nums))}?",
        str(math.lcm(*nums)),
    )


def modpow(rng: random.Random, d: float) -> Task:
    m = rng.randint(3, up_to(d, 13, 1000))
    a = rng.randint(2, up_to(d, 12, 500))
    b = rng.randint(2, up_to(d, 20, 10**6))
    return build(
        "", f"What is the remainder when ${a}^{{{b}}}$ is divided by ${m}$?", str(pow(a, b, m))
    )


def congruence(rng: random.Random, d: float) -> Task:
    while True:
        m = rng.randint(5, up_to(d, 13, 500))
        a = rng.randint(2, m - 1)
        if math.gcd(a, m) == 1:
            break
    b = rng.randint(1, m - 1)
    x = b * pow(a, -1, m) % m  # never 0: a is invertible and b is not 0 mod m
    return build(
        "",
        f"Find the smallest positive integer $x$ with ${a}x \\equiv {b} \\pmod{{{m}}}$.",
        str(x),
    )


def divisors(rng: random.Random, d: float) -> Task:
    primes = [2, 3, 5, 7, 11, 13]
    k = scale(d, 1, 4)
    chosen = sorted(rng.sample(primes[: scale(d, 3, 6)], min(k, scale(d, 3, 6))))
    exps = [rng.randint(1, scale(d, 3, 5)) for _ in chosen]
    n = math.prod(p**e for p, e in zip(chosen, exps, strict=True))
    count = math.prod(e + 1 for e in exps)
    return build("", f"How many positive divisors does ${n}$ have?", str(count))


def _primes_upto(n: int) -> list[int]:
    sieve = bytearray([1]) * (n + 1)
    sieve[:2] = b"\x00\x00"
    for i in range(2, math.isqrt(n) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    return [i for i, is_p in enumerate(sieve) if is_p]


def primes(rng: random.Random, d: float) -> Task:
    width = up_to(d, 20, 400)
    lo = rng.randint(1, up_to(d, 30, 5000))
    hi = lo + width
    count = sum(1 for p in _primes_upto(hi) if p >= lo)
    return build("", f"How many prime numbers $p$ satisfy ${lo} \\le p \\le {hi}$?", str(count))


def _to_base(n: int, base: int) -> str:
    digits = "0123456789ABCDEF"
    out = ""
    while n:
        out = digits[n % base] + out
        n //= base
    return out or "0"


def base_to_decimal(rng: random.Random, d: float) -> Task:
    base = rng.choice([2, 3, 5, 8]) if d < 0.5 else rng.choice([2, 4, 6, 7, 9, 12, 16])
    n = rng.randint(base + 1, up_to(d, 60, 10**6))
    return build(
        "", f"Write the base-{base} numeral ${_to_base(n, base)}_{{{base}}}$ in base 10.", str(n)
    )


def decimal_to_base(rng: random.Random, d: float) -> Task:
    base = rng.choice([2, 3, 5, 8]) if d < 0.5 else rng.choice([2, 4, 6, 7, 9])
    n = rng.randint(base + 1, up_to(d, 60, 10**5))
    return build(
        "",
        f"Write the number ${n}$ in base {base}.",
        f"{_to_base(n, base)}_{{{base}}}",
        fmt=f"Write the base-{base} digits with the base as a subscript, e.g. $\\boxed{{...}}_{{{base}}}$.",
    )


def units_digit(rng: random.Random, d: float) -> Task:
    a = rng.randint(2, up_to(d, 9, 999))
    b = rng.randint(up_to(d, 5, 100), up_to(d, 30, 10**9))
    return build("", f"What is the units digit of ${a}^{{{b}}}$?", str(pow(a, b, 10)))


def set_ops(rng: random.Random, d: float) -> Task:
    universe = list(range(1, up_to(d, 12, 60) + 1))
    size = scale(d, 4, 9)
    sets = {name: set(rng.sample(universe, size)) for name in "ABC"}
    ops = [
        ("A \\cup B", sets["A"] | sets["B"]),
        ("A \\cap B", sets["A"] & sets["B"]),
        ("A \\setminus B", sets["A"] - sets["B"]),
    ]
    if d >= 0.5:
        ops += [
            ("(A \\cup B) \\cap C", (sets["A"] | sets["B"]) & sets["C"]),
            (
                "(A \\cap C) \\cup (B \\setminus C)",
                (sets["A"] & sets["C"]) | (sets["B"] - sets["C"]),
            ),
        ]
    expr, value = rng.choice(ops)
    names = "ABC" if "C" in expr else "AB"
    defs = ", ".join(f"${n} = {tex_set(sorted(sets[n]))}$" for n in names)
    return build(
        f"Let {defs}.",
        f"What is ${expr}$?",
        tex_set(sorted(value)),
        fmt="Write the set in braces, like \\{a, b\\}, or \\emptyset if it is empty.",
    )


def venn(rng: random.Random, d: float) -> Task:
    both = rng.randint(1, up_to(d, 8, 60))
    only_a, only_b = rng.randint(1, up_to(d, 15, 120)), rng.randint(1, up_to(d, 15, 120))
    neither = rng.randint(1, up_to(d, 10, 80))
    a, b = only_a + both, only_b + both
    union = a + b - both
    total = union + neither
    activity_a, activity_b = rng.sample(
        ["chess", "soccer", "choir", "robotics", "drama", "swimming"], 2
    )
    return build(
        f"Of {total} students, {a} are in {activity_a}, {b} are in {activity_b}, and {both} are in both.",
        "How many students are in neither?",
        str(neither),
        steps=[
            Step(
                "How many students are in at least one of the two?",
                str(union),
                f"{a} + {b} - {both}",
            )
        ],
        final_work=f"{total} - {union}",
    )


def mean(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 12)
    values = [
        rng.randint(-up_to(d, 1, 100) if d >= 0.5 else 0, up_to(d, 20, 1000)) for _ in range(n)
    ]
    return build(
        "",
        f"What is the mean of the numbers {', '.join(map(str, values))}?",
        tex(Fraction(sum(values), n)),
        fmt="Give an exact value (a fraction if needed).",
    )


def median(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 14)
    values = [rng.randint(0, up_to(d, 20, 1000)) for _ in range(n)]
    s = sorted(values)
    mid = s[n // 2] if n % 2 else Fraction(s[n // 2 - 1] + s[n // 2], 2)
    return build("", f"What is the median of {', '.join(map(str, values))}?", tex(mid))


SPECS = [
    family(
        "seq.arithmetic",
        seq_arithmetic,
        "the n-th term of an arithmetic sequence; the difference is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "seq.geometric",
        seq_geometric,
        "the n-th term of a geometric sequence; the ratio is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "seq.recursive",
        seq_recursive,
        "iterate a recurrence; every intermediate term is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "series.arithmetic_sum",
        series_arithmetic,
        "the sum of a finite arithmetic series; the number of terms is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "series.geometric_sum",
        series_geometric,
        "a finite (then infinite) geometric series; the ratio is a subtask",
        form="number",
        steps=True,
    ),
    family("comb.choose", choose, "binomial coefficients: choose k of n", form="number"),
    family(
        "comb.permutations",
        permutations,
        "ordered selections: award k distinct prizes among n people",
        form="number",
    ),
    family(
        "comb.arrangements",
        arrangements,
        "distinct arrangements of the letters of a word with repeats",
        form="number",
    ),
    family(
        "comb.committee",
        committee,
        "committees with at least one member of a group (complement counting; subtasks)",
        form="number",
        steps=True,
    ),
    family(
        "prob.dice",
        dice,
        "probability of a dice sum; favorable and total outcomes are subtasks",
        form="fraction",
        steps=True,
    ),
    family(
        "prob.draw",
        draw,
        "drawing two marbles without replacement; each draw's probability is a subtask",
        form="fraction",
        steps=True,
    ),
    family(
        "prob.complement",
        complement,
        "at least one success in n trials via the complement; P(none) is a subtask",
        form="fraction",
        steps=True,
    ),
    family("prob.expected", expected, "the expected value of a discrete payout", form="number"),
    family(
        "nt.gcd_lcm",
        gcd_lcm,
        "gcd or lcm of two or three integers",
        form="number",
        gold_may_appear=True,
    ),
    family("nt.modpow", modpow, "a^b mod m by repeated squaring", form="number"),
    family("nt.congruence", congruence, "solve a linear congruence ax ≡ b (mod m)", form="number"),
    family("nt.divisors", divisors, "the number of positive divisors of n", form="number"),
    family("nt.primes", primes, "count the primes in a range", form="number"),
    family(
        "nt.base_to_decimal",
        base_to_decimal,
        "convert a numeral in base 2-16 to base 10",
        form="number",
    ),
    family(
        "nt.decimal_to_base",
        decimal_to_base,
        "convert a base-10 integer to base 2-9",
        form="number",
    ),
    family("nt.units_digit", units_digit, "the units digit of a large power", form="number"),
    family(
        "sets.ops",
        set_ops,
        "union, intersection and difference of finite sets",
        form="number",
        gold_may_appear=True,
    ),
    family(
        "sets.venn",
        venn,
        "inclusion-exclusion with two groups; the union is a subtask",
        form="number",
        steps=True,
    ),
    family("stats.mean", mean, "the mean of a list of numbers (exact)", form="number"),
    family(
        "stats.median",
        median,
        "the median of an unsorted list",
        form="number",
        gold_may_appear=True,
    ),
]
"""The discrete families: name, generator, what each asks, the final form of its answers."""
