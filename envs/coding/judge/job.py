"""Grading jobs: the programs to grade, run in the sandbox, and their verdicts back.

:func:`run_tests` and :func:`run_tests_many` are the entry points. Plain call tests of a Python
function and a Python program's stdin/stdout tests go to direct mode (:mod:`.direct`) where the
sandbox can hold a session; everything else (C and C++, script tests, special judges, static
facts, sandboxes without sessions) runs the judge's program inside the sandbox: one run per answer, with the
candidate's source and the tests' *inputs* (:mod:`.shipping`), its records turned into a verdict
here (:mod:`.verdicts`). C and C++ programs are compiled first, each in a run of its own; a task
with a special judge gets one more run for it. This module never raises on anything a program
does: a failure of the sandbox itself is a ``sandbox_error`` verdict.
"""

from __future__ import annotations

import base64
import json
import secrets
import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from llmgym.envs.coding.judge import direct
from llmgym.envs.coding.judge.shipping import (
    PRINT_CAP,
    SLACK_S,
    encoded_tests,
    judge_program,
    shared_sandbox,
    stdin_part,
)
from llmgym.envs.coding.judge.verdicts import (
    Verdict,
    failed_verdict,
    failure_detail,
    read_records,
    verdict_from_records,
    verdict_of_run,
)
from llmgym.envs.coding.problem import Problem
from llmgym.sandbox import LANGUAGES as SANDBOX_LANGUAGES
from llmgym.sandbox import ExecResult, Limits, Sandbox

COMPILE_TIMEOUT_S = 30.0
COMPILE_MEMORY_MB = 768


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
    tests = encoded_tests(problem)
    per_test = tests["per_test"]
    job: dict[str, Any] = {
        "nonce": nonce,
        "mode": problem.kind,
        "timeout_s": timeout,
        "budget_s": budget,
        "memory_mb": memory_mb,
        "output_cap": per_test if problem.kind == "stdio" else PRINT_CAP,
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
        wall_time_s=budget + SLACK_S,
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
        "stdin": stdin_part(job),
        "language": "python",
        "limits": Limits(
            wall_time_s=COMPILE_TIMEOUT_S + SLACK_S,
            memory_mb=COMPILE_MEMORY_MB,
            max_output_bytes=_MAX_BINARY_BYTES * 2,
        ),
    }


def _finish(sb: Sandbox, sub: Submission, res: ExecResult, nonce: str) -> Verdict:
    verdict = verdict_of_run(sub.problem, res, nonce, sub.language)
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
    chosen = [
        i
        for i, sub in enumerate(submissions)
        if direct.grades_directly(sb, sub.problem, sub.language, static=sub.static)
    ]
    if len(chosen) == len(submissions):
        if len(chosen) == 1:
            return [direct.grade_directly(sb, submissions[0].problem, submissions[0].code)]
        workers = min(sb.max_concurrency, len(chosen))
        with ThreadPoolExecutor(workers, thread_name_prefix="llmgym-judge") as pool:
            return list(
                pool.map(lambda sub: direct.grade_directly(sb, sub.problem, sub.code), submissions)
            )
    if chosen:  # a mix: each kind its own way, in the given order
        picked = set(chosen)
        rest = [i for i in range(len(submissions)) if i not in picked]
        out: list[Verdict | None] = [None] * len(submissions)
        for idx, verdict in zip(
            chosen, run_tests_many([submissions[i] for i in chosen], sandbox=sb), strict=True
        ):
            out[idx] = verdict
        for idx, verdict in zip(
            rest, _grade_in_sandbox([submissions[i] for i in rest], sb), strict=True
        ):
            out[idx] = verdict
        return [v for v in out if v is not None]
    return _grade_in_sandbox(submissions, sb)


def _grade_in_sandbox(submissions: Sequence[Submission], sb: Sandbox) -> list[Verdict]:
    """Grade with the judge's program inside each sandbox run (every kind of task, every
    backend); C/C++ programs are compiled first, each in a run of its own."""
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
            failed_verdict("sandbox_error", s.language, s.problem, failure_detail(e))
            for s in submissions
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
        records, broken = read_records(res, nonces[i])
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
        verdicts[i] = verdict_from_records(sub.problem, records, broken, res, facts, sub.language)
    return binaries


def _special_judge(
    sb: Sandbox, problem: Problem, verdict: Verdict, res: ExecResult, nonce: str
) -> Verdict:
    """Ask the task's judge, in a sandbox run of its own, about every test still ``judging``."""
    records, _ = read_records(res, nonce)
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
            jres = sb.run(code=boot, files=judge_files, stdin=stdin_part(job), language="python",
                          limits=Limits(wall_time_s=30, memory_mb=512, max_output_bytes=1 << 20))  # fmt: skip
            jrecords, broken = read_records(jres, judge_nonce)
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
