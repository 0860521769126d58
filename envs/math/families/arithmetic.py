"""Arithmetic families: integers, order of operations, powers, decimals, fractions, percentages, ratios."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

from llmgym.envs.math.build import (
    NAMES,
    Step,
    build,
    decimal,
    family,
    money,
    nonzero,
    paren,
    scale,
    tex,
    up_to,
)
from llmgym.tasks import Task


def add_small(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 9, 99)
    a, b = rng.randint(1, hi), rng.randint(1, hi)
    return build("", f"What is {a} + {b}?", str(a + b))


def add_sub(rng: random.Random, d: float) -> Task:
    terms = scale(d, 2, 7)
    hi = up_to(d, 20, 99_999)
    values = [rng.randint(1, hi)] + [nonzero(rng, hi) for _ in range(terms - 1)]
    text = str(values[0]) + "".join(f" {'-' if v < 0 else '+'} {abs(v)}" for v in values[1:])
    return build("", f"Compute ${text}$.", str(sum(values)))


def mul(rng: random.Random, d: float) -> Task:
    factors = [rng.randint(2, up_to(d, 9, 9999)), rng.randint(2, up_to(d, 9, 999))]
    if d >= 0.7:
        factors.append(nonzero(rng, 12))
    text = " \\times ".join(paren(f) for f in factors)
    return build("", f"Compute ${text}$.", str(math.prod(factors)))


def div(rng: random.Random, d: float) -> Task:
    divisor = rng.randint(2, up_to(d, 9, 999))
    quotient = rng.randint(2, up_to(d, 12, 9999))
    if d >= 0.5 and rng.random() < 0.5:
        quotient = -quotient
    return build("", f"Compute ${paren(divisor * quotient)} \\div {divisor}$.", str(quotient))


Node = Any  # an int leaf or a tuple (op, left, right)
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
_SYM = {"+": "+", "-": "-", "*": "\\times", "/": "\\div"}


def _tree(rng: random.Random, depth: int, hi: int) -> Node:
    """A random expression tree ``(op, left, right)`` / ``int`` whose divisions are exact."""
    if depth == 0:
        return rng.randint(1, hi)
    left = _tree(rng, depth - 1, hi)
    right = _tree(rng, rng.randint(0, depth - 1), hi)
    op = rng.choice("+-*/")
    if op == "/":
        lv, rv = _value(left), _value(right)
        if rv == 0 or (lv / rv).denominator != 1:
            op = "*"
    return (op, left, right)


def _value(node: Node) -> Fraction:
    if isinstance(node, int):
        return Fraction(node)
    op, left, right = node
    a, b = _value(left), _value(right)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else a}[op]


def _render(node: Node, groups: list[tuple[Node, str]]) -> str:
    """LaTeX with the parentheses precedence needs; each parenthesized node goes to ``groups``
    (children before parents) with its text."""
    if isinstance(node, int):
        return str(node)
    op, left, right = node
    texts = []
    for child, is_right in ((left, False), (right, True)):
        text = _render(child, groups)
        if not isinstance(child, int):
            inner = _PREC[child[0]]
            outer = _PREC[op]
            if inner < outer or (is_right and inner == outer and op in "-/"):
                groups.append((child, text))
                text = f"({text})"
        texts.append(text)
    return f"{texts[0]} {_SYM[op]} {texts[1]}"


def _flat(node: Node) -> str:
    """The node with its operands evaluated: what one step of the worked solution computes."""
    op, left, right = node
    return f"{paren(_value(left))} {_SYM[op]} {paren(_value(right))}"


def order_ops(rng: random.Random, d: float) -> Task:
    depth = scale(d, 2, 5)
    hi = up_to(d, 9, 30)
    while True:
        root = _tree(rng, depth, hi)
        groups: list[tuple[Node, str]] = []
        text = _render(root, groups)
        value = _value(root)
        if value.denominator == 1 and groups and abs(value) < 10**7:
            break
    steps = []
    for node, group_text in groups:
        inside = [i for i, (other, _) in enumerate(groups) if _contains(node, other)]
        steps.append(
            Step(
                f"What is the value of $({group_text})$?",
                tex(_value(node)),
                _flat(node),
                after=tuple(inside),
            )
        )
    top = tuple(
        i
        for i, (node, _) in enumerate(groups)
        if not any(_contains(other, node) for other, _ in groups if other is not node)
    )
    return build(
        "", f"Evaluate ${text}$.", tex(value), steps=steps, final_work=_flat(root), after=top
    )


def _contains(outer: Node, inner: Node) -> bool:
    """Whether ``inner`` is a proper sub-node of ``outer`` (by identity)."""
    for child in outer[1:]:
        if child is inner or (isinstance(child, tuple) and _contains(child, inner)):
            return True
    return False


def powers(rng: random.Random, d: float) -> Task:
    terms = scale(d, 1, 3)
    total = 0
    parts = []
    for i in range(terms):
        base = nonzero(rng, scale(d, 5, 12)) if d >= 0.3 else rng.randint(2, 9)
        exp = rng.randint(2, scale(d, 3, 6))
        sign = 1 if i == 0 or rng.random() < 0.5 else -1
        total += sign * base**exp
        text = f"({base})^{exp}" if base < 0 else f"{base}^{exp}"
        parts.append(text if i == 0 else f"{'+' if sign > 0 else '-'} {text}")
    return build("", f"Compute ${' '.join(parts)}$.", str(total))


def decimals(rng: random.Random, d: float) -> Task:
    places = scale(d, 1, 3)
    hi = up_to(d, 99, 99_999)
    a = Fraction(rng.randint(1, hi), 10**places)
    b = Fraction(rng.randint(1, hi), 10 ** rng.randint(1, places))
    op = rng.choice("+-*") if d >= 0.3 else "+"
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    sym = {"+": "+", "-": "-", "*": "\\times"}[op]
    return build("", f"Compute ${decimal(a)} {sym} {decimal(b)}$.", decimal(value))


def _fraction(rng: random.Random, hi: int, *, signed: bool) -> Fraction:
    den = rng.randint(2, hi)
    num = rng.randint(1, 2 * den)
    if num % den == 0:
        num += 1
    value = Fraction(num, den)
    return -value if signed and rng.random() < 0.4 else value


def frac_add(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 4)
    values = [_fraction(rng, up_to(d, 6, 24), signed=d >= 0.5) for _ in range(n)]
    text = tex(values[0]) + "".join(f" {'-' if v < 0 else '+'} {tex(abs(v))}" for v in values[1:])
    lcd = math.lcm(*(v.denominator for v in values))
    total = sum(values, Fraction(0))
    lcd_step = Step(
        "What is the least common denominator of the fractions?",
        str(lcd),
        f"\\operatorname{{lcm}}({', '.join(str(v.denominator) for v in values)})",
    )
    return build(
        "",
        f"Compute ${text}$ in lowest terms.",
        tex(total),
        steps=[lcd_step],
        final_work=text,
        fmt="Write a fraction as \\frac{p}{q} in lowest terms.",
    )


def frac_mul_div(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 4)
    values = [_fraction(rng, up_to(d, 9, 20), signed=d >= 0.5) for _ in range(n)]
    total = values[0]
    text = paren(values[0])
    for v in values[1:]:
        if rng.random() < 0.5:
            total *= v
            text += f" \\times {paren(v)}"
        else:
            total /= v
            text += f" \\div {paren(v)}"
    return build(
        "",
        f"Compute ${text}$.",
        tex(total),
        fmt="Write a fraction as \\frac{p}{q} in lowest terms.",
    )


def frac_of(rng: random.Random, d: float) -> Task:
    den = rng.randint(2, scale(d, 5, 16))
    num = rng.randint(1, den - 1)
    frac = Fraction(num, den)
    whole = frac.denominator * rng.randint(2, up_to(d, 10, 400))
    name = rng.choice(NAMES)
    thing = rng.choice(["stickers", "marbles", "stamps", "coins", "cards", "beads"])
    return build(
        f"{name} has {whole} {thing} and gives away ${tex(frac)}$ of them.",
        f"How many {thing} does {name} give away?",
        str(frac * whole),
    )


def percent_of(rng: random.Random, d: float) -> Task:
    p = Fraction(
        rng.choice([10, 20, 25, 50, 75, 5, 15, 30, 40, 60]) if d < 0.4 else rng.randint(1, 199)
    )
    base = 20 * rng.randint(1, up_to(d, 20, 500))
    if d >= 0.8:
        p = Fraction(rng.randint(1, 999), 10)
    value = Fraction(p) * base / 100
    return build("", f"What is ${decimal(p)}\\%$ of ${base}$?", decimal(value))


def percent_change(rng: random.Random, d: float) -> Task:
    old = rng.randint(2, up_to(d, 20, 900)) * 4
    pct = Fraction(rng.randint(1, scale(d, 10, 99)) * (5 if d < 0.4 else 1))
    if d >= 0.7:
        pct = Fraction(rng.randint(1, 399), 4)
    up = rng.random() < 0.5 or pct >= 100
    new = old * (1 + pct / 100) if up else old * (1 - pct / 100)
    thing = rng.choice(["The price of a bicycle", "The monthly rent", "A share price"])
    change = abs(new - old)
    step = Step(
        f"By how much did the value {'increase' if up else 'decrease'}?",
        decimal(change),
        f"{decimal(new)} - {decimal(old)}" if up else f"{decimal(old)} - {decimal(new)}",
    )
    return build(
        f"{thing} changed from ${decimal(old)}$ to ${decimal(new)}$.",
        f"By what percent did it {'increase' if up else 'decrease'}?",
        f"{decimal(pct)}\\%",
        steps=[step],
        final_work=f"\\frac{{{decimal(change)}}}{{{decimal(old)}}} \\times 100\\%",
        fmt="Answer as a percentage, with a % sign.",
    )


def percent_discount(rng: random.Random, d: float) -> Task:
    price = rng.randint(4, up_to(d, 40, 400)) * 5
    off = rng.choice([10, 20, 25, 30, 40, 50]) if d < 0.5 else rng.randint(5, 60)
    tax = rng.choice([5, 8, 10]) if d < 0.5 else rng.randint(3, 15)
    discount = Fraction(price * off, 100)
    sale = price - discount
    with_tax = sale * (1 + Fraction(tax, 100))
    item = rng.choice(["jacket", "lamp", "tent", "guitar", "backpack", "printer"])
    steps = [
        Step(
            "How much is the discount in dollars?", decimal(discount), f"{price} \\times {off}\\%"
        ),
        Step("What is the sale price before tax?", decimal(sale), f"{price} - {decimal(discount)}"),
    ]
    if d < 0.3:
        return build(
            f"A {item} costs {money(price)} and is on sale for {off}\\% off.",
            "What is the sale price in dollars?",
            decimal(sale),
            steps=steps[:1],
            final_work=f"{price} - {decimal(discount)}",
        )
    return build(
        f"A {item} costs {money(price)}. It is on sale for {off}\\% off, and a {tax}\\% sales tax is "
        "added to the sale price.",
        "What is the final price in dollars?",
        decimal(with_tax),
        steps=steps,
        final_work=f"{decimal(sale)} \\times {decimal(1 + Fraction(tax, 100))}",
        fmt="Give the exact amount (no rounding).",
    )


def ratio_share(rng: random.Random, d: float) -> Task:
    k = scale(d, 2, 4)
    parts = [rng.randint(1, scale(d, 5, 12)) for _ in range(k)]
    if len(set(parts)) == 1:
        parts[-1] += 1
    unit = rng.randint(2, up_to(d, 12, 250))
    total = sum(parts) * unit
    people = rng.sample(NAMES, k)
    who = rng.randrange(k)
    steps = [
        Step("How many parts are there in total?", str(sum(parts)), " + ".join(map(str, parts))),
        Step("How much is one part worth?", str(unit), f"{total} \\div {sum(parts)}"),
    ]
    return build(
        f"{', '.join(people[:-1])} and {people[-1]} share {money(total)} in the ratio "
        f"${':'.join(map(str, parts))}$ (in that order).",
        f"How many dollars does {people[who]} get?",
        str(parts[who] * unit),
        steps=steps,
        final_work=f"{parts[who]} \\times {unit}",
    )


def ratio_proportion(rng: random.Random, d: float) -> Task:
    unit_cents = rng.randint(5, up_to(d, 40, 900)) * 5
    unit = Fraction(unit_cents, 100)
    n = rng.randint(2, scale(d, 6, 24))
    m = rng.randint(2, scale(d, 12, 60))
    while m == n:
        m += 1
    item = rng.choice(["notebooks", "pens", "muffins", "tickets", "candles", "batteries"])
    return build(
        f"{n} {item} cost {money(unit * n)}.",
        f"At the same price each, how many dollars do {m} {item} cost?",
        decimal(unit * m),
        steps=[
            Step(
                f"How many dollars does one of the {item} cost?",
                decimal(unit),
                f"{decimal(unit * n)} \\div {n}",
            )
        ],
        final_work=f"{m} \\times {decimal(unit)}",
    )


SPECS = [
    family(
        "arith.add_small",
        add_small,
        "a + b; at difficulty 0 two digits 1..9 (the easiest family)",
        form="number",
    ),
    family("arith.add_sub", add_sub, "a sum of 2-7 signed integers of 1-5 digits", form="number"),
    family("arith.mul", mul, "a product of two or three integers", form="number"),
    family("arith.div", div, "exact integer division (long division)", form="number"),
    family(
        "arith.order_ops",
        order_ops,
        "an expression with + - × ÷ and parentheses; each parenthesized part is a subtask",
        form="number",
        steps=True,
    ),
    family("arith.powers", powers, "signed integer powers and their sums", form="number"),
    family("arith.decimal", decimals, "sums and products of decimals (exact)", form="number"),
    family(
        "frac.add",
        frac_add,
        "sums of fractions in lowest terms; the least common denominator is a subtask",
        form="fraction",
        steps=True,
    ),
    family("frac.mul_div", frac_mul_div, "products and quotients of fractions", form="fraction"),
    family("frac.of", frac_of, "a fraction of a quantity (a word problem)", form="number"),
    family("percent.of", percent_of, "p% of a number", form="number"),
    family(
        "percent.change",
        percent_change,
        "percent increase or decrease; the change is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "percent.discount",
        percent_discount,
        "a discounted price with sales tax (multi-step; each amount is a subtask)",
        form="number",
        steps=True,
    ),
    family(
        "ratio.share",
        ratio_share,
        "share a quantity in a ratio; total parts and one part are subtasks",
        form="number",
        steps=True,
    ),
    family(
        "ratio.proportion",
        ratio_proportion,
        "direct proportion via the unit rate (a subtask)",
        form="number",
        steps=True,
    ),
]
"""The arithmetic families: name, generator, what each asks, the final form of its answers."""
