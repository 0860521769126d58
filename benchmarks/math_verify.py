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

math-verify's own test suite (issue 14, conformance): ``--extract-suite DIR --write-suite OUT``
reads the parametrized (gold, prediction, expected verdict) triples and the configuration each
test passes (match types, precision, strict, allow_set_relation_comp) from a checkout of
HuggingFace's Math-Verify repository (its ``tests/`` folder; math_verify must be importable)
into a JSON file; ``--suite OUT`` then reports how often each checker agrees with the expected
verdicts, per test function, per class and per status, and lists the disagreements. The triples
stay outside this repository; nothing of them is committed here but the hashes in
:data:`SUITE_JUDGEMENTS`. For example::

    git -C <Math-Verify clone> archive HEAD tests | tar -x -C /tmp/mv
    python benchmarks/math_verify.py --extract-suite /tmp/mv --write-suite /tmp/mv_suite.json
    python benchmarks/math_verify.py --suite /tmp/mv_suite.json --skip-corpus
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import json
import re
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

    from llmgym.rewards.math.cache import clear_caches

    # not "from llmgym.rewards import math": the package's own "import math" would win
    llm_math = importlib.import_module("llmgym.rewards.math")

    clear_caches()
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


# ---------------------------------------------------------------------------------------------
# math-verify's own test suite
# ---------------------------------------------------------------------------------------------

SUITE_JUDGEMENTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # sha1(gold + "\0" + prediction)[:12] -> (status, why, llmgym options). Statuses: "option"
    # (a convention llmgym offers as an option, given here), "mv-wrong" (math-verify's expected
    # verdict is mathematically wrong; llmgym keeps the right one). Cases with an explicit
    # precision get abs_tol = 10^-precision, an explicit allow_set_relation_comp is
    # relations_as_sets, and strict=False (variables renamed) is a configuration llmgym lacks.
    "456c4c539e15": ("option", "decimal comma: 1000,99 is 1000.99", {"decimal_comma": True}),
    "0a229460ee3d": ("option", "decimal comma: 1,22 is 1.22", {"decimal_comma": True}),
    "c79bae915f07": ("option", "decimal comma in prose: 2,74", {"decimal_comma": True}),
    "8bd410de8eae": ("option", "decimal comma: 0,111 is 0.111", {"decimal_comma": True}),
    "9c50cf8d6744": ("option", "a list read as the tuple (1, 3)", {"lists_as_tuples": True}),
    "1f1d77d9d516": ("option", "a list read as a tuple, in order", {"lists_as_tuples": True}),
    "a8cf45cf20da": (
        "mv-wrong",
        "the response's only answer is 9, in $...$ over three lines; that inline math may not "
        "span lines is a parser convention, not mathematics",
        {},
    ),
    "fb3a092cb075": ("mv-wrong", "the same, in \\( \\) over three lines", {}),
    "18be4a7da483": ("mv-wrong", "1 - 1/e (0.632) and 1 + 1/e (1.368) differ", {}),
}


def _suite_key(row: dict[str, Any]) -> str:
    return hashlib.sha1((row["gold"] + "\0" + row["pred"]).encode()).hexdigest()[:12]


def suite_judgement(row: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(status, why, llmgym options) for one triple: "ok" (default configuration, and
    math-verify's verdict is right), "option", "mv-wrong" or "not-offered"."""
    config = row.get("config", {})
    if config.get("strict") is False:
        return "not-offered", "strict=False renames variables (f(y) == f(x))", {}
    status, why, options = SUITE_JUDGEMENTS.get(_suite_key(row), ("ok", "", {}))
    options = dict(options)
    if "precision" in config:
        options["abs_tol"] = 10.0 ** -int(config["precision"])
        status, why = (status if status != "ok" else "option"), why or "precision"
    if "allow_set_relation_comp" in config:
        options["relations_as_sets"] = bool(config["allow_set_relation_comp"])
        status, why = (status if status != "ok" else "option"), why or "set/relation comparison"
    return status, why, options


_CLASSES = [
    ("doubled backslashes", re.compile(r"(?<!\\)\\\\(?:left|right|frac|le|boxed|text|sqrt|pi)\b")),
    ("sums", re.compile(r"\\sum")),
    ("matrices", re.compile(r"pmatrix|bmatrix|array")),
    ("thousands separators", re.compile(r"\d,\\!|\{\s*,\s*\}|\d,\d{3}")),
]


def suite_class(row: dict[str, Any]) -> str:
    """A rough class of a triple, from its text, for the per-class table."""
    gold, pred = row["gold"], row["pred"]
    if "precision" in row.get("config", {}):
        return "precision"
    if "allow_set_relation_comp" in row.get("config", {}):
        return "set vs relation convention"
    if row.get("kind") == "string":
        return "multiple-choice letters"
    for name, pattern in _CLASSES[:1]:
        if pattern.search(gold + "\n" + pred):
            return name
    if gold.count("\\boxed") >= 2 or pred.count("\\boxed") >= 2 and len(pred) < 400:
        return "several boxes"
    for name, pattern in _CLASSES[1:]:
        if pattern.search(gold + "\n" + pred):
            return name
    labelled = re.search(r"^[\s$]*[^=$]*[A-Za-z][^=$]*=", gold)
    if labelled and row["expected"] and "=" not in pred and len(pred) < 200:
        return "labelled golds"
    if len(pred) > 250 or len(gold) > 250:
        return "prose / long responses"
    if re.search(r"[<>=]|\\[lg]e|\\neq", gold + pred):
        return "relations and equations"
    return "numbers, notation, structures"


def _literal(node: ast.AST, params: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in params:
        return params[node.id]
    return ast.literal_eval(node)


def extract_suite(repo: Path) -> list[dict[str, Any]]:
    """The (gold, pred, expected, config) triples of math-verify's tests in ``repo``: every
    parametrized ``compare_strings(gold, pred, ...)``, ``verify(parse(gold), parse(pred))`` and
    ``parse(pred, [StringExtractionConfig])`` test, and literal ``compare_strings`` checks."""
    import importlib

    sys.path.insert(0, str(repo))
    for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
        del sys.modules[name]  # this repository's own tests package is not theirs
    rows: list[dict[str, Any]] = []
    try:
        for path in sorted((repo / "tests").glob("test_*.py")):
            module = importlib.import_module(f"tests.{path.stem}")
            for fn in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                    rows += _rows_of(path.stem, fn, getattr(module, fn.name))
    finally:
        sys.path.remove(str(repo))
        for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
            del sys.modules[name]
    return rows


def _rows_of(module: str, fn: ast.FunctionDef, obj: Any) -> list[dict[str, Any]]:
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    compare = next((c for c in calls if c.func.id == "compare_strings"), None)  # type: ignore[attr-defined]
    marks = [m for m in getattr(obj, "pytestmark", []) if m.name == "parametrize"]
    base = {"module": module, "function": fn.name}
    out = []
    if not marks:  # literal checks: assert compare_strings("..", "..", precision=4) == 1
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
                call = node.left
                if getattr(call.func, "id", None) != "compare_strings" or len(call.args) < 2:
                    continue
                config = {k.arg: _literal(k.value, {}) for k in call.keywords if k.arg}
                out.append(
                    {
                        **base,
                        "gold": _literal(call.args[0], {}),
                        "pred": _literal(call.args[1], {}),
                        "expected": int(_literal(node.comparators[0], {})),
                        "config": config,
                        "kind": "compare",
                    }
                )
        return out
    argnames, argvalues = marks[0].args[0], marks[0].args[1]
    names = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else argnames
    for values in argvalues:
        params = dict(zip(names, values, strict=True))
        if "gold" not in params and "expected" in params and "config" in params:
            if not params["expected"]:
                continue  # nothing extracted: no gold to compare with
            row = {"gold": params["expected"][1], "pred": params["pred"], "expected": 1}
            strings = dataclasses.asdict(params["config"])  # the StringExtractionConfig
            out.append({**base, **row, "config": {}, "kind": "string", "strings": strings})
            continue
        if "gold" not in params or "pred" not in params:
            continue
        config = {}
        if compare is not None:
            config = {k.arg: _literal(k.value, params) for k in compare.keywords if k.arg}
        expected = params.get("expected", params.get("result"))
        row = {"gold": params["gold"], "pred": params["pred"], "expected": int(expected)}
        out.append({**base, **row, "config": config, "kind": "compare" if compare else "verify"})
    return out


def _mv_suite_verdict(row: dict[str, Any]) -> bool:
    import math_verify as mv

    config = row.get("config", {})
    if row.get("kind") == "string":
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in row["strings"].items()}
        targets = [mv.StringExtractionConfig(**fields)]
        return bool(mv.verify(mv.parse(row["gold"], targets), mv.parse(row["pred"], targets)))
    if row.get("kind") != "compare":
        return bool(mv.verify(mv.parse(row["gold"]), mv.parse(row["pred"])))
    targets = [
        mv.LatexExtractionConfig(boxed_match_priority=0)
        if t == "latex"
        else mv.ExprExtractionConfig()
        for t in config.get("match_types", ["latex", "expr"])
    ]
    return bool(
        mv.verify(
            mv.parse(row["gold"], targets),
            mv.parse(row["pred"], targets),
            float_rounding=int(config.get("precision", 6)),
            strict=bool(config.get("strict", True)),
            allow_set_relation_comp=bool(config.get("allow_set_relation_comp", False)),
        )
    )


def report_suite(path: Path, show: bool) -> int:
    """Agreement of each checker with the expected verdicts of math-verify's own tests."""
    import importlib

    llm_math = importlib.import_module("llmgym.rewards.math")
    rows = json.loads(path.read_text(encoding="utf-8"))
    llm_math.math_equal("1", "1")  # start-up off the clock: imports, sympy's worker process
    importlib.import_module("llmgym.rewards.math.sympy_pool").get_pool().call(("ping",), 60)
    _mv_suite_verdict({"gold": "1", "pred": "1"})
    results = []
    llm_s = mv_s = 0.0
    for row in rows:
        status, why, options = suite_judgement(row)
        start = time.perf_counter()
        ours = llm_math.math_equal(row["pred"], row["gold"], **options)
        llm_s += time.perf_counter() - start
        start = time.perf_counter()
        try:
            theirs = _mv_suite_verdict(row)
        except Exception:  # math-verify may raise on hostile input: "not equal"
            theirs = False
        mv_s += time.perf_counter() - start
        results.append((row, status, why, ours, theirs))
    n = len(results)
    agree = sum(ours == bool(r["expected"]) for r, _, _, ours, _ in results)
    right = [x for x in results if x[1] in ("ok", "option")]
    ok = [x for x in results if x[1] == "ok"]
    wrong = [x for x in results if x[1] == "mv-wrong"]
    print(f"\nmath-verify's test suite: {path} ({n} triples)")
    print(f"  llmgym agrees with the expected verdict:       {agree}/{n}")
    print(
        f"  ... on default-configuration cases:            "
        f"{sum(o == bool(r['expected']) for r, _, _, o, _ in ok)}/{len(ok)}"
    )
    print(
        f"  ... where math-verify is right (options given): "
        f"{sum(o == bool(r['expected']) for r, _, _, o, _ in right)}/{len(right)}"
    )
    print(
        f"  ... where math-verify's expectation is wrong:  "
        f"{sum(o != bool(r['expected']) for r, _, _, o, _ in wrong)}/{len(wrong)} llmgym right"
    )
    print(
        f"  math-verify agrees with its own expectations:   "
        f"{sum(t == bool(r['expected']) for r, _, _, _, t in results)}/{n}"
    )
    print(f"  time: llmgym {llm_s:.2f}s, math-verify {mv_s:.2f}s ({mv_s / max(llm_s, 1e-9):.1f}x)")
    for title, key in (
        ("test function", lambda r: f"{r['module']}::{r['function']}"),
        ("class", suite_class),
    ):
        groups: dict[str, list[Any]] = defaultdict(list)
        for x in results:
            groups[key(x[0])].append(x)
        print(f"\n  {title:<58} {'n':>4} {'llmgym':>7} {'math-verify':>12}")
        for name in sorted(groups):
            xs = groups[name]
            a = sum(o == bool(r["expected"]) for r, _, _, o, _ in xs)
            b = sum(t == bool(r["expected"]) for r, _, _, _, t in xs)
            print(f"  {name:<58} {len(xs):>4} {a:>7} {b:>12}")
    print("\n  judgements other than ok:")
    for r, status, why, ours, _ in results:
        if status != "ok":
            mark = "agrees" if ours == bool(r["expected"]) else "differs"
            print(f"    [{status}] {r['function']}: {why} (llmgym {mark})")
    if show:
        print("\n  llmgym disagrees with the expected verdict on:")
        for r, status, _why, ours, _ in results:
            if ours != bool(r["expected"]):
                print(
                    f"    [{status}] {r['function']} expected={r['expected']} "
                    f"gold={r['gold'][:70]!r} pred={r['pred'][-90:]!r}"
                )
    return 0


def accuracy(verdicts: list[bool], rows: list[dict[str, Any]]) -> float:
    return sum(v == r["equal"] for v, r in zip(verdicts, rows, strict=True)) / len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per checker")
    ap.add_argument("--show-disagreements", action="store_true")
    ap.add_argument(
        "--extract-suite",
        type=Path,
        metavar="DIR",
        help="a checkout of Math-Verify: read its tests' triples (with --write-suite)",
    )
    ap.add_argument("--write-suite", type=Path, metavar="OUT", help="where the triples go (JSON)")
    ap.add_argument(
        "--suite",
        type=Path,
        metavar="JSON",
        help="report agreement on math-verify's own test triples (extracted)",
    )
    ap.add_argument("--skip-corpus", action="store_true", help="only the suite report")
    args = ap.parse_args()  # fmt: skip

    import logging

    logging.disable(logging.WARNING)  # math-verify logs every timeout and parse failure
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    if args.extract_suite is not None:
        if args.write_suite is None:
            ap.error("--extract-suite needs --write-suite OUT")
        triples = extract_suite(args.extract_suite.resolve())
        args.write_suite.write_text(json.dumps(triples, indent=1), encoding="utf-8")
        print(f"{len(triples)} triples written to {args.write_suite}")
        if args.suite is None:
            return 0
    if args.skip_corpus:
        if args.suite is None:
            ap.error("--skip-corpus needs --suite JSON")
        return report_suite(args.suite, args.show_disagreements)
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
    if args.suite is not None:
        return report_suite(args.suite, args.show_disagreements)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
