"""What stops an evaluation: the exceptions that say why a value cannot be computed, and the
per-thread deadline that in-process arithmetic checks as it goes (:func:`time_limit`).

No arithmetic here: :mod:`~llmgym.rewards.math.exact`, :mod:`~llmgym.rewards.math.numeric`
and :mod:`~llmgym.rewards.math.modular` raise these and call :func:`tick`.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator


class NotExact(Exception):
    """The value is not a rational (or Gaussian rational) we can compute exactly."""


class TooBig(Exception):
    """The value is too large to compute."""


class Undefined(Exception):
    """Division by zero, log of zero, and the like."""


class NotScalar(Exception):
    """The node is not a number (a set, an interval, infinity...)."""


class HasSymbols(Exception):
    """The node has free variables and no values were given."""


class OutOfTime(TooBig):
    """The deadline of :func:`time_limit` passed during evaluation. A kind of :class:`TooBig`:
    every caller then stops evaluating and compares what is left by structure."""


_work = threading.local()
_ticks = 0
_expired_somewhere = False


@contextlib.contextmanager
def time_limit(deadline: float) -> Iterator[None]:
    """Bound the in-process evaluation of this thread: past ``deadline`` (a
    ``time.monotonic()`` value) exact and numeric evaluation raise :class:`OutOfTime`."""
    saved = getattr(_work, "deadline", math.inf), getattr(_work, "expired", False)
    _work.deadline, _work.expired = deadline, False
    try:
        yield
    finally:
        _work.deadline, _work.expired = saved


def tick() -> None:
    """Count a step of evaluation; every 256 steps, look at the clock."""
    global _ticks, _expired_somewhere
    _ticks += 1
    if _expired_somewhere and getattr(_work, "expired", False):
        raise OutOfTime
    if not _ticks & 255:
        check_time()


def check_time() -> None:
    """Raise :class:`OutOfTime` if this thread's deadline has passed (for long single steps)."""
    global _expired_somewhere
    if time.monotonic() > getattr(_work, "deadline", math.inf):
        _work.expired = _expired_somewhere = True
        raise OutOfTime
