"""Logarithm, matrix, vector, complex-number and calculus families (polynomial calculus, exact)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction

from llmgym.envs.math.build import (
    Step,
    build,
    coef_term,
    family,
    linear,
    matrix,
    nonzero,
    paren,
    poly,
    poly_at,
    scale,
    tex,
    up_to,
)
from llmgym.envs.math.families.algebra import det, poly_eval, poly_mul
from llmgym.tasks import Task

MATRIX_FORMAT = "Write a matrix as \\begin{pmatrix} a & b \\\\ c & d \\end{pmatrix}."


def log_eval(rng: random.Random, d: float) -> Task:
    c = rng.choice([2, 3, 5]) if d < 0.5 else rng.choice([2, 3, 5, 6, 7, 10])
    q = 1 if d < 0.4 else rng.randint(1, 3)
    p = rng.randint(1, scale(d, 5, 8))
    if d >= 0.3 and rng.random() < 0.4:
        p = -p
    base = c**q
    x = Fraction(c) ** p
    x_text = tex(x) if x.denominator == 1 else f"\\frac{{1}}{{{x.denominator}}}"
    return build(
        "", f"What is $\\log_{{{base}}} {x_text}$?", tex(Fraction(p, q)), fmt="Give an exact value."
    )


def log_equation(rng: random.Random, d: float) -> Task:
    b = rng.choice([2, 3, 5]) if d < 0.5 else rng.choice([2, 3, 4, 5, 10])
    if d < 0.6:
        k = rng.randint(1, scale(d, 3, 5))
        a, c = rng.randint(1, scale(d, 1, 5)), rng.randint(-20, 20)
        value = b**k
        x = Fraction(value - c, a)
        return build(
            "",
            f"Solve $\\log_{{{b}}}({linear(a, c)}) = {k}$.",
            tex(x),
            steps=[Step(f"What is the value of ${linear(a, c)}$?", str(value), f"{b}^{k}")],
            final_work=f"\\frac{{{value} - {paren(c)}}}{{{a}}}",
        )
    k = rng.randint(3, scale(d, 5, 9))
    i = rng.randint(1, k // 2 - (k % 2 == 0))
    x, shift = 2**i, 2 ** (k - i) - 2**i  # x (x + shift) = 2^k
    return build(
        "",
        f"Solve $\\log_2 x + \\log_2(x + {shift}) = {k}$.",
        str(x),
        steps=[Step(f"What is the value of $x(x + {shift})$?", str(2**k), f"2^{{{k}}}")],
    )


def log_rules(rng: random.Random, d: float) -> Task:
    b = rng.choice([2, 3, 5]) if d < 0.5 else rng.choice([2, 3, 4, 5, 6, 10])
    k = rng.randint(1, scale(d, 3, 6))
    p = rng.randint(2, up_to(d, 9, 60))
    # m * n / p = b^k: n takes b^j and a divisor r of p, m the rest (never a search over b^k p).
    while True:
        r = rng.choice([q for q in range(1, p + 1) if p % q == 0])
        j = rng.randint(0, k)
        n, m = b**j * r, b ** (k - j) * p // r
        if n >= 2 and m >= 2:
            break
    return build(
        "", f"What is $\\log_{{{b}}} {m} + \\log_{{{b}}} {n} - \\log_{{{b}}} {p}$?", str(k)
    )


def _minor(m: Sequence[Sequence[int]], j: int) -> list[list[int]]:
    return [list(row[:j]) + list(row[j + 1 :]) for row in m[1:]]


def determinant(rng: random.Random, d: float) -> Task:
    hi = scale(d, 5, 12)
    if d < 0.4:
        m = [[rng.randint(-hi, hi) for _ in range(2)] for _ in range(2)]
        return build("", f"What is the determinant of ${matrix(m)}$?", str(det(m)))
    m = [[rng.randint(-hi, hi) for _ in range(3)] for _ in range(3)]
    minors = [det(_minor(m, j)) for j in range(3)]
    total = sum((-1) ** j * m[0][j] * minors[j] for j in range(3))
    steps = []
    for j in range(3):
        (p, q), (r, t) = _minor(m, j)
        steps.append(
            Step(
                f"What is the minor $M_{{1{j + 1}}}$ (the determinant left after deleting row 1 "
                f"and column {j + 1})?",
                str(minors[j]),
                f"{paren(p)} \\cdot {paren(t)} - {paren(q)} \\cdot {paren(r)}",
                after=(),
            )
        )
    work = " - ".join(f"{paren(m[0][j])} \\cdot {paren(minors[j])}" for j in (0, 1))
    work += f" + {paren(m[0][2])} \\cdot {paren(minors[2])}"
    return build(
        "",
        f"What is the determinant of ${matrix(m)}$?",
        str(total),
        steps=steps,
        final_work=work,
        after=(0, 1, 2),
    )


def matmul(rng: random.Random, d: float) -> Task:
    hi = scale(d, 4, 10)
    n, k, p = (2, 2, 2) if d < 0.5 else (rng.randint(2, 3), rng.randint(2, 3), rng.randint(2, 3))
    a = [[rng.randint(-hi, hi) for _ in range(k)] for _ in range(n)]
    b = [[rng.randint(-hi, hi) for _ in range(p)] for _ in range(k)]
    c = [[sum(a[i][t] * b[t][j] for t in range(k)) for j in range(p)] for i in range(n)]
    return build("", f"Compute the product ${matrix(a)}{matrix(b)}$.", matrix(c), fmt=MATRIX_FORMAT)


def inverse(rng: random.Random, d: float) -> Task:
    hi = scale(d, 4, 9)
    while True:
        m = [[rng.randint(-hi, hi) for _ in range(2)] for _ in range(2)]
        size = det(m)
        if size != 0 and (d >= 0.5 or abs(size) == 1):
            break
    (a, b), (c, e) = m
    inv = [[Fraction(e, size), Fraction(-b, size)], [Fraction(-c, size), Fraction(a, size)]]
    return build(
        "",
        f"What is the inverse of ${matrix(m)}$?",
        matrix(inv),
        steps=[
            Step(
                "What is the determinant of the matrix?",
                str(size),
                f"{paren(a)} \\cdot {paren(e)} - {paren(b)} \\cdot {paren(c)}",
            )
        ],
        fmt=MATRIX_FORMAT + " Use fractions where needed.",
    )


def vector_products(rng: random.Random, d: float) -> Task:
    n = 2 if d < 0.3 else 3
    hi = scale(d, 5, 12)
    u = [rng.randint(-hi, hi) for _ in range(n)]
    v = [rng.randint(-hi, hi) for _ in range(n)]
    if d >= 0.6 and rng.random() < 0.5:
        cross = (u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0])
        return build(
            f"Let $u = {show(u)}$ and $v = {show(v)}$.",
            "What is the cross product $u \\times v$?",
            show(cross),
            fmt="Give the vector as an ordered triple $(a, b, c)$.",
        )
    return build(
        f"Let $u = {show(u)}$ and $v = {show(v)}$.",
        "What is the dot product $u \\cdot v$?",
        str(sum(a * b for a, b in zip(u, v, strict=True))),
    )


def show(w: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, w)) + ")"


def complex_tex(re_part: Fraction, im_part: Fraction) -> str:
    """``a + bi`` in LaTeX: ``3 - 4i``, ``\\frac{1}{2}i``, ``-2``, ``0``.

    >>> complex_tex(Fraction(3), Fraction(-4)), complex_tex(Fraction(0), Fraction(1, 2))
    ('3 - 4i', '\\\\frac{1}{2}i')
    """
    text = tex(re_part) if re_part else ""
    term = coef_term(im_part, "i", first=not text)
    return (text + term) or "0"


def complex_arith(rng: random.Random, d: float) -> Task:
    hi = scale(d, 5, 12)
    a, b, c, e = (nonzero(rng, hi) for _ in range(4))
    z, w = complex_tex(Fraction(a), Fraction(b)), complex_tex(Fraction(c), Fraction(e))
    if d < 0.5:
        op = rng.choice("+-*")
        if op == "+":
            re_part, im_part, sym = a + c, b + e, "+"
        elif op == "-":
            re_part, im_part, sym = a - c, b - e, "-"
        else:
            re_part, im_part, sym = a * c - b * e, a * e + b * c, ""
        text = f"({z}) {sym} ({w})" if sym else f"({z})({w})"
        return build(
            "",
            f"Compute ${text}$, where $i^2 = -1$.",
            complex_tex(Fraction(re_part), Fraction(im_part)),
            fmt="Write the answer in the form $a + bi$.",
        )
    norm = c * c + e * e
    re_q, im_q = Fraction(a * c + b * e, norm), Fraction(b * c - a * e, norm)
    return build(
        "",
        f"Compute $\\frac{{{z}}}{{{w}}}$, where $i^2 = -1$.",
        complex_tex(re_q, im_q),
        fmt="Write the answer in the form $a + bi$ with exact fractions.",
    )


def _derivative(coeffs: Sequence[int | Fraction]) -> list[int | Fraction]:
    return [i * c for i, c in enumerate(coeffs)][1:] or [0]


def _antiderivative(coeffs: Sequence[int | Fraction]) -> list[Fraction]:
    return [Fraction(0)] + [Fraction(c, i + 1) for i, c in enumerate(coeffs)]


def _random_poly(rng: random.Random, degree: int, hi: int) -> list[int]:
    return [rng.randint(-hi, hi) for _ in range(degree)] + [nonzero(rng, hi)]


def derivative(rng: random.Random, d: float) -> Task:
    hi = scale(d, 5, 9)
    a = rng.randint(-scale(d, 3, 5), scale(d, 3, 5))
    if d < 0.6:
        f = _random_poly(rng, scale(d, 2, 5), hi)
        f_text = poly(f)
    else:
        g, h = _random_poly(rng, 2, hi), _random_poly(rng, 1, hi)
        f = poly_mul(g, h)
        f_text = f"({poly(g)})({poly(h)})"
    df = _derivative(f)
    return build(
        f"Let $f(x) = {f_text}$.",
        f"What is $f'({a})$?",
        tex(poly_eval(df, a)),
        steps=[Step("What is $f'(x)$?", poly(df), "f'(x)", form="polynomial")],
        final_work=poly_at(df, a),
    )


def integral(rng: random.Random, d: float) -> Task:
    f = _random_poly(rng, scale(d, 1, 4), scale(d, 4, 9))
    lo = rng.randint(-scale(d, 2, 5), scale(d, 2, 4))
    hi = lo + rng.randint(1, scale(d, 3, 6))
    big_f = _antiderivative(f)
    f_hi, f_lo = poly_eval(big_f, hi), poly_eval(big_f, lo)
    return build(
        "",
        f"Compute $\\int_{{{lo}}}^{{{hi}}} \\left({poly(f)}\\right)\\,dx$.",
        tex(f_hi - f_lo),
        steps=[
            Step(
                f"Let $F$ be the antiderivative of the integrand with constant term zero. What is $F({hi})$?",
                tex(f_hi),
                poly_at(big_f, hi),
                after=(),
            ),
            Step(f"With the same $F$, what is $F({lo})$?", tex(f_lo), poly_at(big_f, lo), after=()),
        ],
        final_work=f"{paren(f_hi)} - {paren(f_lo)}",
        fmt="Give an exact value (a fraction if needed).",
        after=(0, 1),
    )


def limit(rng: random.Random, d: float) -> Task:
    hi = scale(d, 5, 12)
    if d < 0.4:
        degree = rng.randint(1, 3)
        num, den = _random_poly(rng, degree, hi), _random_poly(rng, degree, hi)
        return build(
            "",
            f"What is $\\lim_{{x \\to \\infty}} \\frac{{{poly(num)}}}{{{poly(den)}}}$?",
            tex(Fraction(num[-1], den[-1])),
            fmt="Give an exact value.",
        )
    a = nonzero(rng, scale(d, 3, 6))
    p, q = _random_poly(rng, 1, hi), _random_poly(rng, 1, hi)
    while poly_eval(q, a) == 0:
        q[0] += 1
    num, den = poly_mul([-a, 1], p), poly_mul([-a, 1], q)
    return build(
        "",
        f"What is $\\lim_{{x \\to {a}}} \\frac{{{poly(num)}}}{{{poly(den)}}}$?",
        tex(poly_eval(p, a) / poly_eval(q, a)),
        fmt="Give an exact value.",
    )


def tangent(rng: random.Random, d: float) -> Task:
    f = _random_poly(rng, scale(d, 2, 4), scale(d, 4, 8))
    a = nonzero(rng, scale(d, 3, 5))
    fa, slope = poly_eval(f, a), poly_eval(_derivative(f), a)
    return build(
        f"Let $f(x) = {poly(f)}$ and let $L$ be the tangent line to the graph of $f$ at $x = {a}$.",
        "What is the $y$-intercept of $L$?",
        tex(fa - slope * a),
        steps=[
            Step(f"What is $f({a})$?", tex(fa), poly_at(f, a), after=()),
            Step(
                f"What is $f'({a})$, the slope of $L$?",
                tex(slope),
                poly_at(_derivative(f), a),
                after=(),
            ),
        ],
        final_work=f"{paren(fa)} - {paren(slope)} \\cdot {paren(a)}",
        after=(0, 1),
    )


SPECS = [
    family(
        "log.eval",
        log_eval,
        "evaluate log_b(x) exactly (integer, negative, then fractional values)",
        form="number",
    ),
    family(
        "log.equation",
        log_equation,
        "a logarithmic equation; the argument's value is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "log.rules",
        log_rules,
        "combine logarithms with the product and quotient rules",
        form="number",
    ),
    family(
        "matrix.det",
        determinant,
        "a 2x2 or 3x3 determinant; the first-row minors of a 3x3 are subtasks",
        form="number",
        steps=True,
    ),
    family("matrix.mul", matmul, "a matrix product (2x2, then rectangular)", form="number"),
    family(
        "matrix.inverse",
        inverse,
        "the inverse of a 2x2 matrix; the determinant is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "vector.products",
        vector_products,
        "dot products, then cross products of 3-vectors",
        form="number",
    ),
    family(
        "complex.arith",
        complex_arith,
        "products and quotients of complex numbers in a + bi form",
        form="complex",
    ),
    family(
        "calc.derivative",
        derivative,
        "f'(a) for a polynomial (then a product); the derivative f'(x) is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "calc.integral",
        integral,
        "a definite integral of a polynomial; the antiderivative at each limit is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "calc.limit",
        limit,
        "limits of rational functions (at infinity, then removable singularities)",
        form="number",
    ),
    family(
        "calc.tangent",
        tangent,
        "the y-intercept of a tangent line; f(a) and f'(a) are subtasks",
        form="number",
        steps=True,
    ),
]
"""The logarithm, matrix, vector, complex-number and calculus families: name, generator, what
each asks, the final form of its answers."""
