"""Tool-calling throughput: ToolCalling-v0 episodes/s under the oracle policy, and ast_match calls/s.

Baselines, measured side by side in this run:
- episodes: the same episodes with the seeded-database image cache cleared before every reset
  (each reset then seeds its SQLite database from scratch, as a naive env would);
- ast_match: validating the same calls with ``jsonschema`` (Draft 7) and comparing arguments to one
  gold dict by equality, the check a user would write by hand (it knows no optional parameters,
  alternatives, string normalisation or call order, so it is a speed baseline, not an equal).

Usage: python benchmarks/tools.py [--episodes 200] [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import jsonschema

from llmgym.envs.tools import ToolCallingEnv, scenario
from llmgym.envs.tools.single import FunctionCallingEnv, gold_calls
from llmgym.rewards.tools import ast_match


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


def match_cases(
    n: int,
) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]]:
    env = FunctionCallingEnv()
    cases = []
    for i in range(n):
        env.reset(seed=i)
        task = env.episode.task  # type: ignore[union-attr]
        gold = task.answer["ground_truth"]
        calls = [{c.name: c.arguments} for c in gold_calls(gold)]
        cases.append((calls, gold, task.metadata["functions"]))
    return cases


def naive_match(
    calls: list[dict[str, Any]], gold: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> bool:
    specs = {t["name"]: t["parameters"] for t in tools}
    if len(calls) != len(gold):
        return False
    for call, want in zip(calls, gold, strict=True):
        ((name, args),) = call.items()
        ((gname, gparams),) = want.items()
        if name != gname:
            return False
        jsonschema.validate(args, specs[name])
        expected = {k: v[0] for k, v in gparams.items() if v and v[0] != ""}
        if args != expected:
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    env = ToolCallingEnv()
    task_ids = [t.id for t in env.source.iter_tasks(args.episodes, seed=0)]
    for task_id in task_ids:  # build every task once so both runs measure episodes, not generation
        env.source.get(task_id)
    rows = []
    warm, cold = [], []
    steps = 0
    for _ in range(args.repeats):
        t_warm, steps = run_episodes(env, task_ids, cold=False)
        t_cold, _ = run_episodes(env, task_ids, cold=True)
        warm.append(t_warm)
        cold.append(t_cold)
    w, c = statistics.median(warm), statistics.median(cold)
    rows.append(("ToolCalling-v0 oracle episodes/s", args.episodes / w, args.episodes / c, c / w))
    rows.append(("ToolCalling-v0 oracle steps/s", steps / w, steps / c, c / w))

    cases = match_cases(200)
    reps = max(1, args.calls // len(cases))
    ours, base = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(reps):
            for calls, gold, tools in cases:
                assert ast_match(calls, gold, tools)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(reps):
            for calls, gold, tools in cases:
                naive_match(calls, gold, tools)
        base.append(time.perf_counter() - start)
    n = reps * len(cases)
    o, b = statistics.median(ours), statistics.median(base)
    rows.append(("ast_match calls/s (gold vs baseline check)", n / o, n / b, b / o))

    print("| measure | llmgym | baseline | ratio (llmgym / baseline) |")
    print("|---|---:|---:|---:|")
    for name, ours_rate, base_rate, ratio in rows:
        print(f"| {name} | {ours_rate:,.0f} | {base_rate:,.0f} | {ratio:.2f}x |")
    print(
        f"\n{args.episodes} procedural tasks over {len(env.source.families())} families, hermes format; "
        f"median of {args.repeats} runs. Episode baseline: database seeded from scratch each reset. "
        "ast_match baseline: jsonschema validation + exact dict equality."
    )


if __name__ == "__main__":
    main()
