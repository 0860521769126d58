"""configs/joint/: the joint-training benchmark's arms as ``llmgym train`` runs, and the clock
spec they need, held to the benchmark's own definitions (no drift between the two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

import llmgym
from llmgym.agents import joint
from llmgym.agents.grpo import GRPOConfig
from llmgym.agents.scheduler import SchedulerConfig, metric_names

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "joint"
ARMS = ("sequential", "uniform", "scheduler")


def test_the_clock_spec_is_the_benchmarks_clock() -> None:
    spec = yaml.safe_load((CONFIGS / "clock.yaml").read_text())
    tasks = [json.loads(line) for line in (CONFIGS / spec.pop("tasks")).read_text().splitlines()]
    want = joint.clock_spec()
    assert tasks == want.pop("tasks")
    assert spec == want


def test_the_clock_spec_registers_and_grades() -> None:
    assert llmgym.load_spec(CONFIGS / "clock.yaml", overwrite=True) == [joint.CLOCK_ID]
    env = gym.make(joint.CLOCK_ID)
    prompt, info = env.reset(seed=0, options={"task_id": "clock.11.3"})
    assert "11 o'clock" in prompt and "3 hours later" in prompt and "\\boxed{}" in prompt
    rewards = {}
    for reply in ("It is \\boxed{2}.", "\\boxed{14}", "2 or 3", "2.5", "-2"):
        env.reset(seed=0, options={"task_id": "clock.11.3"})
        rewards[reply] = env.step(reply)[1]
    assert rewards == {
        "It is \\boxed{2}.": 1.0,
        "\\boxed{14}": 0.0,
        "2 or 3": 0.0,
        "2.5": 0.0,
        "-2": 0.0,
    }
    env.close()


@pytest.mark.parametrize("arm", ARMS)
def test_each_arm_config_is_the_benchmarks_arm(arm: str) -> None:
    cfg = GRPOConfig.load(str(CONFIGS / f"{arm}.yaml"))
    full = yaml.safe_load((ROOT / "benchmarks" / "configs" / "joint_full.yaml").read_text())
    assert cfg.env_id == joint.MIXTURE_ID and cfg.env_kwargs == joint.mixture_kwargs()
    assert cfg.total_steps == full["steps"] and cfg.prompts_per_step == full["prompts_per_step"]
    assert cfg.group_size == full["group_size"] and cfg.learning_rate == full["learning_rate"]
    assert cfg.max_new_tokens == joint.ArmConfig(arm, 1, 1, 1).max_new_tokens
    want = {
        "sequential": joint.sequential_scheduler(full["steps"]),
        "uniform": None,
        "scheduler": full["scheduler"],
    }[arm]
    assert cfg.scheduler == want
    if cfg.scheduler is not None:
        SchedulerConfig.from_dict(cfg.scheduler)  # valid as the trainer reads it


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_scheduler_arm_trains_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "llmgym",
        "--spec",
        str(CONFIGS / "clock.yaml"),
        "train",
        "--config",
        str(CONFIGS / "scheduler.yaml"),
        "--model",
        "tiny",
        "--output-dir",
        str(out),
        "--set",
        "total_steps=2",
        "--set",
        "prompts_per_step=8",
        "--set",
        "group_size=2",
        "--set",
        "max_new_tokens=8",
        "--set",
        "tensorboard=false",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    names = metric_names(joint.ARMS).values()
    assert {f"scheduler/{n}/weight" for n in names} <= set(last)
    picks = sum(last[f"scheduler/{n}/picks"] for n in names)
    assert picks == 8
    assert any(k.startswith("domain/clock/") for k in last) and (out / "final").is_dir()
