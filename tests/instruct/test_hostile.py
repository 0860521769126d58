"""Attacks on Instruct-v0's reward, each named for what a policy would try to be paid for: the
prompt copied back, the instructions echoed, empty and huge answers, control characters, bare
required phrases, abstaining (no commas in nothing), and hypothesis-fuzzed responses (never a
crash, always a reward in range)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym  # noqa: F401  (registers the envs)
from llmgym.core import LLMEnv
from llmgym.rewards.instruct import grade_instructions
from llmgym.rewards.instruct.grade import ECHO_WORDS

FAMILIES = llmgym.list_families("llm/Instruct-v0")


@pytest.fixture(scope="module")
def env() -> Any:
    made = gym.make("llm/Instruct-v0")
    yield made.unwrapped
    made.close()


def _tasks(env: LLMEnv, n: int = 2) -> list[Any]:
    return [env.source.build(f, d, i) for f in FAMILIES for i, d in enumerate((0.0, 1.0)[:n])]  # type: ignore[attr-defined]


def _score(env: LLMEnv, task: Any, response: str) -> tuple[float, dict[str, Any]]:
    env.reset(options={"task_id": task.id})
    _, reward, *_, info = env.step(response)
    return float(reward), info


def test_prompt_copy_scores_nothing(env: LLMEnv) -> None:
    for task in _tasks(env):
        reward, info = _score(env, task, task.prompt)
        assert reward == 0.0 and not info["is_success"], task.id


def test_instructions_echoed_after_a_real_answer_score_nothing(env: LLMEnv) -> None:
    for task in _tasks(env):
        statements = task.prompt.split("\n\n")[-1]
        if max(len(s.split()) for s in task.answer["echo"]) < ECHO_WORDS + 2:
            continue  # too short to tell from an answer (and it asks for nothing to copy)
        reward, _ = _score(env, task, str(task.metadata["oracle"]) + "\n\n" + statements)
        assert reward == 0.0, task.id


def test_empty_whitespace_and_control_characters_score_nothing(env: LLMEnv) -> None:
    for task in _tasks(env, 1):
        for junk in ("", "   \n\t", "\x00\ud800 \u202e\ufeff" * 200, "a " * 50_000):
            reward, info = _score(env, task, junk)
            assert reward == 0.0 and not info["is_success"], (task.id, junk[:10])


def test_a_huge_response_is_graded_in_range_without_crashing(env: LLMEnv) -> None:
    task = env.source.build("write.word_count", 0.5, 1)  # type: ignore[attr-defined]
    reward, info = _score(env, task, str(task.metadata["oracle"]) * 2_000)
    assert 0.0 <= reward <= 1.0 and info["instruct"]["instructions"]


def test_required_phrases_alone_are_not_an_answer() -> None:
    spec = {
        "instructions": [
            {
                "id": "startend:end_checker",
                "kwargs": {"end_phrase": "Is there anything else I can help with?"},
            },
            {"id": "punctuation:no_comma", "kwargs": {}},
        ],
        "min_words": 8,
    }
    assert grade_instructions("Is there anything else I can help with?", spec).score == 0.0


def test_abstaining_earns_nothing_for_the_instructions_that_only_forbid() -> None:
    spec = {
        "instructions": [
            {"id": "keywords:existence", "kwargs": {"keywords": ["lantern"]}},
            {"id": "punctuation:no_comma", "kwargs": {}},
            {"id": "keywords:forbidden_words", "kwargs": {"forbidden_words": ["meadow"]}},
        ],
        "min_words": 3,
    }
    off = grade_instructions("Plain words without the one thing that was asked for here.", spec)
    assert off.score == 0.0 and off.components and not off.success
    on = grade_instructions("Plain words with a lantern that was asked for here.", spec)
    assert on.score == 1.0 and on.success


def test_a_hedged_yes_no_maybe_answer_follows_nothing() -> None:
    spec = {
        "instructions": [{"id": "detectable_format:constrained_response", "kwargs": {}}],
        "min_words": 3,
    }
    text = "My answer is yes. My answer is no. It depends on the weather and the budget."
    assert grade_instructions(text, spec).score == 0.0


def test_feedback_and_info_never_repeat_the_response(env: LLMEnv) -> None:
    task = _tasks(env, 1)[0]
    marker = "ZQXJ-secret-marker"
    _, info = _score(env, task, f"{marker} " * 30)
    assert marker not in info["feedback"] and marker not in str(info["instruct"])


@pytest.mark.timeout(300)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=3_000), index=st.integers(0, 10_000))
def test_fuzzed_responses_never_crash_and_stay_in_range(env: LLMEnv, text: str, index: int) -> None:
    family = FAMILIES[index % len(FAMILIES)]
    task = env.source.build(family, (index % 5) / 4, index)  # type: ignore[attr-defined]
    for response in (
        text,
        str(task.metadata["oracle"]) + text,
        text + str(task.metadata["oracle"]),
    ):
        reward, info = _score(env, task, response)
        assert 0.0 <= reward <= 1.0
        assert all(0.0 <= v <= 1.0 for v in info["reward_components"].values())
        assert sum(info["reward_components"].values()) == pytest.approx(reward)
