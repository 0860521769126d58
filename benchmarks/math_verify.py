"""llmgym's math verifier vs HuggingFace math-verify on the labeled corpus, side by side.

Both checkers see the same (response, gold) pairs in one run; math-verify gets its gold in
``$...$`` as it expects: ``verify(parse("$" + gold + "$"), parse(response))``. Reports the
accuracy of each against the human labels (overall and per category), the time per pair and
the speed ratio. Each checker is warmed up on a few pairs first (imports, sympy, llmgym's
worker process), then timed over ``--repeat`` passes of the whole corpus; the caches of
llmgym's parser are cleared before each pass so no pass reuses a previous pass's work.

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


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_llmgym(rows: list[dict[str, Any]]) -> tuple[list[bool], float]:
    import importlib

    from llmgym.rewards import _math_parse

    # not "from llmgym.rewards import math": the package's own "import math" would win
    llm_math = importlib.import_module("llmgym.rewards.math")

    for fn in (
        _math_parse.normalize,
        _math_parse.tokenize,
        _math_parse.parse,
        llm_math._value,
    ):
        fn.cache_clear()
    verdicts = []
    start = time.perf_counter()
    for row in rows:
        verdicts.append(llm_math.math_equal(row["response"], row["gold"]))
    return verdicts, time.perf_counter() - start


def run_math_verify(rows: list[dict[str, Any]]) -> tuple[list[bool], float]:
    from math_verify import parse, verify

    verdicts = []
    start = time.perf_counter()
    for row in rows:
        try:
            ok = bool(verify(parse("$" + row["gold"] + "$"), parse(row["response"])))
        except Exception:  # math-verify may raise on hostile input: count it as "not equal"
            ok = False
        verdicts.append(ok)
    return verdicts, time.perf_counter() - start


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

    times: dict[str, list[float]] = {"llmgym": [], "math-verify": []}
    verdicts: dict[str, list[bool]] = {}
    for _ in range(max(1, args.repeat)):
        # alternate the order so neither checker always runs on a warmer machine
        for name, fn in (("llmgym", run_llmgym), ("math-verify", run_math_verify)):
            v, t = fn(rows)
            verdicts[name] = v
            times[name].append(t)

    n = len(rows)
    print()
    print(f"{'checker':<12} {'accuracy':>9} {'total s':>9} {'ms/pair':>9}")
    for name in ("llmgym", "math-verify"):
        t = statistics.median(times[name])
        print(f"{name:<12} {accuracy(verdicts[name], rows):>9.2%} {t:>9.3f} {1000 * t / n:>9.3f}")
    ratio = statistics.median(times["math-verify"]) / statistics.median(times["llmgym"])
    print(
        f"\nspeed ratio (math-verify time / llmgym time, median of {len(times['llmgym'])} passes): "
        f"{ratio:.1f}x"
    )

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
