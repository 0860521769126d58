"""Registry-wide gold test: every (env id, family) pair, at three seeds spread over difficulty.

For each task: the oracle's episode scores full marks (the top of ``reward_range``) and succeeds;
an empty answer scores less and does not succeed; the task id replays the same first observation
in a fresh instance. ``llm/Mixture-v0`` draws from the other envs' families, checked here through
them, and by seed below.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym.core import LLMEnv

SEEDS = ((0, 0.0), (1, 0.5), (2, 1.0))  # (index, difficulty)


def _pairs() -> list[tuple[str, str]]:
    out = []
    for env_id in llmgym.list_envs("llm"):  # the built-ins (tests register others)
        if env_id == "llm/Mixture-v0":
            continue
        try:
            families = llmgym.list_families(env_id)
        except llmgym.error.DependencyNotInstalled:
            continue  # a bridged library that is not installed (CI installs every extra)
        out += [(env_id, family) for family in families]
    return out


PAIRS = _pairs()
_ENVS: dict[str, gym.Env[Any, Any]] = {}


def _env(env_id: str) -> LLMEnv:
    if env_id not in _ENVS:
        _ENVS[env_id] = gym.make(env_id)
    base = _ENVS[env_id].unwrapped
    assert isinstance(base, LLMEnv)
    return base


def _play(env: LLMEnv, task_id: str, policy: Any) -> tuple[float, dict[str, Any], str]:
    obs, _ = env.reset(options={"task_id": task_id})
    total, info = 0.0, {}
    for _ in range(1_000):
        _, reward, terminated, truncated, info = env.step(policy(env))
        total += float(reward)
        if terminated or truncated:
            break
    return total, info, obs


def test_every_builtin_env_with_families_is_covered() -> None:
    covered = {env_id for env_id, _ in PAIRS}
    assert covered == set(llmgym.list_envs("llm")) - {"llm/Mixture-v0"}
    assert len(PAIRS) > 300


@pytest.mark.parametrize(("env_id", "family"), PAIRS, ids=[f"{e}:{f}" for e, f in PAIRS])
def test_oracle_full_marks_empty_less_and_replay(env_id: str, family: str) -> None:
    env = _env(env_id)
    build = env.source.build  # type: ignore[attr-defined]
    top = float(env.reward_range[1])
    for index, difficulty in SEEDS:
        task = build(family, difficulty, index)
        total, info, obs = _play(env, task.id, lambda e: e.oracle_action())
        assert info["is_success"] and total == pytest.approx(top), (
            task.id,
            total,
            info["feedback"],
        )
        empty, info, _ = _play(env, task.id, lambda e: "")
        assert empty < total and not info["is_success"], (task.id, empty)
        fresh = gym.make(env_id).unwrapped
        try:
            again, _ = fresh.reset(options={"task_id": task.id})
        finally:
            fresh.close()
        assert again == obs, task.id


def test_the_mixture_replays_and_grades_its_draws() -> None:
    env = gym.make("llm/Mixture-v0").unwrapped
    assert isinstance(env, LLMEnv)
    try:
        for seed in range(12):
            obs, info = env.reset(seed=seed)
            task_id = info["task_id"]
            total, info, again = _play(env, task_id, lambda e: e.oracle_action())
            assert again == obs, task_id
            assert info["is_success"] and total > 0, (task_id, info["feedback"])
    finally:
        env.close()
