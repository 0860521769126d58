"""Experiment trackers beside ``metrics.jsonl`` and TensorBoard: MLflow and Weights & Biases.

A tracker records the run's config (every field, as parameters) when it opens, each step's
metrics (the record :class:`~llmgym.agents.runlog.MetricsLogger` writes) and the run's end.
Both libraries are optional extras, imported only when a config names them
(``trackers: [mlflow, wandb]``); only the main process opens them.

- MLflow (metric names with ``.`` for ``/``: ``losses.policy``): ``mlflow_tracking_uri`` (else ``$MLFLOW_TRACKING_URI``, else a local file store in
  ``<output_dir>/mlruns``; MLflow 3 keeps the file store in maintenance mode behind
  ``MLFLOW_ALLOW_FILE_STORE``, which llmgym sets only while it opens that default store).
  ``mlflow ui --backend-store-uri <output_dir>/mlruns`` shows it.
- W&B: ``wandb.init(project=tracker_project, dir=output_dir, config=...)``; ``WANDB_MODE=offline``
  writes the run under ``<output_dir>/wandb`` without network (``wandb sync`` uploads it later).

It is not a metrics store of its own: ``metrics.jsonl`` stays the record ``llmgym report`` reads.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from llmgym import error

TRACKING_EXTRA = "pip install 'llmgym[tracking]'"
_MLFLOW_KEY = re.compile(r"[^0-9A-Za-z_\-. ]")  # what MLflow accepts in a name, less "/"
_MLFLOW_PARAM_CHARS = 6000  # MLflow's longest parameter value


class Tracker(Protocol):
    def log(self, step: int, record: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def open_trackers(cfg: Any, algo: str) -> list[Tracker]:
    """The trackers ``cfg.trackers`` names, each already holding the run's config."""
    config = {"algo": algo, **cfg.to_dict()}
    run_name = Path(cfg.output_dir).name or "run"
    makers: dict[str, type[MLflowTracker] | type[WandbTracker]] = {
        "mlflow": MLflowTracker,
        "wandb": WandbTracker,
    }
    return [
        makers[name](
            config=config,
            project=cfg.tracker_project,
            run_dir=cfg.output_dir,
            run_name=run_name,
            tracking_uri=getattr(cfg, "mlflow_tracking_uri", None),
        )
        for name in cfg.trackers
    ]


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A config as ``{"env_kwargs.difficulty": "0.0", ...}``: nested mappings flattened, values
    as text (what both trackers show as hyper-parameters).

    >>> flat_params({"lr": 0.1, "env_kwargs": {"difficulty": 0.0}, "trackers": ["mlflow"]})
    {'lr': '0.1', 'env_kwargs.difficulty': '0.0', 'trackers': "['mlflow']"}
    """
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = str(value)
    return out


class MLflowTracker:
    """One MLflow run: parameters from the config, metrics per step, terminated on close."""

    def __init__(
        self,
        *,
        config: Mapping[str, Any],
        project: str,
        run_dir: str | Path,
        run_name: str,
        tracking_uri: str | None = None,
    ):
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise error.DependencyNotInstalled(
                f"trackers: [mlflow] needs MLflow: {TRACKING_EXTRA} (or pip install mlflow-skinny)"
            ) from None
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if uri:
            self.client = MlflowClient(tracking_uri=uri)
        else:
            store = (Path(run_dir) / "mlruns").resolve()
            with _env("MLFLOW_ALLOW_FILE_STORE", "true"):
                self.client = MlflowClient(tracking_uri=store.as_uri())
        experiment = self.client.get_experiment_by_name(project)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(project)
        )
        self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
        params = [
            Param(_mlflow_key(k), v[:_MLFLOW_PARAM_CHARS]) for k, v in flat_params(config).items()
        ]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[start : start + 100])

    def log(self, step: int, record: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [
            Metric(_mlflow_key(k), float(v), stamp, int(step))
            for k, v in record.items()
            if k not in ("step", "time")
        ]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def close(self) -> None:
        if self.run_id:
            self.client.set_terminated(self.run_id)
            self.run_id = ""


class WandbTracker:
    """One W&B run in ``<run_dir>/wandb`` (``WANDB_MODE=offline`` keeps it local)."""

    def __init__(
        self,
        *,
        config: Mapping[str, Any],
        project: str,
        run_dir: str | Path,
        run_name: str,
        tracking_uri: str | None = None,
    ):
        try:
            import wandb
        except ImportError:
            raise error.DependencyNotInstalled(
                f"trackers: [wandb] needs Weights & Biases: {TRACKING_EXTRA} (or pip install wandb)"
            ) from None
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.run: Any = wandb.init(
            project=project,
            name=run_name,
            dir=str(run_dir),
            config=dict(config),
            settings=wandb.Settings(console="off", silent=True),
        )

    def log(self, step: int, record: Mapping[str, float]) -> None:
        self.run.log({k: v for k, v in record.items() if k not in ("step", "time")}, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def _mlflow_key(name: str) -> str:
    """A metric or parameter name MLflow stores: ``/`` becomes ``.`` (its file store keeps a
    metric per file, so ``clip_frac`` and ``clip_frac/low`` would collide), other characters it
    rejects become ``_``.

    >>> _mlflow_key("scheduler/arith:add/p_success")
    'scheduler.arith_add.p_success'
    """
    return _MLFLOW_KEY.sub("_", name.replace("/", "."))[:250]


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block only."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
