"""The env threads of ``llmgym serve``: env calls leave the event loop, results come back in batches.

Env calls (reset, step, a sandboxed grade) block, so they never run on the event loop. A
``ThreadPoolExecutor`` behind ``run_in_executor`` does that job but pays, for every call, a
``concurrent.futures.Future`` chained to an asyncio one and one wake-up of the loop (a write
to its self-pipe, a pass through ``epoll``). Under load, with many calls finishing at once,
those wake-ups are most of the cost of a cheap call. Here a finished call puts its result in a
shared inbox and wakes the loop only when no wake-up is already on its way; the loop then hands
every result in the inbox to its awaiting coroutine in one pass.

Threads start on demand (an idle one is reused) up to ``workers``; :meth:`EnvThreads.shutdown`
cancels queued calls and lets running ones end. This is not a general executor: it serves
coroutines on one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Item = tuple[Callable[[], Any], "asyncio.Future[Any]"]


class EnvThreads:
    """At most ``workers`` threads running env calls for one event loop's coroutines."""

    def __init__(self, workers: int, name: str = "llmgym-env"):
        if workers < 1:
            raise ValueError(f"Expects workers >= 1, actual: {workers}")
        self.workers = workers
        self.name = name
        self._calls: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._inbox: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on one of the threads; its result (or exception) here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the env threads are shut down")
            if self._loop is None:
                self._loop = loop
            elif self._loop is not loop:
                raise RuntimeError("EnvThreads serves one event loop")
            if self._idle > 0:
                self._idle -= 1  # that thread takes this call
            elif len(self._threads) < self.workers:
                self._start_thread()
        self._calls.put((fn, future))
        return await future

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, future = item
            ok, value = False, None
            if not future.cancelled():  # its caller gave up while it waited: skip it
                try:
                    ok, value = True, fn()
                except BaseException as exc:  # handed to the caller, as an executor would
                    ok, value = False, exc
            with self._lock:
                if not future.cancelled():
                    self._inbox.append((future, ok, value))
                wake = self._inbox and not self._wake_pending
                if wake:
                    self._wake_pending = True
                self._idle += 1
            if wake:
                self._wake()

    def _wake(self) -> None:
        loop = self._loop
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop closed: nobody awaits these results any more
            with self._lock:
                self._inbox.clear()
                self._wake_pending = False

    def _deliver(self) -> None:
        """On the loop: every finished call's result to its future, in one pass."""
        with self._lock:
            done = list(self._inbox)
            self._inbox.clear()
            self._wake_pending = False
        for future, ok, value in done:
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                try:
                    future.set_exception(value)
                except TypeError:  # StopIteration cannot travel through a future
                    future.set_exception(RuntimeError(f"the env call raised {value!r}"))

    def shutdown(self, timeout_s: float) -> bool:
        """Cancel the queued calls, stop the threads; True if all ended within ``timeout_s`` (all
        threads together).

        A call already running finishes on its thread (Python cannot stop a thread); one that
        never returns leaves its daemon thread behind, and False says so.
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        while True:  # calls not started yet are dropped; their awaiting coroutines are cancelled
            try:
                item = self._calls.get_nowait()
            except queue.Empty:
                break
            if item is not None and self._loop is not None:
                future = item[1]
                try:
                    self._loop.call_soon_threadsafe(future.cancel)
                except RuntimeError:
                    pass
        for _ in threads:
            self._calls.put(None)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)
