"""Direct mode: the judge's loop over call tests runs in this process, the worker alone in the
sandbox.

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
"""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from typing import Any

from llmgym.envs.coding.judge.program import (
    REPLY_ENVELOPE,
    START,
    CallTests,
    Tail,
    request_line,
    take_reply,
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

EXIT_GRACE_S = 0.5
"""How long a worker with nothing more to answer has to exit before its run is killed."""

_END_EVENTS = {"output_limit": "output", "timeout": "timeout", "memory_limit": "memory"}
"""The loop's event for a run that ended on its own, by the run's status (else ``"ended"``)."""


def grades_directly(sb: Sandbox, problem: Problem, language: str, *, static: bool) -> bool:
    """Whether an answer is graded in direct mode: plain call tests of a Python function, no
    special judge, no static facts asked, on a sandbox that can hold a conversation."""
    return (
        DIRECT_CALLS
        and getattr(sb, "supports_sessions", False)
        and language == "python"
        and problem.kind == "call"
        and problem.judge is None
        and not static
        and not any("script" in t for t in problem.tests)
    )


def grade_directly(sb: Sandbox, problem: Problem, code: str) -> Verdict:
    """The verdict on ``code`` graded in direct mode; a failure of the sandbox itself is a
    ``sandbox_error`` verdict."""
    try:
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
        self.records.append({"k": kind, **fields})

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
        last = self.runs[-1]
        facts = {
            "status": last.status,
            "wall_time_s": round(sum(r.wall_time_s for r in self.runs), 6),
            "cpu_time_s": round(sum(r.cpu_time_s for r in self.runs), 6),
            "peak_memory_mb": round(max(r.peak_memory_mb for r in self.runs), 3),
            "runs": len(self.runs),
        }
        if last.status == "sandbox_error" and not any(r["k"] == "test" for r in self.records):
            return replace(
                failed_verdict("sandbox_error", "python", self.problem,
                               last.detail or "sandbox error"),
                sandbox=facts,
            )  # fmt: skip
        # The runs this side killed are not the program's doing: only a limit the sandbox
        # enforced (or its failure) speaks for the program in the verdict's status and detail.
        summary = self.limit or (last if last.status == "sandbox_error" else None)
        if summary is None:
            summary = replace(last, status="ok", detail="")
        return verdict_from_records(self.problem, self.records, "", summary, facts, "python")

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
        self.buf += data
        cap = self.grading.per_test + REPLY_ENVELOPE
        while self.talking:
            event, self.buf = take_reply(self.buf, cap)
            if event is None:
                return
            self.pass_on(event)

    def on_timer(self, io: SessionIO) -> None:
        self.deadline = None
        if self.talking:
            self.pass_on("timeout")
        else:
            io.kill()  # it had nothing more to answer and would not exit: what it said stands
