"""Multi-function tasks: a small module whose later functions build on earlier ones.

Each function is a subtask (a DAG by ``depends_on``): ``subtask_mode="sequential"`` asks for
one function per step and rewards each as it passes its own tests; ``"joint"`` grades the
whole module with per-function partial credit; without a subtask mode the module is one task.
"""

from __future__ import annotations

import random

from llmgym.envs.coding.families.strings import WORDS
from llmgym.envs.coding.problem import Part, module_task, scale
from llmgym.tasks import Family, Task

# --- inventory ----------------------------------------------------------------------------------


def parse_item(line: str) -> list[str | int]:
    name, qty, price = (part.strip() for part in line.split(","))
    return [name, int(qty), int(price)]


def inventory_value(lines: list[str]) -> int:
    total = 0
    for line in lines:
        _, qty, price = parse_item(line)
        total += int(qty) * int(price)
    return total


def low_stock(lines: list[str], threshold: int) -> list[str]:
    return sorted(str(name) for name, qty, _ in map(parse_item, lines) if int(qty) < threshold)


def restock_plan(lines: list[str], target: int) -> dict[str, int]:
    plan: dict[str, int] = {}
    for name, qty, _ in map(parse_item, lines):
        plan[str(name)] = plan.get(str(name), 0) + int(qty)
    return {name: target - qty for name, qty in sorted(plan.items()) if qty < target}


def _inventory(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 40)

    def line() -> str:
        sep = ", " if rng.random() < 0.4 else ","
        return sep.join([rng.choice(WORDS), str(rng.randint(0, 50)), str(rng.randint(1, 999))])

    def lines() -> list[str]:
        return [line() for _ in range(rng.randint(0, n))]

    parts = [
        Part(parse_item, "Parse one record `'name,quantity,price_in_cents'` (spaces around the "
             "commas are allowed) into `[name, quantity, price]` with integer quantity and price.",
             lambda: (line(),), edge=(("a,0,1",), ("bolt , 12 , 5",))),
        Part(inventory_value, "Return the total value (quantity times price, in cents) of all "
             "the records in `lines`.", lambda: (lines(),), edge=(([],),),
             depends_on=("parse_item",)),
        Part(low_stock, "Return the names of the records whose quantity is below `threshold`, "
             "sorted (a name appears once per record).", lambda: (lines(), rng.randint(0, 30)),
             edge=(([], 5),), depends_on=("parse_item",)),
        Part(restock_plan, "Add up the quantity of each name over all records; return a dict "
             "mapping each name whose total is below `target` to the units missing to reach it.",
             lambda: (lines(), rng.randint(0, 60)), edge=(([], 10),),
             depends_on=("parse_item",)),
    ]  # fmt: skip
    return module_task(
        rng, d, title="Inventory module", parts=parts,
        intro="Write a small inventory module. Records are strings "
        "`'name,quantity,price_in_cents'`.",
    )  # fmt: skip


# --- gradebook ----------------------------------------------------------------------------------


def parse_scores(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, rest = line.partition(":")
        out[name.strip()] = [int(x) for x in rest.split(",") if x.strip()]
    return out


def average(scores: list[int]) -> int:
    if not scores:
        return 0
    return (2 * sum(scores) + len(scores)) // (2 * len(scores))


def letter_grade(score: int) -> str:
    for bound, letter in ((90, "A"), (80, "B"), (70, "C"), (60, "D")):
        if score >= bound:
            return letter
    return "F"


def grade_report(text: str) -> list[str]:
    scores = parse_scores(text)
    return [f"{name}: {letter_grade(average(s))}" for name, s in sorted(scores.items())]


def _gradebook(rng: random.Random, d: float) -> Task:
    n = scale(d, 2, 30)

    def text() -> str:
        names = rng.sample(WORDS, rng.randint(0, min(n, len(WORDS))))
        rows = []
        for name in names:
            scores = [str(rng.randint(40, 100)) for _ in range(rng.randint(0, 6))]
            rows.append(f"{name}: " + ", ".join(scores))
            if rng.random() < 0.1:
                rows.append("")
        return "\n".join(rows)

    parts = [
        Part(parse_scores, "Parse lines `'name: s1, s2, ...'` (blank lines skipped, a name may "
             "have no scores) into a dict from name to its list of integer scores.",
             lambda: (text(),), edge=(("",), ("ann:",))),
        Part(average, "Return the average of `scores` rounded half up to an integer, using "
             "integer arithmetic only (0 for an empty list).",
             lambda: ([rng.randint(0, 100) for _ in range(rng.randint(0, 8))],),
             edge=(([],), ([89, 90],), ([1, 2],))),
        Part(letter_grade, "Map an integer score to `'A'` (>= 90), `'B'` (>= 80), `'C'` "
             "(>= 70), `'D'` (>= 60) or `'F'`.", lambda: (rng.randint(0, 100),),
             edge=((90,), (89,), (60,), (59,)), n_hidden=6),
        Part(grade_report, "Return one line `'name: letter'` per student, sorted by name, using "
             "the functions above (the letter of the rounded average).",
             lambda: (text(),), edge=(("",),),
             depends_on=("parse_scores", "average", "letter_grade")),
    ]  # fmt: skip
    return module_task(
        rng, d, title="Gradebook module", parts=parts,
        intro="Write a small gradebook module over text records of student scores.",
    )  # fmt: skip


# --- matrices -----------------------------------------------------------------------------------


def mat_mul(a: list[list[int]], b: list[list[int]], mod: int) -> list[list[int]]:
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) % mod for j in range(len(b[0]))]
            for i in range(len(a))]  # fmt: skip


def identity(n: int) -> list[list[int]]:
    return [[int(i == j) for j in range(n)] for i in range(n)]


def mat_pow(m: list[list[int]], k: int, mod: int) -> list[list[int]]:
    result = [[x % mod for x in row] for row in identity(len(m))]
    base = m
    while k:
        if k & 1:
            result = mat_mul(result, base, mod)
        base = mat_mul(base, base, mod)
        k >>= 1
    return result


def fib_mod(n: int, mod: int) -> int:
    return mat_pow([[1, 1], [1, 0]], n, mod)[0][1]


def _matrices(rng: random.Random, d: float) -> Task:
    size, bits = scale(d, 2, 6), scale(d, 10, 120)

    def square(n: int) -> list[list[int]]:
        return [[rng.randint(-9, 9) for _ in range(n)] for _ in range(n)]

    def mul_args() -> tuple[list[list[int]], list[list[int]], int]:
        r, k, c = rng.randint(1, size), rng.randint(1, size), rng.randint(1, size)
        a = [[rng.randint(-9, 9) for _ in range(k)] for _ in range(r)]
        b = [[rng.randint(-9, 9) for _ in range(c)] for _ in range(k)]
        return a, b, rng.randint(2, 10**9)

    parts = [
        Part(mat_mul, "Multiply matrices `a` (r x k) and `b` (k x c), reducing every entry "
             "modulo `mod` (entries in `[0, mod)`).", mul_args,
             edge=(([[1]], [[-1]], 7),)),
        Part(identity, "Return the `n` x `n` identity matrix (`[]` for `n = 0`).",
             lambda: (rng.randint(0, 12),), edge=((0,), (1,)), n_hidden=6),
        Part(mat_pow, "Return `m` raised to the power `k >= 0` modulo `mod` by repeated "
             "squaring (`m**0` is the identity, reduced modulo `mod`).",
             lambda: (square(rng.randint(1, size)), rng.randint(0, 2**bits), rng.randint(2, 10**9)),
             edge=(([[5]], 0, 3), ([[2]], 10, 1000)), depends_on=("mat_mul", "identity")),
        Part(fib_mod, "Return the `n`-th Fibonacci number modulo `mod` (F0 = 0, F1 = 1) in "
             "O(log n) steps with `mat_pow`.", lambda: (rng.randint(0, 2**bits), rng.randint(2, 10**9)),
             edge=((0, 10), (1, 10), (10, 1000)), depends_on=("mat_pow",)),
    ]  # fmt: skip
    return module_task(
        rng, d, title="Matrix module", parts=parts,
        intro="Write a small module of integer matrix operations modulo a number. Matrices are "
        "lists of rows.",
    )  # fmt: skip


# --- text statistics ----------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    words, current = [], []
    for ch in text.lower():
        if ch.isalnum() or ch == "'":
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def word_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for w in tokenize(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


def top_words(text: str, k: int) -> list[list[str | int]]:
    ranked = sorted(word_counts(text).items(), key=lambda kv: (-kv[1], kv[0]))
    return [[w, c] for w, c in ranked[:k]]


def _text_stats(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 400)

    def text() -> str:
        out = []
        for _ in range(rng.randint(0, n)):
            w = rng.choice(WORDS[: scale(d, 6, len(WORDS))])
            w = w.upper() if rng.random() < 0.1 else w.capitalize() if rng.random() < 0.2 else w
            out.append(w + rng.choice(["", "", ",", ".", "'s", "!", " -"]))
        return " ".join(out)

    parts = [
        Part(tokenize, "Lowercase `text` and split it into words: maximal runs of "
             "alphanumeric characters and apostrophes; everything else separates words.",
             lambda: (text(),), edge=(("",), ("Don't stop--now!",))),
        Part(word_counts, "Return a dict from each word of `tokenize(text)` to its count.",
             lambda: (text(),), edge=(("",),), depends_on=("tokenize",)),
        Part(top_words, "Return the `k` most frequent words as `[word, count]` pairs, most "
             "frequent first, ties in alphabetical order.",
             lambda: (text(), rng.randint(0, 6)), edge=(("", 3), ("b a b a", 1)),
             depends_on=("word_counts",)),
    ]  # fmt: skip
    return module_task(
        rng, d, title="Text statistics module", parts=parts,
        intro="Write a small module that computes word statistics of a text.",
    )  # fmt: skip


FAMILIES = [
    Family("module_inventory", _inventory, "inventory records", has_subtasks=True),
    Family("module_gradebook", _gradebook, "gradebook report", has_subtasks=True),
    Family("module_matrices", _matrices, "matrix power and Fibonacci", has_subtasks=True),
    Family("module_text_stats", _text_stats, "word statistics", has_subtasks=True),
]
