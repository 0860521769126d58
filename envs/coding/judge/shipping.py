"""What a grading run is given: the judge's program, the tests' inputs, and sandboxes set up for it.

The program (:mod:`llmgym.envs.coding.judge.program`) is shipped as its own source, or
preloaded into a local sandbox's zygote so that a run neither ships nor loads it. The tests'
inputs are encoded once per problem, as the judge reads them; their expected values are never
part of it. Building the runs themselves is :mod:`.job` (the judge in the sandbox) and
:mod:`.direct` (the loop in this process).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import marshal
import struct
import sys
import threading
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmgym.envs.coding.problem import Problem
from llmgym.sandbox import Sandbox, get_sandbox

PROGRAM_PATH = Path(__file__).with_name("program.py")
SLACK_S = 5.0
"""What a run's wall limit adds to the judge's own budget: the sandbox's limit is the last resort."""
PRINT_CAP = 8 << 20
"""What a call-based program may print in all before it is stopped (its prints are not graded)."""
MIN_ANSWER_BYTES = 64 << 10


@lru_cache(maxsize=1)
def program_source() -> str:
    """The judge's program as shipped: program.py, whole (it imports the standard library only)."""
    return PROGRAM_PATH.read_text(encoding="utf-8")


_BOOT = """\
import sys
if sys.implementation.cache_tag == {tag!r}:
    import marshal
    with open("judge.bin", "rb") as f:
        code = marshal.load(f)
else:
    with open("judge.py", "rb") as f:
        code = compile(f.read(), "judge.py", "exec")
del sys
exec(code)
"""


@lru_cache(maxsize=1)
def program_files() -> tuple[str, dict[str, bytes]]:
    """The sandbox program and files that start the judge: a few lines that load it
    precompiled (compiling its source would cost more than a whole grading run) when the
    sandbox's Python is this one, and compile the shipped source otherwise."""
    source = program_source()
    code = compile(source, "judge.py", "exec", dont_inherit=True, optimize=2)
    boot = _BOOT.format(tag=sys.implementation.cache_tag)
    return boot, {"judge.py": source.encode(), "judge.bin": marshal.dumps(code)}


@lru_cache(maxsize=1)
def preloaded_source() -> str:
    """The judge's program as a local zygote preloads it: :func:`program_source`, warmed up."""
    return program_source() + "\nwarm_up()\n"


@lru_cache(maxsize=1)
def preloaded_name() -> str:
    """The name the judge is preloaded under in a local sandbox's zygote; it ends with a
    digest of the program's source, so a sandbox preloaded with another version never matches."""
    digest = hashlib.sha256(preloaded_source().encode()).hexdigest()[:16]
    return f"_llmgym_judge_{digest}"


def judge_program(sb: Sandbox) -> tuple[str, dict[str, bytes]]:
    """The program and files that start the judge in ``sb``: a call into the judge its zygote
    preloaded (see :func:`make_sandbox`), else :func:`program_files`."""
    name = preloaded_name()
    if name in getattr(sb, "preloaded", ()):
        return f"import {name}\n{name}.main()\n", {}
    return program_files()


# --- one sandbox per process ------------------------------------------------------------------

_SANDBOXES: dict[str, Sandbox] = {}
_LOCK = threading.Lock()


JUDGE_PRELOAD = ("ctypes", "json", "marshal", "resource", "select", "signal", "socket", "struct",
                 "traceback", "types")  # fmt: skip
"""Modules the judge imports, pre-imported by the local zygote so that runs find them warm.

Not ``subprocess`` (only compiling C/C++ needs it, and that takes far longer than importing
it): it imports ``threading``, whose after-fork hook costs every fork of the zygote's copies
(each run's, each test's) about a hundred copy-on-write page faults."""


def make_sandbox(backend: str = "local") -> Sandbox:
    """A new sandbox of ``backend`` set up for the judge: the local zygote pre-imports its
    modules and preloads the judge itself, so a run neither ships nor loads its code."""
    options: dict[str, Any] = {}
    if backend == "local":
        from llmgym.sandbox.local import DEFAULT_PRELOAD

        options["preload"] = tuple(dict.fromkeys((*DEFAULT_PRELOAD, *JUDGE_PRELOAD)))
        options["preload_sources"] = {preloaded_name(): preloaded_source()}
    return get_sandbox(backend, **options)


def shared_sandbox(backend: str = "local") -> Sandbox:
    """A process-wide sandbox of ``backend`` (starting one costs a zygote); closed at exit."""
    with _LOCK:
        sb = _SANDBOXES.get(backend)
        if sb is None:
            sb = make_sandbox(backend)
            _SANDBOXES[backend] = sb
            if len(_SANDBOXES) == 1:
                atexit.register(close_shared_sandboxes)
        return sb


def close_shared_sandboxes() -> None:
    """Close the process-wide sandboxes (done at exit; the next use starts new ones)."""
    with _LOCK:
        for sb in _SANDBOXES.values():
            try:
                sb.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
        _SANDBOXES.clear()


# --- the tests' inputs ------------------------------------------------------------------------


def stdin_part(obj: Any) -> bytes:
    """``obj`` as one part of a run's stdin: its JSON length-prefixed (the judge reads parts)."""
    data = json.dumps(obj, ensure_ascii=True).encode()
    return struct.pack("<Q", len(data)) + data


def payload_of(test: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """What the judge gets of a test: its input, never its expected value."""
    if kind == "stdio":
        return {"input": test["input"]}
    if "script" in test:
        return {"script": test["script"], "names": dict(test.get("names") or {}),
                "calls": int(test.get("calls", 4))}  # fmt: skip
    return {"fn": test["fn"], "args": test["args"], "kwargs": test.get("kwargs") or {}}


def encoded_tests(problem: Problem) -> dict[str, Any]:
    """The tests' inputs as the judge reads them, and what one test may send back (4x its
    expected answer, at least 64 KiB: the result channel holds that for every test, so an
    oversized answer fails its own test only). Made once per problem."""
    cached = problem.memo.get("encoded")
    if cached is None:
        sizes = [
            len(t["output"].encode("utf-8", "surrogatepass"))
            if "output" in t
            else len(json.dumps(t.get("expected")))
            for t in problem.tests
        ]
        visible = [payload_of(t, problem.kind) for t in problem.visible]
        cached = problem.memo["encoded"] = {
            "per_test": max(MIN_ANSWER_BYTES, 4 * max(sizes, default=0)),
            "visible": json.dumps(visible, ensure_ascii=True).encode(),
            "hidden_part": stdin_part(
                {"hidden": [payload_of(t, problem.kind) for t in problem.hidden]}
            ),
        }
    return cached
