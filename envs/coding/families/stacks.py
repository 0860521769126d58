"""Stack, queue and interval families: brackets, RPN, monotonic stacks, sliding windows,
merging intervals and meeting rooms."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

# --- balanced_brackets --------------------------------------------------------------------------


def balanced_brackets(s: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


def _balanced_brackets(rng: random.Random, d: float) -> Task:
    depth = scale(d, 2, 40)

    def make() -> tuple[str]:
        out: list[str] = []
        stack: list[str] = []
        for _ in range(rng.randint(1, 2 * depth)):
            if stack and rng.random() < 0.45:
                out.append({"(": ")", "[": "]", "{": "}"}[stack.pop()])
            else:
                ch = rng.choice("([{")
                stack.append(ch)
                out.append(ch)
            if rng.random() < 0.2:
                out.append(rng.choice("ab1 "))
        while stack and rng.random() < 0.9:
            out.append({"(": ")", "[": "]", "{": "}"}[stack.pop()])
        s = "".join(out)
        if rng.random() < 0.3 and s:
            k = rng.randrange(len(s))
            s = s[:k] + rng.choice(")]}([{") + s[k + 1 :]
        return (s,)

    return call_task(
        rng, d, fn=balanced_brackets, make=make, theme="stacks",
        edge=[("",), ("a(b)c",), (")(",), ("([)]",), ("((",)],
        description="Return True when every bracket in `s` (`()`, `[]`, `{}`) is closed by the "
        "matching bracket in the right order, False otherwise. Other characters are ignored.",
    )  # fmt: skip


# --- eval_rpn -----------------------------------------------------------------------------------


def eval_rpn(tokens: list[str]) -> int:
    stack: list[int] = []
    for tok in tokens:
        if tok in ("+", "-", "*", "/"):
            b, a = stack.pop(), stack.pop()
            if tok == "+":
                stack.append(a + b)
            elif tok == "-":
                stack.append(a - b)
            elif tok == "*":
                stack.append(a * b)
            else:
                q = abs(a) // abs(b)
                stack.append(q if (a >= 0) == (b >= 0) else -q)
        else:
            stack.append(int(tok))
    return stack[-1]


def _eval_rpn(rng: random.Random, d: float) -> Task:
    size = scale(d, 2, 25)

    def build(n: int) -> list[str]:
        if n <= 1:
            return [str(rng.randint(-20, 20))]
        left = rng.randint(1, n - 1)
        op = rng.choice("+-*/" if d > 0.3 else "+-*")
        right = build(n - left)
        if op == "/" and eval_rpn(right) == 0:
            op = "+"
        return build(left) + right + [op]

    return call_task(
        rng, d, fn=eval_rpn, theme="stacks",
        make=lambda: (build(rng.randint(1, size)),),
        edge=[(["7"],), (["-7", "2", "/"],), (["7", "-2", "/"],), (["3", "4", "-"],)],
        description="Evaluate an integer expression in reverse Polish notation: each token is "
        "an integer or one of `+ - * /`. Division truncates toward zero (`-7 / 2 == -3`). The "
        "expression is valid and never divides by zero.",
    )  # fmt: skip


# --- next_greater -------------------------------------------------------------------------------


def next_greater(nums: list[int]) -> list[int]:
    out = [-1] * len(nums)
    stack: list[int] = []
    for i, x in enumerate(nums):
        while stack and nums[stack[-1]] < x:
            out[stack.pop()] = x
        stack.append(i)
    return out


def _next_greater(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 2000)
    return call_task(
        rng, d, fn=next_greater, theme="stacks",
        make=lambda: ([rng.randint(0, scale(d, 9, 10**5)) for _ in range(rng.randint(0, n))],),
        edge=[([],), ([5],), ([3, 3, 3],), ([5, 4, 3],), ([1, 2, 3],)],
        description="For each element of `nums` return the first strictly greater element to "
        "its right, or -1 if there is none.",
    )  # fmt: skip


# --- sliding_window_max -------------------------------------------------------------------------


def sliding_window_max(nums: list[int], k: int) -> list[int]:
    from collections import deque

    window: deque[int] = deque()
    out = []
    for i, x in enumerate(nums):
        while window and nums[window[-1]] <= x:
            window.pop()
        window.append(i)
        if window[0] <= i - k:
            window.popleft()
        if i >= k - 1:
            out.append(nums[window[0]])
    return out


def _sliding_window_max(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 2000)

    def make() -> tuple[list[int], int]:
        nums = [rng.randint(-50, 50) for _ in range(rng.randint(1, n))]
        return nums, rng.randint(1, len(nums))

    return call_task(
        rng, d, fn=sliding_window_max, make=make, theme="queues",
        edge=[([1], 1), ([1, 3, -1, -3, 5, 3, 6, 7], 3), ([2, 2, 2], 2), ([4, 3, 2, 1], 4)],
        description="Return the maximum of every window of `k` consecutive elements of `nums`, "
        "from left to right (`1 <= k <= len(nums)`), so the result has `len(nums) - k + 1` "
        "elements.",
    )  # fmt: skip


# --- merge_intervals ----------------------------------------------------------------------------


def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _random_intervals(rng: random.Random, n: int, span: int) -> list[list[int]]:
    out = []
    for _ in range(rng.randint(0, n)):
        a = rng.randint(0, span)
        out.append([a, a + rng.randint(0, max(1, span // 8))])
    return out


def _merge_intervals(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 1000), scale(d, 30, 10**6)
    return call_task(
        rng, d, fn=merge_intervals, theme="intervals",
        make=lambda: (_random_intervals(rng, n, span),),
        edge=[([],), ([[1, 1]],), ([[1, 3], [3, 5]],), ([[5, 6], [1, 2]],)],
        description="Each interval is `[start, end]` with `start <= end` (closed). Merge all "
        "overlapping or touching intervals (`[1, 3]` and `[3, 5]` merge) and return the merged "
        "intervals sorted by start.",
    )  # fmt: skip


# --- min_meeting_rooms --------------------------------------------------------------------------


def min_meeting_rooms(meetings: list[list[int]]) -> int:
    events = []
    for start, end in meetings:
        events.append((start, 1))
        events.append((end, -1))
    events.sort()
    rooms = best = 0
    for _, delta in events:
        rooms += delta
        best = max(best, rooms)
    return best


def _min_meeting_rooms(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 1000), scale(d, 24, 10**5)

    def make() -> tuple[list[list[int]]]:
        out = []
        for _ in range(rng.randint(0, n)):
            a = rng.randint(0, span)
            out.append([a, a + rng.randint(1, max(2, span // 6))])
        return (out,)

    return call_task(
        rng, d, fn=min_meeting_rooms, make=make, theme="intervals",
        edge=[([],), ([[1, 2], [2, 3]],), ([[1, 5], [2, 3], [4, 6]],)],
        description="Each meeting is `[start, end)` with `start < end` (a meeting ending at t "
        "frees its room for one starting at t). Return the smallest number of rooms that can "
        "host all meetings.",
    )  # fmt: skip


# --- insert_interval ----------------------------------------------------------------------------


def insert_interval(intervals: list[list[int]], new: list[int]) -> list[list[int]]:
    out = []
    start, end = new
    placed = False
    for a, b in intervals:
        if b < start:
            out.append([a, b])
        elif a > end:
            if not placed:
                out.append([start, end])
                placed = True
            out.append([a, b])
        else:
            start, end = min(start, a), max(end, b)
    if not placed:
        out.append([start, end])
    return out


def _insert_interval(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 500), scale(d, 40, 10**5)

    def make() -> tuple[list[list[int]], list[int]]:
        base = merge_intervals(_random_intervals(rng, n, span))
        disjoint = [iv for k, iv in enumerate(base) if k == 0 or iv[0] > base[k - 1][1]]
        a = rng.randint(0, span)
        return disjoint, [a, a + rng.randint(0, max(1, span // 5))]

    return call_task(
        rng, d, fn=insert_interval, make=make, theme="intervals",
        edge=[([], [1, 2]), ([[1, 2]], [3, 4]), ([[3, 4]], [1, 2]), ([[1, 2], [5, 6]], [2, 5])],
        description="`intervals` holds disjoint closed intervals `[start, end]` sorted by start "
        "(no two touch). Insert `new` and merge what overlaps or touches it; return the "
        "resulting sorted list of disjoint intervals.",
    )  # fmt: skip


FAMILIES = [
    Family("balanced_brackets", _balanced_brackets, "bracket matching with a stack"),
    Family("eval_rpn", _eval_rpn, "reverse Polish evaluation"),
    Family("next_greater", _next_greater, "monotonic stack"),
    Family("sliding_window_max", _sliding_window_max, "monotonic deque"),
    Family("merge_intervals", _merge_intervals, "merge overlapping intervals"),
    Family("min_meeting_rooms", _min_meeting_rooms, "interval sweep"),
    Family("insert_interval", _insert_interval, "insert into sorted intervals"),
]
