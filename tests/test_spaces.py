"""Text space: membership, sampling, and Unicode through sync and async vector envs."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given
from hypothesis import strategies as st

import llmgym
from llmgym.declarative import DeclarativeEnv
from llmgym.spaces import Text

UNICODE_TASKS = [
    {"id": "de", "prompt": "Grüße aus Köln — wie heißt die Stadt?", "answer": "Köln"},
    {"id": "zh", "prompt": "北京是哪个国家的首都？", "answer": "中国"},
    {"id": "emoji", "prompt": "Which animal is 🦊? (one word)", "answer": "fox"},
    {"id": "nul", "prompt": "NUL\x00inside, surrogate-free 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "answer": "ok"},
]
ENV_ID = "testspaces/Unicode-v0"


@pytest.fixture(scope="module", autouse=True)
def unicode_env():
    llmgym.register_task_env(ENV_ID, tasks=UNICODE_TASKS, overwrite=True)


@given(st.text())
def test_any_unicode_string_is_contained(text):
    assert Text(None).contains(text)
    assert Text(len(text)).contains(text) and not Text(
        max(len(text) - 1, 0), min_length=0
    ).contains(text + "x")


def test_bounds_and_types():
    space = Text(5, min_length=2)
    assert not space.contains("a") and space.contains("ab") and not space.contains("abcdef")
    assert not space.contains(b"ab") and not space.contains(None)
    with pytest.raises(ValueError):
        Text(1, min_length=2)
    with pytest.raises(ValueError):
        Text(min_length=-1)


def test_sample_is_seeded_unicode_within_bounds():
    a, b = Text(40), Text(40)
    a.seed(7), b.seed(7)
    samples = [a.sample() for _ in range(50)]
    assert samples == [b.sample() for _ in range(50)]
    assert all(a.contains(s) for s in samples)
    assert any(not s.isascii() for s in samples)
    assert len(a.sample(mask=9)) == 9
    with pytest.raises(ValueError):
        a.sample(mask=41)


def test_gymnasium_check_env_passes():
    check_env(DeclarativeEnv(tasks=UNICODE_TASKS), skip_render_check=True)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs_carry_unicode_text(mode):
    envs = gym.make_vec(ENV_ID, num_envs=4, vectorization_mode=mode)
    try:
        obs, infos = envs.reset(seed=[0, 1, 2, 3], options={"task_id": "zh"})
        assert tuple(obs) == ("北京是哪个国家的首都？",) * 4
        for task_id in ("de", "emoji", "nul"):
            obs, infos = envs.reset(options={"task_id": task_id})
            expected = next(t["prompt"] for t in UNICODE_TASKS if t["id"] == task_id)
            assert tuple(obs) == (expected,) * 4
        obs, rewards, terminated, truncated, infos = envs.step(("Köln", "nope", "Köln", "köln"))
        assert list(rewards) == [0.0, 0.0, 0.0, 0.0]  # the task is 'nul' now: answer 'ok'
        envs.reset(options={"task_id": "de"})
        obs, rewards, *_ = envs.step(("Köln", "nope", "Köln", "köln"))
        assert list(rewards) == [1.0, 0.0, 1.0, 1.0]
    finally:
        envs.close()


def test_async_observations_update_after_every_step():
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="async")
    try:
        seen = []
        for task_id in ("de", "zh", "emoji"):
            obs, _ = envs.reset(options={"task_id": task_id})
            seen.append(obs[0])
        assert seen == [t["prompt"] for t in UNICODE_TASKS[:3]]
    finally:
        envs.close()


def test_unbounded_observation_space_explains_shared_memory():
    from llmgym.spaces import _create_text_shared_memory

    with pytest.raises(gym.error.CustomSpaceError, match="shared_memory"):
        _create_text_shared_memory(Text(None))
