"""The trainers' live monitor: each step's episodes to per-domain and per-family metrics, and the
config's alert rules (``alerts:``) fired on them.

:class:`TrainMonitor` wraps :class:`llmgym.evaluation.monitor.Monitor`. Its metrics join the
step's record (so they reach ``metrics.jsonl``, TensorBoard and any tracker through
:class:`~llmgym.agents.runlog.MetricsLogger`); its alerts are logged and appended to
``<output_dir>/alerts.jsonl`` by the main process, and marked on the dashboard
(``llmgym report RUN --watch``). Every process sees the same gathered episodes and scalars, so
every process reaches the same ``stop`` / ``checkpoint`` decision without a broadcast. Its
state is checkpointed with the run (register it with ``accelerator.register_for_checkpointing``),
so a resumed run keeps its windows, bests and active alerts. It does not save or stop anything
itself: the trainer reads :attr:`TrainMonitor.action`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym.evaluation.monitor import Alert, Episode, Monitor, clean_name, parse_rules, write_alerts

_RANK = {"log": 0, "checkpoint": 1, "stop": 2}


def episodes_of(tasks: Sequence[Any], summaries: Sequence[Any], group_size: int) -> list[Episode]:
    """Monitor episodes of one rollout round: ``summaries`` (every process's, gathered) are
    grouped by task, ``group_size`` per task in ``tasks`` order (as the trainers gather them)."""
    out = []
    for i, s in enumerate(summaries):
        task = tasks[min(i // group_size, len(tasks) - 1)]
        statuses = list(getattr(s, "exec_statuses", []))
        out.append(
            Episode(
                domain=clean_name(task.domain),
                family=clean_name(task.family),
                difficulty=round(float(task.difficulty), 2),
                reward=float(s.reward),
                success=bool(s.is_success),
                length=int(s.completion_tokens),
                ran_code=bool(statuses),
                anomalous=_anomalous(statuses),
            )
        )
    return out


def _anomalous(statuses: Sequence[str]) -> bool:
    """Any sandbox anomaly among a training episode's execution statuses (the same test as
    the evaluation report's ``exec_stats``; a training episode keeps statuses only)."""
    from llmgym.evaluation.metrics import exec_stats

    stats = exec_stats([{"exec": [{"status": s} for s in statuses]}]) if statuses else None
    return bool(stats and stats["episode_anomaly_rate"] > 0)


class TrainMonitor:
    """Scoped metrics and alerts of a training run (see the module docstring)."""

    def __init__(self, rules: Any, output_dir: str | Path, *, write: bool = True):
        self.monitor = Monitor(parse_rules(rules))
        self.output_dir = Path(output_dir)
        self.write = write
        self.alerts: list[Alert] = []
        """The alerts of the last observed step."""

    def observe(
        self, step: int, episodes: Sequence[Episode], scalars: Mapping[str, Any]
    ) -> dict[str, float]:
        """This step's monitor metrics; alerts are logged (main process) and kept in ``alerts``."""
        metrics, self.alerts = self.monitor.observe(step, episodes, scalars)
        if self.write:
            write_alerts(self.output_dir, self.alerts)
        return metrics

    @property
    def action(self) -> str | None:
        """The strongest action the last step's alerts ask for: ``stop``, ``checkpoint`` or None."""
        best = max((a.action for a in self.alerts), key=_RANK.__getitem__, default="log")
        return None if best == "log" else best

    def state_dict(self) -> dict[str, Any]:
        return self.monitor.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.monitor.load_state_dict(state)
