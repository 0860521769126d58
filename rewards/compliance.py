"""Compliance verifiers for enterprise specs: coding standards, output formats, business processes.

What it is: verifiers ``fn(response, gold=None, **options) -> RewardResult`` whose options come
from a declarative spec (YAML/TOML, no code), each reporting the ``compliance`` component of the
reward matrix (safety is :mod:`llmgym.rewards.safety`, effectiveness the task's own verifier):

- :func:`ruff_standards`: the answer's code linted by ``ruff`` with the spec's rule set, fed on
  stdin to a subprocess under a timeout (never a path the answer names); violations counted,
  autofixable ones at a discount; ``noqa`` and other suppression comments do not hide anything.
- :func:`regex_format`: the response matches a pattern, run by the ``regex`` package with a
  time limit (a catastrophic pattern cannot hang a training run).
- :func:`json_format`: the response (or its last fenced block) is JSON valid against a schema.
- :func:`process_steps`: the response walks through an ordered list of required steps, each
  on its own line or sentence, in order, once, without a forbidden step.

What it is not: proof that code works (pair it with unit tests) or that a process was really
followed (the text is graded, not the world). A spec's patterns and rules are trusted; the
response is not, and every check here treats it as hostile.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from llmgym import error
from llmgym.rewards.base import RewardResult
from llmgym.rewards.text import json_schema_match

MAX_INPUT = 100_000
"""Characters of a response any check here reads."""
REGEX_TIMEOUT_S = 0.5
"""Default time limit of one pattern search over a response."""

F = TypeVar("F", bound=Callable[..., RewardResult])


def checks_options(check: Callable[..., None]) -> Callable[[F], F]:
    """Attach ``check(**options)`` to a verifier: :func:`llmgym.verifiers.get_verifier` runs it
    when a spec binds options, so a bad pattern or rule fails at registration, not in training."""

    def attach(fn: F) -> F:
        fn.validate_options = check  # type: ignore[attr-defined]
        return fn

    return attach


def compile_pattern(pattern: str, *, ignore_case: bool = True, multiline: bool = False) -> Any:
    """A ``regex`` pattern (ValueError with the reason if it does not compile)."""
    try:
        import regex
    except ImportError:
        raise error.DependencyNotInstalled(
            "Pattern checks need the regex package; pip install 'llmgym[compliance]'"
        ) from None
    if not isinstance(pattern, str):
        raise ValueError(f"expects a pattern as a str, actual: {pattern!r}")
    flags = (regex.IGNORECASE if ignore_case else 0) | (regex.MULTILINE if multiline else 0)
    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as e:
        raise ValueError(f"pattern {pattern!r} does not compile: {e}") from None


def search(
    pattern: Any, text: str, *, timeout_s: float = REGEX_TIMEOUT_S, full: bool = False
) -> Any:
    """A match of a compiled pattern in ``text`` (at most :data:`MAX_INPUT` characters), None
    when there is none; TimeoutError when the search runs past ``timeout_s``."""
    text = text[:MAX_INPUT]
    if full:
        return pattern.fullmatch(text, timeout=timeout_s)
    return pattern.search(text, timeout=timeout_s)


# --- coding standards ------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_SUPPRESSION = re.compile(
    r"#\s*(?:noqa\b|ruff\s*:|isort\s*:|fmt\s*:\s*(?:off|skip)|type\s*:\s*ignore|pylint\s*:|flake8\s*:)",
    re.IGNORECASE,
)
_SETTING_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_RULE = re.compile(r"[A-Z]{1,4}[0-9]{0,4}|ALL")
_NOT_PYTHON = {
    "text",
    "console",
    "bash",
    "sh",
    "shell",
    "json",
    "yaml",
    "toml",
    "ini",
    "diff",
    "output",
}


def code_blocks(response: str) -> list[str]:
    """Every fenced code block that may be Python (unlabelled or ``python``/``py``), else the
    whole response when it has no fence at all (an answer that is only code).

    >>> code_blocks("Here:\\n```python\\nx = 1\\n```\\nand\\n```toml\\n[tool.ruff]\\n```")
    ['x = 1\\n']
    """
    text = response[:MAX_INPUT]
    fences = _FENCE.findall(text)
    if not fences:
        return [text] if text.strip() else []
    return [body for lang, body in fences if lang.lower() not in _NOT_PYTHON and body.strip()]


def _toml_value(value: Any) -> str:
    """A TOML value from a JSON-like one (TOML's strings, numbers, booleans and arrays of them
    read like JSON's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and math.isfinite(value):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ValueError(f"a ruff setting must be a string, number, boolean or list, actual: {value!r}")


def ruff_arguments(
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    line_length: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """The ruff command-line arguments for a rule set: ``--isolated`` (no config file is read
    from anywhere), the rule flags, and one ``--config 'key = value'`` per other setting. (The
    rules go through ruff's own flags: ``lint.ignore`` given as a ``--config`` before
    ``lint.select`` is dropped by ruff.)

    >>> ruff_arguments(["E", "F"], line_length=100, settings={"lint.isort.force-single-line": True})
    ['--isolated', '--select', 'E,F', '--line-length', '100', '--config', 'lint.isort.force-single-line = true']
    """
    args = ["--isolated"]
    for flag, rules in (("--select", select), ("--ignore", ignore)):
        if rules is None:
            continue
        if isinstance(rules, str) or not all(
            isinstance(r, str) and _RULE.fullmatch(r) for r in rules
        ):
            raise ValueError(
                f"{flag[2:]} is a list of rule codes or prefixes such as 'E501', actual: {rules!r}"
            )
        args += [flag, ",".join(rules)]
    if line_length is not None:
        if (
            isinstance(line_length, bool)
            or not isinstance(line_length, int)
            or not 1 <= line_length <= 320
        ):
            raise ValueError(f"line_length must be an int in [1, 320], actual: {line_length!r}")
        args += ["--line-length", str(line_length)]
    for key, value in (settings or {}).items():
        if not (isinstance(key, str) and _SETTING_KEY.fullmatch(key)):
            raise ValueError(
                f"a ruff setting is a dotted key such as 'lint.select', actual: {key!r}"
            )
        args += ["--config", f"{key} = {_toml_value(value)}"]
    return args


def _check_ruff(
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    line_length: int | None = None,
    settings: Mapping[str, Any] | None = None,
    fixable_weight: float = 0.5,
    max_violations: int = 10,
    timeout_s: float = 10.0,
    **_: Any,
) -> None:
    ruff_arguments(select, ignore, line_length, settings)
    if not 0 <= fixable_weight <= 1:
        raise ValueError(f"fixable_weight must be in [0, 1], actual: {fixable_weight!r}")
    if max_violations < 1 or timeout_s <= 0:
        raise ValueError("max_violations must be >= 1 and timeout_s > 0")
    output = _run_ruff("x = 1\n", ruff_arguments(select, ignore, line_length, settings), timeout_s)
    if isinstance(output, str):
        raise ValueError(f"ruff refuses this rule set: {output}")


def _ruff_binary() -> str:
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        raise error.DependencyNotInstalled(
            "The coding-standards verifier needs ruff; pip install 'llmgym[compliance]'"
        ) from None
    return str(find_ruff_bin())


def _run_ruff(code: str, args: list[str], timeout_s: float) -> list[dict[str, Any]] | str:
    """Ruff's diagnostics for ``code`` read on stdin, or why there are none (a str)."""
    command = [
        _ruff_binary(),
        "check",
        *args,
        "--ignore-noqa",
        "--no-cache",
        "--output-format",
        "json",
        "--stdin-filename",
        "answer.py",
        "-",
    ]
    try:
        done = subprocess.run(
            command,
            input=code.encode("utf-8", "replace"),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            env={"PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:
        return f"ruff ran past timeout_s={timeout_s:g}"
    if done.returncode not in (0, 1):
        lines = [ln.strip() for ln in done.stderr.decode("utf-8", "replace").splitlines()]
        told = [ln for ln in lines if ln.startswith(("error", "Error", "Cause", "unknown"))]
        return " ".join(told)[:300] or f"ruff exited {done.returncode}"
    try:
        found = json.loads(done.stdout or b"[]")
    except ValueError:
        return "ruff's output is not JSON"
    return found if isinstance(found, list) else "ruff's output is not a list"


@checks_options(_check_ruff)
def ruff_standards(
    response: str,
    gold: Any = None,
    *,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    line_length: int | None = None,
    settings: dict[str, Any] | None = None,
    fixable_weight: float = 0.5,
    max_violations: int = 10,
    count_suppressions: bool = True,
    timeout_s: float = 10.0,
) -> RewardResult:
    """Coding standards: the answer's code linted by ruff with the spec's rule set.

    The code is every fenced Python block (or the whole answer when it has no fence), each fed
    to ``ruff check`` on stdin with ``--isolated`` (no config file is read, so an answer cannot
    ship one) and ``--ignore-noqa``. ``select``/``ignore``/``line_length`` and ``settings``
    (dotted ruff keys, such as ``{"lint.pydocstyle.convention": "google"}``) are the rule set.
    Penalty = unfixable violations + ``fixable_weight`` * autofixable ones (+ one per
    suppression comment, ``# noqa`` and the like, when ``count_suppressions``); the score is
    ``1 - penalty / max_violations`` (at least 0). No code or a syntax error scores 0; success
    is no violation at all. Feedback names rule codes and lines, never the code's own text.

    >>> ruff_standards("```python\\nimport os\\n```", select=["F"]).components
    {'compliance': 0.95}
    """
    blocks = code_blocks(response)
    if not blocks:
        return RewardResult(0.0, {"compliance": 0.0}, "no code found", False)
    args = ruff_arguments(select, ignore, line_length, settings)
    fixable, unfixable, suppressions = 0, 0, 0
    codes: dict[str, int] = {}
    for block in blocks:
        found = _run_ruff(block, args, timeout_s)
        if isinstance(found, str):
            return RewardResult(0.0, {"compliance": 0.0}, found, False)
        if any(d.get("code") in (None, "invalid-syntax", "E999") for d in found):
            return RewardResult(0.0, {"compliance": 0.0}, "the code has a syntax error", False)
        for d in found:
            code = str(d.get("code"))[:20]
            codes[code] = codes.get(code, 0) + 1
            if isinstance(d.get("fix"), Mapping):
                fixable += 1
            else:
                unfixable += 1
        if count_suppressions:
            suppressions += len(_SUPPRESSION.findall(block))
    penalty = unfixable + fixable_weight * fixable + suppressions
    score = max(0.0, 1.0 - penalty / max_violations)
    if penalty == 0:
        return RewardResult(1.0, {"compliance": 1.0}, "no violations", True)
    listed = ", ".join(f"{c} x{n}" for c, n in sorted(codes.items())[:10])
    notes = f"{fixable + unfixable} violation(s), {fixable} autofixable" + (
        f": {listed}" if listed else ""
    )
    if suppressions:
        notes += f"; {suppressions} suppression comment(s) (not honoured)"
    return RewardResult(score, {"compliance": score}, notes, False)


# --- formats -------------------------------------------------------------------------------


def _check_regex(
    pattern: str = "",
    ignore_case: bool = False,
    multiline: bool = False,
    timeout_s: float = REGEX_TIMEOUT_S,
    **_: Any,
) -> None:
    compile_pattern(pattern, ignore_case=ignore_case, multiline=multiline)
    if not 0 < timeout_s <= 10:
        raise ValueError(f"timeout_s must be in (0, 10], actual: {timeout_s!r}")


@checks_options(_check_regex)
def regex_format(
    response: str,
    gold: Any = None,
    *,
    pattern: str,
    full_match: bool = True,
    ignore_case: bool = False,
    multiline: bool = False,
    timeout_s: float = REGEX_TIMEOUT_S,
) -> RewardResult:
    """Format compliance: the stripped response matches ``pattern`` (the whole of it by
    default), searched under a time limit: a search that runs past ``timeout_s`` fails.

    >>> regex_format("TICKET-0042: printer", pattern=r"TICKET-\\d{4}: .+").success
    True
    """
    try:
        compiled = compile_pattern(pattern, ignore_case=ignore_case, multiline=multiline)
    except ValueError as e:
        return RewardResult(0.0, {"compliance": 0.0}, str(e), False)
    if len(response) > MAX_INPUT:
        return RewardResult(
            0.0, {"compliance": 0.0}, f"response longer than {MAX_INPUT} characters", False
        )
    try:
        ok = search(compiled, response.strip(), timeout_s=timeout_s, full=full_match) is not None
    except TimeoutError:
        return RewardResult(0.0, {"compliance": 0.0}, "the format check ran out of time", False)
    value = 1.0 if ok else 0.0
    return RewardResult(
        value,
        {"compliance": value},
        "format ok" if ok else "the response does not match the required format",
        ok,
    )


def _check_schema(schema: Mapping[str, Any] | None = None, **_: Any) -> None:
    import jsonschema

    if not isinstance(schema, Mapping):
        raise ValueError(f"schema must be a JSON Schema object, actual: {schema!r}")
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as e:
        raise ValueError(f"invalid JSON Schema: {e.message}") from None


@checks_options(_check_schema)
def json_format(response: str, gold: Any = None, *, schema: dict[str, Any]) -> RewardResult:
    """Format compliance: the response (or its last fenced block) is JSON valid against
    ``schema`` (the spec's, not the task's gold).

    >>> json_format('{"id": 7}', schema={"type": "object", "required": ["id"]}).components
    {'compliance': 1.0}
    """
    if len(response) > MAX_INPUT:
        return RewardResult(
            0.0, {"compliance": 0.0}, f"response longer than {MAX_INPUT} characters", False
        )
    result = json_schema_match(response, schema)
    return RewardResult(result.score, {"compliance": result.score}, result.feedback, result.success)


# --- business processes --------------------------------------------------------------------

_SEGMENT = re.compile(r"\n+|(?<=[.!?;])\s+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\(?\w{1,3}[.)]|step\s+\w+\s*[:.)-])\s*", re.IGNORECASE)
MAX_SEGMENTS = 400


def _step_pattern(name: str) -> str:
    """A default pattern for a step name: its words, in order, each as a word prefix."""
    words = re.findall(r"\w+", name)
    return r"\W+(?:\w+\W+){0,3}?".join(rf"\b{re.escape(w)}" for w in words)


def _steps(steps: Sequence[Any]) -> list[dict[str, Any]]:
    """The spec's steps as ``{"name", "patterns", "evidence"}`` (ValueError when malformed)."""
    if not isinstance(steps, (list, tuple)) or not steps:
        raise ValueError(
            "steps must be a non-empty list of step names or {name, patterns, evidence}"
        )
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, str):
            step = {"name": step}
        if (
            not isinstance(step, Mapping)
            or not isinstance(step.get("name"), str)
            or not re.search(r"\w", step["name"])
        ):
            raise ValueError(f"step {i} needs a 'name' with a word in it, actual: {step!r}")
        extra = set(step) - {"name", "patterns", "evidence"}
        if extra:
            raise ValueError(
                f"step {i}: unknown key(s) {sorted(extra)}; expected name, patterns, evidence"
            )
        patterns = step.get("patterns") or [_step_pattern(step["name"])]
        if isinstance(patterns, str):
            patterns = [patterns]
        out.append(
            {
                "name": step["name"],
                "patterns": [compile_pattern(p) for p in patterns],
                "evidence": compile_pattern(step["evidence"]) if step.get("evidence") else None,
            }
        )
    return out


def _check_process(
    steps: Sequence[Any] = (), forbidden: Sequence[str] = (), min_words: int = 3, **_: Any
) -> None:
    names = [s["name"] for s in _steps(steps)]
    if len(set(names)) != len(names):
        raise ValueError(f"two steps share a name: {names}")
    for p in forbidden:
        compile_pattern(p)
    if min_words < 0:
        raise ValueError("min_words must be >= 0")


def _longest_in_order(indices: list[int]) -> int:
    """The length of the longest increasing subsequence (patience sorting)."""
    import bisect

    tails: list[int] = []
    for x in indices:
        at = bisect.bisect_left(tails, x)
        tails[at : at + 1] = [x]
    return len(tails)


@checks_options(_check_process)
def process_steps(
    response: str,
    gold: Any = None,
    *,
    steps: list[Any],
    forbidden: list[str] | None = None,
    min_words: int = 3,
    timeout_s: float = REGEX_TIMEOUT_S,
) -> RewardResult:
    """A business process: the response walks through the required ``steps`` in order.

    The response is cut into segments (lines, and sentences within a line; list markers
    dropped). A step is a name, or ``{"name", "patterns": [regex...], "evidence": regex}``; its
    default pattern is its name's words in order. A segment that names exactly one step, has
    at least ``min_words`` words and holds the step's ``evidence`` (if any) performs that step.
    A segment naming several steps performs none (listing every step name in one line is not
    walking through them); a step performed in several segments counts for none (nor does
    repeating the list in every order). Any ``forbidden`` pattern fails the process outright.
    Score: the longest run of performed steps in the required order, over the number of steps;
    success is every step, once each, in order.

    >>> process_steps("1. Verify the customer's identity with their ID.\\n2. Refund the order in full.",
    ...               steps=["verify identity", "refund order"]).success
    True
    >>> process_steps("Verify identity, refund order.", steps=["verify identity", "refund order"]).score
    0.0
    """
    try:
        spec = _steps(steps)
        banned = [compile_pattern(p) for p in forbidden or []]
    except ValueError as e:
        return RewardResult(0.0, {"compliance": 0.0}, str(e), False)
    segments = [_LIST_MARK.sub("", s).strip() for s in _SEGMENT.split(response[:MAX_INPUT])]
    segments = [s for s in segments if s][:MAX_SEGMENTS]
    try:
        for pattern in banned:
            if any(search(pattern, s, timeout_s=timeout_s) for s in segments):
                return RewardResult(0.0, {"compliance": 0.0}, "a forbidden step is present", False)
        performed: dict[int, list[int]] = {}
        crowded = 0
        for at, segment in enumerate(segments):
            named = [
                i
                for i, step in enumerate(spec)
                if any(search(p, segment, timeout_s=timeout_s) for p in step["patterns"])
            ]
            if len(named) > 1:
                crowded += 1
                continue
            if not named:
                continue
            step = spec[named[0]]
            if len(re.findall(r"\w+", segment)) < min_words:
                continue
            if step["evidence"] is not None and not search(
                step["evidence"], segment, timeout_s=timeout_s
            ):
                continue
            performed.setdefault(named[0], []).append(at)
    except TimeoutError:
        return RewardResult(0.0, {"compliance": 0.0}, "the process check ran out of time", False)
    once = sorted((where[0], i) for i, where in performed.items() if len(where) == 1)
    in_order = _longest_in_order([i for _, i in once])
    score = in_order / len(spec)
    ok = in_order == len(spec)
    notes = [f"{in_order} of {len(spec)} steps in order"]
    repeated = [spec[i]["name"] for i, where in performed.items() if len(where) > 1]
    missing = [s["name"] for i, s in enumerate(spec) if i not in performed]
    if missing:
        notes.append(f"missing: {', '.join(missing[:5])}")
    if repeated:
        notes.append(f"repeated: {', '.join(repeated[:5])}")
    if crowded:
        notes.append(f"{crowded} segment(s) name several steps at once")
    return RewardResult(score, {"compliance": score}, "; ".join(notes), ok)


__all__ = [
    "MAX_INPUT",
    "checks_options",
    "code_blocks",
    "compile_pattern",
    "json_format",
    "process_steps",
    "regex_format",
    "ruff_arguments",
    "ruff_standards",
    "search",
]
