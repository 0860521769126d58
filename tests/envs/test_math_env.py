"""llm/Math-v0: the contract, arguments, prompts per mode, grading rules, process reward, datasets."""

from __future__ import annotations

import json
import time
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmgym
from llmgym import error
from llmgym.envs.math import MathEnv
from llmgym.envs.math.build import ANSWER_INSTRUCTION
from llmgym.envs.math.datasets import gsm8k_task, load_tasks, math_task

DATA = Path(__file__).parent.parent / "data" / "math_datasets"


class TestMathContract(llmgym.EnvContractTests):
    env_id = "llm/Math-v0"
    seeds = tuple(range(8))


class TestMathProcessContract(llmgym.EnvContractTests):
    env_id = "llm/Math-v0"
    env_kwargs = {"process_reward": 0.25, "difficulty": (0.5, 1.0)}  # noqa: RUF012


def test_joint_mode_passes_the_contract():
    env = gym.make("llm/Math-v0", subtask_mode="joint", families=["word.*", "calc.*"])
    llmgym.check_env(env, seeds=tuple(range(6)))


def test_arguments_are_validated_with_messages_that_say_what_to_do():
    with pytest.raises(error.Error, match="process_reward"):
        gym.make("llm/Math-v0", process_reward=-1)
    with pytest.raises(error.Error, match="reward_model_weight"):
        gym.make("llm/Math-v0", reward_model=lambda p, r: 1.0, reward_model_weight=float("nan"))
    with pytest.raises(error.UnknownFamily, match="arith.add_small"):
        gym.make("llm/Math-v0", families=["nope.*"])
    with pytest.raises(error.Error, match="dataset_format needs tasks"):
        gym.make("llm/Math-v0", dataset_format="gsm8k")
    with pytest.raises(error.Error, match="dataset_format"):
        gym.make("llm/Math-v0", tasks=DATA / "mixed.jsonl", dataset_format="csv")
    with pytest.raises(error.Error, match="families="):
        gym.make("llm/Math-v0", tasks=DATA / "mixed.jsonl", families=["x"])
    with pytest.raises(error.Error, match="reward_model"):
        gym.make("llm/Math-v0", reward_model=42)
    with pytest.raises(error.UnknownFamily):
        gym.make("llm/Math-v0", family="arith.nope")


def test_families_patterns_restrict_the_draw():
    env = gym.make("llm/Math-v0", families=["arith.*", "frac.add"])
    names = env.unwrapped.source.families()
    assert "frac.add" in names and all(n.startswith("arith.") or n == "frac.add" for n in names)
    seen = {env.reset(seed=s)[1]["family"] for s in range(60)}
    assert seen <= set(names) and len(seen) > 3


def test_reward_range_is_documented_per_weight():
    assert gym.make("llm/Math-v0").unwrapped.reward_range == (0.0, 1.0)
    assert gym.make("llm/Math-v0", process_reward=0.2).unwrapped.reward_range == (0.0, 1.2)
    assert gym.make("llm/Math-v0", subtask_mode="joint").unwrapped.reward_range == (0.0, 1.0)


def reset_family(env, family, difficulty=0.8, seed=0):
    return env.reset(seed=seed, options={"family": family, "difficulty": difficulty})


def test_prompts_per_subtask_mode_read_naturally():
    plain, info = reset_family(gym.make("llm/Math-v0"), "word.shopping")
    assert plain.endswith(ANSWER_INSTRUCTION)
    joint, _ = reset_family(gym.make("llm/Math-v0", subtask_mode="joint"), "word.shopping")
    assert "\\boxed" not in joint and '<answer id="s1">' in joint
    subtasks = MathEnv().source.get(info["task_id"]).subtasks
    assert joint.count("<answer id=") == len(subtasks) >= 3
    seq_env = gym.make("llm/Math-v0", subtask_mode="sequential")
    seq, seq_info = reset_family(seq_env, "word.shopping")
    assert "one at a time" in seq and "Question 1 of" in seq and seq_info["subtask"]["id"] == "s1"
    shown = gym.make("llm/Math-v0", process_reward=0.3).reset(seed=0)[0]
    assert "as an equation" in shown


def test_sequential_mode_rewards_each_subquestion_and_the_outcome():
    env = gym.make("llm/Math-v0", subtask_mode="sequential")
    obs, info = reset_family(env, "ratio.share", 0.5)
    task = env.unwrapped.episode.task
    order = task.subtask_order()
    rewards = []
    for i, sub in enumerate(order):
        answer = "\\boxed{-1}" if i == 0 else f"\\boxed{{{sub.answer}}}"  # the first one wrong
        obs, reward, terminated, truncated, info = env.step(answer)
        rewards.append(reward)
        if i < len(order) - 1:
            assert not terminated and f"Question {i + 2} of {len(order)}" in obs
    assert terminated and info["is_success"]
    assert info["subtask_rewards"]["s1"] == 0.0 and sum(rewards) == pytest.approx(1 + 2 / 3)


def test_joint_mode_gives_partial_credit_per_part():
    env = gym.make("llm/Math-v0", subtask_mode="joint")
    reset_family(env, "prob.draw", 0.5)
    task = env.unwrapped.episode.task
    s1, s2, s3 = task.subtask_order()
    answer = f'<answer id="s1">{s1.answer}</answer> <answer id="s2">0</answer> <answer id="s3">{s3.answer}</answer>'
    _, reward, terminated, _, info = env.step(answer)
    assert terminated and reward == pytest.approx(2 / 3) and not info["is_success"]
    assert info["subtask_rewards"] == {"s1": 1.0, "s2": 0.0, "s3": 1.0}


def test_strict_grading_hedges_forms_and_no_gold_in_feedback():
    env = gym.make("llm/Math-v0")
    reset_family(env, "algebra.linear", 0.9)
    gold = env.unwrapped.episode.task.answer
    _, reward, _, _, info = env.step(f"It is \\boxed{{{gold}}} or \\boxed{{1000}}.")
    assert reward == 0.0 and "hedge" in info["feedback"]

    reset_family(env, "poly.factor", 0.2)
    task = env.unwrapped.episode.task
    expanded = task.prompt.split("$")[1]
    _, reward, _, _, info = env.step(f"\\boxed{{{expanded}}}")
    assert reward == 0.0 and "not factored" in info["feedback"]
    reset_family(env, "poly.factor", 0.2)
    factors = task.answer.split(")(")
    swapped = "(" + ")(".join(reversed([f.strip("()") for f in factors])) + ")"
    assert env.step(f"\\boxed{{{swapped}}}")[1] == 1.0

    for seed in range(20):
        env.reset(seed=seed)
        task = env.unwrapped.episode.task
        obs, *_, info = env.step("\\boxed{0.123456}")
        for secret in env.unwrapped.secrets(task):
            assert secret not in obs and secret not in info["feedback"]


def test_percentages_are_not_scaled():
    env = gym.make("llm/Math-v0")
    reset_family(env, "percent.change", 0.2)
    gold = env.unwrapped.episode.task.answer  # like "40\\%"
    value = gold.replace("\\%", "")
    assert env.step(f"\\boxed{{{value}\\%}}")[1] == 1.0
    reset_family(env, "percent.change", 0.2)
    fraction = str(float(value) / 100)
    assert env.step(f"\\boxed{{{fraction}}}")[1] == 0.0


def test_process_reward_credits_shown_work_and_resists_listing():
    env = gym.make("llm/Math-v0", process_reward=0.5)
    reset_family(env, "word.shopping", 0.2, seed=3)
    task = env.unwrapped.episode.task
    oracle = env.unwrapped.oracle(task)
    _, reward, _, _, info = env.step(oracle)
    assert reward == 1.5 and info["reward_components"] == {"correctness": 1.0, "process": 0.5}

    reset_family(env, "word.shopping", 0.2, seed=3)
    _, reward, _, _, info = env.step(f"\\boxed{{{task.answer}}}")
    assert reward == 1.0 and info["reward_components"]["process"] == 0.0

    reset_family(env, "word.shopping", 0.2, seed=3)
    listing = "\n".join(f"n_{i} = {i / 4}" for i in range(2000)) + f"\n\\boxed{{{task.answer}}}"
    _, reward, _, _, info = env.step(listing)
    assert info["reward_components"]["process"] < 0.05

    reset_family(env, "word.shopping", 0.2, seed=3)
    wrong_final = oracle.replace(f"\\boxed{{{task.answer}}}", "\\boxed{0.01}")
    _, reward, _, _, info = env.step(wrong_final)
    assert reward == 0.25 and not info["is_success"]

    # Work shown in a reasoning model's reasoning_content counts too.
    reset_family(env, "word.shopping", 0.2, seed=3)
    body, _, _ = oracle.rpartition("The answer is")
    _, reward, _, _, info = env.step(
        {"content": f"\\boxed{{{task.answer}}}", "reasoning_content": body}
    )
    assert reward == 1.5


def test_a_failing_reward_model_scores_zero_and_says_why():
    def broken(prompt, response):
        raise RuntimeError("CUDA out of memory")

    env = gym.make("llm/Math-v0", family="arith.add_small", reward_model=broken)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.unwrapped.oracle_action())
    assert reward == 1.0 and info["reward_components"]["reward_model"] == 0.0
    assert "CUDA out of memory" in info["feedback"]


def test_several_acceptable_golds_from_jsonl():
    env = gym.make(
        "llm/Math-v0", tasks=[{"question": "Name a root of x^2 = 4.", "answer": ["2", "-2"]}]
    )
    env.reset(seed=0)
    assert env.step(env.unwrapped.oracle_action())[1] == 1.0
    env.reset(seed=0)
    assert env.step("\\boxed{-2}")[1] == 1.0


def test_single_step_tasks_get_outcome_as_process_credit():
    env = gym.make("llm/Math-v0", process_reward=0.5, family="arith.add_small")
    env.reset(seed=0)
    assert env.step(env.unwrapped.oracle_action())[1] == 1.5
    env.reset(seed=0)
    assert env.step("\\boxed{-1}")[1] == 0.0


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=400), seed=st.integers(0, 1000))
def test_hostile_text_never_crashes_with_every_reward_on(text, seed):
    env = MathEnv(process_reward=0.3, reward_model=lambda p, r: len(r) % 2)
    env.reset(seed=seed)
    _, reward, terminated, _, info = env.step(text)
    assert terminated and 0.0 <= reward <= env.reward_range[1]
    assert isinstance(info["is_success"], bool)


def test_ten_megabytes_with_process_reward_are_graded_promptly():
    env = gym.make("llm/Math-v0", process_reward=0.5)
    for junk in ("x = 1\n" * (10 * 1024 * 1024 // 6), "= 7 " * 2_500_000, "\\boxed{" * 1_000_000):
        env.reset(seed=0)
        start = time.perf_counter()
        _, reward, *_ = env.step(junk)
        assert time.perf_counter() - start < 5 and 0.0 <= reward <= 1.5


# --- datasets ---------------------------------------------------------------------------------


def play_oracle(env, seed):
    env.reset(seed=seed)
    return env.step(env.unwrapped.oracle_action())


def test_gsm8k_file_loads_with_steps_and_oracle_solutions():
    env = gym.make(
        "llm/Math-v0", tasks=DATA / "gsm8k_sample.jsonl", dataset_format="gsm8k", process_reward=1.0
    )
    source = env.unwrapped.source
    assert len(source) == 4 and source.families() == ["gsm8k"]
    task = source.get("gsm8k-1")
    assert task.answer == "75" and task.metadata["steps"] == ["30", "45", "75"]
    assert "<<" not in task.metadata["solution"] and task.prompt.endswith(ANSWER_INSTRUCTION)
    assert source.get("gsm8k-3").answer == "70" and source.get("gsm8k-3").difficulty == 0.0
    for seed in range(8):
        _, reward, _, _, info = play_oracle(env, seed)
        assert reward == 2.0 and info["is_success"], info
    llmgym.check_env(env, seeds=(0, 1, 2))


def test_math_file_maps_level_and_type():
    env = gym.make("llm/Math-v0", tasks=DATA / "math_sample.jsonl", dataset_format="math")
    tasks = list(env.unwrapped.source)
    assert [t.answer for t in tasks] == ["7", "6\\sqrt{2}", "20", "(-2, 2)"]
    assert [t.difficulty for t in tasks] == [0.0, 0.25, 0.5, 1.0]
    assert tasks[2].family == "math.counting_probability"
    assert (
        tasks[3].id == "test/intermediate_algebra/1.json"
        and tasks[3].family == "math.intermediate_algebra"
    )
    env.reset(options={"task_id": tasks[3].id})
    assert env.step("the solution set is $-2 < x < 2$, i.e. \\boxed{(-2, 2)}")[1] == 1.0
    llmgym.check_env(env, seeds=(0, 1, 2, 3))
    env.reset(seed=0, options={"difficulty": 1.0})
    assert env.unwrapped.episode.task.difficulty == 1.0


def test_generic_jsonl_recognises_each_schema():
    env = gym.make("llm/Math-v0", tasks=str(DATA / "mixed.jsonl"))
    tasks = {t.id: t for t in env.unwrapped.source}
    assert tasks["own-1"].family == "powers" and tasks["own-1"].domain == "math"
    assert tasks["jsonl-1"].answer == 9 and tasks["jsonl-1"].prompt.endswith(ANSWER_INSTRUCTION)
    assert tasks["gsm8k-2"].answer == "20" and tasks["math-3"].answer == "\\frac{5}{6}"
    assert tasks["jsonl-4"].family == "approx"
    for task_id in tasks:
        env.reset(options={"task_id": task_id})
        _, reward, _, _, info = env.step(env.unwrapped.oracle_action())
        assert reward == 1.0, (task_id, info["feedback"])


def test_records_tasks_and_hf_datasets_are_accepted():
    records = [json.loads(line) for line in (DATA / "gsm8k_sample.jsonl").read_text().splitlines()]
    env = gym.make("llm/Math-v0", tasks=records, dataset_format="gsm8k")
    assert len(env.unwrapped.source) == 4
    tasks = list(env.unwrapped.source)
    assert len(load_tasks(tasks)) == 4
    datasets = pytest.importorskip("datasets")
    env = gym.make("llm/Math-v0", tasks=datasets.Dataset.from_list(records), dataset_format="gsm8k")
    assert play_oracle(env, 0)[1] == 1.0


def test_malformed_records_name_the_record(tmp_path):
    with pytest.raises(error.InvalidTask, match="record 0"):
        gsm8k_task({"question": "q", "answer": "no marker"}, 0)
    with pytest.raises(error.InvalidTask, match="MATH record 3"):
        math_task({"problem": "p", "solution": "no box"}, 3)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"oops": 1}\n')
    with pytest.raises(error.InvalidTask, match="record 1"):
        gym.make("llm/Math-v0", tasks=bad)
    bad.write_text("{not json\n")
    with pytest.raises(error.InvalidTask, match="bad.jsonl:1"):
        gym.make("llm/Math-v0", tasks=bad)
    with pytest.raises(error.Error, match="JSONL path"):
        gym.make("llm/Math-v0", tasks={"question": "q"})
