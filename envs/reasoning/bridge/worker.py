"""The scoring worker: the library's ``score_answer`` run in another process, under a real timeout.

Why a process: a library's scorer is code we did not write running on text a policy wrote. In
reasoning-gym some scorers ``eval`` the answer or hand it to sympy (hardened in the worker by
:func:`~llmgym.envs.reasoning.bridge.library.harden`), sympy can run for minutes on
``9**9**9**9``, and a scorer may raise or fill memory. In the worker none of that reaches the
trainer: a request that passes its timeout kills the worker (a new one starts on the next call),
memory is capped by ``RLIMIT_AS``, and the only thing read back is one JSON number.

Protocol: one JSON object a line each way. Request ``{"dataset", "level", "seed", "answer"}``;
reply ``{"score": float}``. The worker rebuilds the item from (dataset, level, seed) itself, so
nothing but text crosses. The worker starts on first use (importing the library takes about a
second, not counted against a request's timeout) and is killed at exit; a forked child starts
its own. What this is not: a sandbox. The worker runs as the caller's user; the hardening, not
the process, is what keeps an answer from running code.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
from typing import Any

STARTUP_TIMEOUT_S = 120.0
MEMORY_LIMIT_BYTES = 4 << 30
_BOOT = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "from llmgym.envs.reasoning.bridge.worker import main; main()"
)


class Worker:
    """One scoring process; not thread-safe (the :class:`Scorer` hands it to one caller at a time)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            text=True,
        )
        self.ready = False

    def _line(self, timeout_s: float) -> str | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], max(timeout_s, 0.0))
        return self.proc.stdout.readline() if ready else None

    def request(self, payload: dict[str, Any], timeout_s: float) -> float | None:
        """The score, or None if the worker died, answered nonsense or ran out of time."""
        if not self.ready:
            self.ready = self._line(STARTUP_TIMEOUT_S) == "ready\n"
            if not self.ready:
                return None
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        line = self._line(timeout_s)
        try:
            value = json.loads(line)["score"] if line else None
        except (ValueError, TypeError, KeyError):
            return None
        return float(value) if isinstance(value, (int, float)) else None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class Scorer:
    """A pool of up to ``size`` workers, started on demand."""

    def __init__(self, size: int = 2) -> None:
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False
        self.timeouts = 0

    def score(
        self, dataset: str, level: float, seed: int, answer: str, timeout_s: float
    ) -> float | None:
        """The library's score of ``answer`` on the item, or None (timeout, crash)."""
        payload = {"dataset": dataset, "level": level, "seed": seed, "answer": answer}
        with self._slots:
            with self._lock:
                if self._closed:
                    return None
                worker = self._idle.pop() if self._idle else Worker()
            value = worker.request(payload, timeout_s)
            if value is None or not 0.0 <= value <= 1.0:
                self.timeouts += 1
                worker.kill()
                return None
            with self._lock:
                if self._closed:
                    worker.kill()
                else:
                    self._idle.append(worker)
            return value

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


_scorer: Scorer | None = None
_owner = os.getpid()
_scorer_lock = threading.Lock()


def get_scorer() -> Scorer:
    """The process-wide scorer (a fresh one in a forked child: the parent's pipes are not ours)."""
    global _scorer, _owner
    with _scorer_lock:
        if _scorer is None or _owner != os.getpid():
            _scorer, _owner = Scorer(), os.getpid()
            atexit.register(_scorer.close)
        return _scorer


def shutdown() -> None:
    """Kill the workers now (the next score starts one)."""
    global _scorer
    with _scorer_lock:
        scorer, _scorer = _scorer, None
    if scorer is not None and _owner == os.getpid():
        scorer.close()


def main() -> None:
    """The worker's loop (run by :class:`Worker` as ``python -c``)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    from llmgym.envs.reasoning.bridge import library

    library.harden()
    out = sys.stdout
    sys.stdout = sys.stderr  # a library that prints must not corrupt the replies
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            value = library.score(
                str(req["dataset"]), float(req["level"]), int(req["seed"]), str(req["answer"])
            )
        except Exception:  # a malformed request or a generator that raised: no credit
            value = 0.0
        out.write(json.dumps({"score": value}) + "\n")
        out.flush()
