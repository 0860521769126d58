"""``Limits``: the resource bounds of one sandboxed execution, validated when built."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from llmgym.sandbox.errors import InvalidLimits

__all__ = ["Limits"]


def _positive_number(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidLimits(
            f"Limits.{name} expects a positive number of seconds, actual type: {type(value).__name__}"
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidLimits(f"Limits.{name} must be a finite number > 0, got {value!r}")


def _positive_int(name: str, value: object, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLimits(f"Limits.{name} expects an int, actual type: {type(value).__name__}")
    if value < minimum:
        raise InvalidLimits(f"Limits.{name} must be >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one run. Every field is enforced by the kernel, not by the program.

    >>> Limits(wall_time_s=2, memory_mb=128).cpu_limit_s
    2
    >>> Limits(memory_mb=-1)
    Traceback (most recent call last):
    ...
    llmgym.sandbox.errors.InvalidLimits: Limits.memory_mb must be >= 8, got -1
    """

    wall_time_s: float = 10.0
    """Wall-clock limit of the program (compile step excluded); past it the run is killed: ``timeout``.

    Time the run's processes spent ready to run but waiting for a CPU that other work held
    (the kernel's per-task ``run_delay``) does not count, up to 3 more ``wall_time_s``: a busy
    host does not turn into timeouts, while a program that sleeps, blocks or spins is stopped
    on time (spinning is bounded by the CPU limit too). Where the kernel does not report
    ``run_delay`` (no ``CONFIG_SCHED_INFO``) the limit is plain wall-clock time."""
    cpu_time_s: float | None = None
    """CPU time limit over all the run's processes; ``None`` means ``wall_time_s``."""
    memory_mb: int = 512
    """Memory the run may use (RAM, its /tmp files and kernel memory charged to it), in MiB."""
    max_processes: int = 64
    """Processes and threads alive at once in the run (the program counts as one)."""
    max_output_bytes: int = 1 << 20
    """Cap of stdout, of stderr and of the result channel, each; past it: ``output_limit``."""
    max_file_bytes: int = 16 << 20
    """Largest file the program may write (RLIMIT_FSIZE); /tmp as a whole is bounded by memory_mb."""
    network: bool = False
    """Share the host's network. Off by default: the run gets an empty network namespace."""

    def __post_init__(self) -> None:
        _positive_number("wall_time_s", self.wall_time_s)
        _positive_number("cpu_time_s", self.cpu_time_s, allow_none=True)
        _positive_int("memory_mb", self.memory_mb, minimum=8)
        _positive_int("max_processes", self.max_processes, minimum=1)
        _positive_int("max_output_bytes", self.max_output_bytes, minimum=0)
        _positive_int("max_file_bytes", self.max_file_bytes, minimum=0)
        if not isinstance(self.network, bool):
            raise InvalidLimits(
                f"Limits.network expects a bool, actual type: {type(self.network).__name__}"
            )

    @property
    def cpu_limit_s(self) -> float:
        """The CPU limit in force: ``cpu_time_s``, or ``wall_time_s`` when that is ``None``."""
        return self.wall_time_s if self.cpu_time_s is None else self.cpu_time_s

    def replace(self, **changes: Any) -> Limits:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict; ``Limits(**d)`` rebuilds it."""
        return dataclasses.asdict(self)

    @classmethod
    def coerce(cls, value: Limits | dict[str, Any] | None) -> Limits:
        """Accept a ``Limits``, a dict of its fields, or ``None`` (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, Limits):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise InvalidLimits(
                    f"unknown Limits field(s) {sorted(unknown)}; "
                    f"valid: {[f.name for f in dataclasses.fields(cls)]}"
                )
            return cls(**value)
        raise InvalidLimits(
            f"limits expects a llmgym.sandbox.Limits or a dict, actual type: {type(value).__name__}"
        )
