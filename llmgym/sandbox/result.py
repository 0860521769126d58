"""``ExecResult``: what one sandboxed execution did, as facts a judge can rely on."""

from __future__ import annotations

import base64
import dataclasses
import signal as _signal
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["STATUSES", "ExecResult", "Status"]

Status = Literal[
    "ok",
    "runtime_error",
    "compile_error",
    "timeout",
    "memory_limit",
    "output_limit",
    "sandbox_error",
]
STATUSES: tuple[str, ...] = (
    "ok",
    "runtime_error",
    "compile_error",
    "timeout",
    "memory_limit",
    "output_limit",
    "sandbox_error",
)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one run. User-code failures are results, never exceptions.

    ``status`` is decided by the sandbox from kernel facts (wait status, cgroup OOM counter, its own
    timers and output counters), never from what the program prints:

    - ``ok``: exit code 0.
    - ``runtime_error``: non-zero exit code, or killed by a signal (``signal``).
    - ``compile_error``: the compile step (C, C++) or Python's ``compile()`` failed;
      diagnostics in ``compile_output`` (and, for Python, in ``stderr`` as Python prints them).
    - ``timeout``: wall-clock or CPU limit exceeded; the run was killed.
    - ``memory_limit``: the memory limit killed it (or its allocation failed and it died of that).
    - ``output_limit``: stdout, stderr or the result channel passed ``max_output_bytes``; killed.
    - ``sandbox_error``: the sandbox itself failed (``detail`` says how); not the program's fault.

    >>> r = ExecResult(status="ok", exit_code=0, signal=None, stdout="1\\n", stderr="",
    ...                wall_time_s=0.01, cpu_time_s=0.01, peak_memory_mb=1.5)
    >>> r.ok, r.to_dict()["stdout"]
    (True, '1\\n')
    >>> ExecResult.from_dict(r.to_dict()) == r
    True
    """

    status: Status
    exit_code: int | None
    """Exit code, or ``None`` when the program was killed by a signal or never ran."""
    signal: int | None
    """Number of the signal that killed the program (9 for SIGKILL...), else ``None``."""
    stdout: str
    stderr: str
    wall_time_s: float
    """Wall-clock time of the program (compile step excluded), as it elapsed: on a busy host it
    may exceed ``Limits.wall_time_s`` without a timeout (see there)."""
    cpu_time_s: float
    """User + system CPU time of all the run's processes."""
    peak_memory_mb: float
    """Peak memory charged to the run (cgroup), or the peak RSS where cgroups are unavailable."""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    result_bytes: bytes = b""
    """What the program wrote to the result channel (fd 3); see the package docstring."""
    result_truncated: bool = False
    compile_output: str = ""
    """Compiler diagnostics (C, C++) or Python's SyntaxError report; ``""`` when none."""
    compile_time_s: float | None = None
    detail: str = ""
    """One human-readable sentence on why the status is what it is (empty when ``ok``)."""
    language: str | None = None
    backend: str = "local"
    stdout_bytes: bytes = field(default=b"", repr=False)
    """stdout as raw bytes (``stdout`` is it decoded as UTF-8 with replacement characters)."""
    stderr_bytes: bytes = field(default=b"", repr=False)
    max_rss_mb: float | None = None
    """Peak resident set of the program's own process (``wait4``; for the Python fast path it
    counts the warm interpreter's pages it shares), or ``None`` when it was not reaped."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def truncated(self) -> bool:
        """Whether any output stream was cut at ``max_output_bytes``."""
        return self.stdout_truncated or self.stderr_truncated or self.result_truncated

    @property
    def signal_name(self) -> str | None:
        """``"SIGSEGV"`` etc. for ``signal``, or ``None``."""
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict (bytes as base64 under ``*_b64`` keys)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bytes):
                out[f.name.replace("_bytes", "_b64")] = base64.b64encode(value).decode("ascii")
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        """Inverse of :meth:`to_dict`."""
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.type == "bytes" or f.name.endswith("_bytes"):
                key = f.name.replace("_bytes", "_b64")
                if key in data:
                    kwargs[f.name] = base64.b64decode(data[key])
            elif f.name in data:
                kwargs[f.name] = data[f.name]
        return cls(**kwargs)

    @classmethod
    def sandbox_failure(
        cls, detail: str, *, language: str | None = None, backend: str = "local"
    ) -> ExecResult:
        """A ``sandbox_error`` result: the sandbox, not the program, failed."""
        return cls(
            status="sandbox_error",
            exit_code=None,
            signal=None,
            stdout="",
            stderr="",
            wall_time_s=0.0,
            cpu_time_s=0.0,
            peak_memory_mb=0.0,
            detail=detail,
            language=language,
            backend=backend,
        )
