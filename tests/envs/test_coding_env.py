"""Coding-v0 and CodingMultiTurn-v0: rewards, feedback, turns, subtasks, languages, hostile input."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.envs.coding import CodingEnv, CodingMultiTurnEnv
from llmgym.envs.coding.problem import Problem

TWO_SUM = "two_sum:0.30:7"


@pytest.fixture(scope="module")
def env():
    e = CodingEnv()
    yield e
    e.close()


def step(env, action, task_id=TWO_SUM):
    env.reset(options={"task_id": task_id})
    return env.step(action)


def test_registered_and_documented():
    for env_id in ("llm/Coding-v0", "llm/CodingMultiTurn-v0", "llm/CodeRepair-v0"):
        assert env_id in llmgym.list_envs()
    assert len(llmgym.list_families("llm/Coding-v0")) >= 40
    for cls in (CodingEnv, CodingMultiTurnEnv):
        for section in ("## Description", "## Action Space", "## Observation Space", "## Rewards",
                        "## Starting State", "## Episode End", "## Arguments", "## Version History",
                        "## Example"):  # fmt: skip
            assert section in (cls.__doc__ or "")


def test_oracle_earns_full_marks_with_each_component(env):
    env.reset(options={"task_id": TWO_SUM})
    obs, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert (reward, terminated, truncated, info["is_success"]) == (13.0, True, False, True)
    assert info["reward_components"] == {"pass_rate": 10.0, "memory": 2.0, "time": 1.0,
                                         "compile_error": 0.0, "timeout": 0.0}  # fmt: skip
    ex = info["exec"]
    assert ex["status"] == "passed" and ex["total"] == 10 and ex["passed"] == 10
    assert set(ex["measured"]) >= {"time_s", "cpu_time_s", "peak_memory_mb", "test_time_s"}
    assert obs == info["feedback"] == "All tests passed (10 hidden)."


def test_prompt_shows_signature_examples_and_answer_format(env):
    obs, info = env.reset(options={"task_id": TWO_SUM})
    assert "def two_sum(nums: list[int], target: int) -> list[int]:" in obs
    assert ">>> two_sum(" in obs and "```python" in obs
    assert info["family"] == "two_sum" and info["domain"] == "coding"
    for secret in env.secrets(env.episode.task):
        assert secret not in obs


@pytest.mark.parametrize(
    ("answer", "status", "reward"),
    [
        ("", "no_code", -5.0),
        ("I believe the answer is to use a hash map.", "no_code", -5.0),
        ("```python\ndef two_sum(nums, target:\n```", "compile_error", -5.0),
        ("```python\ndef two_sum(nums, target):\n    return []\n```", None, None),
        ("```python\nimport time\ntime.sleep(60)\n```", "timeout", -2.0),  # at import
        ("```javascript\nfunction twoSum() {}\n```", "no_code", -5.0),
    ],
)
def test_failures_and_their_rewards(env, answer, status, reward):
    _, r, terminated, _, info = step(env, answer)
    assert terminated and not info["is_success"]
    if status is not None:
        assert info["exec"]["status"] == status and r == reward
    else:
        assert 0.0 <= r < 10.0  # partial credit from the cases without a pair


def test_no_code_feedback_says_what_to_do(env):
    obs, *_ = step(env, "use a dict")
    assert "fenced code block" in obs


def test_visible_failure_feedback_names_expected_and_got(env):
    obs, _, _, _, info = step(env, "```python\ndef two_sum(nums, target):\n    return [9, 9]\n```")
    assert "Visible test failed: two_sum(" in obs and "Expected: " in obs and "Got: [9, 9]" in obs
    assert "0 of 10 hidden tests passed; failed: wrong answer (10)." in obs
    visible = [t for t in info["exec"]["tests"] if not t["hidden"]]
    assert visible and all("got" in t for t in visible)


def test_pass_rate_reward_and_custom_weights():
    plain = CodingEnv(reward="pass_rate", families=["two_sum"])
    assert plain.reward_range == (0.0, 1.0)
    plain.reset(seed=0)
    assert plain.step(plain.oracle_action())[1] == 1.0
    plain.reset(seed=0)
    assert plain.step("no code")[1] == 0.0
    weighted = CodingEnv(reward={"memory": 0.0, "time": 0.0}, families=["two_sum"])
    assert weighted.reward_range == (-5.0, 10.0)
    with pytest.raises(error.Error):
        CodingEnv(reward={"speed": 3.0})


def test_constructor_errors_say_what_to_do():
    with pytest.raises(error.Error, match="language"):
        CodingEnv(language="rust")
    with pytest.raises(error.UnknownFamily):
        CodingEnv(families=["no_such_family"])
    with pytest.raises(error.Error, match="no c version"):
        CodingEnv(language="c", families=["two_sum"])
    with pytest.raises(error.Error, match="extract"):
        CodingEnv(extract="middle")
    with pytest.raises(error.Error, match="dataset_format needs tasks"):
        CodingEnv(dataset_format="mbpp")


def test_ten_megabyte_answers_are_refused_quickly(env):
    env.reset(options={"task_id": TWO_SUM})
    start = time.perf_counter()
    _, reward, _, _, info = env.step("x = 1\n" * (10 * 1024 * 1024 // 6))
    assert time.perf_counter() - start < 2.0
    assert info["exec"]["status"] == "no_code" and reward == -5.0  # bare text that is not code
    env.reset(options={"task_id": TWO_SUM})
    start = time.perf_counter()
    _, reward, _, _, info = env.step("```python\n" + "x = 1\n" * (10 * 1024 * 1024 // 6) + "```")
    assert time.perf_counter() - start < 2.0
    assert info["exec"]["status"] == "too_long" and reward == -5.0
    env.reset(options={"task_id": TWO_SUM})
    start = time.perf_counter()
    env.step("```\n" * 500_000)
    assert time.perf_counter() - start < 2.0


def test_reasoning_is_not_the_answer(env):
    thought = "<think>```python\ndef two_sum(nums, target):\n    return None\n```</think>"
    _, reward, _, _, _ = step(env, thought + "\n" + env.oracle(env.source.get(TWO_SUM)))
    assert reward == 13.0


def test_multi_turn_feedback_then_success():
    env = CodingMultiTurnEnv()
    obs, info = env.reset(options={"task_id": TWO_SUM})
    assert info["max_turns"] == 4
    obs, reward, terminated, truncated, info = env.step(
        "```python\ndef two_sum(nums, target):\n    return [0, 0]\n```"
    )
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "Expected:" in obs and "Fix the program" in obs and "3 attempts left" in obs
    assert info["messages"][-1] == {"role": "user", "content": obs}
    obs, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert (reward, terminated, truncated, info["is_success"]) == (13.0, True, False, True)


def test_multi_turn_truncates_with_the_last_grade():
    env = CodingMultiTurnEnv(max_turns=2)
    env.reset(options={"task_id": TWO_SUM})
    assert env.step("nothing")[1] == 0.0
    _, reward, terminated, truncated, info = env.step("```python\nsyntax error(\n```")
    assert (reward, terminated, truncated) == (-5.0, False, True)
    with pytest.raises(error.ResetNeeded):
        env.step("late")


def test_stdio_task_in_c_and_cpp():
    for language in ("c", "cpp"):
        env = CodingEnv(language=language, families=["stdio_sum_pairs"])
        obs, _ = env.reset(seed=3)
        assert f"```{language}" in obs and "standard input" in obs
        _, reward, _, _, info = env.step(env.oracle_action())
        assert reward == 13.0, info["feedback"]
        assert info["exec"]["language"] == language


def test_c_families_are_the_stdio_ones():
    families = llmgym.list_families("llm/Coding-v0", language="c")
    assert families and all(f.startswith("stdio_") for f in families)


def test_sequential_module_subtasks_reward_each_function():
    env = CodingEnv(families=["module_inventory"], subtask_mode="sequential")
    obs, info = env.reset(seed=1)
    total = info["subtask"]["total"]
    assert total == 4 and "Step 1 of 4" in obs
    rewards = []
    for k in range(total):
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        rewards.append(reward)
        assert terminated == (k == total - 1)
    assert sum(rewards) == pytest.approx(1.0 + 13.0)
    assert info["is_success"] and set(info["subtask_rewards"].values()) == {1.0}


def test_sequential_wrong_step_gets_no_process_credit_and_later_steps_build_on_earlier():
    env = CodingEnv(families=["module_matrices"], subtask_mode="sequential")
    env.reset(seed=2)
    first = env.episode.subtasks[0].id
    _, reward, *_ = env.step("```python\ndef mat_mul(a, b, mod):\n    return [[0]]\n```")
    assert reward == 0.0 and env.episode.subtask_rewards[first] == 0.0
    state = env.get_state()
    _, r1, *_ = env.step(env.oracle_action())
    env.set_state(state)
    _, r2, *_ = env.step(env.oracle_action())
    assert r1 == r2 > 0


def test_joint_module_partial_credit():
    env = CodingEnv(families=["module_gradebook"], subtask_mode="joint")
    obs, _ = env.reset(seed=4)
    assert "one ```python code block" in obs
    _, reward, _, _, info = env.step(env.oracle_action())
    assert reward == 1.0 and info["is_success"]
    env.reset(seed=4)
    problem = Problem.from_answer(env.episode.task.answer)
    broken = problem.reference["python"].replace('return "F"', 'return "E"')
    _, reward, _, _, info = env.step(f"```python\n{broken}\n```")
    assert 0.0 < reward < 1.0 and not info["is_success"]
    assert info["subtask_rewards"]["parse_scores"] == 1.0


def test_snapshots_replay_the_same_step(env):
    env.reset(options={"task_id": "reverse_words:0.50:3"})
    state = env.get_state()
    first = env.step(env.oracle_action())
    env.set_state(state)
    second = env.step(env.oracle_action())
    assert first[:4] == second[:4]


def test_gymnasium_contract_and_vector_envs():
    llmgym.check_env(
        gym.make("llm/Coding-v0", families=["rotate_right", "stdio_passing"]), seeds=(0, 1)
    )
    vec = gym.make_vec(
        "llm/Coding-v0", num_envs=2, vectorization_mode="sync", families=["rotate_right"]
    )
    obs, info = vec.reset(seed=0)
    assert len(obs) == 2
    vec.close()


def test_sandbox_failures_are_reported_not_rewarded():
    from llmgym.sandbox import Sandbox

    class DeadSandbox(Sandbox):
        backend = "dead"

        def _execute(self, request):
            raise RuntimeError("no cgroups today")

    env = CodingEnv(families=["two_sum"], sandbox=DeadSandbox())
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.oracle_action())
    assert reward == 0.0 and info["exec"]["status"] == "sandbox_error"
    assert "not your fault" in info["feedback"]
    with pytest.raises(error.Error):
        CodingEnv(sandbox=42)


def test_unit_tests_verifier_for_declarative_envs():
    from llmgym.declarative import DeclarativeEnv

    gold = {
        "kind": "call",
        "entry_point": "double",
        "tests": [
            {"fn": "double", "args": [n], "expected": 2 * n, "hidden": True} for n in range(4)
        ],
    }
    env = DeclarativeEnv(
        tasks=[{"id": "d", "prompt": "Write double(x).", "answer": gold}],
        verifier="llmgym.envs.coding.judge.verifier:unit_tests_verifier",
    )
    env.reset(seed=0)
    assert env.step("```python\ndef double(x):\n    return x * 2\n```")[1] == 1.0
    env.reset(seed=0)
    assert env.step("```python\ndef double(x):\n    return x + 2\n```")[1] == 0.25
    env.reset(seed=0)
    assert env.step("no code")[1] == 0.0
    module = CodingEnv(families=["module_text_stats"])
    module.reset(seed=0)
    sub = module.episode.task.subtasks[0]
    assert sub.verifier == "unit_tests"
    from llmgym.envs.coding.judge.verifier import unit_tests_verifier

    assert unit_tests_verifier(module.oracle_subtask(module.episode.task, sub), sub.answer).success
    assert unit_tests_verifier("x", {"kind": "nonsense"}).score == 0.0
