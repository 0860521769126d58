"""Fixtures for the agents tests: a tiny saved model and a multi-turn tool env."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

import llmgym
from llmgym.core import Episode, LLMEnv, Message, Turn
from llmgym.rewards import RewardResult
from llmgym.tasks import Family, ProceduralSource, Task, draft

MATH = "llm/Math-v0"
MATH_KWARGS = {"family": "arith.add_small", "difficulty": 0.0}

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "first addend"},
                "b": {"type": "integer", "description": "second addend"},
            },
            "required": ["a", "b"],
        },
    },
}


def _gen(rng: random.Random, difficulty: float) -> Task:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return draft(
        f"Use the add tool, then answer: what is {a} + {b}?", str(a + b), metadata={"a": a, "b": b}
    )


class ToolAddEnv(LLMEnv):
    """Multi-turn test env: the model may call ``add`` (a tool message comes back), then answers."""

    domain = "toyarith"
    reward_range = (0.0, 1.0)
    default_max_turns = 3

    def __init__(self, **kwargs: Any):
        super().__init__(ProceduralSource([Family("add2", _gen)], domain="toyarith"), **kwargs)

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [ADD_TOOL]

    def respond(self, episode: Episode, message: Message) -> Turn:
        calls = message.get("tool_calls") or []
        if calls:
            out = []
            for call in calls:
                args = call["function"]["arguments"]
                try:
                    args = args if isinstance(args, dict) else __import__("json").loads(args)
                    result = str(int(args["a"]) + int(args["b"]))
                except Exception:
                    result = "error: expects integer a and b"
                out.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            episode.extra["calls"] = episode.extra.get("calls", 0) + 1
            return Turn(0.0, terminated=False, observation=out[-1]["content"], messages=out)
        ok = message["content"].strip() == str(episode.task.answer)
        return Turn.graded(RewardResult.of(ok, "correct" if ok else "wrong"))

    def oracle_action(self) -> Any:
        ep = self.episode
        assert ep is not None
        if not ep.extra.get("calls"):
            a, b = ep.task.metadata["a"], ep.task.metadata["b"]
            fn = {"name": "add", "arguments": {"a": a, "b": b}}
            return {
                "content": "",
                "tool_calls": [{"id": "call_0", "type": "function", "function": fn}],
            }
        return str(ep.task.answer)


TOOL_ENV = "agents-test/ToolAdd-v0"


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)  # the suite runs two workers on two cores


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A saved nano tiny model (hf:<dir> loads it)."""
    from llmgym.agents.tiny import TinyConfig, build_tiny, default_corpus

    path = tmp_path_factory.mktemp("tiny") / "model"
    corpus = default_corpus(400) + ["What is 4 + 7?\n\nPut your final answer in \\boxed{}."] * 20
    build_tiny(
        TinyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, vocab_size=320),
        corpus=corpus,
        output_dir=path,
    )
    return str(path)


DIGITS_ENV = "agents-test/Length-v0"
DIGITS_TASKS = [
    {"id": f"d{i}", "prompt": f"Write a long line ({i}).", "answer": "0"} for i in range(64)
]


@pytest.fixture(autouse=True)
def _test_envs() -> Iterator[None]:
    """Register this directory's test envs for one test, then remove them: the registry-wide
    contract tests (which also rebuild every env in fresh processes) must not see them."""
    import gymnasium as gym

    added = []
    if TOOL_ENV not in gym.registry:
        llmgym.register(TOOL_ENV, ToolAddEnv)
        added.append(TOOL_ENV)
    if DIGITS_ENV not in gym.registry:
        llmgym.register_task_env(
            DIGITS_ENV,
            tasks=DIGITS_TASKS,
            verifier="agents_testing_verifiers:length_reward",
            domain="length",
        )
        added.append(DIGITS_ENV)
    yield
    for env_id in added:
        del gym.registry[env_id]
