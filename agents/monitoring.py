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

:class:`FamilyTally` is the per-family KL and entropy of a GRPO update: per-row sums over the
trained completion tokens, added up by family and reduced across processes in the update's own
collectives (the monitor's ``family/<domain>/<family>/kl`` and ``.../entropy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym.evaluation.monitor import (
    Alert,
    Episode,
    FamilyTokens,
    Monitor,
    TokenSums,
    clean_name,
    parse_rules,
    write_alerts,
)

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


def family_key(item: Any) -> tuple[str, str]:
    """``(domain, family)`` of a task or trajectory, as the monitor names them."""
    return clean_name(item.domain), clean_name(item.family)


class FamilyTally:
    """Per-family token sums of KL and entropy over one update's trained completion tokens.

    ``keys`` holds each row's ``(domain, family)`` (the rows the update trains, in order);
    ``names`` the families drawn this step, the same list on every process, so every process's
    ``[families, ...]`` sums line up and add up in one reduce. The trainer calls :meth:`begin`,
    then :meth:`add` for every micro-batch, reduces :meth:`by_family` with its totals and hands
    the result to :meth:`finish`; :attr:`sums` then holds what the monitor needs.
    """

    def __init__(self, keys: Sequence[tuple[str, str]], names: Sequence[tuple[str, str]] = ()):
        self.names = sorted(set(names) | set(keys))
        index = {name: i for i, name in enumerate(self.names)}
        self.rows = [index[k] for k in keys]
        self.sums: dict[tuple[str, str], TokenSums] = {}
        """Set by :meth:`finish`: each family's TokenSums (one pass over its tokens)."""
        self._per_row: Any = None  # [rows, 3]: KL, entropy and tokens, summed over passes
        self._index: Any = None

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only these rows (the update drops some, e.g. truncated completions)."""
        self.rows = [self.rows[i] for i in rows]

    def begin(self, n: int, device: Any) -> None:
        """Start the sums of an update of ``n`` rows (rows past the named ones are padding)."""
        import torch

        self._per_row = torch.zeros(n, 3, device=device)
        pad = [0] * (n - len(self.rows))  # padding rows carry no trained token
        self._index = torch.tensor(self.rows[:n] + pad, dtype=torch.long, device=device)

    def add(self, rows: Sequence[int], mask: Any, entropy: Any, kl_rows: Any) -> None:
        """One micro-batch: its rows' masked token count, entropy and KL sums."""
        m = mask.detach().float()
        self._per_row[rows, 0] += kl_rows.detach().float()
        self._per_row[rows, 1] += (entropy.detach().float() * m).sum(1)
        self._per_row[rows, 2] += m.sum(1)

    def by_family(self, per_row: Any = None) -> Any:
        """``per_row`` (default: the update's ``[rows, 3]`` sums) added up per family: a flat
        tensor of ``len(names) * per_row's row width`` numbers, to reduce across processes."""
        per_row = (self._per_row if per_row is None else per_row).float()
        if not self.names:  # nothing named (a direct call of the update): nothing to add
            return per_row.new_zeros(0)
        shape = (len(self.names), *per_row.shape[1:])
        out = per_row.new_zeros(shape).index_add_(0, self._index, per_row)
        return out.flatten()

    def finish(self, reduced: Any, passes: int, *, kl: bool, update_kl: Any = None) -> None:
        """Set :attr:`sums` from the reduced :meth:`by_family` sums of ``passes`` passes over
        the rows; ``kl``: the rows' KL was measured (against a reference); ``update_kl``: the
        reduced per-family sums of the update's KL (one pass) instead."""
        table = reduced.view(len(self.names), 3).tolist()
        moved = update_kl.tolist() if update_kl is not None else None
        self.sums = {}
        for i, (name, (kl_sum, entropy, tokens)) in enumerate(zip(self.names, table, strict=True)):
            if tokens <= 0:
                continue
            kl_one = moved[i] if moved is not None else (kl_sum / passes if kl else None)
            self.sums[name] = TokenSums(tokens / passes, kl_one, entropy / passes)


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
        self,
        step: int,
        episodes: Sequence[Episode],
        scalars: Mapping[str, Any],
        tokens: FamilyTokens | None = None,
    ) -> dict[str, float]:
        """This step's monitor metrics; alerts are logged (main process) and kept in ``alerts``."""
        metrics, self.alerts = self.monitor.observe(step, episodes, scalars, tokens)
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
