"""Fixtures for the agents tests: a tiny saved model and a multi-turn tool env."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents_common import DIGITS_ENV, DIGITS_TASKS, TOOL_ENV, ToolAddEnv  # noqa: F401

import llmgym


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
