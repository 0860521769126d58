"""Talking with a running program: ``Sandbox.execute(request, session=...)``."""

from __future__ import annotations

import time

import pytest

from llmgym.sandbox import InvalidRunRequest, RunSession, Sandbox, SessionIO, make_request

ECHO = """
import os, sys
for line in sys.stdin:
    os.write(3, b"got " + line.encode())
print("bye")
"""


class Echo(RunSession):
    """Sends one line, then, on the first answer, three more and the end of the input."""

    def __init__(self) -> None:
        self.got = b""
        self.answered = False
        self.printed_before_more = b""

    def on_start(self, io: SessionIO) -> None:
        io.send(b"a\n")

    def on_result(self, data: bytes, io: SessionIO) -> None:
        self.got += data
        if not self.answered:
            self.answered = True
            self.printed_before_more = io.outputs()[0]
            io.send(b"b\n" * 3)
            io.close_input()


def test_a_session_writes_stdin_as_the_program_answers(sandbox: Sandbox):
    assert sandbox.supports_sessions
    session = Echo()
    res = sandbox.execute(make_request(ECHO, stdin=b"first\n"), session=session)
    assert res.status == "ok", res.detail
    assert session.got == b"got first\ngot a\n" + b"got b\n" * 3
    assert res.result_bytes == session.got and res.stdout == "bye\n"
    assert session.printed_before_more == b""


class KillAt(RunSession):
    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self.fired = 0

    def on_start(self, io: SessionIO) -> None:
        self.deadline = time.monotonic() + self.after_s

    def on_timer(self, io: SessionIO) -> None:
        self.fired += 1
        self.deadline = None
        io.kill()


def test_the_timer_fires_once_and_can_end_the_run(sandbox: Sandbox):
    session = KillAt(0.3)
    start = time.monotonic()
    res = sandbox.execute(make_request(ECHO), session=session)  # stdin stays open: it waits
    took = time.monotonic() - start
    assert session.fired == 1 and 0.3 <= took < 5
    assert res.status == "runtime_error" and res.signal == 9


class Printer(RunSession):
    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def on_result(self, data: bytes, io: SessionIO) -> None:
        self.seen.append(io.outputs()[0])
        io.close_input()


def test_outputs_are_what_was_printed_before_the_answer(local_sandbox: Sandbox):
    code = "import os, sys\nprint('before', flush=True)\nos.write(3, b'x')\nsys.stdin.read()\nprint('after')\n"
    session = Printer()
    res = local_sandbox.execute(make_request(code), session=session)
    assert session.seen == [b"before\n"]
    assert res.stdout == "before\nafter\n"


class Broken(RunSession):
    def on_result(self, data: bytes, io: SessionIO) -> None:
        raise ValueError("the session broke")


def test_a_hook_that_raises_ends_the_run_and_is_reported(local_sandbox: Sandbox):
    code = "import os, time\nos.write(3, b'x')\ntime.sleep(30)\n"
    start = time.monotonic()
    res = local_sandbox.execute(make_request(code), session=Broken())
    assert time.monotonic() - start < 10
    assert res.status == "sandbox_error" and "the session broke" in res.detail


def test_a_program_that_never_reads_its_stdin_does_not_block_the_session(local_sandbox: Sandbox):
    class Flood(RunSession):
        def on_start(self, io: SessionIO) -> None:
            io.send(b"y" * (4 << 20))  # far more than a pipe holds
            io.close_input()

    res = local_sandbox.execute(make_request("print('done')\n"), session=Flood())
    assert res.status == "ok" and res.stdout == "done\n"


def test_sessions_are_checked(local_sandbox: Sandbox):
    with pytest.raises(InvalidRunRequest, match="RunSession"):
        local_sandbox.execute(make_request("pass\n"), session=object())  # type: ignore[arg-type]

    class NoTalk(Sandbox):
        backend = "quiet"

        def _execute(self, request):  # pragma: no cover - never reached
            raise AssertionError

    with NoTalk() as quiet, pytest.raises(InvalidRunRequest, match="cannot talk"):
        quiet.execute(make_request("pass\n"), session=RunSession())
