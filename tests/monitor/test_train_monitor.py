"""The monitor inside a real GRPO run (tiny model): scoped metrics in metrics.jsonl, an injected
reward collapse that stops the run, an anomaly burst that saves a checkpoint, a quiet run that
fires nothing, and the scheduler's decisions identical after a checkpoint and resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from monitor_envs import PHASE_ENV

from llmgym.agents.config import ConfigError
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.runlog import read_metrics
from llmgym.evaluation.monitor import read_alerts

RULES = [
    {"rule": "reward_collapse", "drop": 0.5, "episodes": 16, "action": "stop"},
    {"rule": "anomaly_above", "bound": 0.5, "episodes": 8, "action": "checkpoint"},
    {"rule": "forgetting", "points": 20, "episodes": 16},
]


def _cfg(tiny_dir: str, out: Path, **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": PHASE_ENV,
        "output_dir": str(out),
        "total_steps": 8,
        "prompts_per_step": 2,
        "group_size": 4,
        "max_new_tokens": 4,
        "progress": False,
        "tensorboard": False,
        "alerts": RULES,
    }
    base.update(kw)
    return GRPOConfig(**base)


def _train(cfg: GRPOConfig) -> GRPOTrainer:
    trainer = GRPOTrainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer


def test_bad_alert_rules_are_a_config_error(tiny_dir: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="alerts: .*needs drop"):
        _cfg(tiny_dir, tmp_path, alerts=[{"rule": "reward_collapse", "action": "stop"}])


@pytest.mark.timeout(300)
def test_a_quiet_run_fires_nothing_and_logs_scoped_metrics(tiny_dir: str, tmp_path: Path) -> None:
    trainer = _train(_cfg(tiny_dir, tmp_path))
    assert trainer.step == 8 and read_alerts(tmp_path) == []
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == list(range(1, 9))
    last = records[-1]
    assert last["overall/success"] == 1.0 and last["domain/phase/anomaly"] == 0.0
    assert "family/phase/steady/success" in last and last["alerts/fired"] == 0


@pytest.mark.timeout(300)
def test_an_injected_collapse_stops_the_run(tiny_dir: str, tmp_path: Path) -> None:
    # Each step grades 8 episodes: rewards fall to 0 from step 4 on.
    trainer = _train(_cfg(tiny_dir, tmp_path, env_kwargs={"collapse_after": 24}))
    (alert,) = read_alerts(tmp_path)
    assert alert["rule"] == "reward_collapse" and alert["action"] == "stop"
    assert trainer.step == alert["step"] < 8  # stopped early, where the alert fired
    assert (tmp_path / "checkpoints" / f"step-{trainer.step:07d}").is_dir()  # resumable
    assert (tmp_path / "final").is_dir()
    assert read_metrics(tmp_path)[-1]["alerts/fired"] == 1


@pytest.mark.timeout(300)
def test_an_injected_anomaly_burst_saves_a_checkpoint(tiny_dir: str, tmp_path: Path) -> None:
    trainer = _train(_cfg(tiny_dir, tmp_path, env_kwargs={"burst_after": 24}))
    (alert,) = read_alerts(tmp_path)  # fired once, while the burst lasts
    assert alert["rule"] == "anomaly_above" and alert["key"] == "overall"
    assert trainer.step == 8  # checkpoint, not stop
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert f"step-{alert['step']:07d}" in saved or alert["step"] < 7  # kept: the 2 newest
    state = json.loads((tmp_path / "checkpoints" / saved[-1] / "trainer_state.json").read_text())
    assert state["step"] == 8


@pytest.mark.timeout(400)
@pytest.mark.slow
def test_the_scheduler_decides_the_same_after_a_resume(tiny_dir: str, tmp_path: Path) -> None:
    kw: dict[str, Any] = {
        "scheduler": {"min_episodes": 4, "reprobe_every": 2, "pause_at": 0.9, "curriculum": False},
        "env_kwargs": {"collapse_after": 40},
        "alerts": [],
        "save_every": 3,
    }
    straight = _train(_cfg(tiny_dir, tmp_path / "a", total_steps=8, **kw))
    from monitor_envs import GRADED

    GRADED["episodes"] = 0
    _train(_cfg(tiny_dir, tmp_path / "b", total_steps=3, **kw))
    GRADED["episodes"] = 24  # the env's own counter is not the trainer's: put it where it was
    resumed = _train(_cfg(tiny_dir, tmp_path / "b", total_steps=8, resume=True, **kw))

    def decisions(run: Path) -> list[dict[str, float]]:
        return [
            {k: v for k, v in r.items() if k.startswith("scheduler/")} for r in read_metrics(run)
        ]

    a, b = decisions(tmp_path / "a"), decisions(tmp_path / "b")
    assert len(a) == len(b) == 8 and a == b
    assert any(v for r in a for k, v in r.items() if k.endswith("/paused"))  # it did decide
    assert straight.scheduler is not None and resumed.scheduler is not None
    assert straight.scheduler.state_dict() == resumed.scheduler.state_dict()
