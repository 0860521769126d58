"""Multi-step word problems, templated with varied names, objects and numbers; every
intermediate quantity is a subtask."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from llmgym.envs.math.build import NAMES, Step, build, decimal, family, money, scale, tex, up_to
from llmgym.tasks import Task

_GOODS = (
    ("notebook", "notebooks", 2, 9), ("apple", "apples", 1, 3), ("book", "books", 8, 30),
    ("sandwich", "sandwiches", 4, 12), ("ticket", "tickets", 5, 40), ("plant", "plants", 3, 25),
    ("candle", "candles", 2, 15), ("mug", "mugs", 4, 18), ("scarf", "scarves", 9, 35),
    ("puzzle", "puzzles", 6, 28), ("bottle of juice", "bottles of juice", 1, 5),
)  # fmt: skip


def shopping(rng: random.Random, d: float) -> Task:
    name = rng.choice(NAMES)
    k = scale(d, 2, 4)
    goods = rng.sample(_GOODS, k)
    cents = d >= 0.5
    lines, steps, costs = [], [], []
    for _, plural, lo, hi in goods:
        qty = rng.randint(2, scale(d, 6, 15))
        price = Fraction(rng.randint(lo * 4, hi * 4), 4) if cents else Fraction(rng.randint(lo, hi))
        cost = qty * price
        costs.append(cost)
        lines.append(f"{qty} {plural} at {money(price)} each")
        steps.append(
            Step(
                f"How many dollars do the {plural} cost?",
                decimal(cost),
                f"{qty} \\times {decimal(price)}",
                after=(),
            )
        )
    total = sum(costs, Fraction(0))
    bill = (int(total) // 20 + 1 + rng.randint(0, 2)) * 20
    steps.append(
        Step(
            "How many dollars does everything cost in total?",
            decimal(total),
            " + ".join(decimal(c) for c in costs),
            after=tuple(range(k)),
        )
    )
    return build(
        f"{name} buys {', '.join(lines[:-1])} and {lines[-1]}, and pays with {money(bill)}.",
        f"How much change, in dollars, does {name} get?",
        decimal(bill - total),
        steps=steps,
        final_work=f"{bill} - {decimal(total)}",
    )


def travel(rng: random.Random, d: float) -> Task:
    name = rng.choice(NAMES)
    vehicle = rng.choice(["drives", "cycles", "rides a scooter", "sails"])
    v1, v2 = rng.randint(4, up_to(d, 15, 90)), rng.randint(4, up_to(d, 15, 90))
    t1: Fraction = Fraction(rng.randint(1, scale(d, 3, 7)))
    t2: Fraction = Fraction(rng.randint(1, scale(d, 3, 7)))
    if d >= 0.5:
        t1, t2 = (
            Fraction(rng.randint(2, 2 * scale(d, 3, 7)), 2),
            Fraction(rng.randint(2, 2 * scale(d, 3, 7)), 4),
        )
    d1, d2 = v1 * t1, v2 * t2
    steps = [
        Step(
            "How many kilometers does the first part cover?",
            decimal(d1),
            f"{v1} \\times {decimal(t1)}",
            after=(),
        ),
        Step(
            "How many kilometers does the second part cover?",
            decimal(d2),
            f"{v2} \\times {decimal(t2)}",
            after=(),
        ),
    ]
    statement = (
        f"{name} {vehicle} for {_hours(t1)} at {v1} km/h, then for {_hours(t2)} at {v2} km/h."
    )
    if d < 0.5:
        return build(
            statement,
            "How many kilometers does the trip cover?",
            decimal(d1 + d2),
            steps=steps,
            final_work=f"{decimal(d1)} + {decimal(d2)}",
            after=(0, 1),
        )
    steps.append(
        Step(
            "How many kilometers does the trip cover in total?",
            decimal(d1 + d2),
            f"{decimal(d1)} + {decimal(d2)}",
            after=(0, 1),
        )
    )
    avg = (d1 + d2) / (t1 + t2)
    return build(
        statement,
        "What is the average speed for the whole trip, in km/h?",
        tex(avg),
        steps=steps,
        final_work=f"\\frac{{{decimal(d1 + d2)}}}{{{decimal(t1 + t2)}}}",
        fmt="Give an exact value (a fraction if needed).",
    )


def _hours(t: Fraction) -> str:
    return f"{decimal(t)} hour{'' if t == 1 else 's'}"


def work_rate(rng: random.Random, d: float) -> Task:
    a_name, b_name = rng.sample(NAMES, 2)
    job = rng.choice(
        ["paint a fence", "fill a pool", "sort the mail", "plant a garden", "clean the gym"]
    )
    a = rng.randint(2, scale(d, 6, 15))
    b = rng.randint(2, scale(d, 6, 15))
    while b == a:
        b += 1
    ra, rb = Fraction(1, a), Fraction(1, b)
    return build(
        f"{a_name} can {job} alone in {a} hours, and {b_name} can do it alone in {b} hours.",
        "How many hours does it take them working together?",
        tex(1 / (ra + rb)),
        steps=[
            Step(
                f"What fraction of the job does {a_name} do per hour?",
                tex(ra),
                f"\\frac{{1}}{{{a}}}",
                after=(),
            ),
            Step(
                f"What fraction of the job does {b_name} do per hour?",
                tex(rb),
                f"\\frac{{1}}{{{b}}}",
                after=(),
            ),
            Step(
                "What fraction of the job do they do per hour together?",
                tex(ra + rb),
                f"{tex(ra)} + {tex(rb)}",
                after=(0, 1),
            ),
        ],
        final_work=f"\\frac{{1}}{{{tex(ra + rb)}}}",
        fmt="Give an exact value (a fraction if needed).",
    )


def age(rng: random.Random, d: float) -> Task:
    older, younger = rng.sample(NAMES, 2)
    m = 2 if d < 0.5 else rng.randint(2, 3)
    k = rng.randint(m + 1, m + scale(d, 2, 5))
    x = rng.randint(2, scale(d, 9, 15)) * (m - 1)
    n = x * (k - m) // (m - 1)  # k x + n = m (x + n)
    times = {2: "twice", 3: "three times"}
    return build(
        f"{older} is {k} times as old as {younger}. In {n} years, {older} will be "
        f"{times[m]} as old as {younger}.",
        f"How old is {older} now?",
        str(k * x),
        steps=[Step(f"How old is {younger} now?", str(x), f"\\frac{{{n}({m} - 1)}}{{{k} - {m}}}")],
        final_work=f"{k} \\times {x}",
    )


def savings(rng: random.Random, d: float) -> Task:
    name = rng.choice(NAMES)
    thing = rng.choice(
        ["a bike", "a telescope", "a laptop", "a guitar", "a tent", "concert tickets"]
    )
    weekly = rng.randint(2, up_to(d, 10, 60)) * 5
    have = rng.randint(0, up_to(d, 20, 300))
    goal = (
        have
        + rng.randint(2, up_to(d, 10, 80)) * weekly
        - (rng.randint(0, weekly - 1) if d >= 0.4 else 0)
    )
    short = goal - have
    return build(
        f"{name} wants {thing} that costs {money(goal)}, has {money(have)} saved, and saves {money(weekly)} a week.",
        f"How many weeks does {name} need to save to afford it?",
        str(math.ceil(Fraction(short, weekly))),
        steps=[Step("How many more dollars are needed?", str(short), f"{goal} - {have}")],
        final_work=f"\\lceil \\frac{{{short}}}{{{weekly}}} \\rceil",
    )


def inventory(rng: random.Random, d: float) -> Task:
    shop = rng.choice(["bakery", "bookshop", "florist", "toy store", "garden center"])
    thing = rng.choice(["items", "boxes", "crates", "parcels"])
    ops = scale(d, 2, 6)
    count = start = rng.randint(3, up_to(d, 12, 60)) * 20
    sentences, steps = [], []
    for i in range(ops):
        kind = rng.choice(
            ["sell", "deliver", "fraction", "percent"] if d >= 0.3 else ["sell", "deliver"]
        )
        if kind == "sell" and count > 2:
            n = rng.randint(1, count - 1)
            sentences.append(f"it sells {n} {thing}")
            new, work = count - n, f"{count} - {n}"
        elif kind == "fraction" and count % 4 == 0:
            den = rng.choice([den for den in (2, 4, 5) if count % den == 0] or [2])
            sentences.append(f"it gives away $\\frac{{1}}{{{den}}}$ of what it has")
            new, work = count - count // den, f"{count} - \\frac{{{count}}}{{{den}}}"
        elif kind == "percent" and count % 20 == 0:
            pct = rng.choice([5, 10, 15, 20, 25, 50])
            sentences.append(f"{pct}\\% of the stock is damaged and thrown out")
            new, work = count - count * pct // 100, f"{count} - {count} \\times {pct}\\%"
        else:
            n = rng.randint(2, up_to(d, 20, 200))
            sentences.append(f"a delivery brings {n} more")
            new, work = count + n, f"{count} + {n}"
        count = new
        sentences[-1] = f"({i + 1}) {sentences[-1]}"
        if i < ops - 1:
            steps.append(Step(f"How many {thing} are there after ({i + 1})?", str(count), work))
    return build(
        f"A {shop} starts the day with {start} {thing}. Then, in order: {'; '.join(sentences)}.",
        f"How many {thing} does the {shop} have at the end?",
        str(count),
        steps=steps,
        final_work=work,
    )


def wages(rng: random.Random, d: float) -> Task:
    name = rng.choice(NAMES)
    rate = Fraction(rng.randint(24, up_to(d, 60, 200)), 2 if d >= 0.4 else 1)
    hours = 40 + rng.randint(1, scale(d, 6, 20))
    regular = 40 * rate
    overtime = (hours - 40) * rate * Fraction(3, 2)
    return build(
        f"{name} earns {money(rate)} per hour, "
        "and 1.5 times that rate for each hour beyond 40 in a week. "
        f"Last week {name} worked {hours} hours.",
        f"How many dollars did {name} earn last week?",
        decimal(regular + overtime),
        steps=[
            Step(
                "How many dollars are earned for the first 40 hours?",
                decimal(regular),
                f"40 \\times {decimal(rate)}",
                after=(),
            ),
            Step(
                "How many dollars are earned for the overtime hours?",
                decimal(overtime),
                f"{hours - 40} \\times 1.5 \\times {decimal(rate)}",
                after=(),
            ),
        ],
        final_work=f"{decimal(regular)} + {decimal(overtime)}",
        after=(0, 1),
    )


SPECS = [
    family(
        "word.shopping",
        shopping,
        "buy several goods and get change; each cost and the total are subtasks",
        form="number",
        steps=True,
    ),
    family(
        "word.travel",
        travel,
        "distance over two legs at different speeds (then average speed); each leg is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "word.work_rate",
        work_rate,
        "two workers together (combined rates); each rate is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "word.age",
        age,
        "an age puzzle (a linear equation); the younger age is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "word.savings",
        savings,
        "weeks of saving to reach a goal (rounding up); the shortfall is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "word.inventory",
        inventory,
        "a chain of 2-6 stock changes (sales, deliveries, fractions, percentages); each count is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "word.wages",
        wages,
        "weekly pay with overtime at 1.5x; regular and overtime pay are subtasks",
        form="number",
        steps=True,
    ),
]
"""The word-problem families: name, generator, what each asks, the final form of its answers."""
