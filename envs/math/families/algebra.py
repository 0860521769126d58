"""Algebra families: equations, systems, functions, exponents, inequalities and polynomials."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction

from llmgym.envs.math.build import (
    Step,
    build,
    family,
    interval,
    linear,
    nonzero,
    paren,
    poly,
    poly_at,
    scale,
    sqrt_tex,
    tex,
    up_to,
)
from llmgym.tasks import Task

SOLUTIONS_FORMAT = "If there are several solutions, list them all, separated by commas."
INTERVAL_FORMAT = "Write the solution set in interval notation (use \\cup for a union)."


def solutions(values: Sequence[Fraction | int]) -> str:
    """Several solutions as the gold: a comma-separated list in increasing order."""
    return ", ".join(tex(v) for v in sorted(set(values)))


def poly_mul(p: Sequence[int], q: Sequence[int]) -> list[int]:
    """The product of two coefficient lists (lowest power first)."""
    out = [0] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            out[i + j] += a * b
    return out


def poly_eval(p: Sequence[int | Fraction], x: int | Fraction) -> Fraction:
    total = Fraction(0)
    for c in reversed(p):
        total = total * x + c
    return total


def _rational(rng: random.Random, hi: int, den_hi: int) -> Fraction:
    den = rng.randint(1, den_hi)
    return Fraction(rng.randint(-hi, hi), den)


def linear_equation(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 9, 60)
    den = 1 if d < 0.5 else rng.randint(1, scale(d, 1, 9))
    root = Fraction(rng.randint(-hi, hi), den)
    while True:
        a, c = nonzero(rng, scale(d, 5, 15)), (rng.randint(-12, 12) if d >= 0.3 else 0)
        if (a - c) % den == 0 and a != c:
            break
    b = rng.randint(-hi, hi)
    e = (a - c) * root + b
    rhs = linear(c, e) if c else tex(e)
    return build("", f"Solve for $x$: ${linear(a, b)} = {rhs}$.", tex(root))


def quadratic(rng: random.Random, d: float) -> Task:
    hi = scale(d, 6, 15)
    if d < 0.6:
        q1 = q2 = 1
        if d >= 0.3:
            q1, q2 = rng.randint(1, 4), rng.randint(1, 3)
        p1, p2 = rng.randint(-hi, hi), rng.randint(-hi, hi)
        coeffs = poly_mul([-p1, q1], [-p2, q2])
        g = math.gcd(*coeffs)
        coeffs = [c // g for c in coeffs]
        answer = solutions([Fraction(p1, q1), Fraction(p2, q2)])
    else:
        while True:
            a = rng.randint(1, 3)
            b, c = nonzero(rng, hi), rng.randint(-hi, hi)
            disc = b * b - 4 * a * c
            if disc > 0 and math.isqrt(disc) ** 2 != disc:
                break
        coeffs = [c, b, a]
        answer = f"{tex(Fraction(-b, 2 * a))} \\pm {sqrt_tex(disc, Fraction(1, 2 * a))}"
    c, b, a = coeffs
    disc = b * b - 4 * a * c
    step = Step(
        "What is the discriminant $b^2 - 4ac$ of the quadratic?",
        str(disc),
        f"{paren(b)}^2 - 4 \\cdot {paren(a)} \\cdot {paren(c)}",
    )
    fmt = SOLUTIONS_FORMAT
    if d >= 0.6:
        fmt += " You may write a pair of solutions with \\pm."
    return build(
        "",
        f"Find all real solutions of ${poly(coeffs)} = 0$.",
        answer,
        steps=[step],
        fmt=fmt,
    )


def system(rng: random.Random, d: float) -> Task:
    n = 2 if d < 0.6 else 3
    names = ["x", "y", "z"][:n]
    hi = scale(d, 4, 9)
    sol = [rng.randint(-up_to(d, 9, 30), up_to(d, 9, 30)) for _ in range(n)]
    while True:
        rows = [[rng.randint(-hi, hi) for _ in range(n)] for _ in range(n)]
        if det(rows) != 0 and all(any(r) for r in rows):
            break
    lines = []
    for row in rows:
        lhs = ""
        for c, v in zip(row, names, strict=True):
            lhs += _term(c, v, first=not lhs)
        lines.append(f"{lhs} = {sum(c * s for c, s in zip(row, sol, strict=True))}")
    tuple_text = "(" + ", ".join(names) + ")"
    steps = [Step(f"What is ${v}$?", str(s), v, after=()) for v, s in zip(names, sol, strict=True)]
    return build(
        "Solve the system of equations\n" + "\n".join(f"$${line}$$" for line in lines),
        f"What is ${tuple_text}$?",
        "(" + ", ".join(map(str, sol)) + ")",
        steps=steps,
        fmt=f"Give the answer as an ordered {'pair' if n == 2 else 'triple'} ${tuple_text}$.",
        after=tuple(range(n)),
    )


def _term(c: int, var: str, *, first: bool) -> str:
    if c == 0:
        return ""
    body = var if abs(c) == 1 else f"{abs(c)}{var}"
    if first:
        return ("-" if c < 0 else "") + body
    return f" {'-' if c < 0 else '+'} {body}"


def det(m: list[list[int]]) -> int:
    """The determinant of a square integer matrix (cofactor expansion; for 2x2 and 3x3)."""
    if len(m) == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    return sum(
        (-1) ** j * m[0][j] * det([row[:j] + row[j + 1 :] for row in m[1:]]) for j in range(len(m))
    )


def evaluate(rng: random.Random, d: float) -> Task:
    degree = scale(d, 1, 4)
    coeffs = [rng.randint(-9, 9) for _ in range(degree)] + [nonzero(rng, 9)]
    x = nonzero(rng, scale(d, 5, 12)) if d >= 0.3 else rng.randint(1, 9)
    if d >= 0.7:
        x = Fraction(nonzero(rng, 5), rng.randint(2, 4))
    return build("", f"If $x = {tex(x)}$, what is ${poly(coeffs)}$?", tex(poly_eval(coeffs, x)))


def exponents(rng: random.Random, d: float) -> Task:
    base = rng.choice([2, 3])
    k = scale(d, 2, 4)
    total = 0
    text = ""
    for i in range(k):
        power = rng.randint(1, 3 if base == 2 else 2)  # the term is (base**power)**e
        e = nonzero(rng, scale(d, 4, 12)) if d >= 0.3 else rng.randint(1, 4)
        b = base**power
        if i == 0 or rng.random() < 0.6:
            total += power * e
            text += ("" if i == 0 else " \\cdot ") + f"{b}^{{{e}}}"
        else:
            total -= power * e
            text = f"\\frac{{{text}}}{{{b}^{{{e}}}}}"
    return build("", f"If ${text} = {base}^n$, what is $n$?", str(total))


def abs_equation(rng: random.Random, d: float) -> Task:
    a = nonzero(rng, scale(d, 1, 6))
    b = rng.randint(-up_to(d, 9, 40), up_to(d, 9, 40))
    c = rng.randint(1, up_to(d, 12, 60))
    roots = [Fraction(c - b, a), Fraction(-c - b, a)]
    return build(
        "",
        f"Find all real solutions of $|{linear(a, b)}| = {c}$.",
        solutions(roots),
        fmt=SOLUTIONS_FORMAT,
    )


def compose(rng: random.Random, d: float) -> Task:
    a, b = nonzero(rng, scale(d, 4, 9)), rng.randint(-9, 9)
    c, e = nonzero(rng, scale(d, 2, 5)), rng.randint(-9, 9)
    f = [b, a]
    g = [e, 0, c] if d >= 0.4 else [e, c]
    k = rng.randint(-scale(d, 4, 9), scale(d, 4, 9))
    inner = poly_eval(g, k)
    outer = poly_eval(f, inner)
    return build(
        f"Let $f(x) = {poly(f)}$ and $g(x) = {poly(g)}$.",
        f"What is $f(g({k}))$?",
        tex(outer),
        steps=[Step(f"What is $g({k})$?", tex(inner), poly_at(g, k))],
        final_work=poly_at(f, inner),
    )


def inverse(rng: random.Random, d: float) -> Task:
    a, b = nonzero(rng, scale(d, 3, 9)), rng.randint(-12, 12)
    c = rng.randint(1, scale(d, 1, 6))
    k = rng.randint(-up_to(d, 9, 30), up_to(d, 9, 30))
    fx = f"\\frac{{{linear(a, b)}}}{{{c}}}" if c > 1 else linear(a, b)
    return build(f"Let $f(x) = {fx}$.", f"What is $f^{{-1}}({k})$?", tex(Fraction(c * k - b, a)))


def ineq_linear(rng: random.Random, d: float) -> Task:
    a, c = nonzero(rng, scale(d, 5, 12)), rng.randint(-6, 6) if d >= 0.4 else 0
    if a == c:
        a += 1
    b, e = rng.randint(-20, 20), rng.randint(-20, 20)
    op = rng.choice(["<", "\\le", ">", "\\ge"])
    bound = Fraction(e - b, a - c)
    # a x + b op c x + e  <=>  (a - c) x op (e - b); dividing by a negative flips it.
    less = op in ("<", "\\le")
    if a - c < 0:
        less = not less
    closed = op in ("\\le", "\\ge")
    answer = (
        interval(None, bound, lo_closed=False, hi_closed=closed)
        if less
        else interval(bound, None, lo_closed=closed, hi_closed=False)
    )
    rhs = linear(c, e) if c else str(e)
    return build("", f"Solve ${linear(a, b)} {op} {rhs}$.", answer, fmt=INTERVAL_FORMAT)


def ineq_quadratic(rng: random.Random, d: float) -> Task:
    hi = scale(d, 6, 20)
    r1 = rng.randint(-hi, hi)
    r2 = r1 + rng.randint(1, hi)
    a = rng.randint(1, scale(d, 1, 4))
    coeffs = [a * r1 * r2, -a * (r1 + r2), a]
    op = rng.choice(["<", "\\le", ">", "\\ge"])
    closed = op in ("\\le", "\\ge")
    if op in ("<", "\\le"):
        answer = interval(r1, r2, lo_closed=closed, hi_closed=closed)
    else:
        answer = (
            interval(None, r1, lo_closed=False, hi_closed=closed)
            + " \\cup "
            + interval(r2, None, lo_closed=closed, hi_closed=False)
        )
    steps = [
        Step(f"What is the smaller root of ${poly(coeffs)} = 0$?", str(r1), "x_1", after=()),
        Step(f"What is the larger root of ${poly(coeffs)} = 0$?", str(r2), "x_2", after=()),
    ]
    return build(
        "",
        f"Solve ${poly(coeffs)} {op} 0$.",
        answer,
        steps=steps,
        fmt=INTERVAL_FORMAT,
        after=(0, 1),
    )


def ineq_abs(rng: random.Random, d: float) -> Task:
    a = rng.randint(-up_to(d, 9, 50), up_to(d, 9, 50))
    b = rng.randint(1, up_to(d, 9, 40))
    k = rng.randint(1, scale(d, 1, 4))
    op = rng.choice(["<", "\\le", ">", "\\ge"])
    closed = op in ("\\le", "\\ge")
    lo, hi = Fraction(a - b, k), Fraction(a + b, k)
    if op in ("<", "\\le"):
        answer = interval(lo, hi, lo_closed=closed, hi_closed=closed)
    else:
        answer = (
            interval(None, lo, lo_closed=False, hi_closed=closed)
            + " \\cup "
            + interval(hi, None, lo_closed=closed, hi_closed=False)
        )
    return build("", f"Solve $|{linear(k, -a)}| {op} {b}$.", answer, fmt=INTERVAL_FORMAT)


def expand_coeff(rng: random.Random, d: float) -> Task:
    k = scale(d, 2, 5)
    hi = scale(d, 3, 9)
    factors = [[rng.randint(-hi, hi) or 1, nonzero(rng, scale(d, 1, 4))] for _ in range(k)]
    product = [1]
    for f in factors:
        product = poly_mul(product, f)
    power = rng.randint(1, k - 1)
    text = "".join(f"({linear(a, b)})" for b, a in factors)
    return build(
        "",
        f"When ${text}$ is expanded, what is the coefficient of $x^{{{power}}}$?".replace(
            "x^{1}", "x"
        ),
        str(product[power]),
    )


def factor(rng: random.Random, d: float) -> Task:
    k = 2 if d < 0.6 else 3
    lead_hi = scale(d, 1, 3)
    factors = []
    for _ in range(k):
        a = rng.randint(1, lead_hi)
        b = nonzero(rng, scale(d, 5, 9))
        g = math.gcd(a, b)
        factors.append((b // g, a // g))
    product = [1]
    for b, a in factors:
        product = poly_mul(product, [b, a])
    answer = "".join(f"({linear(a, b)})" for b, a in sorted(factors, key=lambda f: (f[1], f[0])))
    return build(
        "",
        f"Factor ${poly(product)}$ completely over the integers.",
        answer,
        fmt="Write the answer as a product of linear factors, such as $(x + a)(bx + c)$.",
    )


def roots(rng: random.Random, d: float) -> Task:
    hi = scale(d, 4, 12)
    rs = rng.sample(range(-hi, hi + 1), 3)
    lead = rng.randint(1, scale(d, 1, 3))
    product = [lead]
    for r in rs:
        product = poly_mul(product, [-r, 1])
    return build(
        "", f"Find all real roots of ${poly(product)} = 0$.", solutions(rs), fmt=SOLUTIONS_FORMAT
    )


def remainder(rng: random.Random, d: float) -> Task:
    degree = scale(d, 2, 6)
    coeffs = [rng.randint(-9, 9) for _ in range(degree)] + [nonzero(rng, 5)]
    a = nonzero(rng, scale(d, 3, 6))
    return build(
        "",
        f"What is the remainder when ${poly(coeffs)}$ is divided by ${linear(1, -a)}$?",
        tex(poly_eval(coeffs, a)),
    )


SPECS = [
    family(
        "algebra.linear",
        linear_equation,
        "a linear equation in one unknown (integer, then fractional roots)",
        form="number",
    ),
    family(
        "algebra.quadratic",
        quadratic,
        "a quadratic equation; rational roots, then irrational ones (±); the discriminant is a subtask",
        form="radical",
        steps=True,
    ),
    family(
        "algebra.system",
        system,
        "a 2x2 (then 3x3) linear system with an integer solution; each unknown is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "algebra.evaluate",
        evaluate,
        "evaluate a polynomial expression at given values",
        form="number",
    ),
    family(
        "algebra.exponents",
        exponents,
        "combine powers of a common base: find the exponent",
        form="number",
    ),
    family(
        "algebra.abs_equation",
        abs_equation,
        "an absolute-value equation |ax + b| = c (two solutions)",
        form="number",
    ),
    family(
        "algebra.compose",
        compose,
        "a composition f(g(k)); the inner value is a subtask",
        form="number",
        steps=True,
    ),
    family("algebra.inverse", inverse, "evaluate the inverse of a linear function", form="number"),
    family(
        "ineq.linear", ineq_linear, "a linear inequality; the answer is an interval", form="number"
    ),
    family(
        "ineq.quadratic",
        ineq_quadratic,
        "a quadratic inequality with integer roots; the roots are subtasks",
        form="number",
        steps=True,
    ),
    family("ineq.abs", ineq_abs, "an absolute-value inequality |x - a| < b or > b", form="number"),
    family(
        "poly.expand_coeff",
        expand_coeff,
        "expand a product of linear factors and read one coefficient",
        form="number",
    ),
    family(
        "poly.factor",
        factor,
        "factor a polynomial with integer linear factors completely",
        form="factored",
    ),
    family("poly.roots", roots, "all roots of a cubic with integer roots", form="number"),
    family(
        "poly.remainder",
        remainder,
        "the remainder of a polynomial division by x - a",
        form="number",
    ),
]
"""The algebra families: name, generator, what each asks, the final form of its answers."""
