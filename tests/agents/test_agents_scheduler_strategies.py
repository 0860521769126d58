"""The scheduler's weighting strategies and its question rest (skipping questions that would
give GRPO no gradient), through the real task draw on llm/Math-v0."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from agents_common import MATH

import llmgym
from llmgym.agents import scheduler as scheduler_mod
from llmgym.agents.rollout import draw_tasks
from llmgym.agents.scheduler import (
    STRATEGIES,
    SchedulerConfig,
    TaskScheduler,
    metric_names,
    question_key,
)

FLAT = {"curriculum": False, "min_episodes": 10_000, "floor": 0.0}


def feed(s: TaskScheduler, arm: str, rates: list[float], n: int = 10) -> None:
    for rate in rates:
        k = round(rate * n)
        s.update(arm, [True] * k + [False] * (n - k))


def test_learning_progress_follows_the_arm_whose_success_moves_either_way() -> None:
    s = TaskScheduler(["steady", "rising", "falling"], SchedulerConfig(**FLAT, ema=0.3))
    feed(s, "steady", [0.5] * 30)
    feed(s, "rising", [0.5] * 20 + [0.9] * 10)
    feed(s, "falling", [0.5] * 20 + [0.1] * 10)  # forgetting: progress the other way
    w = s.weights()
    assert w["rising"] > 5 * w["steady"] and w["falling"] > 5 * w["steady"]
    # success_variance would prefer the steady arm (p = 0.5 is where p (1 - p) peaks)
    s.config = SchedulerConfig(**FLAT, strategy="success_variance")
    w = s.weights()
    assert w["steady"] > w["rising"] and w["steady"] > w["falling"]


def test_signal_prefers_arms_whose_groups_disagree() -> None:
    s = TaskScheduler(["mixed", "solved", "hopeless"], SchedulerConfig(**FLAT, strategy="signal"))
    for _ in range(20):
        s.update("mixed", [True, False] * 4)
        s.update("solved", [True] * 8)
        s.update("hopeless", [False] * 8)
    w = s.weights()
    assert w["mixed"] > 0.95 and w["solved"] < 0.03 and w["hopeless"] < 0.03


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_keeps_a_distribution(strategy: str) -> None:
    cfg = SchedulerConfig(strategy=strategy, min_episodes=2, phase_steps=5)
    s = TaskScheduler(["a", "b", "c"], cfg)
    rng = np.random.default_rng(0)
    for i in range(30):
        s.update("abc"[i % 3], [bool((i * 7) % 3)] * 2 + [True])
        w = s.weights()
        assert sum(w.values()) == pytest.approx(1.0) and min(w.values()) >= 0
        assert len(s.choose(4, rng)) == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "fastest"}, "strategy must be one of"),
        ({"slow_ema": 0.5, "ema": 0.3}, "slow_ema"),
        ({"slow_ema": 0.0}, "slow_ema"),
        ({"question_rest": -1}, "question_rest"),
        ({"redraws": -2}, "redraws"),
    ],
)
def test_bad_strategy_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(llmgym.error.Error, match=match):
        SchedulerConfig(**kwargs)


# --- question rest ---------------------------------------------------------------------------------

ARM = "arith.add_small"  # 81 distinct questions: draws repeat them


def math_env() -> gym.Env:
    return gym.make(MATH, family=ARM, difficulty=0.0)


def rest_scheduler(rest: int, redraws: int = 8) -> TaskScheduler:
    cfg = SchedulerConfig(curriculum=False, max_difficulty=0.0, question_rest=rest, redraws=redraws)
    return TaskScheduler([ARM], cfg)


def test_a_question_without_gradient_rests_then_returns() -> None:
    env, s = math_env(), rest_scheduler(rest=3)
    rng = np.random.default_rng(0)
    first = draw_tasks(env, 16, rng, s)
    assert all(t.question == question_key(ARM, env.reset(seed=t.seed)[0]) for t in first)
    solved = {t.question for t in first}
    for t in first:  # every group all right: no gradient; each question rests 3 steps
        s.update(ARM, [True] * 8, question=t.question)
    for _ in range(3):
        later = draw_tasks(env, 16, rng, s)
        assert not solved & {t.question for t in later}
    assert s.metrics()["scheduler/questions_skipped"] > 0
    assert s.metrics()["scheduler/questions_resting"] == len(solved)
    back = [draw_tasks(env, 16, rng, s) for _ in range(6)]  # rest over: they can be drawn again
    assert solved & {t.question for ts in back for t in ts}
    assert s.metrics()["scheduler/questions_resting"] < len(solved)


def test_a_mixed_group_ends_the_rest_and_all_wrong_rests_too() -> None:
    s = rest_scheduler(rest=10)
    s.step = 1
    s.update(ARM, [False] * 8, question="q1")  # all wrong: no gradient either
    s.update(ARM, [True] * 8, question="q2")
    assert s.resting("q1") and s.resting("q2")
    s.update(ARM, [True, False] * 4, question="q2")
    assert s.resting("q1") and not s.resting("q2")
    s.update(ARM, [True], question="q3")  # one episode says nothing about a group's spread
    assert not s.resting("q3")


def test_rest_off_by_default_and_redraws_are_bounded() -> None:
    env = math_env()
    s = TaskScheduler([ARM], SchedulerConfig(curriculum=False, max_difficulty=0.0))
    tasks = draw_tasks(env, 8, np.random.default_rng(1), s)
    for t in tasks:
        s.update(ARM, [True] * 8, question=t.question)
    assert not any(s.resting(t.question) for t in tasks)
    # every question resting and no redraws left: the draw still fills the step
    s = rest_scheduler(rest=100, redraws=2)
    s.step = 1
    questions = {question_key(ARM, env.reset(seed=q)[0]) for q in range(2000)}
    assert len(questions) == 81
    for q in questions:
        s.update(ARM, [True] * 8, question=q)
    tasks = draw_tasks(env, 16, np.random.default_rng(2), s)
    assert len(tasks) == 16 and s.metrics()["scheduler/questions_skipped"] == 32


def test_rest_state_round_trips_and_resumed_draws_match() -> None:
    env = math_env()
    a, rng_a = rest_scheduler(rest=5), np.random.default_rng(3)
    for _ in range(4):
        for t in draw_tasks(env, 8, rng_a, a):
            a.update(ARM, [t.seed % 2 == 0] * 8, question=t.question)
    b = rest_scheduler(rest=5)
    b.load_state_dict(a.state_dict())
    rng_b = np.random.default_rng()
    rng_b.bit_generator.state = rng_a.bit_generator.state
    assert [t.seed for t in draw_tasks(env, 8, rng_a, a)] == [
        t.seed for t in draw_tasks(env, 8, rng_b, b)
    ]
    assert a.state_dict() == b.state_dict()


def test_question_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_mod, "_MAX_RESTING", 40)
    s = rest_scheduler(rest=1000)
    for i in range(500):
        s.update(ARM, [True] * 4, question=f"q{i}")
        assert len(s._resting) <= 40
    assert s.resting("q499")  # the newest are kept


def test_hostile_prompts_make_stable_keys() -> None:
    weird = ["", "\x00" * 3, "\ud800 lone surrogate", "é" * 10_000, {"not": "text"}]
    keys = [question_key(ARM, p) for p in weird]
    assert len(set(keys)) == len(weird) and all(k.startswith(ARM + "|") for k in keys)
    assert keys == [question_key(ARM, p) for p in weird]


# --- sequential ------------------------------------------------------------------------------------


def test_sequential_trains_the_arms_in_turn_and_never_pauses() -> None:
    cfg = SchedulerConfig(
        strategy="sequential", order=["b", "a", "c"], phase_steps=2, min_episodes=1
    )
    s = TaskScheduler(["a", "b", "c"], cfg)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    seen = []
    for _ in range(8):
        picks = s.choose(3, rng)
        assert len({a for a, _ in picks}) == 1
        seen.append(picks[0][0])
        assert s.weights()[seen[-1]] == 1.0
        s.update(seen[-1], [True] * 8)  # a converged arm is not paused: the plan is fixed
    assert seen == ["b", "b", "a", "a", "c", "c", "c", "c"]  # the last arm keeps the rest
    assert rng.bit_generator.state == before  # draws nothing: the other arms' runs are unchanged
    assert not any(a.paused for a in s.arms.values())
    assert s.arms["c"].total_episodes == 32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "sequential"}, "phase_steps"),
        ({"strategy": "sequential", "phase_steps": 2, "order": "abc"}, "order must be a list"),
        ({"phase_steps": -1}, "phase_steps"),
    ],
)
def test_bad_sequential_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(llmgym.error.Error, match=match):
        SchedulerConfig(**kwargs)


@pytest.mark.parametrize("order", [["a", "b"], ["a", "b", "c", "c"], ["a", "b", "zzz"]])
def test_sequential_order_must_name_every_arm_once(order: list[str]) -> None:
    cfg = SchedulerConfig(strategy="sequential", order=order, phase_steps=1)
    with pytest.raises(llmgym.error.Error, match="name every arm once"):
        TaskScheduler(["a", "b", "c"], cfg)


# --- review fixes: gradients, refill rounds, hostile settings, metric names ----------------------


def test_a_group_with_partial_credit_spread_does_not_rest() -> None:
    s = rest_scheduler(rest=10)
    s.step = 1
    s.update(ARM, [False] * 4, advantages=[-1.2, -0.4, 0.4, 1.2], question="partial")
    assert not s.resting("partial")  # all failed, but the rewards differ: a gradient
    s.update(ARM, [True] * 4, advantages=[0.0] * 4, question="flat")
    assert s.resting("flat") and s.arms[ARM].signal < 1.0


def test_refill_rounds_do_not_advance_the_step() -> None:
    cfg = SchedulerConfig(strategy="sequential", order=["a", "b"], phase_steps=2)
    s = TaskScheduler(["a", "b"], cfg)
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(4):  # 4 steps, each with a refill round
        seen.append(s.choose(2, rng)[0][0] + s.choose(2, rng, advance=False)[0][0])
    assert seen == ["aa", "aa", "bb", "bb"] and s.step == 4
    p = TaskScheduler(
        ["x", "y"], SchedulerConfig(curriculum=False, min_episodes=1, ema=1.0, reprobe_every=2)
    )
    p.update("x", [True] * 8)
    probes = [
        [a for a, _ in p.choose(1, rng, advance=k == 0)].count("x")
        for _ in range(2)
        for k in range(3)
    ]
    assert sum(probes) == 1  # the step-2 re-probe happens once, not in every round of the step


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "sequential", "phase_steps": 1.5}, "phase_steps must be an integer"),
        ({"redraws": 2.0}, "redraws must be an integer"),
        ({"redraws": 100_000}, "redraws must be an integer in"),
        ({"question_rest": float("inf")}, "question_rest must be an integer"),
        ({"question_rest": True}, "question_rest must be an integer"),
        ({"min_episodes": "8"}, "min_episodes"),
        ({"floor": float("nan")}, "floor"),
        ({"rest_weight": float("nan")}, "rest_weight"),
    ],
)
def test_hostile_scheduler_values_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(llmgym.error.Error, match=match):
        SchedulerConfig(**kwargs)


def test_slow_ema_only_binds_learning_progress() -> None:
    SchedulerConfig(strategy="uniform", ema=0.05)  # an older config: still fine
    SchedulerConfig(strategy="success_variance", ema=0.01)
    with pytest.raises(llmgym.error.Error, match="slow_ema"):
        SchedulerConfig(strategy="learning_progress", ema=0.05)


def test_metric_keys_carry_clean_distinct_arm_names() -> None:
    arms = ["../../etc::x", "<script>alert(1)</script>", "a b", "a_b", "clock::clock.later"]
    s = TaskScheduler(arms)
    names = s.metric_names
    assert len(set(names.values())) == len(arms)
    for key in s.metrics():
        parts = key.split("/")
        assert len(parts) in (2, 3) and ".." not in parts and "<" not in key and " " not in key
    assert {f"scheduler/{names[a]}/weight" for a in arms} <= set(s.metrics())
    assert metric_names(arms[::-1]) == metric_names(arms) == names  # order does not matter
    with pytest.raises(llmgym.error.Error, match="slow_ema must be in"):
        SchedulerConfig(strategy="success_variance", slow_ema=5.0)
