"""Instruct-v0: every family's oracle gets full marks at three difficulties (and in joint mode,
one subtask per instruction), IFEval's figures in info, loose grading, IFEval and llmgym JSONL,
and the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.rewards.instruct import CHECKS

FAMILIES = llmgym.list_families("llm/Instruct-v0")


def test_the_catalogue_is_wide_enough() -> None:
    assert len(FAMILIES) >= 20 and len(CHECKS) >= 27
    env = gym.make("llm/Instruct-v0").unwrapped
    used = {
        i["id"]
        for f in FAMILIES
        for k in range(6)
        for i in env.source.build(f, k / 5, k).answer["instructions"]
    }
    assert used == set(CHECKS), set(CHECKS) - used


@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_full_marks_strict_and_in_joint_mode(family: str) -> None:
    plain = gym.make("llm/Instruct-v0").unwrapped
    joint = gym.make("llm/Instruct-v0", subtask_mode="joint").unwrapped
    for index in range(6):
        task = plain.source.build(family, index / 5, index)
        plain.reset(options={"task_id": task.id})
        _, reward, terminated, _, info = plain.step(plain.oracle_action())
        assert reward == 1.0 and terminated and info["is_success"], (task.id, info["feedback"])
        figures = info["instruct"]
        assert figures["prompt_strict"] == figures["instruction_loose"] == 1.0
        assert len(info["reward_components"]) == len(task.answer["instructions"]) >= 1
        joint.reset(options={"task_id": task.id})
        _, reward, _, _, info = joint.step(joint.oracle_action())
        assert reward == pytest.approx(1.0) and set(info["subtask_rewards"]) == {
            s.id for s in task.subtasks
        }


def test_joint_mode_credits_each_instruction_apart() -> None:
    env = gym.make("llm/Instruct-v0", subtask_mode="joint", family="write.start_end").unwrapped
    obs, _ = env.reset(seed=1)
    oracle = str(env.oracle_action())
    _, reward, _, _, info = env.step(oracle + " And one more line.")
    assert info["subtask_rewards"] == {"c0": 1.0, "c1": 0.0} or 0.0 < reward < 1.0


def test_loose_grading_forgives_a_chatty_first_line() -> None:
    spec_env = gym.make("llm/Instruct-v0", family="write.quotation", difficulty=0.0)
    for loose, expected in ((False, 0.0), (True, 1.0)):
        env = gym.make(
            "llm/Instruct-v0", family="write.quotation", difficulty=0.0, loose=loose
        ).unwrapped
        env.reset(seed=4)
        _, reward, _, _, info = env.step("Sure, here it is:\n" + str(env.oracle_action()))
        assert reward == expected and info["instruct"]["prompt_loose"] == 1.0
    spec_env.close()


def test_ifeval_records_load_and_grade(tmp_path: Path) -> None:
    records = [
        {"key": 1, "prompt": "Write a note about tea without commas.", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
        {"key": 2, "prompt": "Describe a lamp. Include the words bright and warm.", "instruction_id_list": ["keywords:existence", "length_constraints:number_words"],
         "kwargs": [{"keywords": ["bright", "warm"], "num_words": None}, {"num_words": 10, "relation": "at least"}]},
    ]  # fmt: skip
    path = tmp_path / "input_data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    env = gym.make("llm/Instruct-v0", tasks=str(path)).unwrapped
    env.reset(options={"task_id": "ifeval-2"})
    _, reward, *_, info = env.step(
        "A bright lamp gives a warm light to the whole reading room at night."
    )
    assert reward == 1.0 and info["instruct"]["instruction_strict"] == 1.0
    env.reset(options={"task_id": "ifeval-1"})
    assert env.step("Green tea, black tea and herbal tea all need different water.")[1] == 0.0


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"prompt": "x", "instruction_id_list": ["punctuation:no_coma"], "kwargs": [{}]}, "no_comma"),
        ({"prompt": "x", "instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": -3, "relation": "at least"}]}, "int >= 0"),
        ({"prompt": "x", "instruction_id_list": ["keywords:frequency"], "kwargs": [{"keyword": "a", "frequency": 2, "relation": "about"}]}, "relation"),
        ({"prompt": "x", "instruction_id_list": ["detectable_format:json_schema"], "kwargs": [{"schema": {"type": 5}}]}, "JSON Schema"),
    ],
)  # fmt: skip
def test_malformed_records_fail_at_load_naming_the_problem(record: dict, message: str) -> None:
    with pytest.raises(error.InvalidTask, match=message):
        gym.make("llm/Instruct-v0", tasks=[record], dataset_format="ifeval")


def test_sequential_mode_and_unknown_families_are_refused() -> None:
    with pytest.raises(error.Error, match="joint"):
        gym.make("llm/Instruct-v0", subtask_mode="sequential")
    with pytest.raises(error.UnknownFamily):
        gym.make("llm/Instruct-v0", families=["write.nope"])


def test_the_same_task_id_gives_the_same_prompt_in_a_fresh_env() -> None:
    a = gym.make("llm/Instruct-v0").unwrapped
    obs, info = a.reset(seed=11)
    b = gym.make("llm/Instruct-v0").unwrapped
    assert b.reset(options={"task_id": info["task_id"]})[0] == obs
