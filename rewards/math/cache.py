"""The parse caches: ``functools.lru_cache`` for the short answers a training run sees again
and again, and one switch that empties them all. Nothing else is cached here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])
_CACHES: list[Any] = []


def short_input_cache(maxsize: int = 4096, max_len: int = 1000) -> Callable[[_F], _F]:
    """``functools.lru_cache`` for strings of at most ``max_len`` characters (the answers a
    training run sees again and again); longer inputs are computed each time, so the cache
    holds at most ``maxsize * max_len`` characters."""

    def wrap(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        last: list[Any] = [None]  # the last long input and its result: one call reads it twice

        def clear() -> None:
            cached.cache_clear()
            last[0] = None

        _CACHES.append(clear)

        @functools.wraps(fn)
        def call(s: str, *args: Any) -> Any:
            if len(s) <= max_len:
                return cached(s, *args)
            hit = last[0]
            if hit is not None and hit[1] == args and hit[0] == s:
                return hit[2]
            result = fn(s, *args)
            last[0] = (s, args, result)
            return result

        call.cache_clear = clear  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def clear_caches() -> None:
    """Empty every parse cache (benchmarks time cold parses with it)."""
    for clear in _CACHES:
        clear()
