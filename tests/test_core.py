"""LLMEnv: the episode contract, options, multi-turn, subtask modes, snapshots, rendering."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
import pytest

import llmgym
from llmgym import error
from llmgym.core import Episode, LLMEnv, Turn, to_assistant_message
from llmgym.declarative import DeclarativeEnv
from llmgym.rewards import RewardResult
from llmgym.tasks import Family, ProceduralSource, Subtask, Task, draft

CAPITALS = [
    {"id": "fr", "prompt": "Capital of France?", "answer": "Paris", "family": "europe"},
    {
        "id": "jp",
        "prompt": "Capital of Japan?",
        "answer": "Tokyo",
        "family": "asia",
        "difficulty": 0.5,
    },
    {
        "id": "pe",
        "prompt": "Capital of Peru?",
        "answer": "Lima",
        "family": "americas",
        "difficulty": 1.0,
    },
]

MULTISTEP = Task(
    id="trip",
    prompt="A car drives 3 hours at 40 km/h, then 2 hours at 50 km/h.",
    answer="220",
    subtasks=(
        Subtask("s1", "How far does it go in the first part?", "120", verifier="numeric"),
        Subtask("s2", "How far in the second part?", "100", verifier="numeric"),
        Subtask(
            "s3", "How far in total?", "220", verifier="numeric", depends_on=("s1", "s2"), weight=2
        ),
    ),
)


def guess_family(rng: random.Random, difficulty: float) -> Task:
    top = 4 + int(difficulty * 60)
    return draft(
        f"Guess my number between 1 and {top}.", rng.randint(1, top), metadata={"top": top}
    )


class GuessEnv(LLMEnv):
    """A multi-turn env for the tests: the model guesses, the env says higher or lower."""

    domain = "test"
    reward_range = (0.0, 1.0)
    default_max_turns = 3

    def __init__(self, **kwargs):
        super().__init__(ProceduralSource([Family("guess", guess_family)], domain="test"), **kwargs)

    def respond(self, episode: Episode, message) -> Turn:
        secret = episode.task.answer
        try:
            guess = int(message["content"].strip())
        except ValueError:
            return Turn(
                0.0,
                terminated=False,
                observation="Please answer with a number.",
                feedback="not a number",
            )
        if guess == secret:
            return Turn(
                1.0, terminated=True, observation="Right!", is_success=True, feedback="Right!"
            )
        hint = "higher" if guess < secret else "lower"
        return Turn(
            0.0, terminated=False, observation=hint, feedback=hint, components={"correctness": 0.0}
        )

    def oracle(self, task: Task) -> str:
        return str(task.answer)


@pytest.fixture
def capitals():
    return DeclarativeEnv(tasks=CAPITALS, verifier="exact", system_prompt="Answer briefly.")


def test_reset_info_has_the_contract_keys(capitals):
    obs, info = capitals.reset(seed=3)
    assert set(info) >= {
        "task_id",
        "domain",
        "family",
        "difficulty",
        "messages",
        "tools",
        "subtask",
        "max_turns",
    }
    assert info["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert info["messages"][-1] == {"role": "user", "content": obs}
    assert info["tools"] == [] and info["subtask"] is None and info["max_turns"] == 1


def test_single_turn_episode_terminates_and_grades(capitals):
    obs, info = capitals.reset(options={"task_id": "jp"})
    assert obs == "Capital of Japan?"
    obs, reward, terminated, truncated, info = capitals.step("  tokyo ")
    assert (reward, terminated, truncated, info["is_success"]) == (1.0, True, False, True)
    assert info["reward_components"] == {"correctness": 1.0}
    assert info["messages"][-1] == {"role": "assistant", "content": "  tokyo "}


def test_same_seed_same_task_and_rng_is_per_instance(capitals):
    other = DeclarativeEnv(tasks=CAPITALS)
    ids_a = [capitals.reset(seed=s)[1]["task_id"] for s in range(20)]
    random.seed(1), np.random.seed(1)  # global state must not matter
    ids_b = [other.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert ids_a == ids_b and len(set(ids_a)) == 3


def test_unseeded_resets_continue_the_instance_rng(capitals):
    capitals.reset(seed=0)
    first = [capitals.reset()[1]["task_id"] for _ in range(10)]
    capitals.reset(seed=0)
    second = [capitals.reset()[1]["task_id"] for _ in range(10)]
    assert first == second


def test_options_task_difficulty_family(capitals):
    _, info = capitals.reset(options={"family": "asia"})
    assert info["task_id"] == "jp"
    _, info = capitals.reset(seed=1, options={"difficulty": 0.9})
    assert info["task_id"] == "pe"  # closest difficulty
    obs, info = capitals.reset(
        options={"task": {"id": "x", "prompt": "Capital of Chile?", "answer": "Santiago"}}
    )
    assert obs == "Capital of Chile?" and capitals.step("Santiago")[1] == 1.0
    with pytest.raises(error.Error, match="Unknown reset option"):
        capitals.reset(options={"taskid": "jp"})
    with pytest.raises(error.UnknownTask):
        capitals.reset(options={"task_id": "nope"})
    with pytest.raises(error.UnknownFamily):
        capitals.reset(options={"family": "oceania"})
    with pytest.raises(error.Error, match="difficulty"):
        capitals.reset(options={"difficulty": 7})


def test_misuse_errors_are_gymnasium_errors(capitals):
    with pytest.raises(error.ResetNeeded, match="before reset"):
        capitals.step("Paris")
    capitals.reset(seed=0)
    capitals.step("Paris")
    with pytest.raises(gym.error.ResetNeeded, match="ended"):
        capitals.step("Paris")
    capitals.reset(seed=0)
    for bad in (
        None,
        1,
        2.5,
        b"Paris",
        ["Paris"],
        {"content": 5},
        {"content": "x", "color": "red"},
    ):
        with pytest.raises(gym.error.InvalidAction):
            capitals.step(bad)
    assert capitals.step("Paris")[2]  # the bad actions changed nothing


def test_unknown_env_id_suggests_the_closest():
    llmgym.register_task_env("testns/Capitals-v0", tasks=CAPITALS, overwrite=True)
    with pytest.raises(error.UnknownEnv, match="Did you mean: `Capitals`"):
        llmgym.make("testns/Capitols-v0")


def test_dict_actions_with_tool_calls_are_normalized():
    msg = to_assistant_message(
        {
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
        }
    )
    assert msg == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
        ],
    }
    with pytest.raises(error.InvalidAction, match="tool_calls\\[0\\]"):
        to_assistant_message({"tool_calls": [{"function": "f"}]})
    with pytest.raises(error.InvalidAction, match="role"):
        to_assistant_message({"role": "user", "content": "hi"})


def test_lone_surrogates_and_nul_bytes_are_kept_safe(capitals):
    capitals.reset(options={"task_id": "fr"})
    _, reward, *_, info = capitals.step("Par\ud800is\x00")
    assert reward == 0.0
    assert info["messages"][-1]["content"] == "Par\ufffdis\x00"
    info["messages"][-1]["content"].encode("utf-8")


def test_multi_turn_feedback_and_truncation():
    env = GuessEnv(max_turns=3)
    obs, info = env.reset(seed=0)
    secret = env.episode.task.answer
    wrong = secret + 1
    obs, reward, terminated, truncated, info = env.step(str(wrong))
    assert (obs, reward, terminated, truncated) == ("lower", 0.0, False, False)
    assert info["messages"][-1] == {"role": "user", "content": "lower"}
    env.step("banana")
    obs, reward, terminated, truncated, info = env.step(str(wrong))
    assert (terminated, truncated) == (False, True)
    with pytest.raises(error.ResetNeeded):
        env.step(str(secret))
    env.reset(seed=0)
    assert env.step(str(secret))[1:3] == (1.0, True)


def test_procedural_task_ids_replay_exactly():
    env = GuessEnv()
    obs, info = env.reset(seed=123, options={"difficulty": 0.73})
    assert info["task_id"].startswith("guess:0.73:")
    fresh = GuessEnv()
    obs2, info2 = fresh.reset(options={"task_id": info["task_id"]})
    assert obs2 == obs and fresh.episode.task == env.episode.task


def test_sequential_subtasks_reward_each_step_then_the_outcome():
    env = DeclarativeEnv(tasks=[MULTISTEP], verifier="numeric", subtask_mode="sequential")
    assert env.reward_range == (0.0, 2.0)
    obs, info = env.reset(seed=0)
    assert "Step 1 of 3" in obs and info["subtask"] == {"index": 0, "total": 3, "id": "s1"}
    assert info["max_turns"] == 3
    obs, r1, term, trunc, info = env.step("120 km")
    assert r1 == pytest.approx(0.25) and not term and "Step 2 of 3" in obs
    assert info["subtask"]["id"] == "s2" and info["subtask_rewards"] == {"s1": 1.0}
    obs, r2, term, trunc, info = env.step("90")
    assert r2 == 0.0 and not term
    obs, r3, term, trunc, info = env.step("220")
    assert term and r3 == pytest.approx(0.5 + 1.0)
    assert info["reward_components"] == {"process": 0.5, "correctness": 1.0}
    assert info["subtask_rewards"] == {"s1": 1.0, "s2": 0.0, "s3": 1.0}


def test_joint_subtasks_give_partial_credit_and_refuse_hedges():
    env = DeclarativeEnv(tasks=[MULTISTEP], verifier="numeric", subtask_mode="joint")
    obs, _ = env.reset(seed=0)
    assert '<answer id="s1">' in obs
    answer = (
        '<answer id="s1">120</answer> <answer id="s2">100</answer> <answer id="s3">200</answer>'
    )
    _, reward, term, _, info = env.step(answer)
    assert term and reward == pytest.approx(0.5) and not info["is_success"]
    env.reset(seed=0)
    hedge = '<answer id="s1">120</answer><answer id="s1">121</answer><answer id="s2">100</answer>'
    _, reward, *_, info = env.step(hedge)
    assert reward == pytest.approx(0.25) and "several different answers" in info["feedback"]
    env.reset(seed=0)
    _, reward, *_, info = env.step(env.oracle_action())
    assert reward == pytest.approx(1.0) and info["is_success"]


def test_subtask_mode_without_subtasks_behaves_plainly(capitals):
    env = DeclarativeEnv(tasks=CAPITALS, subtask_mode="sequential")
    _, info = env.reset(options={"task_id": "fr"})
    assert info["subtask"] is None
    assert env.step("Paris")[1] == 1.0


def test_get_state_set_state_branches_an_episode():
    env = GuessEnv(max_turns=5)
    env.reset(seed=4)
    env.step("1")
    snap = env.get_state()
    a = env.step("2")
    env.set_state(snap)
    b = env.step("2")
    assert a[:4] == b[:4] and a[4]["messages"] == b[4]["messages"]
    with pytest.raises(error.InvalidState):
        env.set_state({"format": 1, "env": "GuessEnv"})
    with pytest.raises(error.InvalidState):
        DeclarativeEnv(tasks=CAPITALS).set_state(snap)


def test_render_ansi_shows_the_transcript():
    env = GuessEnv(render_mode="ansi")
    env.reset(seed=0)
    env.step("1")
    text = env.render()
    assert text.startswith("[user] Guess my number") and "[assistant] 1" in text
    assert GuessEnv().render() is None
    with pytest.raises(error.Error, match="render_mode"):
        GuessEnv(render_mode="human")


def test_constructor_validation():
    with pytest.raises(error.Error, match="subtask_mode"):
        GuessEnv(subtask_mode="parallel")
    with pytest.raises(error.Error, match="max_turns"):
        GuessEnv(max_turns=0)
    with pytest.raises(error.UnknownFamily):
        GuessEnv(family="nope")
    with pytest.raises(error.Error, match="difficulty"):
        GuessEnv(difficulty=(0.8, 0.2))


def test_non_finite_rewards_are_refused():
    class Broken(GuessEnv):
        def respond(self, episode, message):
            return Turn(float("nan"))

    env = Broken()
    env.reset(seed=0)
    with pytest.raises(error.Error, match="non-finite"):
        env.step("1")
    with pytest.raises(ValueError, match="finite"):
        RewardResult(float("inf"))


def test_check_env_in_sequential_mode_with_tasks_lacking_subtasks():
    env = DeclarativeEnv(tasks=[MULTISTEP, *CAPITALS], verifier="exact", subtask_mode="sequential")
    assert env.reward_range == (0.0, 2.0) and env.outcome_reward_range == (0.0, 1.0)
    llmgym.check_env(env, seeds=tuple(range(6)))
