"""The math verifier: the labeled corpus, the documented semantics, the API, and safety."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from llmgym.rewards.math import extract_answer, math_equal, math_reward, math_verifier

CORPUS = Path(__file__).resolve().parent.parent / "data" / "math_corpus.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]

KNOWN_FAILURES: dict[str, str] = {}
"""Corpus ids the verifier is known to get wrong, with the reason. Empty: it gets all right."""

CATEGORIES = {
    "integers_separators",
    "decimals",
    "scientific",
    "fractions",
    "latex",
    "unicode",
    "percent",
    "symbolic",
    "tuples",
    "sets",
    "solution_lists",
    "intervals",
    "unions",
    "equations",
    "inequalities",
    "matrices",
    "multiple_choice",
    "units_text",
    "complex",
    "infinity",
    "empty_set",
    "extraction",
    "hedging",
    "changed_answer",
    "reward_hacking",
    "gold_mid_reasoning",
    "huge_numbers",
    "pathological",
    "cot_realistic",
}


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_is_well_formed() -> None:
    assert len(ROWS) >= 300
    ids = [r["id"] for r in ROWS]
    assert len(set(ids)) == len(ids)
    assert len({(r["response"], r["gold"]) for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert set(r) == {"id", "response", "gold", "equal", "category", "note"}, r["id"]
        assert isinstance(r["equal"], bool)
    counts = Counter(r["category"] for r in ROWS)
    assert set(counts) >= CATEGORIES, CATEGORIES - set(counts)
    # both verdicts are well represented, so a checker answering always True or always False
    # cannot pass
    assert sum(r["equal"] for r in ROWS) >= 100
    assert sum(not r["equal"] for r in ROWS) >= 100


@pytest.fixture
def strict_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Surface internal exceptions, which the verifier otherwise turns into "not equal"."""
    import importlib

    monkeypatch.setattr(
        importlib.import_module("llmgym.rewards.math.verifier"), "_RAISE_INTERNAL_ERRORS", True
    )


def test_verifier_scores_100_percent_on_the_corpus(strict_errors: None) -> None:
    wrong = []
    for r in ROWS:
        if r["id"] in KNOWN_FAILURES:
            continue
        # a generous timeout: this test is about verdicts (benchmarks/ measures speed), and a
        # loaded CI machine must not turn a slow sympy call into a wrong one
        got = math_equal(r["response"], r["gold"], timeout_s=30)
        if got is not r["equal"]:
            wrong.append(
                f"{r['id']} [{r['category']}] expected {r['equal']}: gold={r['gold'][:60]!r}"
            )
    assert not wrong, f"{len(wrong)} of {len(ROWS)} wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("row_id", sorted(KNOWN_FAILURES))
def test_known_failures_still_fail(row_id: str) -> None:  # pragma: no cover - none listed
    row = next(r for r in ROWS if r["id"] == row_id)
    assert math_equal(row["response"], row["gold"]) is not row["equal"], "fixed: drop it"


# ---------------------------------------------------------------------------------------------
# Documented semantics (see the module docstring of llmgym.rewards.math)
# ---------------------------------------------------------------------------------------------

SEMANTICS = [
    # percent is a unit, never scaled
    ("50%", "50", True),
    (r"50\%", "50", True),
    ("50%", "0.5", False),
    ("0.5", r"50\%", False),
    ("50 percent", r"50\%", True),
    # units are dropped, not converted
    ("5 cm", "5", True),
    (r"5\text{ cm}", r"50\text{ mm}", False),
    (r"30^\circ", "30", True),
    (r"30^\circ", r"\frac{\pi}{6}", True),
    ("30", r"\frac{\pi}{6}", False),
    (r"30 \text{ degrees}", r"30^\circ", True),
    (r"\sin 30^\circ", "0.5", True),
    # tuples are ordered, sets are not, bare lists are solution lists (unordered)
    ("(1, 2)", "(2, 1)", False),
    (r"\{1, 2\}", r"\{2, 1\}", True),
    ("1, 2", "2, 1", True),
    ("1, 2", r"\{1, 2\}", True),
    ("(1, 2)", "1, 2", False),
    ("[1, 2]", "(1, 2)", False),
    ("[1, 2, 3]", "(1, 2, 3)", True),
    # solution lists
    ("x = 1, 2", "2, 1", True),
    (r"x = 1 \text{ or } x = 2", "1, 2", True),
    (r"x \in \{1, 2\}", "2, 1", True),
    (r"x = \pm 1", "-1, 1", True),
    # assignments and equations
    ("x = 3", "3", True),
    ("3", "x = 3", True),
    ("y = 3", "x = 3", False),
    ("x=1, y=2", "y=2, x=1", True),
    ("x=1, y=2", "(1, 2)", True),
    ("y=2, x=1", "(1, 2)", True),
    ("y = 2x + 1", "2x - y + 1 = 0", True),
    (r"3 \times 4 = 12", "12", True),
    # intervals and inequalities
    ("[1, 3)", "[1, 3]", False),
    ("x > 2", r"(2, \infty)", True),
    (r"x \ge 2", r"(2, \infty)", False),
    (r"[2, \infty]", r"[2, \infty)", True),
    (r"x < 0 \text{ or } x > 3", r"(-\infty, 0) \cup (3, \infty)", True),
    # strictness and explicit tolerance
    ("0.333", r"\frac{1}{3}", False),
    ("3.14", r"\pi", False),
    # multiple choice
    ("(B)", "B", True),
    ("B)", "B", True),
    (r"\text{(B)}", "B", True),
    ("B. 42", "B", True),
    ("(A), (C)", "A", False),
    # numbers in a base
    ("1010", "1010_2", True),
    ("10", "1010_2", False),
    # special answers
    ("no solution", r"\emptyset", True),
    ("DNE", "undefined", True),
    (r"\emptyset", r"\text{undefined}", False),
    (r"\mathbb{R}", r"(-\infty, \infty)", True),
]


@pytest.mark.parametrize(("answer", "gold", "expected"), SEMANTICS)
def test_documented_semantics(answer: str, gold: str, expected: bool, strict_errors: None) -> None:
    assert math_equal(answer, gold) is expected


def test_tolerances_are_explicit() -> None:
    assert not math_equal("3.14", r"\pi")
    assert math_equal("3.14", r"\pi", abs_tol=0.01)
    assert not math_equal("3.14", r"\pi", abs_tol=0.001)
    assert math_equal("0.333", "1/3", rel_tol=1e-2)
    assert not math_equal("0.333", "1/3", rel_tol=1e-4)
    assert math_equal("(3.14, 2.72)", r"(\pi, e)", abs_tol=0.01)
    assert math_equal("101", "100", rel_tol=0.01)


# ---------------------------------------------------------------------------------------------
# extract_answer
# ---------------------------------------------------------------------------------------------

EXTRACTIONS = [
    (r"so the answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
    (r"\fbox{7}", "7"),
    (r"\boxed 5", "5"),
    (r"\boxed{\boxed{5}}", "5"),
    (r"first \boxed{1}. Wait, that is wrong; redo: \boxed{2}", "2"),
    (r"\boxed{5}. Indeed \boxed{5}.", "5"),
    (r"The roots are $\boxed{2}$ and $\boxed{3}$.", "2, 3"),
    ("The answer is 42.", "42"),
    ("The answer is 3.5.", "3.5"),
    ("Final Answer: The final answer is $12$. I hope it is correct.", "12"),
    ("**Final Answer**\n\n$$\\frac{7}{2}$$", r"\frac{7}{2}"),
    ("Answer: x = 5", "x = 5"),
    ("#### 18", "18"),
    ("<think>maybe 3</think>\nThe answer is 4.", "4"),
    ("x = 5 meters", "x = 5 meters"),
    ("It costs 3 dollars, so she pays 12 in total", "12"),
    ("We get $x = 7$.", "x = 7"),
]


@pytest.mark.parametrize(("response", "expected"), EXTRACTIONS)
def test_extract_answer(response: str, expected: str, strict_errors: None) -> None:
    assert extract_answer(response) == expected


HEDGES = [
    "The answer is 1 or 2.",
    "It is either 3 or 4.",
    r"\boxed{3} or \boxed{4}",
    r"\boxed{3}\boxed{4}",
    r"\boxed{3 \text{ or } 4}",
    r"\boxed{3}, or possibly \boxed{4}",
    "The answer is $3$ or maybe $4$.",
]


@pytest.mark.parametrize("response", HEDGES)
def test_hedges_get_no_answer_and_no_credit(response: str) -> None:
    assert extract_answer(response) is None
    for gold in ("3", "4", "1", "2"):
        assert not math_equal(response, gold)
    result = math_reward(response, "3")
    assert result.score == 0.0
    assert result.components["format"] == 0.0
    assert "hedges" in result.feedback


def test_solution_sets_are_not_hedges() -> None:
    assert extract_answer(r"\boxed{x = 1 \text{ or } x = -1}") == r"x = 1 \text{ or } x = -1"
    assert math_equal(r"So $x = \boxed{2}$ or $x = \boxed{-2}$.", "2, -2")
    assert math_equal(r"\boxed{x < -1 \text{ or } x > 3}", r"(-\infty,-1)\cup(3,\infty)")


def test_no_answer() -> None:
    assert extract_answer("") is None
    assert extract_answer("I do not know how to solve this problem.") is None
    assert extract_answer(r"The value is \boxed{12") is None  # cut off inside the box
    assert extract_answer(None) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# math_reward / math_verifier
# ---------------------------------------------------------------------------------------------


def test_math_reward_result() -> None:
    from llmgym.rewards.base import RewardResult

    r = math_reward(r"The total is $\boxed{42}$.", "42")
    assert isinstance(r, RewardResult)
    assert (r.score, r.success) == (1.0, True)
    assert r.components == {"correctness": 1.0, "format": 1.0}

    r = math_reward(r"The total is $\boxed{41}$.", "42")
    assert (r.score, r.success) == (0.0, False)
    assert r.components == {"correctness": 0.0, "format": 1.0}
    assert "41" in r.feedback and "42" not in r.feedback  # never reveal the gold

    r = math_reward("no idea", "42")
    assert r.components == {"correctness": 0.0, "format": 0.0}
    assert "boxed" in r.feedback


def test_format_weight_only_pays_for_correct_answers() -> None:
    fallback = "First 6 * 7 = 42, so she has 42 marbles"
    r = math_reward(fallback, "42", format_weight=0.5)
    assert r.components["format"] == 0.5
    assert r.score == pytest.approx(0.75)
    assert math_reward(r"\boxed{42}", "42", format_weight=0.5).score == 1.0
    assert math_reward(r"\boxed{41}", "42", format_weight=0.5).score == 0.0
    with pytest.raises(ValueError, match="format_weight"):
        math_reward("42", "42", format_weight=2.0)


def test_math_verifier_generic_signature_and_golds() -> None:
    assert math_verifier(r"\boxed{0.5}", Fraction(1, 2)).success
    assert math_verifier(r"\boxed{3}", 3).success
    assert math_verifier(r"\boxed{2.5}", 2.5).success
    assert math_verifier(r"\boxed{2}", ["1", "2"]).success  # a list holds alternatives
    assert not math_verifier(r"\boxed{3}", ["1", "2"]).success
    assert math_verifier(r"\boxed{7}", r"The solution ... so \boxed{7}.").success  # MATH gold
    assert math_verifier("#### 9", "... so she has 9.\n#### 9").success  # GSM8K gold
    assert math_verifier(r"\boxed{3.14}", r"\pi", abs_tol=0.01).success
    assert not math_verifier(r"\boxed{3}", float("nan")).success


def test_registered_in_the_verifier_table() -> None:
    from llmgym.rewards import get_verifier

    assert get_verifier("math")(r"\boxed{\frac{1}{2}}", "0.5").success


# ---------------------------------------------------------------------------------------------
# Safety: never raise, never eval, bounded time, a real timeout, clean exit
# ---------------------------------------------------------------------------------------------

PATHOLOGICAL = [
    r"\boxed{10^{10^{10}}}",
    r"\boxed{9^9^9^9}",
    r"\boxed{10^{10^{10^{10^{10}}}}}",
    r"\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}",
    r"\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}",
    r"\boxed{" + r"\frac{1}{" * 3000 + "2" + "}" * 3000 + "}",
    r"\boxed{" + "\\sqrt{" * 5000 + "2" + "}" * 5000 + "}",
    "1" * 1_000_000,
    r"\boxed{" + "1+" * 200_000 + "1}",
    r"\boxed{(10^{100})!}",
    r"\boxed{1000000000!}",
    r"\boxed{\sin(10^{10^{10}})}",
    r"\boxed{e^{10^{100}}}",
    r"\boxed{\sqrt{-1}}",
    r"\boxed{\frac{1}{0}}",
    r"\boxed{0^{-1}}",
    r"\boxed{\ln 0}",
    r"\boxed{NaN}",
    r"\boxed{\log_1 5}",
    r"\boxed{\binom{10^{9}}{5 \cdot 10^{8}}}",
    r"\boxed{x^{10^{10}} - x^{10^{10}}}",
    r"\boxed{2^{2^{2^{2^{2^{2}}}}}}",
    r"\boxed{(1+i)^{10^{9}}}",
    r"\boxed{\{" + ",".join(str(i) for i in range(2000)) + r"\}}",
    "\\boxed{" * 50_000,
    "$" * 100_000,
    r"\boxed{\begin{pmatrix}" + " & ".join("1" for _ in range(500)) + r"\end{pmatrix}}",
    "x" * 1_000_000,
    "\\[" * 200_000,
    "\\(" * 200_000 + "1",
    "$$" * 100_000 + "\n" + "\\[" * 100_000,
    r"The answer is " + "(" * 100_000,
    r"\boxed{\{" + ",".join(str(i) for i in range(1500)) + r"\}}",
]


@pytest.fixture(scope="module")
def warm_worker() -> None:
    """Start a sympy worker first, so the bounds below time the work, not sympy's import."""
    from llmgym.rewards.math import sympy_pool

    assert sympy_pool.get_pool().call(("ping",), timeout_s=60) == "pong"


@pytest.mark.parametrize("response", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_pathological_input_returns_promptly(response: str, warm_worker: None) -> None:
    big_set = r"\{" + ",".join(str(i) for i in range(1499, -1, -1)) + r"\}"
    for gold in ("1", "x", r"10^{10^{10}}", r"(1, 2)", big_set):
        start = time.monotonic()
        verdict = math_equal(response, gold, timeout_s=1.0)
        assert isinstance(verdict, bool)
        assert time.monotonic() - start < 5.0, (response[:40], gold)
    assert isinstance(math_reward(response, "1", timeout_s=1.0).score, float)


def test_no_eval_of_model_output(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    attacks = [
        f"__import__('os').system('touch {marker}')",
        f"\\boxed{{__import__('os').system('touch {marker}')}}",
        f"exec(\"open('{marker}', 'w')\")",
        f"x.__class__.__bases__[0].__subclasses__() or open('{marker}','w')",
        f"Symbol('x').__class__ = eval(\"open('{marker}', 'w')\")",
        f"lambda: open('{marker}', 'w')",
    ]
    for attack in attacks:
        assert math_equal(attack, "1") is False
        assert math_equal("1", attack) is False
        math_reward(attack, attack)
    assert not marker.exists()


def test_worker_timeout_is_real_and_the_pool_recovers() -> None:
    from llmgym.rewards.math import sympy_pool

    pool = sympy_pool.get_pool()
    assert pool.call(("ping",), timeout_s=60) == "pong"  # starts a worker
    start = time.monotonic()
    assert pool.call(("sleep", 30), timeout_s=0.5) is None
    assert time.monotonic() - start < 3.0
    assert pool.call(("ping",), timeout_s=60) == "pong"  # a fresh worker replaced the killed one


def test_a_spare_worker_starts_when_one_is_killed() -> None:
    """After a timeout the next call does not pay a worker restart: a spare is already
    importing sympy when the timed-out call returns."""
    from llmgym.rewards.math import sympy_pool

    pool = sympy_pool.WorkerPool(size=1)
    try:
        assert pool.call(("ping",), timeout_s=60) == "pong"
        first = pool._idle[0].proc.pid
        assert pool.call(("sleep", 30), timeout_s=0.3) is None
        assert len(pool._idle) == 1  # the spare, started before the call returned
        spare = pool._idle[0]
        assert spare.proc.pid != first and spare.proc.poll() is None
        assert pool.call(("ping",), timeout_s=60) == "pong"
        assert pool._idle == [spare]  # the next call used it
    finally:
        pool.close()
    assert spare.proc.poll() is not None  # closing kills the spare too


def test_worker_timeout_holds_in_threads_and_in_an_event_loop() -> None:
    """No signal.alarm: the timeout is a killed process, so it works off the main thread and
    inside asyncio (where a stuck call must not block the loop past its budget)."""
    from llmgym.rewards.math import sympy_pool

    pool = sympy_pool.get_pool()
    assert pool.call(("ping",), timeout_s=60) == "pong"
    elapsed: list[float] = []
    replies: list[object] = []

    def stuck() -> None:
        start = time.monotonic()
        replies.append(pool.call(("sleep", 30), timeout_s=0.5))
        elapsed.append(time.monotonic() - start)

    thread = threading.Thread(target=stuck)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive() and replies == [None] and elapsed[0] < 3.0

    async def in_loop() -> tuple[object, float]:
        start = time.monotonic()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.create_task(ticker())
        reply = await asyncio.to_thread(pool.call, ("sleep", 30), 0.5)
        task.cancel()
        assert ticks >= 3  # the loop kept running while the worker was stuck
        return reply, time.monotonic() - start

    reply, seconds = asyncio.run(in_loop())
    assert reply is None and seconds < 3.0
    assert pool.call(("ping",), timeout_s=60) == "pong"


def test_sympy_fallback_is_used_and_bounded() -> None:
    # nonlinear inequalities are solved by sympy in the worker
    assert math_equal(r"x^2 < 4", "(-2, 2)", timeout_s=30)
    assert not math_equal(r"x^2 < 4", "(-2, 2]", timeout_s=30)
    assert math_equal(r"|x| \ge 2", r"(-\infty,-2]\cup[2,\infty)", timeout_s=30)
    start = time.monotonic()
    assert not math_equal(r"x^2 < 4", "(-2, 2)", timeout_s=0.0)  # no budget: no verdict
    assert time.monotonic() - start < 1.0


def test_works_from_threads_and_asyncio() -> None:
    pairs = [(r"\boxed{2\sqrt{2}}", r"\sqrt{8}", True), (r"\boxed{x^2 < 9}", "(-3, 3)", True)]
    pairs += [(r"\boxed{3.14}", r"\pi", False), (r"\boxed{(1,2)}", "(2,1)", False)]
    results: list[bool] = []
    lock = threading.Lock()

    def work() -> None:
        for a, b, expected in pairs * 3:
            ok = math_equal(a, b, timeout_s=30) is expected
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 4 * 3 * len(pairs) and all(results)

    async def main() -> list[bool]:
        direct = [math_equal(a, b, timeout_s=30) for a, b, _ in pairs]
        threaded = await asyncio.gather(
            *(asyncio.to_thread(math_equal, a, b, timeout_s=30) for a, b, _ in pairs)
        )
        return direct + list(threaded)

    assert asyncio.run(main()) == [e for *_, e in pairs] * 2


def test_worker_processes_end_with_the_interpreter(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import importlib, time
        m = importlib.import_module("llmgym.rewards.math")
        from llmgym.rewards.math import sympy_pool
        assert m.math_equal("x^2 < 4", "(-2, 2)", timeout_s=60)
        pids = [w.proc.pid for w in sympy_pool.get_pool()._idle]
        print(" ".join(map(str, pids)), flush=True)
        """
    )
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert time.monotonic() - start < 60
    pids = [int(p) for p in out.stdout.split()]
    assert pids, out.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_a_forked_child_gets_its_own_workers() -> None:
    import os

    from llmgym.rewards.math import sympy_pool

    parent_pool = sympy_pool.get_pool()
    assert parent_pool.call(("ping",), timeout_s=60) == "pong"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: must not reuse (or kill) the parent's workers
        ok = False
        try:
            child_pool = sympy_pool.get_pool()
            ok = child_pool is not parent_pool and child_pool.call(("ping",), 60) == "pong"
            sympy_pool.shutdown()
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    verdict = os.read(read, 1)
    os.waitpid(pid, 0)
    os.close(read)
    assert verdict == b"1"
    assert parent_pool.call(("ping",), timeout_s=60) == "pong"  # the parent's workers live on


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
