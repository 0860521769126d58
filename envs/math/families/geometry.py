"""Geometry, trigonometry and unit families: areas, volumes, circles, coordinates, exact trig values, conversions."""

from __future__ import annotations

import random
from fractions import Fraction

from llmgym.envs.math.build import (
    Step,
    build,
    decimal,
    family,
    nonzero,
    paren,
    scale,
    sqrt_tex,
    terminates,
    tex,
    up_to,
)
from llmgym.tasks import Task

PI_FORMAT = "Give an exact answer in terms of \\pi."
DEGREES_FORMAT = "Give the answer in degrees, as a number."


def pi_tex(coef: Fraction | int) -> str:
    """LaTeX for ``coef * pi``: ``25\\pi``, ``\\frac{32\\pi}{3}``."""
    coef = Fraction(coef)
    num = "" if coef.numerator == 1 else str(coef.numerator)
    if coef.denominator == 1:
        return f"{num}\\pi"
    return f"\\frac{{{num}\\pi}}{{{coef.denominator}}}"


def _number(value: Fraction | int) -> str:
    """A terminating decimal when it is one, else a fraction."""
    return decimal(value) if terminates(value) else tex(value)


def area(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 12, 120)
    w, h = rng.randint(2, hi), rng.randint(2, hi)
    if d >= 0.6:
        t = rng.randint(2, hi)
        rect, tri = w * h, Fraction(w * t, 2)
        return build(
            f"A figure is a {w} by {h} rectangle with a triangle on top whose base is the "
            f"rectangle's top side of length {w} and whose height is {t}.",
            "What is the area of the figure?",
            _number(rect + tri),
            steps=[
                Step("What is the area of the rectangle?", str(rect), f"{w} \\times {h}", after=()),
                Step(
                    "What is the area of the triangle?",
                    _number(tri),
                    f"\\frac{{1}}{{2}} \\times {w} \\times {t}",
                    after=(),
                ),
            ],
            final_work=f"{rect} + {_number(tri)}",
            after=(0, 1),
        )
    shape = rng.choice(
        ["rectangle", "triangle", "trapezoid"] if d >= 0.3 else ["rectangle", "triangle"]
    )
    if shape == "rectangle":
        return build("", f"What is the area of a rectangle with sides {w} and {h}?", str(w * h))
    if shape == "triangle":
        return build(
            "",
            f"What is the area of a triangle with base {w} and height {h}?",
            _number(Fraction(w * h, 2)),
        )
    top = rng.randint(1, hi)
    return build(
        "",
        f"What is the area of a trapezoid with parallel sides {w} and {top} and height {h}?",
        _number(Fraction((w + top) * h, 2)),
    )


def circle(rng: random.Random, d: float) -> Task:
    r = rng.randint(1, up_to(d, 12, 80))
    if d >= 0.6:
        inner = rng.randint(1, r + 4)
        outer = inner + rng.randint(1, up_to(d, 6, 30))
        return build(
            f"A ring is the region between two concentric circles of radii {inner} and {outer}.",
            "What is the area of the ring?",
            pi_tex(outer**2 - inner**2),
            steps=[
                Step(
                    "What is the area of the larger circle?",
                    pi_tex(outer**2),
                    f"\\pi \\cdot {outer}^2",
                    after=(),
                    form="pi",
                ),
                Step(
                    "What is the area of the smaller circle?",
                    pi_tex(inner**2),
                    f"\\pi \\cdot {inner}^2",
                    after=(),
                    form="pi",
                ),
            ],
            final_work=f"{pi_tex(outer**2)} - {pi_tex(inner**2)}",
            fmt=PI_FORMAT,
            after=(0, 1),
        )
    given = rng.choice(["radius", "diameter"]) if d >= 0.3 else "radius"
    size = r if given == "radius" else 2 * r
    if rng.random() < 0.5:
        return build(
            "", f"What is the area of a circle with {given} {size}?", pi_tex(r * r), fmt=PI_FORMAT
        )
    return build(
        "",
        f"What is the circumference of a circle with {given} {size}?",
        pi_tex(2 * r),
        fmt=PI_FORMAT,
    )


_TRIPLES = ((3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (20, 21, 29), (9, 40, 41))


def pythagoras(rng: random.Random, d: float) -> Task:
    if d < 0.5:
        k = rng.randint(1, scale(d, 3, 6))
        a, b, c = (k * s for s in _TRIPLES[rng.randrange(scale(d, 2, 6))])
    else:
        a, b = rng.randint(1, up_to(d, 9, 40)), rng.randint(1, up_to(d, 9, 40))
        c = None
    want_leg = d >= 0.3 and c is not None and rng.random() < 0.5
    if want_leg:
        assert c is not None
        square, work = c * c - a * a, f"{c}^2 - {a}^2"
        question = (
            f"A right triangle has hypotenuse {c} and one leg {a}. How long is the other leg?"
        )
    else:
        square, work = a * a + b * b, f"{a}^2 + {b}^2"
        question = f"A right triangle has legs {a} and {b}. How long is the hypotenuse?"
    return build(
        "",
        question,
        sqrt_tex(square),
        steps=[Step("What is the square of the unknown side?", str(square), work)],
        final_work=f"\\sqrt{{{square}}}",
        fmt="Give an exact answer (simplify any square root).",
    )


def volume(rng: random.Random, d: float) -> Task:
    r, h = rng.randint(1, up_to(d, 6, 30)), rng.randint(1, up_to(d, 10, 50))
    shapes = ["box", "cylinder"] + (["cone", "sphere"] if d >= 0.4 else [])
    shape = rng.choice(shapes)
    if shape == "box":
        w = rng.randint(1, up_to(d, 10, 50))
        return build(
            "", f"What is the volume of a box measuring {r} by {w} by {h}?", str(r * w * h)
        )
    if shape == "cylinder":
        q = f"What is the volume of a cylinder with radius {r} and height {h}?"
        return build("", q, pi_tex(r * r * h), fmt=PI_FORMAT)
    if shape == "cone":
        q = f"What is the volume of a cone with base radius {r} and height {h}?"
        return build("", q, pi_tex(Fraction(r * r * h, 3)), fmt=PI_FORMAT)
    return build(
        "",
        f"What is the volume of a sphere with radius {r}?",
        pi_tex(Fraction(4 * r**3, 3)),
        fmt=PI_FORMAT,
    )


def polygon_angles(rng: random.Random, d: float) -> Task:
    n = rng.randint(5, scale(d, 12, 40))
    kind = rng.choice(["sum", "each", "sides"]) if d >= 0.3 else "sum"
    if kind == "sum":
        return build(
            "",
            f"What is the sum of the interior angles of a convex polygon with {n} sides?",
            str(180 * (n - 2)),
            fmt=DEGREES_FORMAT,
        )
    if kind == "each":
        return build(
            "",
            f"What is each interior angle of a regular polygon with {n} sides?",
            tex(Fraction(180 * (n - 2), n)),
            fmt=DEGREES_FORMAT + " Use a fraction if needed.",
        )
    divisors = [m for m in range(5, 361) if 360 % m == 0]
    m = rng.choice(divisors)
    return build(
        "",
        f"Each interior angle of a regular polygon is ${180 - 360 // m}^\\circ$. How many sides does it have?",
        str(m),
    )


def distance(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 9, 50)
    x1, y1 = rng.randint(-hi, hi), rng.randint(-hi, hi)
    if d < 0.4:
        k = rng.randint(1, 3)
        a, b, _ = _TRIPLES[rng.randrange(2)]
        dx, dy = a * k * rng.choice([1, -1]), b * k * rng.choice([1, -1])
    else:
        dx, dy = nonzero(rng, hi), nonzero(rng, hi)
    x2, y2 = x1 + dx, y1 + dy
    square = dx * dx + dy * dy
    return build(
        "",
        f"What is the distance between the points $({x1}, {y1})$ and $({x2}, {y2})$?",
        sqrt_tex(square),
        steps=[
            Step(
                "What is the square of the distance?",
                str(square),
                f"({x2} - {paren(x1)})^2 + ({y2} - {paren(y1)})^2",
            )
        ],
        final_work=f"\\sqrt{{{square}}}",
        fmt="Give an exact answer (simplify any square root).",
    )


def midpoint(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 10, 60)
    pts = [rng.randint(-hi, hi) for _ in range(4)]
    if d < 0.4:
        pts[2] += (pts[2] - pts[0]) % 2
        pts[3] += (pts[3] - pts[1]) % 2
    x1, y1, x2, y2 = pts
    mid = f"({tex(Fraction(x1 + x2, 2))}, {tex(Fraction(y1 + y2, 2))})"
    return build(
        "",
        f"What is the midpoint of the segment from $({x1}, {y1})$ to $({x2}, {y2})$?",
        mid,
        fmt="Give the answer as an ordered pair $(x, y)$.",
    )


def line(rng: random.Random, d: float) -> Task:
    hi = up_to(d, 9, 40)
    x1 = rng.randint(-hi, hi)
    x2 = x1 + nonzero(rng, scale(d, 4, 12))
    if d < 0.4:
        slope = Fraction(nonzero(rng, 5))
        y1 = rng.randint(-hi, hi)
        y2 = y1 + int(slope * (x2 - x1))
    else:
        y1, y2 = rng.randint(-hi, hi), rng.randint(-hi, hi)
        slope = Fraction(y2 - y1, x2 - x1)
    intercept = y1 - slope * x1
    return build(
        f"A line passes through $({x1}, {y1})$ and $({x2}, {y2})$.",
        "What is its $y$-intercept?",
        tex(intercept),
        steps=[
            Step(
                "What is the slope of the line?",
                tex(slope),
                f"\\frac{{{y2} - {paren(y1)}}}{{{x2} - {paren(x1)}}}",
            )
        ],
        final_work=f"{paren(y1)} - {paren(slope)} \\cdot {paren(x1)}",
    )


# (coefficient, radicand) of sin and tan at 0, 30, 45, 60, 90 degrees
_SIN = {
    0: (Fraction(0), 1),
    30: (Fraction(1, 2), 1),
    45: (Fraction(1, 2), 2),
    60: (Fraction(1, 2), 3),
    90: (Fraction(1), 1),
}
_TAN = {0: (Fraction(0), 1), 30: (Fraction(1, 3), 3), 45: (Fraction(1), 1), 60: (Fraction(1), 3)}
_RADIANS = {
    30: "\\frac{\\pi}{6}",
    45: "\\frac{\\pi}{4}",
    60: "\\frac{\\pi}{3}",
    90: "\\frac{\\pi}{2}",
}


def _radians(deg: int) -> str:
    frac = Fraction(deg, 180)
    if frac == 0:
        return "0"
    num = "" if frac.numerator == 1 else str(frac.numerator)
    return f"{num}\\pi" if frac.denominator == 1 else f"\\frac{{{num}\\pi}}{{{frac.denominator}}}"


def trig_value(fn: str, deg: int) -> tuple[Fraction, int] | None:
    """The exact value of sin/cos/tan at a multiple of 30 or 45 degrees as ``(coef, radicand)``;
    None where tan is undefined.

    >>> trig_value("cos", 150), trig_value("tan", 90)
    ((Fraction(-1, 2), 3), None)
    """
    deg %= 360
    if fn == "cos":
        return trig_value("sin", deg + 90)
    ref = deg % 180
    ref = min(ref, 180 - ref)
    if fn == "sin":
        coef, rad = _SIN[ref]
        return (-coef if deg > 180 else coef), rad
    if ref == 90:
        return None
    coef, rad = _TAN[ref]
    quadrant_negative = 90 < deg < 180 or 270 < deg < 360
    return (-coef if quadrant_negative else coef), rad


def trig_exact(rng: random.Random, d: float) -> Task:
    while True:
        fn = rng.choice(["sin", "cos", "tan"])
        deg = (
            rng.choice([30, 45, 60, 90])
            if d < 0.3
            else rng.choice(range(0, 360 + 360 * (d >= 0.8), 15))
        )
        if deg % 30 and deg % 45:
            continue
        value = trig_value(fn, deg)
        if value is not None:
            break
    angle = f"{deg}^\\circ" if d < 0.5 else _radians(deg)
    coef, rad = value
    return build(
        "",
        f"What is the exact value of $\\{fn}({angle})$?",
        sqrt_tex(rad, coef),
        fmt="Give an exact answer (use square roots, not decimals).",
    )


def trig_quadrant(rng: random.Random, d: float) -> Task:
    if d < 0.6:
        a, b, c = _TRIPLES[rng.randrange(scale(d, 2, 6))]
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
    else:
        c = rng.randint(3, 12)
        a = rng.randint(1, c - 1)
        b = None
    quadrant = rng.randint(1, 4)
    sin = Fraction(a, c) * (1 if quadrant in (1, 2) else -1)
    cos_sign = 1 if quadrant in (1, 4) else -1
    cos_sq = 1 - sin * sin
    names = {1: "first", 2: "second", 3: "third", 4: "fourth"}
    if b is not None:
        cos_value = tex(Fraction(cos_sign * b, c))
    else:
        cos_value = sqrt_tex(
            cos_sq.numerator * cos_sq.denominator, Fraction(cos_sign, cos_sq.denominator)
        )
    return build(
        f"The angle $\\theta$ lies in the {names[quadrant]} quadrant and $\\sin\\theta = {tex(sin)}$.",
        "What is $\\cos\\theta$?",
        cos_value,
        steps=[Step("What is $\\cos^2\\theta$?", tex(cos_sq), f"1 - \\left({tex(sin)}\\right)^2")],
        fmt="Give an exact answer.",
    )


def right_triangle(rng: random.Random, d: float) -> Task:
    a, b, c = _TRIPLES[rng.randrange(scale(d, 2, 6))]
    k = rng.randint(1, scale(d, 2, 5))
    a, b, c = a * k, b * k, c * k
    fn = rng.choice(["sin", "cos", "tan"])
    value = {"sin": Fraction(a, c), "cos": Fraction(b, c), "tan": Fraction(a, b)}[fn]
    return build(
        f"In right triangle $ABC$ the right angle is at $C$, the leg opposite $A$ has length {a} "
        f"and the leg adjacent to $A$ has length {b}.",
        f"What is $\\{fn} A$?",
        tex(value),
        steps=[Step("How long is the hypotenuse?", str(c), f"\\sqrt{{{a}^2 + {b}^2}}")],
        fmt="Give the answer as a fraction in lowest terms.",
    )


# (unit, unit, how many of the second in one of the first), all exact by definition
_CONVERSIONS = (
    ("kilometers", "meters", 1000), ("meters", "centimeters", 100), ("centimeters", "millimeters", 10),
    ("kilograms", "grams", 1000), ("grams", "milligrams", 1000), ("liters", "milliliters", 1000),
    ("hours", "minutes", 60), ("minutes", "seconds", 60), ("days", "hours", 24), ("weeks", "days", 7),
    ("feet", "inches", 12), ("yards", "feet", 3), ("miles", "feet", 5280), ("inches", "centimeters", Fraction(254, 100)),
    ("pounds", "ounces", 16), ("gallons", "quarts", 4), ("quarts", "pints", 2), ("pints", "cups", 2),
)  # fmt: skip


def convert(rng: random.Random, d: float) -> Task:
    if d >= 0.6:
        chains = [(a, b) for a in _CONVERSIONS for b in _CONVERSIONS if a[1] == b[0]]
        first, second = rng.choice(chains)
        amount = Fraction(rng.randint(1, up_to(d, 20, 400)), rng.choice([1, 2, 4, 10]))
        middle = amount * first[2]
        result = middle * second[2]
        return build(
            f"Convert ${decimal(amount)}$ {first[0]} to {second[1]}.",
            f"How many {second[1]} is that?",
            _number(result),
            steps=[
                Step(
                    f"How many {first[1]} is ${decimal(amount)}$ {first[0]}?",
                    _number(middle),
                    f"{decimal(amount)} \\times {decimal(first[2])}",
                )
            ],
            final_work=f"{_number(middle)} \\times {decimal(second[2])}",
            fmt="Give an exact number.",
        )
    big, small, factor = rng.choice(_CONVERSIONS)
    amount = Fraction(
        rng.randint(1, up_to(d, 20, 500)), 1 if d < 0.3 else rng.choice([1, 2, 4, 10])
    )
    if rng.random() < 0.5 or d < 0.3:
        return build(
            "",
            f"How many {small} are in ${decimal(amount)}$ {big}?",
            _number(amount * factor),
            fmt="Give an exact number.",
        )
    amount *= Fraction(factor).numerator
    return build(
        "",
        f"How many {big} are in ${decimal(amount)}$ {small}?",
        _number(amount / factor),
        fmt="Give an exact number.",
    )


def speed(rng: random.Random, d: float) -> Task:
    kmh = rng.randint(3, up_to(d, 36, 300)) * (18 if d < 0.4 else 1)
    mph = kmh * 1000
    ms = Fraction(mph, 3600)
    return build(
        f"A train travels at {kmh} kilometers per hour.",
        "What is its speed in meters per second?",
        _number(ms),
        steps=[
            Step("How many meters does it travel in one hour?", str(mph), f"{kmh} \\times 1000")
        ],
        final_work=f"\\frac{{{mph}}}{{3600}}",
        fmt="Give an exact number (a fraction if needed).",
    )


SPECS = [
    family(
        "geom.area",
        area,
        "areas of rectangles, triangles and trapezoids; composite figures (with subtasks) when hard",
        form="number",
        steps=True,
    ),
    family(
        "geom.circle",
        circle,
        "circle area and circumference in terms of pi; annulus areas (subtasks) when hard",
        form="pi",
        steps=True,
    ),
    family(
        "geom.pythagoras",
        pythagoras,
        "a side of a right triangle (triples, then radicals); the square of the side is a subtask",
        form="radical",
        steps=True,
    ),
    family(
        "geom.volume",
        volume,
        "volumes of boxes, cylinders, cones and spheres (exact, in terms of pi)",
        form="pi",
    ),
    family(
        "geom.polygon_angles",
        polygon_angles,
        "interior angles of polygons (sum, regular, sides from angle)",
        form="number",
    ),
    family(
        "geom.distance",
        distance,
        "distance between two points; the squared distance is a subtask",
        form="radical",
        steps=True,
    ),
    family(
        "geom.midpoint", midpoint, "the midpoint of a segment, as an ordered pair", form="number"
    ),
    family(
        "geom.line",
        line,
        "the y-intercept of the line through two points; the slope is a subtask",
        form="number",
        steps=True,
    ),
    family(
        "trig.exact",
        trig_exact,
        "exact sin, cos, tan at special angles (degrees, then radians)",
        form="radical",
    ),
    family(
        "trig.quadrant",
        trig_quadrant,
        "cos or tan from sin and the quadrant; cos^2 is a subtask",
        form="radical",
        steps=True,
    ),
    family(
        "trig.right_triangle",
        right_triangle,
        "a trig ratio in a right triangle; the missing side is a subtask",
        form="fraction",
        steps=True,
    ),
    family(
        "units.convert",
        convert,
        "unit conversions with exact factors; two-hop chains (the middle amount a subtask) when hard",
        form="number",
        steps=True,
    ),
    family(
        "units.speed",
        speed,
        "convert a speed in km/h to m/s; meters per hour is a subtask",
        form="number",
        steps=True,
    ),
]
"""The geometry, trigonometry and unit families: name, generator, what each asks, the final form
of its answers."""
