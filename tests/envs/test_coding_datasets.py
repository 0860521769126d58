"""Dataset loaders: HumanEval, MBPP, APPS, CodeContests, LiveCodeBench and llmgym JSONL, from the
small handwritten files in tests/data/coding/."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from llmgym import error
from llmgym.envs.coding import CodingEnv
from llmgym.envs.coding.datasets import assert_to_test, convert_checks, load_coding_tasks
from llmgym.envs.coding.problem import Problem

DATA = Path(__file__).resolve().parents[1] / "data" / "coding"


def _grade(env, task_id, answer):
    env.reset(options={"task_id": task_id})
    return env.step(answer)


@pytest.mark.parametrize("fmt", ["humaneval", "mbpp", "apps", "codecontests"])
def test_reference_solutions_pass_their_converted_tests(fmt):
    env = CodingEnv(tasks=DATA / f"{fmt}.jsonl", dataset_format=fmt)
    for task in env.source:
        _, reward, _, _, info = _grade(env, task.id, env.oracle(task))
        assert reward == 13.0, (task.id, info["feedback"])


def test_humaneval_asserts_become_call_tests_and_loops_a_script():
    env = CodingEnv(tasks=DATA / "humaneval.jsonl", dataset_format="humaneval")
    close = Problem.from_answer(env.source.get("HumanEval/mini-0").answer)
    assert all("fn" in t for t in close.tests) and len(close.tests) == 5
    shift = Problem.from_answer(env.source.get("HumanEval/mini-1").answer)
    kinds = ["script" in t for t in shift.tests]
    assert kinds == [False, True]  # the literal assert, then the random loop as a script
    trunc = Problem.from_answer(env.source.get("HumanEval/mini-2").answer)
    assert trunc.tests[1]["compare"] == {"mode": "float", "abs_tol": 1e-6, "rel_tol": 0.0}


def test_humaneval_body_only_completions_get_the_prompt_prepended():
    env = CodingEnv(tasks=DATA / "humaneval.jsonl", dataset_format="humaneval")
    body = "```python\n    return number % 1.0\n```"
    _, reward, *_ = _grade(env, "HumanEval/mini-2", body)
    assert reward == 13.0
    wrong = "```python\ndef truncate_number(number):\n    return 0.5\n```"
    _, reward, _, _, info = _grade(env, "HumanEval/mini-2", wrong)
    assert info["exec"]["passed"] == 1 and 0 < reward < 10


def test_humaneval_scripts_still_catch_wrong_answers():
    env = CodingEnv(tasks=DATA / "humaneval.jsonl", dataset_format="humaneval")
    almost = "```python\ndef encode_shift(s):\n    return ''.join(chr((ord(c) - 97 + 4) % 26 + 97) for c in s)\n```"
    _, reward, _, _, info = _grade(env, "HumanEval/mini-1", almost)
    assert reward == 0.0 and info["exec"]["passed"] == 0


def test_mbpp_shows_one_test_and_hides_the_rest():
    env = CodingEnv(tasks=DATA / "mbpp.jsonl", dataset_format="mbpp")
    obs, _ = env.reset(options={"task_id": "mbpp-11"})
    assert 'assert remove_Occ("hello","l") == "heo"' in obs
    problem = Problem.from_answer(env.episode.task.answer)
    assert [t["hidden"] for t in problem.tests] == [False, True, True, True, True]
    square = Problem.from_answer(env.source.get("mbpp-17").answer)
    assert "script" in square.tests[-1]  # set([...]) == {...} is not a plain call check


def test_apps_call_and_stdin_problems():
    env = CodingEnv(tasks=DATA / "apps.jsonl", dataset_format="apps")
    vowels = Problem.from_answer(env.source.get("apps-4002").answer)
    assert vowels.kind == "call" and vowels.tests[0]["also"] == [2]
    unwrapped = "```python\ndef count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n```"
    assert _grade(env, "apps-4002", unwrapped)[1] == 13.0
    wrapped = "```python\ndef count_vowels(s):\n    return [sum(c in 'aeiouAEIOU' for c in s)]\n```"
    assert _grade(env, "apps-4002", wrapped)[1] == 13.0
    stdin = env.source.get("apps-4001")
    assert Problem.from_answer(stdin.answer).kind == "stdio" and stdin.difficulty == 0.2


def test_codecontests_tests_limits_and_cpp_reference():
    env = CodingEnv(
        tasks=DATA / "codecontests.jsonl", dataset_format="codecontests", language="cpp"
    )
    task = next(iter(env.source))
    problem = Problem.from_answer(task.answer)
    assert [t["hidden"] for t in problem.tests] == [False, True, True, True, True]
    assert problem.limits["timeout_s"] == 2.0 and problem.limits["memory_mb"] == 256
    assert task.difficulty == 0.0 and set(problem.reference) == {"python", "cpp"}
    _, reward, _, _, info = _grade(env, task.id, env.oracle(task))
    assert reward == 13.0, info["feedback"]


def test_livecodebench_functional_and_stdin():
    env = CodingEnv(tasks=DATA / "livecodebench.jsonl", dataset_format="livecodebench")
    two_sum = Problem.from_answer(env.source.get("lcb-9001").answer)
    assert two_sum.entry_point == "Solution.twoSum" and two_sum.header
    solution = (
        "```python\nclass Solution:\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n"
        "        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n"
        "                return [seen[target - x], i]\n"
        "            seen[x] = i\n```"
    )
    assert _grade(env, "lcb-9001", solution)[1] == 13.0
    stdin = "```python\nprint(max(map(int, input().split())))\n```"
    assert _grade(env, "lcb-abc001_a", stdin)[1] == 13.0
    assert env.source.get("lcb-abc001_a").family == "livecodebench-atcoder"


def test_livecodebench_pickled_private_tests_are_refused(tmp_path):
    record = json.loads((DATA / "livecodebench.jsonl").read_text().splitlines()[0])
    record["private_test_cases"] = "eJzLSM3JyVcozy/KSQEAGgQEXQ=="  # a compressed blob, not JSON
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(error.InvalidTask, match="never unpickles"):
        load_coding_tasks(path, dataset_format="livecodebench")


def test_llmgym_schema_records_and_json_lists(tmp_path):
    record = {
        "id": "mine-1",
        "prompt": "Write double(x).",
        "answer": {"kind": "call", "entry_point": "double",
                   "tests": [{"fn": "double", "args": [2], "expected": 4, "hidden": True}],
                   "reference": {"python": "def double(x):\n    return 2 * x\n"}},
    }  # fmt: skip
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([record]))
    env = CodingEnv(tasks=path)
    task = env.source.get("mine-1")
    assert task.family == "dataset"
    assert _grade(env, "mine-1", env.oracle(task))[1] == 13.0
    assert CodingEnv(tasks=[record]).source.get("mine-1") == task


@pytest.mark.parametrize(
    ("fmt", "record"),
    [
        (
            "humaneval",
            {
                "task_id": "x",
                "entry_point": "f",
                "prompt": "def f():\n",
                "test": "def other(c):\n    pass\n",
            },
        ),
        ("humaneval", {"task_id": "x", "prompt": "def f():\n", "test": ""}),
        ("mbpp", {"task_id": 1, "text": "t", "code": "def f(): pass", "test_list": []}),
        (
            "apps",
            {
                "problem_id": 1,
                "question": "q",
                "input_output": json.dumps({"inputs": ["1"], "outputs": []}),
            },
        ),
        ("apps", {"problem_id": 1, "question": "q", "input_output": "{not json"}),
        ("codecontests", {"name": "x", "description": "d"}),
        (
            "livecodebench",
            {"question_id": "1", "public_test_cases": "[]", "private_test_cases": ""},
        ),
        (
            "livecodebench",
            {
                "question_id": "1",
                "public_test_cases": json.dumps(
                    [{"input": "1", "output": "1", "testtype": "functional"}]
                ),
                "metadata": "{}",
            },
        ),
        (None, {"id": "x", "prompt": "p", "answer": {"kind": "call", "tests": []}}),
        (None, {"id": "x", "prompt": "p", "answer": "print(1)"}),
    ],
)
def test_malformed_records_name_what_is_wrong(tmp_path, fmt, record):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(error.InvalidTask):
        load_coding_tasks(path, dataset_format=fmt)


def test_loader_argument_errors(tmp_path):
    with pytest.raises(error.Error, match="dataset_format"):
        load_coding_tasks([], dataset_format="leetcode")
    with pytest.raises(error.InvalidTask):
        load_coding_tasks({"id": "x"})
    with pytest.raises(error.InvalidTask):
        load_coding_tasks(tmp_path / "missing.jsonl")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(error.InvalidTask, match="JSON list"):
        load_coding_tasks(tmp_path / "x.json")


@pytest.mark.parametrize(
    ("source", "converted"),
    [
        ("assert f(1) == 2", True),
        ("assert 2 == f(1)", True),
        ("assert f([1, (2, 3)], k={'a': None}) == {1: 'x'}", True),
        ("assert f(-1.5) is None", True),
        ("assert abs(f(2) - 1.41) <= 0.01", True),
        ("assert f(x) == 2", False),
        ("assert f(1) != 2", False),
        ("assert f(*args) == 2", False),
        ("assert g(1) == 2", False),
        ("assert f(1) == sorted([2])", False),
        ("assert f(1)", False),
        ("x = f(1)", False),
    ],
)
def test_assert_conversion(source, converted):
    result = assert_to_test(ast.parse(source).body[0], {"f": "f"})
    assert (result is not None) is converted


def test_unconvertible_checks_keep_their_setup_in_order():
    code = "import math\ndef check(candidate):\n    x = [1, 2]\n    assert candidate(x) == 3\n    assert candidate([5]) == 5\n"
    tests = convert_checks(code, {"candidate": "total"}, check="check")
    assert tests[0]["args"] == [[5]]
    script = tests[1]["script"]
    assert "x = [1, 2]" in script and "assert candidate(x) == 3" in script
    assert "candidate([5])" not in script and script.rstrip().endswith("check(candidate)")


def test_mbpp_an_answer_failing_the_shown_test_loses_its_share():
    """MBPP's grader runs every assert, the shown one included: so does the pass rate here."""
    env = CodingEnv(tasks=DATA / "mbpp.jsonl", dataset_format="mbpp")
    problem = Problem.from_answer(env.source.get("mbpp-11").answer)
    n = len(problem.tests)
    # Right on every hidden input, wrong on the shown one ("hello", "l").
    cheat = (
        "```python\ndef remove_Occ(s, ch):\n    if s == 'hello':\n        return 'wrong'\n"
        "    i = s.find(ch)\n    if i >= 0:\n        s = s[:i] + s[i + 1:]\n"
        "    j = s.rfind(ch)\n    if j >= 0:\n        s = s[:j] + s[j + 1:]\n    return s\n```"
    )
    _, reward, _, _, info = _grade(env, "mbpp-11", cheat)
    assert info["exec"]["pass_rate"] == pytest.approx((n - 1) / n)
    assert reward == pytest.approx(10 * (n - 1) / n)
    assert "Visible test failed" in info["feedback"]


def test_mbpp_test_imports_run_before_the_asserts(tmp_path):
    """Sanitized MBPP lists the imports its asserts need (``test_imports``): its harness runs
    them first, and so does the loader; a solution that does not import math still passes."""
    record = {
        "task_id": 900,
        "prompt": "Write area(r) returning the area of a circle of radius r.",
        "code": "def area(r):\n    return 3.14159 * r * r\n",
        "test_imports": ["import math"],
        "test_list": [
            "assert math.isclose(area(2), 12.566, rel_tol=0.001)",
            "assert math.isclose(area(1), 3.1416, rel_tol=0.001)",
        ],
    }
    path = tmp_path / "mbpp.jsonl"
    path.write_text(json.dumps(record) + "\n")
    env = CodingEnv(tasks=path, dataset_format="mbpp")
    assert _grade(env, "mbpp-900", env.oracle(env.source.get("mbpp-900")))[1] == 13.0
    wrong = "```python\ndef area(r):\n    return r * r\n```"
    assert _grade(env, "mbpp-900", wrong)[1] == 0.0
    path.write_text(json.dumps({**record, "test_imports": "import math"}) + "\n")
    with pytest.raises(error.InvalidTask, match="test_imports"):
        CodingEnv(tasks=path, dataset_format="mbpp").source.get("mbpp-900")
