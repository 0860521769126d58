"""Math-v0 episodes per second with the oracle policy, split into reset and step, beside the
math verifier alone on the same (oracle response, gold) pairs.

One process, one core. Each configuration plays the same fixed list of task ids (drawn once
from every family at random difficulties): ``reset`` rebuilds the task from its id and renders
the prompt; ``step`` grades the oracle's worked solution. The baseline row is
``llmgym.rewards.math.math_reward(response, gold)`` called directly in this process on the very
same (oracle response, gold) pairs, in the same cache state, so "step vs verifier" is the env's
grading overhead (message bookkeeping, the factored-form check, the step checker).

Two cache states, each timed for every row: ``warm``, the parser's caches (``normalize``,
``tokenize``, ``parse``, ``_value``: lru_caches of up to 4,096 strings of at most 1,000
characters each) as an untimed pass over the same list leaves them just before the timed one
(as when a GRPO group grades the same answers again; a long list may not fit); ``cold``, every
cache emptied (``llmgym.rewards.math.cache.clear_caches()``, outside the timed span) before each step and
each verifier call, so each one parses as a fresh response does. The passes take turns over
``--rounds`` rounds (medians shown), so a change of load falls on all alike.
Run: python benchmarks/math_env.py [--episodes 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium as gym
import numpy as np

import llmgym  # noqa: F401  (registers llm/Math-v0)
from llmgym.rewards.math import math_reward
from llmgym.rewards.math.cache import clear_caches

CONFIGS = (
    ("default", {}),
    ("process_reward=0.2", {"process_reward": 0.2}),
    ("subtask_mode=joint", {"subtask_mode": "joint"}),
    ("subtask_mode=sequential", {"subtask_mode": "sequential"}),
)


def task_ids(n: int) -> list[str]:
    env = gym.make("llm/Math-v0").unwrapped
    rng = np.random.default_rng(0)
    return [env.source.sample(rng).id for _ in range(n)]


def play(env: gym.Env, ids: list[str], cold: bool = False) -> tuple[float, float, int]:
    """Seconds spent in reset and in step over one episode per id, and the steps taken;
    ``cold``: the parser's caches emptied before each step (untimed)."""
    base = env.unwrapped
    reset_s = step_s = 0.0
    steps = 0
    for task_id in ids:
        t0 = time.perf_counter()
        env.reset(options={"task_id": task_id})
        t1 = time.perf_counter()
        reset_s += t1 - t0
        while True:
            action = base.oracle_action()
            if cold:
                clear_caches()
            t1 = time.perf_counter()
            _, reward, terminated, truncated, info = env.step(action)
            step_s += time.perf_counter() - t1
            steps += 1
            if terminated or truncated:
                break
        assert info["is_success"], (task_id, info["feedback"])
    return reset_s, step_s, steps


def verifier_only(ids: list[str], cold: bool = False) -> float:
    """Seconds ``math_reward`` takes over the (oracle response, gold) pairs of ``ids``;
    ``cold``: the parser's caches emptied before each call (untimed)."""
    env = gym.make("llm/Math-v0").unwrapped
    pairs = [(env.oracle(t), t.answer) for t in map(env.source.get, ids)]
    total = 0.0
    for response, gold in pairs:
        if cold:
            clear_caches()
        start = time.perf_counter()
        ok = math_reward(response, gold).success
        total += time.perf_counter() - start
        assert ok
    return total


def family_build_ms(items: int = 30) -> list[tuple[float, str]]:
    """Mean milliseconds to generate one task of each family (difficulties 0, 0.5 and 1)."""
    source = gym.make("llm/Math-v0").unwrapped.source
    out = []
    for name in source.families():
        start = time.perf_counter()
        for level in (0.0, 0.5, 1.0):
            for index in range(items):
                source.build(name, level, index)
        out.append((1e3 * (time.perf_counter() - start) / (3 * items), name))
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="turns each pass takes")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    ids = task_ids(args.episodes)
    n = len(ids)
    envs = {name: gym.make("llm/Math-v0", **kwargs) for name, kwargs in CONFIGS}
    verifier_only(ids[:50])  # warm-up, as for the envs
    for env in envs.values():
        play(env, ids[:50])  # warm-up: imports, caches
    verify: dict[bool, list[float]] = {False: [], True: []}
    plays: dict[tuple[str, bool], list[tuple[float, float, int]]] = {}
    for _ in range(args.rounds):  # taking turns: a change of load falls on all alike
        for cold in (False, True):
            if not cold:
                verifier_only(ids)  # warm: every pair seen once before the timed pass
            verify[cold].append(verifier_only(ids, cold))
            for name, env in envs.items():
                if not cold:
                    play(env, ids)
                plays.setdefault((name, cold), []).append(play(env, ids, cold))
    print(
        f"Math-v0 with the oracle policy, {n} episodes over all families, 1 core, "
        f"{args.rounds} rounds, passes taking turns, medians shown. Baseline: "
        f"llmgym.rewards.math.math_reward(oracle response, gold) called directly on the same "
        f"pairs. warm: parser caches as an untimed pass over the same list leaves them; "
        f"cold: every parser cache emptied before each step and each verifier call (untimed)\n"
    )
    print(
        "| configuration | caches | episodes/s | reset ms/ep | step ms/ep | steps/ep "
        "| step vs verifier alone (same caches) | cold step vs warm |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    verify_s = {cold: statistics.median(v) for cold, v in verify.items()}
    for cold in (False, True):
        v = verify_s[cold]
        vs_warm = f"{v / verify_s[False]:.2f}x" if cold else "-"
        print(
            f"| math_reward alone (baseline) | {'cold' if cold else 'warm'} | {n / v:,.0f} | - "
            f"| {1e3 * v / n:.3f} | 1 | 1.00x | {vs_warm} |"
        )
    for name in envs:
        for cold in (False, True):
            runs = plays[(name, cold)]
            reset_s = statistics.median(r[0] for r in runs)
            step_s = statistics.median(r[1] for r in runs)
            steps = runs[0][2]
            warm_step = statistics.median(r[1] for r in plays[(name, False)])
            vs_warm = f"{step_s / warm_step:.2f}x" if cold else "-"
            print(
                f"| {name} | {'cold' if cold else 'warm'} | {n / (reset_s + step_s):,.0f} "
                f"| {1e3 * reset_s / n:.3f} | {1e3 * step_s / n:.3f} | {steps / n:.2f} "
                f"| {step_s / verify_s[cold]:.2f}x | {vs_warm} |"
            )
    builds = family_build_ms()
    median = builds[len(builds) // 2][0]
    print(f"\nTask generation, {len(builds)} families: median {median:.3f} ms/task; slowest:\n")
    print("| family | ms/task | vs median |")
    print("|---|---:|---:|")
    for ms, name in builds[-3:][::-1]:
        print(f"| {name} | {ms:.3f} | {ms / median:.1f}x |")


if __name__ == "__main__":
    main()
