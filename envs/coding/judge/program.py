"""The coding judge's program: what runs inside the sandbox to grade one answer.

A single shipped program: this file is sent whole into every grading run (as the run's
``judge.py``, or preloaded into a local sandbox's zygote by
:func:`llmgym.envs.coding.judge.shipping.make_sandbox`), so it stays one file and imports the
standard library only. The parent imports it too: for the value codec (:func:`encode`,
:func:`decode`), for :func:`static_facts`, and for the loop over call tests
(:class:`CallTests`), which direct mode runs in the parent. It is not the parent's side of
grading: shipping a run, direct mode and verdicts are the other modules of
:mod:`llmgym.envs.coding.judge`.

One sandbox run grades one answer against all its tests. Processes inside the run::

    the judge (this program: trusted, non-dumpable, owns the result channel, fd 3)
      fork -> the worker (call-based tasks; untrusted: the candidate's code runs here, all
              tests in turn; fds 0-2 are pipes to the judge, 3 and 4 a private request/reply
              pipe; it never holds fd 3 of the run)
      fork -> the program server (stdin/stdout tasks; runs no candidate code: it compiles a
              Python program once and forks one fresh process per test)
                fork -> the test's process (untrusted: fd 0 the test's input, 1-2 pipes to the
                        judge)

In direct mode (see :mod:`llmgym.envs.coding.judge.direct`) there is no judge process in the
run. For plain call tests the run holds the worker alone (:func:`serve_calls`): the same loop
over call tests (:class:`CallTests`) runs in the parent, which talks with the worker over the
run's stdin and result channel. For a Python program's stdin/stdout tests the run's process is
a :class:`ProgramRunner` (trusted, non-dumpable, owns the result channel; runs no candidate
code), which forks one fresh process per test as the program server does and writes each
test's record itself; the parent sends the inputs and keeps the episode's budget.

Why the verdicts cannot be forged from inside:

- **Expected values never enter the sandbox.** The judge only has the tests' *inputs*; it
  reports what the candidate returned (call-based tasks, serialized to plain tagged JSON by
  :func:`encode`) or printed (stdin/stdout tasks), and the parent compares those with the
  expected values it kept. Writing fake records, printing "OK", objects whose ``__eq__``
  always says yes, patching builtins or this program inside the worker: none of it produces
  the expected value.
- **The worker cannot reach the judge.** The worker runs in its own process with every other
  fd closed, the judge is non-dumpable (no ``/proc/<judge>/mem``, no ``/proc/<judge>/fd``) and
  ptrace is blocked by the sandbox's seccomp filter. The loop checks each reply against the
  request it waits on (kind, index), so an unsolicited or out-of-order reply is a protocol
  failure of that test.
- **Missing results are failures.** ``sys.exit``, ``os._exit``, crashes, timeouts and kills
  end the worker; the loop records the test as failed and starts a fresh worker for the next
  one, within the episode's budget: a timeout leaves the rest of the episode
  :func:`after_timeout_s` (one wall limit per episode, not one per test), and the tests it
  leaves out fail as not run. A stdin/stdout test's process is reaped by the program server,
  which reports its wait status and rusage to the judge; a program that kills or stops the
  server fails that test, and the judge starts a fresh server. The parent also checks the
  nonce, the count and the order of the judge's records.
- **Hidden tests stay hidden.** The judge reads the visible tests and starts the worker before
  it even reads the hidden ones from stdin (the worker is forked from the judge, so it would
  otherwise inherit a copy), and the worker's fd 0 is ``/dev/null``. No hidden request is sent
  before the output of the visible tests is recorded. Text the worker controls (stdout,
  stderr, exception messages, returned values) is reported for visible tests only; for hidden
  tests the judge reports values (for the parent to compare) and builtin exception names,
  nothing the candidate could use to carry hidden inputs into the feedback.
- **Time is measured by the loop**, outside the worker, from the previous answer (or the
  request) to the reply (wall clock: sleeping counts) and enforced by
  killing the worker; CPU time and peak memory come from the kernel (``wait4``, and the run's
  cgroup in the parent). The sandbox's own wall limit is the last resort.

Residual risk, stated: the worker shares the judge's uid, so it can signal the judge (killing
or stopping it only loses its own results), and in-process tricks can read the inputs of the
test the worker is running. Kernel-level escapes are the sandbox's concern.

Stdin carries two length-prefixed JSON parts: the job with the visible tests, then the hidden
tests. Records go to fd 3 as ``<nonce>\\t<json>\\n`` lines.
"""

from __future__ import annotations

import _signal
import atexit
import builtins
import collections
import io
import json
import math
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
import types
from collections.abc import Callable, Generator
from typing import Any, Protocol

CHANNEL = 3
MAX_DEPTH = 100
MAX_ITEMS = 1_000_000
TAIL = 4000

# ----------------------------------------------------------------------------------------------
# Plain tagged JSON: the only form in which values cross the sandbox boundary
# ----------------------------------------------------------------------------------------------


class Unencodable(Exception):
    """A value that is not plain data (or is too large or too deeply nested)."""


_DEQUE = collections.deque
_FLAT = frozenset({int, str, bool, type(None)})
"""Types a list may hold to be copied as is (the common case: lists of numbers or strings)."""


def encode(value: Any) -> Any:
    """``value`` as JSON-ready plain data; tuples, sets, non-string dict keys, bytes and
    non-finite floats are tagged so that :func:`decode` rebuilds them exactly.

    Subclasses of builtins are reduced to the builtin value through the builtin's own methods,
    so an object's overridden ``__eq__``, ``__repr__`` or ``__iter__`` plays no part.

    >>> encode([1, (2, 3), {"a": {4}}, float("inf"), {1: "x"}])
    [1, {'$tuple': [2, 3]}, {'a': {'$set': [4]}}, {'$float': 'inf'}, {'$dict': [[1, 'x']]}]
    >>> decode(encode({(1, 2): frozenset({"z"}), "k": b"\\x00"})) == {(1, 2): frozenset({"z"}), "k": b"\\x00"}
    True
    >>> try:
    ...     encode(object())
    ... except Unencodable as e:
    ...     print(e)
    cannot serialize a value of type object (return plain data: None, bool, int, float, str, list, tuple, dict, set)
    """
    return _encode(value, 0, [0])


def _encode(v: Any, depth: int, count: list[int]) -> Any:
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
        raise Unencodable("the value is too large or too deeply nested")
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$float": repr(v)}
    d = depth + 1
    if t is list or t is _DEQUE:
        if set(map(type, v)) <= _FLAT:
            count[0] += len(v)
            if count[0] > MAX_ITEMS:
                raise Unencodable("the value is too large or too deeply nested")
            return list(v)
        return [_encode(x, d, count) for x in v]
    if t is tuple:
        return {"$tuple": [_encode(x, d, count) for x in v]}
    if t is dict:
        items = list(dict.items(v))
        if all(type(k) is str and not k.startswith("$") for k, _ in items):
            return {k: _encode(x, d, count) for k, x in items}
        return {"$dict": [[_encode(k, d, count), _encode(x, d, count)] for k, x in items]}
    if t is set or t is frozenset:
        tag = "$set" if t is set else "$frozenset"
        return {tag: sorted((_encode(x, d, count) for x in v), key=_canonical)}
    if t is bytes or t is bytearray:
        return {"$bytes": bytes(v).hex()}
    # Subclasses of builtins: take the builtin value, never the subclass's own methods.
    if isinstance(v, int):
        return int.__index__(v)
    if isinstance(v, float):
        return _encode(float.__float__(v), depth, count)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, tuple):
        return _encode(tuple(tuple.__iter__(v)), depth, count)
    if isinstance(v, list):
        return _encode(list(list.__iter__(v)), depth, count)
    if isinstance(v, dict):
        return _encode(dict(dict.items(v)), depth, count)
    if isinstance(v, (set, frozenset)):
        base: Any = frozenset if isinstance(v, frozenset) else set
        return _encode(base(base.__iter__(v)), depth, count)
    if (getattr(t, "__module__", "") or "").split(".")[0] == "numpy" and hasattr(v, "tolist"):
        return _encode(v.tolist(), depth, count)
    raise Unencodable(
        f"cannot serialize a value of type {t.__name__} (return plain data: None, bool, int, "
        "float, str, list, tuple, dict, set)"
    )


def _canonical(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


_TAGS = ("$tuple", "$set", "$frozenset", "$dict", "$float", "$bytes")
_FLAT_DECODED = frozenset({int, float, str, bool, type(None)})


def decode(data: Any, _depth: int = 0) -> Any:
    """Rebuild a value from :func:`encode`'s form; ValueError/TypeError on malformed data."""
    if _depth > MAX_DEPTH + 2:
        raise ValueError("value nested too deeply")
    d = _depth + 1
    if isinstance(data, list):
        if set(map(type, data)) <= _FLAT_DECODED:
            return list(data)
        return [decode(x, d) for x in data]
    if isinstance(data, dict):
        if len(data) == 1:
            ((tag, x),) = data.items()
            if tag in _TAGS:
                return _decode_tagged(tag, x, d)
        if any(k.startswith("$") for k in data):
            raise ValueError("malformed tagged value")
        return {k: decode(x, d) for k, x in data.items()}
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    raise TypeError(f"not plain data: {type(data).__name__}")


def _decode_tagged(tag: str, x: Any, d: int) -> Any:
    if tag == "$float":
        if x not in ("nan", "inf", "-inf"):
            raise ValueError("malformed float")
        return float(x)
    if tag == "$bytes":
        return bytes.fromhex(x)
    if not isinstance(x, list):
        raise ValueError(f"malformed {tag}")
    if tag == "$tuple":
        return tuple(decode(y, d) for y in x)
    if tag == "$set":
        return {decode(y, d) for y in x}
    if tag == "$frozenset":
        return frozenset(decode(y, d) for y in x)
    out = {}
    for pair in x:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("malformed $dict")
        out[decode(pair[0], d)] = decode(pair[1], d)
    return out


# ----------------------------------------------------------------------------------------------
# Static facts: what a program defines, imports and calls, read before it runs
# ----------------------------------------------------------------------------------------------


def static_facts(source: str) -> dict[str, Any]:
    """Signatures of the top-level functions, imported modules and called names of ``source``.

    The worker runs it on the candidate's code inside the sandbox, before that code runs
    (parsing hostile code can exhaust the parser's stack); the parent runs it on trusted code
    only (the modules that repair tasks ship). Raises SyntaxError (or RecursionError,
    MemoryError, ValueError for pathological input) when ``source`` does not parse.

    >>> facts = static_facts("import os.path\\nfrom re import sub\\ndef f(a, b=1, *c, d, **e): return eval(a)")
    >>> facts["functions"]["f"]
    'a, b=1, *c, d, **e'
    >>> facts["imports"], facts["calls"]
    (['os.path', 're'], ['eval'])
    """
    import ast

    tree = ast.parse(source)

    def signature(node: Any) -> str:
        a = node.args
        parts: list[str] = []
        positional = list(a.posonlyargs) + list(a.args)
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
            parts.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
            if a.posonlyargs and i == len(a.posonlyargs) - 1:
                parts.append("/")
        if a.vararg is not None:
            parts.append("*" + a.vararg.arg)
        elif a.kwonlyargs:
            parts.append("*")
        for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
            parts.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
        if a.kwarg is not None:
            parts.append("**" + a.kwarg.arg)
        return ", ".join(parts)

    functions: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = signature(node)
    imports: set[str] = set()
    calls: set[str] = set()
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            imports.update(alias.name for alias in sub.names)
        elif isinstance(sub, ast.ImportFrom):
            imports.add("." * sub.level + (sub.module or ""))
        elif isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Name):
                calls.add(func.id)
            elif isinstance(func, ast.Attribute):
                calls.add(func.attr)
    return {"functions": functions, "imports": sorted(imports), "calls": sorted(calls)}


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stdin ended early")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_part(fd: int) -> Any:
    (size,) = struct.unpack("<Q", _read_exact(fd, 8))
    return json.loads(_read_exact(fd, size))


def _builtin_exception_name(exc: BaseException) -> str:
    """The first builtin class in the exception's MRO (the program cannot choose the name)."""
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return "BaseException"


BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
JUDGE_KINDS = frozenset({"timeout", "budget", "stopped", "output limit", "exited",
                         "value too large", "protocol"})  # fmt: skip
"""Kinds of failure the judges name themselves (no exception was raised)."""
UNKNOWN_ERROR = "unknown"
"""The error type of a reply that named no builtin exception: the worker always names one (the
first builtin class of the exception's MRO), so anything else was written by the candidate."""
NAME_CAP, MSG_CAP = 100, 2000


def error_kind(value: Any) -> str:
    """An error record's type as it may be reported: a builtin exception's name or one of the
    judges' own kinds, else :data:`UNKNOWN_ERROR` (never text of the candidate's choosing).

    >>> error_kind("ValueError"), error_kind("timeout"), error_kind("zq123"), error_kind([1])
    ('ValueError', 'timeout', 'unknown', 'unknown')
    """
    if type(value) is str and (value in BUILTIN_EXCEPTIONS or value in JUDGE_KINDS):
        return value
    return UNKNOWN_ERROR


def text_field(value: Any, cap: int, *, tail: bool = False) -> str:
    """A candidate-written string field, capped (anything that is not a string is dropped).

    >>> text_field("abcdef", 3), text_field("abcdef", 3, tail=True), text_field(["x"], 3)
    ('abc', 'def', '')
    """
    if type(value) is not str:
        return ""
    return value[-cap:] if tail else value[:cap]


def safe_error(error: Any) -> dict[str, Any]:
    """An error record from a worker's reply with its type mapped by :func:`error_kind` and
    its text fields capped (a reply is the candidate's to forge, in any size)."""
    err = error if isinstance(error, dict) else {}
    out: dict[str, Any] = {"type": error_kind(err.get("type"))}
    for key, cap, tail in (("name", NAME_CAP, False), ("msg", MSG_CAP, False), ("tb", TAIL, True)):
        if key in err:
            out[key] = text_field(err[key], cap, tail=tail)
    return out


_PRCTL: Any = None


def warm_up() -> None:
    """Do once what every run would do again: called where the judge is preloaded (a sandbox
    zygote), so that each run's copy finds it done."""
    global _PRCTL
    if _PRCTL is None:
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None).prctl
        except Exception:  # noqa: BLE001 - best effort outside Linux
            _PRCTL = False


def _nondumpable() -> None:
    warm_up()
    if _PRCTL:
        try:
            _PRCTL(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        except Exception:  # noqa: BLE001
            pass


def _limit_memory(job: dict[str, Any], *, native: bool) -> None:
    """Cap a worker's (or a test process's) address space at what it has now plus ``memory_mb``
    (MemoryError, not OOM)."""
    budget = int(job.get("memory_mb") or 0) << 20
    if budget <= 0:
        return
    base = 0
    if not native:
        try:  # statm: sizes in pages, the first being the whole address space (VmSize)
            fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
            try:
                base = int(os.read(fd, 256).split()[0]) * resource.getpagesize()
            finally:
                os.close(fd)
        except (OSError, ValueError, IndexError):
            return
    try:
        cap = base + budget + (64 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ValueError, OSError):
        pass


_RESET_SIGNALS = tuple(
    int(s) for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)
)


def _default_signals() -> None:
    """Default dispositions for the signals the judge handles or ignores (through the C module:
    ``signal.signal`` builds enums, page faults in a freshly forked process)."""
    for sig in _RESET_SIGNALS:
        _signal.signal(sig, _signal.SIG_DFL)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty one (a record's field may hold anything)."""
    return value if isinstance(value, dict) else {}


def _mb(kb: float) -> float:
    return round(kb / 1024.0, 3)


class Tail:
    """The last ``cap`` bytes of a stream and how many bytes it had (what an output record
    shows of a phase)."""

    def __init__(self, cap: int = TAIL) -> None:
        self.cap, self.total, self.data = cap, 0, b""

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data = (self.data + chunk)[-self.cap :]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


REPLY_ENVELOPE = 256
"""What a worker's reply holds beyond the returned value (its kind, index, status)."""

_SCAN: Callable[[str, int], tuple[Any, int]]
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _drain(fd: int, out_r: int, out: bytearray, err: Tail, open_fds: set[int]) -> None:
    """Read what a test's program wrote on ``fd`` (its stdout ``out_r`` or its stderr) into
    ``out`` or ``err``; an end of file takes ``fd`` out of ``open_fds``."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return
    if not chunk:
        open_fds.discard(fd)
    elif fd == out_r:
        out += chunk
    else:
        err.add(chunk)


def _reply_event(line: bytes) -> dict[str, Any] | str:
    """One reply line as :func:`take_replies` reads it: the record, or ``"garbled"``.

    Exactly ``json.loads(line)``, read faster for the lines the worker writes (ASCII JSON with
    no surrounding space): anything else goes through ``json.loads`` itself."""
    try:
        text = line.decode("ascii")
        rec, end = _SCAN(text, 0)
        if end != len(text):
            raise ValueError("not one value")
    except (ValueError, StopIteration, RecursionError):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past the stack
            return "garbled"
    return rec if type(rec) is dict else "garbled"


def take_replies(buf: bytes, cap: int) -> tuple[list[dict[str, Any] | str], bytes]:
    """The reply lines complete in ``buf`` and what is left: each a record or ``"garbled"`` (a
    line that is not a JSON object), then ``"overflow"`` if what is left holds no line end
    within ``cap`` bytes.

    >>> take_replies(b'{"k": "result"}\\n[1]\\nrest', 64)
    ([{'k': 'result'}, 'garbled'], b'rest')
    >>> take_replies(b"x" * 65, 64)[0], take_replies(b"{", 64)
    (['overflow'], ([], b'{'))
    """
    end = buf.rfind(b"\n")
    if end < 0:
        return (["overflow"] if len(buf) > cap else []), buf
    events: list[dict[str, Any] | str] = [_reply_event(line) for line in buf[:end].split(b"\n")]
    rest = buf[end + 1 :]
    if len(rest) > cap:
        events.append("overflow")
    return events, rest


# ----------------------------------------------------------------------------------------------
# The worker: where the candidate's code runs (call-based tasks)
# ----------------------------------------------------------------------------------------------


_REPLIES = [4]
"""The fd the worker answers on: 4 under the judge, 3 (the run's result channel) alone."""


def _line_encoder() -> Callable[[Any], str]:
    """``json.dumps(obj, ensure_ascii=True, allow_nan=False)``, compact, without building an
    encoder per call (the C encoder, made once, where the interpreter has it)."""
    enc = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return enc.encode
    c_encode = make(None, enc.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                    False, False, False)  # fmt: skip
    return lambda obj: "".join(c_encode(obj, 0))


_REPLY_JSON = _line_encoder()


def _worker_reply(obj: dict[str, Any]) -> None:
    try:
        line = _REPLY_JSON(obj)
    except (ValueError, TypeError, RecursionError) as e:
        line = json.dumps({"k": obj.get("k"), "i": obj.get("i"), "ok": False,
                           "error": {"type": "ValueError", "msg": f"return value: {e}"}})  # fmt: skip
    _write_all(_REPLIES[0], line.encode() + b"\n")


def _error_record(exc: BaseException, skip_frames: int = 1) -> dict[str, Any]:
    tb = exc.__traceback__
    for _ in range(skip_frames):
        if tb is not None:
            tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb, limit=-8))
        msg = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text, msg = "", "<unprintable>"
    return {"type": _builtin_exception_name(exc), "name": type(exc).__name__[:100],
            "msg": msg[:2000], "tb": text[-TAIL:]}  # fmt: skip


def _setup_stdio() -> None:
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="replace"
    )
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8",
        errors="backslashreplace"
    )  # fmt: skip
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
        errors="backslashreplace", line_buffering=True,
    )  # fmt: skip


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def _compile_candidate(path: str) -> Any:
    with open(path, "rb") as f:
        source = f.read()
    return source, compile(source, "solution.py", "exec", dont_inherit=True)


def _resolve(module: types.ModuleType, name: str) -> Any:
    """A module-level function, or ``Class.method`` on a fresh instance (LeetCode style)."""
    owner, dot, method = name.partition(".")
    target = module.__dict__.get(owner)
    if not dot:
        return target
    if not isinstance(target, type):
        return None
    try:
        return getattr(target(), method, None)
    except Exception:  # noqa: BLE001 - the candidate's constructor failed
        return None


def _worker_main(job: dict[str, Any], requests: int = 3) -> None:
    """Compile, report static facts, import the candidate, then answer the requests read from
    fd ``requests`` until EOF."""
    _default_signals()
    _setup_stdio()
    try:
        source, code = _compile_candidate(job["source"])
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        detail = "".join(traceback.format_exception_only(type(e), e))
        _worker_reply({"k": "compile", "ok": False, "error": detail[-TAIL:]})
        os._exit(0)
    if job.get("static"):
        try:
            facts = static_facts(source.decode("utf-8", "replace"))
            _worker_reply({"k": "static", "ok": True, "facts": facts})
        except BaseException as e:  # noqa: BLE001
            _worker_reply({"k": "static", "ok": False, "error": type(e).__name__})
    _worker_reply({"k": "compile", "ok": True})
    module = types.ModuleType("solution")
    module.__file__ = job["source"]
    sys.modules["solution"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as e:  # noqa: BLE001 - SystemExit at import is a failure too
        _flush()
        _worker_reply({"k": "import", "ok": False, "error": _error_record(e)})
        os._exit(0)
    _flush()
    _worker_reply({"k": "import", "ok": True})
    reader = os.fdopen(requests, "rb", buffering=1 << 16)
    last = job.get("last")
    scan = _SCAN  # the requests are the judge's own lines (request_line): read, not checked
    for line in reader:
        req = scan(line.decode(), 0)[0]
        i, kwargs = req["i"], req.get("kwargs")
        fn = _resolve(module, req["fn"])
        if not callable(fn):
            rec = {"k": "result", "i": i, "ok": False, "error": {
                "type": "NameError", "name": "NameError",
                "msg": f"the module defines no function named {req['fn']!r}", "tb": ""}}  # fmt: skip
        else:
            try:
                value = fn(*decode(req["args"]), **(decode(kwargs) if kwargs else {}))
            except BaseException as e:  # noqa: BLE001 - SystemExit inside a test fails that test
                _flush()
                rec = {"k": "result", "i": i, "ok": False, "error": _error_record(e)}
            else:
                _flush()
                try:
                    rec = {"k": "result", "i": i, "ok": True, "value": encode(value)}
                except (Unencodable, RecursionError) as e:
                    rec = {"k": "result", "i": i, "ok": False, "error": {
                        "type": "TypeError", "name": "TypeError", "msg": str(e), "tb": ""}}  # fmt: skip
        _worker_reply(rec)
        if i == last:  # direct mode: nothing comes after the last test
            break
    os._exit(0)


# ----------------------------------------------------------------------------------------------
# The loop over call tests: one loop, for the judge here and for direct mode in the parent
# ----------------------------------------------------------------------------------------------

START = "start"
"""What the loop yields when it needs a worker: its driver starts one, then sends
``"started"``. Otherwise the loop yields a deadline (``time.monotonic()``) and is sent the
worker's next event: a record the worker wrote (a dict), ``"garbled"`` (a line that is not
one), ``"overflow"`` (a line past the reply cap), ``"output"`` (it printed past the output
cap), ``"memory"`` (the sandbox's memory limit ended it), ``"ended"`` (it is gone) or
``"timeout"`` (the deadline passed first)."""

AFTER_TIMEOUT_S = 0.5
"""The time the tests left after a timeout get, all together (at most one timeout's worth).

A timeout costs one wall limit per episode, not one per test: once a test has run out of time,
the episode's budget ends this much later (or at the test's timeout, if shorter), so a program
that loops on every test costs its first timeout and little more, while one that loops on a
single test still has the rest graded (a fresh worker answers them in milliseconds). Tests
the budget leaves out fail as ``budget`` ("not run: the time budget ran out")."""


def after_timeout_s(timeout_s: float) -> float:
    """What the rest of an episode gets once a test has timed out (see :data:`AFTER_TIMEOUT_S`).

    >>> after_timeout_s(3.0), after_timeout_s(0.2)
    (0.5, 0.2)
    """
    return min(AFTER_TIMEOUT_S, timeout_s)


def budget_failure(*, stopped: bool = False) -> dict[str, Any]:
    """A test's fields when the episode's time ran out before it (or, ``stopped``, while it ran)."""
    return {"ok": False, "error": {"type": "stopped" if stopped else "budget"}, "why": "budget"}


_LOST_ANSWER: dict[str, tuple[dict[str, Any], str]] = {
    "timeout": ({"type": "timeout"}, "timeout"),
    "output": ({"type": "output limit"}, "output"),
    "overflow": ({"type": "value too large"}, "overflow"),
    "memory": ({"type": "MemoryError", "msg": "memory limit exceeded"}, "memory"),
}
"""A failed test's error and reason, by the event that came instead of its answer."""

_LOST_LOAD = {
    "timeout": "import timeout",
    "output": "the program printed too much output while loading",
    "memory": "the program ran out of memory while loading",
}
"""Why a worker failed to load the candidate, by the event that came instead of its report."""


def _word(event: Any) -> str:
    """An event named by the driver (a str), or "" for a record the worker wrote."""
    return event if isinstance(event, str) else ""


class WorkerLink(Protocol):
    """The worker as the loop sees it: a process of this run (the judge here) or a sandbox run
    of its own (direct mode, in the parent)."""

    def send(self, data: bytes) -> None:
        """Write request lines to the worker (buffered: never blocks)."""

    def kill(self) -> None:
        """End the worker now."""

    def how_it_ended(self) -> str:
        """After ``"ended"``: how, e.g. ``"exited with code 1"`` or ``"was killed by SIGKILL"``."""

    def let_exit(self) -> None:
        """No more requests: the worker exits on its own, or is killed shortly after."""

    def printed(self) -> tuple[bytes, bytes, int]:
        """What the workers printed since the last call: the tails of stdout and stderr (the
        last :data:`TAIL` bytes at least) and how many bytes in all."""

    def hidden_tests(self) -> list[dict[str, Any]]:
        """The hidden tests, asked for once the visible tests' output is recorded."""


def call_request(i: int, payload: dict[str, Any]) -> dict[str, Any]:
    """The request a worker answers for the call test ``i``."""
    return {"i": i, "fn": payload["fn"], "args": payload["args"], "kwargs": payload.get("kwargs")}


def request_line(i: int, payload: dict[str, Any]) -> bytes:
    """:func:`call_request` as the worker reads it: one JSON line."""
    return (
        json.dumps(call_request(i, payload), ensure_ascii=True, separators=(",", ":")).encode()
        + b"\n"
    )


def reply_fields(rec: dict[str, Any], wall: float) -> dict[str, Any]:
    """A test record's fields from the worker's answer ``rec``, timed ``wall`` seconds."""
    fields: dict[str, Any] = {"ok": rec.get("ok") is True, "wall_s": round(wall, 6)}
    if fields["ok"]:
        fields["value"] = rec.get("value")
    else:
        fields["error"] = safe_error(rec.get("error"))
    return fields  # the worker's own figures ("t", "m") are the candidate's to forge: not used


def result_record(i: int, hidden: bool, fields: dict[str, Any]) -> dict[str, Any]:
    """A ``test`` record's fields. A hidden test's error is its kind alone: a builtin
    exception's name or the judge's own word, nothing the candidate wrote."""
    if hidden and "error" in fields:
        fields["error"] = {"type": error_kind(as_dict(fields["error"]).get("type"))}
    return {"i": i, "phase": "hidden" if hidden else "visible", **fields}


def output_record(phase: str, out: bytes, err: bytes, total: int) -> dict[str, Any]:
    """An ``output`` record's fields: what a phase printed, shown for the visible tests only
    (nothing printed once a hidden input went in may reach the feedback)."""
    visible = phase == "visible"
    return {
        "phase": phase,
        "stdout": out[-TAIL:].decode("utf-8", "replace") if visible else "",
        "stderr": err[-TAIL:].decode("utf-8", "replace") if visible else "",
        "bytes": total,
    }


class CallTests:
    """The judge's loop over call tests, written once for both ways of grading them.

    :meth:`run` is a generator that a driver feeds with the worker's events (see
    :data:`START`): the judge in the sandbox reads them from its worker's pipes
    (:meth:`Judge.drive`), direct mode from the session of each sandbox run, in the parent.
    The loop starts a worker and waits until it has loaded the candidate (a compile error or a
    failed import of the first one ends the grading), then sends the requests of a phase ahead
    (up to the next script test: a script runs in the judge and makes its own calls), takes
    each answer in turn, and times each test from the previous answer (or from its request)
    to its own. Anything but the answer it waits for (a timeout, a crash,
    a reply out of turn, an endless reply, too much output) fails that test and ends the
    worker; the next test gets a new one, within what is left of the episode's budget, which
    a timeout cuts to :func:`after_timeout_s` (one wall limit per episode, not one per test).
    The visible tests run first; their output is recorded before any hidden test is asked for.
    Records go to ``emit(kind, **fields)``.

    What a worker sends is the candidate's to forge: an answer counts only as the value
    returned for the test being waited for, and the timing and the kills are the loop's.
    """

    def __init__(
        self,
        link: WorkerLink,
        emit: Callable[..., None],
        *,
        timeout_s: float,
        budget_s: float,
        lines: list[bytes] | None = None,
        run_script: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.link, self.emit = link, emit
        self.timeout, self.budget_s = float(timeout_s), float(budget_s)
        self.budget_end = math.inf  # set when the first worker starts
        self.lines = lines  # the tests' request lines, made ahead by a caller that caches them
        self.run_script = run_script
        self.tests: list[dict[str, Any]] = []
        self.n_visible = 0
        self.next = 0  # the next test to answer
        self.phase_end = 0  # the end of the phase being run: the visible tests, then all
        self.sent = 0  # the worker holds the requests of the tests next..sent-1
        self.start = 0.0  # when the test being waited for began
        self.running = False  # a worker has loaded the candidate and takes requests
        self.workers = 0  # workers started so far
        self.static_sent = False
        self.stopped = False  # the first worker could not load the candidate: nothing runs

    # -- the whole loop ---------------------------------------------------------------------------

    def run(self, visible: list[dict[str, Any]]) -> Generator[Any, Any, None]:
        """Every call test: the visible ones, their output, then the hidden ones."""
        self.tests = list(visible)
        self.n_visible = self.phase_end = len(self.tests)
        yield from self.load()  # compile, static facts and import, before any test
        if self.stopped:
            return
        yield from self.run_phase()
        self.end_phase("visible")
        self.tests += self.link.hidden_tests()
        self.phase_end = len(self.tests)
        yield from self.run_phase()
        self.end_phase("hidden")
        self.link.let_exit()

    def run_phase(self) -> Generator[Any, Any, None]:
        tests, emit = self.tests, self.emit
        while self.next < self.phase_end:
            i = self.next
            fields: dict[str, Any] | None
            if time.monotonic() >= self.budget_end:
                fields = budget_failure()
            elif "script" in tests[i]:
                assert self.run_script is not None, "script tests run in the judge's sandbox"
                fields = self.run_script(i, tests[i])
            elif not self.running:
                fields = yield from self.load()
                if fields is None:
                    continue  # loaded: now the test
            else:  # a plain call test: its answer (the hot path, one generator deep)
                if self.sent <= i:
                    self.send_requests(i)
                    self.start = time.monotonic()
                deadline = self.start + self.timeout
                fields = self.take_answer(i, deadline, (yield min(deadline, self.budget_end)))
            emit("test", **result_record(i, i >= self.n_visible, fields))
            self.next = i + 1

    def timed_out(self) -> None:
        """A test ran out of time: what is left of the episode is :func:`after_timeout_s`."""
        self.budget_end = min(self.budget_end, time.monotonic() + after_timeout_s(self.timeout))

    def end_phase(self, phase: str) -> None:
        self.emit("output", **output_record(phase, *self.link.printed()))

    # -- a worker's life ----------------------------------------------------------------------------

    def load(self) -> Generator[Any, Any, dict[str, Any] | None]:
        """Start a worker and wait until it has loaded the candidate: ``None``, or the fields of
        the test it was to run. The first worker's failure is the whole grading's: its compile
        or import record is written and nothing more runs."""
        first = self.workers == 0
        self.workers += 1
        self.running = False
        yield START
        now = time.monotonic()
        if first:
            self.budget_end = now + self.budget_s
        # Requests go to a worker once it has loaded the module: nothing the candidate does
        # while loading (reading every fd it has, say) finds a test or takes one away.
        self.sent = self.next
        deadline = min(now + self.timeout, self.budget_end)
        while True:
            event = yield deadline
            kind = event.get("k") if isinstance(event, dict) else None
            if kind == "static" and not self.static_sent:
                self.static_sent = True
                self.emit("static", ok=bool(event.get("ok")), facts=event.get("facts"))
            elif kind == "compile" and event.get("ok") is True:
                continue
            elif kind == "import" and event.get("ok") is True:
                self.running = True
                return None
            else:
                return self.failed_to_load(event, first)

    def failed_to_load(self, event: Any, first: bool) -> dict[str, Any]:
        """The worker did something else than load the candidate: it is ended, and the failure
        is the whole grading's (the first worker) or the test's it was to run (a restart)."""
        kind = event.get("k") if isinstance(event, dict) else None
        if event == "ended":
            why = f"the program {self.link.how_it_ended()} while loading"
        else:
            self.link.kill()
            # Anything else is a protocol failure: garbage, a record out of turn, or a compile or
            # static report after the first (the candidate's own writing: a restarted worker
            # that has seen inputs could put them in it).
            why = "import" if kind == "import" else _LOST_LOAD.get(_word(event), "protocol")
        if not first:
            if event == "timeout":
                if time.monotonic() >= self.budget_end:
                    return budget_failure()
                self.timed_out()
            return {"ok": False, "error": {"type": "ImportError", "msg": why}, "why": why}
        self.stopped = True
        if kind == "compile":
            self.emit("compile", ok=False, error=text_field(event.get("error"), TAIL, tail=True))
            return {"why": "compile"}
        error = {"type": "timeout" if event == "timeout" else "exited", "msg": why}
        if kind == "import":
            err = safe_error(event.get("error"))
            error = {"type": err["type"], "msg": err.get("msg", ""), "tb": err.get("tb", "")}
        self.emit("import", ok=False, error=error)
        return {"why": why}

    def drop_worker(self) -> None:
        """End the worker now (a script test ran out of time with a call in it)."""
        self.link.kill()
        self.running = False

    # -- answers ------------------------------------------------------------------------------------

    def send_requests(self, first: int) -> None:
        """Send the requests from test ``first`` to the phase's end or the next script test:
        the worker answers one after the other without waiting between tests."""
        end = first
        while end < self.phase_end and "script" not in self.tests[end]:
            end += 1
        if end > first:
            lines = self.lines
            self.link.send(b"".join(
                lines[first:end] if lines is not None
                else [request_line(k, self.tests[k]) for k in range(first, end)]
            ))  # fmt: skip
        self.sent = end

    def script_call(
        self, i: int, payload: dict[str, Any], deadline: float
    ) -> Generator[Any, Any, dict[str, Any]]:
        """One call made by the script test ``i``, as a test's fields (a failed load included)."""
        if not self.running:
            failure = yield from self.load()
            if failure is not None:
                return failure
        self.link.send(request_line(i, payload))
        self.start = time.monotonic()
        return self.take_answer(i, deadline, (yield min(deadline, self.budget_end)))

    def take_answer(self, i: int, deadline: float, event: Any) -> dict[str, Any]:
        """The test's fields from the event that came while the loop waited for the answer to
        test ``i`` (until ``deadline``, or the budget's end if sooner)."""
        now = time.monotonic()
        wall = now - self.start
        if type(event) is dict and event.get("k") == "result" and event.get("i") == i:
            self.start = now  # the worker turned to the next test then
            return reply_fields(event, wall)
        if event == "ended":
            error = {"type": "exited", "msg": f"the program {self.link.how_it_ended()}"}
            why = "exited"
        else:
            self.link.kill()
            if event == "timeout" and deadline > self.budget_end:  # the budget stopped it
                self.running = False
                return {**budget_failure(stopped=True), "wall_s": round(wall, 6)}
            if event == "timeout":
                self.timed_out()
            lost = _LOST_ANSWER.get(_word(event))
            error, why = lost or ({"type": "protocol", "msg": "unexpected reply"}, "protocol")
        self.running = False
        return {"ok": False, "error": dict(error), "why": why, "wall_s": round(wall, 6)}


# ----------------------------------------------------------------------------------------------
# The judge inside the sandbox
# ----------------------------------------------------------------------------------------------


class Channel:
    """Records to the parent on fd 3: ``<nonce>\\t<json>\\n``.

    Written a phase at a time (and whenever 64 KiB are waiting), not a record at a time: the
    parent wakes up a few times per run instead of once per test. A judge killed mid-phase
    loses that phase's records: its tests then count as not run, which is what they are."""

    FLUSH_AT = 64 << 10
    FLUSH_ON = frozenset({"output", "end"})

    def __init__(self, nonce: str) -> None:
        self.prefix = nonce.encode() + b"\t"
        self.waiting: list[bytes] = []
        self.size = 0

    def emit(self, kind: str, **fields: Any) -> None:
        fields["k"] = kind
        try:  # UTF-8 keeps non-ASCII output at most 4 bytes a character (escapes take 6-12)
            body = json.dumps(fields, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except ValueError:  # a lone surrogate in a string, or a NaN the worker wrote into its reply
            body = json.dumps(fields, ensure_ascii=True).encode()
        except RecursionError:  # a reply nested past the judge's stack: no value, a failed test
            fields = {"k": kind, "i": fields.get("i"), "phase": fields.get("phase"), "ok": False,
                      "error": {"type": "protocol"}, "wall_s": fields.get("wall_s")}  # fmt: skip
            body = json.dumps(fields).encode()
        line = self.prefix + body + b"\n"
        self.waiting.append(line)
        self.size += len(line)
        if kind in self.FLUSH_ON or self.size >= self.FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if self.waiting:
            data, self.waiting, self.size = b"".join(self.waiting), [], 0
            _write_all(CHANNEL, data)


class _Reaped:
    def __init__(self, status: int | None, cpu: float, maxrss_kb: float) -> None:
        self.status, self.cpu, self.maxrss_kb = status, cpu, maxrss_kb

    def describe(self) -> str:
        if self.status is None:
            return "was lost"
        if os.WIFSIGNALED(self.status):
            sig = os.WTERMSIG(self.status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return f"was killed by {name}"
        return f"exited with code {os.WEXITSTATUS(self.status)}"


def _reap(pid: int, *, kill: bool) -> _Reaped:
    if kill:
        for target in (
            lambda: os.killpg(pid, signal.SIGKILL),
            lambda: os.kill(pid, signal.SIGKILL),
        ):
            try:
                target()
            except OSError:
                pass
    else:
        # Half a second to exit on its own: woken by its pidfd the moment it does (its pipes
        # close before it becomes a zombie, so polling wait4 would mostly find it still there).
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # already reaped, or no pidfd: wait4 below tells which
            pidfd = -1
        if pidfd >= 0:
            try:
                deadline = time.monotonic() + 0.5
                while not select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    if time.monotonic() >= deadline:
                        return _reap(pid, kill=True)
            finally:
                os.close(pidfd)
        try:
            done, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return _Reaped(None, 0.0, 0.0)
        if not done:
            return _reap(pid, kill=True)
        _kill_group(pid)
        return _Reaped(status, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)
    return _wait_for(pid)


def _wait_for(pid: int) -> _Reaped:
    """Wait for child ``pid`` to end (as long as it takes; EINTR is retried by Python), then
    kill whatever it left behind in its process group."""
    try:
        _, status, ru = os.wait4(pid, 0)
    except ChildProcessError:
        return _Reaped(None, 0.0, 0.0)
    _kill_group(pid)
    return _Reaped(status, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # whatever it left behind
    except OSError:
        pass


class WorkerProcess:
    """One worker process and the pipes the judge talks to it on."""

    def __init__(self, job: dict[str, Any], judge: Judge) -> None:
        self.judge = judge
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                os.setpgid(0, 0)
                import fcntl

                a = fcntl.fcntl(req_r, fcntl.F_DUPFD, 100)
                b = fcntl.fcntl(rep_w, fcntl.F_DUPFD, 100)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                os.dup2(a, 3)
                os.dup2(b, 4)
                os.closerange(5, 1 << 16)
                _limit_memory(job, native=False)
                _worker_main(job)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(70)
        self.pid = pid
        for fd in (req_r, rep_w, out_w, err_w):
            os.close(fd)
        for fd in (self.req_w, self.rep_r, self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.buf = b""
        self.events: collections.deque[dict[str, Any] | str] = collections.deque()
        self.pending = b""
        self.open = {self.rep_r, self.out_r, self.err_r}
        self.reaped: _Reaped | None = None

    def recv(self, deadline: float) -> dict[str, Any] | str:
        """The worker's next event for the loop over call tests (see :data:`START`)."""
        while True:
            if not self.events:
                events, self.buf = take_replies(self.buf, self.judge.reply_cap)
                self.events.extend(events)
            if self.events:
                return self.events.popleft()
            if self.judge.flooded:
                return "output"
            if self.rep_r not in self.open:
                return "ended"
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            writers = [self.req_w] if self.pending else []
            try:
                readable, writable, _ = select.select(list(self.open), writers, [], left)
            except InterruptedError:
                continue
            if writable:
                try:
                    n = os.write(self.req_w, self.pending)
                    self.pending = self.pending[n:]
                except BlockingIOError:
                    pass
                except OSError:
                    self.pending = b""
            for fd in readable:
                self._read(fd)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.open.discard(fd)
            return
        if fd == self.rep_r:
            self.buf += chunk
        else:
            self.judge.output(fd == self.err_r, chunk)
            if self.judge.output_bytes > self.judge.output_cap:
                self.judge.flooded = True

    def drain(self) -> None:
        for fd in list(self.open - {self.rep_r}):
            for _ in range(64):
                before = self.judge.output_bytes
                self._read(fd)
                if self.judge.output_bytes == before:
                    break

    def finish(self, *, kill: bool) -> _Reaped:
        if self.reaped is None:
            try:
                os.close(self.req_w)
            except OSError:
                pass
            if not kill:
                # Let the worker see EOF on its requests and exit; drain what it still prints.
                deadline = time.monotonic() + 1.0
                while self.open and time.monotonic() < deadline:
                    r, _, _ = select.select(
                        list(self.open), [], [], max(0.0, deadline - time.monotonic())
                    )
                    for fd in r:
                        self._read(fd)
                        if fd == self.rep_r:
                            self.buf = b""
            self.reaped = _reap(self.pid, kill=kill or bool(self.open))
            for fd in (self.rep_r, self.out_r, self.err_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.judge.account(self.reaped)
        return self.reaped


class _ScriptTimeout(BaseException):
    pass


class Judge:
    """The judge inside the sandbox run: it runs the tests against the candidate's processes
    and writes what they did on the result channel.

    Call tests go through :class:`CallTests`, which this judge drives with the events of its
    worker process (:meth:`drive`; it is the loop's :class:`WorkerLink`); script tests run
    here and call into the worker through the same loop; stdin/stdout tests run one process
    each, forked by a :class:`ProgramServer`.
    """

    def __init__(self, job: dict[str, Any], channel: Channel) -> None:
        self.job = job
        self.ch = channel
        self.timeout = float(job["timeout_s"])
        self.budget_end = math.inf  # the stdin/stdout tests' budget, from when they start (run)
        self.reply_cap = int(job.get("max_reply_bytes", 8 << 20)) + REPLY_ENVELOPE
        self.output_cap = int(job.get("output_cap", 1 << 20))
        self.phase = "visible"
        self.tails = {"stdout": Tail(), "stderr": Tail()}
        self.output_bytes = 0  # what the workers printed in all
        self.flooded = False
        self.worker: WorkerProcess | None = None
        self.cpu = 0.0
        self.maxrss_kb = 0.0
        self.compile_failed = False
        self.compiled = False  # a program server has compiled the program
        self.server: ProgramServer | None = None
        self.calls = CallTests(
            self, channel.emit, timeout_s=self.timeout, budget_s=float(job["budget_s"]),
            run_script=self.run_script,
        )  # fmt: skip

    # -- bookkeeping ------------------------------------------------------------------------

    def output(self, is_err: bool, chunk: bytes) -> None:
        self.output_bytes += len(chunk)
        self.tails["stderr" if is_err else "stdout"].add(chunk)

    def account(self, reaped: _Reaped) -> None:
        self.cpu += reaped.cpu
        self.maxrss_kb = max(self.maxrss_kb, reaped.maxrss_kb)

    def read_hidden(self) -> list[dict[str, Any]]:
        """The hidden tests, from the second part of stdin (read once the visible tests are
        done, and stdin closed after it)."""
        hidden: list[dict[str, Any]] = _read_part(0)["hidden"]
        os.close(0)
        return hidden

    # -- the worker, as the loop over call tests sees it (WorkerLink) -------------------------

    def drive(self, steps: Generator[Any, Any, Any]) -> Any:
        """Run one of :class:`CallTests`' generators to its end on this judge's worker: start
        a worker when it asks for one, else wait for the worker's next event until the
        deadline it gives. Its return value."""
        try:
            wanted = next(steps)
            while True:
                if wanted == START:
                    self.worker = WorkerProcess(self.job, self)
                    event: Any = "started"
                else:
                    assert self.worker is not None, "the loop waits on a worker it started"
                    event = self.worker.recv(wanted)
                wanted = steps.send(event)
        except StopIteration as stop:
            return stop.value

    def send(self, data: bytes) -> None:
        assert self.worker is not None, "requests go to a worker the loop started"
        self.worker.pending += data

    def kill(self) -> None:
        self.retire(kill=True)

    def how_it_ended(self) -> str:
        reaped = self.retire(kill=False)
        return reaped.describe() if reaped is not None else "was lost"

    def let_exit(self) -> None:
        self.retire(kill=False)

    def printed(self) -> tuple[bytes, bytes, int]:
        if self.worker is not None:
            self.worker.drain()
        out, err = self.tails["stdout"], self.tails["stderr"]
        self.tails = {"stdout": Tail(), "stderr": Tail()}
        return out.data, err.data, out.total + err.total

    def hidden_tests(self) -> list[dict[str, Any]]:
        return self.read_hidden()

    def retire(self, *, kill: bool) -> _Reaped | None:
        w, self.worker = self.worker, None
        return w.finish(kill=kill) if w is not None else None

    # -- script tests -----------------------------------------------------------------------

    def run_script(self, i: int, payload: dict[str, Any]) -> dict[str, Any]:
        """A test written as Python statements, run here in the judge; the candidate's
        functions are proxies into the worker that return plain decoded values, so assertions
        compare plain data."""
        calls = self.calls
        own = time.monotonic() + self.timeout * max(1, int(payload.get("calls", 1)))
        deadline = min(own, calls.budget_end)
        failure: dict[str, Any] = {}

        def proxy_for(fn_name: str) -> Any:
            def proxy(*args: Any, **kwargs: Any) -> Any:
                try:
                    enc_args, enc_kwargs = encode(list(args)), encode(dict(kwargs))
                except Unencodable as e:
                    raise TypeError(f"test arguments are not plain data: {e}") from None
                call = {"fn": fn_name, "args": enc_args, "kwargs": enc_kwargs}
                fields = self.drive(calls.script_call(i, call, own))
                if fields.get("why") in ("compile", "import", "timeout", "exited", "overflow",
                                         "protocol", "output", "budget"):  # fmt: skip
                    failure.update(fields)
                    raise _ScriptTimeout
                if fields["ok"]:
                    return decode(fields["value"])
                err = fields.get("error") or {}
                cls = getattr(builtins, str(err.get("type")), None)
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    cls = Exception
                raise cls(str(err.get("msg", "")))

            return proxy

        namespace: dict[str, Any] = {"__name__": "__test__"}
        for alias, fn_name in dict(payload.get("names") or {}).items():
            namespace[alias] = proxy_for(fn_name)

        def on_alarm(signum: int, frame: Any) -> None:
            raise _ScriptTimeout

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline - time.monotonic()))
        start = time.monotonic()
        try:
            exec(compile(payload["script"], "<test>", "exec"), namespace)
            result: dict[str, Any] = {"ok": True}
        except _ScriptTimeout:
            if failure:
                result = dict(failure)
            elif own > calls.budget_end:  # the episode's budget stopped it
                result = budget_failure(stopped=True)
            else:
                result = {"ok": False, "error": {"type": "timeout"}, "why": "timeout"}
                calls.timed_out()
            result["ok"] = False
            if result.get("why") in ("timeout", "budget"):
                calls.drop_worker()
        except AssertionError as e:
            result = {
                "ok": False,
                "error": {"type": "AssertionError", "msg": str(e)[:500] or "assertion failed"},
            }
        except BaseException as e:  # noqa: BLE001
            result = {
                "ok": False,
                "error": {"type": _builtin_exception_name(e), "msg": str(e)[:500]},
            }
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        result["wall_s"] = round(time.monotonic() - start, 6)
        result.pop("value", None)
        return result

    # -- stdin/stdout tests -------------------------------------------------------------------

    def run_stdio(self, visible: list[dict[str, Any]]) -> None:
        # The program server starts (and compiles a Python program) before the hidden tests
        # are read.
        if self.ensure_server() == {"why": "compile"}:
            return
        if not self.run_stdio_tests(visible, 0):
            return
        self.ch.emit("output", **output_record(self.phase, *self.printed()))
        self.phase = "hidden"
        hidden = self.read_hidden()
        if hidden and not self.run_stdio_tests(hidden, len(visible)):
            return
        self.ch.emit("output", **output_record(self.phase, *self.printed()))

    def run_stdio_tests(self, tests: list[dict[str, Any]], first: int) -> bool:
        for offset, payload in enumerate(tests):
            i = first + offset
            if time.monotonic() >= self.budget_end:
                fields: dict[str, Any] = budget_failure()
            else:
                fields = self.run_program(payload.get("input", ""))
            if fields.get("why") == "compile":
                return False
            if fields.get("why") == "timeout":  # one wall limit per episode (AFTER_TIMEOUT_S)
                self.budget_end = min(
                    self.budget_end, time.monotonic() + after_timeout_s(self.timeout)
                )
            self.ch.emit("test", **result_record(i, self.phase == "hidden", fields))
        return True

    def ensure_server(self) -> ProgramServer | dict[str, Any]:
        """A live program server, or the failed test's fields: ``{"why": "compile"}`` once
        the program is known not to compile (the ``compile`` record is then emitted)."""
        if self.compile_failed:
            return {"why": "compile"}
        if self.server is None:
            server = ProgramServer(self.job)
            why, detail = server.start(min(time.monotonic() + self.timeout, self.budget_end))
            if why == "compile" and self.compiled:  # it compiled before: not a compile error
                why, detail = "exited", "the program's server failed to start again"
            if why == "compile":
                self.compile_failed = True
                self.ch.emit("compile", ok=False, error=detail[-TAIL:])
                return {"why": "compile"}
            if why is not None:
                return {"ok": False, "error": {"type": why, "msg": detail}, "why": why}
            self.compiled = True
            self.server = server
        return self.server

    def run_program(self, stdin_text: str) -> dict[str, Any]:
        """One test of a stdin/stdout program in a process of its own, forked by the program
        server."""
        server = self.ensure_server()
        if isinstance(server, dict):
            return server
        data = stdin_text.encode("utf-8", "surrogatepass")
        memfd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        _write_all(memfd, data)
        os.lseek(memfd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        start = time.monotonic()
        try:
            sent = server.request([memfd, out_w, err_w])
        finally:
            for fd in (memfd, out_w, err_w):
                os.close(fd)
        out, err = bytearray(), Tail()
        open_fds = {out_r, err_r}
        for fd in open_fds:
            os.set_blocking(fd, False)
        deadline = min(start + self.timeout, self.budget_end)
        why = None
        sock = server.sock.fileno()
        while sent and (open_fds or server.exit is None) and server.alive:
            left = deadline - time.monotonic()
            if left <= 0:
                why = "timeout"
                break
            try:
                readable, _, _ = select.select([*open_fds, sock], [], [], left)
            except InterruptedError:
                continue
            for fd in readable:
                if fd == sock:
                    server.receive()
                    continue
                _drain(fd, out_r, out, err, open_fds)
            if len(out) + err.total > self.output_cap:
                why = "output"
                break
        reaped = server.finish_test(kill=why is not None or bool(open_fds))
        wall = time.monotonic() - start
        for fd in (out_r, err_r):
            os.close(fd)
        if not server.alive:
            server.close()
            self.server = None
        self.account(reaped)
        fields: dict[str, Any] = {
            "stdout": bytes(out[: self.output_cap]).decode("utf-8", "replace"),
            "wall_s": round(wall, 6),
            "cpu_s": round(reaped.cpu, 6),
            "mem_mb": _mb(reaped.maxrss_kb),
        }
        if self.phase == "visible":
            fields["stderr"] = err.text()
        if why == "timeout" and start + self.timeout > self.budget_end:
            return {**fields, **budget_failure(stopped=True)}
        if why == "timeout":
            return {**fields, "ok": False, "error": {"type": "timeout"}, "why": "timeout"}
        if why == "output":
            return {**fields, "ok": False, "error": {"type": "output limit"}, "why": "output"}
        st = reaped.status
        if st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0:
            return {**fields, "ok": True}
        return {**fields, "ok": False, "error": {"type": "exited", "msg": f"the program {reaped.describe()}"},
                "why": "exited"}  # fmt: skip

    # -- the whole job ------------------------------------------------------------------------

    def run(self) -> None:
        job = self.job
        if job.get("binary"):
            _install_binary(job["binary"], job["argv"][0])
        self.budget_end = time.monotonic() + float(job["budget_s"])
        if job["mode"] == "stdio":
            self.run_stdio(job["visible"])
        else:
            self.drive(self.calls.run(job["visible"]))

    def close(self) -> None:
        self.retire(kill=False)
        if self.server is not None:
            self.server.close()
            self.server = None
        self.ch.emit("usage", cpu_s=round(self.cpu, 6), peak_mb=_mb(self.maxrss_kb))


class ProgramServer:
    """The program server of a stdin/stdout task, seen from the judge.

    A fork of the judge that never runs the candidate's code itself: it compiles a Python
    program once, then for every test forks a fresh process that runs it (or execs the
    compiled binary) on the test's stdin, reaps that process and reports its wait status and
    rusage (the kernel's figures, from ``wait4``). Each test still runs in a process of its
    own, so nothing a program does carries over to the next test; the judge forks once per run
    instead of once per test, and the per-test forks come from the server, whose pages the
    judge's own work does not keep dirtying. The server is non-dumpable like the judge (a
    program cannot open its memory) and holds nothing a program could forge results with: a
    program that kills or stops it only fails its own test, and the judge starts another
    server for the next one.
    """

    def __init__(self, job: dict[str, Any]) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the server
            try:
                self.sock.close()
                _serve_programs(job, theirs)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(70)
        theirs.close()
        self.pid = pid
        self.alive = True
        self.test_pid: int | None = None
        self.exit: dict[str, Any] | None = None

    def start(self, deadline: float) -> tuple[str | None, str]:
        """Wait until the server is ready: ``(None, "")``, ``("compile", diagnostics)``, or the kind of
        failure (``"timeout"``, ``"exited"``) and why."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close(kill=True)
                return "timeout", "the program took too long to compile"
            try:
                ready, _, _ = select.select([self.sock], [], [], left)
            except InterruptedError:
                continue
            if not ready:
                continue
            msg = self._recv()
            if msg is not None and msg.get("k") == "ready":
                return None, ""
            self.close(kill=True)
            if msg is not None and msg.get("k") == "compile":
                return "compile", str(msg.get("error", ""))
            return "exited", "the program's process ended before its first test"

    def request(self, fds: list[int]) -> bool:
        """Ask for a test's process with ``fds`` as its stdin, stdout and stderr."""
        self.test_pid, self.exit = None, None
        try:
            socket.send_fds(self.sock, [b"t"], fds)
            return True
        except OSError:
            self.alive = False
            return False

    def _recv(self) -> dict[str, Any] | None:
        try:
            data = self.sock.recv(1 << 12)
        except (BlockingIOError, InterruptedError):
            return {}
        except OSError:
            data = b""
        if not data:
            self.alive = False
            return None
        try:
            msg = json.loads(data)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            self.alive = False  # the server never sends that: treat it as gone
            return None
        return msg

    def receive(self) -> None:
        """Take in the server's next message (the test process's pid, or its end)."""
        msg = self._recv()
        if msg is None:
            return
        if msg.get("k") == "pid" and isinstance(msg.get("pid"), int):
            self.test_pid = msg["pid"]
        elif msg.get("k") == "exit":
            self.exit = msg

    def finish_test(self, *, kill: bool) -> _Reaped:
        """The test's process ended (killed first, with what it left, if ``kill``): its wait
        status and rusage as the server reaped it; ``status=None`` if it could not tell."""
        if kill and self.exit is None:
            if self.test_pid is not None:
                _kill_group(self.test_pid)
                try:
                    os.kill(self.test_pid, signal.SIGKILL)
                except OSError:
                    pass
            else:  # the server never said which process: it is stuck, end it
                self.close(kill=True)
        deadline = time.monotonic() + 1.0
        while self.exit is None and self.alive:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ready, _, _ = select.select([self.sock], [], [], left)
            except InterruptedError:
                continue
            if ready:
                self.receive()
        e = self.exit
        if e is None:  # the server is gone or stuck: end it; the test's process goes with its group
            if self.test_pid is not None:
                _kill_group(self.test_pid)
            self.close(kill=True)
            return _Reaped(None, 0.0, 0.0)
        status = e.get("status")
        return _Reaped(
            status if isinstance(status, int) else None,
            float(e.get("cpu") or 0.0),
            float(e.get("maxrss_kb") or 0.0),
        )

    def close(self, *, kill: bool = False) -> None:
        """End the server (it exits when its socket closes) and reap it. Its own rusage is not the
        program's: the tests' processes were accounted one by one."""
        if self.pid <= 0:
            return
        self.alive = False
        try:
            self.sock.close()
        except OSError:
            pass
        _reap(self.pid, kill=kill)
        self.pid = -1


def _send_json(sock: socket.socket, obj: dict[str, Any]) -> None:
    sock.send(json.dumps(obj).encode())


def _serve_programs(job: dict[str, Any], sock: socket.socket) -> None:
    """The program server's life (see :class:`ProgramServer`): compile, then one fresh process per request."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    _default_signals()
    native = bool(job.get("argv"))
    code = None
    if not native:
        try:
            _, code = _compile_candidate(job["source"])
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            detail = "".join(traceback.format_exception_only(type(e), e))
            _send_json(sock, {"k": "compile", "error": detail[-TAIL:]})
            os._exit(0)
        _limit_memory(job, native=False)  # the tests' processes inherit it
        _setup_stdio()
        atexit._clear()  # what the judge registered is not the program's
    _send_json(sock, {"k": "ready"})
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 3)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        if not msg or len(fds) != 3:
            os._exit(0)
        pid = os.fork()
        if pid == 0:  # the test's process
            try:
                os.setpgid(0, 0)
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                os.closerange(3, 1 << 16)
                if native:
                    _limit_memory(job, native=True)
                    try:
                        soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
                        want = 256 << 20
                        if hard == resource.RLIM_INFINITY or hard >= want:
                            resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
                    except (ValueError, OSError):
                        pass
                    os.execv(job["argv"][0], job["argv"])
                _run_python_code(job["source"], code)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(127)
        try:
            os.setpgid(pid, pid)  # also here: the judge may kill the group before the child runs
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        _send_json(sock, {"k": "pid", "pid": pid})
        reaped = _wait_for(pid)
        _send_json(
            sock,
            {
                "k": "exit",
                "status": reaped.status,
                "cpu": reaped.cpu,
                "maxrss_kb": reaped.maxrss_kb,
            },
        )


def _run_python_code(path: str, code: Any) -> None:
    """In a fresh fork of the program server: run the compiled program as ``python solution.py`` would."""
    sys.argv = [path]
    main = types.ModuleType("__main__")
    main.__file__ = path
    sys.modules["__main__"] = main
    exit_code = 0
    try:
        exec(code, main.__dict__)
    except SystemExit as e:
        if e.code is None:
            exit_code = 0
        elif isinstance(e.code, int):
            exit_code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            exit_code = 1
    except BaseException as e:  # noqa: BLE001
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
        exit_code = 1
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    _flush()
    os._exit(exit_code)


def compile_native(job: dict[str, Any]) -> str | None:
    """Run the compile step of a C/C++ program: ``None``, or what went wrong."""
    import subprocess

    try:
        proc = subprocess.run(
            job["compile_argv"], cwd=os.path.dirname(job["source"]) or ".",
            stdin=subprocess.DEVNULL, capture_output=True,
            timeout=float(job.get("compile_timeout_s", 30)),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "compilation timed out"
    except OSError as e:
        return f"cannot run the compiler: {e}"
    if proc.returncode != 0:
        text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        return text[-TAIL:] or f"exit code {proc.returncode}"
    return None


def build_native(job: dict[str, Any], ch: Channel) -> None:
    """Mode ``build``: compile a C/C++ program and send the binary back (base64).

    A run of its own, so that the compiler's memory and CPU (hundreds of MB and seconds for
    C++) are not the program's: the tests' run gets the binary and measures the program."""
    error = compile_native(job)
    if error is not None:
        ch.emit("compile", ok=False, error=error)
        return
    try:
        with open(job["output"], "rb") as f:
            data = f.read()
    except OSError as e:
        ch.emit("compile", ok=False, error=f"the compiler wrote no program: {e}")
        return
    import base64

    ch.emit("binary", data=base64.b64encode(data).decode("ascii"))


def _install_binary(shipped: str, path: str) -> None:
    """The program as the build run made it, made executable under its own name (the shipped
    file belongs to the sandbox, so a copy: the run's own, mode 0755)."""
    with open(shipped, "rb") as f:
        data = f.read()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o755)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def run_special_judge(job: dict[str, Any], ch: Channel) -> None:
    """Mode ``judge``: call the task's ``judge(...)`` on each item (no candidate code here)."""
    namespace: dict[str, Any] = {"__name__": "__judge__"}
    try:
        exec(compile(job["judge"], "<judge>", "exec"), namespace)
        judge = namespace["judge"]
    except BaseException as e:  # noqa: BLE001
        ch.emit("judge_error", error=f"{type(e).__name__}: {e}"[:2000])
        return
    kind = job["kind"]
    for item in job["items"]:
        try:
            if kind == "call":
                verdict = judge(
                    decode(item["args"]), decode(item["value"]), decode(item["expected"])
                )
            else:
                verdict = judge(item["input"], item["output"], item["expected"])
            ch.emit("verdict", i=item["i"], ok=bool(verdict))
        except BaseException as e:  # noqa: BLE001
            ch.emit("verdict", i=item["i"], ok=False, error=f"{type(e).__name__}: {e}"[:500])


def serve_calls(job: dict[str, Any]) -> None:
    """The worker alone, as the run's only process (``mode: "calls"``): the loop over call tests
    runs in the parent (direct mode).

    The parent sends the call requests on stdin, one JSON line each (the visible tests, then,
    once it has their answers and the output they printed, the hidden ones), and reads the
    answers on the result channel as they come; it times each test, kills the run on a
    timeout and starts another run for the tests left. The candidate's stdin is /dev/null;
    what it prints goes to the run's stdout and stderr."""
    requests = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _REPLIES[0] = CHANNEL
    _limit_memory(job, native=False)
    _worker_main(job, requests)


def _record_line(fields: dict[str, Any]) -> bytes:
    """A record as one line of JSON, UTF-8 (what a program printed stays at most 4 bytes a
    character; a lone surrogate falls back to escapes)."""
    try:
        return json.dumps(fields, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
    except ValueError:
        return json.dumps(fields, ensure_ascii=True).encode() + b"\n"


def _input_to_memfd(size: int) -> int:
    """The next ``size`` bytes of stdin (a test's input) in a memfd of their own, at offset 0.

    Spliced from the pipe, so the input never enters this process's memory: the processes it
    forks for later tests cannot find it there (where stdin is no pipe, it goes through one
    buffer of this process, wiped after)."""
    memfd = os.memfd_create("stdin", os.MFD_CLOEXEC)
    left = size
    try:
        while left:
            moved = os.splice(0, memfd, left)
            if moved == 0:
                raise EOFError("stdin ended early")
            left -= moved
    except (AttributeError, OSError):
        buf = bytearray(min(left, 1 << 16))
        view = memoryview(buf)
        try:
            while left:
                n = os.readv(0, [view[: min(left, len(buf))]])
                if n == 0:
                    raise EOFError("stdin ended early") from None
                _write_all(memfd, view[:n])
                left -= n
        finally:
            buf[:] = bytes(len(buf))
    os.lseek(memfd, 0, os.SEEK_SET)
    return memfd


class ProgramRunner:
    """The run's only process in direct mode for stdin/stdout tests (``mode: "programs"``).

    It compiles a Python program once, then for each test input read from stdin (a length
    and the input's bytes; the parent sends the hidden inputs once it has the visible tests'
    records) forks a fresh process that runs the program on that input, watches its output
    and its time (killing it at the test's timeout, or once it printed past the cap), reaps
    it (``wait4``: its status, CPU time and peak memory) and writes the test's record on the
    result channel. It runs no candidate code itself and is non-dumpable, like the judge: a
    test's process holds neither the channel nor stdin, so it can only end or stop this
    process, which fails its own test (the parent times each test too and starts another run
    for the tests left). The inputs never enter its memory (:func:`_input_to_memfd`).
    """

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.timeout = float(job["timeout_s"])
        self.output_cap = int(job.get("output_cap", 1 << 20))
        self.visible = int(job.get("visible", 0))
        self.code: Any = None

    def start(self) -> bool:
        """Compile the program and get ready: whether it compiled (else its record is written)."""
        try:
            _, self.code = _compile_candidate(self.job["source"])
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            detail = "".join(traceback.format_exception_only(type(e), e))
            _write_all(
                CHANNEL, _record_line({"k": "compile", "ok": False, "error": detail[-TAIL:]})
            )
            return False
        _limit_memory(self.job, native=False)  # the tests' processes inherit it
        _setup_stdio()  # their sys.stdin/stdout/stderr, made once (bound to fds 0-2 in each)
        atexit._clear()  # what the judge registered is not the program's
        _write_all(CHANNEL, _record_line({"k": "ready"}))
        return True

    def serve(self) -> None:
        """Run every test whose input comes in, until stdin ends (numbered from ``first``)."""
        i = int(self.job.get("first", 0))
        while True:
            try:
                header = _read_exact(0, 8)
            except (EOFError, OSError):
                return
            (size,) = struct.unpack("<Q", header)
            memfd = _input_to_memfd(size)
            fields = self.run_test(memfd, visible=i < self.visible)
            _write_all(CHANNEL, _record_line({"k": "test", "i": i, **fields}))
            i += 1

    def run_test(self, memfd: int, *, visible: bool) -> dict[str, Any]:
        """One test in a fresh process: its fields (as :meth:`Judge.run_program` makes them)."""
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the test's process
            try:
                os.setpgid(0, 0)
                for target, fd in enumerate((memfd, out_w, err_w)):
                    os.dup2(fd, target)
                os.closerange(3, 1 << 16)
                _run_python_code(self.job["source"], self.code)
            except BaseException:  # noqa: BLE001
                pass
            os._exit(127)
        try:
            os.setpgid(pid, pid)  # also here: it may be killed before it ran
        except OSError:
            pass
        for fd in (memfd, out_w, err_w):
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = -1
        out, err = bytearray(), Tail()
        open_fds = {out_r, err_r}
        for fd in open_fds:
            os.set_blocking(fd, False)
        deadline = start + self.timeout
        why = None
        exited = False
        while open_fds or not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                why = "timeout"
                break
            watch = [*open_fds, pidfd] if pidfd >= 0 and not exited else list(open_fds)
            wait = left if pidfd >= 0 or exited else min(left, 0.005)
            try:
                readable, _, _ = select.select(watch, [], [], wait)
            except InterruptedError:
                continue
            if pidfd < 0 and not exited:
                exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
                if exited:
                    _kill_group(pid)
            for fd in readable:
                if fd == pidfd:
                    exited = True
                    _kill_group(pid)  # whatever it left behind (still holding its output, say)
                    continue
                _drain(fd, out_r, out, err, open_fds)
            if len(out) + err.total > self.output_cap:
                why = "output"
                break
        if why is not None or open_fds:  # past its time or cap, or it left a process behind
            _kill_group(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        wall = time.monotonic() - start
        reaped = _wait_for(pid)
        for fd in (out_r, err_r, pidfd):
            if fd >= 0:
                os.close(fd)
        fields: dict[str, Any] = {
            "stdout": bytes(out[: self.output_cap]).decode("utf-8", "replace"),
            "wall_s": round(wall, 6),
            "cpu_s": round(reaped.cpu, 6),
            "mem_mb": _mb(reaped.maxrss_kb),
        }
        if visible:
            fields["stderr"] = err.text()
        if why == "timeout":
            return {**fields, "ok": False, "error": {"type": "timeout"}, "why": "timeout"}
        if why == "output":
            return {**fields, "ok": False, "error": {"type": "output limit"}, "why": "output"}
        status = reaped.status
        if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return {**fields, "ok": True}
        error = {"type": "exited", "msg": f"the program {reaped.describe()}"}
        return {**fields, "ok": False, "error": error, "why": "exited"}


def serve_programs(job: dict[str, Any]) -> None:
    """Direct mode for stdin/stdout tests: this run's process is a :class:`ProgramRunner`."""
    _default_signals()
    runner = ProgramRunner(job)
    if runner.start():
        runner.serve()


def main() -> None:
    _nondumpable()
    job = _read_part(0)
    if job.get("mode") == "calls":
        serve_calls(job)
        os._exit(0)
    if job.get("mode") == "programs":
        serve_programs(job)
        os._exit(0)
    ch = Channel(str(job["nonce"]))
    if job["mode"] in ("judge", "build"):
        ch.emit("start", mode=job["mode"])
        (run_special_judge if job["mode"] == "judge" else build_native)(job, ch)
        ch.emit("end")
        os._exit(0)
    ch.emit("start", mode=job["mode"], visible=len(job["visible"]))
    judge = Judge(job, ch)
    try:
        judge.run()
    finally:
        try:
            judge.close()
        finally:
            ch.flush()  # even when the judge itself failed: what it established stands
    ch.emit("end")
    os._exit(0)


if __name__ == "__main__":
    main()
