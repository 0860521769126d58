"""Fixtures of the evaluation tests: the test envs of eval_envs.py, registered per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from eval_envs import ADD_ID, ADD_TASKS, FLAKY_ID, GUESS_ID, FlakyEnv, GuessEnv

import llmgym


@pytest.fixture(scope="module", autouse=True)
def _eval_test_envs() -> Iterator[None]:
    """Register the test envs while a module of this folder runs, and only then.

    Registering them at import would put them in ``llmgym.list_envs()`` while the
    registry-wide contract tests are collected, and FlakyEnv breaks that contract on purpose.
    """
    llmgym.register_task_env(
        ADD_ID, tasks=ADD_TASKS, verifier="exact", domain="arith", overwrite=True
    )
    llmgym.register(GUESS_ID, GuessEnv)
    llmgym.register(FLAKY_ID, FlakyEnv)
    yield
    for env_id in (ADD_ID, GUESS_ID, FLAKY_ID):
        gym.registry.pop(env_id, None)


@pytest.fixture
def out(tmp_path: Any) -> Any:
    return tmp_path / "run"
