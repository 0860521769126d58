"""Rate and memory limits of ``llmgym serve``: token buckets for steps/s, and the RSS guard.

A :class:`RateLimiter` holds one bucket for the whole server and one per session; a step takes
a token from each, and a refusal is a :class:`RateLimited` error (HTTP 429) that says when to
retry. :func:`check_memory` refuses new sessions (HTTP 503) while the process's resident memory
is over the operator's ceiling. What this module does not do: limit connections (uvicorn's
``limit_concurrency``, set by :mod:`llmgym.serve.server`) or env kwargs
(:mod:`llmgym.serve.envargs`).
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
import time

from llmgym.serve.sessions import ServeError


class RateLimited(ServeError):
    """Over a steps/s limit; ``retry_after_s`` says when a token is free again."""

    status = 429

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class OutOfMemory(ServeError):
    """The server's memory is over its ceiling; it takes no new session until it is below."""

    status = 503


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; not thread-safe (callers lock)."""

    def __init__(self, rate: float, burst: float | None = None):
        if rate <= 0:
            raise ValueError(f"Expects a rate > 0, actual: {rate}")
        self.rate = rate
        self.burst = max(1.0, rate if burst is None else burst)
        self.tokens = self.burst
        self.stamp = time.monotonic()

    def _refill(self, now: float) -> None:
        if now > self.stamp:  # a caller's clock read before this bucket was made is no refill
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def take(self, now: float) -> float:
        """Take a token: 0.0 if one was there, else the seconds until one will be."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def give_back(self) -> None:
        self.tokens = min(self.burst, self.tokens + 1.0)

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.burst


PRUNE_AT = 1024
"""Per-session buckets kept before the full ones are dropped."""


class RateLimiter:
    """Steps/s for the whole server and for each session (either limit may be None: none).

    Per-session buckets are kept by session id; a full bucket holds no more than a new one
    would, so full ones are dropped when the table grows (closed sessions leave nothing).
    """

    def __init__(self, global_rate: float | None, session_rate: float | None):
        self.global_rate = global_rate
        self.session_rate = session_rate
        self._global = TokenBucket(global_rate) if global_rate else None
        self._sessions: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def take_global(self) -> None:
        """Take a server-wide token or raise :class:`RateLimited`."""
        if self._global is None:
            return
        with self._lock:
            wait = self._global.take(time.monotonic())
        if wait:
            raise RateLimited(
                f"The server is over its limit of {self.global_rate:g} steps/s; retry in "
                f"{wait:.3f} s (--max-steps-per-s)",
                wait,
            )

    def give_back_global(self) -> None:
        """Return a server-wide token taken for a step that was then refused."""
        if self._global is not None:
            with self._lock:
                self._global.give_back()

    def take_session(self, session_id: str) -> None:
        """Take one of the session's tokens or raise :class:`RateLimited`."""
        if not self.session_rate:
            return
        now = time.monotonic()
        with self._lock:
            bucket = self._sessions.get(session_id)
            if bucket is None:
                if len(self._sessions) >= PRUNE_AT:
                    self._sessions = {k: b for k, b in self._sessions.items() if not b.full(now)}
                bucket = self._sessions[session_id] = TokenBucket(self.session_rate)
            wait = bucket.take(now)
        if wait:
            raise RateLimited(
                f"This session is over its limit of {self.session_rate:g} steps/s; retry in "
                f"{wait:.3f} s (--session-steps-per-s)",
                wait,
            )

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


def retry_after_header(seconds: float) -> str:
    """The ``Retry-After`` value (whole seconds, at least 1) for a wait of ``seconds``."""
    return str(max(1, math.ceil(seconds)))


def rss_mb() -> float:
    """This process's resident memory in MiB (Linux: now; elsewhere: its peak so far)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def check_memory(max_rss_mb: float | None) -> None:
    """Raise :class:`OutOfMemory` when the process is over ``max_rss_mb`` (None: no ceiling)."""
    if max_rss_mb is None:
        return
    used = rss_mb()
    if used > max_rss_mb:
        raise OutOfMemory(
            f"The server uses {used:.0f} MiB, over its ceiling of {max_rss_mb:g} MiB "
            "(--max-rss-mb): it takes no new session until some close; retry later"
        )
