"""llmgym.check_env: each contract check fails, naming the problem, on an env that breaks it."""

from __future__ import annotations

import itertools

import pytest

import llmgym
from llmgym.checks import ContractViolation
from llmgym.declarative import DeclarativeEnv
from llmgym.rewards import RewardResult

CAPITALS = [
    {"id": "fr", "prompt": "Capital of France?", "answer": "Paris"},
    {"id": "jp", "prompt": "Capital of Japan?", "answer": "Tokyo"},
    {"id": "pe", "prompt": "Capital of Peru?", "answer": "Lima"},
]


def capitals(cls: type[DeclarativeEnv] = DeclarativeEnv) -> DeclarativeEnv:
    return cls(tasks=CAPITALS, verifier="exact")


class LeaksTheGold(DeclarativeEnv):
    def render_prompt(self, task):
        return f"{task.prompt} (psst: {task.answer})"


_counter = itertools.count()


class ResetIsNotDeterministic(DeclarativeEnv):
    def render_prompt(self, task):
        return f"{task.prompt} [{next(_counter)}]"


class OracleIsWrong(DeclarativeEnv):
    def oracle(self, task):
        return "I do not know"


class OracleHalfMarks(DeclarativeEnv):
    def grade(self, task, message):
        right = message["content"].strip() == task.answer
        return RewardResult(0.5 if right else 0.0, {"correctness": 0.5 * right}, "", right)


class AnythingGoes(DeclarativeEnv):
    def grade(self, task, message):
        return RewardResult(1.0, {"correctness": 1.0}, "fine", True)


class RewardOutOfRange(DeclarativeEnv):
    def grade(self, task, message):
        right = message["content"].strip() == task.answer
        return RewardResult(3.0 if right else 0.0, {"correctness": 3.0 * right}, "", right)


class FeedbackDependsOnHistory(DeclarativeEnv):
    """Grading has hidden state that get_state() does not capture: a replay differs."""

    calls = 0

    def grade(self, task, message):
        FeedbackDependsOnHistory.calls += 1
        result = super().grade(task, message)
        return RewardResult(
            result.score, result.components, f"grading call {self.calls}", result.success
        )


def test_a_correct_env_passes():
    llmgym.check_env(capitals())


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (LeaksTheGold, r"a secret \('Paris'|a secret \('Tokyo'|a secret \('Lima'"),
        (ResetIsNotDeterministic, r"reset\(seed=0\) is not deterministic"),
        (OracleIsWrong, "the oracle does not succeed"),
        (OracleHalfMarks, "the oracle scores 0.5, not full marks 1.0"),
        (AnythingGoes, "garbage '' succeeds"),
        (FeedbackDependsOnHistory, r"set_state\(get_state\(\)\) does not replay the same step"),
    ],
)
def test_each_broken_contract_is_named(cls, message):
    # llmgym's own checks (Gymnasium's checker, run first by default, catches some of these too)
    with pytest.raises(ContractViolation, match=message):
        llmgym.check_env(capitals(cls), seeds=(0,), skip_gymnasium=True)


def test_gymnasium_checker_runs_first_by_default():
    with pytest.raises(AssertionError, match="Deterministic step"):
        llmgym.check_env(capitals(FeedbackDependsOnHistory), seeds=(0,))


def test_a_reward_outside_the_declared_range_is_caught():
    with pytest.raises(ContractViolation, match=r"reward 3.0 outside reward_range \(0.0, 1.0\)"):
        llmgym.check_env(capitals(RewardOutOfRange), seeds=(0,))


class OracleFailsOnFewTasks(DeclarativeEnv):
    """A dataset whose grader cannot pass 2 of its 60 reference answers (as 4 of 164 HumanEval
    solutions once failed): the default seeds rarely meet them."""

    def grade(self, task, message):
        result = super().grade(task, message)
        if task.id in ("t17", "t43"):
            return RewardResult(0.0, {"correctness": 0.0}, "grader cannot read this", False)
        return result


MANY = [{"id": f"t{i}", "prompt": f"{i} + 1 = ?", "answer": str(i + 1)} for i in range(60)]


def test_a_dataset_with_a_few_failing_oracles_fails_with_the_default_seeds():
    with pytest.raises(ContractViolation, match=r"the oracle fails 2 task\(s\), e.g. t17"):
        llmgym.check_env(OracleFailsOnFewTasks(tasks=MANY, verifier="exact"))
    failures = llmgym.check_oracles(OracleFailsOnFewTasks(tasks=MANY, verifier="exact"))
    assert [tid for tid, _ in failures] == ["t17", "t43"]
    llmgym.check_env(DeclarativeEnv(tasks=MANY, verifier="exact"), exhaustive=True)


def test_a_large_dataset_is_checked_on_an_even_spread_unless_exhaustive(monkeypatch):
    from llmgym import checks

    monkeypatch.setattr(checks, "DATASET_ORACLE_LIMIT", 10)
    env = OracleFailsOnFewTasks(tasks=MANY, verifier="exact")
    spread = checks._oracle_task_ids(env, exhaustive=False, per_family=2)
    assert len(spread) == 10 and spread[0][0] == "t0" and spread[-1][0] == "t54"
    assert len(checks._oracle_task_ids(env, exhaustive=True, per_family=2)) == 60
