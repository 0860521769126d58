"""Dynamic-programming families: counting paths, coins, subsequences, edit distance, knapsack."""

from __future__ import annotations

import random

from llmgym.envs.coding.families.strings import random_word
from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

# --- count_step_ways ----------------------------------------------------------------------------


def count_step_ways(n: int, steps: list[int]) -> int:
    ways = [0] * (n + 1)
    ways[0] = 1
    for i in range(1, n + 1):
        ways[i] = sum(ways[i - s] for s in steps if s <= i) % 1_000_000_007
    return ways[n]


def _count_step_ways(rng: random.Random, d: float) -> Task:
    top = scale(d, 10, 5000)

    def make() -> tuple[int, list[int]]:
        steps = sorted(rng.sample(range(1, 7), rng.randint(1, 3)))
        return rng.randint(0, top), steps

    return call_task(
        rng, d, fn=count_step_ways, make=make, theme="dynamic programming",
        edge=[(0, [1, 2]), (1, [2]), (5, [1]), (10, [3, 5])],
        description="A staircase has `n` steps; one move climbs any of the (distinct, "
        "positive) sizes in `steps`. Return the number of ordered move sequences that reach "
        "exactly step `n`, modulo 1_000_000_007 (`n = 0` has one: the empty sequence).",
    )  # fmt: skip


# --- min_coins ----------------------------------------------------------------------------------


def min_coins(coins: list[int], amount: int) -> int:
    inf = amount + 1
    best = [0] + [inf] * amount
    for a in range(1, amount + 1):
        for c in coins:
            if c <= a and best[a - c] + 1 < best[a]:
                best[a] = best[a - c] + 1
    return best[amount] if best[amount] < inf else -1


def _min_coins(rng: random.Random, d: float) -> Task:
    top = scale(d, 20, 3000)

    def make() -> tuple[list[int], int]:
        coins = sorted(rng.sample(range(1, scale(d, 12, 60)), rng.randint(1, 4)))
        return coins, rng.randint(0, top)

    return call_task(
        rng, d, fn=min_coins, make=make, theme="dynamic programming",
        edge=[([1], 0), ([2], 3), ([1, 3, 4], 6), ([5, 7], 1)],
        description="Return the fewest coins (each value in `coins` usable any number of "
        "times) that add up to exactly `amount`, or -1 if it cannot be done.",
    )  # fmt: skip


# --- lis_length ---------------------------------------------------------------------------------


def lis_length(nums: list[int]) -> int:
    from bisect import bisect_left

    tails: list[int] = []
    for x in nums:
        i = bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)


def _lis_length(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 3000)
    return call_task(
        rng, d, fn=lis_length, theme="dynamic programming",
        make=lambda: ([rng.randint(-50, 50) for _ in range(rng.randint(0, n))],),
        edge=[([],), ([3],), ([2, 2, 2],), ([5, 4, 3],)],
        description="Return the length of the longest strictly increasing subsequence of "
        "`nums` (not necessarily contiguous).",
    )  # fmt: skip


# --- edit_distance ------------------------------------------------------------------------------


def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[-1]


def _edit_distance(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 150)
    return call_task(
        rng, d, fn=edit_distance, theme="dynamic programming",
        make=lambda: (random_word(rng, "abcd", n), random_word(rng, "abcd", n)),
        edge=[("", ""), ("", "abc"), ("kitten", "sitting"), ("same", "same")],
        description="Return the Levenshtein distance between `a` and `b`: the fewest "
        "single-character insertions, deletions and substitutions turning `a` into `b`.",
    )  # fmt: skip


# --- knapsack -----------------------------------------------------------------------------------


def knapsack(weights: list[int], values: list[int], capacity: int) -> int:
    best = [0] * (capacity + 1)
    for w, v in zip(weights, values, strict=True):
        for c in range(capacity, w - 1, -1):
            best[c] = max(best[c], best[c - w] + v)
    return best[capacity]


def _knapsack(rng: random.Random, d: float) -> Task:
    n, cap = scale(d, 3, 80), scale(d, 15, 1000)

    def make() -> tuple[list[int], list[int], int]:
        k = rng.randint(0, n)
        weights = [rng.randint(1, max(2, cap // 3)) for _ in range(k)]
        return weights, [rng.randint(0, 100) for _ in range(k)], rng.randint(0, cap)

    return call_task(
        rng, d, fn=knapsack, make=make, theme="dynamic programming",
        edge=[([], [], 10), ([5], [10], 4), ([5], [10], 5), ([1, 2, 3], [6, 10, 12], 5)],
        description="0/1 knapsack: item `i` weighs `weights[i]` and is worth `values[i]`; each "
        "item is taken at most once. Return the largest total value whose total weight is at "
        "most `capacity`.",
    )  # fmt: skip


# --- lcs_string ---------------------------------------------------------------------------------


def lcs_string(a: str, b: str) -> str:
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if a[i] == b[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    out = []
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            out.append(a[i])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return "".join(out)


def _lcs_string(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 120)
    judge = (
        "def judge(args, result, expected):\n"
        "    a, b = args\n"
        "    def sub(s, t):\n"
        "        it = iter(t)\n"
        "        return all(ch in it for ch in s)\n"
        "    return isinstance(result, str) and len(result) == len(expected) "
        "and sub(result, a) and sub(result, b)\n"
    )
    return call_task(
        rng, d, fn=lcs_string, judge=judge, theme="dynamic programming",
        make=lambda: (random_word(rng, "abc", n), random_word(rng, "abc", n)),
        edge=[("", "abc"), ("abc", "abc"), ("abc", "def"), ("abcb", "bdcab")],
        description="Return a longest common subsequence of `a` and `b` (a string that can be "
        "obtained from both by deleting characters). If there are several, any one of them is "
        "accepted.",
    )  # fmt: skip


# --- grid_paths_with_walls ----------------------------------------------------------------------


def grid_paths_with_walls(grid: list[str]) -> int:
    rows, cols = len(grid), len(grid[0])
    ways = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "#":
                continue
            if r == 0 and c == 0:
                ways[r][c] = 1
            else:
                ways[r][c] = (ways[r - 1][c] if r else 0) + (ways[r][c - 1] if c else 0)
    return ways[-1][-1] % 1_000_000_007


def _grid_paths_with_walls(rng: random.Random, d: float) -> Task:
    size = scale(d, 4, 60)  # from 4x4: path counts vary (2x2 grids are mostly 0, 1 or 2)

    def make() -> tuple[list[str]]:
        rows, cols = rng.randint(1, size), rng.randint(1, size)
        p = 0.1 + 0.2 * rng.random()
        return (
            ["".join("#" if rng.random() < p else "." for _ in range(cols)) for _ in range(rows)],
        )

    return call_task(
        rng, d, fn=grid_paths_with_walls, make=make, theme="dynamic programming",
        edge=[(["."],), (["#"],), (["..", ".."],), ([".#", "#."],)],
        description="`grid` is a list of equal-length rows of `.` (open) and `#` (wall). Count "
        "the paths from the top-left to the bottom-right cell that move only right or down "
        "through open cells, modulo 1_000_000_007 (0 if either corner is a wall).",
    )  # fmt: skip


FAMILIES = [
    Family("count_step_ways", _count_step_ways, "counting DP"),
    Family("min_coins", _min_coins, "coin change"),
    Family("lis_length", _lis_length, "longest increasing subsequence"),
    Family("edit_distance", _edit_distance, "Levenshtein distance"),
    Family("knapsack", _knapsack, "0/1 knapsack"),
    Family("lcs_string", _lcs_string, "longest common subsequence (special judge)"),
    Family("grid_paths_with_walls", _grid_paths_with_walls, "grid path counting"),
]
