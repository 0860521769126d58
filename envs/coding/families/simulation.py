"""Simulation and date/time families: cellular automata, robots, spirals, Josephus, queues;
weekdays, day counts, business days, clock arithmetic."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

# --- life_step ----------------------------------------------------------------------------------


def life_step(grid: list[str]) -> list[str]:
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    out = []
    for r in range(rows):
        line = []
        for c in range(cols):
            alive = sum(
                grid[r + dr][c + dc] == "#"
                for dr in (-1, 0, 1)
                for dc in (-1, 0, 1)
                if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols
            )
            if grid[r][c] == "#":
                line.append("#" if alive in (2, 3) else ".")
            else:
                line.append("#" if alive == 3 else ".")
        out.append("".join(line))
    return out


def _life_step(rng: random.Random, d: float) -> Task:
    size = scale(d, 3, 60)
    return call_task(
        rng, d, fn=life_step, theme="simulation",
        make=lambda: (["".join("#" if rng.random() < 0.35 else "." for _ in range(c)) for c in [rng.randint(1, size)] for _ in range(rng.randint(1, size))],),
        edge=[(["."],), (["#"],), (["...", "###", "..."],), (["##", "##"],)],
        description="Advance Conway's Game of Life one generation on a bounded grid (`#` "
        "alive, `.` dead; cells outside the grid are dead): a live cell with 2 or 3 live "
        "neighbours (of 8) survives, a dead cell with exactly 3 becomes alive, all others die "
        "or stay dead. Return the new grid as a list of strings.",
    )  # fmt: skip


# --- robot_walk ---------------------------------------------------------------------------------


def robot_walk(commands: str, obstacles: list[list[int]]) -> list[int]:
    blocked = {(x, y) for x, y in obstacles}
    x = y = 0
    dx, dy = 0, 1
    for ch in commands:
        if ch == "L":
            dx, dy = -dy, dx
        elif ch == "R":
            dx, dy = dy, -dx
        elif ch == "F" and (x + dx, y + dy) not in blocked:
            x, y = x + dx, y + dy
    return [x, y]


def _robot_walk(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 5, 2000), scale(d, 3, 30)
    return call_task(
        rng, d, fn=robot_walk, theme="simulation",
        make=lambda: (
            "".join(rng.choice("FFFLR") for _ in range(rng.randint(0, n))),
            [[rng.randint(-span, span), rng.randint(-span, span)] for _ in range(rng.randint(0, span * 2))],
        ),
        edge=[("", []), ("FFRFF", []), ("F", [[0, 1]]), ("LLLL", [])],
        description="A robot starts at (0, 0) facing north (+y). For each command: `L` turns "
        "90 degrees left, `R` turns 90 degrees right, `F` moves one step forward unless that "
        "cell is in `obstacles` (a list of `[x, y]`; then it stays put). Return the final "
        "position as `[x, y]`.",
    )  # fmt: skip


# --- spiral_order -------------------------------------------------------------------------------


def spiral_order(matrix: list[list[int]]) -> list[int]:
    out: list[int] = []
    top, bottom = 0, len(matrix) - 1
    left, right = 0, (len(matrix[0]) - 1) if matrix else -1
    while top <= bottom and left <= right:
        out.extend(matrix[top][c] for c in range(left, right + 1))
        out.extend(matrix[r][right] for r in range(top + 1, bottom + 1))
        if top < bottom:
            out.extend(matrix[bottom][c] for c in range(right - 1, left - 1, -1))
        if left < right:
            out.extend(matrix[r][left] for r in range(bottom - 1, top, -1))
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out


def _spiral_order(rng: random.Random, d: float) -> Task:
    size = scale(d, 2, 60)

    def make() -> tuple[list[list[int]]]:
        rows, cols = rng.randint(1, size), rng.randint(1, size)
        return ([[rng.randint(0, 99) for _ in range(cols)] for _ in range(rows)],)

    return call_task(
        rng, d, fn=spiral_order, make=make, theme="simulation",
        edge=[([],), ([[1]],), ([[1, 2, 3]],), ([[1], [2], [3]],), ([[1, 2], [3, 4]],)],
        description="Return the elements of the rectangular `matrix` (a list of rows) in "
        "clockwise spiral order starting at the top-left corner (`[]` for an empty matrix).",
    )  # fmt: skip


# --- josephus -----------------------------------------------------------------------------------


def josephus(n: int, k: int) -> list[int]:
    people = list(range(1, n + 1))
    out = []
    i = 0
    while people:
        i = (i + k - 1) % len(people)
        out.append(people.pop(i))
    return out


def _josephus(rng: random.Random, d: float) -> Task:
    top = scale(d, 5, 2000)
    return call_task(
        rng, d, fn=josephus, theme="simulation",
        make=lambda: (rng.randint(1, top), rng.randint(1, scale(d, 5, 10**6))),
        edge=[(1, 1), (5, 1), (7, 3), (3, 100)],
        description="People `1..n` stand in a circle. Counting starts at person 1; every "
        "`k`-th person (counting the current one as 1) leaves, and counting resumes with the "
        "next person. Return the order in which all `n` people leave.",
    )  # fmt: skip


# --- bank_queue ---------------------------------------------------------------------------------


def bank_queue(arrivals: list[list[int]], tellers: int) -> list[int]:
    import heapq

    free = [(0, t) for t in range(tellers)]
    heapq.heapify(free)
    order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i][0], i))
    finish = [0] * len(arrivals)
    for i in order:
        arrive, duration = arrivals[i]
        at, teller = heapq.heappop(free)
        start = max(at, arrive)
        finish[i] = start + duration
        heapq.heappush(free, (finish[i], teller))
    return finish


def _bank_queue(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 800)

    def make() -> tuple[list[list[int]], int]:
        arrivals = [[rng.randint(0, 10 * n), rng.randint(1, 30)] for _ in range(rng.randint(0, n))]
        return arrivals, rng.randint(1, scale(d, 3, 20))

    return call_task(
        rng, d, fn=bank_queue, make=make, theme="queues",
        edge=[([], 2), ([[0, 5]], 1), ([[0, 5], [0, 5], [0, 5]], 2), ([[3, 1], [1, 10]], 1)],
        description="Customers `arrivals[i] = [arrival_time, service_time]` are served by "
        "`tellers` identical tellers, first come first served (ties by list index). A customer "
        "goes to the teller that becomes free earliest (ties: the lowest-numbered teller) and "
        "starts at `max(arrival, that teller's free time)`. Return each customer's finish time, "
        "in input order.",
    )  # fmt: skip


# --- dates --------------------------------------------------------------------------------------


def _random_date(rng: random.Random, lo: int, hi: int) -> str:
    import datetime

    day = datetime.date(lo, 1, 1) + datetime.timedelta(days=rng.randint(0, (hi - lo) * 365))
    return day.isoformat()


def weekday_name(date: str) -> str:
    year, month, day = (int(p) for p in date.split("-"))
    if month < 3:
        month += 12
        year -= 1
    k, j = year % 100, year // 100
    h = (day + 13 * (month + 1) // 5 + k + k // 4 + j // 4 + 5 * j) % 7
    return ["Saturday", "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday"][h]


def _weekday_name(rng: random.Random, d: float) -> Task:
    lo = 2000 - scale(d, 0, 1500)
    return call_task(
        rng, d, fn=weekday_name, theme="dates",
        make=lambda: (_random_date(rng, lo, 2100),),
        edge=[("2000-01-01",), ("2024-02-29",), ("1900-03-01",), ("1600-02-29",)],
        description="`date` is `'YYYY-MM-DD'` in the proleptic Gregorian calendar. Return its "
        "weekday name in English (`'Monday'` ... `'Sunday'`).",
    )  # fmt: skip


def days_between(a: str, b: str) -> int:
    def ordinal(s: str) -> int:
        y, m, d = (int(p) for p in s.split("-"))
        if m < 3:
            y, m = y - 1, m + 12
        return 365 * y + y // 4 - y // 100 + y // 400 + (153 * (m - 3) + 2) // 5 + d

    return abs(ordinal(b) - ordinal(a))


def _days_between(rng: random.Random, d: float) -> Task:
    lo = 2000 - scale(d, 0, 1500)
    return call_task(
        rng, d, fn=days_between, theme="dates",
        make=lambda: (_random_date(rng, lo, 2100), _random_date(rng, lo, 2100)),
        edge=[("2024-01-01", "2024-01-01"), ("2023-02-28", "2023-03-01"), ("2024-02-28", "2024-03-01"), ("1900-01-01", "2000-01-01")],
        description="Return the number of days between two dates `'YYYY-MM-DD'` (proleptic "
        "Gregorian calendar), as a non-negative integer whatever their order.",
    )  # fmt: skip


def add_business_days(start: str, days: int, holidays: list[str]) -> str:
    import datetime

    day = datetime.date.fromisoformat(start)
    off = set(holidays)
    step = 1 if days >= 0 else -1
    left = abs(days)
    while left:
        day += datetime.timedelta(days=step)
        if day.weekday() < 5 and day.isoformat() not in off:
            left -= 1
    return day.isoformat()


def _add_business_days(rng: random.Random, d: float) -> Task:
    span = scale(d, 10, 400)

    def make() -> tuple[str, int, list[str]]:
        start = _random_date(rng, 2020, 2030)
        holidays = sorted(
            {_random_date(rng, 2019, 2031) for _ in range(rng.randint(0, scale(d, 3, 200)))}
        )
        return start, rng.randint(-span if d > 0.3 else 0, span), holidays

    return call_task(
        rng, d, fn=add_business_days, make=make, theme="dates",
        edge=[("2024-05-03", 1, []), ("2024-05-06", -1, []), ("2024-12-24", 1, ["2024-12-25"]), ("2024-05-04", 0, [])],
        description="Move from the date `start` (`'YYYY-MM-DD'`) by `days` business days "
        "(forward if positive, backward if negative): step one calendar day at a time and count "
        "only Monday to Friday dates not listed in `holidays`. Return the date reached "
        "(`start` itself when `days == 0`, even on a weekend).",
    )  # fmt: skip


def clock_add(time: str, minutes: int) -> str:
    h, m = (int(p) for p in time.split(":"))
    total = (h * 60 + m + minutes) % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"


def _clock_add(rng: random.Random, d: float) -> Task:
    span = scale(d, 100, 10**7)
    return call_task(
        rng, d, fn=clock_add, theme="dates",
        make=lambda: (f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", rng.randint(-span, span)),
        edge=[("23:59", 1), ("00:00", -1), ("12:30", 0), ("06:15", 1440 * 3)],
        description="Add `minutes` (possibly negative or spanning many days) to the 24-hour "
        "clock time `time` (`'HH:MM'`) and return the resulting clock time as `'HH:MM'`.",
    )  # fmt: skip


FAMILIES = [
    Family("life_step", _life_step, "one Game of Life generation"),
    Family("robot_walk", _robot_walk, "robot simulation with obstacles"),
    Family("spiral_order", _spiral_order, "matrix spiral traversal"),
    Family("josephus", _josephus, "Josephus elimination order"),
    Family("bank_queue", _bank_queue, "multi-server queue simulation"),
    Family("weekday_name", _weekday_name, "day of the week"),
    Family("days_between", _days_between, "date difference"),
    Family("add_business_days", _add_business_days, "business-day arithmetic"),
    Family("clock_add", _clock_add, "clock arithmetic"),
]
