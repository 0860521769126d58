"""Direct mode: the judge's loop runs in this process, no judge process in the sandbox run.

For plain call tests of a Python function (no script tests, no special judge, no static facts)
on a sandbox that can hold a session (:class:`llmgym.sandbox.base.RunSession`: the local and
docker backends), each sandbox run's only process is the worker
(:func:`program.serve_calls`): it compiles and imports the candidate, then answers call requests
read from stdin on the result channel. The loop is the one the judge runs inside the sandbox
(:class:`program.CallTests`), driven here by the session's events: it sends the requests, times
each test, kills the run at a test's timeout, and has another run started for the tests left
after a timeout, a crash or anything sent out of turn. It writes the records the judge would, so
:mod:`.verdicts` makes the verdict as for any run. One process fewer per run; the same verdicts.

What the worker sends is the candidate's to forge: an answer counts only as the value returned
for the test the loop waits on; the timing and the kills are this side's, CPU time and peak
memory the sandbox's (the run's cgroup).

For a Python program's stdin/stdout tests (:class:`DirectPrograms`) the run's process is the
runner (:class:`program.ProgramRunner`: the judge's code, not the candidate's), which forks a
fresh process per test, times and reaps it and writes its record; this side sends the inputs
(the hidden ones once the visible tests' records are in), keeps the episode's budget and ends a
run whose runner a program stopped or killed. The judge's process, and a hop through it for
every test, are gone; each test still runs in a process of its own.
"""

from __future__ import annotations

import math
import signal
import struct
import time
from dataclasses import replace
from typing import Any

from llmgym.envs.coding.judge.program import (
    REPLY_ENVELOPE,
    START,
    TAIL,
    CallTests,
    Tail,
    after_timeout_s,
    budget_failure,
    output_record,
    request_line,
    result_record,
    take_replies,
    text_field,
)
from llmgym.envs.coding.judge.shipping import (
    PRINT_CAP,
    SLACK_S,
    encoded_tests,
    judge_program,
    payload_of,
    stdin_part,
)
from llmgym.envs.coding.judge.verdicts import (
    Verdict,
    failed_verdict,
    failure_detail,
    verdict_from_records,
)
from llmgym.envs.coding.problem import Problem
from llmgym.sandbox import ExecResult, Limits, Sandbox
from llmgym.sandbox.base import RunSession, SessionIO, make_request

DIRECT_CALLS = True
"""Grade plain call tests in direct mode where the sandbox supports it (see
:func:`grades_directly`); tests turn it off to compare both ways."""

DIRECT_PROGRAMS = True
"""Grade stdin/stdout Python programs in direct mode where the sandbox supports it."""

EXIT_GRACE_S = 0.5
"""How long a worker with nothing more to answer has to exit before its run is killed."""

_END_EVENTS = {"output_limit": "output", "timeout": "timeout", "memory_limit": "memory"}
"""The loop's event for a run that ended on its own, by the run's status (else ``"ended"``)."""


def grades_directly(sb: Sandbox, problem: Problem, language: str, *, static: bool) -> bool:
    """Whether an answer is graded in direct mode: plain call tests of a Python function, or a
    Python program's stdin/stdout tests, with no special judge and no static facts asked, on a
    sandbox that can hold a conversation."""
    if not (
        getattr(sb, "supports_sessions", False)
        and language == "python"
        and problem.judge is None
        and not static
    ):
        return False
    if problem.kind == "stdio":
        return DIRECT_PROGRAMS
    return DIRECT_CALLS and not any("script" in t for t in problem.tests)


def grade_directly(sb: Sandbox, problem: Problem, code: str) -> Verdict:
    """The verdict on ``code`` graded in direct mode; a failure of the sandbox itself is a
    ``sandbox_error`` verdict."""
    try:
        if problem.kind == "stdio":
            return DirectPrograms(sb, problem, code).grade()
        return DirectGrading(sb, problem, code).grade()
    except Exception as e:  # noqa: BLE001 - an infrastructure failure, reported as such
        return failed_verdict("sandbox_error", "python", problem, failure_detail(e))


def _requests(problem: Problem) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[bytes]]:
    """The visible and hidden tests as the loop takes them, and their request lines: made once
    per problem (a GRPO group grades it many times)."""
    made = problem.memo.get("call_requests")
    if made is None:
        visible = [payload_of(t, "call") for t in problem.visible]
        hidden = [payload_of(t, "call") for t in problem.hidden]
        lines = [request_line(i, t) for i, t in enumerate(visible + hidden)]
        made = problem.memo["call_requests"] = (visible, hidden, lines)
    return made


def verdict_of_runs(
    problem: Problem,
    records: list[dict[str, Any]],
    runs: list[ExecResult],
    limit: ExecResult | None,
) -> Verdict:
    """The verdict on the records direct mode wrote over ``runs``; ``limit``: the first run
    the sandbox itself stopped (a limit), if any."""
    last = runs[-1]
    facts = {
        "status": last.status,
        "wall_time_s": round(sum(r.wall_time_s for r in runs), 6),
        "cpu_time_s": round(sum(r.cpu_time_s for r in runs), 6),
        "peak_memory_mb": round(max(r.peak_memory_mb for r in runs), 3),
        "runs": len(runs),
    }
    if last.status == "sandbox_error" and not any(r["k"] == "test" for r in records):
        return replace(
            failed_verdict("sandbox_error", "python", problem, last.detail or "sandbox error"),
            sandbox=facts,
        )
    # The runs this side killed are not the program's doing: only a limit the sandbox
    # enforced (or its failure) speaks for the program in the verdict's status and detail.
    summary = limit or (last if last.status == "sandbox_error" else None)
    if summary is None:
        summary = replace(last, status="ok", detail="")
    return verdict_from_records(problem, records, "", summary, facts, "python")


class DirectGrading:
    """One answer graded in direct mode: the loop over call tests, and the sandbox runs that
    hold its workers (the loop's :class:`program.WorkerLink`)."""

    def __init__(self, sb: Sandbox, problem: Problem, code: str) -> None:
        self.sb, self.problem, self.code = sb, problem, code
        limits = problem.limits
        timeout = float(limits["timeout_s"])
        self.budget_s = float(limits.get("budget_s") or (timeout * 4 + 2))
        self.memory_mb = int(limits["memory_mb"])
        self.per_test = int(encoded_tests(problem)["per_test"])
        visible, self.hidden, lines = _requests(problem)
        self.records: list[dict[str, Any]] = [
            {"k": "start", "mode": "call", "visible": len(visible)}
        ]
        self.loop = CallTests(
            self, self.emit, timeout_s=timeout, budget_s=self.budget_s, lines=lines
        )
        self.steps = self.loop.run(visible)
        self.wanted: Any = None  # what the loop waits for: START, a deadline, or None when done
        self.run: DirectRun | None = None  # the run whose output is not all counted yet
        self.ended: ExecResult | None = None  # the run the loop was told ended
        self.out, self.err = Tail(), Tail()  # what the ended runs printed in the phase at hand
        self.runs: list[ExecResult] = []
        self.limit: ExecResult | None = None  # the first limit the sandbox itself enforced

    def emit(self, kind: str, **fields: Any) -> None:
        fields["k"] = kind  # a dict of its own: made by the call
        self.records.append(fields)

    def advance(self, event: Any) -> None:
        """Hand the loop its next event; keep what it waits for next."""
        try:
            self.wanted = self.steps.send(event)
        except StopIteration:
            self.wanted = None

    # -- the runs -------------------------------------------------------------------------------

    def grade(self) -> Verdict:
        n = len(self.problem.tests)
        job = {"mode": "calls", "source": "solution.py", "memory_mb": self.memory_mb,
               "last": n - 1}  # fmt: skip
        boot, judge_files = judge_program(self.sb)
        self.advance(None)
        while self.wanted == START:
            session = DirectRun(self)
            left = self.budget_s if not self.runs else self.loop.budget_end - time.monotonic()
            request = make_request(
                boot,
                files={"solution.py": self.code, **judge_files},
                stdin=stdin_part(job),
                limits=Limits(
                    wall_time_s=max(0.0, left) + SLACK_S,
                    memory_mb=self.memory_mb + 256,
                    max_output_bytes=max(PRINT_CAP, n * (self.per_test + (16 << 10))),
                ),
            )
            res = self.sb.execute(request, session=session)
            self.runs.append(res)
            if res.status == "sandbox_error" and not session.heard:
                break  # the sandbox failed, not the program: say so rather than retry
            self.run_ended(session, res)
            if not session.killed_here and res.status not in ("ok", "runtime_error"):
                self.limit = self.limit or res  # a limit the sandbox itself enforced
        self.records.append({"k": "end"})
        return self.verdict()

    def run_ended(self, session: DirectRun, res: ExecResult) -> None:
        """A run is over: count what it printed; if the loop still waited on it, tell it how the
        run ended."""
        self.out.add(res.stdout_bytes[session.mark[0] :])
        self.err.add(res.stderr_bytes[session.mark[1] :])
        if self.run is session:
            self.run = None
        if session.talking:
            session.talking = False
            self.ended = res
            self.advance(_END_EVENTS.get(res.status, "ended"))

    def verdict(self) -> Verdict:
        return verdict_of_runs(self.problem, self.records, self.runs, self.limit)

    # -- the worker, as the loop sees it (program.WorkerLink) -------------------------------------

    def send(self, data: bytes) -> None:
        assert self.run is not None and self.run.io is not None, "requests go to a live run"
        self.run.io.send(data)

    def kill(self) -> None:
        run = self.run
        if run is not None and run.talking and run.io is not None:
            run.talking, run.killed_here, run.deadline = False, True, None
            run.io.kill()

    def how_it_ended(self) -> str:
        res = self.ended
        assert res is not None, "asked once the loop was told its run ended"
        if res.signal is None:
            return f"exited with code {res.exit_code}"
        try:
            name = signal.Signals(res.signal).name
        except ValueError:
            name = f"signal {res.signal}"
        return f"was killed by {name}"

    def let_exit(self) -> None:
        run = self.run
        if run is not None and run.talking and run.io is not None:
            run.talking = False
            run.io.close_input()  # the worker reads EOF and exits; if not, it is killed
            run.deadline = time.monotonic() + EXIT_GRACE_S

    def printed(self) -> tuple[bytes, bytes, int]:
        out, err = self.out, self.err
        run = self.run
        if run is not None and run.io is not None:  # the live run, or one killed just now
            now_out, now_err = run.io.outputs()
            out.add(now_out[run.mark[0] :])
            err.add(now_err[run.mark[1] :])
            run.mark = (len(now_out), len(now_err))
        self.out, self.err = Tail(), Tail()
        return out.data, err.data, out.total + err.total

    def hidden_tests(self) -> list[dict[str, Any]]:
        return list(self.hidden)


class DirectRun(RunSession):
    """One sandbox run of direct mode: what its worker writes, passed on to the loop."""

    def __init__(self, grading: DirectGrading) -> None:
        self.grading = grading
        self.io: SessionIO | None = None
        self.talking = True  # the loop waits on this run (it has not killed or let go of it)
        self.killed_here = False
        self.heard = False
        self.buf = b""
        self.mark = (0, 0)  # its stdout and stderr bytes already in an output record

    def pass_on(self, event: Any) -> None:
        grading = self.grading
        grading.advance(event)
        if self.talking:  # the loop waits for this run's next event until the deadline it gave
            assert isinstance(grading.wanted, float), "a run the loop waits on is not let go"
            self.deadline = grading.wanted

    def on_start(self, io: SessionIO) -> None:
        self.io = io
        self.grading.run = self
        self.pass_on("started")

    def on_result(self, data: bytes, io: SessionIO) -> None:
        self.heard = True
        if not self.talking:
            return
        events, self.buf = take_replies(self.buf + data, self.grading.per_test + REPLY_ENVELOPE)
        for event in events:
            if not self.talking:
                return
            self.pass_on(event)

    def on_timer(self, io: SessionIO) -> None:
        self.deadline = None
        if self.talking:
            self.pass_on("timeout")
        else:
            io.kill()  # it had nothing more to answer and would not exit: what it said stands


# --- stdin/stdout tests -------------------------------------------------------------------------

BACKSTOP_S = 0.5
"""How long past a stdin/stdout test's timeout this side waits for its record before it ends
the run: the runner in the run kills a test's process at its timeout; this side only catches a
runner that a program stopped."""

_PROGRAM_FIELDS = ("ok", "error", "why", "stdout", "stderr", "wall_s", "cpu_s", "mem_mb")
"""What a test record of the runner may hold (it is this side's program, not the candidate's:
still, nothing else is passed on)."""


def _program_inputs(problem: Problem) -> list[bytes]:
    """Each test's input as a part of the runner's stdin (its length, then its bytes), in the
    judge's numbering (visible tests first): made once per problem."""
    made = problem.memo.get("program_inputs")
    if made is None:
        made = []
        for test in problem.visible + problem.hidden:
            data = test["input"].encode("utf-8", "surrogatepass")
            made.append(struct.pack("<Q", len(data)) + data)
        problem.memo["program_inputs"] = made
    return made


class DirectPrograms(RunSession):
    """One stdin/stdout answer graded in direct mode: each sandbox run's only long-lived process
    is the runner (:class:`program.ProgramRunner`), which forks a fresh process per test,
    times it, kills it at its timeout and writes its record; the judge's process, and the hop
    through it for every test, are gone.

    This side sends the visible tests' inputs with the job and the hidden ones once the visible
    tests' records are in (then closes the run's stdin), keeps the episode's budget (one wall
    limit after a timeout: :func:`program.after_timeout_s`), and ends the run when a record is
    overdue (a program that stopped or killed its runner: that test fails, and another run takes
    the tests left) or the budget is spent."""

    def __init__(self, sb: Sandbox, problem: Problem, code: str) -> None:
        self.sb, self.problem, self.code = sb, problem, code
        limits = problem.limits
        self.timeout = float(limits["timeout_s"])
        self.budget_s = float(limits.get("budget_s") or (self.timeout * 4 + 2))
        self.memory_mb = int(limits["memory_mb"])
        self.per_test = int(encoded_tests(problem)["per_test"])
        self.inputs = _program_inputs(problem)
        self.n, self.n_visible = len(self.inputs), len(problem.visible)
        self.records: list[dict[str, Any]] = [
            {"k": "start", "mode": "stdio", "visible": self.n_visible}
        ]
        self.next = 0  # the test whose record is awaited
        # Inputs go in up to here: the visible ones, then all (all at once when none is visible).
        self.phase_end = self.n_visible or self.n
        self.visible_done = False  # the visible tests' output record is written
        self.budget_end = math.inf  # set when the first run starts
        self.runs: list[ExecResult] = []
        self.limit: ExecResult | None = None
        self.stopped = False  # the program does not compile: nothing runs
        # the run at hand
        self.io: SessionIO | None = None
        self.talking = False  # this side waits on the run (it has not killed or let go of it)
        self.ready = False  # its runner compiled the program and takes inputs
        self.killed_here = False
        self.heard = False
        self.buf = b""
        self.clock = 0.0  # when the awaited test's time began, as this side sees it

    def emit(self, kind: str, **fields: Any) -> None:
        fields["k"] = kind
        self.records.append(fields)

    def emit_test(self, fields: dict[str, Any]) -> None:
        """The awaited test's record; a timeout leaves the episode :func:`after_timeout_s`."""
        i = self.next
        if i == self.n_visible and not self.visible_done:  # no visible test at all
            self.end_visible()
        self.emit("test", **result_record(i, i >= self.n_visible, fields))
        if fields.get("why") == "timeout":
            self.budget_end = min(self.budget_end, time.monotonic() + after_timeout_s(self.timeout))
        self.next = i + 1
        if i + 1 == self.n_visible:
            self.end_visible()

    def end_visible(self) -> None:
        """The visible tests are done: their output record, then the hidden inputs go in."""
        self.visible_done = True
        self.emit("output", **output_record("visible", b"", b"", 0))
        if self.phase_end < self.n:
            self.phase_end = self.n
            if self.io is not None and self.talking and self.ready:
                self.io.send(b"".join(self.inputs[self.next : self.n]))

    # -- the runs -----------------------------------------------------------------------------

    def grade(self) -> Verdict:
        boot, judge_files = judge_program(self.sb)
        while self.next < self.n and not self.stopped:
            if self.runs and time.monotonic() >= self.budget_end:
                break  # the budget is spent: the tests left are not run
            job = {"mode": "programs", "source": "solution.py", "timeout_s": self.timeout,
                   "memory_mb": self.memory_mb, "output_cap": self.per_test,
                   "visible": self.n_visible, "first": self.next}  # fmt: skip
            left = self.budget_s if not self.runs else self.budget_end - time.monotonic()
            request = make_request(
                boot,
                files={"solution.py": self.code, **judge_files},
                stdin=stdin_part(job) + b"".join(self.inputs[self.next : self.phase_end]),
                limits=Limits(
                    wall_time_s=max(0.0, left) + SLACK_S,
                    memory_mb=self.memory_mb + 256,
                    max_output_bytes=self.n * (6 * self.per_test + (64 << 10)) + (1 << 20),
                ),
            )
            self.talking, self.ready, self.killed_here, self.heard = True, False, False, False
            self.buf = b""
            res = self.sb.execute(request, session=self)
            self.io = None
            self.runs.append(res)
            if res.status == "sandbox_error" and not self.heard:
                break  # the sandbox failed, not the program: say so rather than retry
            if self.talking:  # it ended on its own with a test awaited: that test fails
                self.talking = False
                self.emit_test(_lost(res))
            if not self.killed_here and res.status not in ("ok", "runtime_error"):
                self.limit = self.limit or res  # a limit the sandbox itself enforced
        if not self.stopped:
            while self.next < self.n:
                self.emit_test(budget_failure())
            self.emit("output", **output_record("hidden", b"", b"", 0))
        self.records.append({"k": "end"})
        return verdict_of_runs(self.problem, self.records, self.runs, self.limit)

    # -- the session ----------------------------------------------------------------------------

    def on_start(self, io: SessionIO) -> None:
        self.io = io
        self.clock = now = time.monotonic()
        if not self.runs:
            self.budget_end = now + self.budget_s
        self.deadline = min(now + self.timeout + BACKSTOP_S, self.budget_end)

    def on_result(self, data: bytes, io: SessionIO) -> None:
        self.heard = True
        if not self.talking:
            return
        cap = 6 * (self.per_test + TAIL) + REPLY_ENVELOPE
        events, self.buf = take_replies(self.buf + data, cap)
        for event in events:
            if not self.talking:
                return
            self.take(event, io)

    def take(self, event: Any, io: SessionIO) -> None:
        """The runner's next record."""
        now = time.monotonic()
        kind = event.get("k") if type(event) is dict else None
        if kind == "ready" and not self.ready:
            self.ready, self.clock = True, now
        elif kind == "compile" and not self.ready and not self.runs:  # the first run's
            self.emit("compile", ok=False, error=text_field(event.get("error"), TAIL, tail=True))
            self.stopped = True
            self.let_go(io)
            return
        elif kind == "test" and self.ready and event.get("i") == self.next:
            self.emit_test({k: event[k] for k in _PROGRAM_FIELDS if k in event})
            self.clock = now
            if self.next >= self.n:
                self.let_go(io)
                return
        else:  # not what the runner writes: its test fails, and another run takes the rest
            self.end_run(io)
            self.emit_test({"ok": False, "error": {"type": "protocol", "msg": "unexpected record"},
                            "why": "protocol"})  # fmt: skip
            return
        self.deadline = min(self.clock + self.timeout + BACKSTOP_S, self.budget_end)

    def on_timer(self, io: SessionIO) -> None:
        self.deadline = None
        if not self.talking:
            io.kill()  # it had nothing more to run and would not exit
            return
        now = time.monotonic()
        self.end_run(io)
        if now >= self.budget_end and self.clock + self.timeout + BACKSTOP_S > self.budget_end:
            self.emit_test(budget_failure(stopped=self.ready))
        elif not self.ready:
            self.emit_test({"ok": False, "why": "timeout", "error": {
                "type": "timeout", "msg": "the program took too long to compile"}})  # fmt: skip
        else:  # its runner was stopped, or is stuck: the test ran out of time
            self.emit_test({"ok": False, "error": {"type": "timeout"}, "why": "timeout",
                            "wall_s": round(now - self.clock, 6)})  # fmt: skip

    def end_run(self, io: SessionIO) -> None:
        self.talking, self.killed_here, self.deadline = False, True, None
        io.kill()

    def let_go(self, io: SessionIO) -> None:
        """Nothing more to run: the runner reads the end of its stdin and exits (or is killed)."""
        self.talking = False
        io.close_input()
        self.deadline = time.monotonic() + EXIT_GRACE_S


def _lost(res: ExecResult) -> dict[str, Any]:
    """The awaited test's fields when its run ended before the runner wrote its record."""
    if res.status == "memory_limit":
        return {"ok": False, "error": {"type": "MemoryError", "msg": "memory limit exceeded"},
                "why": "memory"}  # fmt: skip
    if res.status == "output_limit":
        return {"ok": False, "error": {"type": "output limit"}, "why": "output"}
    if res.status == "timeout":
        return {"ok": False, "error": {"type": "timeout"}, "why": "timeout"}
    return {
        "ok": False,
        "error": {"type": "exited", "msg": "the program was lost"},
        "why": "exited",
    }
