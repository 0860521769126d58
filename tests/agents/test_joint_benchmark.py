"""The joint-training benchmark (benchmarks/joint.py) and its shared pieces (llmgym.agents.joint)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import llmgym
from llmgym import error
from llmgym.agents import joint
from llmgym.agents.scheduler import SchedulerConfig, TaskScheduler

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clock_env() -> Iterator[None]:
    """The benchmark registers joint/Clock-v0; remove it after each test, so the
    registry-wide contract tests (which rebuild every env in fresh processes) never see it."""
    import gymnasium as gym

    yield
    gym.registry.pop(joint.CLOCK_ID, None)


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("joint_bench", ROOT / "benchmarks" / "joint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["joint_bench"] = module
    spec.loader.exec_module(module)
    return module


# --- the families --------------------------------------------------------------------------------


def test_clock_env_grades_one_answer_and_resists_hedges() -> None:
    joint.register_clock()
    joint.register_clock()  # idempotent
    env = llmgym.make(joint.CLOCK_ID, disable_env_checker=True)
    obs, info = env.reset(seed=3)
    task = env.unwrapped.episode.task  # type: ignore[attr-defined]
    assert info["domain"] == "clock" and "\\boxed{}" in obs
    wrong = str(int(task.answer) % 12 + 1)
    hostile = [
        f"\\boxed{{{wrong}}} or \\boxed{{{task.answer}}} \\boxed{{{wrong}}}",  # the last one counts
        f"\\boxed{{{task.answer} or {wrong}}}",  # a hedge
        " ".join(str(h) for h in [*range(1, 13), wrong]),  # every hour, ending wrong
        f"{task.answer}0",
        f"{task.answer}.5",
        f"-{task.answer}",
        f"{wrong}.{task.answer}",
        "\\boxed{}",
        "",
        "\x00" * 1000,
    ]
    for action in hostile:
        env.reset(seed=3)
        _, reward, terminated, _, step_info = env.step(action)
        assert reward == 0.0 and not step_info["is_success"] and terminated, action
    fact = next(t for t in joint.clock_tasks() if t["prompt"] in obs)["metadata"]["fact"]
    for right in (f"So the answer is \\boxed{{{task.answer}}}.", task.answer, fact):
        env.reset(seed=3)
        assert env.step(right)[1] == 1.0, right
    env.close()


def test_clock_tasks_are_consistent() -> None:
    tasks = joint.clock_tasks()
    assert len(tasks) == 12 * 9 and len({t["id"] for t in tasks}) == len(tasks)
    answers = {t["prompt"]: t["answer"] for t in tasks}
    assert answers["It is 11 o'clock. What time is it 1 hours later?"] == "12"
    assert answers["It is 12 o'clock. What time is it 3 hours later?"] == "3"
    assert answers["It is 7 o'clock. What time is it 9 hours later?"] == "4"
    assert all(t["metadata"]["fact"].endswith(f" {t['answer']}.") for t in tasks)


def test_mixture_has_one_arm_per_family_in_two_domains() -> None:
    env = llmgym.make(joint.MIXTURE_ID, disable_env_checker=True, **joint.mixture_kwargs())
    assert tuple(env.unwrapped.source.families()) == joint.ARMS  # type: ignore[attr-defined]
    domains = set()
    for arm in joint.ARMS:
        _, info = env.reset(seed=1, options={"family": arm, "difficulty": 0.0})
        assert info["family"] == arm and info["difficulty"] == 0.0
        domains.add(info["domain"])
    assert domains == {"clock", "math"}
    env.close()


def test_worked_solutions_are_right_and_nothing_is_boxed() -> None:
    records = joint.sft_records(3)
    assert len(records) == 3 * len(joint.FAMILIES)
    env = llmgym.make(joint.MIXTURE_ID, disable_env_checker=True, **joint.mixture_kwargs())
    for r in records:  # every demonstration earns full reward on its own task
        user, answer = r["messages"][-2]["content"], r["messages"][-1]["content"]
        family = next(f.arm for f in joint.FAMILIES if _asks(f, user))
        obs, _ = env.reset(seed=records.index(r) % 3, options={"family": family})
        assert obs == user
        assert env.step(answer)[1] == 1.0, (user, answer)
        assert "\\boxed" not in answer
    docs = joint.pretraining_corpus(40, seed=0)
    assert len(docs) == 40 and not any("\\boxed{" in d.replace("\\boxed{}", "") for d in docs)
    assert any("\\times" in d for d in docs) and any("o'clock it is" in d for d in docs)
    env.close()


def _asks(family: joint.Family, prompt: str) -> bool:
    marks = {"clock": "o'clock", "add": " + ", "mul": "\\times", "div": "\\div"}
    return marks[family.member] in prompt


# --- the sequential baseline ----------------------------------------------------------------------------


def test_sequential_scheduler_plays_families_in_turn() -> None:
    cfg = joint.sequential_scheduler(steps=8)
    assert cfg["order"] == list(joint.ARMS) and cfg["phase_steps"] == 2
    s = TaskScheduler(["a", "b", "c"], SchedulerConfig.from_dict({**cfg, "order": ["a", "b", "c"]}))
    rng = np.random.default_rng(0)
    seen = [{arm for arm, _ in s.choose(4, rng)} for _ in range(8)]
    assert seen == [{"a"}, {"a"}, {"b"}, {"b"}, {"c"}, {"c"}, {"c"}, {"c"}]
    s.update("c", [True] * 4)
    s.update("nope", [True])  # an unknown arm is ignored
    assert not any(a.paused for a in s.arms.values()) and s.arms["c"].total_episodes == 4
    assert s.weights() == {"a": 0.0, "b": 0.0, "c": 1.0}
    assert s.metrics()["scheduler/c/picks"] == 4.0


# --- the benchmark's figures --------------------------------------------------------------------------


def _fake_run(curves: dict[str, list[float]], per_step: int = 64) -> dict[str, object]:
    n = len(next(iter(curves.values())))
    return {
        "evals": [
            {"step": i, "episodes": i * per_step, "success": {a: curves[a][i] for a in joint.ARMS}}
            for i in range(n)
        ],
        "episodes": dict.fromkeys(joint.ARMS, 16),
        "decisions": [],
        "seconds": 1.0,
    }


def test_figures_forgetting_and_episodes_to_reach(tmp_path: Path) -> None:
    bench = _benchmark()
    a, b, c, d = joint.ARMS
    run = _fake_run({a: [0.5, 1.0, 0.6, 0.6, 0.7], b: [0.2] * 5, c: [0.0] * 5, d: [0.1] * 5})
    figs = bench.arm_figures(run)
    assert figs["forgetting"][a] == pytest.approx(0.3) and figs["forgetting"][b] == 0.0
    assert figs["mean_final"] == pytest.approx((0.7 + 0.2 + 0.0 + 0.1) / 4)
    assert bench.episodes_to_reach([0, 64, 128], [0.1, 0.5, 0.9], 0.5) == 64
    assert bench.episodes_to_reach([0, 64], [0.1, 0.2], 0.5) is None
    assert bench.JointConfig.load(ROOT / "benchmarks" / "configs" / "joint_quick.yaml").seeds == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 10\neval_every: 4\n")  # 10 steps do not split into 4 phases
    with pytest.raises(error.Error, match="phases"):
        bench.JointConfig.load(bad)


def test_config_rejects_unknown_keys(tmp_path: Path) -> None:
    bench = _benchmark()
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 16\nbogus: 1\n")
    with pytest.raises(error.Error, match="expects a mapping"):
        bench.JointConfig.load(bad)
    bad.write_text("- 1\n")
    with pytest.raises(error.Error, match="expects a mapping"):
        bench.JointConfig.load(bad)


# --- the quick benchmark, end to end --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_benchmark_runs_three_arms_and_pauses_a_converged_family(tmp_path: Path) -> None:
    bench = _benchmark()
    assert bench.main(["--quick", "--output-dir", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "joint.json").read_text())
    cfg = results["config"]
    per_arm = cfg["steps"] * cfg["prompts_per_step"] * cfg["group_size"]
    for kind in bench.KINDS:
        mean = results["mean"][kind]
        assert set(mean["final"]) == set(joint.ARMS) and set(mean["forgetting"]) == set(joint.ARMS)
        assert sum(mean["episodes"].values()) == per_arm  # the same budget for every arm
        assert len(results["per_seed"][kind][0]["phases"]) == len(joint.ARMS)
        assert all(0 <= v <= 1 for v in mean["final"].values())
    seq = results["mean"]["sequential"]["episodes"]
    assert all(n == per_arm // len(joint.ARMS) for n in seq.values())  # one phase each
    decisions = results["decisions"][0]
    assert len(decisions) == cfg["steps"]
    paused = {a for d in decisions for a in joint.ARMS if d[a]["paused"]}
    assert paused, "the scheduler paused no converged family"
    assert set(results["targets"]) >= {
        "scheduler_no_family_below_uniform_by_2_points",
        "scheduler_forgetting_at_most_2_points",
        "scheduler_saves_25_percent",
    }
    assert (tmp_path / "joint_curves.png").stat().st_size > 10_000
    # The shared base model is built once and reused by a second run.
    logs: list[str] = []
    base = tmp_path / "seed0" / "base"
    joint.build_base(joint.BaseConfig(**{**cfg["base"], "seed": 0}), base, log=logs.append)
    assert logs == [f"[base] reusing {base / 'sft' / 'final'}"]
