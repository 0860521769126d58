"""Array families: sums, rotations, hashing, two pointers, sorting and searching."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task


def _ints(rng: random.Random, n: int, lo: int, hi: int, *, min_len: int = 0) -> list[int]:
    return rng.choices(range(lo, hi + 1), k=rng.randint(min_len, n))


# --- max_subarray_sum ---------------------------------------------------------------------------


def max_subarray_sum(nums: list[int]) -> int:
    best = current = nums[0]
    for x in nums[1:]:
        current = max(x, current + x)
        best = max(best, current)
    return best


def _max_subarray_sum(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 4, 2000), scale(d, 10, 10**6)
    return call_task(
        rng, d, fn=max_subarray_sum, theme="arrays",
        make=lambda: (_ints(rng, n, -span, span, min_len=1),),
        edge=[([-5],), ([-3, -1, -2],), ([0, 0],), ([5, -10, 6],)],
        description="Return the largest sum of a non-empty contiguous subarray of `nums` "
        "(which has at least one element).",
        limits={"time_limit_s": 2.0},
    )  # fmt: skip


# --- rotate_right -------------------------------------------------------------------------------


def rotate_right(nums: list[int], k: int) -> list[int]:
    if not nums:
        return []
    k %= len(nums)
    return nums[-k:] + nums[:-k] if k else list(nums)


def _rotate_right(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 200)
    return call_task(
        rng, d, fn=rotate_right, theme="arrays",
        make=lambda: (_ints(rng, n, -99, 99), rng.randint(0, scale(d, 6, 10**9))),
        edge=[([], 3), ([1], 5), ([1, 2, 3], 3), ([1, 2, 3], 0)],
        description="Return a new list with the elements of `nums` rotated `k` places to the "
        "right (`k >= 0`, possibly larger than the length): the last `k` elements come first.",
    )  # fmt: skip


# --- two_sum ------------------------------------------------------------------------------------


def two_sum(nums: list[int], target: int) -> list[int]:
    seen: dict[int, int] = {}
    for i, x in enumerate(nums):
        if target - x in seen:
            return [seen[target - x], i]
        seen[x] = i
    return []


def _two_sum(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 4, 2000), scale(d, 20, 10**9)

    def make() -> tuple[list[int], int]:
        nums = _ints(rng, n, -span, span, min_len=2)
        if rng.random() < 0.8:
            i, j = rng.sample(range(len(nums)), 2)
            return nums, nums[i] + nums[j]
        return nums, rng.randint(-2 * span, 2 * span)

    return call_task(
        rng, d, fn=two_sum, make=make, theme="hashing",
        edge=[([1, 2], 3), ([3, 3], 6), ([1, 2], 10), ([0, 4, 3, 0], 0)],
        description="Return `[i, j]` with `i < j` and `nums[i] + nums[j] == target`: `j` is "
        "the smallest index for which such an `i` exists, and `i` is the largest such index "
        "below `j`. Return `[]` if there is no pair.",
    )  # fmt: skip


# --- product_except_self ------------------------------------------------------------------------


def product_except_self(nums: list[int]) -> list[int]:
    n = len(nums)
    out = [1] * n
    left = 1
    for i in range(n):
        out[i] = left
        left *= nums[i]
    right = 1
    for i in range(n - 1, -1, -1):
        out[i] *= right
        right *= nums[i]
    return out


def _product_except_self(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 60)
    return call_task(
        rng, d, fn=product_except_self, theme="arrays",
        make=lambda: (_ints(rng, n, -9, 9, min_len=1),),
        edge=[([5],), ([0, 0],), ([0, 3, 4],), ([-1, 1],)],
        description="Return a list whose `i`-th element is the product of every element of "
        "`nums` except `nums[i]` (the empty product is 1). Zeros are allowed.",
    )  # fmt: skip


# --- merge_sorted -------------------------------------------------------------------------------


def merge_sorted(a: list[int], b: list[int]) -> list[int]:
    i = j = 0
    out = []
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out + a[i:] + b[j:]


def _merge_sorted(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 500)
    return call_task(
        rng, d, fn=merge_sorted, theme="sorting",
        make=lambda: (sorted(_ints(rng, n, -50, 50)), sorted(_ints(rng, n, -50, 50))),
        edge=[([], []), ([1], []), ([], [2]), ([1, 1], [1])],
        description="Merge two ascending lists into one ascending list containing every "
        "element of both (duplicates kept).",
    )  # fmt: skip


# --- dedupe_keep_order --------------------------------------------------------------------------


def dedupe_keep_order(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        key = x.lower()
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


def _dedupe_keep_order(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 80)
    pool = ["Red", "red", "RED", "blue", "Blue", "green", "GREEN", "x", "X", "y"]
    return call_task(
        rng, d, fn=dedupe_keep_order, theme="hashing",
        make=lambda: ([rng.choice(pool) for _ in range(rng.randint(0, n))],),
        edge=[([],), (["a"],), (["A", "a", "A"],)],
        description="Return the strings of `items` without case-insensitive duplicates: keep "
        "the first occurrence of each string (compared with `str.lower()`), in order.",
    )  # fmt: skip


# --- longest_consecutive ------------------------------------------------------------------------


def longest_consecutive(nums: list[int]) -> int:
    values = set(nums)
    best = 0
    for x in values:
        if x - 1 not in values:
            y = x
            while y + 1 in values:
                y += 1
            best = max(best, y - x + 1)
    return best


def _longest_consecutive(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 4, 2000), scale(d, 12, 10**4)
    return call_task(
        rng, d, fn=longest_consecutive, theme="hashing",
        make=lambda: (_ints(rng, n, -span, span),),
        edge=[([],), ([7],), ([1, 1, 1],), ([3, 2, 1, 10, 11],)],
        description="Return the length of the longest run of consecutive integers (x, x+1, "
        "x+2, ...) whose values all appear in `nums`, in any order. Duplicates count once; an "
        "empty list gives 0.",
    )  # fmt: skip


# --- count_subarrays_with_sum -------------------------------------------------------------------


def count_subarrays_with_sum(nums: list[int], k: int) -> int:
    counts = {0: 1}
    total = result = 0
    for x in nums:
        total += x
        result += counts.get(total - k, 0)
        counts[total] = counts.get(total, 0) + 1
    return result


def _count_subarrays_with_sum(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 2000)
    return call_task(
        rng, d, fn=count_subarrays_with_sum, theme="hashing",
        make=lambda: (_ints(rng, n, -3, 3), rng.randint(-3, 5)),
        edge=[([], 0), ([0, 0, 0], 0), ([1], 1), ([1, -1, 1], 1)],
        description="Count the contiguous non-empty subarrays of `nums` whose elements add up "
        "to `k`.",
    )  # fmt: skip


# --- lower_bound --------------------------------------------------------------------------------


def lower_bound(sorted_nums: list[int], target: int) -> int:
    lo, hi = 0, len(sorted_nums)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_nums[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _lower_bound(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 3, 2000), scale(d, 10, 10**6)
    return call_task(
        rng, d, fn=lower_bound, theme="searching",
        make=lambda: (sorted(_ints(rng, n, -span, span)), rng.randint(-span - 2, span + 2)),
        edge=[([], 5), ([1, 1, 1], 1), ([1, 3], 2), ([1, 3], 4)],
        description="`sorted_nums` is sorted ascending. Return the first index `i` with "
        "`sorted_nums[i] >= target`, or `len(sorted_nums)` if there is none.",
    )  # fmt: skip


# --- kth_largest --------------------------------------------------------------------------------


def kth_largest(nums: list[int], k: int) -> int:
    return sorted(nums, reverse=True)[k - 1]


def _kth_largest(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 3000)

    def make() -> tuple[list[int], int]:
        nums = _ints(rng, n, -100, 100, min_len=1)
        return nums, rng.randint(1, len(nums))

    return call_task(
        rng, d, fn=kth_largest, make=make, theme="sorting",
        edge=[([4], 1), ([2, 2, 2], 2), ([1, 5, 3], 3)],
        description="Return the `k`-th largest element of `nums` counting duplicates "
        "(`1 <= k <= len(nums)`): the element at position `k` when `nums` is sorted in "
        "descending order.",
    )  # fmt: skip


# --- sort_by_frequency --------------------------------------------------------------------------


def sort_by_frequency(nums: list[int]) -> list[int]:
    counts: dict[int, int] = {}
    for x in nums:
        counts[x] = counts.get(x, 0) + 1
    return sorted(nums, key=lambda x: (-counts[x], x))


def _sort_by_frequency(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 400)
    return call_task(
        rng, d, fn=sort_by_frequency, theme="sorting",
        make=lambda: (_ints(rng, n, -scale(d, 3, 30), scale(d, 3, 30)),),
        edge=[([],), ([1],), ([2, 1, 2, 1],)],
        description="Return the elements of `nums` sorted by how often they occur (most "
        "frequent first); equally frequent values are ordered ascending. Every occurrence is "
        "kept, so equal values end up next to each other.",
    )  # fmt: skip


# --- three_sum ----------------------------------------------------------------------------------


def three_sum(nums: list[int]) -> list[list[int]]:
    nums = sorted(nums)
    out = []
    for i in range(len(nums) - 2):
        if i and nums[i] == nums[i - 1]:
            continue
        lo, hi = i + 1, len(nums) - 1
        while lo < hi:
            s = nums[i] + nums[lo] + nums[hi]
            if s < 0:
                lo += 1
            elif s > 0:
                hi -= 1
            else:
                out.append([nums[i], nums[lo], nums[hi]])
                while lo < hi and nums[lo] == nums[lo + 1]:
                    lo += 1
                lo += 1
                hi -= 1
    return out


def _three_sum(rng: random.Random, d: float) -> Task:
    n, span = scale(d, 4, 300), scale(d, 5, 200)
    return call_task(
        rng, d, fn=three_sum, theme="two pointers",
        make=lambda: (_ints(rng, n, -span, span),),
        edge=[([],), ([0, 0, 0, 0],), ([1, 2, -3],), ([1, 2, 3],)],
        description="Return every distinct triple `[a, b, c]` of values taken from three "
        "different positions of `nums` with `a + b + c == 0`. Each triple is ascending "
        "(`a <= b <= c`) and the list of triples is sorted ascending.",
    )  # fmt: skip


# --- max_water_container ------------------------------------------------------------------------


def max_water_container(heights: list[int]) -> int:
    lo, hi = 0, len(heights) - 1
    best = 0
    while lo < hi:
        best = max(best, (hi - lo) * min(heights[lo], heights[hi]))
        if heights[lo] < heights[hi]:
            lo += 1
        else:
            hi -= 1
    return best


def _max_water_container(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 2000)
    return call_task(
        rng, d, fn=max_water_container, theme="two pointers",
        make=lambda: (_ints(rng, n, 0, scale(d, 10, 10**4), min_len=2),),
        edge=[([1, 1],), ([0, 0, 0],), ([5, 1, 1, 5],)],
        description="`heights[i]` is the height of a vertical line at x = i. Two lines and the "
        "x-axis form a container holding `(j - i) * min(heights[i], heights[j])` units of "
        "water. Return the largest amount any pair of lines holds (`len(heights) >= 2`).",
    )  # fmt: skip


# --- search_rotated -----------------------------------------------------------------------------


def search_rotated(nums: list[int], target: int) -> int:
    lo, hi = 0, len(nums) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if nums[mid] == target:
            return mid
        if nums[lo] <= nums[mid]:
            if nums[lo] <= target < nums[mid]:
                hi = mid - 1
            else:
                lo = mid + 1
        elif nums[mid] < target <= nums[hi]:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


def _search_rotated(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 2000)

    def make() -> tuple[list[int], int]:
        nums = sorted(rng.sample(range(-10 * n, 10 * n), rng.randint(1, n)))
        k = rng.randint(0, len(nums) - 1)
        nums = nums[k:] + nums[:k]
        target = rng.choice(nums) if rng.random() < 0.7 else rng.randint(-10 * n, 10 * n)
        return nums, target

    return call_task(
        rng, d, fn=search_rotated, make=make, theme="searching",
        edge=[([1], 1), ([1], 2), ([3, 1], 1), ([4, 5, 1, 2, 3], 3)],
        description="`nums` holds distinct integers: an ascending list rotated at an unknown "
        "point (e.g. `[4, 5, 1, 2, 3]`). Return the index of `target`, or -1 if it is absent.",
    )  # fmt: skip


FAMILIES = [
    Family("max_subarray_sum", _max_subarray_sum, "Kadane's maximum subarray"),
    Family("rotate_right", _rotate_right, "rotate a list"),
    Family("two_sum", _two_sum, "pair with a target sum (hash map)"),
    Family("product_except_self", _product_except_self, "prefix and suffix products"),
    Family("merge_sorted", _merge_sorted, "merge two sorted lists"),
    Family("dedupe_keep_order", _dedupe_keep_order, "case-insensitive dedupe"),
    Family("longest_consecutive", _longest_consecutive, "longest consecutive run (hash set)"),
    Family("count_subarrays_with_sum", _count_subarrays_with_sum, "prefix-sum counting"),
    Family("lower_bound", _lower_bound, "binary search"),
    Family("kth_largest", _kth_largest, "order statistics"),
    Family("sort_by_frequency", _sort_by_frequency, "custom sort keys"),
    Family("three_sum", _three_sum, "two pointers over a sorted list"),
    Family("max_water_container", _max_water_container, "two pointers"),
    Family("search_rotated", _search_rotated, "binary search in a rotated list"),
]
