"""Envs and policies the evaluation tests share: a single-turn declarative env, a multi-turn
guessing game that reports sandbox-like ``exec`` facts, and an env that raises.

conftest.py registers them while each test module of this folder runs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from llmgym import Family, LLMEnv, ProceduralSource, Turn
from llmgym.rewards import RewardResult
from llmgym.tasks import Task, draft

ADD_ID = "evaltest/Add-v0"
GUESS_ID = "evaltest/Guess-v0"
FLAKY_ID = "evaltest/Flaky-v0"

ADD_TASKS = [
    {
        "id": f"add-{i}",
        "prompt": f"What is {i} + {i % 4}?",
        "answer": str(i + i % 4),
        "family": ("small", "large")[i >= 6],
        "difficulty": round((i % 3) / 2, 2),
    }
    for i in range(12)
]


def _guess_task(rng: random.Random, difficulty: float) -> Task:
    high = 8 + int(difficulty * 56)
    return draft(f"I picked a whole number from 1 to {high}. Guess it.", rng.randint(1, high))


class GuessEnv(LLMEnv):
    """Multi-turn: the env answers "higher"/"lower" until the guess is right or turns run out.

    Each step reports an ``exec`` fact: ``timeout`` for a negative guess, ``runtime_error``
    for text that is not a number, ``ok`` otherwise.
    """

    domain = "games"
    reward_range = (0.0, 1.0)
    default_max_turns = 7

    def __init__(self, **kwargs: Any):
        super().__init__(ProceduralSource([Family("guess", _guess_task)], domain="games"), **kwargs)

    def secrets(self, task: Task) -> list[str]:
        return []

    def respond(self, episode: Any, message: dict[str, Any]) -> Turn:
        text = message["content"].strip()
        try:
            guess = int(text)
        except ValueError:
            return Turn(
                0.0,
                False,
                "Say a whole number.",
                {"correctness": 0.0},
                info={"exec": {"status": "runtime_error", "signal": None}},
            )
        target = episode.task.answer
        if guess == target:
            return Turn(
                1.0,
                True,
                "Correct!",
                {"correctness": 1.0},
                is_success=True,
                feedback="correct",
                info={"exec": {"status": "ok"}},
            )
        hint = "higher" if guess < target else "lower"
        status = "timeout" if guess < 0 else "ok"
        return Turn(
            0.0, False, hint, {"correctness": 0.0}, feedback=hint, info={"exec": {"status": status}}
        )


class FlakyEnv(LLMEnv):
    """Single-turn; grading raises for tasks whose prompt mentions 'explode'."""

    domain = "flaky"

    def __init__(self, **kwargs: Any):
        from llmgym.tasks import DatasetSource

        tasks = [
            Task(id=f"f{i}", prompt="explode" if i % 3 == 0 else f"say {i}", answer=str(i))
            for i in range(6)
        ]
        super().__init__(DatasetSource(tasks, domain="flaky"), **kwargs)

    def grade(self, task: Task, message: dict[str, Any]) -> RewardResult:
        if task.prompt == "explode":
            raise RuntimeError("verifier exploded")
        return RewardResult.of(message["content"].strip() == task.answer)


def bisect_policy(messages: Sequence[dict[str, Any]], tools: Any) -> str:
    """Plays the guessing game by bisection from the hints in the transcript."""
    first = next(m for m in messages if m["role"] == "user")
    high = int(re.findall(r"to (\d+)", first["content"])[0])
    low = 1
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and i + 1 < len(messages):
            guess = int(m["content"])
            if messages[i + 1]["content"] == "higher":
                low = guess + 1
            elif messages[i + 1]["content"] == "lower":
                high = guess - 1
    return str((low + high) // 2)


def add_policy(messages: Sequence[dict[str, Any]], tools: Any) -> str:
    """Right on even operands, wrong on odd ones."""
    a, b = map(int, re.findall(r"(\d+) \+ (\d+)", messages[-1]["content"])[0])
    return str(a + b) if a % 2 == 0 else "no idea"
