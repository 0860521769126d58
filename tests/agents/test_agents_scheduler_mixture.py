"""The task scheduler (learning progress, curriculum, pausing) and llm/Mixture-v0."""

from __future__ import annotations

import numpy as np
import pytest
from agents_common import MATH, TOOL_ENV
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym
from llmgym.agents.scheduler import SchedulerConfig, TaskScheduler

# --- scheduler ---------------------------------------------------------------------------------------


def test_success_variance_prefers_arms_in_the_middle() -> None:
    s = TaskScheduler(
        ["solved", "learning", "hopeless"],
        SchedulerConfig(
            strategy="success_variance", curriculum=False, min_episodes=10_000, floor=0.0
        ),
    )
    s.arms["solved"].p_success = 0.99
    s.arms["learning"].p_success = 0.5
    s.arms["hopeless"].p_success = 0.01
    w = s.weights()
    assert w["learning"] > 10 * w["solved"] and w["learning"] > 10 * w["hopeless"]
    assert sum(w.values()) == pytest.approx(1.0)
    picks = [a for a, _ in s.choose(2000, np.random.default_rng(0))]
    assert picks.count("learning") > 0.9 * len(picks)


def test_floor_keeps_every_active_arm_alive() -> None:
    cfg = SchedulerConfig(strategy="success_variance", floor=0.2, curriculum=False)
    s = TaskScheduler(["a", "b"], cfg)
    s.arms["a"].p_success, s.arms["b"].p_success = 1.0, 0.5
    assert s.weights()["a"] == pytest.approx(0.1)
    s.config = SchedulerConfig(strategy="uniform")
    assert s.weights() == {"a": 0.5, "b": 0.5}


def test_curriculum_raises_and_lowers_difficulty() -> None:
    s = TaskScheduler(["x"], SchedulerConfig(min_episodes=8, ema=1.0, difficulty_step=0.25))
    s.update("x", [True] * 8)
    assert s.arms["x"].difficulty == 0.25 and s.arms["x"].episodes == 0
    s.update("x", [True] * 4)
    assert s.arms["x"].difficulty == 0.25  # not enough episodes at this level yet
    s.update("x", [False] * 8)
    assert s.arms["x"].difficulty == 0.0
    s.update("x", [False] * 8)
    assert s.arms["x"].difficulty == 0.0  # floor


def test_converged_arm_is_paused_and_reprobed() -> None:
    cfg = SchedulerConfig(curriculum=False, min_episodes=4, ema=1.0, pause_at=0.9, reprobe_every=3)
    s = TaskScheduler(["easy", "hard"], cfg)
    s.update("easy", [True] * 8)
    assert s.arms["easy"].paused and s.weights()["easy"] == 0.0
    rng = np.random.default_rng(0)
    seen = [[a for a, _ in s.choose(4, rng)] for _ in range(3)]
    assert "easy" not in seen[0] + seen[1] and seen[2][-1] == "easy"  # the 3rd step re-probes it
    s.update("easy", [True, True, True, True])
    assert s.arms["easy"].paused  # still converged
    s.update("easy", [True, False, False, False])
    assert not s.arms["easy"].paused and s.arms["easy"].p_success == 0.25
    m = s.metrics()
    assert m["scheduler/easy/paused"] == 0.0 and m["scheduler/active_arms"] == 2.0


def test_resume_below_gives_hysteresis_and_tracks_the_resting_arm() -> None:
    cfg = SchedulerConfig(curriculum=False, min_episodes=4, ema=0.5, pause_at=0.9, resume_below=0.7)
    s = TaskScheduler(["easy", "hard"], cfg)
    for _ in range(4):
        s.update("easy", [True] * 8)
    assert s.arms["easy"].paused
    s.update("easy", [True] * 6 + [False] * 2)  # one unlucky probe (0.75): p 0.86, stays paused
    assert s.arms["easy"].paused and s.arms["easy"].p_success == pytest.approx(0.86, abs=0.01)
    s.update("easy", [True] * 4 + [False] * 4)  # a real decline: p 0.68 < 0.7, resumes
    assert not s.arms["easy"].paused and s.arms["easy"].episodes == 0
    assert s.arms["easy"].p_success == pytest.approx(0.68, abs=0.01)
    s.update("easy", [True] * 8)  # resumed: needs min_episodes again before a pause
    assert not s.arms["easy"].paused


def test_rest_weight_keeps_paused_arms_in_practice() -> None:
    cfg = SchedulerConfig(curriculum=False, min_episodes=1, ema=1.0, floor=0.0, rest_weight=0.1)
    s = TaskScheduler(["a", "b", "c"], cfg)
    s.update("a", [True] * 8)
    assert s.arms["a"].paused
    w = s.weights()
    assert w["a"] == pytest.approx(0.1) and w["b"] == w["c"] == pytest.approx(0.45)
    picks = [a for a, _ in s.choose(4000, np.random.default_rng(0))]
    assert 0.08 < picks.count("a") / len(picks) < 0.12
    s.update("b", [True] * 8)  # two resting arms: their shares are capped at half the mass
    s.config = SchedulerConfig(curriculum=False, rest_weight=0.4)
    w = s.weights()
    assert w["a"] == w["b"] == pytest.approx(0.25) and w["c"] == pytest.approx(0.5)
    with pytest.raises(llmgym.error.Error, match="rest_weight"):
        SchedulerConfig(rest_weight=1.0)


@pytest.mark.parametrize("resume_below", [-0.1, 0.95, float("nan")])
def test_resume_below_must_lie_under_pause_at(resume_below: float) -> None:
    with pytest.raises(llmgym.error.Error, match="resume_below"):
        SchedulerConfig(pause_at=0.9, resume_below=resume_below)


def test_all_paused_still_samples_and_state_round_trips() -> None:
    s = TaskScheduler(["a"], SchedulerConfig(curriculum=False, min_episodes=1, ema=1.0))
    s.update("a", [True])
    assert s.arms["a"].paused and s.choose(3, np.random.default_rng(1)) == [("a", 1.0)] * 3
    t = TaskScheduler(["a"], SchedulerConfig(curriculum=False))
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict()


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.lists(st.booleans(), min_size=1, max_size=9)),
        max_size=40,
    )
)
def test_scheduler_invariants_hold_under_any_outcomes(history: list) -> None:
    s = TaskScheduler(["a", "b", "c"], SchedulerConfig(min_episodes=3))
    rng = np.random.default_rng(0)
    for arm, outcomes in history:
        s.update(arm, outcomes, advantages=[0.5] * len(outcomes))
        picks = s.choose(5, rng)
        assert len(picks) == 5 and all(0.0 <= d <= 1.0 for _, d in picks)
        w = s.weights()
        assert sum(w.values()) == pytest.approx(1.0) and all(v >= 0 for v in w.values())
        assert all(0.0 <= st_.p_success <= 1.0 for st_ in s.arms.values())


def test_unknown_arm_and_empty_updates_are_ignored() -> None:
    s = TaskScheduler(["a"])
    s.update("zzz", [True])
    s.update("a", [])
    assert s.arms["a"].total_episodes == 0
    with pytest.raises(llmgym.error.Error, match="at least one arm"):
        TaskScheduler([])


# --- llm/Mixture-v0 ----------------------------------------------------------------------------------

MIX = [
    {"id": MATH, "weight": 3, "kwargs": {"family": "arith.add_small", "difficulty": 0.0}},
    {"id": TOOL_ENV, "weight": 1},
]


def test_mixture_passes_the_contract() -> None:
    env = llmgym.make("llm/Mixture-v0", envs=MIX)
    llmgym.check_env(env)
    env.close()


def test_mixture_routes_and_replays_by_task_id() -> None:
    env = llmgym.make("llm/Mixture-v0", envs=MIX)
    domains = []
    for seed in range(40):
        _, info = env.reset(seed=seed)
        domains.append(info["domain"])
        assert info["task_id"].split("::")[0] in (MATH, TOOL_ENV)
    assert 20 < domains.count("math") < 40 and "toyarith" in domains  # weights 3 : 1
    obs, info = env.reset(seed=5)
    again, info2 = env.reset(options={"task_id": info["task_id"]})
    assert again == obs and info2["task_id"] == info["task_id"]
    fam = f"{TOOL_ENV}::add2"
    _, info3 = env.reset(seed=0, options={"family": fam})
    assert info3["family"] == fam and info3["tools"]
    families = llmgym.list_families("llm/Mixture-v0", envs=MIX)
    assert (
        fam in families and f"{MATH}::arith.mul" in families
    )  # every member family, not just its default


def test_mixture_multi_turn_member_works_through_the_router() -> None:
    env = llmgym.make("llm/Mixture-v0", envs=MIX)
    env.reset(seed=0, options={"family": f"{TOOL_ENV}::add2"})
    _, r1, term, _, _ = env.step(env.unwrapped.oracle_action())
    assert not term and r1 == 0.0
    _, r2, term, _, info = env.step(env.unwrapped.oracle_action())
    assert term and r2 == 1.0 and info["is_success"] and info["member"] == TOOL_ENV


@pytest.mark.parametrize(
    ("envs", "match"),
    [
        ([], "non-empty list"),
        ("llm/Math-v0", "non-empty list"),
        ([{"id": MATH, "weight": -1}], "weight must be"),
        ([{"id": MATH, "color": "red"}], "unknown key"),
        ([MATH, MATH], "share a name"),
        ([{"id": "llm/Nope-v0"}], "cannot make"),
        ([{"id": MATH, "name": "a::b"}], "name must be"),
    ],
)
def test_mixture_rejects_bad_members(envs: object, match: str) -> None:
    with pytest.raises(llmgym.error.Error, match=match):
        llmgym.make("llm/Mixture-v0", envs=envs)


def test_mixture_rejects_bad_ids_and_families() -> None:
    env = llmgym.make("llm/Mixture-v0", envs=MIX)
    with pytest.raises(llmgym.error.UnknownTask):
        env.reset(options={"task_id": "arith.add_small:0.00:1"})
    with pytest.raises(llmgym.error.UnknownTask):
        env.reset(options={"task_id": "llm/Other-v0::x:0.00:1"})
    with pytest.raises(llmgym.error.UnknownFamily):
        env.reset(options={"family": "arith.add_small"})
    with pytest.raises(llmgym.error.ResetNeeded):
        llmgym.make("llm/Mixture-v0", envs=MIX).unwrapped.step("hi")


def test_default_mixture_spans_the_builtin_domains() -> None:
    env = llmgym.make("llm/Mixture-v0")
    members = set(env.unwrapped.members)
    assert MATH in members and not any("Mixture" in m for m in members)
