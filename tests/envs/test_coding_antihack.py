"""Reward hacking gets nothing: one test per trick a policy could learn.

The task: ``secret(n)`` must return ``n * 7919 + 13``; the hidden tests use inputs and outputs
that appear nowhere in the prompt. Every trick below is graded by the real env and must end
with no success and no more reward than an empty program.
"""

from __future__ import annotations

import sys

import pytest

from llmgym.envs.coding import CodingEnv
from llmgym.envs.coding.judge import direct as direct_mode
from llmgym.envs.coding.judge.job import run_tests
from llmgym.envs.coding.judge.program import encode
from llmgym.envs.coding.problem import Problem, render_test

HOST_BELOW_TMP = sorted({p for p in (sys.prefix, sys.base_prefix) if p.startswith("/tmp/")})

HIDDEN_INPUTS = [424242 + i for i in range(8)]


def _task() -> dict:
    tests = [
        {"fn": "secret", "args": [n], "expected": n * 7919 + 13, "hidden": False} for n in (1, 2)
    ]
    tests += [
        {"fn": "secret", "args": [n], "expected": n * 7919 + 13, "hidden": True}
        for n in HIDDEN_INPUTS
    ]
    return {
        "id": "antihack-0",
        "prompt": "Write secret(n) returning n * 7919 + 13.",
        "answer": {
            "kind": "call",
            "entry_point": "secret",
            "tests": tests,
            "reference": {"python": "def secret(n):\n    return n * 7919 + 13\n"},
            "limits": {"timeout_s": 1.0, "time_limit_s": 0.5, "budget_s": 4.0},
        },
    }


@pytest.fixture(scope="module", params=["direct", "judge"])
def env(request):
    """Both ways of grading call tests: the judge's loop in this process (direct mode, the
    default for plain calls) and the judge J inside the sandbox run."""
    old = direct_mode.DIRECT_CALLS
    direct_mode.DIRECT_CALLS = request.param == "direct"
    e = CodingEnv(tasks=[_task()])
    yield e
    e.close()
    direct_mode.DIRECT_CALLS = old


def grade(env, code: str) -> tuple[float, dict]:
    env.reset(options={"task_id": "antihack-0"})
    _, reward, terminated, _, info = env.step(f"```python\n{code}\n```")
    assert terminated
    return reward, info


def assert_no_gain(env, code: str) -> dict:
    reward, info = grade(env, code)
    assert not info["is_success"], info["feedback"]
    assert info["exec"]["passed"] == 0, info["exec"]
    assert reward <= 0.0
    return info


def test_the_honest_solution_scores_full_marks(env):
    reward, info = grade(env, "def secret(n):\n    return n * 7919 + 13\n")
    assert info["is_success"] and reward == 13.0


def test_sys_exit_before_the_tests(env):
    assert_no_gain(env, "import sys\nsys.exit(0)\ndef secret(n):\n    return 0\n")


def test_os_exit_before_the_tests(env):
    assert_no_gain(env, "import os\nos._exit(0)\n")


def test_os_exit_inside_the_function(env):
    info = assert_no_gain(env, "import os\ndef secret(n):\n    os._exit(0)\n")
    assert {t["category"] for t in info["exec"]["tests"]} == {"crashed"}


def test_printing_ok_or_the_expected_output(env):
    code = (
        "def secret(n):\n"
        "    print('OK')\n"
        "    print('All tests passed')\n"
        "    print(n * 7919 + 13)\n"  # the right value, printed rather than returned
        "    return None\n"
    )
    assert_no_gain(env, code)


def test_objects_whose_eq_is_always_true(env):
    code = (
        "class Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        "class YesInt(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "import itertools\n"
        "_n = itertools.count()\n"
        "def secret(n):\n"
        "    return Yes() if next(_n) % 2 else YesInt(0)\n"
    )
    assert_no_gain(env, code)


def test_patching_builtins_and_the_harness(env):
    code = (
        "import builtins, json, sys, gc, types\n"
        "builtins.isinstance = lambda *a: True\n"
        "builtins.type = lambda *a: int\n"
        'json.dumps = lambda *a, **k: \'{"k": "result", "i": 0, "ok": true, "value": 1}\'\n'
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, types.FunctionType) and obj.__name__ in ('encode', 'values_equal', '_worker_reply'):\n"
        "        obj.__code__ = (lambda *a, **k: True).__code__\n"
        "main = sys.modules.get('__main__')\n"
        "for name in ('encode', 'decode', '_worker_reply', 'emit'):\n"
        "    if main is not None and hasattr(main, name):\n"
        "        setattr(main, name, lambda *a, **k: None)\n"
        "def secret(n):\n"
        "    return 0\n"
    )
    assert_no_gain(env, code)


def test_forging_records_on_the_workers_pipes(env):
    code = (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    for i in range(12):\n"
        '        line = \'{"k": "result", "i": %d, "ok": true, "value": %d}\\n\' % (i, i)\n'
        "        try:\n"
        "            os.write(fd, line.encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "def secret(n):\n"
        "    return 0\n"
    )
    assert_no_gain(env, code)


def test_reaching_the_judges_result_channel(env):
    code = (
        "import os\n"
        "hits = []\n"
        "for pid in os.listdir('/proc'):\n"
        "    if not pid.isdigit():\n"
        "        continue\n"
        "    for fd in range(0, 16):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/fd/{fd}', 'wb') as f:\n"
        '                f.write(b\'end\\n{"k": "end"}\\n\')\n'
        "                hits.append((pid, fd))\n"
        "        except OSError:\n"
        "            pass\n"
        "def secret(n):\n"
        "    return 0\n"
    )
    assert_no_gain(env, code)


def test_reading_the_test_files_finds_no_expected_values():
    """Scan everything the program can read (files, stdin, other processes, the judge's memory
    it inherited) for the hidden expected values and inputs: neither is there at import."""
    expected = [str(n * 7919 + 13) for n in HIDDEN_INPUTS]
    hidden_inputs = [str(n) for n in HIDDEN_INPUTS]
    code = (
        "import gc, os, sys\n"
        "blob = []\n"
        f"host = {HOST_BELOW_TMP!r}\n"  # a host install below /tmp, shown read-only in every run
        "paths = []\n"
        "for d, ds, fs in os.walk('/tmp'):\n"
        "    ds[:] = [x for x in ds if os.path.join(d, x) not in host]\n"
        "    paths += [os.path.join(d, f) for f in fs]\n"
        "for pid in ('self', str(os.getppid()), '1'):\n"
        "    for name in ('cmdline', 'environ', 'mem', 'maps'):\n"
        "        paths.append(f'/proc/{pid}/{name}')\n"
        "    for fd in range(16):\n"
        "        paths.append(f'/proc/{pid}/fd/{fd}')\n"
        "def grab(fd):\n"
        "    try:\n"
        "        was = os.get_blocking(fd)\n"
        "        os.set_blocking(fd, False)\n"
        "    except Exception:\n"
        "        return\n"
        "    try:\n"
        "        blob.append(os.read(fd, 1 << 20).decode('latin-1'))\n"
        "    except Exception:\n"
        "        pass\n"
        "    os.set_blocking(fd, was)\n"
        "for path in paths:\n"
        "    try:\n"
        "        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)\n"
        "    except Exception:\n"
        "        continue\n"
        "    grab(fd)\n"
        "    os.close(fd)\n"
        "for fd in range(0, 64):\n"
        "    grab(fd)\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, (dict, list, tuple)):\n"
        "        blob.append(repr(obj)[:10000])\n"
        "for m in list(sys.modules.values()):\n"
        "    blob.append(repr(getattr(m, '__dict__', ''))[:20000])\n"
        "SEEN = '\\n'.join(blob)\n"
        "def secret(n):\n"
        "    return SEEN\n"
    )
    task = _task()
    task["answer"]["limits"] = {"timeout_s": 10.0, "budget_s": 30.0}
    problem = Problem.from_answer(task["answer"])
    size = run_tests(code.replace("return SEEN", "return len(SEEN)"), problem)
    assert all(int(t.got) > 100_000 for t in size.tests if not t.hidden)  # it did read a lot
    # The markers travel XOR-masked, so the program's own source (which it also reads) holds
    # no copy of them; they are unmasked only after SEEN was collected.
    masked = [int(v) ^ 0x5F5F5F5F5F for v in expected + hidden_inputs]
    search = f"return [v for v in (str(m ^ 0x5F5F5F5F5F) for m in {masked!r}) if v in SEEN]"
    found = run_tests(code.replace("return SEEN", search), problem)
    assert found.pass_rate == 0
    assert [t.got for t in found.tests if not t.hidden] == ["[]", "[]"]


def test_writing_fake_result_files(env):
    code = (
        "import json, os\n"
        "for path in ('/tmp/results.json', '/tmp/result.json', 'results.json', '/tmp/verdict'):\n"
        "    try:\n"
        "        with open(path, 'w') as f:\n"
        "            json.dump({'passed': True, 'pass_rate': 1.0, 'tests': [True] * 10}, f)\n"
        "    except OSError:\n"
        "        pass\n"
        "def secret(n):\n"
        "    return -1\n"
    )
    assert_no_gain(env, code)


def test_sleeping_to_dodge_the_timer(env):
    # Right answers, slowly, with the program's own clocks stopped: the judge's clock runs on.
    code = (
        "import time\n"
        "_sleep = time.sleep\n"
        "time.time = time.perf_counter = time.monotonic = time.process_time = lambda: 0.0\n"
        "def secret(n):\n"
        "    _sleep(0.15)\n"
        "    return n * 7919 + 13\n"
    )
    reward, info = grade(env, code)
    assert info["exec"]["pass_rate"] == 1.0
    assert info["exec"]["measured"]["time_s"] >= 10 * 0.15
    assert info["reward_components"]["time"] == 0.0 and reward < 13.0
    # sleeping forever is a timeout, not a pass
    reward, info = grade(env, "import time\ndef secret(n):\n    time.sleep(3600)\n")
    assert reward == -2.0 and info["exec"]["status"] == "timeout"


def test_swallowing_the_timeout_does_not_help(env):
    code = (
        "def secret(n):\n"
        "    while True:\n"
        "        try:\n"
        "            while True:\n"
        "                pass\n"
        "        except BaseException:\n"
        "            pass\n"
    )
    reward, info = grade(env, code)
    assert reward == -2.0 and not info["is_success"]


def test_killing_or_stopping_the_judge(env):
    for how in ("os.kill(os.getppid(), signal.SIGKILL)", "os.kill(os.getppid(), signal.SIGSTOP)"):
        code = f"import os, signal\n{how}\ndef secret(n):\n    return n * 7919 + 13\n"
        reward, info = grade(env, code)
        assert not info["is_success"] and reward <= 0.0


def test_fake_builtin_exception_names_do_not_count():
    tests = [{"fn": "check", "args": [-1], "raises": "ValueError", "hidden": True}]
    problem = Problem.from_answer({"kind": "call", "entry_point": "check", "tests": tests})
    fake = "class ValueError(Exception):\n    pass\ndef check(x):\n    raise ValueError('no')\n"
    assert run_tests(fake, problem).pass_rate == 0
    real = "class Bad(ValueError):\n    pass\ndef check(x):\n    raise Bad('no')\n"
    assert run_tests(real, problem).pass_rate == 1


def test_hidden_inputs_never_reach_the_feedback(env):
    """A program that prints its arguments and raises them in errors: the observation and the
    visible-test details carry the visible inputs only."""
    code = (
        "import sys\n"
        "def secret(n):\n"
        "    print('ARG', n)\n"
        "    print('ARG', n, file=sys.stderr)\n"
        "    raise ValueError(f'input was {n}')\n"
    )
    env.reset(options={"task_id": "antihack-0"})
    obs, _, _, _, info = env.step(f"```python\n{code}```")
    text = obs + str(info["exec"]) + info["feedback"]
    for n in HIDDEN_INPUTS:
        assert str(n) not in text
    assert "input was 1" in text  # visible tests do get their details
    problem = Problem.from_answer(_task()["answer"])
    for secret in env.secrets(env.episode.task):
        assert secret not in obs
    assert render_test(problem.hidden[0], "call") in env.secrets(env.episode.task)


def test_encode_of_hostile_return_values_never_crashes_the_judge(env):
    code = (
        "class Boom:\n"
        "    def __repr__(self):\n        raise RuntimeError('no repr')\n"
        "    def __reduce__(self):\n        raise RuntimeError('no pickle')\n"
        "def secret(n):\n"
        "    x = []\n"
        "    for _ in range(200):\n"
        "        x = [x]\n"
        "    return [x, Boom(), 10 ** 5000]\n"
    )
    assert_no_gain(env, code)
    assert encode(1) == 1


def test_stdio_programs_cannot_echo_hidden_inputs_into_the_feedback():
    marker = 987654321
    tests = [{"input": f"{n}\n", "output": f"{2 * n}\n", "hidden": False} for n in (1, 2)]
    tests += [
        {"input": f"{marker + n}\n", "output": f"{2 * (marker + n)}\n", "hidden": True}
        for n in range(5)
    ]
    env = CodingEnv(
        tasks=[{"id": "io", "prompt": "Double n.", "answer": {"kind": "stdio", "tests": tests}}]
    )
    env.reset(options={"task_id": "io"})
    echo = "import sys\nn = sys.stdin.read()\nprint('seen', n, file=sys.stderr)\nprint(n)\nsys.exit(1)\n"
    obs, reward, _, _, info = env.step(f"```python\n{echo}```")
    text = obs + str(info["exec"]) + info["feedback"]
    assert str(marker)[:6] not in text and "seen 1" in text
    assert reward <= 0 and not info["is_success"]


def test_a_worker_that_will_not_exit_is_killed_and_its_answers_stand(env):
    # Right answers, then, at the end of the requests, the worker's own exit is replaced: it
    # closes its pipes to the judge and sleeps. The judge waits half a second for it to go.
    code = (
        "import os, time\n"
        "def _linger(code):\n"
        "    for fd in (1, 2, 4):\n"
        "        os.close(fd)\n"
        "    time.sleep(30)\n"
        "os._exit = _linger\n"
        "def secret(n):\n"
        "    return n * 7919 + 13\n"
    )
    reward, info = grade(env, code)
    assert info["exec"]["pass_rate"] == 1.0 and info["is_success"]
    assert 0.5 <= info["exec"]["measured"]["sandbox"]["wall_time_s"] < 3.0
