"""CodeRepair-v0: effectiveness, compliance and safety; whole-module and diff answers."""

from __future__ import annotations

import difflib
import json

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.envs.coding import CodeRepairEnv

TASK = "repair_ledger:0.30:1"  # apply_transactions must raise ValueError on overdrafts


@pytest.fixture(scope="module")
def env():
    e = CodeRepairEnv()
    yield e
    e.close()


def grade(env, answer, task_id=TASK):
    env.reset(options={"task_id": task_id})
    _, reward, terminated, _, info = env.step(answer)
    assert terminated
    return reward, info


def module(env, task_id=TASK):
    return env.source.get(task_id).answer["reference"]["python"]


def test_the_reference_fix_earns_full_marks(env):
    reward, info = grade(env, env.oracle(env.source.get(TASK)))
    assert reward == 1.0 and info["is_success"]
    assert (
        info["repair"]["effectiveness"]
        == info["repair"]["compliance"]
        == info["repair"]["safety"]
        == 1.0
    )
    assert sum(info["reward_components"].values()) == pytest.approx(reward)


def test_the_unchanged_module_earns_nothing(env):
    original = env.source.get(TASK).answer["repair"]["original"]
    reward, info = grade(env, f"```python\n{original}```")
    assert reward == 0.0 and info["repair"]["effectiveness"] == 0.0
    assert info["repair"]["fail_to_pass"][0] == 0


def test_a_unified_diff_answer(env):
    task = env.source.get(TASK)
    original, fixed = task.answer["repair"]["original"], module(env)
    diff = "".join(
        difflib.unified_diff(
            original.splitlines(True), fixed.splitlines(True), "a/ledger.py", "b/ledger.py"
        )
    )
    reward, info = grade(env, f"Here is the patch:\n```diff\n{diff}```")
    assert reward == 1.0 and info["repair"]["answer_format"] == "diff"
    bare, info = grade(env, diff)  # no fences at all
    assert bare == 1.0
    stale = diff.replace("balance -= cents", "balance -= amount")
    reward, info = grade(env, f"```diff\n{stale}```")
    assert reward == 0.0 and "does not apply" in info["feedback"]


def test_changing_another_public_signature_costs_compliance(env):
    broken = module(env).replace(
        "def summarize(transactions):", "def summarize(transactions, limit=None):"
    )
    reward, info = grade(env, f"```python\n{broken}```")
    assert info["repair"]["effectiveness"] == 1.0
    assert info["repair"]["compliance"] == 0.5 and reward == pytest.approx(0.9)
    assert "summarize" in info["repair"]["signature_changes"][0]
    assert "Interface changed" in info["feedback"]


def test_changing_the_target_signature_is_allowed(env):
    fixed = module(env).replace(
        "def apply_transactions(balance, transactions):",
        "def apply_transactions(balance, transactions, strict=True):",
    )
    reward, _ = grade(env, f"```python\n{fixed}```")
    assert reward == 1.0


def test_forbidden_imports_or_calls_zero_the_safety_term(env):
    for extra in (
        "import os\n",
        "import subprocess as sp\n",
        "x = eval('1')\n",
        "from importlib import reload\n",
    ):
        reward, info = grade(env, f"```python\n{extra}{module(env)}```")
        assert info["repair"]["safety"] == 0.0 and info["repair"]["forbidden"]
        assert reward == pytest.approx(0.8)


def test_missing_required_exceptions_cost_safety_and_effectiveness(env):
    lenient = module(env).replace('raise ValueError("insufficient funds")', "pass")
    reward, info = grade(env, f"```python\n{lenient}```")
    assert info["repair"]["safety"] < 1.0 and reward < 1.0 and not info["is_success"]


def test_regressions_in_other_functions_cost_effectiveness(env):
    regressed = module(env).replace('"count": len(transactions)', '"count": 0')
    reward, info = grade(env, f"```python\n{regressed}```")
    passed, total = info["repair"]["pass_to_pass"]
    assert passed < total and 0.0 < reward < 1.0


def test_garbage_and_compile_errors_score_zero(env):
    for answer in (
        "",
        "fix it please",
        "```python\ndef broken(:\n```",
        "```diff\n@@ nonsense\n```",
    ):
        reward, info = grade(env, answer)
        assert reward == 0.0 and not info["is_success"]


def test_weights_are_configurable_and_checked():
    env = CodeRepairEnv(weights={"effectiveness": 1.0, "compliance": 0.0, "safety": 0.0})
    env.reset(options={"task_id": TASK})
    broken = env.source.get(TASK).answer["reference"]["python"] + "\nimport os\n"
    assert env.step(f"```python\n{broken}```")[1] == 1.0
    with pytest.raises(error.Error):
        CodeRepairEnv(weights={"style": 1.0})
    with pytest.raises(error.Error):
        CodeRepairEnv(weights={"effectiveness": 0, "compliance": 0, "safety": 0})
    with pytest.raises(error.Error):
        CodeRepairEnv(language="c")
    with pytest.raises(error.UnknownFamily):
        CodeRepairEnv(families=["repair_nothing"])


def test_contract_and_repair_tasks_from_jsonl(tmp_path):
    llmgym.check_env(gym.make("llm/CodeRepair-v0"), seeds=(0, 1))
    source = CodeRepairEnv().source
    task = source.get(TASK).to_dict()
    del task["answer"]["repair"]["signatures"]  # a dataset may leave them out
    task["id"] = "mine"
    path = tmp_path / "repair.jsonl"
    path.write_text(json.dumps(task) + "\n")
    env = CodeRepairEnv(tasks=path)
    env.reset(options={"task_id": "mine"})
    assert env.step(env.oracle_action())[1] == 1.0
    bad = dict(task, answer={k: v for k, v in task["answer"].items() if k != "repair"})
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(error.InvalidTask, match="repair"):
        CodeRepairEnv(tasks=path)
