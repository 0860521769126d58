"""Direct mode: the judge's loop for plain call tests runs in this process, the worker alone in
each sandbox run. It must grade exactly as the judge J inside the sandbox does."""

from __future__ import annotations

import time

import pytest

from llmgym.envs.coding.judge import direct as direct_mode
from llmgym.envs.coding.judge.job import Submission, run_tests, run_tests_many
from llmgym.envs.coding.judge.program import after_timeout_s
from llmgym.envs.coding.judge.shipping import make_sandbox
from llmgym.envs.coding.judge.verdicts import describe
from llmgym.envs.coding.problem import Problem


def call_problem(n_hidden=6, **limits):
    tests = [
        {"fn": "add", "args": [i, i + 1], "expected": 2 * i + 1, "hidden": i >= 2}
        for i in range(2 + n_hidden)
    ]
    limits.setdefault("timeout_s", 0.5)
    return Problem.from_answer(
        {"kind": "call", "entry_point": "add", "tests": tests, "limits": limits}
    )


PROGRAMS = {
    "correct": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b\n",
    "partial": "def add(a, b):\n    return a + b if a < 5 else 0\n",
    "raises": "def add(a, b):\n    raise KeyError(f'no {a}')\n",
    "syntax": "def add(a, b:\n    return 1\n",
    "import error": "raise RuntimeError('boom at import')\n",
    "exit at import": "import os\nos._exit(0)\n",
    "missing": "def plus(a, b):\n    return a + b\n",
    "loops on test 3": "def add(a, b):\n    while a == 3:\n        pass\n    return a + b\n",
    "exits on test 4": "import os\ndef add(a, b):\n    if a == 4:\n        os._exit(3)\n    return a + b\n",
    "sys.exit on test 1": "import sys\ndef add(a, b):\n    if a == 1:\n        sys.exit(0)\n    return a + b\n",
    "prints": "def add(a, b):\n    print('seen', a)\n    return a + b\n",
    "memory": "def add(a, b):\n    x = bytearray(400 << 20)\n    return a + b\n",
    "not plain data": "def add(a, b):\n    return object()\n",
}


def _grade_both(code: str, problem: Problem):
    assert direct_mode.DIRECT_CALLS
    direct = run_tests(code, problem)
    direct_mode.DIRECT_CALLS = False
    try:
        judged = run_tests(code, problem)
    finally:
        direct_mode.DIRECT_CALLS = True
    return direct, judged


@pytest.mark.parametrize("name", PROGRAMS)
def test_direct_mode_and_the_judge_agree(name):
    problem = call_problem(memory_mb=64)
    direct, judged = _grade_both(PROGRAMS[name], problem)
    assert "runs" in direct.sandbox and "runs" not in judged.sandbox  # each way was taken
    assert direct.status == judged.status, (direct, judged)
    assert [t.category for t in direct.tests] == [t.category for t in judged.tests]
    assert [t.error for t in direct.tests] == [t.error for t in judged.tests]
    assert [t.got for t in direct.tests] == [t.got for t in judged.tests]
    assert direct.stdout == judged.stdout and direct.import_error == judged.import_error
    assert direct.compile_error == judged.compile_error


def test_one_run_per_answer_unless_the_worker_is_lost():
    verdict = run_tests(PROGRAMS["correct"], call_problem())
    assert verdict.status == "passed" and verdict.sandbox["runs"] == 1
    # A crash, a timeout: the run ends; the next test gets another run, and only that one.
    assert run_tests(PROGRAMS["exits on test 4"], call_problem()).sandbox["runs"] == 2
    assert run_tests(PROGRAMS["loops on test 3"], call_problem()).sandbox["runs"] == 2
    # A program that cannot load is run once, not once per test.
    assert run_tests(PROGRAMS["exit at import"], call_problem()).sandbox["runs"] == 1


def test_only_what_was_printed_before_the_hidden_inputs_is_shown():
    verdict = run_tests(PROGRAMS["prints"], call_problem())
    assert verdict.stdout == "seen 0\nseen 1\n"


def test_a_forged_answer_fails_only_the_test_it_lands_on():
    # The worker's result channel is the candidate's to write: an answer out of turn is a
    # protocol failure of the test being waited for, and the next test gets a fresh run.
    code = (
        "import os\n"
        "def add(a, b):\n"
        "    if a == 3:\n"
        '        os.write(3, b\'{"k": "result", "i": 4, "ok": true, "value": 9}\\n\')\n'
        "    return a + b\n"
    )
    verdict = run_tests(code, call_problem())
    failed = [t.index for t in verdict.tests if not t.passed]
    assert failed == [3] and verdict.tests[3].category == "error"
    assert verdict.sandbox["runs"] == 2


def test_an_endless_answer_is_cut_at_the_reply_cap():
    code = "import os\ndef add(a, b):\n    if a == 2:\n        os.write(3, b'x' * (1 << 20))\n    return a + b\n"
    verdict = run_tests(code, call_problem())
    assert [t.index for t in verdict.tests if not t.passed] == [2]
    assert "too large" in (verdict.tests[2].error or "")


def test_time_is_this_sides_and_the_budget_holds():
    slow = "import time\ntime.monotonic = lambda: 0.0\ndef add(a, b):\n    time.sleep(0.05)\n    return a + b\n"
    verdict = run_tests(slow, call_problem())
    assert verdict.status == "passed" and verdict.time_s >= 8 * 0.05
    # Every test loops: the first times out, the rest fall to the budget (never one timeout each).
    endless = "def add(a, b):\n    while True:\n        pass\n"
    verdict = run_tests(endless, call_problem(n_hidden=10, timeout_s=0.3, budget_s=1.0))
    categories = [t.category for t in verdict.tests]
    assert categories[0] == "timeout" and set(categories[1:]) == {"not_run"}, categories
    assert verdict.status == "timeout" and verdict.sandbox["runs"] <= 2


ENDLESS = "def add(a, b):\n    while True:\n        pass\n"


@pytest.mark.parametrize("way", ["direct", "judge in the sandbox"])
def test_a_looping_program_costs_one_wall_limit_per_episode(way):
    # 40 tests of 1 s each and a budget of a minute: one timeout each would cost 40 s. The
    # first timeout leaves the rest of the episode after_timeout_s(1.0) (0.5 s).
    problem = call_problem(n_hidden=40, timeout_s=1.0, budget_s=60.0)
    direct_mode.DIRECT_CALLS = way == "direct"
    try:
        start = time.monotonic()
        verdict = run_tests(ENDLESS, problem)
        elapsed = time.monotonic() - start
    finally:
        direct_mode.DIRECT_CALLS = True
    assert ("runs" in verdict.sandbox) == (way == "direct")
    assert elapsed <= 1.0 + after_timeout_s(1.0) + 1.0, elapsed  # one wall limit, small slack
    # The verdict says which test timed out and which were stopped or never run.
    first, second, *rest = verdict.tests
    assert (first.category, first.error) == ("timeout", "timed out")
    assert (second.category, second.error) == ("not_run", "stopped: the time budget ran out")
    assert {(t.category, t.error) for t in rest} == {
        ("not_run", "not run: the time budget ran out")
    }
    assert verdict.status == "timeout" and verdict.timed_out and verdict.pass_rate == 0
    feedback = describe(verdict, problem)
    assert "1 test(s) timed out" in feedback and "41 test(s) not run or stopped" in feedback


@pytest.mark.parametrize("way", ["direct", "judge in the sandbox"])
def test_a_looping_stdio_program_costs_one_wall_limit_per_episode(way):
    tests = [{"input": f"{i}\n", "output": f"{i}\n", "hidden": i >= 2} for i in range(40)]
    problem = Problem.from_answer(
        {"kind": "stdio", "tests": tests, "limits": {"timeout_s": 1.0, "budget_s": 60.0}}
    )
    direct_mode.DIRECT_PROGRAMS = way == "direct"
    try:
        start = time.monotonic()
        verdict = run_tests("while True:\n    pass\n", problem)
        elapsed = time.monotonic() - start
    finally:
        direct_mode.DIRECT_PROGRAMS = True
    assert ("runs" in verdict.sandbox) == (way == "direct")
    assert elapsed <= 1.0 + after_timeout_s(1.0) + 1.0, elapsed
    first, second, *rest = verdict.tests
    assert (first.category, first.error) == ("timeout", "timed out")
    assert (second.category, second.error) == ("not_run", "stopped: the time budget ran out")
    assert {(t.category, t.error) for t in rest} == {
        ("not_run", "not run: the time budget ran out")
    }
    assert verdict.status == "timeout"


@pytest.mark.parametrize("way", ["direct", "judge in the sandbox"])
def test_hidden_tests_say_which_timed_out_which_were_stopped_and_which_never_ran(way):
    code = "def add(a, b):\n    while a >= 2:\n        pass\n    return a + b\n"
    direct_mode.DIRECT_CALLS = way == "direct"
    try:
        verdict = run_tests(code, call_problem(n_hidden=6, timeout_s=0.5, budget_s=30.0))
    finally:
        direct_mode.DIRECT_CALLS = True
    assert [t.error for t in verdict.tests] == [
        None, None, "timed out", "stopped: the time budget ran out",
        *["not run: the time budget ran out"] * 4,
    ]  # fmt: skip
    assert [t.hidden for t in verdict.tests[2:]] == [True] * 6
    assert verdict.status == "timeout" and verdict.pass_rate == 0


def test_after_a_timeout_the_other_tests_are_still_graded():
    # Looping on one test costs that test; the tests after it run in a fresh worker.
    code = "def add(a, b):\n    while a == 3:\n        pass\n    return a + b\n"
    start = time.monotonic()
    verdict = run_tests(code, call_problem(n_hidden=30, timeout_s=1.0, budget_s=60.0))
    assert time.monotonic() - start <= 1.0 + after_timeout_s(1.0) + 1.0
    assert [t.category for t in verdict.tests].count("passed") == 31
    assert verdict.tests[3].category == "timeout" and verdict.status == "timeout"


def test_many_submissions_mix_both_ways_in_order():
    stdio = Problem.from_answer(
        {"kind": "stdio", "tests": [{"input": "2 3\n", "output": "5\n", "hidden": True}]}
    )
    script = Problem.from_answer(  # a script test runs in the judge inside the sandbox
        {"kind": "call", "entry_point": "add", "tests": [
            {"script": "assert add(2, 3) == 5", "names": {"add": "add"}, "hidden": True}]}
    )  # fmt: skip
    subs = [
        Submission(PROGRAMS["correct"], call_problem()),
        Submission(PROGRAMS["correct"], script),
        Submission("a, b = map(int, input().split())\nprint(a + b)\n", stdio),
        Submission(PROGRAMS["wrong"], call_problem()),
    ]
    verdicts = run_tests_many(subs)
    assert [v.status for v in verdicts] == ["passed", "passed", "passed", "failed"]
    assert ["runs" in v.sandbox for v in verdicts] == [True, False, True, True]


def stdio_problem(visible=2, **limits):
    tests = [
        {"input": f"{i} {i + 1}\n", "output": f"{2 * i + 1}\n", "hidden": i >= visible}
        for i in range(8)
    ]
    limits.setdefault("timeout_s", 0.5)
    return Problem.from_answer({"kind": "stdio", "tests": tests, "limits": limits})


STDIO_PROGRAMS = {
    "correct": "a, b = map(int, input().split())\nprint(a + b)\n",
    "wrong": "a, b = map(int, input().split())\nprint(a - b)\n",
    "raises": "a, b = map(int, input().split())\nraise KeyError(f'no {a}')\n",
    "syntax": "a, b = map(int, input().split()\nprint(a)\n",
    "exit code on test 2": "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(3 if a == 2 else 0)\n",
    "exit message": "import sys\nsys.exit('bye')\n",
    "loops on test 3": "a, b = map(int, input().split())\nwhile a == 3:\n    pass\nprint(a + b)\n",
    "prints to stderr": "import sys\na, b = map(int, input().split())\nprint('seen', a, file=sys.stderr)\nprint(a + b)\n",
    "prints too much": "print('x' * (1 << 20))\n",
    "memory": "x = bytearray(400 << 20)\n",
    "reads nothing": "print(1)\n",
    "kills its parent on test 1": "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\nif a == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    "stops its parent on test 3": "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\nif a == 3:\n    os.kill(os.getppid(), signal.SIGSTOP)\n",
    "a child keeps stdout open": "import os, time\na, b = map(int, input().split())\nprint(a + b, flush=True)\nif a == 4 and os.fork() == 0:\n    time.sleep(30)\n",
}


@pytest.mark.parametrize("visible", [2, 0])
@pytest.mark.parametrize("name", STDIO_PROGRAMS)
def test_direct_mode_and_the_judge_agree_on_stdio_programs(name, visible):
    problem = stdio_problem(memory_mb=64, visible=visible)
    assert direct_mode.DIRECT_PROGRAMS
    direct = run_tests(STDIO_PROGRAMS[name], problem)
    direct_mode.DIRECT_PROGRAMS = False
    try:
        judged = run_tests(STDIO_PROGRAMS[name], problem)
    finally:
        direct_mode.DIRECT_PROGRAMS = True
    assert "runs" in direct.sandbox and "runs" not in judged.sandbox  # each way was taken
    assert direct.status == judged.status, (direct, judged)
    assert [t.category for t in direct.tests] == [t.category for t in judged.tests]
    assert [t.error for t in direct.tests] == [t.error for t in judged.tests]
    got = [t.got for t in direct.tests], [t.got for t in judged.tests]
    if name == "kills its parent on test 1" and visible:  # what it printed died with the runner
        got[1][1] = ""
    assert got[0] == got[1]
    assert direct.compile_output == judged.compile_output


LOOKS_FOR_OTHER_INPUTS = r"""
import ctypes, re, sys
own = sys.stdin.read().split()[0]
found = set()
with open("/proc/self/maps") as maps:
    regions = [line.split() for line in maps]
for fields in regions:  # every readable page of this process, read in place
    span, perms = fields[:2]
    if "r" not in perms or (len(fields) > 5 and fields[5].startswith("[v")):
        continue
    lo, hi = (int(x, 16) for x in span.split("-"))
    found.update(m.decode() for m in re.findall(rb"zqMARK[0-9]{4}", ctypes.string_at(lo, hi - lo)))
print("LEAK" if found - {own} else "ok")
"""


def test_a_stdio_test_process_finds_no_other_tests_input_in_its_memory():
    # Direct mode splices each test's input into a memfd of its own: the runner that forks the
    # tests' processes never holds an input in its memory. (The judge inside the sandbox holds
    # the visible inputs, read with its job, when it forks its program server.)
    tests = [{"input": f"zqMARK{i:04d}\n", "output": "ok\n", "hidden": i >= 2} for i in range(6)]
    problem = Problem.from_answer({"kind": "stdio", "tests": tests, "limits": {"timeout_s": 10}})
    verdict = run_tests(LOOKS_FOR_OTHER_INPUTS, problem)
    assert "runs" in verdict.sandbox
    assert verdict.status == "passed", [(t.category, t.error, t.got) for t in verdict.tests]


def test_the_docker_backend_talks_too():
    try:
        sb = make_sandbox("docker")
    except Exception as exc:  # noqa: BLE001
        import os

        if os.environ.get("LLMGYM_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"docker backend unavailable: {exc}")
    try:
        verdict = run_tests(PROGRAMS["exits on test 4"], call_problem(), sandbox=sb)
        assert verdict.sandbox["runs"] == 2
        assert [t.index for t in verdict.tests if not t.passed] == [4]
        programs = run_tests(
            STDIO_PROGRAMS["kills its parent on test 1"], stdio_problem(), sandbox=sb
        )
        assert programs.sandbox["runs"] == 2
        assert [t.index for t in programs.tests if not t.passed] == [1]
        assert run_tests(STDIO_PROGRAMS["correct"], stdio_problem(), sandbox=sb).status == "passed"
    finally:
        sb.close()


def test_memory_and_cpu_are_the_workers_as_the_judge_reports_them():
    direct, judged = _grade_both(PROGRAMS["correct"], call_problem())
    assert direct.peak_memory_mb is not None and judged.peak_memory_mb is not None
    assert abs(direct.peak_memory_mb - judged.peak_memory_mb) < 8  # both: the worker's peak RSS
    assert 0 < direct.cpu_time_s < 1 and direct.time_s is not None
    hog = "def add(a, b):\n    x = bytearray(48 << 20)\n    return a + b\n"
    assert run_tests(hog, call_problem(memory_mb=256)).peak_memory_mb >= 48


def test_nothing_to_grade_is_nothing():
    assert run_tests_many([]) == []


@pytest.mark.parametrize("garbage", [b"x" * (1 << 20), b'{"k": "result", "i": 0}\n', b"\n"])
def test_writing_on_the_result_channel_while_loading_is_a_failure_to_load(garbage):
    code = f"import os\nos.write(3, {garbage!r})\ndef add(a, b):\n    return a + b\n"
    verdict = run_tests(code, call_problem())
    assert verdict.pass_rate == 0 and verdict.status == "runtime_error"
    assert all(t.category == "not_run" for t in verdict.tests)
    assert verdict.sandbox["runs"] == 1
