"""Geometry families: polygon area, convex hull, rectangle overlap, closest pair, point in
polygon. Floating-point answers are compared with a tolerance."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

_FLOAT = {"mode": "float", "abs_tol": 1e-6, "rel_tol": 1e-9}


def _points(rng: random.Random, n: int, span: int) -> list[list[int]]:
    return [[rng.randint(-span, span), rng.randint(-span, span)] for _ in range(n)]


def _star_polygon(rng: random.Random, n: int, span: int) -> list[list[int]]:
    """A simple polygon, star-shaped around the origin: vertices at increasing angles with
    every gap below half a turn, so the origin is inside and no edges cross."""
    import math

    while True:
        pts: list[tuple[int, int]] = []
        angles: set[float] = set()
        for i in range(n):
            theta = 2 * math.pi * (i + rng.uniform(0.1, 0.5)) / n
            r = rng.uniform(max(1.0, span / 4), max(2.0, span))
            p = (round(r * math.cos(theta)), round(r * math.sin(theta)))
            a = math.atan2(p[1], p[0])
            if p != (0, 0) and a not in angles:
                angles.add(a)
                pts.append(p)
        pts.sort(key=lambda p: math.atan2(p[1], p[0]))
        gaps = [
            (math.atan2(q[1], q[0]) - math.atan2(p[1], p[0])) % (2 * math.pi)
            for p, q in zip(pts, pts[1:] + pts[:1], strict=True)
        ]
        if len(pts) >= 3 and max(gaps) < math.pi - 1e-9:
            break
    if rng.random() < 0.5:
        pts.reverse()
    return [list(p) for p in pts]


# --- polygon_area -------------------------------------------------------------------------------


def polygon_area(points: list[list[int]]) -> float:
    twice = 0
    for i in range(len(points)):
        x1, y1 = points[i]
        x2, y2 = points[(i + 1) % len(points)]
        twice += x1 * y2 - x2 * y1
    return abs(twice) / 2


def _polygon_area(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 200), scale(d, 10, 10**4)
    return call_task(
        rng, d, fn=polygon_area, compare=_FLOAT, theme="geometry",
        make=lambda: (_star_polygon(rng, rng.randint(3, n), span),),
        edge=[([[0, 0], [4, 0], [0, 3]],), ([[0, 0], [1, 0], [1, 1], [0, 1]],), ([[0, 0], [1, 1], [2, 2]],)],
        description="`points` lists the vertices `[x, y]` of a simple polygon in order "
        "(clockwise or counter-clockwise). Return its area as a float (the shoelace formula; a "
        "degenerate polygon has area 0).",
    )  # fmt: skip


# --- convex_hull --------------------------------------------------------------------------------


def convex_hull(points: list[list[int]]) -> list[list[int]]:
    pts = sorted({(x, y) for x, y in points})
    if len(pts) <= 2:
        return [list(p) for p in pts]

    def cross(o: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> int:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[int, int]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[int, int]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return [list(p) for p in lower[:-1] + upper[:-1]]


def _convex_hull(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 800), scale(d, 5, 10**5)
    return call_task(
        rng, d, fn=convex_hull, theme="geometry",
        make=lambda: (_points(rng, rng.randint(1, n), span),),
        edge=[([[1, 1]],), ([[0, 0], [0, 0], [1, 1]],), ([[0, 0], [1, 1], [2, 2]],), ([[0, 0], [2, 0], [1, 1], [2, 2], [0, 2]],)],
        description="Return the convex hull of `points` (`[x, y]` integer pairs, duplicates "
        "possible) as its vertices in counter-clockwise order, starting from the lowest "
        "`[x, y]` (smallest x, then smallest y). Points on the hull's edges that are not "
        "corners are left out. With fewer than three distinct points, return the distinct "
        "points sorted; if all points are collinear, return the two extreme ones.",
    )  # fmt: skip


# --- rectangle_overlap --------------------------------------------------------------------------


def rectangle_overlap(a: list[int], b: list[int]) -> int:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return max(0, width) * max(0, height)


def _rectangle_overlap(rng: random.Random, d: float) -> Task:
    span = scale(d, 10, 10**9)

    def rect() -> list[int]:
        x, y = rng.randint(-span, span), rng.randint(-span, span)
        return [x, y, x + rng.randint(0, span), y + rng.randint(0, span)]

    return call_task(
        rng, d, fn=rectangle_overlap, theme="geometry",
        make=lambda: (rect(), rect()),
        edge=[([0, 0, 2, 2], [1, 1, 3, 3]), ([0, 0, 1, 1], [1, 0, 2, 1]), ([0, 0, 5, 5], [1, 1, 2, 2])],
        description="Rectangles are `[x1, y1, x2, y2]` with `x1 <= x2`, `y1 <= y2` (axis-"
        "aligned, corners bottom-left and top-right). Return the area of the intersection of "
        "`a` and `b` (0 when they only touch or are apart).",
    )  # fmt: skip


# --- closest_pair_distance ----------------------------------------------------------------------


def closest_pair_distance(points: list[list[int]]) -> float:
    import math

    pts = sorted((x, y) for x, y in points)
    best = math.inf
    strip: list[tuple[int, int]] = []
    left = 0
    for p in pts:
        while left < len(strip) and p[0] - strip[left][0] > best:
            left += 1
        for q in strip[left:]:
            if abs(q[1] - p[1]) < best:
                best = min(best, math.hypot(p[0] - q[0], p[1] - q[1]))
        strip.append(p)
    return best


def _closest_pair_distance(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 2, 800), scale(d, 20, 10**6)
    return call_task(
        rng, d, fn=closest_pair_distance, compare=_FLOAT, theme="geometry",
        make=lambda: (_points(rng, rng.randint(2, n), span),),
        edge=[([[0, 0], [3, 4]],), ([[1, 1], [1, 1], [5, 5]],), ([[0, 0], [10, 0], [4, 0]],)],
        description="Return the smallest Euclidean distance between two of the points in "
        "`points` (at least two `[x, y]` integer pairs; identical points are at distance 0) as "
        "a float.",
    )  # fmt: skip


# --- point_in_polygon ---------------------------------------------------------------------------


def point_in_polygon(polygon: list[list[int]], point: list[int]) -> str:
    px, py = point
    n = len(polygon)
    inside = False
    for i in range(n):
        x1, y1 = polygon[i]
        x2, y2 = polygon[(i + 1) % n]
        cross = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1)
        if cross == 0 and min(x1, x2) <= px <= max(x1, x2) and min(y1, y2) <= py <= max(y1, y2):
            return "boundary"
        if (y1 > py) != (y2 > py):
            # x of the edge at height py, compared without division
            lhs = (px - x1) * (y2 - y1)
            rhs = (x2 - x1) * (py - y1)
            if (lhs < rhs) == (y2 > y1):
                inside = not inside
    return "inside" if inside else "outside"


def _point_in_polygon(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 100), scale(d, 6, 1000)

    def make() -> tuple[list[list[int]], list[int]]:
        poly = _star_polygon(rng, rng.randint(3, n), span)
        if rng.random() < 0.2:
            point = list(rng.choice(poly))
        else:
            point = [rng.randint(-span, span), rng.randint(-span, span)]
        return poly, point

    return call_task(
        rng, d, fn=point_in_polygon, make=make, theme="geometry",
        edge=[([[0, 0], [4, 0], [4, 4], [0, 4]], [2, 2]), ([[0, 0], [4, 0], [4, 4], [0, 4]], [4, 2]),
              ([[0, 0], [4, 0], [4, 4], [0, 4]], [5, 5]), ([[0, 0], [4, 0], [0, 4]], [0, 0])],
        description="`polygon` lists the integer vertices of a simple polygon in order. Return "
        "`'boundary'` if the integer `point` lies on an edge or vertex, `'inside'` if it lies "
        "strictly inside, `'outside'` otherwise.",
    )  # fmt: skip


FAMILIES = [
    Family("polygon_area", _polygon_area, "shoelace formula (float)"),
    Family("convex_hull", _convex_hull, "monotone chain hull"),
    Family("rectangle_overlap", _rectangle_overlap, "axis-aligned intersection"),
    Family("closest_pair_distance", _closest_pair_distance, "closest pair of points (float)"),
    Family("point_in_polygon", _point_in_polygon, "ray casting with exact arithmetic"),
]
