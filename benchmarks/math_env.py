"""Math-v0 episodes per second with the oracle policy, split into reset and step, beside the
math verifier alone on the same (oracle response, gold) pairs.

One process, one core. Each configuration plays the same fixed list of task ids (drawn once
from every family at random difficulties): ``reset`` rebuilds the task from its id and renders
the prompt; ``step`` grades the oracle's worked solution. The baseline row is
``math_reward(response, gold)`` on the very same pairs, so "step vs verifier" is the env's
grading overhead (message bookkeeping, the factored-form check, the step checker).
Run: python benchmarks/math_env.py [--episodes 2000]
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np

import llmgym  # noqa: F401  (registers llm/Math-v0)
from llmgym.rewards.math import math_reward

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


def play(env: gym.Env, ids: list[str]) -> tuple[float, float, int]:
    """Seconds spent in reset and in step over one episode per id, and the steps taken."""
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
            t1 = time.perf_counter()
            _, reward, terminated, truncated, info = env.step(action)
            step_s += time.perf_counter() - t1
            steps += 1
            if terminated or truncated:
                break
        assert info["is_success"], (task_id, info["feedback"])
    return reset_s, step_s, steps


def verifier_only(ids: list[str]) -> float:
    env = gym.make("llm/Math-v0").unwrapped
    pairs = [(env.oracle(t), t.answer) for t in map(env.source.get, ids)]
    start = time.perf_counter()
    for response, gold in pairs:
        assert math_reward(response, gold).success
    return time.perf_counter() - start


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
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    ids = task_ids(args.episodes)
    n = len(ids)
    verifier_only(ids[:50])  # warm-up, as for the envs
    verify_s = verifier_only(ids)
    rows = []
    for name, kwargs in CONFIGS:
        env = gym.make("llm/Math-v0", **kwargs)
        play(env, ids[:50])  # warm-up: imports, caches
        reset_s, step_s, steps = play(env, ids)
        rows.append((name, reset_s, step_s, steps))
    print(f"Math-v0 with the oracle policy, {n} episodes over all families, 1 core\n")
    print(
        "| configuration | episodes/s | reset ms/ep | step ms/ep | steps/ep | step vs verifier alone |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| math_reward alone (baseline) | {n / verify_s:,.0f} | - | {1e3 * verify_s / n:.3f} | 1 | 1.00x |"
    )
    for name, reset_s, step_s, steps in rows:
        total = reset_s + step_s
        print(
            f"| {name} | {n / total:,.0f} | {1e3 * reset_s / n:.3f} | {1e3 * step_s / n:.3f} | "
            f"{steps / n:.2f} | {step_s / verify_s:.2f}x |"
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
