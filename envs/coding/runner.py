"""The judge program that runs inside the sandbox: it feeds tests to the candidate and reports.

Shipped as the sandbox's ``main.py`` for every grading run (stdlib only; the parent also imports
it for the value codec). One sandbox run grades one answer against all its tests.

Processes inside the run::

    judge J (this program: trusted, non-dumpable, owns the result channel, fd 3)
      fork -> worker W (call-based tasks; untrusted: the candidate's code runs here, all
              tests in turn; fds 0-2 are pipes to J, 3 and 4 a private request/reply pipe;
              it never holds fd 3 of the run)
      fork -> program server S (stdin/stdout tasks; runs no candidate code: it compiles a
              Python program once and forks one fresh process per test)
                fork -> the test's process (untrusted: fd 0 the test's input, 1-2 pipes to J)

In direct mode (plain call tests, see :mod:`llmgym.envs.coding.harness`) the run holds W alone
(:func:`serve_calls`): the judge's loop runs in the parent, which talks with W over the run's
stdin and result channel.

A local sandbox made by :func:`llmgym.envs.coding.harness.make_sandbox` preloads this module
in its zygote, so a run starts the judge without shipping or loading its code.

Why the verdicts cannot be forged from inside:

- **Expected values never enter the sandbox.** J only has the tests' *inputs*; it reports what
  the candidate returned (call-based tasks, serialized to plain tagged JSON by :func:`encode`)
  or printed (stdin/stdout tasks), and the parent compares those with the expected values it
  kept. Writing fake records, printing "OK", objects whose ``__eq__`` always says yes,
  patching builtins or this harness inside W: none of it produces the expected value.
- **W cannot reach J.** W runs in its own process with every other fd closed, J is
  non-dumpable (no ``/proc/J/mem``, no ``/proc/J/fd``) and ptrace is blocked by the sandbox's
  seccomp filter. J checks each reply against the request it sent (kind, index), so an
  unsolicited or out-of-order reply is a protocol failure of that test.
- **Missing results are failures.** ``sys.exit``, ``os._exit``, crashes, timeouts and kills
  end W; J records the test as failed and starts a fresh W for the next one. A stdin/stdout
  test's process is reaped by S, which reports its wait status and rusage to J; a program that
  kills or stops S fails that test, and J starts a fresh S. The parent also checks the nonce,
  the count and the order of J's records.
- **Hidden tests stay hidden.** J reads the visible tests and starts W before it even reads
  the hidden ones from stdin (W is forked from J, so it would otherwise inherit a copy), and
  W's fd 0 is ``/dev/null``. Text W controls (stdout, stderr, exception messages, returned
  values) is reported for visible tests only; for hidden tests J reports values (for the
  parent to compare) and builtin exception names, nothing the candidate could use to carry
  hidden inputs into the feedback.
- **Time is measured by J**, outside W, from the request to the reply (wall clock: sleeping
  counts) and enforced by killing W; CPU time and peak memory come from the kernel
  (``wait4``) when W is reaped. The sandbox's own wall limit is the last resort.

Residual risk, stated: W shares J's uid, so it can signal J (killing or stopping the judge
only loses its own results), and in-process tricks can read the inputs of the test W is
running. Kernel-level escapes are the sandbox's concern.

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
from typing import Any

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
# Small helpers
# ----------------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
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
JUDGE_KINDS = frozenset({"timeout", "budget", "output limit", "exited", "value too large",
                         "protocol"})  # fmt: skip
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


def _text(value: Any, cap: int, *, tail: bool = False) -> str:
    """A candidate-written string field, capped (anything that is not a string is dropped)."""
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
            out[key] = _text(err[key], cap, tail=tail)
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
    """Cap W's address space at what it has now plus ``memory_mb`` (MemoryError, not OOM)."""
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
    """Default dispositions for the signals J handles or ignores (through the C module:
    ``signal.signal`` builds enums, page faults in a freshly forked process)."""
    for sig in _RESET_SIGNALS:
        _signal.signal(sig, _signal.SIG_DFL)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mb(kb: float) -> float:
    return round(kb / 1024.0, 3)


class _Tail:
    """The last ``cap`` bytes of a stream and how many bytes it had."""

    def __init__(self, cap: int = TAIL) -> None:
        self.cap, self.total, self.data = cap, 0, b""

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data = (self.data + chunk)[-self.cap :]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


# ----------------------------------------------------------------------------------------------
# The worker: where the candidate's code runs (call-based tasks)
# ----------------------------------------------------------------------------------------------


_REPLIES = [4]
"""The fd W answers on: 4 under a judge J, 3 (the run's result channel) on its own."""


def _worker_reply(obj: dict[str, Any]) -> None:
    try:
        line = json.dumps(obj, ensure_ascii=True, allow_nan=False)
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
            facts = static_facts(source.decode("utf-8", "replace"))  # type: ignore[name-defined]  # noqa: F821
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
    perf, getrusage, self_ = time.perf_counter, resource.getrusage, resource.RUSAGE_SELF
    for line in reader:
        req = json.loads(line)
        i = req["i"]
        fn = _resolve(module, req["fn"])
        if not callable(fn):
            _worker_reply({"k": "result", "i": i, "ok": False, "error": {
                "type": "NameError", "name": "NameError",
                "msg": f"the module defines no function named {req['fn']!r}", "tb": ""}})  # fmt: skip
            continue
        args, kwargs = decode(req["args"]), decode(req.get("kwargs") or {})
        start = perf()
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - SystemExit inside a test fails that test
            elapsed = perf() - start
            _flush()
            rec = {"k": "result", "i": i, "ok": False, "error": _error_record(e), "t": elapsed}
        else:
            elapsed = perf() - start
            _flush()
            try:
                rec = {"k": "result", "i": i, "ok": True, "value": encode(value), "t": elapsed}
            except (Unencodable, RecursionError) as e:
                rec = {"k": "result", "i": i, "ok": False, "t": elapsed,
                       "error": {"type": "TypeError", "name": "TypeError", "msg": str(e), "tb": ""}}  # fmt: skip
        rec["m"] = _mb(getrusage(self_).ru_maxrss)
        _worker_reply(rec)
        if i == last:  # direct mode: nothing comes after the last test
            break
    os._exit(0)


# ----------------------------------------------------------------------------------------------
# The judge side
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
        except ValueError:  # a lone surrogate in a string, or a NaN W wrote into its reply
            body = json.dumps(fields, ensure_ascii=True).encode()
        except RecursionError:  # a reply nested past J's stack: no value, a failed test
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


class Worker:
    """One W process and the pipes J talks to it on."""

    def __init__(self, job: dict[str, Any], judge: Judge) -> None:
        self.judge = judge
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # W
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
        self.pending = b""
        self.open = {self.rep_r, self.out_r, self.err_r}
        self.reaped: _Reaped | None = None

    def send(self, obj: dict[str, Any]) -> None:
        self.pending += json.dumps(obj, ensure_ascii=True).encode() + b"\n"

    def recv(self, deadline: float) -> dict[str, Any] | str:
        """The next reply, ``"timeout"``, ``"eof"`` (W is gone) or ``"overflow"``."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1 :]
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):
                    return "garbled"
                return rec if isinstance(rec, dict) else "garbled"
            if len(self.buf) > self.judge.max_reply:
                return "overflow"
            if self.judge.flooded:
                return "output"
            if self.rep_r not in self.open:
                return "eof"
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
            if self.judge.printed > self.judge.output_cap:
                self.judge.flooded = True

    def drain(self) -> None:
        for fd in list(self.open - {self.rep_r}):
            for _ in range(64):
                before = self.judge.printed
                self._read(fd)
                if self.judge.printed == before:
                    break

    def finish(self, *, kill: bool) -> _Reaped:
        if self.reaped is None:
            try:
                os.close(self.req_w)
            except OSError:
                pass
            if not kill:
                # Let W see EOF on its requests and exit; drain what it still prints.
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


def call_request(i: int, payload: dict[str, Any]) -> dict[str, Any]:
    """The request W answers for the call test ``i`` (J's, or the parent's in direct mode)."""
    return {"i": i, "fn": payload["fn"], "args": payload["args"], "kwargs": payload.get("kwargs")}


def reply_fields(rec: dict[str, Any], wall: float) -> dict[str, Any]:
    """A test record's fields from W's answer ``rec`` to its request, timed ``wall`` seconds."""
    fields: dict[str, Any] = {"ok": rec.get("ok") is True, "wall_s": round(wall, 6)}
    if fields["ok"]:
        fields["value"] = rec.get("value")
    else:
        fields["error"] = safe_error(rec.get("error"))
    return fields  # W's own figures ("t", "m") are the candidate's to forge: not used


class _ScriptTimeout(BaseException):
    pass


class Judge:
    def __init__(self, job: dict[str, Any], channel: Channel) -> None:
        self.job = job
        self.ch = channel
        self.timeout = float(job["timeout_s"])
        self.budget_end = time.monotonic() + float(job["budget_s"])
        self.max_reply = int(job.get("max_reply_bytes", 8 << 20))
        self.output_cap = int(job.get("output_cap", 1 << 20))
        self.phase = "visible"
        self.tails = {"stdout": _Tail(), "stderr": _Tail()}
        self.printed = 0
        self.flooded = False
        self.worker: Worker | None = None
        self.cpu = 0.0
        self.maxrss_kb = 0.0
        self.compile_failed = False
        self.compiled = False  # a W has compiled the program (its later reports are forgeries)
        self.import_error: dict[str, Any] | None = None
        self.static_sent = False
        self.server: ProgramServer | None = None
        self.answered_at = 0.0

    # -- bookkeeping ------------------------------------------------------------------------

    def output(self, is_err: bool, chunk: bytes) -> None:
        self.printed += len(chunk)
        self.tails["stderr" if is_err else "stdout"].add(chunk)

    def account(self, reaped: _Reaped) -> None:
        self.cpu += reaped.cpu
        self.maxrss_kb = max(self.maxrss_kb, reaped.maxrss_kb)

    def end_phase(self) -> None:
        if self.worker is not None:
            self.worker.drain()
        visible = self.phase == "visible"
        self.ch.emit(
            "output",
            phase=self.phase,
            stdout=self.tails["stdout"].text() if visible else "",
            stderr=self.tails["stderr"].text() if visible else "",
            bytes=self.tails["stdout"].total + self.tails["stderr"].total,
        )
        self.tails = {"stdout": _Tail(), "stderr": _Tail()}

    def test_record(self, i: int, **fields: Any) -> None:
        if self.phase == "hidden" and "error" in fields:
            fields["error"] = {"type": error_kind(_as_dict(fields["error"]).get("type"))}
        self.ch.emit("test", i=i, phase=self.phase, **fields)

    # -- the worker's life --------------------------------------------------------------------

    def ensure_worker(self) -> str | None:
        """A live, imported W; or why not (``"compile"``, ``"import"``, ``"timeout"``...)."""
        if self.worker is not None:
            return None
        w = Worker(self.job, self)
        deadline = min(time.monotonic() + self.timeout, self.budget_end)
        while True:
            rec = w.recv(deadline)
            if rec == "timeout":
                w.finish(kill=True)
                return "import timeout"
            if not isinstance(rec, dict):
                reaped = w.finish(kill=True)
                return f"the program {reaped.describe()} while loading"
            kind = rec.get("k")
            if kind == "static" and not self.static_sent:
                self.static_sent = True
                self.ch.emit("static", ok=bool(rec.get("ok")), facts=rec.get("facts"))
            elif kind == "compile":
                if rec.get("ok"):
                    self.compiled = True
                elif self.compiled:
                    # It compiled before: this report is the candidate's own (a restarted W
                    # that has seen inputs could put them in it). A failure, without its text.
                    w.finish(kill=True)
                    return "protocol"
                else:
                    w.finish(kill=True)
                    self.compile_failed = True
                    self.ch.emit(
                        "compile", ok=False, error=_text(rec.get("error"), TAIL, tail=True)
                    )
                    return "compile"
            elif kind == "import":
                if not rec.get("ok"):
                    w.finish(kill=True)
                    err = safe_error(rec.get("error"))
                    self.import_error = {"type": err["type"]}
                    if self.phase == "visible":
                        self.import_error.update(msg=err.get("msg", ""), tb=err.get("tb", ""))
                    return "import"
                self.worker = w
                return None
            else:
                w.finish(kill=True)
                return "protocol"

    def retire(self, *, kill: bool) -> _Reaped | None:
        w, self.worker = self.worker, None
        return w.finish(kill=kill) if w is not None else None

    def call(self, i: int, payload: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Run one call in W; the test record's fields."""
        problem = self.ensure_worker()
        if problem is not None:
            return {"ok": False, "error": {"type": "ImportError", "msg": problem}, "why": problem}
        w = self.worker
        assert w is not None
        w.send(call_request(i, payload))
        return self.await_call(w, i, time.monotonic(), deadline)

    def await_call(self, w: Worker, i: int, start: float, deadline: float) -> dict[str, Any]:
        """W's answer to the call test ``i``, asked for already, timed from ``start``."""
        rec = w.recv(min(deadline, self.budget_end))
        self.answered_at = time.monotonic()
        wall = self.answered_at - start
        if isinstance(rec, dict) and rec.get("k") == "result" and rec.get("i") == i:
            return reply_fields(rec, wall)
        if rec == "output":
            self.retire(kill=True)
            return {"ok": False, "error": {"type": "output limit"}, "why": "output", "wall_s": wall}
        if rec == "timeout":
            self.retire(kill=True)
            return {"ok": False, "error": {"type": "timeout"}, "why": "timeout", "wall_s": wall}
        if rec == "overflow":
            self.retire(kill=True)
            return {
                "ok": False,
                "error": {"type": "value too large"},
                "why": "overflow",
                "wall_s": wall,
            }
        if rec == "eof":
            reaped = self.retire(kill=False)
            how = reaped.describe() if reaped else "was lost"
            return {"ok": False, "error": {"type": "exited", "msg": f"the program {how}"}, "why": "exited",
                    "wall_s": wall}  # fmt: skip
        self.retire(kill=True)
        return {"ok": False, "error": {"type": "protocol", "msg": "unexpected reply"}, "why": "protocol",
                "wall_s": wall}  # fmt: skip

    # -- running the tests --------------------------------------------------------------------

    def run_call_tests(self, tests: list[dict[str, Any]], first: int) -> bool:
        """Run ``tests``; False when nothing more can run (compile/import failure).

        Plain calls are asked for ahead, up to the next script test: W answers one after the
        other without waiting for J between tests. A test's time runs from the previous answer
        (when W turned to it) or, for the first one W gets, from the request; its deadline is
        that start plus the timeout. A worker that dies or is killed takes its queued requests
        with it: the next one gets them again.
        """
        queued_on: Worker | None = None  # the worker holding requests up to ``queued``
        queued = 0
        start = time.monotonic()
        for offset, payload in enumerate(tests):
            i = first + offset
            if time.monotonic() >= self.budget_end:
                self.test_record(i, ok=False, error={"type": "budget"}, why="budget")
                continue
            if "script" in payload:
                fields = self.run_script(i, payload)
            elif (problem := self.ensure_worker()) is not None:
                fields = {"ok": False, "error": {"type": "ImportError", "msg": problem},
                          "why": problem}  # fmt: skip
            else:
                w = self.worker
                assert w is not None
                if queued_on is not w or queued <= offset:
                    queued_on, queued, start = w, offset, time.monotonic()
                    while queued < len(tests) and "script" not in tests[queued]:
                        w.send(call_request(first + queued, tests[queued]))
                        queued += 1
                fields = self.await_call(w, i, start, start + self.timeout)
                start = self.answered_at  # W turned to the next test then
            if fields.get("why") in ("compile", "import"):
                if fields["why"] == "import":
                    self.ch.emit("import", ok=False, error=self.import_error)
                return False
            self.test_record(i, **fields)
        return True

    def run_script(self, i: int, payload: dict[str, Any]) -> dict[str, Any]:
        """A test written as Python statements, run here in J; the candidate's functions are
        proxies into W that return plain decoded values, so assertions compare plain data."""
        judge = self
        deadline = min(time.monotonic() + self.timeout * max(1, int(payload.get("calls", 1))),
                       self.budget_end)  # fmt: skip
        failure: dict[str, Any] = {}

        def proxy_for(fn_name: str) -> Any:
            def proxy(*args: Any, **kwargs: Any) -> Any:
                try:
                    enc_args, enc_kwargs = encode(list(args)), encode(dict(kwargs))
                except Unencodable as e:
                    raise TypeError(f"test arguments are not plain data: {e}") from None
                fields = judge.call(
                    i, {"fn": fn_name, "args": enc_args, "kwargs": enc_kwargs}, deadline
                )
                if fields.get("why") in ("compile", "import", "timeout", "exited", "overflow",
                                         "protocol", "output"):  # fmt: skip
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
            result = (
                dict(failure)
                if failure
                else {"ok": False, "error": {"type": "timeout"}, "why": "timeout"}
            )
            result["ok"] = False
            if result.get("why") == "timeout":
                self.retire(kill=True)
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

    def run_stdio_tests(self, tests: list[dict[str, Any]], first: int) -> bool:
        for offset, payload in enumerate(tests):
            i = first + offset
            if time.monotonic() >= self.budget_end:
                self.test_record(i, ok=False, error={"type": "budget"}, why="budget")
                continue
            fields = self.run_program(payload.get("input", ""))
            if fields.get("why") == "compile":
                return False
            self.test_record(i, **fields)
        return True

    def ensure_server(self) -> ProgramServer | dict[str, Any]:
        """A live program server S, or the failed test's fields: ``{"why": "compile"}`` once
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
        """One test of a stdin/stdout program in a process of its own, forked by S."""
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
        out, err = bytearray(), _Tail()
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
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    open_fds.discard(fd)
                elif fd == out_r:
                    out += chunk
                else:
                    err.add(chunk)
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
        stdio = job["mode"] == "stdio"
        visible = job["visible"]
        if job.get("binary"):
            _install_binary(job["binary"], job["argv"][0])
        self.budget_end = time.monotonic() + float(job["budget_s"])
        if stdio:
            # S starts (and compiles a Python program) before J has read the hidden tests.
            if self.ensure_server() == {"why": "compile"}:
                return
        else:
            problem = self.ensure_worker()  # compile, static facts and import, before any test
            if problem == "compile":
                return
            if problem is not None:
                error = self.import_error or {"type": "timeout" if "timeout" in problem else "exited",
                                              "msg": problem}  # fmt: skip
                self.ch.emit("import", ok=False, error=error)
                return
        run = self.run_stdio_tests if stdio else self.run_call_tests
        if not run(visible, 0):
            return
        self.end_phase()
        self.phase = "hidden"
        hidden = _read_part(0)["hidden"]
        os.close(0)
        if hidden and not run(hidden, len(visible)):
            return
        self.end_phase()

    def close(self) -> None:
        self.retire(kill=False)
        if self.server is not None:
            self.server.close()
            self.server = None
        self.ch.emit("usage", cpu_s=round(self.cpu, 6), peak_mb=_mb(self.maxrss_kb))


class ProgramServer:
    """S, the program server of a stdin/stdout task (seen from J).

    A fork of J that never runs the candidate's code itself: it compiles a Python program
    once, then for every test forks a fresh process that runs it (or execs the compiled
    binary) on the test's stdin, reaps that process and reports its wait status and rusage
    (the kernel's figures, from ``wait4``). Each test still runs in a process of its own, so
    nothing a program does carries over to the next test; J forks once per run instead of
    once per test, and the per-test forks come from S, whose pages J's own work does not keep
    dirtying. S is non-dumpable like J (a program cannot open its memory) and holds nothing a
    program could forge results with: a program that kills or stops S only fails its own test,
    and J starts another S for the next one.
    """

    def __init__(self, job: dict[str, Any]) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # S
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
        """Wait until S is ready: ``(None, "")``, ``("compile", diagnostics)``, or the kind of
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
            self.alive = False  # S never sends that: treat it as gone
            return None
        return msg

    def receive(self) -> None:
        """Take in S's next message (the test process's pid, or its end)."""
        msg = self._recv()
        if msg is None:
            return
        if msg.get("k") == "pid" and isinstance(msg.get("pid"), int):
            self.test_pid = msg["pid"]
        elif msg.get("k") == "exit":
            self.exit = msg

    def finish_test(self, *, kill: bool) -> _Reaped:
        """The test's process ended (killed first, with what it left, if ``kill``): its wait
        status and rusage as S reaped it; ``status=None`` if S could not tell."""
        if kill and self.exit is None:
            if self.test_pid is not None:
                _kill_group(self.test_pid)
                try:
                    os.kill(self.test_pid, signal.SIGKILL)
                except OSError:
                    pass
            else:  # S never said which process: it is stuck, end it
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
        if e is None:  # S is gone or stuck: end it; the test's process goes with its group
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
        """End S (it exits when its socket closes) and reap it. S's own rusage is not the
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
    """S's life (see :class:`ProgramServer`): compile, then one fresh process per request."""
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
            os.setpgid(pid, pid)  # also here: J may kill the group before the child runs
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        _send_json(sock, {"k": "pid", "pid": pid})
        status, cpu, maxrss = None, 0.0, 0.0
        while True:
            try:
                _, status, ru = os.wait4(pid, 0)
                cpu, maxrss = ru.ru_utime + ru.ru_stime, ru.ru_maxrss
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        _kill_group(pid)  # whatever it left behind
        _send_json(sock, {"k": "exit", "status": status, "cpu": cpu, "maxrss_kb": maxrss})


def _run_python_code(path: str, code: Any) -> None:
    """In a fresh fork of S: run the compiled program as ``python solution.py`` would."""
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
    """W on its own, as the run's only process (``mode: "calls"``): the parent is the judge.

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


def main() -> None:
    _nondumpable()
    job = _read_part(0)
    if job.get("mode") == "calls":
        serve_calls(job)
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
