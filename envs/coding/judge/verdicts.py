"""Verdicts: what the judge's records say about a program, and what the model is told of it.

The judge's records (one line each on the run's result channel, or written by the loop itself in
direct mode) hold what the candidate returned or printed for each test, never whether that was
right: :func:`verdict_from_records` compares it here with the expected values, which never left
this process, checks the records (one ``start``, tests in order with no index twice, an
``end``) and makes the :class:`Verdict`. :func:`describe` turns a verdict into the feedback a
model sees: facts about visible tests and counts of hidden ones, nothing measured. Running the
judge is :mod:`.job` and :mod:`.direct`; the reward made of a verdict is
:mod:`llmgym.rewards.coding`.
"""

from __future__ import annotations

import builtins
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmgym.envs.coding.judge.program import (
    MSG_CAP,
    NAME_CAP,
    UNKNOWN_ERROR,
    as_dict,
    decode,
    error_kind,
    text_field,
)
from llmgym.envs.coding.problem import Problem, render_call, render_expected
from llmgym.rewards.coding import ExecFacts, compare_output, values_equal
from llmgym.sandbox import ExecResult
from llmgym.sandbox.errors import SandboxError

_TAIL = 2000
_DETAIL_CAP = 1000


@dataclass(frozen=True)
class TestResult:
    """One test's outcome. ``call``, ``expected``, ``got`` and ``error`` details are kept for
    visible tests only; a hidden test tells whether it passed and the kind of failure."""

    index: int
    hidden: bool
    passed: bool
    category: str
    """``passed``, ``wrong_answer``, ``error``, ``timeout`` (the test ran past its own limit),
    ``memory``, ``crashed``, ``output_limit``, ``not_run`` (never started, or stopped when the
    episode's time budget ran out: ``error`` says which)."""
    error: str | None = None
    call: str | None = None
    expected: str | None = None
    got: str | None = None
    time_s: float | None = None
    memory_mb: float | None = None
    fn: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "hidden": self.hidden,
            "passed": self.passed,
            "category": self.category,
            "error": self.error,
        }
        if self.fn is not None:
            out["fn"] = self.fn
        if not self.hidden:
            out.update(call=self.call, expected=self.expected, got=self.got)
        return out


@dataclass(frozen=True)
class Verdict:
    """Everything one grading established."""

    status: str
    """``passed``, ``failed`` (wrong answers), ``runtime_error``, ``timeout``, ``memory_limit``,
    ``output_limit``, ``compile_error``, ``no_code``, ``too_long``, ``sandbox_error``,
    ``protocol_error``."""
    language: str
    tests: tuple[TestResult, ...] = ()
    compile_output: str = ""
    import_error: str = ""
    stdout: str = ""
    stderr: str = ""
    """Tails of what the program printed while it ran the visible tests."""
    detail: str = ""
    time_s: float | None = None
    """Summed wall time of the tests, measured by the judge around each one."""
    cpu_time_s: float | None = None
    """CPU time of the whole run (every run, in direct mode): the sandbox's figure for all
    its processes, reaped or not (the run's cgroup). The compiler's is not in it (C/C++
    compile in a run of their own); the judge's is, where it ran in the sandbox (a few ms)."""
    peak_memory_mb: float | None = None
    """Peak memory of the whole run (the highest of the runs, in direct mode): the sandbox's
    figure, its cgroup's peak, which counts every process, tmpfs files and memfds."""
    sandbox: dict[str, Any] = field(default_factory=dict)
    """The sandbox run's own facts: status, wall/CPU time, cgroup peak memory."""
    static: dict[str, Any] | None = None

    @property
    def hidden_results(self) -> list[TestResult]:
        return [t for t in self.tests if t.hidden]

    @property
    def visible_results(self) -> list[TestResult]:
        return [t for t in self.tests if not t.hidden]

    @property
    def pass_rate(self) -> float:
        hidden = self.hidden_results
        return sum(t.passed for t in hidden) / len(hidden) if hidden else 0.0

    def scored_pass_rate(self, problem: Problem | None) -> float:
        """The pass rate the reward uses: hidden tests, plus the visible ones when the task
        says so (``score_visible``)."""
        if problem is None or not problem.score_visible:
            return self.pass_rate
        return sum(t.passed for t in self.tests) / len(self.tests) if self.tests else 0.0

    @property
    def all_passed(self) -> bool:
        return self.status == "passed"

    @property
    def compile_error(self) -> bool:
        return self.status in ("compile_error", "no_code", "too_long")

    @property
    def bonus_time_s(self) -> float | None:
        """The time the +1 bonus is judged on: the tests' summed wall time or the run's CPU
        time, whichever is more (work spread over processes or threads, or done while the
        module loads, counts in full)."""
        if self.time_s is None:
            return None
        return round(max(self.time_s, self.cpu_time_s or 0.0), 6)

    @property
    def timed_out(self) -> bool:
        return self.status == "timeout" or any(t.category == "timeout" for t in self.tests)

    def facts(self, problem: Problem) -> ExecFacts:
        return ExecFacts(
            pass_rate=self.scored_pass_rate(problem),
            all_passed=self.all_passed,
            compile_error=self.compile_error,
            timeout=self.timed_out,
            peak_memory_mb=self.peak_memory_mb,
            memory_threshold_mb=problem.limits["memory_threshold_mb"],
            time_s=self.bonus_time_s,
            time_limit_s=problem.limits["time_limit_s"],
        )

    def to_info(self, problem: Problem | None = None) -> dict[str, Any]:
        """``info["exec"]``. Measurements (they vary between identical runs) sit under
        ``"measured"``; everything else is deterministic for a deterministic program.

        Hidden tests show no per-test measurement (a program can shape its time or memory
        per test after its input: a channel for that input); the run's totals stay."""
        hidden, visible = self.hidden_results, self.visible_results
        info: dict[str, Any] = {
            "status": self.status,
            "language": self.language,
            "pass_rate": self.scored_pass_rate(problem),
            "passed": sum(t.passed for t in hidden),
            "total": len(hidden),
            "visible_passed": sum(t.passed for t in visible),
            "visible_total": len(visible),
            "tests": [t.to_dict() for t in self.tests],
            "compile_error": self.compile_output,
            "import_error": self.import_error,
            "detail": self.detail,
            "measured": {
                "time_s": self.time_s,
                "cpu_time_s": self.cpu_time_s,
                "bonus_time_s": self.bonus_time_s,
                "peak_memory_mb": self.peak_memory_mb,
                "test_time_s": [None if t.hidden else t.time_s for t in self.tests],
                "test_memory_mb": [None if t.hidden else t.memory_mb for t in self.tests],
                "sandbox": dict(self.sandbox),
            },
        }
        if problem is not None:
            info["limits"] = dict(problem.limits)
        return info


def failed_verdict(status: str, language: str, problem: Problem, detail: str) -> Verdict:
    """A verdict for an answer that never ran (no code, too long, sandbox failure)."""
    tests = tuple(
        TestResult(
            i,
            t["hidden"],
            False,
            "not_run",
            detail if not t["hidden"] else "not run",
            fn=t.get("fn"),
        )  # fmt: skip
        for i, t in enumerate(problem.tests)
    )
    return Verdict(status=status, language=language, tests=tests, detail=detail)


def failure_detail(e: BaseException) -> str:
    """What an infrastructure failure's detail says: the sandbox's own errors in full, anything
    else by its type and place only (its message could hold what a program sent)."""
    if isinstance(e, SandboxError):
        return f"the sandbox failed: {str(e)[:_DETAIL_CAP]}"
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return f"the sandbox failed: {type(e).__name__}{where}"


def read_records(res: ExecResult, nonce: str) -> tuple[list[dict[str, Any]], str]:
    """The judge's records and, if the stream is not what the judge writes, why."""
    records: list[dict[str, Any]] = []
    prefix = nonce.encode() + b"\t"
    for line in res.result_bytes.split(b"\n"):
        if not line:
            continue
        if not line.startswith(prefix):
            return records, "a result line without this run's nonce"
        try:
            rec = json.loads(line[len(prefix) :])
        except (ValueError, RecursionError):
            return records, "a malformed result line"
        if not isinstance(rec, dict):
            return records, "a malformed result record"
        records.append(rec)
    if res.result_truncated:
        return records, "the result channel overflowed"
    return records, ""


_BUILTIN_EXC = {
    name: obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _raised_matches(raised: str, wanted: str) -> bool:
    got, want = _BUILTIN_EXC.get(raised), _BUILTIN_EXC.get(wanted)
    return got is not None and want is not None and issubclass(got, want)


def _error_text(error: Mapping[str, Any], hidden: bool) -> tuple[str, str]:
    """(category, text) for an error record; hidden tests get the category's name only, and
    the type only as a builtin exception's name (else a placeholder: never the program's text).
    Every text field is capped, whoever wrote the record."""
    kind = error_kind(error.get("type"))
    if kind == "timeout":
        return "timeout", "timed out"
    if kind == "budget":  # the episode's time ran out before this test
        return "not_run", "not run: the time budget ran out"
    if kind == "stopped":  # ... or while it ran
        return "not_run", "stopped: the time budget ran out"
    if kind == "output limit":
        return "output_limit", "printed too much output"
    if kind == "exited":
        if hidden:
            return "crashed", "crashed"
        return "crashed", text_field(error.get("msg"), MSG_CAP) or "the program exited"
    if kind == "MemoryError":
        return "memory", "memory limit exceeded (MemoryError)"
    if kind == "value too large":
        return "error", "the returned value is too large"
    if hidden:
        return "error", "raised an exception" if kind == UNKNOWN_ERROR else f"raised {kind}"
    name = text_field(error.get("name"), NAME_CAP) or kind
    msg = text_field(error.get("msg"), MSG_CAP)
    text = f"{name}: {msg}" if msg else name
    tb = text_field(error.get("tb"), _TAIL, tail=True).strip()
    if tb:
        text += "\n" + tb
    return "error", text


def _measure(value: Any) -> float | None:
    """A per-test measurement from a record: a plain finite number of a sane size, else None."""
    if type(value) in (int, float) and 0 <= value < 1e7:
        return float(value)
    return None


def verdict_of_run(problem: Problem, res: ExecResult, nonce: str, language: str) -> Verdict:
    """The verdict on one run of the judge in the sandbox, from its records."""
    records, broken = read_records(res, nonce)
    sandbox_facts = {
        "status": res.status,
        "wall_time_s": res.wall_time_s,
        "cpu_time_s": res.cpu_time_s,
        "peak_memory_mb": res.peak_memory_mb,
    }
    return verdict_from_records(problem, records, broken, res, sandbox_facts, language)


def verdict_from_records(
    problem: Problem,
    records: list[dict[str, Any]],
    broken: str,
    res: ExecResult,
    sandbox_facts: dict[str, Any],
    language: str,
) -> Verdict:
    """The verdict from the judge's records (the sandbox's judge's, or direct mode's own)."""
    if res.status == "sandbox_error" and not records:
        return replace(
            failed_verdict("sandbox_error", language, problem, res.detail or "sandbox error"),
            sandbox=sandbox_facts,
        )
    by_index: dict[int, dict[str, Any]] = {}
    compile_output = import_error = stdout = stderr = ""
    compile_failed = import_failed = import_timeout = False
    static = None
    seen_start = seen_end = False
    hidden_phase = False  # past the visible phase's output: the program may know hidden inputs
    last = -1
    n = len(problem.tests)
    for rec in records:
        kind = rec.get("k")
        if kind == "start":
            if seen_start:
                broken = broken or "two start records"
            seen_start = True
        elif kind == "test":
            i = rec.get("i")
            if type(i) is not int or i <= last or i >= n:
                broken = broken or "test records out of order"
                break
            last = i
            by_index[i] = rec
        elif kind == "compile" and not rec.get("ok"):
            if hidden_phase or by_index:  # a program compiles before its tests, or never
                broken = broken or "a compile report after the tests began"
                continue
            compile_failed = True
            compile_output = text_field(rec.get("error"), _TAIL * 2, tail=True)
        elif kind == "import" and not rec.get("ok"):
            import_failed = True
            err = as_dict(rec.get("error"))
            import_timeout = err.get("type") == "timeout"
            if hidden_phase:
                err = {"type": err.get("type")}
            _, import_error = _error_text(err, hidden=False)
        elif kind == "static" and not hidden_phase:
            static = rec.get("facts") if rec.get("ok") else None
        elif kind == "output" and rec.get("phase") == "visible" and not hidden_phase:
            stdout = text_field(rec.get("stdout"), _TAIL, tail=True)
            stderr = text_field(rec.get("stderr"), _TAIL, tail=True)
            hidden_phase = True
        elif kind == "end":
            seen_end = True
    if not seen_start:
        broken = broken or "the judge reported nothing"
    results: list[TestResult | None] = [None] * n
    for j, plan in enumerate(_plan(problem)):
        results[plan.index] = _test_result(
            problem, plan, by_index.get(j),
            compile_failed=compile_failed, import_failed=import_failed, import_error=import_error,
        )  # fmt: skip
    tests = tuple(r for r in results if r is not None)
    total_time = sum(t.time_s or 0.0 for t in tests)
    out_of_time = any(
        rec.get("ok") is not True
        and error_kind(as_dict(rec.get("error")).get("type")) in ("budget", "stopped")
        for rec in by_index.values()
    )
    if compile_failed:
        status = "compile_error"
    elif import_failed:
        status = "timeout" if import_timeout else "runtime_error"
    elif broken:
        status = "protocol_error"
    elif all(t.passed for t in tests) and seen_end:
        status = "passed"
    elif res.status == "timeout" or out_of_time or any(t.category == "timeout" for t in tests):
        status = "timeout"
    elif any(t.category == "memory" for t in tests) or res.status == "memory_limit":
        status = "memory_limit"
    elif any(t.category == "output_limit" for t in tests) or res.status == "output_limit":
        status = "output_limit"
    elif any(t.category in ("error", "crashed", "not_run") for t in tests):
        status = "runtime_error"
    else:
        status = "failed"
    detail = broken or (res.detail if res.status != "ok" else "")
    ran = bool(tests) and not compile_failed
    return Verdict(
        status=status,
        language=language,
        tests=tests,
        compile_output=compile_output,
        import_error=import_error,
        stdout=stdout,
        stderr=stderr,
        detail=detail[:_DETAIL_CAP],
        time_s=round(total_time, 6) if ran else None,
        # The run's own figures (its cgroup: every process, reaped or not, tmpfs and memfd
        # pages), not what any process of the run says about itself.
        cpu_time_s=_measure(sandbox_facts.get("cpu_time_s")) if ran else None,
        peak_memory_mb=_measure(sandbox_facts.get("peak_memory_mb")) if ran else None,
        sandbox=sandbox_facts,
        static=static,
    )


_UNSHOWN = {"error": None, "call": None, "expected": None, "got": None}


def _hidden_pass(index: int, common: dict[str, Any]) -> TestResult:
    """``TestResult(index, True, True, "passed", **common)``, made without the frozen
    dataclass's ``object.__setattr__`` per field (a task with 1,000 tests makes 1,000)."""
    result = object.__new__(TestResult)
    result.__dict__.update(_UNSHOWN, index=index, hidden=True, passed=True, category="passed",
                           **common)  # fmt: skip
    return result


@dataclass(frozen=True)
class _Plan:
    """How one test is read, made once per problem: its place, its comparison."""

    index: int
    test: Mapping[str, Any]
    visible: bool
    mode: str
    tol: dict[str, float] | None
    plain: bool
    """A hidden call test compared exactly (no special judge, no NaN expected): a returned value
    whose codec form equals the expected one passes without being decoded (equal forms decode
    to equal values)."""


def _plan(problem: Problem) -> list[_Plan]:
    """Each test in the judge's numbering (visible tests first), made once per problem."""
    plans = problem.memo.get("plans")
    if plans is None:
        index_of = {id(t): i for i, t in enumerate(problem.tests)}
        plans = []
        for j, test in enumerate(problem.visible + problem.hidden):
            mode, tol = "", None  # a malformed comparison: its test's result is "malformed"
            try:
                compare = dict(problem.compare, **dict(test.get("compare") or {}))
                tol = {k: float(compare[k]) for k in ("abs_tol", "rel_tol") if k in compare}
                mode = str(compare.get("mode", "exact"))
            except (TypeError, ValueError):
                pass
            visible = j < len(problem.visible)
            plain = (
                not visible and problem.kind == "call" and mode == "exact"
                and problem.judge is None and "script" not in test and "expected" in test
                and not _holds_nan(test["expected"])
            )  # fmt: skip
            plans.append(_Plan(index_of[id(test)], test, visible, mode, tol, plain))
        problem.memo["plans"] = plans
    return plans


def _test_result(
    problem: Problem,
    plan: _Plan,
    rec: Mapping[str, Any] | None,
    *,
    compile_failed: bool,
    import_failed: bool,
    import_error: str,
) -> TestResult:
    index, test, visible = plan.index, plan.test, plan.visible
    hidden = not visible
    fn = test.get("fn")
    shown: dict[str, Any] = _shown(problem, index, test) if visible else {}
    if rec is None:
        why = (
            "compile error" if compile_failed
            else ("the module failed to import" + (f": {import_error}" if visible and import_error else ""))
            if import_failed else "no result: the judge stopped before this test"
        )  # fmt: skip
        return TestResult(index, hidden, False, "not_run", why, fn=fn, **shown)
    common = {"fn": fn, "time_s": _measure(rec.get("wall_s")),
              "memory_mb": _measure(rec.get("mem_mb")), **shown}  # fmt: skip
    try:
        if plan.plain and rec.get("ok") is True and rec.get("value") == test["expected"]:
            return _hidden_pass(index, common)
        return _compared(problem, plan, rec, common)
    except Exception:  # noqa: BLE001 - whatever the program sent, it is not the answer
        return TestResult(index, hidden, False, "error", "malformed result", **common)


def _compared(
    problem: Problem, plan: _Plan, rec: Mapping[str, Any], common: dict[str, Any]
) -> TestResult:
    """A test's result from its record: what :func:`_test_result` does once a record is in."""
    index, test, visible, mode, tol = plan.index, plan.test, plan.visible, plan.mode, plan.tol
    hidden = not visible
    if tol is None:
        raise ValueError("the task's comparison is malformed")
    if problem.kind == "stdio":
        got_text = text_field(rec.get("stdout"), 1 << 62)
        if visible:
            common["got"] = got_text[-_TAIL:]
        if rec.get("ok") is not True:
            err = as_dict(rec.get("error"))
            category, text = _error_text(err, hidden)
            if visible and text_field(rec.get("stderr"), _TAIL, tail=True):
                text += "\nstderr:\n" + text_field(rec.get("stderr"), _TAIL, tail=True)
            return TestResult(index, hidden, False, category, text, **common)
        if problem.judge is not None:
            return TestResult(index, hidden, False, "judging", None, **common)
        ok = compare_output(got_text, test["output"], mode, **tol)
        return TestResult(index, hidden, ok, "passed" if ok else "wrong_answer",
                          None if ok else "wrong answer", **common)  # fmt: skip
    if "script" in test:
        if rec.get("ok") is True:
            return TestResult(index, hidden, True, "passed", **common)
        err = as_dict(rec.get("error"))
        if err.get("type") == "AssertionError":
            msg = text_field(err.get("msg"), MSG_CAP) if visible else ""
            text = "assertion failed" + (f": {msg}" if msg else "")
            return TestResult(index, hidden, False, "wrong_answer", text, **common)
        category, text = _error_text(err, hidden)
        return TestResult(index, hidden, False, category, text, **common)
    if rec.get("ok") is not True:
        err = as_dict(rec.get("error"))
        raised = error_kind(err.get("type"))
        if "raises" in test and _raised_matches(raised, test["raises"]):
            if visible:
                common["got"] = f"raises {text_field(err.get('name'), NAME_CAP) or raised}"
            return TestResult(index, hidden, True, "passed", **common)
        category, text = _error_text(err, hidden)
        return TestResult(index, hidden, False, category, text, **common)
    raw = rec.get("value")
    if plan.plain and raw == test["expected"]:
        return TestResult(index, hidden, True, "passed", **common)
    try:
        value = decode(raw)
    except Exception:  # noqa: BLE001 - not the codec's form: not an answer
        return TestResult(index, hidden, False, "error", "malformed return value", **common)
    if visible:
        common["got"] = _short(value)
    if "raises" in test:
        return TestResult(index, hidden, False, "wrong_answer",
                          f"expected {test['raises']} to be raised", **common)  # fmt: skip
    if problem.judge is not None:
        return TestResult(index, hidden, False, "judging", None, **common)
    ok = any(
        values_equal(value, accepted, mode, **tol) for accepted in _accepted(problem, index, test)
    )
    return TestResult(index, hidden, ok, "passed" if ok else "wrong_answer",
                      None if ok else "wrong answer", **common)  # fmt: skip


def _shown(problem: Problem, index: int, test: Mapping[str, Any]) -> dict[str, Any]:
    """How a visible test is shown (its call and expected value), made once per problem."""
    memo = problem.memo.setdefault("shown", {})
    shown = memo.get(index)
    if shown is None:
        if problem.kind == "stdio":
            shown = {"call": test["input"][-_TAIL:], "expected": test["output"][-_TAIL:]}
        elif "script" in test:
            shown = {"call": test["script"][-_TAIL:], "expected": "the assertions hold"}
        else:
            shown = {"call": render_call(test), "expected": render_expected(test)}
        memo[index] = shown
    return dict(shown)


def _accepted(problem: Problem, index: int, test: Mapping[str, Any]) -> list[Any]:
    """The decoded values a call test accepts (``expected``, then ``also``), decoded once per
    problem; a malformed one is left out (it can match nothing)."""
    memo = problem.memo.setdefault("accepted", {})
    values = memo.get(index)
    if values is None:
        values = []
        for raw in [test["expected"], *test.get("also", [])]:
            try:
                values.append(decode(raw))
            except (TypeError, ValueError, RecursionError):
                pass
        memo[index] = values
    return values


def _holds_nan(raw: Any) -> bool:
    if isinstance(raw, list):
        return any(_holds_nan(x) for x in raw if isinstance(x, (list, dict)))
    if isinstance(raw, dict):
        return raw.get("$float") == "nan" or any(_holds_nan(x) for x in raw.values())
    return False


def _short(value: Any, limit: int = 400) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - an int past repr's digit limit, nesting past the stack
        return "<unprintable>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(verdict: Verdict, problem: Problem) -> str:
    """The feedback on a verdict: only facts about visible tests and counts of hidden ones,
    nothing measured (so the same program always gets the same words)."""
    status = verdict.status
    hidden = verdict.hidden_results
    passed = sum(t.passed for t in hidden)
    count = f"{passed} of {len(hidden)} hidden tests passed."
    if status == "passed":
        return f"All tests passed ({len(hidden)} hidden)."
    if status in ("no_code", "too_long"):
        return verdict.detail
    if status == "compile_error":
        return "Compilation failed:\n" + verdict.compile_output.strip()[-2000:]
    if status == "sandbox_error":
        return "The sandbox failed to run the program (not your fault); it was not graded."
    if status == "protocol_error":
        return f"The test results were lost or tampered with ({verdict.detail}). {count}"
    lines = []
    if verdict.import_error:
        lines.append("The program failed while loading:\n" + verdict.import_error.strip())
    else:
        failing = [t for t in verdict.visible_results if not t.passed]
        if failing:
            t = failing[0]
            if problem.kind == "stdio":
                lines.append(f"Visible test {t.index + 1} failed ({t.error or t.category}).")
                lines.append(f"Input:\n{t.call}")
                lines.append(f"Expected output:\n{t.expected}")
                if t.got is not None:
                    lines.append(f"Your output:\n{t.got}")
            else:
                lines.append(f"Visible test failed: {t.call}")
                lines.append(f"Expected: {t.expected}")
                if t.got is not None:
                    lines.append(f"Got: {t.got}")
                if t.error and t.error != "wrong answer":
                    lines.append(f"Error: {t.error}")
        timeouts = sum(t.category == "timeout" for t in verdict.tests)
        if timeouts:
            lines.append(
                f"{timeouts} test(s) timed out (limit {problem.limits['timeout_s']:g} s per test)."
            )
        out_of_time = sum(t.category == "not_run" and "time budget" in (t.error or "")
                          for t in verdict.tests)  # fmt: skip
        if out_of_time:
            lines.append(f"{out_of_time} test(s) not run or stopped: the time budget ran out.")
        if status == "memory_limit":
            lines.append(f"The memory limit ({problem.limits['memory_mb']:g} MB) was exceeded.")
        if status == "output_limit":
            lines.append("The program printed too much output.")
    if verdict.stderr.strip() and problem.kind != "stdio":
        lines.append("stderr (visible tests):\n" + verdict.stderr.strip()[-1000:])
    kinds = Counter(_hidden_failure(t) for t in hidden if not t.passed)
    if kinds:  # how they failed, never which (hidden errors are builtin exception names only)
        lines.append(
            count[:-1] + "; failed: " + ", ".join(f"{k} ({n})" for k, n in kinds.items()) + "."
        )
    else:
        lines.append(count)
    return "\n".join(lines)


def _hidden_failure(test: Any) -> str:
    """How a hidden test failed, in words a model can act on: ``wrong answer``, ``raised
    IndexError``, ``assertion failed``, ``timed out``..."""
    if test.category == "wrong_answer":
        return "assertion failed" if (test.error or "").startswith("assertion") else "wrong answer"
    return str(test.error or test.category.replace("_", " "))
