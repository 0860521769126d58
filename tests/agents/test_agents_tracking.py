"""Experiment trackers: MLflow (its local file store) and W&B (offline mode) record the run's
config and each step's metrics beside metrics.jsonl."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from agents_common import DIGITS_ENV

from llmgym import error
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.runlog import MetricsLogger
from llmgym.agents.tracking import open_trackers


def _cfg(out: Path, **kw: Any) -> GRPOConfig:
    return GRPOConfig(output_dir=str(out), env_id=DIGITS_ENV, learning_rate=3e-4, **kw)


def _mlflow_run(store: Path) -> Any:
    from mlflow.tracking import MlflowClient

    from llmgym.agents.tracking import _env

    with _env("MLFLOW_ALLOW_FILE_STORE", "true"):
        client = MlflowClient(tracking_uri=store.resolve().as_uri())
    (experiment,) = [e for e in client.search_experiments() if e.name == "llmgym"]
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


@pytest.mark.timeout(120)
def test_mlflow_records_config_and_metrics_in_its_file_store(
    tiny_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = _cfg(
        tmp_path,
        model=tiny_dir,
        total_steps=2,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=4,
        progress=False,
        tensorboard=False,
        trackers=["mlflow"],
        env_kwargs={"difficulty": 0.0},
    )
    trainer = GRPOTrainer(cfg)
    trainer.train()
    trainer.close()
    client, run = _mlflow_run(tmp_path / "mlruns")
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["algo"] == "grpo" and float(params["learning_rate"]) == 3e-4
    assert params["env_kwargs.difficulty"] == "0.0" and params["trackers"] == "['mlflow']"
    history = client.get_metric_history(run.info.run_id, "losses.policy")
    assert [m.step for m in history] == [1, 2]
    assert "rewards.mean" in run.data.metrics and "clip_frac.low" in run.data.metrics


def test_mlflow_names_it_cannot_store_are_rewritten_not_fatal(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    cfg = _cfg(tmp_path, trackers=["mlflow"], env_kwargs={"a:b": "x" * 10_000})
    with MetricsLogger(tmp_path, tensorboard=False, trackers=open_trackers(cfg, "grpo")) as log:
        log.log(1, {"scheduler/arith:add/p_success": 0.5, "bad": float("nan"), "text": "x"})
    client, run = _mlflow_run(tmp_path / "mlruns")
    assert run.data.metrics == {"scheduler.arith_add.p_success": 0.5}
    assert len(run.data.params["env_kwargs.a_b"]) == 6000


@pytest.mark.timeout(120)
def test_wandb_offline_run_holds_config_and_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = _cfg(tmp_path, trackers=["wandb"], tracker_project="llmgym-test")
    log = MetricsLogger(tmp_path, tensorboard=False, trackers=open_trackers(cfg, "grpo"))
    try:
        log.log(1, {"losses/policy": 0.25, "rewards/mean": 0.5})
    finally:
        log.close()
    import wandb

    wandb.teardown()  # stops the wandb-core service process this test started
    (record,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    data = record.read_bytes()
    for text in (b"losses/policy", b"rewards/mean", b"learning_rate", b"llmgym-test"):
        assert text in data
    left = subprocess.run(["pgrep", "-f", "wandb-core"], capture_output=True, text=True)
    assert str(tmp_path) not in left.stdout


def test_an_unknown_or_missing_tracker_fails_with_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "mlflow.entities", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(error.DependencyNotInstalled, match=r"llmgym\[tracking\]"):
        open_trackers(_cfg(tmp_path, trackers=["mlflow"]), "grpo")
