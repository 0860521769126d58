"""Tool-calling benchmarks: llmgym's checks beside BFCL's own checkers on BFCL's data, and
ToolCalling-v0 episodes/s under the oracle policy.

Measured side by side in one run, each as a ratio (the baseline is the peer as its users run it):

- AST check: ``match_calls`` (the env's grading: Java/JavaScript code strings read as BFCL reads
  them, then ``ast_match``) against BFCL's ``ast_checker`` (bfcl-eval 2026.3.23), on the same
  gold and perturbed calls of every AST category (``llmgym.envs.tools.bfcl.conformance``):
  agreement, and calls/s of each. Beside the peer only, the baseline this project wrote before:
  jsonschema validation + dict equality on the same calls (it knows no optional parameters,
  alternatives, string standardisation or call order: a speed baseline, not an equal).
- Multi-turn check: llmgym's checker (``bfcl.multi_turn.Session``) and whole env episodes against
  BFCL's ``multi_turn_checker``, on the same ground-truth and perturbed trajectories, both
  running BFCL's own backends: agreement, and trajectories/s of each.
- ToolCalling-v0: episodes with the seeded-database image cache against the same episodes with
  the cache cleared before every reset (each reset seeds its SQLite database from scratch).

The BFCL rows need ``pip install --no-deps bfcl-eval==2026.3.23``; without it they are skipped.

Usage: python benchmarks/tools.py [--episodes 200] [--multi-turn-tasks 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import jsonschema

import llmgym  # noqa: F401  (registers the envs)
from llmgym.envs.tools import ToolCallingEnv, scenario
from llmgym.envs.tools.bfcl import peer as bfcl_peer
from llmgym.rewards.tools import ast_match_result


def run_episodes(env: ToolCallingEnv, task_ids: list[str], *, cold: bool) -> tuple[float, int]:
    steps = 0
    start = time.perf_counter()
    for task_id in task_ids:
        if cold:
            scenario._seeded_image.cache_clear()
        env.reset(options={"task_id": task_id})
        while True:
            _, reward, terminated, truncated, _ = env.step(env.oracle_action())
            steps += 1
            if terminated or truncated:
                assert reward == 1.0, task_id
                break
    return time.perf_counter() - start, steps


def naive_match(
    calls: list[dict[str, Any]], gold: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> bool:
    """The check a user would write by hand (this project's old baseline)."""
    specs = {t["name"]: t["parameters"] for t in tools}
    if len(calls) != len(gold):
        return False
    for call, want in zip(calls, gold, strict=True):
        ((name, args),) = call.items()
        ((gname, gparams),) = want.items()
        if name != gname or name not in specs:
            return False
        try:
            jsonschema.validate(args, specs[name])
        except jsonschema.ValidationError:
            return False
        expected = {k: v[0] for k, v in gparams.items() if v and v[0] != ""}
        if args != expected:
            return False
    return True


def timed(runs: Sequence[Callable[[], Any]], repeats: int) -> list[float]:
    """Median seconds of each run, the runs taken in turns ``repeats`` times."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def bfcl_rows(args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    from llmgym.envs.tools.bfcl import CATEGORIES, conformance, kind_of, load_bfcl

    rows = []
    ast_cases = [
        case
        for category in CATEGORIES
        if kind_of(category) == "ast"
        for task in load_bfcl(category)
        for case in conformance.ast_cases(task)
    ]
    ours = [conformance.llmgym_ast(c) for c in ast_cases]
    theirs = [conformance.bfcl_ast(c) for c in ast_cases]
    agree = sum(a == b for a, b in zip(ours, theirs, strict=True))
    differ = sorted(
        {(c.label, a) for c, a, b in zip(ast_cases, ours, theirs, strict=True) if a != b}
    )
    rows.append(
        (
            f"AST verdicts, {len(ast_cases):,} gold and perturbed calls of {len({c.task.id for c in ast_cases}):,} tasks",
            f"{agree:,} agree",
            f"BFCL ast_checker: {len(ast_cases) - agree} differ {differ}",
            f"{agree / len(ast_cases):.4%} agreement",
        )
    )
    python = [c for c in ast_cases if not c.task.metadata.get("language")]
    results = [
        (c.calls, c.task.answer["ground_truth"], c.task.metadata["functions"]) for c in python
    ]
    t_ours, t_bfcl, t_explained, t_bfcl_py, t_naive = timed(
        [
            lambda: [conformance.llmgym_ast(c) for c in ast_cases],
            lambda: [conformance.bfcl_ast(c) for c in ast_cases],
            lambda: [ast_match_result(*r) for r in results],
            lambda: [conformance.bfcl_ast(c) for c in python],
            lambda: [naive_match(*r) for r in results],
        ],
        args.repeats,
    )
    n, m = len(ast_cases), len(python)
    rows.append(
        (
            "AST check, calls/s: every AST category (the env's grading; ast_match inside)",
            f"{n / t_ours:,.0f}",
            f"BFCL ast_checker: {n / t_bfcl:,.0f}",
            f"{t_bfcl / t_ours:.2f}x",
        )
    )
    rows.append(
        (
            f"AST check with its reasons (ast_match_result), calls/s: the {m:,} Python calls",
            f"{m / t_explained:,.0f}",
            f"BFCL ast_checker: {m / t_bfcl_py:,.0f}; beside it, jsonschema + dict equality "
            f"(this project's old baseline): {m / t_naive:,.0f}",
            f"{t_bfcl_py / t_explained:.2f}x BFCL",
        )
    )

    env = gym.make("llm/FunctionCalling-v0", call_format="python")
    multi_cases = [
        case
        for category in CATEGORIES
        if kind_of(category) == "multi_turn"
        for task in load_bfcl(category)[: args.multi_turn_tasks]
        for case in conformance.multi_turn_cases(task)
    ]
    in_env = [conformance.llmgym_multi_turn(c, env) for c in multi_cases]
    checker = [conformance.llmgym_multi_turn_checker(c) for c in multi_cases]
    peer = [conformance.bfcl_multi_turn(c) for c in multi_cases]
    agree = sum(a == b for a, b in zip(in_env, peer, strict=True))
    same = sum(a == b for a, b in zip(checker, peer, strict=True))
    rows.append(
        (
            f"multi-turn verdicts, {len(multi_cases):,} trajectories of {len({c.task.id for c in multi_cases})} tasks",
            f"env {agree:,} agree; checker alone {same:,}",
            f"BFCL multi_turn_checker: {len(multi_cases) - agree} differ",
            f"{agree / len(multi_cases):.4%} agreement",
        )
    )
    t_checker, t_env, t_peer = timed(
        [
            lambda: [conformance.llmgym_multi_turn_checker(c) for c in multi_cases],
            lambda: [conformance.llmgym_multi_turn(c, env) for c in multi_cases],
            lambda: [conformance.bfcl_multi_turn(c) for c in multi_cases],
        ],
        args.repeats,
    )
    k = len(multi_cases)
    rows.append(
        (
            "multi-turn check, trajectories/s (both on BFCL's backends)",
            f"checker {k / t_checker:,.0f}; whole env episodes {k / t_env:,.0f}",
            f"BFCL multi_turn_checker: {k / t_peer:,.0f}",
            f"{t_peer / t_checker:.2f}x checker; {t_peer / t_env:.2f}x env",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument(
        "--multi-turn-tasks", type=int, default=50, help="tasks per multi-turn category"
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rows: list[tuple[str, str, str, str]] = []
    if bfcl_peer.installed():
        rows += bfcl_rows(args)
    else:
        print(f"(BFCL rows skipped: bfcl-eval is not installed; {bfcl_peer.INSTALL})\n")

    env = ToolCallingEnv()
    task_ids = [t.id for t in env.source.iter_tasks(args.episodes, seed=0)]
    for task_id in task_ids:  # build every task once so both runs measure episodes, not generation
        env.source.get(task_id)
    warm, cold = [], []
    steps = 0
    for _ in range(args.repeats):
        t_warm, steps = run_episodes(env, task_ids, cold=False)
        t_cold, _ = run_episodes(env, task_ids, cold=True)
        warm.append(t_warm)
        cold.append(t_cold)
    w, c = statistics.median(warm), statistics.median(cold)
    rows.append(
        (
            "ToolCalling-v0 oracle episodes/s (steps/s)",
            f"{args.episodes / w:,.0f} ({steps / w:,.0f})",
            f"database seeded from scratch per reset: {args.episodes / c:,.0f} ({steps / c:,.0f})",
            f"{c / w:.2f}x",
        )
    )

    print("| measure | llmgym | baseline (same run) | ratio |")
    print("|---|---:|---:|---:|")
    for name, ours, base, ratio in rows:
        print(f"| {name} | {ours} | {base} | {ratio} |")
    print(
        f"\nmedian of {args.repeats} rounds taken in turns; ratio = baseline time / llmgym time "
        "(above 1: llmgym faster). ToolCalling: {0} procedural tasks over {1} families.".format(
            args.episodes, len(env.source.families())
        )
    )


if __name__ == "__main__":
    main()
