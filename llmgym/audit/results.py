"""What an audit found: :class:`VariantResult`, :class:`HackResult` and :class:`AuditReport`.

The report is what ``llmgym audit`` prints (:meth:`AuditReport.table`) or writes as JSON
(:meth:`AuditReport.to_json`), and what its exit status comes from (:attr:`AuditReport.passed`).
Plain data and formatting: the verdicts are reached in ``playing.py``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

FAILING_VERDICTS = ("FAIL", "LEAK", "ERROR")
"""The verdicts that fail an audit."""


@dataclass
class VariantResult:
    """One variant's outcome over the audited episodes."""

    name: str
    verdict: str
    mean: float | None
    """Mean return over the episodes it played (from where it took over)."""
    reference: float | None
    """The oracle's (or the baseline variant's) mean return over the same episodes."""
    limit: float | None
    episodes: int
    success_rate: float | None
    alternatives: int = 1
    excluded: int = 0
    """Episodes set aside: the variant's answer was the oracle's answer."""
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    example: str = ""
    """The variant's first action (cut to 300 characters), to reproduce it."""

    @property
    def margin(self) -> float:
        if self.mean is None or self.limit is None:
            return -math.inf
        return self.mean - self.limit


@dataclass
class HackResult:
    """One hack on one family (or on the env's own task mix when ``family`` is None)."""

    hack: str
    family: str | None
    verdict: str
    mean: float | None
    reference: float | None
    limit: float | None
    variant: str | None
    """The variant the row reports: the worst offender, else the best-paying one."""
    variants: list[VariantResult]
    description: str = ""
    error: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING_VERDICTS


@dataclass
class AuditReport:
    """What :func:`audit` found; ``passed`` is what ``llmgym audit`` turns into its exit status."""

    env_id: str
    env_kwargs: dict[str, Any]
    families: list[str | None]
    episodes: int
    seed: int
    threshold: float
    reference: str
    """``oracle``, ``reward_range`` (the env's documented maximum), ``given`` or ``none``."""
    oracle_mean: float | None
    results: list[HackResult]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.reference != "none"

    @property
    def failures(self) -> list[HackResult]:
        return [r for r in self.results if r.failed]

    @property
    def passed(self) -> bool:
        return self.judged and not self.failures

    def result(self, hack: str, family: str | None = None) -> HackResult:
        for r in self.results:
            if r.hack == hack and (family is None or r.family == family):
                return r
        raise KeyError(
            f"no result for hack {hack!r}" + (f" on family {family!r}" if family else "")
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["judged"] = self.judged
        return data

    def to_json(self, **kwargs: Any) -> str:
        """The report as JSON (ASCII: examples of garbage hacks hold lone surrogates, which no
        UTF-8 stream can write)."""
        kwargs.setdefault("ensure_ascii", True)
        return json.dumps(self.to_dict(), default=str, **kwargs)

    def table(self, *, verbose: bool = False) -> str:
        """The report as text: a header, one row per hack that applied (``verbose``: and one per
        variant), the hacks that did not apply, and a summary line."""
        lines = [
            f"llmgym audit {self.env_id}"
            + (f" {json.dumps(self.env_kwargs, default=str)}" if self.env_kwargs else ""),
            f"{self.episodes} episode(s) per family, seed {self.seed}, threshold {self.threshold:g}, "
            f"reference {self.reference}"
            + (f" (mean {self.oracle_mean:.3f})" if self.oracle_mean is not None else "")
            + f", {self.seconds:.1f} s",
        ]
        lines += [f"note: {n}" for n in self.notes]
        split = any(f is not None for f in self.families)
        head: tuple[str, ...] = (
            "family", "hack", "variant", "mean", "oracle", "limit", "n", "success", "verdict",
        )  # fmt: skip
        rows: list[tuple[str, ...]] = []
        idle: dict[str, list[str]] = {}

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        for r in self.results:
            if r.verdict == "n/a":
                idle.setdefault(r.family or "", []).append(r.hack)
                continue
            shown = next((v for v in r.variants if v.name == r.variant), None)
            note = f" ({r.error[:100]})" if r.error and r.verdict in ("hack-error", "ERROR") else ""
            rows.append(
                (
                    r.family or "-",
                    r.hack,
                    r.variant or "-",
                    fmt(r.mean),
                    fmt(r.reference),
                    fmt(r.limit),
                    str(shown.episodes if shown else 0),
                    fmt(shown.success_rate if shown else None),
                    r.verdict + note,
                )
            )
            if verbose:
                for v in r.variants:
                    why = "; ".join(v.errors[:1] + v.leaks[:1])
                    rows.append(
                        (
                            "",
                            "",
                            "  " + v.name,
                            fmt(v.mean),
                            fmt(v.reference),
                            fmt(v.limit),
                            str(v.episodes) + (f"+{v.excluded} set aside" if v.excluded else ""),
                            fmt(v.success_rate),
                            v.verdict + (f" ({why[:100]})" if why else ""),
                        )
                    )
        if not split:
            head, rows = head[1:], [row[1:] for row in rows]
        widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(head)]
        widths[-1] = 0
        lines.append("")
        for row in [head, *rows]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for fam, names in idle.items():
            lines.append(f"not applicable{' to ' + fam if fam else ''}: {', '.join(names)}")
        lines.append("")
        if not self.judged:
            lines.append(
                "cannot judge: the env has no oracle and no finite reward_range maximum; "
                "pass reference=<best return> (--reference)"
            )
        elif self.failures:
            worst = "; ".join(
                f"{r.hack}{' on ' + r.family if r.family else ''}: {r.verdict}"
                + (f" ({r.variant} {fmt(r.mean)} > {fmt(r.limit)})" if r.verdict == "FAIL" else "")
                for r in self.failures
            )
            lines.append(f"{len(self.failures)} hack(s) beat the reward: {worst}")
        else:
            lines.append("passed: no hack earned more than its limit")
        return "\n".join(lines)
