"""Training metrics: one JSON object per step in ``<run>/metrics.jsonl``, mirrored to TensorBoard.

A run directory holds ``metrics.jsonl``, ``config.yaml`` (the run's config: ``algo`` and
every field of its config dataclass, written when the trainer starts), TensorBoard events in
``tb/``, checkpoints and ``final/``. ``llmgym report RUN_DIR`` draws the curves and shows the
hyper-parameters from ``config.yaml``.

The schema that ``llmgym report RUN_DIR`` reads: every line holds ``step`` (int, 1-based),
``time`` (unix seconds) and flat metric names mapped to floats:

- ``losses/*``: ``losses/policy``, ``losses/value``, ``losses/kl_penalty``, ``losses/total``, ``losses/sft``
- ``charts/*``: ``charts/learning_rate``, ``charts/samples_per_s``, ``charts/tokens_per_s``,
  ``charts/episodes``, ``charts/completion_length``, ``charts/kl_coef``...
- ``rewards/mean``, ``rewards/success_rate`` and ``rewards/<domain>`` (mean reward per domain),
  ``success/<domain>``
- ``kl`` (KL of the policy to the reference model when one is loaded; otherwise how far the
  step's update moved the policy), ``entropy`` (per sampled token), ``clip_frac`` (top level)
- ``sandbox/timeout_rate``, ``sandbox/oom_rate``, ``sandbox/crash_rate``, ``sandbox/error_rate``
- ``time/<phase>_s`` (``time/rollout_s``, ``time/update_s``, ``time/step_s``...)
- ``scheduler/<task>/{p_success,difficulty,weight,paused,adv_abs,picks}`` when a scheduler runs
- the live monitor's (:mod:`llmgym.agents.monitoring`): ``overall/<m>``, ``domain/<d>/<m>``,
  ``family/<d>/<f>/<m>`` with ``<m>`` in ``reward``, ``success``, ``length``, ``episodes``,
  ``anomaly``; ``alerts/fired`` (the alerts themselves are in ``alerts.jsonl``)
- ``eval/success_rate``, ``eval/mean_reward`` on steps that evaluate held-out seeds

>>> import tempfile, json, pathlib
>>> d = tempfile.mkdtemp()
>>> with MetricsLogger(d, tensorboard=False) as log:
...     _ = log.log(1, {"losses/policy": 0.5, "kl": 0.01})
>>> json.loads(pathlib.Path(d, "metrics.jsonl").read_text())["losses/policy"]
0.5
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym.evaluation.monitor import ALERTS_FILE

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"


class MetricsLogger:
    """Appends metrics to ``metrics.jsonl`` (and TensorBoard, and any ``trackers``: objects with
    ``log(step, record)`` and ``close()``, see :mod:`llmgym.agents.tracking`); only the main
    process writes."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = True,
        enabled: bool = True,
        trackers: Sequence[Any] = (),
    ):
        self.run_dir = Path(run_dir)
        self.enabled = enabled
        self.trackers = list(trackers)
        self._tb: Any = None
        self._file: Any = None
        if not enabled:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._file = (self.run_dir / METRICS_FILE).open("a", encoding="utf-8")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional: JSONL is the record
                self._tb = None
            else:
                self._tb = SummaryWriter(str(self.run_dir / "tb"))

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Write one step's metrics (non-finite and non-numeric values are dropped)."""
        record: dict[str, Any] = {"step": int(step), "time": round(time.time(), 3)}
        for key, value in metrics.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(number):
                record[key] = number
        if not self.enabled:
            return record
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in record.items():
                if key not in ("step", "time"):
                    self._tb.add_scalar(key, value, step)
        for tracker in self.trackers:
            tracker.log(step, record)
        return record

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step`` (resuming from a checkpoint taken at ``step``), in
        ``metrics.jsonl`` and ``alerts.jsonl``: the resumed run logs (and alerts) them again."""
        if not self.enabled:
            return
        self._file.close()
        for name in (METRICS_FILE, ALERTS_FILE):
            _drop_after(self.run_dir / name, step)
        self._file = (self.run_dir / METRICS_FILE).open("a", encoding="utf-8")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        while self.trackers:
            self.trackers.pop().close()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_after(path: Path, step: int) -> None:
    """Rewrite a JSONL file without its records past ``step`` (and without torn lines)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("step", 0) <= step:
            kept.append(line)
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run's ``metrics.jsonl`` (a partial last line is skipped)."""
    path = Path(run_dir) / METRICS_FILE
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def write_run_config(run_dir: str | Path, algo: str, config: Mapping[str, Any]) -> Path:
    """Write ``<run>/config.yaml``: ``algo`` first, then the config's fields in their order.

    >>> import tempfile, yaml
    >>> d = tempfile.mkdtemp()
    >>> yaml.safe_load(write_run_config(d, "sft", {"learning_rate": 1e-3}).read_text())
    {'algo': 'sft', 'learning_rate': 0.001}
    """
    import yaml

    path = Path(run_dir) / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump({"algo": algo, **dict(config)}, sort_keys=False), encoding="utf-8"
    )
    return path


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The mapping of ``<run>/config.yaml`` (empty when there is none)."""
    import yaml

    try:
        data = yaml.safe_load((Path(run_dir) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return dict(data) if isinstance(data, Mapping) else {}


class PhaseClock:
    """Adds wall seconds to ``timings[name]`` (a trainer's time split per phase): ``with clock(name):``, or ``start(name)`` (which
    stops the running one) and ``stop()``."""

    def __init__(self, timings: dict[str, float]):
        self.timings = timings
        self.running: tuple[str, float] | None = None

    def start(self, name: str) -> None:
        self.stop()
        self.running = (name, time.perf_counter())

    def stop(self) -> None:
        if self.running is not None:
            name, t0 = self.running
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
            self.running = None

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.start(name)
        try:
            yield
        finally:
            self.stop()
