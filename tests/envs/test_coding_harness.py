"""The coding judge: value codec, records protocol, statuses, limits, stdin/stdout and judges."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym import error
from llmgym.envs.coding.judge.job import Submission, run_tests, run_tests_many
from llmgym.envs.coding.judge.program import Unencodable, decode, encode
from llmgym.envs.coding.problem import Problem

# --- the codec ----------------------------------------------------------------------------------

hashable = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(hashable, inner, max_size=3)
        | st.sets(hashable, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_codec_round_trips_plain_values_exactly(value):
    back = decode(encode(value))
    assert back == value
    assert type(back) is type(value)


def test_codec_tags_and_non_finite_floats():
    assert encode((1, [2])) == {"$tuple": [1, [2]]}
    assert encode({"$x": 1}) == {"$dict": [["$x", 1]]}
    assert math.isinf(decode(encode(float("-inf"))))
    assert math.isnan(decode(encode(float("nan"))))


def test_codec_reduces_builtin_subclasses_to_their_real_value():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class Shouty(str):
        def __str__(self):
            return "lies"

    class Sneaky(list):
        def __iter__(self):
            return iter([42])

    encoded = encode([Liar(3), Shouty("ok"), Sneaky([1, 2])])
    assert encoded == [3, "ok", [1, 2]]
    assert type(encoded[0]) is int


@pytest.mark.parametrize("bad", [object(), lambda: 1, type, iter([]), range(3)])
def test_codec_refuses_objects(bad):
    with pytest.raises(Unencodable):
        encode(bad)


def test_codec_refuses_deep_or_cyclic_values():
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(Unencodable):
        encode(cyclic)


@pytest.mark.parametrize(
    "bad",
    [
        {"$float": "1.5"},
        {"$tuple": 3},
        {"$dict": [[1]]},
        {"$set": [[1]]},
        {"$x": 1, "y": 2},
        object(),
    ],
)
def test_decode_rejects_malformed_data(bad):
    with pytest.raises((ValueError, TypeError)):
        decode(bad)


# --- grading ------------------------------------------------------------------------------------


def call_problem(n_hidden=6, **limits):
    tests = [
        {"fn": "add", "args": [i, i + 1], "expected": 2 * i + 1, "hidden": i >= 2}
        for i in range(2 + n_hidden)
    ]
    return Problem.from_answer(
        {"kind": "call", "entry_point": "add", "tests": tests, "limits": limits}
    )


ADD = "def add(a, b):\n    return a + b\n"


def test_a_correct_program_passes_every_test_in_one_run():
    verdict = run_tests(ADD, call_problem())
    assert verdict.status == "passed" and verdict.pass_rate == 1.0
    assert len(verdict.tests) == 8 and all(t.passed for t in verdict.tests)
    assert verdict.time_s is not None and verdict.peak_memory_mb is not None
    assert verdict.cpu_time_s is not None and verdict.sandbox["status"] == "ok"


def test_wrong_answers_show_expected_and_got_for_visible_tests_only():
    verdict = run_tests("def add(a, b):\n    return a - b\n", call_problem())
    assert verdict.status == "failed" and verdict.pass_rate == 0.0
    first = verdict.tests[0]
    assert (first.call, first.expected, first.got) == ("add(0, 1)", "1", "-1")
    hidden = verdict.tests[-1].to_dict()
    assert hidden["hidden"] and "got" not in hidden and "expected" not in hidden


def test_partial_credit_counts_hidden_tests_only():
    code = "def add(a, b):\n    return a + b if a < 5 else 0\n"
    verdict = run_tests(code, call_problem(n_hidden=6))
    assert verdict.pass_rate == pytest.approx(3 / 6)
    assert verdict.status == "failed"


def test_syntax_errors_are_compile_errors():
    verdict = run_tests("def add(a, b:\n    return 1\n", call_problem())
    assert verdict.status == "compile_error" and verdict.compile_error
    assert "SyntaxError" in verdict.compile_output
    assert all(t.category == "not_run" for t in verdict.tests)


def test_exceptions_are_reported_with_their_message_for_visible_tests():
    code = "def add(a, b):\n    raise KeyError(f'no {a}')\n"
    verdict = run_tests(code, call_problem())
    assert verdict.status == "runtime_error"
    assert "KeyError" in verdict.tests[0].error and "no 0" in verdict.tests[0].error
    assert verdict.tests[-1].error == "raised KeyError"  # hidden: the builtin type only


def test_an_import_error_fails_every_test():
    verdict = run_tests("raise RuntimeError('boom at import')\n", call_problem())
    assert verdict.status == "runtime_error" and verdict.pass_rate == 0
    assert "boom at import" in verdict.import_error


def test_a_missing_function_is_a_failure_with_a_clear_message():
    verdict = run_tests("def plus(a, b):\n    return a + b\n", call_problem())
    assert verdict.pass_rate == 0 and "no function named 'add'" in verdict.tests[0].error


def test_timeouts_are_per_test_and_the_judge_moves_on():
    code = "def add(a, b):\n    while a == 3:\n        pass\n    return a + b\n"
    verdict = run_tests(code, call_problem(timeout_s=0.5))
    assert verdict.status == "timeout" and verdict.timed_out
    categories = [t.category for t in verdict.tests]
    assert categories[3] == "timeout" and categories.count("passed") == 7


def test_memory_limit_is_reported():
    code = "def add(a, b):\n    x = bytearray(400 << 20)\n    return a + b\n"
    verdict = run_tests(code, call_problem(memory_mb=64))
    assert verdict.status == "memory_limit" and verdict.pass_rate == 0


def test_output_floods_are_cut():
    code = "import sys\ndef add(a, b):\n    sys.stdout.write('x' * (1 << 22))\n    return a + b\n"
    verdict = run_tests(code, call_problem())
    assert verdict.status in ("output_limit", "passed") or verdict.pass_rate < 1
    assert any(t.category == "output_limit" for t in verdict.tests)


def test_unserializable_returns_fail():
    verdict = run_tests("def add(a, b):\n    return object()\n", call_problem())
    assert verdict.pass_rate == 0 and "cannot serialize" in verdict.tests[0].error


def test_expected_exceptions_match_by_builtin_class():
    tests = [
        {"fn": "get", "args": [{}, "k"], "raises": "LookupError", "hidden": True},
        {"fn": "get", "args": [{"k": 1}, "k"], "expected": 1, "hidden": True},
    ]
    problem = Problem.from_answer({"kind": "call", "entry_point": "get", "tests": tests})
    assert run_tests("def get(d, k):\n    return d[k]\n", problem).status == "passed"
    wrong = run_tests("def get(d, k):\n    return d.get(k)\n", problem)
    assert [t.passed for t in wrong.tests] == [False, True]


def test_script_tests_compare_plain_values_in_the_judge():
    tests = [
        {"script": "for i in range(20):\n    assert f(i) == i * i\n", "names": {"f": "sq"},
         "hidden": True},
        {"script": "try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass\n",
         "names": {"f": "sq"}, "hidden": True},
    ]  # fmt: skip
    problem = Problem.from_answer({"kind": "call", "entry_point": "sq", "tests": tests})
    good = "def sq(x):\n    if x < 0:\n        raise ValueError\n    return x * x\n"
    assert run_tests(good, problem).status == "passed"
    liar = (
        "class Anything(int):\n    def __eq__(self, other):\n        return True\n"
        "def sq(x):\n    return Anything(0)\n"
    )
    assert [t.passed for t in run_tests(liar, problem).tests] == [False, False]


def stdio_problem(**extra):
    tests = [
        {"input": f"{i} {i + 1}\n", "output": f"{2 * i + 1}\n", "hidden": i >= 1} for i in range(5)
    ]
    return Problem.from_answer({"kind": "stdio", "tests": tests, **extra})


def test_stdin_stdout_programs_run_one_process_per_test():
    code = "a, b = map(int, input().split())\nprint(a + b)\n"
    verdict = run_tests(code, stdio_problem())
    assert verdict.status == "passed"
    assert all(t.memory_mb and t.time_s is not None for t in verdict.tests)
    # each test is a process of its own: module state does not carry over
    state = "import builtins\nbuiltins.n = getattr(builtins, 'n', 0) + 1\nprint(builtins.n)\n"
    assert {t.got for t in run_tests(state, stdio_problem()).tests if not t.hidden} == {"1\n"}


def test_stdio_exit_codes_and_sys_exit():
    code = "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\n"
    assert run_tests(code, stdio_problem()).status == "passed"
    crash = run_tests("import sys\nsys.exit(3)\n", stdio_problem())
    assert crash.status == "runtime_error" and "exited with code 3" in crash.tests[0].error


def test_stdio_comparators():
    problem = Problem.from_answer(
        {"kind": "stdio", "compare": {"mode": "float", "abs_tol": 1e-3},
         "tests": [{"input": "", "output": "0.3333\n", "hidden": True}]}
    )  # fmt: skip
    assert run_tests("print(1/3)\n", problem).status == "passed"
    assert run_tests("print(0.34)\n", problem).status == "failed"


def test_special_judge_runs_in_its_own_sandbox():
    judge = (
        "def judge(input, output, expected):\n"
        "    n = int(input)\n"
        "    got = output.split()\n"
        "    return len(got) == 2 and int(got[0]) + int(got[1]) == n\n"
    )
    tests = [{"input": f"{n}\n", "output": f"{n} 0\n", "hidden": True} for n in (3, 10, 7)]
    problem = Problem.from_answer({"kind": "stdio", "tests": tests, "judge": judge})
    assert run_tests("n = int(input())\nprint(1, n - 1)\n", problem).status == "passed"
    assert run_tests("n = int(input())\nprint(n, 1)\n", problem).pass_rate == 0


def test_native_programs_compile_once_and_run_per_test():
    c = '#include <stdio.h>\nint main(){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}\n'
    verdict = run_tests(c, stdio_problem(languages=["python", "c"]), language="c")
    assert verdict.status == "passed"
    broken = run_tests("int main( {", stdio_problem(), language="c")
    assert broken.status == "compile_error" and "error" in broken.compile_output


def test_the_judge_is_preloaded_in_its_sandbox_and_shipped_to_others():
    from llmgym.envs.coding.judge.shipping import judge_program, shared_sandbox
    from llmgym.sandbox import get_sandbox

    boot, files = judge_program(shared_sandbox())
    assert files == {} and "main()" in boot  # the zygote holds the judge: nothing to ship
    with get_sandbox("local") as plain:  # a sandbox of the caller's own making
        assert set(judge_program(plain)[1]) == {"judge.py", "judge.bin"}
        assert run_tests(ADD, call_problem(), sandbox=plain).status == "passed"
        stdio = run_tests("a, b = map(int, input().split())\nprint(a + b)\n", stdio_problem(),
                          sandbox=plain)  # fmt: skip
        assert stdio.status == "passed"


def test_stdio_programs_that_kill_their_server_only_fail_their_own_tests():
    # Each test's process is forked by a server process (its parent); killing or stopping it
    # loses that test only, and the next test gets a fresh server.
    code = (
        "import os, signal\n"
        "a, b = map(int, input().split())\n"
        "print(a + b, flush=True)\n"
        "if a == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "if a == 3:\n    os.kill(os.getppid(), signal.SIGSTOP)\n"
    )
    verdict = run_tests(code, stdio_problem(timeout_s=1.0))
    passed = [t.passed for t in verdict.tests]
    assert passed[0] and passed[2] and passed[4], verdict.tests
    assert not passed[1] and not passed[3], verdict.tests
    assert verdict.tests[1].category == "crashed" and verdict.tests[3].category == "timeout"


def test_stdio_atexit_handlers_run_like_at_interpreter_exit():
    # A common fast-output idiom: buffer everything, write it out in an atexit handler.
    code = (
        "import atexit, io, os, sys\n"
        "buf = io.StringIO()\n"
        "atexit.register(lambda: os.write(1, buf.getvalue().encode()))\n"
        "a, b = map(int, input().split())\n"
        "buf.write(f'{a + b}\\n')\n"
    )
    assert run_tests(code, stdio_problem()).status == "passed"


def test_run_tests_many_keeps_order():
    problem = call_problem()
    verdicts = run_tests_many(
        [
            Submission(ADD, problem),
            Submission("def add(a, b): return 0", problem),
            Submission(ADD, problem),
        ]
    )
    assert [v.status for v in verdicts] == ["passed", "failed", "passed"]


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"kind": "sql", "tests": [{}]},
        {"kind": "call", "tests": []},
        {
            "kind": "call",
            "entry_point": "f",
            "tests": [{"fn": "f", "args": [], "expected": 1, "hidden": False}],
        },
        {"kind": "call", "entry_point": "f", "tests": [{"fn": "f", "args": [], "hidden": True}]},
        {"kind": "stdio", "tests": [{"input": 1, "output": "", "hidden": True}]},
        {
            "kind": "call",
            "entry_point": "f",
            "tests": [{"fn": "f", "args": [{"$float": "x"}], "expected": 1}],
        },
        {
            "kind": "call",
            "entry_point": "f",
            "tests": [{"fn": "f", "args": [], "expected": 1}],
            "limits": {"timeout_s": -1},
        },
        {
            "kind": "call",
            "entry_point": "f",
            "tests": [{"fn": "f", "args": [], "expected": 1}],
            "languages": ["c"],
        },
    ],
)
def test_malformed_task_answers_are_rejected(answer):
    with pytest.raises(error.InvalidTask):
        Problem.from_answer(answer)


def test_non_ascii_output_fits_the_result_channel():
    tests = [{"input": "", "output": "é" * 10, "hidden": i > 0} for i in range(8)]
    problem = Problem.from_answer({"kind": "stdio", "tests": tests})
    flood = "import sys\nsys.stdout.write('é' * (64 << 10))\n"  # as much as the cap allows
    verdict = run_tests(flood, problem)
    assert verdict.status != "protocol_error" and verdict.pass_rate == 0
    assert run_tests("print('é' * 10)\n", problem).status == "passed"


def test_lone_surrogates_in_returned_values():
    tests = [{"fn": "f", "args": [], "expected": "\ud800", "hidden": True}]
    problem = Problem.from_answer({"kind": "call", "entry_point": "f", "tests": tests})
    assert run_tests("def f():\n    return '\\ud800'\n", problem).status == "passed"
