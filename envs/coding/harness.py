"""Grading a candidate program: one sandbox run of the judge, verdicts decided in the parent.

:func:`run_tests` ships the judge program (:mod:`llmgym.envs.coding.runner`), the candidate's
source and the tests' *inputs* into one sandbox run; the judge reports, over the result
channel (fd 3), what the candidate returned or printed for each test. The expected values
never leave this process: comparisons happen here, on plain decoded data, with the task's
comparator (:func:`llmgym.rewards.coding.values_equal` / ``compare_output``) or, for tasks
with several right answers, a special judge run in a sandbox of its own.

The records are checked: the per-run nonce, one ``start``, test records in order with no
index twice, and an ``end``; anything else fails the tests it touches. Time is the judge's
wall clock around each test (outside the candidate's process), CPU time and peak memory are
the kernel's figures for the candidate's processes.

Plain call tests of a Python function take *direct mode* where the sandbox can hold a session
(:class:`llmgym.sandbox.base.RunSession`: the local and docker backends): the run's only process
is the worker (:func:`runner.serve_calls`), and J's loop runs here (:class:`_DirectJudge`),
writing the records J would. One process fewer per run; the same verdicts.
"""

from __future__ import annotations

import atexit
import base64
import builtins
import hashlib
import inspect
import json
import marshal
import secrets
import signal
import struct
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmgym.envs.coding.problem import Problem, render_call, render_expected
from llmgym.envs.coding.runner import (
    MSG_CAP,
    NAME_CAP,
    UNKNOWN_ERROR,
    call_request,
    decode,
    error_kind,
    reply_fields,
)
from llmgym.rewards.coding import ExecFacts, compare_output, static_facts, values_equal
from llmgym.sandbox import LANGUAGES as SANDBOX_LANGUAGES
from llmgym.sandbox import ExecResult, Limits, Sandbox, get_sandbox
from llmgym.sandbox.base import RunSession, SessionIO, make_request
from llmgym.sandbox.errors import SandboxError

RUNNER_PATH = Path(__file__).with_name("runner.py")
COMPILE_TIMEOUT_S = 30.0
COMPILE_MEMORY_MB = 768
_SLACK_S = 5.0
_MIN_ANSWER_BYTES = 64 << 10
_PRINT_CAP = 8 << 20
"""What a call-based program may print in all before it is stopped (its prints are not graded)."""
_TAIL = 2000
_DETAIL_CAP = 1000


@lru_cache(maxsize=1)
def runner_program() -> str:
    """The judge's source as shipped: runner.py plus :func:`static_facts` (stdlib only)."""
    text = RUNNER_PATH.read_text(encoding="utf-8")
    marker = '\nif __name__ == "__main__":\n'
    head, sep, tail = text.rpartition(marker)
    return head + "\n\n" + inspect.getsource(static_facts) + "\n" + sep + tail


_BOOT = """\
import sys
if sys.implementation.cache_tag == {tag!r}:
    import marshal
    with open("judge.bin", "rb") as f:
        code = marshal.load(f)
else:
    with open("judge.py", "rb") as f:
        code = compile(f.read(), "judge.py", "exec")
del sys
exec(code)
"""


@lru_cache(maxsize=1)
def runner_files() -> tuple[str, dict[str, bytes]]:
    """The sandbox program and files that start the judge: a few lines that load it
    precompiled (compiling its source would cost more than a whole grading run) when the
    sandbox's Python is this one, and compile the shipped source otherwise."""
    source = runner_program()
    code = compile(source, "judge.py", "exec", dont_inherit=True, optimize=2)
    boot = _BOOT.format(tag=sys.implementation.cache_tag)
    return boot, {"judge.py": source.encode(), "judge.bin": marshal.dumps(code)}


@lru_cache(maxsize=1)
def preloaded_judge() -> str:
    """The judge's source as a local zygote preloads it: :func:`runner_program`, warmed up."""
    return runner_program() + "\nwarm_up()\n"


@lru_cache(maxsize=1)
def judge_module() -> str:
    """The name the judge is preloaded under in a local sandbox's zygote; it ends with a
    digest of the judge's source, so a sandbox preloaded with another version never matches."""
    digest = hashlib.sha256(preloaded_judge().encode()).hexdigest()[:16]
    return f"_llmgym_judge_{digest}"


def judge_program(sb: Sandbox) -> tuple[str, dict[str, bytes]]:
    """The program and files that start the judge in ``sb``: a call into the judge its zygote
    preloaded (see :func:`make_sandbox`), else :func:`runner_files`."""
    name = judge_module()
    if name in getattr(sb, "preloaded", ()):
        return f"import {name}\n{name}.main()\n", {}
    return runner_files()


# --- one sandbox per process ------------------------------------------------------------------

_SANDBOXES: dict[str, Sandbox] = {}
_LOCK = threading.Lock()


JUDGE_PRELOAD = ("ctypes", "json", "marshal", "resource", "select", "signal", "socket", "struct",
                 "traceback", "types")  # fmt: skip
"""Modules the judge imports, pre-imported by the local zygote so that runs find them warm.

Not ``subprocess`` (only compiling C/C++ needs it, and that takes far longer than importing
it): it imports ``threading``, whose after-fork hook costs every fork of the zygote's copies
(each run's, each test's) about a hundred copy-on-write page faults."""


def make_sandbox(backend: str = "local") -> Sandbox:
    """A new sandbox of ``backend`` set up for the judge: the local zygote pre-imports its
    modules and preloads the judge itself, so a run neither ships nor loads its code."""
    options: dict[str, Any] = {}
    if backend == "local":
        from llmgym.sandbox.local import DEFAULT_PRELOAD

        options["preload"] = tuple(dict.fromkeys((*DEFAULT_PRELOAD, *JUDGE_PRELOAD)))
        options["preload_sources"] = {judge_module(): preloaded_judge()}
    return get_sandbox(backend, **options)


def shared_sandbox(backend: str = "local") -> Sandbox:
    """A process-wide sandbox of ``backend`` (starting one costs a zygote); closed at exit."""
    with _LOCK:
        sb = _SANDBOXES.get(backend)
        if sb is None:
            sb = make_sandbox(backend)
            _SANDBOXES[backend] = sb
            if len(_SANDBOXES) == 1:
                atexit.register(close_shared_sandboxes)
        return sb


def close_shared_sandboxes() -> None:
    """Close the process-wide sandboxes (done at exit; the next use starts new ones)."""
    with _LOCK:
        for sb in _SANDBOXES.values():
            try:
                sb.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
        _SANDBOXES.clear()


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestResult:
    """One test's outcome. ``call``, ``expected``, ``got`` and ``error`` details are kept for
    visible tests only; a hidden test tells whether it passed and the kind of failure."""

    index: int
    hidden: bool
    passed: bool
    category: str
    """``passed``, ``wrong_answer``, ``error``, ``timeout``, ``memory``, ``crashed``,
    ``output_limit``, ``not_run``."""
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
    compile in a run of their own); the judge J's is, where J ran (a few ms)."""
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


# --- running -------------------------------------------------------------------------------------


def _part(obj: Any) -> bytes:
    data = json.dumps(obj, ensure_ascii=True).encode()
    return struct.pack("<Q", len(data)) + data


def _payload(test: Mapping[str, Any], kind: str) -> dict[str, Any]:
    if kind == "stdio":
        return {"input": test["input"]}
    if "script" in test:
        return {"script": test["script"], "names": dict(test.get("names") or {}),
                "calls": int(test.get("calls", 4))}  # fmt: skip
    return {"fn": test["fn"], "args": test["args"], "kwargs": test.get("kwargs") or {}}


@dataclass(frozen=True)
class Submission:
    """One program to grade: what :func:`run_tests_many` takes."""

    code: str
    problem: Problem
    language: str = "python"
    static: bool = False


def _request(
    sub: Submission, nonce: str, judge: tuple[str, dict[str, bytes]], binary: bytes | None = None
) -> dict[str, Any]:
    """The sandbox ``run()`` arguments that grade one submission; ``judge``: the program and
    files that start the judge (:func:`judge_program`); ``binary``: a C/C++ program as its
    build run made it (:func:`_build_request`)."""
    problem, language = sub.problem, sub.language
    limits = problem.limits
    timeout = float(limits["timeout_s"])
    budget = float(limits.get("budget_s") or (timeout * 4 + 2))
    memory_mb = int(limits["memory_mb"])
    tests = _encoded_tests(problem)
    per_test = tests["per_test"]
    job: dict[str, Any] = {
        "nonce": nonce,
        "mode": problem.kind,
        "timeout_s": timeout,
        "budget_s": budget,
        "memory_mb": memory_mb,
        "output_cap": per_test if problem.kind == "stdio" else _PRINT_CAP,
        "max_reply_bytes": per_test,
        "static": sub.static,
    }
    if language != "python":
        lang = SANDBOX_LANGUAGES[language]
        files: dict[str, str | bytes] = {_SHIPPED_BINARY: binary or b""}
        job.update(source=lang.source, binary=_SHIPPED_BINARY, argv=list(lang.run))
    else:
        files = {"solution.py": sub.code}
        job["source"] = "solution.py"
    boot, judge_files = judge
    # The job as JSON with the (cached) visible tests spliced in: {..., "visible": [...]}
    head = json.dumps(job, ensure_ascii=True).encode()
    body = head[:-1] + b', "visible": ' + tests["visible"] + b"}"
    stdin = struct.pack("<Q", len(body)) + body + tests["hidden_part"]
    run_limits = Limits(
        wall_time_s=budget + _SLACK_S,
        memory_mb=memory_mb + 256,
        max_output_bytes=len(problem.tests) * (per_test + (16 << 10)) + (1 << 20),
    )
    return {"code": boot, "files": {**files, **judge_files}, "stdin": stdin,
            "language": "python", "limits": run_limits}  # fmt: skip


_SHIPPED_BINARY = "program.bin"
_MAX_BINARY_BYTES = 64 << 20


def _build_request(
    sub: Submission, nonce: str, judge: tuple[str, dict[str, bytes]]
) -> dict[str, Any]:
    """The sandbox ``run()`` arguments that compile a C/C++ submission in a run of its own:
    the compiler's memory and CPU are not the program's (g++ alone peaks near 180 MB and
    takes seconds), so the tests' run gets only the binary."""
    lang = SANDBOX_LANGUAGES[sub.language]
    job = {"nonce": nonce, "mode": "build", "source": lang.source, "output": lang.run[0],
           "compile_argv": list(lang.compile or ()), "compile_timeout_s": COMPILE_TIMEOUT_S}  # fmt: skip
    boot, judge_files = judge
    return {
        "code": boot,
        "files": {lang.source: sub.code, **judge_files},
        "stdin": _part(job),
        "language": "python",
        "limits": Limits(
            wall_time_s=COMPILE_TIMEOUT_S + _SLACK_S,
            memory_mb=COMPILE_MEMORY_MB,
            max_output_bytes=_MAX_BINARY_BYTES * 2,
        ),
    }


def _encoded_tests(problem: Problem) -> dict[str, Any]:
    """The tests' inputs as the judge reads them, and what one test may send back (4x its
    expected answer, at least 64 KiB: the result channel holds that for every test, so an
    oversized answer fails its own test only). Made once per problem."""
    cached = problem.memo.get("encoded")
    if cached is None:
        sizes = [
            len(t["output"].encode("utf-8", "surrogatepass"))
            if "output" in t
            else len(json.dumps(t.get("expected")))
            for t in problem.tests
        ]
        visible = [_payload(t, problem.kind) for t in problem.visible]
        cached = problem.memo["encoded"] = {
            "per_test": max(_MIN_ANSWER_BYTES, 4 * max(sizes, default=0)),
            "visible": json.dumps(visible, ensure_ascii=True).encode(),
            "hidden_part": _part({"hidden": [_payload(t, problem.kind) for t in problem.hidden]}),
        }
    return cached


def _finish(sb: Sandbox, sub: Submission, res: ExecResult, nonce: str) -> Verdict:
    verdict = _judge(sub.problem, res, nonce, sub.language)
    if sub.problem.judge is not None and verdict.status not in ("compile_error", "sandbox_error"):
        verdict = _special_judge(sb, sub.problem, verdict, res, nonce)
    return verdict


def run_tests(
    code: str,
    problem: Problem,
    *,
    language: str = "python",
    sandbox: Sandbox | None = None,
    static: bool = False,
) -> Verdict:
    """Grade ``code`` against every test of ``problem`` in one sandbox run (plus one for a
    special judge); never raises on anything the program does. ``static`` also reports the
    program's signatures, imports and calls, read before it runs."""
    return run_tests_many([Submission(code, problem, language, static)], sandbox=sandbox)[0]


def run_tests_many(
    submissions: Sequence[Submission], *, sandbox: Sandbox | None = None
) -> list[Verdict]:
    """Grade many programs, at most the sandbox's ``max_concurrency`` at once, order kept."""
    if not submissions:
        return []
    sb = sandbox or shared_sandbox()
    direct = [i for i, sub in enumerate(submissions) if _direct(sub, sb)]
    if len(direct) == len(submissions):
        if len(direct) == 1:
            return [_grade_direct(sb, submissions[0])]
        workers = min(sb.max_concurrency, len(direct))
        with ThreadPoolExecutor(workers, thread_name_prefix="llmgym-judge") as pool:
            return list(pool.map(lambda sub: _grade_direct(sb, sub), submissions))
    if direct:  # a mix: each kind its own way, in the given order
        chosen = set(direct)
        rest = [i for i in range(len(submissions)) if i not in chosen]
        out: list[Verdict | None] = [None] * len(submissions)
        for idx, verdict in zip(
            direct, run_tests_many([submissions[i] for i in direct], sandbox=sb), strict=True
        ):
            out[idx] = verdict
        for idx, verdict in zip(
            rest, _run_in_judge([submissions[i] for i in rest], sb), strict=True
        ):
            out[idx] = verdict
        return [v for v in out if v is not None]
    return _run_in_judge(submissions, sb)


def _grade_direct(sb: Sandbox, sub: Submission) -> Verdict:
    try:
        return _DirectJudge(sb, sub.problem, sub.code).grade()
    except Exception as e:  # noqa: BLE001 - an infrastructure failure, reported as such
        return failed_verdict("sandbox_error", sub.language, sub.problem, _failure(e))


def _run_in_judge(submissions: Sequence[Submission], sb: Sandbox) -> list[Verdict]:
    """Grade with the judge J inside each sandbox run (every kind of task, every backend);
    C/C++ programs are compiled first, each in a run of its own."""
    nonces = [secrets.token_hex(16) for _ in submissions]
    out: list[Verdict | None] = [None] * len(submissions)
    try:
        judge = judge_program(sb)
        binaries = _build_natives(submissions, sb, judge, out)
        todo = [i for i in range(len(submissions)) if out[i] is None]
        requests = [_request(submissions[i], nonces[i], judge, binaries.get(i)) for i in todo]
        results = sb.run_many(requests) if len(requests) > 1 else [sb.run(**r) for r in requests]
    except Exception as e:  # noqa: BLE001 - an infrastructure failure, reported as such
        return [
            failed_verdict("sandbox_error", s.language, s.problem, _failure(e)) for s in submissions
        ]
    for i, res in zip(todo, results, strict=True):
        out[i] = _finish(sb, submissions[i], res, nonces[i])
    return [v for v in out if v is not None]


def _build_natives(
    submissions: Sequence[Submission],
    sb: Sandbox,
    judge: tuple[str, dict[str, bytes]],
    verdicts: list[Verdict | None],
) -> dict[int, bytes]:
    """Compile the C/C++ submissions (one run each): their binaries by index; a submission
    that does not compile gets its verdict in ``verdicts`` instead."""
    native = [i for i, sub in enumerate(submissions) if sub.language != "python"]
    if not native:
        return {}
    nonces = {i: secrets.token_hex(16) for i in native}
    requests = [_build_request(submissions[i], nonces[i], judge) for i in native]
    results = sb.run_many(requests) if len(requests) > 1 else [sb.run(**requests[0])]
    binaries: dict[int, bytes] = {}
    for i, res in zip(native, results, strict=True):
        sub = submissions[i]
        records, broken = _records(res, nonces[i])
        data = next((r.get("data") for r in records if r.get("k") == "binary"), None)
        if isinstance(data, str) and not broken:
            try:
                binaries[i] = base64.b64decode(data, validate=True)
                continue
            except ValueError:
                broken = "a malformed program from the compile step"
        if not broken and not any(r.get("k") == "compile" for r in records):
            broken = "no program came back from the compile step"
        facts = {"status": res.status, "wall_time_s": res.wall_time_s,
                 "cpu_time_s": res.cpu_time_s, "peak_memory_mb": res.peak_memory_mb}  # fmt: skip
        verdicts[i] = _verdict(sub.problem, records, broken, res, facts, sub.language)
    return binaries


def _failure(e: BaseException) -> str:
    """What an infrastructure failure's detail says: the sandbox's own errors in full, anything
    else by its type and place only (its message could hold what a program sent)."""
    if isinstance(e, SandboxError):
        return f"the sandbox failed: {str(e)[:_DETAIL_CAP]}"
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return f"the sandbox failed: {type(e).__name__}{where}"


def _records(res: ExecResult, nonce: str) -> tuple[list[dict[str, Any]], str]:
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


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _raised_matches(raised: str, wanted: str) -> bool:
    got, want = _BUILTIN_EXC.get(raised), _BUILTIN_EXC.get(wanted)
    return got is not None and want is not None and issubclass(got, want)


def _field(value: Any, cap: int, *, tail: bool = False) -> str:
    """A text field of a record, capped; anything but a string counts as empty."""
    if type(value) is not str:
        return ""
    return value[-cap:] if tail else value[:cap]


def _error_text(error: Mapping[str, Any], hidden: bool) -> tuple[str, str]:
    """(category, text) for an error record; hidden tests get the category's name only, and
    the type only as a builtin exception's name (else a placeholder: never the program's text).
    Every text field is capped, whoever wrote the record."""
    kind = error_kind(error.get("type"))
    if kind in ("timeout", "budget"):
        text = "timed out" if kind == "timeout" else "not run: the time budget ran out"
        return "timeout", text
    if kind == "output limit":
        return "output_limit", "printed too much output"
    if kind == "exited":
        if hidden:
            return "crashed", "crashed"
        return "crashed", _field(error.get("msg"), MSG_CAP) or "the program exited"
    if kind == "MemoryError":
        return "memory", "memory limit exceeded (MemoryError)"
    if kind == "value too large":
        return "error", "the returned value is too large"
    if hidden:
        return "error", "raised an exception" if kind == UNKNOWN_ERROR else f"raised {kind}"
    name = _field(error.get("name"), NAME_CAP) or kind
    msg = _field(error.get("msg"), MSG_CAP)
    text = f"{name}: {msg}" if msg else name
    tb = _field(error.get("tb"), _TAIL, tail=True).strip()
    if tb:
        text += "\n" + tb
    return "error", text


def _measure(value: Any) -> float | None:
    """A per-test measurement from a record: a plain finite number of a sane size, else None."""
    if type(value) in (int, float) and 0 <= value < 1e7:
        return float(value)
    return None


def _judge(problem: Problem, res: ExecResult, nonce: str, language: str) -> Verdict:
    records, broken = _records(res, nonce)
    sandbox_facts = {
        "status": res.status,
        "wall_time_s": res.wall_time_s,
        "cpu_time_s": res.cpu_time_s,
        "peak_memory_mb": res.peak_memory_mb,
    }
    return _verdict(problem, records, broken, res, sandbox_facts, language)


def _verdict(
    problem: Problem,
    records: list[dict[str, Any]],
    broken: str,
    res: ExecResult,
    sandbox_facts: dict[str, Any],
    language: str,
) -> Verdict:
    """The verdict from the judge's records (J's, or this process's own in direct mode)."""
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
            compile_output = _field(rec.get("error"), _TAIL * 2, tail=True)
        elif kind == "import" and not rec.get("ok"):
            import_failed = True
            err = _as_dict(rec.get("error"))
            import_timeout = err.get("type") == "timeout"
            if hidden_phase:
                err = {"type": err.get("type")}
            _, import_error = _error_text(err, hidden=False)
        elif kind == "static" and not hidden_phase:
            static = rec.get("facts") if rec.get("ok") else None
        elif kind == "output" and rec.get("phase") == "visible" and not hidden_phase:
            stdout = _field(rec.get("stdout"), _TAIL, tail=True)
            stderr = _field(rec.get("stderr"), _TAIL, tail=True)
            hidden_phase = True
        elif kind == "end":
            seen_end = True
    if not seen_start:
        broken = broken or "the judge reported nothing"
    visible_count = len(problem.visible)
    ordered = problem.visible + problem.hidden  # the judge's numbering
    index_of = {id(t): i for i, t in enumerate(problem.tests)}
    results: list[TestResult | None] = [None] * n
    for j, test in enumerate(ordered):
        results[index_of[id(test)]] = _test_result(
            problem, test, index_of[id(test)], by_index.get(j), j < visible_count,
            compile_failed=compile_failed, import_failed=import_failed, import_error=import_error,
        )  # fmt: skip
    tests = tuple(r for r in results if r is not None)
    total_time = sum(t.time_s or 0.0 for t in tests)
    if compile_failed:
        status = "compile_error"
    elif import_failed:
        status = "timeout" if import_timeout else "runtime_error"
    elif broken:
        status = "protocol_error"
    elif all(t.passed for t in tests) and seen_end:
        status = "passed"
    elif res.status == "timeout" or any(t.category == "timeout" for t in tests):
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


def _test_result(
    problem: Problem,
    test: Mapping[str, Any],
    index: int,
    rec: Mapping[str, Any] | None,
    visible: bool,
    *,
    compile_failed: bool,
    import_failed: bool,
    import_error: str,
) -> TestResult:
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
        return _compared(problem, test, index, rec, hidden, visible, common)
    except Exception:  # noqa: BLE001 - whatever the program sent, it is not the answer
        return TestResult(index, hidden, False, "error", "malformed result", **common)


def _compared(
    problem: Problem,
    test: Mapping[str, Any],
    index: int,
    rec: Mapping[str, Any],
    hidden: bool,
    visible: bool,
    common: dict[str, Any],
) -> TestResult:
    """A test's result from its record: what :func:`_test_result` does once a record is in."""
    compare = dict(problem.compare, **dict(test.get("compare") or {}))
    mode = str(compare.get("mode", "exact"))
    tol = {k: float(compare[k]) for k in ("abs_tol", "rel_tol") if k in compare}
    if problem.kind == "stdio":
        got_text = _field(rec.get("stdout"), 1 << 62)
        if visible:
            common["got"] = got_text[-_TAIL:]
        if rec.get("ok") is not True:
            err = _as_dict(rec.get("error"))
            category, text = _error_text(err, hidden)
            if visible and _field(rec.get("stderr"), _TAIL, tail=True):
                text += "\nstderr:\n" + _field(rec.get("stderr"), _TAIL, tail=True)
            return TestResult(index, hidden, False, category, text, **common)
        if problem.judge is not None:
            return TestResult(index, hidden, False, "judging", None, **common)
        ok = compare_output(got_text, test["output"], mode, **tol)
        return TestResult(index, hidden, ok, "passed" if ok else "wrong_answer",
                          None if ok else "wrong answer", **common)  # fmt: skip
    if "script" in test:
        if rec.get("ok") is True:
            return TestResult(index, hidden, True, "passed", **common)
        err = _as_dict(rec.get("error"))
        if err.get("type") == "AssertionError":
            msg = _field(err.get("msg"), MSG_CAP) if visible else ""
            text = "assertion failed" + (f": {msg}" if msg else "")
            return TestResult(index, hidden, False, "wrong_answer", text, **common)
        category, text = _error_text(err, hidden)
        return TestResult(index, hidden, False, category, text, **common)
    if rec.get("ok") is not True:
        err = _as_dict(rec.get("error"))
        raised = error_kind(err.get("type"))
        if "raises" in test and _raised_matches(raised, test["raises"]):
            if visible:
                common["got"] = f"raises {_field(err.get('name'), NAME_CAP) or raised}"
            return TestResult(index, hidden, True, "passed", **common)
        category, text = _error_text(err, hidden)
        return TestResult(index, hidden, False, category, text, **common)
    raw = rec.get("value")
    if (
        hidden
        and mode == "exact"
        and problem.judge is None
        and "expected" in test
        and _plainly_equal(raw, test, problem, index)
    ):
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


def _plainly_equal(raw: Any, test: Mapping[str, Any], problem: Problem, index: int) -> bool:
    """Whether a returned value, still in the codec's JSON form, is the expected one exactly:
    then ``values_equal(decode(raw), expected, "exact")`` holds too (equal forms decode to equal
    values), unless the expected value holds a NaN (which equals nothing)."""
    if raw != test["expected"]:
        return False
    memo = problem.memo.setdefault("has_nan", {})
    has_nan = memo.get(index)
    if has_nan is None:
        has_nan = memo[index] = _holds_nan(test["expected"])
    return not has_nan


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


def _special_judge(
    sb: Sandbox, problem: Problem, verdict: Verdict, res: ExecResult, nonce: str
) -> Verdict:
    """Ask the task's judge, in a sandbox run of its own, about every test still ``judging``."""
    records, _ = _records(res, nonce)
    by_index = {r["i"]: r for r in records if r.get("k") == "test" and isinstance(r.get("i"), int)}
    ordered = problem.visible + problem.hidden
    judge_index = {id(t): j for j, t in enumerate(ordered)}
    items = []
    for result, test in zip(verdict.tests, problem.tests, strict=True):
        if result.category != "judging":
            continue
        rec = by_index.get(judge_index[id(test)], {})
        if problem.kind == "stdio":
            items.append({"i": result.index, "input": test["input"],
                          "output": str(rec.get("stdout", "")), "expected": test["output"]})  # fmt: skip
        else:
            items.append({"i": result.index, "args": test["args"], "value": rec.get("value"),
                          "expected": test.get("expected")})  # fmt: skip
    verdicts: dict[int, bool] = {}
    detail = ""
    if items:
        judge_nonce = secrets.token_hex(16)
        job = {"nonce": judge_nonce, "mode": "judge", "judge": problem.judge,
               "kind": problem.kind, "items": items}  # fmt: skip
        try:
            boot, judge_files = judge_program(sb)
            jres = sb.run(code=boot, files=judge_files, stdin=_part(job), language="python",
                          limits=Limits(wall_time_s=30, memory_mb=512, max_output_bytes=1 << 20))  # fmt: skip
            jrecords, broken = _records(jres, judge_nonce)
        except Exception as e:  # noqa: BLE001
            jrecords, broken = [], f"the judge's sandbox failed: {e!r}"
        for r in jrecords:
            if r.get("k") == "verdict" and isinstance(r.get("i"), int):
                verdicts[r["i"]] = bool(r.get("ok"))
            elif r.get("k") == "judge_error":
                detail = f"special judge error: {r.get('error')}"
        detail = detail or broken
    tests = []
    for t in verdict.tests:
        if t.category == "judging":
            ok = verdicts.get(t.index, False)
            t = replace(t, passed=ok, category="passed" if ok else "wrong_answer",
                        error=None if ok else "wrong answer (special judge)")  # fmt: skip
        tests.append(t)
    status = verdict.status
    if status in ("failed", "passed", "runtime_error", "timeout", "memory_limit", "output_limit"):
        if all(t.passed for t in tests):
            status = "passed"
        elif status == "passed":
            status = "failed"
    return replace(verdict, tests=tuple(tests), status=status, detail=verdict.detail or detail)


def select_tests(problem: Problem, functions: Sequence[str]) -> Problem:
    """The same problem restricted to the tests of some functions (subtask grading)."""
    wanted = set(functions)
    tests = tuple(t for t in problem.tests if t.get("fn") in wanted)
    return replace(problem, tests=tests)


# --- direct mode: the judge's loop in this process ----------------------------------------------

DIRECT_CALLS = True
"""Grade plain call tests in direct mode where the sandbox supports it (see :func:`_direct`)."""

_LOADING = "loading"
_RUNNING = "running"
_DONE = "done"
_EXIT_GRACE_S = 0.5


def _direct(sub: Submission, sb: Sandbox) -> bool:
    """Whether ``sub`` is graded in direct mode: plain call tests of a Python function, no
    special judge, no static facts asked, on a sandbox that can hold a conversation."""
    problem = sub.problem
    return (
        DIRECT_CALLS
        and getattr(sb, "supports_sessions", False)
        and sub.language == "python"
        and problem.kind == "call"
        and problem.judge is None
        and not sub.static
        and not any("script" in t for t in problem.tests)
    )


class _DirectJudge:
    """J's loop for plain call tests, run in this process instead of inside the sandbox.

    Each sandbox run's only process is the worker W (:func:`runner.serve_calls`): it compiles
    and imports the candidate, then answers call requests read from stdin on the result
    channel. This side sends the visible tests' requests with the job (they are public), the
    hidden ones once every visible test is answered and the output printed so far is read;
    it times each test from the previous answer (or from W's report that the module loaded)
    to its own answer, kills the run when a test passes its timeout, and starts another run
    for the tests left after a timeout, a crash or anything W sends out of turn. It writes
    the records J would, so the verdict is made by the same code (:func:`_verdict`).

    What W sends is the candidate's to forge (it runs in W's process): an answer counts only
    as the value returned for the test this side is waiting for, and the timing, the kills,
    CPU time (the run's cgroup) and peak memory (W's ``wait4``) are this side's or the
    kernel's.
    """

    def __init__(self, sb: Sandbox, problem: Problem, code: str) -> None:
        self.sb, self.problem = sb, problem
        limits = problem.limits
        self.timeout = float(limits["timeout_s"])
        self.budget_s = float(limits.get("budget_s") or (self.timeout * 4 + 2))
        self.memory_mb = int(limits["memory_mb"])
        tests = _encoded_tests(problem)
        self.max_reply = int(tests["per_test"])
        requests = problem.memo.get("direct_requests")
        if requests is None:  # made once per problem (a GRPO group grades it many times)
            requests = problem.memo["direct_requests"] = [
                json.dumps(call_request(i, _payload(t, "call")), ensure_ascii=True).encode()
                for i, t in enumerate(problem.visible + problem.hidden)
            ]
        self.requests: list[bytes] = requests
        self.n, self.n_visible = len(self.requests), len(problem.visible)
        self.code = code
        self.records: list[dict[str, Any]] = [
            {"k": "start", "mode": "call", "visible": self.n_visible}
        ]
        self.next = 0  # the next test to answer
        self.visible_done = False  # the visible phase's output record is written
        self.stopped = False  # the candidate cannot load: no more runs
        self.budget_end = 0.0
        self.vis_out = self.vis_err = b""  # the visible phase's output in runs that ended in it
        self.hidden_bytes = 0
        self.runs: list[ExecResult] = []
        self.limit: ExecResult | None = None

    # -- records --------------------------------------------------------------------------------

    def test_record(self, i: int, fields: dict[str, Any]) -> None:
        hidden = i >= self.n_visible
        if hidden and "error" in fields:
            fields["error"] = {"type": error_kind(_as_dict(fields["error"]).get("type"))}
        self.records.append({"k": "test", "i": i, "phase": "hidden" if hidden else "visible",
                             **fields})  # fmt: skip
        self.next = i + 1

    def output_record(self, phase: str, out: bytes, err: bytes) -> None:
        visible = phase == "visible"
        self.records.append({
            "k": "output", "phase": phase,
            "stdout": out[-_TAIL * 2 :].decode("utf-8", "replace") if visible else "",
            "stderr": err[-_TAIL * 2 :].decode("utf-8", "replace") if visible else "",
            "bytes": len(out) + len(err),
        })  # fmt: skip

    # -- the runs -------------------------------------------------------------------------------

    def grade(self) -> Verdict:
        job = {"mode": "calls", "source": "solution.py", "memory_mb": self.memory_mb,
               "last": self.n - 1}  # fmt: skip
        boot, judge_files = judge_program(self.sb)
        first = True
        while not self.stopped and self.next < self.n:
            if not first and time.monotonic() >= self.budget_end:
                while self.next < self.n:
                    self.test_record(self.next, {"ok": False, "error": {"type": "budget"},
                                                 "why": "budget"})  # fmt: skip
                break
            session = _CallsRun(self, first)
            left = self.budget_s if first else max(0.0, self.budget_end - time.monotonic())
            request = make_request(
                boot,
                files={"solution.py": self.code, **judge_files},
                stdin=_part(job),
                limits=Limits(
                    wall_time_s=left + _SLACK_S,
                    memory_mb=self.memory_mb + 256,
                    max_output_bytes=max(_PRINT_CAP, self.n * (self.max_reply + (16 << 10))),
                ),
            )
            res = self.sb.execute(request, session=session)
            self.runs.append(res)
            if res.status == "sandbox_error" and not session.heard:
                break  # the sandbox failed, not the program: say so rather than retry
            session.ended(res)
            if session.failure is None and res.status not in ("ok", "runtime_error"):
                self.limit = self.limit or res  # a limit the sandbox itself enforced
            first = False
        if self.visible_done and not self.stopped:
            self.records.append({"k": "output", "phase": "hidden", "stdout": "", "stderr": "",
                                 "bytes": self.hidden_bytes})  # fmt: skip
        self.records.append({"k": "end"})
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
        return _verdict(self.problem, self.records, "", summary, facts, "python")


class _CallsRun(RunSession):
    """One sandbox run of direct mode: the conversation with its worker."""

    def __init__(self, judge: _DirectJudge, first: bool) -> None:
        self.j, self.first = judge, first
        self.state: str | None = _LOADING
        self.buf = b""
        self.start = 0.0  # when the test being waited for began (see _DirectJudge)
        self.phase_end = 0  # the test after the last one asked for
        self.out_mark = (0, 0)  # stdout/stderr bytes of this run before the hidden phase
        self.failure: dict[str, Any] | None = None  # why this side killed the run
        self.heard = False

    # -- RunSession ------------------------------------------------------------------------------

    def on_start(self, io: SessionIO) -> None:
        j = self.j
        now = self.start = time.monotonic()
        if self.first:
            j.budget_end = now + j.budget_s
        self.deadline = min(now + j.timeout, j.budget_end)
        # The requests W can have while the candidate's module loads, sent with the job: the
        # visible tests (public: the prompt shows them), or, past the visible phase, the hidden
        # ones (nothing printed then is shown). Not the hidden ones before the visible phase's
        # output is read: a module that prints them while loading would show them.
        if j.next < j.n_visible or j.visible_done:
            self.send_phase(io)

    def on_result(self, data: bytes, io: SessionIO) -> None:
        self.heard = True
        if self.state not in (_LOADING, _RUNNING):
            return
        self.buf += data
        while self.state in (_LOADING, _RUNNING):
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > self.j.max_reply + 256:
                    if self.state == _LOADING:  # not what W writes while the module loads
                        self.loading_failed(io, "protocol", None)
                    else:
                        self.fail(io, {"ok": False, "error": {"type": "value too large"},
                                       "why": "overflow"})  # fmt: skip
                return
            line, self.buf = self.buf[:nl], self.buf[nl + 1 :]
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                rec = None
            self.handle(rec if isinstance(rec, dict) else None, io)

    def on_timer(self, io: SessionIO) -> None:
        if self.state == _DONE:
            io.kill()  # it would not exit on its own: what it answered stands
        elif self.state == _LOADING and not self.first and time.monotonic() >= self.j.budget_end:
            # The time budget ran out while a restarted worker loaded: the test was not run.
            self.j.test_record(self.j.next, {"ok": False, "error": {"type": "budget"},
                                             "why": "budget"})  # fmt: skip
            self.failure = {"why": "budget"}
            self.state = None
            io.kill()
        elif self.state == _LOADING:
            self.loading_failed(io, "import timeout", "timeout")
        elif self.state == _RUNNING:
            self.fail(io, {"ok": False, "error": {"type": "timeout"}, "why": "timeout"})
        self.deadline = None

    # -- the protocol -------------------------------------------------------------------------------

    def handle(self, rec: dict[str, Any] | None, io: SessionIO) -> None:
        j = self.j
        now = time.monotonic()
        kind = rec.get("k") if rec is not None else None
        if self.state == _LOADING:
            if rec is not None and kind == "compile" and rec.get("ok") is True:
                return
            if rec is not None and kind == "compile" and self.first:
                j.records.append({"k": "compile", "ok": False,
                                  "error": _field(rec.get("error"), _TAIL * 2, tail=True)})  # fmt: skip
                j.stopped = True
                self.stop(io)
            elif rec is not None and kind == "compile":
                # It compiled in the first run: this one is the candidate's own (a restarted
                # worker holds hidden requests already). A failure to load, without its text.
                self.loading_failed(io, "protocol", None)
            elif rec is not None and kind == "import" and rec.get("ok"):
                self.state = _RUNNING
                if self.phase_end > j.next:  # asked already: the first test starts now
                    self.start = now
                    self.deadline = min(now + j.timeout, j.budget_end)
                else:
                    self.ask(io, now)
            elif rec is not None and kind == "import":
                err = _as_dict(rec.get("error"))
                error: dict[str, Any] = {"type": error_kind(err.get("type"))}
                if j.next < j.n_visible or (not j.n_visible and not j.visible_done):
                    error.update(msg=_field(err.get("msg"), MSG_CAP),
                                 tb=_field(err.get("tb"), _TAIL * 2, tail=True))  # fmt: skip
                self.loading_failed(io, "import", None, error)
            else:
                self.loading_failed(io, "protocol", None)
            return
        if self.state != _RUNNING:
            return
        i = j.next
        if rec is None or kind != "result" or rec.get("i") != i:
            self.fail(io, {"ok": False, "error": {"type": "protocol", "msg": "unexpected reply"},
                           "why": "protocol"})  # fmt: skip
            return
        j.test_record(i, reply_fields(rec, now - self.start))
        self.start = now
        self.deadline = min(now + j.timeout, j.budget_end)
        if j.next >= self.phase_end:
            self.ask(io, now)

    def ask(self, io: SessionIO, now: float) -> None:
        """Send the requests of the phase the next test is in; close stdin after the last."""
        j = self.j
        if j.next >= j.n_visible and not j.visible_done:
            out, err = io.outputs()  # everything printed before any hidden input went in
            j.output_record("visible", j.vis_out + out, j.vis_err + err)
            j.visible_done = True
            self.out_mark = (len(out), len(err))
        if j.next >= j.n:
            self.stop(io)
            return
        self.send_phase(io)
        self.start = now
        self.deadline = min(now + j.timeout, j.budget_end)

    def send_phase(self, io: SessionIO) -> None:
        j = self.j
        end = j.n_visible if j.next < j.n_visible else j.n
        io.send(b"".join(j.requests[k] + b"\n" for k in range(j.next, end)))
        self.phase_end = end

    def stop(self, io: SessionIO) -> None:
        """Nothing more to ask: W reads EOF and exits; half a second later it is killed."""
        self.state = _DONE
        self.deadline = time.monotonic() + _EXIT_GRACE_S
        io.close_input()

    def fail(self, io: SessionIO, fields: dict[str, Any]) -> None:
        """The test being waited for failed on this side's account: end the run."""
        fields["wall_s"] = round(time.monotonic() - self.start, 6)
        self.j.test_record(self.j.next, fields)
        self.failure = fields
        self.state = None
        self.deadline = None
        io.kill()

    def loading_failed(
        self, io: SessionIO, why: str, kind: str | None, error: dict[str, Any] | None = None
    ) -> None:
        self.record_loading_failure(why, error or {"type": kind or "exited", "msg": why})
        self.failure = {"why": why}
        self.state = None
        self.deadline = None
        io.kill()

    def record_loading_failure(self, why: str, error: dict[str, Any]) -> None:
        j = self.j
        if self.first:  # as J: a program that cannot load at the start is not run further
            j.records.append({"k": "import", "ok": False, "error": error})
            j.stopped = True
        else:  # after a restart: the test it was to run fails, the next gets another run
            j.test_record(j.next, {"ok": False, "error": {"type": "ImportError", "msg": why},
                                   "why": why})  # fmt: skip

    def ended(self, res: ExecResult) -> None:
        """The run is over; if it ended on its own with a test unanswered, that test failed."""
        j = self.j
        if not j.visible_done:
            j.vis_out += res.stdout_bytes
            j.vis_err += res.stderr_bytes
        else:
            printed = len(res.stdout_bytes) + len(res.stderr_bytes)
            j.hidden_bytes += printed - sum(self.out_mark)
        if self.state not in (_LOADING, _RUNNING) or j.stopped or j.next >= j.n:
            return
        if self.state == _LOADING:
            how = _how_it_ended(res)
            if res.status in ("timeout", "output_limit", "memory_limit"):
                how = {"timeout": "timed out", "output_limit": "printed too much output",
                       "memory_limit": "ran out of memory"}[res.status]  # fmt: skip
            why = f"the program {how} while loading"
            kind = "timeout" if res.status == "timeout" else "exited"
            self.record_loading_failure(why, {"type": kind, "msg": why})
            return
        if res.status == "output_limit":
            error: dict[str, Any] = {"type": "output limit"}
            why = "output"
        elif res.status == "timeout":
            error, why = {"type": "timeout"}, "timeout"
        elif res.status == "memory_limit":
            error, why = {"type": "MemoryError", "msg": "memory limit exceeded"}, "memory"
        else:
            error, why = {"type": "exited", "msg": f"the program {_how_it_ended(res)}"}, "exited"
        j.test_record(j.next, {"ok": False, "error": error, "why": why,
                               "wall_s": round(time.monotonic() - self.start, 6)})  # fmt: skip


def _how_it_ended(res: ExecResult) -> str:
    if res.signal is not None:
        try:
            name = signal.Signals(res.signal).name
        except ValueError:
            name = f"signal {res.signal}"
        return f"was killed by {name}"
    return f"exited with code {res.exit_code}"
