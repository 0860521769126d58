"""The env threads of ``llmgym serve``: results and errors reach their callers, no more than
``workers`` calls run at once, a caller that gives up is not answered, and shutdown is bounded."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from llmgym.serve.threads import EnvThreads


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.mark.timeout(60)
def test_each_result_and_error_reaches_its_own_caller() -> None:
    async def main() -> None:
        threads = EnvThreads(8)

        def call(i: int):  # type: ignore[no-untyped-def]
            time.sleep(0.001 * (i % 3))  # finish out of order
            if i % 7 == 0:
                raise ValueError(f"call {i}")
            return i * i

        async def one(i: int) -> object:
            try:
                return await threads.run(lambda: call(i))
            except ValueError as e:
                return str(e)

        got = await asyncio.gather(*(one(i) for i in range(500)))
        assert got == [f"call {i}" if i % 7 == 0 else i * i for i in range(500)]
        assert threads.shutdown(5)

    run(main())


@pytest.mark.timeout(60)
def test_no_more_than_workers_at_once_and_threads_start_on_demand() -> None:
    async def main() -> None:
        threads = EnvThreads(3)
        lock, running, most = threading.Lock(), [0], [0]

        def call() -> None:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.01)
            with lock:
                running[0] -= 1

        for _ in range(5):  # one at a time: one thread does it all
            await threads.run(call)
        assert len(threads._threads) == 1
        await asyncio.gather(*(threads.run(call) for _ in range(30)))
        assert most[0] == 3 and len(threads._threads) == 3
        assert threads.shutdown(5)

    run(main())


@pytest.mark.timeout(60)
def test_a_caller_that_gives_up_is_not_answered_and_the_rest_go_on() -> None:
    async def main() -> None:
        threads = EnvThreads(1)
        started, release, ran = threading.Event(), threading.Event(), []

        def slow() -> str:
            started.set()
            release.wait(10)
            return "slow"

        first = asyncio.ensure_future(threads.run(slow))
        queued = asyncio.ensure_future(threads.run(lambda: ran.append("queued")))
        await asyncio.to_thread(started.wait, 10)
        queued.cancel()  # gave up while waiting for the one thread: never runs
        first.cancel()  # gave up while running: the call ends on its thread, unanswered
        release.set()
        assert await threads.run(lambda: "after") == "after"
        assert first.cancelled() and queued.cancelled() and ran == []
        assert threads.shutdown(5)

    run(main())


@pytest.mark.timeout(60)
def test_stop_iteration_and_base_exceptions_do_not_strand_other_callers() -> None:
    async def main() -> None:
        threads = EnvThreads(2)

        def stop() -> None:
            raise StopIteration

        def interrupt() -> None:
            raise KeyboardInterrupt

        results = await asyncio.gather(
            threads.run(stop), threads.run(lambda: 1), return_exceptions=True
        )
        assert isinstance(results[0], RuntimeError) and results[1] == 1
        with pytest.raises(KeyboardInterrupt):
            await threads.run(interrupt)
        assert await threads.run(lambda: 2) == 2
        assert threads.shutdown(5)

    run(main())


@pytest.mark.timeout(60)
def test_shutdown_cancels_queued_calls_and_is_bounded_by_a_stuck_one() -> None:
    async def main() -> None:
        threads = EnvThreads(1)
        started, never = threading.Event(), threading.Event()

        def stuck() -> None:
            started.set()
            never.wait(30)

        running = asyncio.ensure_future(threads.run(stuck))
        queued = asyncio.ensure_future(threads.run(lambda: "never runs"))
        await asyncio.to_thread(started.wait, 10)
        start = time.monotonic()
        assert threads.shutdown(0.3) is False  # the stuck call's thread is left behind
        assert time.monotonic() - start < 5
        await asyncio.sleep(0.05)
        assert queued.cancelled()
        with pytest.raises(RuntimeError, match="shut down"):
            await threads.run(lambda: None)
        never.set()
        running.cancel()

    run(main())


def test_bad_arguments_and_a_second_loop_are_refused() -> None:
    with pytest.raises(ValueError, match="workers"):
        EnvThreads(0)
    threads = EnvThreads(1)
    assert run(threads.run(lambda: 5)) == 5
    with pytest.raises(RuntimeError, match="one event loop"):
        run(threads.run(lambda: 6))  # asyncio.run made a new loop
    assert threads.shutdown(5)
