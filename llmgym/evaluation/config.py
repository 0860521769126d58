"""What an evaluation run is asked to do: :class:`EvalConfig`, checked when built.

The envs (each with its kwargs, seed and number of tasks), the policy, samples and k of pass@k,
sampling settings, concurrency, the output folder and what to do with errored episodes. A run's
*identity* (what fixes its results) comes from here, so that a resumed run can be checked against
the one in its folder. Nothing here plans or plays an episode (``plan.py``, ``episodes.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.evaluation import provenance as prov
from llmgym.evaluation.suites import EnvEntry, Suite, check_unique_names

MODES = ("auto", "batch", "async")
ERROR_STATUSES = ("policy_error", "env_error")
"""Episode statuses that say nothing about the model: the policy (its server) or the env failed."""
DEFAULT_MAX_ERROR_RATE = 0.05


@dataclass
class EvalConfig:
    """What to evaluate and how; checked when built, with messages that say how to fix it."""

    envs: tuple[EnvEntry, ...]
    """The envs, each with its kwargs, seed and number of tasks."""
    policy: Any = "oracle"
    """A policy spec (``"oracle"``, ``"hf:<path>"``, ``"openai:<model>@<url>"``,
    ``"module:function"``), a callable ``fn(messages, tools)`` or a ``Policy``."""
    out: Path = Path("evals/run")
    """The output folder (created; an existing run there of the same config is resumed)."""
    samples: int = 1
    """Episodes per task (``n`` of pass@k)."""
    k: tuple[int, ...] = (1,)
    """The k of pass@k to report (those above ``samples`` are left out)."""
    seed: int = 0
    """Seed of the statistics (bootstrap); env entries carry their own task seeds."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Sampling settings passed to the policy (temperature, max_new_tokens, ...)."""
    concurrency: int = 16
    """Episodes in flight at once (the largest batch a batched policy gets)."""
    mode: str = "auto"
    """``"batch"`` (``Policy.generate`` on a batch), ``"async"`` (``Policy.agenerate`` per
    episode) or ``"auto"``: async when the policy overrides ``agenerate``."""
    env_workers: int = 8
    """Threads stepping envs (sandboxed code runs in parallel); 0 steps them inline."""
    suite: Suite | None = None
    """The suite the envs came from, if any (recorded in provenance)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """What the call changed from the suite's pins (recorded; compare warns about it)."""
    overwrite: bool = False
    """Start afresh in ``out`` even if it holds another run."""
    report: bool = True
    """Write ``report.html`` at the end."""
    rollouts_format: str = "jsonl"
    """``"jsonl"``, or ``"parquet"`` to also write ``rollouts.parquet`` (needs pyarrow)."""
    progress: bool = True
    """Show progress bars."""
    retry_errors: bool = True
    """On resume, play again the episodes recorded as ``policy_error`` or ``env_error`` (a
    model server that was down, an env that crashed): only real outcomes are kept."""
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    """The share of errored episodes above which the run counts as failed: the summary and
    the report say so and ``llmgym eval`` exits non-zero."""

    def __post_init__(self) -> None:
        self.envs = tuple(self.envs)
        if (
            isinstance(self.max_error_rate, bool)
            or not isinstance(self.max_error_rate, (int, float))
            or not 0.0 <= float(self.max_error_rate) <= 1.0
        ):
            raise error.Error(
                f"max_error_rate must be a number in [0, 1], actual: {self.max_error_rate!r}"
            )
        if not self.envs:
            raise error.Error("Nothing to evaluate: give env ids or a suite")
        check_unique_names(self.envs)
        self.out = Path(self.out)
        self.k = tuple(self.k)
        for name in ("samples", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise error.Error(f"{name} must be an int >= 1, actual: {value!r}")
        if (
            isinstance(self.env_workers, bool)
            or not isinstance(self.env_workers, int)
            or self.env_workers < 0
        ):
            raise error.Error(f"env_workers must be an int >= 0, actual: {self.env_workers!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise error.Error(f"seed must be an int >= 0, actual: {self.seed!r}")
        if not self.k or any(
            isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in self.k
        ):
            raise error.Error(f"k must be ints >= 1, actual: {self.k!r}")
        if max(self.k) > self.samples:
            raise error.Error(
                f"pass@{max(self.k)} needs at least {max(self.k)} samples per task; "
                f"pass samples={max(self.k)} or lower k (samples is {self.samples})"
            )
        if self.mode not in MODES:
            raise error.Error(f"mode must be one of {MODES}, actual: {self.mode!r}")
        if self.rollouts_format not in ("jsonl", "parquet"):
            raise error.Error(
                f"rollouts_format must be 'jsonl' or 'parquet', actual: {self.rollouts_format!r}"
            )
        if not isinstance(self.settings, Mapping):
            raise error.Error("settings must be a dict of sampling settings")
        self.settings = dict(self.settings)

    def policy_spec(self) -> str:
        p = self.policy
        if isinstance(p, str):
            return p
        spec = getattr(p, "spec", "")
        if spec:
            return str(spec)
        fn = getattr(p, "__qualname__", None) or type(p).__qualname__
        return f"{getattr(p, '__module__', '?')}:{fn}"

    def identity(self) -> dict[str, Any]:
        """What fixes the results: a resumed run must have the same identity."""
        return prov._jsonable(
            {
                "envs": [e.to_dict() for e in self.envs],
                "samples": self.samples,
                "policy": self.policy_spec(),
                "settings": self.settings,
                "suite": self.suite.provenance() if self.suite else None,
            }
        )
