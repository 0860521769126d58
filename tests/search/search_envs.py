"""A synthetic env with a known tree of rewards, and seeded policies for the search tests.

LetterTreeEnv: three turns, one letter each. Every letter that extends a prefix of the goal word
"cbd" earns a process reward of 0.25, and spelling it whole earns the outcome 1 on top (return
1.75, the optimum). A decoy pays more at first: every "a" earns 0.3 (return 0.9 for "aaa"). The
policy prefers the decoy: letters a, b, c, d with probabilities 0.4, 0.3, 0.2, 0.1, so a single
episode spells the goal with probability 0.006.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmgym import LLMEnv, Turn
from llmgym.policies import Policy, Request, Response
from llmgym.tasks import DatasetSource, Task

GOAL = "cbd"
LETTERS = "abcd"
PROBS = (0.4, 0.3, 0.2, 0.1)
OPTIMUM = 0.25 * 3 + 1.0


def step_reward(word: str) -> float:
    """The reward of the step that made ``word`` (the letters so far)."""
    if GOAL.startswith(word):
        return 0.25 + (1.0 if word == GOAL else 0.0)
    return 0.3 if word.endswith("a") else 0.0


class LetterTreeEnv(LLMEnv):
    """Spell a hidden three-letter word one letter per turn (see the module docstring)."""

    domain = "letters"
    reward_range = (0.0, 1.25)
    default_max_turns = 3

    def __init__(self, **kwargs: Any):
        task = Task(id="word", domain="letters", family="letters", prompt="Spell it.", answer=GOAL)
        super().__init__(DatasetSource([task]), **kwargs)

    def on_reset(self, episode: Any) -> None:
        episode.extra["word"] = ""

    def respond(self, episode: Any, message: dict[str, Any]) -> Turn:
        letter = (message["content"].strip()[:1] or "?").lower()
        word = episode.extra["word"] = episode.extra["word"] + letter
        done = len(word) == len(GOAL)
        return Turn(step_reward(word), done, f"so far: {word}", is_success=done and word == GOAL)

    def oracle(self, task: Task) -> str:
        return GOAL[self.episode.turn] if self.episode is not None else GOAL[0]


class LetterPolicy(Policy):
    """Samples letters with PROBS from its own seeded generator; gives log-probs and 1 token."""

    spec = "letters"

    def __init__(self, seed: int = 0, probs: Sequence[float] = PROBS):
        self.settings = {"max_new_tokens": 1}
        self.probs = list(probs)
        self.calls = 0
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.calls += len(requests)
        picks = self.rng.choice(len(LETTERS), size=len(requests), p=self.probs)
        return [
            Response(LETTERS[i], completion_tokens=1, logprobs=[math.log(self.probs[i])])
            for i in picks
        ]


class FailingPolicy(LetterPolicy):
    """A LetterPolicy that raises, or blocks until released, from its ``fail_at``-th sample on."""

    def __init__(self, fail_at: int, *, block: threading.Event | None = None):
        super().__init__(0)
        self.fail_at = fail_at
        self.block = block

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        if self.calls + len(requests) >= self.fail_at:
            if self.block is not None:
                self.block.wait(30)
            else:
                raise ConnectionError("model server went away")
        return super().generate(requests)


class MixedOraclePolicy(Policy):
    """The env's oracle action on every other sample, a wrong answer on the rest."""

    spec = "oracle-mixed"

    def __init__(self) -> None:
        self.settings = {}
        self.n = 0

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            self.n += 1
            action = req.env.unwrapped.oracle_action() if self.n % 2 else "I am not sure."
            out.append(Response(action))
        return out


def all_words() -> list[str]:
    return [a + b + c for a in LETTERS for b in LETTERS for c in LETTERS]


def letter_c(messages: Any, tools: Any) -> str:
    """A callable policy for the CLI test: always the goal's first letter."""
    return "c"
