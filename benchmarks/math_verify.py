"""llmgym's math verifier vs HuggingFace math-verify on the labeled corpus, side by side.

Both checkers see the same (response, gold) pairs in one run; math-verify gets its gold in
``$...$`` as it expects: ``verify(parse("$" + gold + "$"), parse(response))``. Reports the
accuracy of each against the human labels (overall and per category), the time per pair
(mean, median, p90, max) and the speed ratio, over all pairs and over the typical ones (the
deliberately pathological categories apart). Each checker is warmed up on a few pairs first
(imports, sympy, llmgym's worker process), then timed over ``--repeat`` passes of the whole
corpus, alternating checkers; the caches of llmgym's parser are cleared before each pass so no
pass reuses a previous pass's work.

Usage: python benchmarks/math_verify.py [--corpus PATH] [--repeat N] [--show-disagreements]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# This script shares its name with the math_verify package: drop its own folder from the
# import path so "import math_verify" finds HuggingFace's package, not this file.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
DEFAULT_CORPUS = ROOT / "tests" / "data" / "math_corpus.jsonl"
HEAVY = {"pathological", "huge_numbers"}
"""Categories built to be slow (megabyte answers, towers of powers), reported apart."""


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_llmgym(rows: list[dict[str, Any]]) -> tuple[list[bool], list[float]]:
    import importlib

    from llmgym.rewards import _math_parse

    # not "from llmgym.rewards import math": the package's own "import math" would win
    llm_math = importlib.import_module("llmgym.rewards.math")

    _math_parse.clear_caches()
    verdicts, times = [], []
    for row in rows:
        start = time.perf_counter()
        verdicts.append(llm_math.math_equal(row["response"], row["gold"]))
        times.append(time.perf_counter() - start)
    return verdicts, times


def run_math_verify(rows: list[dict[str, Any]]) -> tuple[list[bool], list[float]]:
    import importlib

    mv = importlib.import_module("math_verify")
    verdicts, times = [], []
    for row in rows:
        start = time.perf_counter()
        try:
            ok = bool(mv.verify(mv.parse("$" + row["gold"] + "$"), mv.parse(row["response"])))
        except Exception:  # math-verify may raise on hostile input: count it as "not equal"
            ok = False
        times.append(time.perf_counter() - start)
        verdicts.append(ok)
    return verdicts, times


def accuracy(verdicts: list[bool], rows: list[dict[str, Any]]) -> float:
    return sum(v == r["equal"] for v, r in zip(verdicts, rows, strict=True)) / len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per checker")
    ap.add_argument("--show-disagreements", action="store_true")
    args = ap.parse_args()

    import logging

    logging.disable(logging.WARNING)  # math-verify logs every timeout and parse failure
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    rows = load(args.corpus)
    print(
        f"corpus: {args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus}"
    )
    print(
        f"pairs: {len(rows)} ({sum(r['equal'] for r in rows)} equal, "
        f"{sum(not r['equal'] for r in rows)} not equal)"
    )

    warm = [r for r in rows if len(r["response"]) < 2000][:20]
    warm += [r for r in rows if r["category"] == "inequalities"][:3]  # starts llmgym's worker
    run_llmgym(warm)
    run_math_verify(warm)

    passes: dict[str, list[list[float]]] = {"llmgym": [], "math-verify": []}
    verdicts: dict[str, list[bool]] = {}
    for _ in range(max(1, args.repeat)):
        for name, fn in (("llmgym", run_llmgym), ("math-verify", run_math_verify)):
            v, t = fn(rows)
            verdicts[name] = v
            passes[name].append(t)
    # per pair: the median over passes (robust to a noisy machine)
    per_pair = {
        name: [statistics.median(p[i] for p in runs) for i in range(len(rows))]
        for name, runs in passes.items()
    }
    typical = [i for i, r in enumerate(rows) if r["category"] not in HEAVY]

    n = len(rows)
    print(f"timed passes per checker: {len(passes['llmgym'])} (per-pair time = median over passes)")
    print()
    print(
        f"{'checker':<12} {'accuracy':>9} {'total s':>9} {'mean ms':>9} {'median ms':>10} "
        f"{'p90 ms':>8} {'max ms':>9}"
    )
    for name in ("llmgym", "math-verify"):
        t = per_pair[name]
        q = sorted(t)
        print(
            f"{name:<12} {accuracy(verdicts[name], rows):>9.2%} {sum(t):>9.3f} "
            f"{1000 * sum(t) / n:>9.3f} {1000 * statistics.median(t):>10.3f} "
            f"{1000 * q[int(0.9 * (n - 1))]:>8.3f} {1000 * q[-1]:>9.1f}"
        )

    def ratio(idx: list[int]) -> float:
        return sum(per_pair["math-verify"][i] for i in idx) / sum(
            per_pair["llmgym"][i] for i in idx
        )

    med = statistics.median(per_pair["math-verify"]) / statistics.median(per_pair["llmgym"])
    print("\nspeed ratio (math-verify time / llmgym time):")
    print(f"  {'all ' + str(n) + ' pairs':<44} {ratio(list(range(n))):6.1f}x")
    label = f"{len(typical)} typical pairs (without {', '.join(sorted(HEAVY))})"
    print(f"  {label:<44} {ratio(typical):6.1f}x")
    print(f"  {'median pair':<44} {med:6.1f}x")

    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_cat[r["category"]].append(i)
    print(f"\n{'category':<20} {'n':>4} {'llmgym':>8} {'math-verify':>12}")
    for cat in sorted(by_cat):
        idx = by_cat[cat]
        sub = [rows[i] for i in idx]
        a = accuracy([verdicts["llmgym"][i] for i in idx], sub)
        b = accuracy([verdicts["math-verify"][i] for i in idx], sub)
        print(f"{cat:<20} {len(idx):>4} {a:>8.0%} {b:>12.0%}")

    if args.show_disagreements:
        for name in ("llmgym", "math-verify"):
            wrong = [r for v, r in zip(verdicts[name], rows, strict=True) if v != r["equal"]]
            print(f"\n{name} disagrees with the label on {len(wrong)} pairs:")
            for r in wrong:
                resp = r["response"] if len(r["response"]) <= 120 else r["response"][:117] + "..."
                print(
                    f"  {r['id']} [{r['category']}] label={r['equal']} gold={r['gold'][:60]!r} "
                    f"response={resp!r}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
