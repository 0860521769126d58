"""Sympy, out of process: a small pool of worker processes that answer the questions the fast
path cannot (symbolic identities where sampling was inconclusive, nonlinear inequalities),
under a real timeout.

Why processes: sympy can run for minutes (or fill memory) on a hostile expression, and the only
timeout that works from any thread and from asyncio without ``signal.alarm`` is killing the
process that does the work. Each worker is this file run as a script,
so nothing of the caller's ``__main__`` is re-imported, as ``multiprocessing``'s spawn and
forkserver would. Requests are pickled parse trees (never strings for sympy to ``eval``): the
worker builds sympy objects from them with constructors only. Replies are one JSON value.

A worker that times out is killed and a spare started at once, off the next call's clock;
idle workers are killed at interpreter exit; a forked child never touches its parent's workers.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any

MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
STARTUP_TIMEOUT_S = 60.0
"""How long a new worker may take to import sympy (not counted against a call's timeout)."""
MEMORY_LIMIT_BYTES = 2 << 30

_HEADER = struct.Struct(">I")
_BOOTSTRAP = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import runpy; runpy.run_path(sys.argv[1], run_name='__main__')"
)


def _read_exact(fd: int, n: int, deadline: float) -> bytes | None:
    chunks = []
    while n > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return None
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class _Worker:
    def __init__(self) -> None:
        # -c, not the script path: a script's folder would go first on sys.path, and this
        # folder's modules (parser.py, tokens.py...) would shadow any top-level module of
        # the same name that sympy imports.
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", _BOOTSTRAP, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
        self.ready = False

    def _read_frame(self, deadline: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        header = _read_exact(fd, _HEADER.size, deadline)
        if header is None:
            return None
        return _read_exact(fd, _HEADER.unpack(header)[0], deadline)

    def wait_ready(self) -> bool:
        if not self.ready:
            self.ready = self._read_frame(time.monotonic() + STARTUP_TIMEOUT_S) == b"ready"
        return self.ready

    def request(self, task: tuple[Any, ...], timeout_s: float) -> tuple[bool, Any]:
        """(completed, reply); not completed means the worker is dead or timed out."""
        assert self.proc.stdin is not None
        payload = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False, None
        frame = self._read_frame(time.monotonic() + timeout_s)
        if frame is None:
            return False, None
        try:
            return True, json.loads(frame)
        except ValueError:
            return False, None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class WorkerPool:
    """Up to ``size`` sympy worker processes, started on first use."""

    def __init__(self, size: int = MAX_WORKERS) -> None:
        self.size = size
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._pid = os.getpid()
        self._closed = False
        self.timeouts = 0

    def call(self, task: tuple[Any, ...], timeout_s: float) -> Any:
        """Run ``task`` in a worker; the reply, or None on timeout or failure."""
        if self._closed or timeout_s <= 0:
            return None
        if not self._slots.acquire(timeout=timeout_s):
            return None
        try:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None:
                worker = _Worker()
            if not worker.wait_ready():  # a spare may still be importing sympy
                worker.kill()
                return None
            done, reply = worker.request(task, timeout_s)
            if done:
                with self._lock:
                    if self._closed:
                        worker.kill()
                    else:
                        self._idle.append(worker)
                return reply
            self.timeouts += 1
            worker.kill()
            self._start_spare()
            return None
        finally:
            self._slots.release()

    def _start_spare(self) -> None:
        """Start a worker in place of a killed one now: it imports sympy (about 0.4 s) while the
        caller goes on, so the next call that needs sympy does not pay a restart."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._closed or len(self._idle) >= self.size:
                return
            try:
                self._idle.append(_Worker())
            except OSError:  # no process to spare (limits): the next call starts one
                pass

    def close(self) -> None:
        """Kill the idle workers (busy ones are killed by their caller when it sees `closed`)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        if os.getpid() == self._pid:
            for worker in idle:
                worker.kill()


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> WorkerPool:
    """The process-wide pool (a fresh one in a forked child)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._pid != os.getpid():
            _pool = WorkerPool()
            atexit.register(_pool.close)
        return _pool


def _forget_after_fork() -> None:
    """In a forked child: the parent's workers and locks are not ours (a lock may even have
    been held by another thread at the fork); start afresh when needed."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def warm_up() -> None:
    """Start a worker now, in the background, so that the first answer that needs sympy does not
    wait for one (importing sympy takes about 0.4 s): for servers and benchmarks that would rather
    pay it at start-up."""
    get_pool()._start_spare()


def shutdown() -> None:
    """Kill the worker processes now (they restart on next use)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


# ---------------------------------------------------------------------------------------------
# Inside the worker
# ---------------------------------------------------------------------------------------------


def _to_sympy(node: Any, sp: Any, symbols: dict[str, Any]) -> Any:
    """Build a sympy object from a parse tree with constructors only (no parsing, no eval)."""
    kind = node[0]
    conv = lambda n: _to_sympy(n, sp, symbols)  # noqa: E731
    if kind == "num":
        return sp.Rational(node[1].numerator, node[1].denominator)
    if kind == "based":
        return sp.Integer(int(node[1], node[2]))
    if kind == "sym":
        if node[1] not in symbols:
            symbols[node[1]] = sp.Symbol(node[1], real=True)
        return symbols[node[1]]
    if kind == "const":
        return {"pi": sp.pi, "e": sp.E, "i": sp.I}[node[1]]
    if kind == "inf":
        return sp.oo if node[1] > 0 else -sp.oo
    if kind == "add":
        return sp.Add(*[conv(t) for t in node[1]])
    if kind == "mul":
        return sp.Mul(*[conv(t) for t in node[1]])
    if kind == "div":
        return sp.Mul(conv(node[1]), sp.Pow(conv(node[2]), -1))
    if kind == "neg":
        return -conv(node[1])
    if kind == "pow":
        return sp.Pow(conv(node[1]), conv(node[2]))
    if kind == "fn":
        args = [conv(a) for a in node[2]]
        name = node[1]
        table = {
            "sqrt": sp.sqrt,
            "abs": sp.Abs,
            "floor": sp.floor,
            "ceil": sp.ceiling,
            "fact": sp.factorial,
            "fact2": sp.factorial2,
            "binom": sp.binomial,
            "ln": sp.log,
            "log": sp.log,
            "max": sp.Max,
            "min": sp.Min,
            "gcd": sp.gcd,
            "lcm": sp.lcm,
        }
        if name in table:
            return table[name](*args)
        if name == "root":
            return sp.real_root(args[1], args[0])
        if name == "logb":
            return sp.log(args[1], args[0])
        return getattr(sp, {"arcsin": "asin", "arccos": "acos", "arctan": "atan"}.get(name, name))(
            *args
        )
    if kind == "rel":
        exprs = [conv(e) for e in node[1]]
        rels = []
        for left, op, right in zip(exprs, node[2], exprs[1:], strict=False):
            rel = {
                "=": sp.Eq,
                "~": sp.Eq,
                "!=": sp.Ne,
                "<": sp.Lt,
                "<=": sp.Le,
                ">": sp.Gt,
                ">=": sp.Ge,
            }[op]
            rels.append(rel(left, right))
        return sp.And(*rels)
    if kind == "realset":
        parts = []
        for lo, lo_closed, hi, hi_closed in node[1]:
            parts.append(sp.Interval(conv(lo), conv(hi), not lo_closed, not hi_closed))
        return sp.Union(*parts) if parts else sp.S.EmptySet
    raise ValueError(f"cannot convert {kind}")


def _as_set(node: Any, sp: Any, symbols: dict[str, Any]) -> Any:
    obj = _to_sympy(node, sp, symbols)
    if isinstance(obj, sp.Set):
        return obj
    free = sorted(obj.free_symbols, key=str)
    if len(free) != 1:
        raise ValueError("not a relation in one variable")
    from sympy.solvers.inequalities import reduce_rational_inequalities  # noqa: F401

    return (
        sp.solveset(obj, free[0], domain=sp.S.Reals)
        if not isinstance(obj, sp.And)
        else (sp.Intersection(*[sp.solveset(r, free[0], domain=sp.S.Reals) for r in obj.args]))
    )


def _handle(task: tuple[Any, ...], sp: Any) -> Any:
    kind = task[0]
    symbols: dict[str, Any] = {}
    if kind == "eq":
        a, b = _to_sympy(task[1], sp, symbols), _to_sympy(task[2], sp, symbols)
        diff = sp.simplify(a - b)
        if diff == 0:
            return True
        verdict = a.equals(b)
        return None if verdict is None else bool(verdict)
    if kind == "seteq":
        a, b = _as_set(task[1], sp, symbols), _as_set(task[2], sp, symbols)
        if a == b:
            return True
        diff = sp.simplify(sp.SymmetricDifference(a, b))
        return bool(diff == sp.S.EmptySet) if diff.is_empty is None else bool(diff.is_empty)
    if kind == "ping":
        return "pong"
    if kind == "sleep":  # for tests of the timeout
        time.sleep(float(task[1]))
        return "slept"
    raise ValueError(f"unknown task {kind}")


def _worker_main() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    import sympy as sp

    # sympy imports much of itself lazily on first use: pay that here, before "ready", so the
    # first real request is not cut short by its timeout
    x = sp.Symbol("x", real=True)
    sp.simplify((x**2 - 1) / (x - 1) - (x + 1))
    sp.solveset(sp.Abs(x) >= 2, x, domain=sp.S.Reals)
    sp.Interval(0, 1).symmetric_difference(sp.Interval.open(0, 1))
    (sp.sqrt(2) + 1).equals(sp.sqrt(3))

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def send(data: bytes) -> None:
        stdout.write(_HEADER.pack(len(data)) + data)
        stdout.flush()

    send(b"ready")
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        payload = stdin.read(_HEADER.unpack(header)[0])
        try:
            reply = _handle(pickle.loads(payload), sp)
        except Exception:
            reply = None
        send(json.dumps(reply).encode())


if __name__ == "__main__":
    _worker_main()
