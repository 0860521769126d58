"""reset+step per second of a declarative llmgym env beside a bare gymnasium.Env doing the same work.

Both envs draw one of 1,000 question/answer tasks with their own RNG and compare the answer
after lowercasing and collapsing whitespace. The ratio is llmgym's bookkeeping cost: the
OpenAI-style message history, the info dict, action validation and the verifier table.
Run: python benchmarks/env_overhead.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import time

import gymnasium as gym

import llmgym
from llmgym.declarative import DeclarativeEnv
from llmgym.spaces import Text

TASKS = [
    {"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1000)
]
_WS = re.compile(r"\s+")


class BareEnv(gym.Env):
    """The baseline: the same task draw and string comparison, nothing else."""

    def __init__(self):
        self.observation_space = Text()
        self.action_space = Text(None)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task = TASKS[int(self.np_random.integers(len(TASKS)))]
        return self.task["prompt"], {}

    def step(self, action):
        ok = _WS.sub(" ", action).strip().casefold() == self.task["answer"]
        return "", float(ok), True, False, {}


def rate(env, seconds: float) -> float:
    env.reset(seed=0)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(200):
            env.reset()
            env.step("42")
        n += 200
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    llmgym.register_task_env("bench/Sum-v0", tasks=TASKS, verifier="exact", overwrite=True)
    rows = [
        ("bare gymnasium.Env (baseline)", rate(BareEnv(), args.seconds)),
        (
            "llmgym DeclarativeEnv, unwrapped",
            rate(DeclarativeEnv(tasks=TASKS, verifier="exact"), args.seconds),
        ),
        (
            "llmgym via gym.make (checker + order wrappers)",
            rate(gym.make("bench/Sum-v0"), args.seconds),
        ),
    ]
    base = rows[0][1]
    print("| env | reset+step / s (1 core) | vs baseline |")
    print("|---|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r:,.0f} | {r / base:.2f}x |")


if __name__ == "__main__":
    main()
