"""Direct mode: the judge's loop for plain call tests runs in this process, the worker alone in
each sandbox run. It must grade exactly as the judge J inside the sandbox does."""

from __future__ import annotations

import pytest

from llmgym.envs.coding.judge import direct as direct_mode
from llmgym.envs.coding.judge.job import Submission, run_tests, run_tests_many
from llmgym.envs.coding.judge.shipping import make_sandbox
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
    # Every test loops: a per-test timeout each, until the budget is spent.
    endless = "def add(a, b):\n    while True:\n        pass\n"
    verdict = run_tests(endless, call_problem(n_hidden=10, timeout_s=0.3, budget_s=1.0))
    categories = [t.category for t in verdict.tests]
    assert categories.count("timeout") == len(categories)
    assert verdict.sandbox["runs"] <= 5


def test_many_submissions_mix_both_ways_in_order():
    stdio = Problem.from_answer(
        {"kind": "stdio", "tests": [{"input": "2 3\n", "output": "5\n", "hidden": True}]}
    )
    subs = [
        Submission(PROGRAMS["correct"], call_problem()),
        Submission("a, b = map(int, input().split())\nprint(a + b)\n", stdio),
        Submission(PROGRAMS["wrong"], call_problem()),
    ]
    verdicts = run_tests_many(subs)
    assert [v.status for v in verdicts] == ["passed", "passed", "failed"]
    assert "runs" in verdicts[0].sandbox and "runs" not in verdicts[1].sandbox


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
