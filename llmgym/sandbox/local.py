"""The local backend: Linux namespaces, cgroups, seccomp and a warm zygote. No daemon needed."""

from __future__ import annotations

import array
import json
import os
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from llmgym.sandbox import _seccomp, _zygote
from llmgym.sandbox._cgroup import CgroupManager, CgroupRun
from llmgym.sandbox.base import RunRequest, Sandbox
from llmgym.sandbox.errors import BackendUnavailable
from llmgym.sandbox.result import ExecResult, Status

__all__ = ["DEFAULT_PRELOAD", "LocalSandbox"]

ZYGOTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
SANDBOX_UID = 65534
SANDBOX_GID = 65534

DEFAULT_PRELOAD = (
    "array", "bisect", "collections", "copy", "dataclasses", "functools", "heapq", "io",
    "itertools", "json", "math", "operator", "random", "re", "string", "struct", "time", "typing",
)  # fmt: skip
"""Modules the zygote imports once so that runs of the Python fast path find them warm.

Every megabyte the zygote holds makes each fork slower (page tables are copied), so the
default is the small set that most short programs import; add yours with ``preload=``."""

_ROOT_BINDS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_ETC_BINDS = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
)  # fmt: skip
_BASE_ENV = {
    "PATH": _zygote.DEFAULT_PATH,
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "USER": "sandbox",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
_MEMORY_ERROR = re.compile(rb"(MemoryError|std::bad_alloc|Cannot allocate memory)[^\n]*\n?\Z")
_STARTUP_GRACE_S = 10.0
_KILL_GRACE_S = 2.0


class ZygoteLike(Protocol):
    """Something that accepts one run per message (a local zygote or a container's agent)."""

    def submit(self, message: dict[str, Any], fds: Sequence[int]) -> None: ...


# ----------------------------------------------------------------------------------------------
# The zygote process
# ----------------------------------------------------------------------------------------------


class _Zygote:
    """A running zygote: a socket to send runs on, and its process."""

    def __init__(
        self, python: str, config: dict[str, Any], env: dict[str, str], timeout: float = 60.0
    ) -> None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        cfg = dict(config, fd=child_sock.fileno())
        try:
            self.proc = subprocess.Popen(
                [python, "-E", "-s", ZYGOTE_SCRIPT, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=[child_sock.fileno()],
                env=env,
                cwd="/",
            )
        finally:
            child_sock.close()
        self.sock = parent_sock
        self._send_lock = threading.Lock()
        ready, _, _ = _select([parent_sock], timeout)
        msg: dict[str, Any] = {}
        if ready:
            try:
                data = parent_sock.recv(1 << 16)
                msg = json.loads(data) if data else {}
            except (OSError, ValueError):
                msg = {}
        if msg.get("type") != "ready":
            detail = msg.get("detail") or self.stderr_tail() or "no answer"
            self.close()
            raise BackendUnavailable(f"the sandbox zygote did not start: {detail}")

    def submit(self, message: dict[str, Any], fds: Sequence[int]) -> None:
        data = json.dumps(message).encode()
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        with self._send_lock:
            self.sock.sendmsg([data], anc)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace")[-n:].strip()
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


def _select(socks: list[Any], timeout: float) -> tuple[list[Any], list[Any], list[Any]]:
    import select

    return select.select(socks, [], [], timeout)


# ----------------------------------------------------------------------------------------------
# One run, seen from the parent
# ----------------------------------------------------------------------------------------------


def _payload_fd(files: list[tuple[str, bytes, int]]) -> int:
    header = {"files": []}  # type: dict[str, list[Any]]
    offset = 0
    for path, data, mode in files:
        header["files"].append([path, mode, offset, len(data)])
        offset += len(data)
    head = json.dumps(header).encode()
    fd = os.memfd_create("llmgym-payload", os.MFD_CLOEXEC)
    with os.fdopen(os.dup(fd), "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for _, data, _ in files:
            f.write(data)
    return fd


def _stdin_fd(data: bytes) -> int:
    """A read-only, sealed memfd holding ``data`` (a pipe would need a writer thread)."""
    import fcntl

    fd = os.memfd_create("llmgym-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    return ro


_PIPE_MAX = 2 << 20


def _fit_pipe(fd: int, cap: int) -> None:
    """Make the pipe hold ``cap + 1`` bytes where the kernel allows (up to 2 MiB).

    A program that passes its output cap then does so without waiting for this process to
    read: on a busy host a flood is still recognized as one, not mistaken for a timeout.
    Best effort: unprivileged users may not grow pipes past ``/proc/sys/fs/pipe-max-size``.
    """
    import fcntl

    if 1 << 16 <= cap < _PIPE_MAX:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, cap + 1)
        except OSError:
            pass


class _Stream:
    __slots__ = ("buf", "cap", "eof", "fd", "name", "truncated")

    def __init__(self, name: str, fd: int, cap: int) -> None:
        self.name, self.fd, self.cap = name, fd, cap
        self.buf = bytearray()
        self.truncated = False
        self.eof = False

    def read(self) -> bool:
        """Read what is there; True when the cap was just passed."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        if not chunk:
            self.eof = True
            return False
        room = self.cap - len(self.buf)
        if len(chunk) > room:
            self.buf += chunk[: max(room, 0)]
            first = not self.truncated
            self.truncated = True
            return first
        self.buf += chunk
        return False


class RunSettings:
    """How a backend turns a request into a message for its zygote."""

    def __init__(
        self,
        *,
        backend: str,
        python: str,
        fast_path: bool,
        mode: str,
        base_env: dict[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.python = python
        self.fast_path = fast_path
        self.mode = mode
        self.base_env = dict(_BASE_ENV if base_env is None else base_env)
        self.base_env["PATH"] = f"{os.path.dirname(python)}:{self.base_env['PATH']}"


def _argv_for(request: RunRequest, settings: RunSettings) -> tuple[list[str], bool, bool]:
    """(argv, inproc, pyboot) of the program."""
    lang = request.language
    if request.command is not None:
        return list(request.command), False, False
    if lang.is_python:
        if settings.fast_path:
            return [], True, False
        call = f"\n_llmgym_pyrun('/tmp/{lang.source}', 4)\n"
        return [settings.python, "-c", _zygote.PYBOOT + call], False, True
    return [a.replace("{python}", settings.python) for a in lang.run], False, False


def execute_on(
    zygote: ZygoteLike,
    request: RunRequest,
    settings: RunSettings,
    cgroups: CgroupManager | None,
    *,
    tmp_mb: int | None = None,
    oom_probe: Any = None,
    container: bool = False,
) -> ExecResult:
    """Send ``request`` to ``zygote`` and supervise the run to its end. Thread-safe.

    ``container``: the zygote runs in a container that bounds memory and processes itself, so
    no per-process rlimit stands in for missing cgroups; ``oom_probe.oom_kills()`` then tells
    whether the container's OOM killer struck during the run.
    """
    lim, clim = request.limits, request.compile_limits
    degraded = (cgroups is None or not cgroups.available) and not container
    cg_run: CgroupRun | None = None
    cg_compile: CgroupRun | None = None
    compiled = request.compiled
    to_close: list[int] = []
    ctrl: socket.socket | None = None
    try:
        if cgroups is not None and cgroups.available:
            cg_run = cgroups.create(lim.memory_mb, lim.max_processes + 1)
            if compiled:
                cg_compile = cgroups.create(clim.memory_mb, clim.max_processes + 1)
        argv, inproc, pyboot = _argv_for(request, settings)
        child_fds: list[int] = []
        names: list[str] = []

        def give(name: str, fd: int) -> None:
            names.append(name)
            child_fds.append(fd)

        give("payload", _payload_fd(request.all_files()))
        give("stdin", _stdin_fd(request.stdin))
        streams: dict[str, _Stream] = {}
        for name in ("stdout", "stderr", "result"):
            r, w = os.pipe2(os.O_CLOEXEC)
            _fit_pipe(w, lim.max_output_bytes)
            to_close.append(r)
            os.set_blocking(r, False)
            streams[name] = _Stream(name, r, lim.max_output_bytes)
            give(name, w)
        ctrl, ctrl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        give("control", ctrl_child.detach())
        for i, fd in enumerate(cg_run.open_procs() if cg_run else []):
            give(f"cg_run:{i}", fd)
        for i, fd in enumerate(cg_compile.open_procs() if cg_compile else []):
            give(f"cg_compile:{i}", fd)
        env = dict(settings.base_env)
        env.update(request.env)
        message = {
            "fds": names,
            "argv": argv,
            "inproc": inproc,
            "pyboot": pyboot,
            "main": request.language.source,
            "compile_argv": list(request.language.compile)
            if compiled and request.language.compile
            else None,
            "limits": {**lim.to_dict(), "cpu_limit_s": lim.cpu_limit_s},
            "compile_limits": {**clim.to_dict(), "cpu_limit_s": clim.cpu_limit_s},
            "env": env,
            "tmp_mb": tmp_mb or lim.memory_mb,
            "degraded": degraded,
        }
        t_submit = time.monotonic()
        try:
            zygote.submit(message, child_fds)
        finally:
            for fd in child_fds:
                os.close(fd)
        return _supervise(
            request, settings, ctrl, streams, cg_run, cg_compile, t_submit, degraded, oom_probe
        )
    finally:
        for fd in to_close:
            try:
                os.close(fd)
            except OSError:
                pass
        if ctrl is not None:
            ctrl.close()
        for cg in (cg_run, cg_compile):
            if cg is not None:
                cg.remove()


def _supervise(
    request: RunRequest,
    settings: RunSettings,
    ctrl: socket.socket,
    streams: dict[str, _Stream],
    cg_run: CgroupRun | None,
    cg_compile: CgroupRun | None,
    t_submit: float,
    degraded: bool,
    oom_probe: Any = None,
) -> ExecResult:
    lim = request.limits
    # The run's init stretches the wall limit by CPU starvation (see Limits.wall_time_s).
    budget = _STARTUP_GRACE_S + lim.wall_time_s * (1 + _zygote.STARVATION_CREDIT) + _KILL_GRACE_S
    if request.compiled:
        budget += request.compile_limits.wall_time_s
    backstop = t_submit + budget
    sel = selectors.DefaultSelector()
    for s in streams.values():
        sel.register(s.fd, selectors.EVENT_READ, s)
    sel.register(ctrl, selectors.EVENT_READ, "ctrl")
    pidfd: int | None = None
    dead = ctrl_eof = False
    kill_reason: str | None = None
    output_limit_stream: str | None = None
    compile_msg: dict[str, Any] | None = None
    exit_msg: dict[str, Any] | None = None
    error_detail: str | None = None
    run_started_at: float | None = None
    next_cpu_check = 0.0

    def kill(reason: str) -> None:
        nonlocal kill_reason
        if kill_reason is None:
            kill_reason = reason
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    try:
        while not (dead and ctrl_eof):
            now = time.monotonic()
            if now > backstop:
                if kill_reason is None:
                    kill("backstop")
                    backstop = now + _KILL_GRACE_S + 3.0
                else:
                    error_detail = error_detail or "the run did not end after being killed"
                    break
            timeout = min(backstop - now, 0.1 if cg_run is not None else 1.0)
            for key, _ in sel.select(timeout):
                data = key.data
                if isinstance(data, _Stream):
                    if data.read():
                        output_limit_stream = output_limit_stream or data.name
                        kill("output_limit")
                    if data.eof:
                        sel.unregister(data.fd)
                elif data == "ctrl":
                    msg, fds = _recv_ctrl(ctrl)
                    if msg is None:
                        ctrl_eof = True
                        sel.unregister(ctrl)
                        if pidfd is None:
                            dead = True  # nothing was ever started, or the start failed
                        continue
                    kind = msg.get("type")
                    if kind == "started" and fds:
                        pidfd = fds[0]
                        for extra in fds[1:]:
                            os.close(extra)
                        sel.register(pidfd, selectors.EVENT_READ, "dead")
                        if kill_reason is not None:
                            kill(kill_reason)
                        if not request.compiled:
                            run_started_at = time.monotonic()
                    elif kind == "compiled":
                        compile_msg = msg
                        run_started_at = time.monotonic()
                    elif kind == "exit":
                        exit_msg = msg
                    elif kind == "error":
                        error_detail = str(msg.get("detail"))
                    for fd in fds if kind != "started" else []:
                        os.close(fd)
                elif data == "dead":
                    dead = True
                    sel.unregister(key.fd)
            # The aggregate CPU limit over all processes and threads (RLIMIT_CPU is per process).
            if cg_run is not None and run_started_at is not None and now >= next_cpu_check:
                next_cpu_check = now + 0.1
                cpu = cg_run.cpu_time_s()
                if cpu is not None and cpu > lim.cpu_limit_s + 0.05:
                    kill("cpu")
        for s in streams.values():  # every writer is gone: read what is left
            while not s.eof:
                try:
                    if s.read():
                        output_limit_stream = output_limit_stream or s.name
                    if not s.eof and s.fd not in _readable([s.fd]):
                        break
                except OSError:
                    break
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    wall_parent = time.monotonic() - (run_started_at or t_submit)
    return _result(
        request, settings, streams, cg_run, cg_compile, degraded,
        exit_msg=exit_msg, compile_msg=compile_msg, error_detail=error_detail,
        kill_reason=kill_reason, output_limit_stream=output_limit_stream, wall_parent=wall_parent,
        oom_probe=oom_probe,
    )  # fmt: skip


def _readable(fds: list[int]) -> list[int]:
    import select

    return select.select(fds, [], [], 0)[0]


def _recv_ctrl(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    try:
        data, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
    except (ConnectionResetError, BlockingIOError):
        return None, []
    fds: list[int] = []
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(payload) // 4
            fds.extend(struct.unpack(f"{n}i", payload[: n * 4]))
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        return json.loads(data), fds
    except ValueError:
        return {"type": "error", "detail": "unreadable message from the run's init"}, fds


def _decode_status(status: int | None) -> tuple[int | None, int | None]:
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _result(
    request: RunRequest,
    settings: RunSettings,
    streams: dict[str, _Stream],
    cg_run: CgroupRun | None,
    cg_compile: CgroupRun | None,
    degraded: bool,
    *,
    exit_msg: dict[str, Any] | None,
    compile_msg: dict[str, Any] | None,
    error_detail: str | None,
    kill_reason: str | None,
    output_limit_stream: str | None,
    wall_parent: float,
    oom_probe: Any = None,
) -> ExecResult:
    lim = request.limits
    out, err, res = streams["stdout"], streams["stderr"], streams["result"]
    exit_code, sig = _decode_status(exit_msg.get("status") if exit_msg else None)
    cg_cpu = cg_run.cpu_time_s() if cg_run is not None else None
    wall = float(exit_msg.get("wall", wall_parent)) if exit_msg is not None else wall_parent
    if cg_cpu is not None:
        cpu = cg_cpu
    elif exit_msg is not None:
        cpu = float(exit_msg.get("cpu", 0.0))
    else:
        cpu = 0.0
    peak_bytes = cg_run.peak_memory_bytes() if cg_run is not None else None
    if peak_bytes is None and exit_msg is not None:
        peak_bytes = int(exit_msg.get("maxrss_kb", 0)) * 1024
    peak_mb = (peak_bytes or 0) / (1 << 20)
    if cg_run is not None:
        oom = cg_run.oom_kills()
    else:
        oom = oom_probe.oom_kills() if oom_probe is not None else 0
    compile_output = ""
    compile_time = None
    if compile_msg is not None:
        compile_output = str(compile_msg.get("output", ""))
        compile_time = float(compile_msg.get("time", 0.0))

    status: Status
    detail = ""
    timed_out = bool(exit_msg and exit_msg.get("timed_out")) or kill_reason in ("backstop", "cpu")
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and cpu >= lim.cpu_limit_s * 0.95 and not oom
    ):
        timed_out = True
    if error_detail is not None or (
        exit_msg is None and compile_msg is None and kill_reason is None
    ):
        status = "sandbox_error"
        detail = error_detail or "the run ended without a report from its init"
    elif compile_msg is not None and not compile_msg.get("ok"):
        status = "compile_error"
        if compile_msg.get("timed_out"):
            detail = f"compile step exceeded {request.compile_limits.wall_time_s:g} s"
        else:
            cexit, csig = _decode_status(compile_msg.get("status"))
            detail = (
                f"compiler exited with {cexit}"
                if csig is None
                else f"compiler killed by {_signame(csig)}"
            )
            if cg_compile is not None and cg_compile.oom_kills():
                detail += f" (compile memory limit {request.compile_limits.memory_mb} MiB)"
        exit_code, sig = None, None
    elif exit_msg is not None and exit_msg.get("pycompile_error"):
        status = "compile_error"
        compile_output = err.buf.decode("utf-8", "replace")
        detail = "Python could not compile the program"
    elif exit_msg is not None and exit_msg.get("setup_error"):
        status = "sandbox_error"
        detail = "the program's sandbox setup failed: " + err.buf.decode("utf-8", "replace")[-500:]
    elif kill_reason == "output_limit" or output_limit_stream is not None:
        # Passing the cap is an output limit even when a timer or the end came first.
        status = "output_limit"
        detail = f"{output_limit_stream} passed {lim.max_output_bytes} bytes; the run was killed"
    elif timed_out:
        status = "timeout"
        if (
            kill_reason == "cpu"
            or sig == signal.SIGXCPU
            or (exit_msg and not exit_msg.get("timed_out"))
        ):
            detail = f"CPU time limit of {lim.cpu_limit_s:g} s exceeded"
        else:
            detail = f"wall time limit of {lim.wall_time_s:g} s exceeded"
    elif oom and exit_code != 0:
        status = "memory_limit"
        detail = f"memory limit of {lim.memory_mb} MiB exceeded (OOM kill)"
    elif exit_code not in (0, None) and _MEMORY_ERROR.search(bytes(err.buf[-400:])):
        status = "memory_limit"
        detail = f"the program ran out of memory (limit {lim.memory_mb} MiB)"
    elif sig is not None:
        status = "runtime_error"
        detail = f"killed by {_signame(sig)}"
    elif exit_code != 0:
        status = "runtime_error"
        detail = f"exit code {exit_code}"
    else:
        status = "ok"
    if status in ("timeout", "output_limit") and exit_msg is None:
        exit_code, sig = None, signal.SIGKILL
    return ExecResult(
        status=status,
        exit_code=exit_code,
        signal=sig,
        stdout=out.buf.decode("utf-8", "replace"),
        stderr=err.buf.decode("utf-8", "replace"),
        wall_time_s=round(wall, 6),
        cpu_time_s=round(cpu, 6),
        peak_memory_mb=round(peak_mb, 3),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        result_bytes=bytes(res.buf),
        result_truncated=res.truncated,
        compile_output=compile_output,
        compile_time_s=compile_time,
        detail=detail,
        language=request.language.name if request.command is None else None,
        backend=settings.backend,
        stdout_bytes=bytes(out.buf),
        stderr_bytes=bytes(err.buf),
    )


# ----------------------------------------------------------------------------------------------
# The backend
# ----------------------------------------------------------------------------------------------


def _host_binds(python: str, extra: Sequence[str]) -> list[str]:
    paths = [p for p in _ROOT_BINDS if os.path.lexists(p)]
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(python)]
    candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    candidates += [os.path.abspath(p) for p in extra]
    for p in candidates:
        p = os.path.normpath(p)
        if os.path.exists(p):
            paths.append(p)
    out: list[str] = []
    for p in sorted(set(paths), key=len):
        real_roots = [q for q in out if not os.path.islink(q)]
        if any(p == q or p.startswith(q.rstrip("/") + "/") for q in real_roots):
            continue
        out.append(p)
    return out


class LocalSandbox(Sandbox):
    """Runs programs on this host in Linux namespaces, with cgroups and seccomp.

    Args:
        fast_path: run Python code in a fork of the warm zygote (default) instead of a fresh
            interpreter. Isolation is the same; only the interpreter start is skipped.
        python: interpreter for Python programs (default: the one running llmgym).
        preload: modules the zygote imports once, for the fast path.
        ro_paths: more host paths to show read-only inside the sandbox.
        cgroups: use cgroups when the host allows it (default); ``False`` forces rlimits.
        seccomp: install the syscall filter (default).
        max_concurrency: runs in flight for ``run_many``/``arun`` (default: usable CPUs).
    """

    backend = "local"

    def __init__(
        self,
        *,
        fast_path: bool = True,
        python: str | None = None,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        ro_paths: Sequence[str] = (),
        cgroups: bool = True,
        seccomp: bool = True,
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency)
        if not sys.platform.startswith("linux"):
            raise BackendUnavailable(
                "the local sandbox needs Linux namespaces; use get_sandbox('docker') elsewhere"
            )
        if not hasattr(os, "pidfd_open"):
            raise BackendUnavailable("the local sandbox needs pidfd_open (Linux >= 5.3)")
        self.python = python or sys.executable
        self.fast_path = fast_path
        self._userns = os.geteuid() != 0
        self._cgroups = CgroupManager(enabled=cgroups and not self._userns)
        if self._userns and cgroups:
            self._cgroups.reason = "not root: cgroups need root or a delegated subtree"
        self._seccomp = seccomp and _seccomp.SUPPORTED
        self._config: dict[str, Any] = {
            "mode": "namespaces",
            "uid": SANDBOX_UID,
            "gid": SANDBOX_GID,
            "userns": self._userns,
            "binds": _host_binds(self.python, ro_paths),
            "etc_binds": list(_ETC_BINDS),
            "preload": list(preload),
            "seccomp": self._seccomp,
        }
        self._settings = RunSettings(
            backend=self.backend, python=self.python, fast_path=fast_path, mode="namespaces"
        )
        self._zygotes: dict[bool, _Zygote] = {}
        self._zlock = threading.Lock()
        self._zygote(network=False)  # fail now, with the reason, if this host cannot sandbox

    def _zygote(self, network: bool, *, replace: _Zygote | None = None) -> _Zygote:
        with self._zlock:
            z = self._zygotes.get(network)
            if z is not None and (z is replace or not z.alive()):
                z.close()
                z = None
            if z is None:
                try:
                    z = _Zygote(
                        self.python, dict(self._config, network=network), self._settings.base_env
                    )
                except BackendUnavailable as exc:
                    hint = (
                        " (unprivileged user namespaces may be disabled: "
                        "sysctl kernel.unprivileged_userns_clone=1, or run as root)"
                        if self._userns
                        else ""
                    )
                    raise BackendUnavailable(f"{exc}{hint}") from None
                self._zygotes[network] = z
            return z

    def _execute(self, request: RunRequest) -> ExecResult:
        network = request.limits.network
        z = self._zygote(network)

        class _Retrying:
            def submit(inner, message: dict[str, Any], fds: Sequence[int]) -> None:  # noqa: N805
                nonlocal z
                try:
                    z.submit(message, fds)
                except OSError:  # the zygote died: start another and try once more
                    z = self._zygote(network, replace=z)
                    z.submit(message, fds)

        return execute_on(_Retrying(), request, self._settings, self._cgroups)

    def isolation(self) -> dict[str, Any]:
        degraded = []
        if not self._cgroups.available:
            degraded.append(
                f"no cgroups ({self._cgroups.reason}): memory via RLIMIT_AS, processes via "
                "RLIMIT_NPROC (shared by concurrent runs), CPU/memory measured by getrusage"
            )
        if not self._seccomp:
            degraded.append(f"no seccomp filter ({_seccomp.supported_reason() or 'disabled'})")
        if self._userns:
            degraded.append(
                "not root: programs run in a user namespace on your own uid, without capabilities"
            )
        return {
            "backend": self.backend,
            "namespaces": ["pid", "mount", "net", "ipc", "uts"]
            + (["user"] if self._userns else []),
            "uid": SANDBOX_UID if not self._userns else os.getuid(),
            "cgroups": self._cgroups.describe(),
            "seccomp": self._seccomp,
            "read_only_paths": self._config["binds"],
            "fast_path": self.fast_path,
            "python": self.python,
            "degraded": degraded,
        }

    def close(self) -> None:
        super().close()
        with self._zlock:
            for z in self._zygotes.values():
                z.close()
            self._zygotes.clear()
        self._cgroups.close()
