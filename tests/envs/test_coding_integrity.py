"""Reward integrity of the coding envs: what a hostile program can do to the bonuses, to what
the env returns and writes, and to the comparators. Each test is named for its attack.

Every test runs on both ways of grading call tests (direct mode, the judge's loop in this
process, and the judge J inside the sandbox run) and, where the sandbox's own accounting is
involved, on both backends (the docker ones skip without a daemon, and fail instead under
``LLMGYM_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import llmgym
from llmgym.envs.coding import CodingEnv, CodingMultiTurnEnv
from llmgym.envs.coding.families import FAMILIES, families_for
from llmgym.envs.coding.judge import direct as direct_mode
from llmgym.envs.coding.judge import shipping, verdicts
from llmgym.envs.coding.judge.job import run_tests
from llmgym.envs.coding.judge.program import decode
from llmgym.envs.coding.problem import Problem
from llmgym.tasks import ProceduralSource

# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request):
    """The backend's name; its process-wide sandbox is started here (a docker pool takes
    seconds), and an env made with ``sandbox=<name>`` uses that one."""
    try:
        shipping.shared_sandbox(request.param)
    except Exception as exc:  # noqa: BLE001 - no daemon, no SDK, no image
        if request.param == "local":
            raise
        if os.environ.get("LLMGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"docker backend unavailable: {exc} (LLMGYM_REQUIRE_DOCKER=1)")
        pytest.skip(f"docker backend unavailable: {exc}")
    return request.param


@pytest.fixture(params=["direct", "judge"])
def grading(request, monkeypatch):
    """Both ways of grading call tests."""
    monkeypatch.setattr(direct_mode, "DIRECT_CALLS", request.param == "direct")
    return request.param


VISIBLE = ["alpha", "beta"]
HIDDEN = [
    f"zq{n}" for n in (8306151, 5172934, 6620817, 9047312, 7315086, 4481927, 3958264, 2749105)
]
"""Hidden inputs: tokens that cannot appear anywhere by chance (nor in a hostile program's
source, which only knows the prompt). Their digits are searched for too, in case a channel
carries only numbers."""


def _expected(s: str) -> str:
    return s[::-1] + "!"


def call_task(task_id: str = "integrity", **limits) -> dict:
    tests = [
        {"fn": "secret", "args": [s], "expected": _expected(s), "hidden": False} for s in VISIBLE
    ]
    tests += [
        {"fn": "secret", "args": [s], "expected": _expected(s), "hidden": True} for s in HIDDEN
    ]
    limits = {"timeout_s": 2.0, "time_limit_s": 2.0, "budget_s": 20.0, **limits}
    return {
        "id": task_id,
        "prompt": "Write secret(s) returning s reversed followed by '!'.",
        "answer": {
            "kind": "call",
            "entry_point": "secret",
            "tests": tests,
            "reference": {"python": "def secret(s):\n    return s[::-1] + '!'\n"},
            "limits": limits,
        },
    }


HONEST = "def secret(s):\n    return s[::-1] + '!'\n"


def step(env, code: str, task_id: str = "integrity") -> tuple[str, float, dict]:
    env.reset(options={"task_id": task_id})
    obs, reward, _, _, info = env.step(f"```python\n{code}\n```")
    return obs, reward, info


# --- class 1: the memory bonus counts the whole run -------------------------------------------

HOLD_MB = 150
HOLDERS = {
    "in_the_workers_own_memory": f"HELD = b'x' * ({HOLD_MB} << 20)\n",
    "in_a_child_process": (
        "import os, time\n"
        "_r, _w = os.pipe()\n"
        "if os.fork() == 0:\n"
        f"    held = b'x' * ({HOLD_MB} << 20)\n"
        "    os.write(_w, b'1')\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "os.read(_r, 1)\n"  # the child holds it before the first test
    ),
    "in_tmp_files": (
        f"for _k in range({HOLD_MB // 15}):\n"
        "    with open(f'/tmp/held{_k}', 'wb') as _f:\n"
        "        _f.write(b'x' * (15 << 20))\n"
    ),
    "in_dev_shm_files": (
        f"for _k in range({HOLD_MB // 15}):\n"
        "    with open(f'/dev/shm/held{_k}', 'wb') as _f:\n"
        "        _f.write(b'x' * (15 << 20))\n"
    ),
    "in_memfds": (
        "import os\n"
        "_held = []\n"
        f"for _k in range({HOLD_MB // 15}):\n"
        "    _fd = os.memfd_create('held')\n"
        "    os.write(_fd, b'x' * (15 << 20))\n"
        "    _held.append(_fd)\n"
    ),
}


@pytest.mark.parametrize("where", HOLDERS)
def test_memory_held_outside_the_worker_earns_no_memory_bonus(sandbox, grading, where):
    """150 MB held by a correct solution, wherever it is held, is the run's memory: no +2."""
    env = CodingEnv(tasks=[call_task()], sandbox=sandbox)
    _, honest, info = step(env, HONEST)
    assert honest == 13.0, info["feedback"]
    assert info["exec"]["measured"]["peak_memory_mb"] <= 64
    _, reward, info = step(env, HOLDERS[where] + HONEST)
    assert info["exec"]["status"] == "passed", info["exec"]
    assert info["exec"]["measured"]["peak_memory_mb"] >= HOLD_MB
    assert info["reward_components"]["memory"] == 0.0
    assert reward == 11.0


# --- class 2: the time bonus cannot be bought with parallelism --------------------------------

WORK = (
    "def _work(s):\n"
    "    x = 0\n"
    "    for k in range(2_000_000 if s not in ('alpha', 'beta') else 1):\n"
    "        x ^= k\n"
    "    return s[::-1] + '!'\n"
)
SEQUENTIAL = WORK + "def secret(s):\n    return _work(s)\n"
PARALLEL = WORK + (
    "import json, os, sys\n"
    "_done = {}\n"
    "def _all_at_once(args):\n"
    "    kids = []\n"
    "    for arg in args:\n"
    "        r, w = os.pipe()\n"
    "        if os.fork() == 0:\n"
    "            os.write(w, _work(arg).encode())\n"
    "            os._exit(0)\n"
    "        os.close(w)\n"
    "        kids.append((arg, r))\n"
    "    for arg, r in kids:\n"  # the children are never reaped
    "        data = b''\n"
    "        while chunk := os.read(r, 4096):\n"
    "            data += chunk\n"
    "        _done[arg] = data.decode()\n"
    "def secret(s):\n"
    "    if s in _done:\n"
    "        return _done[s]\n"
    "    reader = sys._getframe(1).f_locals.get('reader')\n"  # the worker's buffered requests
    "    if s not in ('alpha', 'beta') and reader is not None:\n"
    "        pending = [json.loads(x)['args'][0] for x in reader.peek().splitlines() if x.strip()]\n"
    "        _all_at_once([s, *pending])\n"
    "        return _done[s]\n"
    "    return _work(s)\n"
)


def test_forking_children_to_answer_in_parallel_earns_no_time_bonus(sandbox, grading):
    """The hidden requests wait in the worker's buffer: a program that forks a child per
    request answers in half the wall time on two cores, for the same CPU. Time is the run's
    CPU (every process, reaped or not) when that is more than the tests' wall time."""
    env = CodingEnv(tasks=[call_task(timeout_s=10.0, time_limit_s=60.0)], sandbox=sandbox)
    _, reward, info = step(env, SEQUENTIAL)
    assert reward == 13.0, info["feedback"]
    cpu = info["exec"]["measured"]["cpu_time_s"]
    # The limit: below the CPU the work takes (so the sequential program gets no time bonus),
    # above the wall time of the same work split over two cores.
    limit = 0.6 * cpu
    env = CodingEnv(tasks=[call_task(timeout_s=10.0, time_limit_s=limit)], sandbox=sandbox)
    _, reward, info = step(env, SEQUENTIAL)
    assert info["exec"]["status"] == "passed" and reward == 12.0
    _, reward, info = step(env, PARALLEL)
    measured = info["exec"]["measured"]
    assert info["exec"]["status"] == "passed", info["exec"]
    assert info["reward_components"]["time"] == 0.0 and reward == 12.0, (limit, measured)
    assert measured["cpu_time_s"] >= 0.6 * cpu  # the children's CPU is counted (J saw 1%)
    assert measured["bonus_time_s"] >= measured["cpu_time_s"]


def test_the_time_bonus_counts_cpu_spent_while_the_module_loads(sandbox, grading):
    """Work done at import time (or by a thread left running) is the run's CPU too."""
    burn = "_x = 0\nfor _k in range(3_000_000):\n    _x ^= _k\n"
    # Generous timeouts: on a loaded 2-core machine the burn alone can take seconds under docker.
    limits = {"time_limit_s": 0.1, "timeout_s": 30.0, "budget_s": 90.0}
    env = CodingEnv(tasks=[call_task(**limits)], sandbox=sandbox)
    _, reward, info = step(env, burn + HONEST)
    assert info["exec"]["status"] == "passed", info["exec"]
    assert reward == 12.0, info["exec"]["measured"]
    assert info["exec"]["measured"]["bonus_time_s"] > 0.1


# --- class 3: hidden inputs never reach what the env returns or writes ------------------------

_FORGE = (
    "import gc, io, itertools, json, os, re, sys\n"
    "VISIBLE = ('alpha', 'beta')\n"
    "def _pending_requests():\n"  # what waits on the worker's request pipe, replayed to it later
    "    f = sys._getframe()\n"
    "    while f is not None and 'requests' not in f.f_locals:\n"
    "        f = f.f_back\n"
    "    if f is None:\n"
    "        return ''\n"
    "    fd, data = f.f_locals['requests'], b''\n"
    "    was = os.get_blocking(fd)\n"
    "    os.set_blocking(fd, False)\n"
    "    try:\n"
    "        while chunk := os.read(fd, 1 << 16):\n"
    "            data += chunk\n"
    "    except OSError:\n"
    "        pass\n"
    "    os.set_blocking(fd, was)\n"
    "    if data:\n"
    "        real = os.fdopen\n"
    "        def replay(fd, *a, **k):\n"
    "            os.fdopen = real\n"
    "            return itertools.chain(io.BytesIO(data), real(fd, *a, **k))\n"
    "        os.fdopen = replay\n"
    "    return data.decode('latin-1')\n"
    "def _hidden_args():\n"
    "    found = [_pending_requests()]\n"
    "    for obj in gc.get_objects():\n"  # a worker forked from the judge: the judge's memory
    "        if isinstance(obj, dict) and obj.get('fn') == 'secret':\n"
    "            found.append(repr(obj.get('args')))\n"
    "    for path in ('/tmp/stash', '/dev/shm/stash', 'stash'):\n"  # an earlier run's stash
    "        try:\n"
    "            found.append(open(path).read())\n"
    "        except OSError:\n"
    "            pass\n"
    "    return sorted(set(re.findall(r'zq[0-9]+', ' '.join(found))))\n"
    "def _stash(s):\n"
    "    for path in ('/tmp/stash', '/dev/shm/stash', 'stash'):\n"
    "        try:\n"
    "            with open(path, 'a') as f:\n"
    "                f.write(s + ' ')\n"
    "        except OSError:\n"
    "            pass\n"
    "def _say(rec):\n"  # on the worker's reply pipe (judge J) or the result channel (direct mode)
    "    line = (json.dumps(rec) + '\\n').encode()\n"
    "    for fd in (3, 4):\n"
    "        try:\n"
    "            os.write(fd, line)\n"
    "        except OSError:\n"
    "            pass\n"
)
LEAKERS = {
    "exception_type_name_and_message_in_the_reply": (
        "import sys\n"
        "_current = ['']\n"
        "def secret(s):\n"
        "    g = sys._getframe(1).f_globals\n"
        "    send = g['_worker_reply']\n"
        "    if not getattr(send, 'forged', False):\n"
        "        def forged(obj, _send=send):\n"
        "            if obj.get('k') == 'result':\n"
        "                a = _current[0]\n"
        "                obj = {'k': 'result', 'i': obj['i'], 'ok': False, 'm': int(a[2:] or 0),\n"
        "                       't': int(a[2:] or 0), 'error': {'type': a, 'name': a, 'msg': a, 'tb': a}}\n"
        "            _send(obj)\n"
        "        forged.forged = True\n"
        "        g['_worker_reply'] = forged\n"
        "    _current[0] = s if s.startswith('zq') else ''\n"
        "    return s\n"
    ),
    "exception_class_named_for_the_input": (
        "def secret(s):\n    raise type('E' + s, (ValueError,), {})(s * 3)\n"
    ),
    "stdout_and_stderr": (
        "import sys\n"
        "def secret(s):\n"
        "    print('seen', s)\n"
        "    print('seen', s, file=sys.stderr)\n"
        "    sys.stdout.flush()\n"
        "    return s\n"
    ),
    "records_on_the_result_channel": _FORGE
    + (
        "def secret(s):\n"
        "    if s not in VISIBLE:\n"
        "        for i in range(12):\n"
        "            _say({'k': 'result', 'i': i, 'ok': False, 'm': int(s[2:]),\n"
        "                  'error': {'type': s, 'name': s, 'msg': s, 'tb': s}})\n"
        "        _say({'k': 'compile', 'ok': False, 'error': s})\n"
        "        _say({'k': 'import', 'ok': False, 'error': {'type': s, 'msg': s, 'tb': s}})\n"
        "        _say({'k': 'output', 'phase': 'visible', 'stdout': s, 'stderr': s})\n"
        "    return s\n"
    ),
    "a_traceback_and_exit_status": (
        "import os, sys\n"
        "def secret(s):\n"
        "    if s.endswith('1'):\n"
        "        sys.exit('crashed on ' + s)\n"
        "    if s.endswith('4'):\n"
        "        os._exit(int(s[2:]) % 256)\n"
        "    raise RuntimeError('failed on ' + s)\n"
    ),
    "a_restarted_worker_forges_a_compile_or_import_failure": _FORGE
    + (
        "_seen = ' '.join(_hidden_args())\n"
        "if _seen:\n"
        "    _say({'k': 'compile', 'ok': False, 'error': _seen})\n"
        "    _say({'k': 'import', 'ok': False, 'error': {'type': _seen, 'name': _seen, 'msg': _seen}})\n"
        "    raise ImportError(_seen)\n"
        "def secret(s):\n"
        "    if s not in VISIBLE:\n"
        "        _stash(s)\n"
        "        os._exit(1)\n"  # the next test gets a fresh worker, which finds the inputs
        "    return s\n"
    ),
    "a_stash_for_a_later_visible_test": _FORGE
    + (
        "_seen = ' '.join(_hidden_args())\n"
        "def secret(s):\n"
        "    if s in VISIBLE:\n"
        "        return _seen or s\n"
        "    _stash(s)\n"
        "    return {'stash': s}\n"
    ),
    "a_huge_value_holding_the_input": "def secret(s):\n    return [s] * 200_000\n",
}


def _secrets() -> list[str]:
    return HIDDEN + [h[2:] for h in HIDDEN] + [_expected(h) for h in HIDDEN]


def _leaks(text: str) -> list[str]:
    return [s for s in _secrets() if s in text]


@pytest.mark.parametrize("leaker", LEAKERS)
def test_a_hostile_program_cannot_carry_hidden_inputs_into_what_the_env_returns(
    sandbox, grading, leaker, caplog
):
    """Two attempts of a multi-turn episode (the second finds what the first stashed, if
    anything survives a run): observations, info, the rendered transcript and the logs."""
    env = CodingMultiTurnEnv(tasks=[call_task()], sandbox=sandbox, max_turns=3, render_mode="ansi")
    env.reset(options={"task_id": "integrity"})
    text = ""
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            obs, reward, _, _, info = env.step(f"```python\n{LEAKERS[leaker]}\n```")
            assert not info["is_success"] and reward == 0.0
            assert max(len(t.get("error") or "") for t in info["exec"]["tests"]) <= 8000
            text += obs + json.dumps(info, default=str)
        text += (env.render() or "") + caplog.text
    assert not _leaks(text), _leaks(text)


def test_a_hostile_program_cannot_carry_hidden_inputs_into_evaluation_outputs(
    sandbox, grading, tmp_path
):
    """Every channel in turn, one per attempt of a multi-turn episode, through llmgym.evaluate:
    results.jsonl, summary.json, report.html and everything else it writes stay clean."""

    programs = list(LEAKERS.values())

    def hostile(messages, tools):
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return f"```python\n{programs[turn % len(programs)]}\n```"

    tasks = tmp_path / "tasks.jsonl"  # a dataset on disk, as an evaluation names it
    tasks.write_text(json.dumps(call_task()) + "\n")
    entry = {
        "id": "llm/CodingMultiTurn-v0",
        "kwargs": {"tasks": str(tasks), "max_turns": len(programs), "sandbox": sandbox},
    }
    out = tmp_path / "eval"
    llmgym.evaluate([entry], hostile, out=out, episodes=1, progress=False)
    written = {p: p.read_text("utf-8", "replace") for p in out.rglob("*") if p.is_file()}
    results = [p for p in written if p.name == "results.jsonl"]
    assert results
    records = [json.loads(line) for line in written[results[0]].splitlines()]
    assert records[0]["turns"] == len(programs)
    for record in records:
        # The task itself, gold included, is what the evaluation stores on purpose (to
        # reverify offline): everything else in the record came from the episode.
        record.pop("task")
        written[results[0]] = json.dumps(records)
    for path, text in written.items():
        assert not _leaks(text), (path.name, _leaks(text))


STDIO_HIDDEN = HIDDEN[:5]


def stdio_task() -> dict:
    tests = [{"input": f"{s}\n", "output": f"{_expected(s)}\n", "hidden": False} for s in VISIBLE]
    tests += [
        {"input": f"{s}\n", "output": f"{_expected(s)}\n", "hidden": True} for s in STDIO_HIDDEN
    ]
    return {"id": "integrity-io", "prompt": "Print the line reversed followed by '!'.",
            "answer": {"kind": "stdio", "tests": tests}}  # fmt: skip


STDIO_LEAKERS = {
    "echo_and_crash": (
        "import sys\n"
        "s = sys.stdin.read()\n"
        "print('seen', s)\n"
        "print('seen', s, file=sys.stderr)\n"
        "sys.exit('crashed on ' + s)\n"
    ),
    "rewrite_the_source_with_a_syntax_error_and_kill_the_server": (
        "import os, signal, sys\n"
        "s = sys.stdin.read().strip()\n"
        "if s not in ('alpha', 'beta'):\n"
        "    for path in ('solution.py', 'main.py', sys.argv[0]):\n"
        "        try:\n"
        "            with open(path, 'w') as f:\n"
        "                f.write(s + ' = (\\n' + s + ' ' + s + '\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "print(s[::-1] + '!')\n"
    ),
}


@pytest.mark.parametrize("leaker", STDIO_LEAKERS)
def test_a_stdio_program_cannot_carry_hidden_inputs_into_what_the_env_returns(sandbox, leaker):
    env = CodingMultiTurnEnv(tasks=[stdio_task()], sandbox=sandbox, max_turns=3, render_mode="ansi")
    obs, reward, info = step(env, STDIO_LEAKERS[leaker], "integrity-io")
    text = obs + json.dumps(info, default=str) + (env.render() or "")
    assert not info["is_success"]
    assert not _leaks(text), _leaks(text)


def test_hidden_error_types_are_builtin_names_or_a_placeholder(grading):
    problem = Problem.from_answer(call_task()["answer"])
    verdict = run_tests(LEAKERS["exception_type_name_and_message_in_the_reply"], problem)
    hidden = [t.error for t in verdict.tests if t.hidden]
    assert hidden and all(e == "raised an exception" for e in hidden), hidden
    raises = "def secret(s):\n    raise KeyError(s)\n"
    hidden = [t.error for t in run_tests(raises, problem).tests if t.hidden]
    assert hidden == ["raised KeyError"] * len(HIDDEN)


def test_candidate_strings_in_info_are_capped(grading):
    """Replies can be forged in any size (a reply may be as large as the answer cap): what
    reaches info is capped all the same."""
    huge = (
        "import sys\n"
        "def secret(s):\n"
        "    g = sys._getframe(1).f_globals\n"
        "    send = g['_worker_reply']\n"
        "    def forged(obj, _send=send):\n"
        "        if obj.get('k') == 'result':\n"
        "            obj = {'k': 'result', 'i': obj['i'], 'ok': False,\n"
        "                   'error': {'type': 'E' * 30000, 'name': 'N' * 30000, 'msg': 'M' * 30000,\n"
        "                             'tb': 'T' * 30000}}\n"
        "        _send(obj)\n"
        "    g['_worker_reply'] = forged\n"
        "    raise ValueError('x')\n"
    )
    problem = Problem.from_answer(call_task()["answer"])
    verdict = run_tests(huge, problem)
    info = verdict.to_info(problem)
    assert all(len(t["error"] or "") <= 8000 for t in info["tests"])
    assert not re.search("E{200}|N{200}", json.dumps(info))


# --- class 4: no returned value crashes the comparators ---------------------------------------

HOSTILE_VALUES = {
    "a_huge_int": "v = 10 ** 400",
    "a_huger_int": "v = 10 ** 4000",
    "a_negative_huge_int": "v = -(10 ** 400)",
    "nan": "v = float('nan')",
    "inf": "v = float('inf')",
    "deep_nesting": "v = []\n    for _ in range(99):\n        v = [v, 10 ** 400]",
    "too_deep_nesting": "v = []\n    for _ in range(5000):\n        v = [v]",
    "a_huge_string": "v = '9' * 60000",
    "bytes": "v = b'\\xff' * 100",
    "a_set_of_tuples": "v = {(1, 2), (3,)}",
    "a_frozenset": "v = frozenset({10 ** 400})",
    "a_dict_with_tuple_keys": "v = {(1, 10 ** 400): float('nan')}",
    "a_list_of_huge_ints": "v = [10 ** 400, -(10 ** 400), 10 ** 300]",
    "a_tuple_of_mixed": "v = (None, True, 1.5, 'a', b'b', [float('inf')])",
    "a_tagged_looking_dict": "v = {'$float': 'nan', '$set': 1}",
}


def _call_problem(mode: str) -> Problem:
    expected = [0.5, 0.5, [0.5, 1.5, 2.5], {"a": [0.5, 2]}, {"$set": [0.5, 1.5]}, "0.5"]
    tests = [
        {"fn": "f", "args": [k], "expected": e, "hidden": k >= 1} for k, e in enumerate(expected)
    ]
    return Problem.from_answer(
        {"kind": "call", "entry_point": "f", "tests": tests, "compare": {"mode": mode}}
    )


def _assert_wrong(verdict) -> None:
    assert verdict.status in ("failed", "runtime_error"), (verdict.status, verdict.detail)
    assert verdict.pass_rate == 0.0
    assert all(t.category in ("wrong_answer", "error") for t in verdict.tests), verdict.tests


@pytest.mark.parametrize("mode", ["exact", "float", "unordered"])
@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_hostile_return_value_is_a_wrong_answer_not_a_sandbox_error(grading, mode, value):
    code = f"def f(k):\n    {HOSTILE_VALUES[value]}\n    return v\n"
    _assert_wrong(run_tests(code, _call_problem(mode)))


FORGED_VALUES = {
    "deep_json": "[" * 900 + "]" * 900,
    "deeper_json": "[" * 50000 + "]" * 50000,
    "a_4000_digit_int": "9" * 4000,
    "a_5000_digit_int": "9" * 5000,
    "a_float_overflow": "1e999",
    "nan_literal": "NaN",
    "infinity_literal": "[Infinity, -Infinity]",
    "a_bad_tuple": '{"$tuple": 5}',
    "an_unhashable_dict_key": '{"$dict": [[[1], 2]]}',
    "an_unhashable_set_item": '{"$set": [[1]]}',
    "bad_hex": '{"$bytes": "zz"}',
    "a_bad_float_tag": '{"$float": "1e999"}',
    "a_dollar_key": '{"$x": 1, "y": 2}',
    "huge_ints_in_a_list": "[" + ",".join(["9" * 4000] * 3) + "]",
    "a_set_of_huge_ints": '{"$set": [' + ",".join(["9" * 4000, "1e308", "NaN"]) + "]}",
}


@pytest.mark.parametrize("mode", ["exact", "float", "unordered"])
@pytest.mark.parametrize("raw", FORGED_VALUES)
def test_a_forged_raw_reply_is_a_wrong_answer_not_a_sandbox_error(grading, mode, raw):
    """Values the codec never makes, written as the worker's reply by the candidate itself."""
    code = (
        "import os, sys\n"
        "def f(k):\n"
        "    g = sys._getframe(1).f_globals\n"
        "    fd = g['_REPLIES'][0]\n"
        "    def forged(obj):\n"
        "        if obj.get('k') != 'result':\n"
        "            return\n"
        f'        line = \'{{"k": "result", "i": %d, "ok": true, "value": %s}}\\n\' % (obj[\'i\'], {FORGED_VALUES[raw]!r})\n'
        "        os.write(fd, line.encode())\n"
        "    g['_worker_reply'] = forged\n"
        "    return 0\n"
    )
    _assert_wrong(run_tests(code, _call_problem(mode)))


def test_a_huge_int_on_a_float_compared_task_scores_as_a_wrong_answer(grading):
    """The example of the issue: 10**400 raised OverflowError in the parent's comparator, and
    the wrong answer came back as sandbox_error with reward 0 instead of failed tests."""
    env = CodingEnv(
        tasks=[
            {
                "id": "float-task",
                "prompt": "Return half of n.",
                "answer": {
                    "kind": "call",
                    "entry_point": "half",
                    "compare": {"mode": "float"},
                    "tests": [
                        {"fn": "half", "args": [n], "expected": n / 2, "hidden": n > 2}
                        for n in range(1, 9)
                    ],
                },
            }
        ]
    )
    code = "def half(n):\n    return 10 ** 400 if n in (4, 6) else n / 2\n"
    _, reward, info = step(env, code, "float-task")
    assert info["exec"]["status"] == "failed", info["exec"]["detail"]
    assert info["exec"]["passed"] == 4 and reward == pytest.approx(10 * 4 / 6)


@pytest.mark.parametrize("mode", ["tokens", "exact", "lines", "float", "unordered"])
def test_hostile_stdio_output_is_a_wrong_answer_not_a_sandbox_error(mode):
    tests = [{"input": f"{k}\n", "output": "0.5 1.5\n", "hidden": k >= 1} for k in range(4)]
    problem = Problem.from_answer({"kind": "stdio", "tests": tests, "compare": {"mode": mode}})
    code = (
        "import sys\n"
        "k = int(sys.stdin.read())\n"
        "out = ['9' * 5000, '1e999', 'nan', '-inf', '\\udcff', '\\x00' * 100, '0.5 ' * 20000][k % 7]\n"
        "sys.stdout.buffer.write(out.encode('utf-8', 'surrogateescape') + b'\\xff\\xfe\\n')\n"
    )
    verdict = run_tests(code, problem)
    assert verdict.status in ("failed", "runtime_error"), (verdict.status, verdict.detail)
    assert verdict.pass_rate == 0.0


_TAGS = ["$tuple", "$set", "$frozenset", "$dict", "$float", "$bytes", "$x"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**500)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["nan", "inf", "-inf", "zz", "00ff", "ValueError", "timeout", "exited"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.sampled_from(_TAGS), inner, max_size=2)
    ),
    max_leaves=12,
)
_KINDS = ["start", "test", "compile", "import", "static", "output", "usage", "end", "junk"]
records = st.lists(
    st.fixed_dictionaries(
        {"k": st.sampled_from(_KINDS)},
        optional={
            "i": st.integers(-1, 6) | json_values,
            "ok": st.booleans() | json_values,
            "value": json_values,
            "error": json_values
            | st.fixed_dictionaries(
                {"type": json_values}, optional={"name": json_values, "msg": json_values}
            ),
            "phase": st.sampled_from(["visible", "hidden"]) | json_values,
            "stdout": json_values,
            "stderr": json_values,
            "wall_s": json_values,
            "mem_mb": json_values,
            "cpu_s": json_values,
            "peak_mb": json_values,
            "facts": json_values,
        },
    ),
    max_size=10,
)


_START = {"k": "start", "mode": "call", "visible": 1}


@settings(max_examples=400, deadline=None, derandomize=True)
@given(records=records, mode=st.sampled_from(["exact", "float", "unordered"]))
@example(records=[_START, {"k": "test", "i": 1, "ok": True, "value": 10**400}], mode="float")
@example(records=[_START, {"k": "test", "i": 2, "ok": True, "value": [10**400]}], mode="unordered")
@example(records=[_START, {"k": "test", "i": 1, "ok": True, "wall_s": 10**400}], mode="exact")
@example(records=[_START, {"k": "test", "i": 0, "ok": False, "error": {"type": [1]}}], mode="exact")
@example(records=[_START, {"k": "import", "ok": False, "error": {"name": {"a": 1}}}], mode="exact")
def test_no_record_stream_can_crash_the_parents_verdict(records, mode):
    """Whatever J (or a worker forging J's records) reports, the verdict is made and info is
    plain JSON: a hostile record is a failure of what it touches, never an exception here."""
    from llmgym.sandbox import ExecResult

    problem = _call_problem(mode)
    res = ExecResult("ok", 0, None, "", "", 0.1, 0.1, 3.0)
    verdict = verdicts.verdict_from_records(problem, records, "", res, {}, "python")
    json.dumps(verdict.to_info(problem), allow_nan=True)
    assert not any(t.passed for t in verdict.tests if t.hidden) or any(
        r.get("k") == "test" and r.get("ok") for r in records
    )


# --- class 5: nothing derived from the prompt alone reaches the oracle's reward ---------------

SOURCE = ProceduralSource(FAMILIES, domain="coding")
PYTHON_FAMILIES = [f.name for f in families_for("python")]

_LITERALS = "inf = float('inf')\nnan = float('nan')\n"


def _function(fn: str, body: str) -> str:
    """A function (or ``Class.method``) named ``fn`` that runs ``body`` on ``(a, k)``."""
    owner, dot, method = fn.partition(".")
    body = "\n".join("        " + line for line in body.splitlines())
    if dot:
        return f"class {owner}:\n    def {method}(self, *a, **k):\n{body}\n"
    return f"def {owner}(*a, **k):\n    if True:\n{body}\n"


def _answer_of(test: dict) -> str:
    """Statements that give a visible test's shown answer: return its value, or raise."""
    if "raises" in test:
        return f"raise __builtins__['{test['raises']}']() if isinstance(__builtins__, dict) else getattr(__builtins__, '{test['raises']}')()"
    return f"return {decode(test['expected'])!r}"


def _if_chain(problem: Problem, fallback_index: int = 0) -> str:
    """Every function asked for: an if-chain over the visible calls, else a visible answer."""
    by_fn: dict[str, list[dict]] = {}
    for t in problem.visible:
        by_fn.setdefault(t["fn"], []).append(t)
    code = [_LITERALS]
    for fn in {t["fn"] for t in problem.tests}:
        seen = by_fn.get(fn) or problem.visible
        lines = []
        for t in seen:
            key = repr((decode(t["args"]), sorted(decode(t.get("kwargs") or {}).items())))
            lines.append(f"if repr((list(a), sorted(k.items()))) == {key!r}:\n    {_answer_of(t)}")
        lines.append(_answer_of(seen[min(fallback_index, len(seen) - 1)]))
        code.append(_function(fn, "\n".join(lines)))
    return "\n".join(code)


def _stdio_chain(problem: Problem, fallback_index: int = 0) -> str:
    table = {t["input"]: t["output"] for t in problem.visible}
    first = problem.visible[min(fallback_index, len(problem.visible) - 1)]["output"]
    return (
        f"import sys\ndata = sys.stdin.read()\nsys.stdout.write({table!r}.get(data, {first!r}))\n"
    )


def prompt_derived(task, problem: Problem) -> dict[str, str]:
    """Responses a policy can build from the prompt alone (the prompt's own text and code
    blocks, the visible examples as literals, if-chains over them, their outputs printed)."""
    out = {"the_prompt": task.prompt}
    for k, block in enumerate(re.findall(r"```[a-z+]*\n(.*?)```", task.prompt, re.S)):
        out[f"code_block_{k}"] = f"```python\n{block}```"
    if problem.kind == "stdio":
        for k, t in enumerate(problem.visible):
            out[f"print_visible_output_{k}"] = f"import sys\nsys.stdout.write({t['output']!r})\n"
        for k in range(len(problem.visible)):
            out[f"if_chain_else_{k}"] = _stdio_chain(problem, k)
    else:
        fns = {t["fn"] for t in problem.tests}
        for k, t in enumerate(problem.visible):
            body = _LITERALS + "\n".join(_function(fn, _answer_of(t)) for fn in fns)
            out[f"return_visible_answer_{k}"] = body
            if "expected" in t:
                shown = repr(decode(t["expected"]))
                out[f"print_visible_answer_{k}"] = "\n".join(
                    _function(fn, f"print({shown!r})\nreturn None") for fn in fns
                )
        for k in range(len(problem.visible)):
            out[f"if_chain_else_{k}"] = _if_chain(problem, k)
    return {
        name: text if name == "the_prompt" or text.startswith("```") else f"```python\n{text}```"
        for name, text in out.items()
    }


@pytest.fixture(scope="module")
def coding_env():
    env = CodingEnv()
    yield env
    env.close()


def _assert_below_the_oracle(env, task, name: str, response: str) -> dict:
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step(response)
    assert not info["is_success"] and reward < 13.0, (task.id, name, info["exec"]["status"])
    assert info["exec"]["pass_rate"] < 1.0 or info["exec"]["status"] != "passed"
    return info


@pytest.mark.parametrize("family", PYTHON_FAMILIES)
def test_an_if_chain_over_the_visible_examples_never_passes(coding_env, family, grading):
    """The strongest derivation, on every family: the visible calls answered from a table,
    anything else with one of the visible answers."""
    task = SOURCE.build(family, 0.5, 0)
    problem = Problem.from_answer(task.answer)
    for name, response in prompt_derived(task, problem).items():
        if name.startswith("if_chain"):
            info = _assert_below_the_oracle(coding_env, task, name, response)
            # It is a real attempt: every visible example passes.
            assert info["exec"]["visible_passed"] == info["exec"]["visible_total"], (name, info)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    family=st.sampled_from(PYTHON_FAMILIES),
    difficulty=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    index=st.integers(0, 1000),
    pick=st.integers(0, 1000),
)
def test_no_response_derived_from_the_prompt_alone_reaches_the_oracles_reward(
    coding_env, family, difficulty, index, pick
):
    task = SOURCE.build(family, difficulty, index)
    problem = Problem.from_answer(task.answer)
    derived = prompt_derived(task, problem)
    name = sorted(derived)[pick % len(derived)]
    _assert_below_the_oracle(coding_env, task, name, derived[name])


# --- constant answers: no expected answer dominates the hidden tests ------------------------------


@pytest.mark.parametrize("family", sorted(f.name for f in FAMILIES))
def test_constant_answer_attack_no_answer_is_expected_by_more_than_half_the_hidden_tests(
    family: str,
) -> None:
    """``return False``, ``print(0)`` or the visible examples' answers replayed for every input
    pass every hidden test whose expected answer is that value: no family may let one answer
    decide more than half of a task's hidden tests (10 * 0.5 = 5 points, below half the oracle's
    13), at any difficulty."""
    source = CodingEnv().source
    for difficulty in (0.0, 0.5, 1.0):
        for index in (0, 1):
            task = source.build(family, difficulty, index)  # type: ignore[attr-defined]
            hidden = [t for t in task.answer["tests"] if t["hidden"]]
            keys = [
                " ".join(str(t["output"]).split()) if "output" in t
                else json.dumps(t.get("expected", t.get("raises", t.get("script"))), sort_keys=True)
                for t in hidden
            ]  # fmt: skip
            value, count = Counter(keys).most_common(1)[0]
            assert count <= len(hidden) // 2, (task.id, value[:80], count, len(hidden))
