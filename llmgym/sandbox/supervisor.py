"""The run supervisor: one run seen from the parent, shared by the local and docker backends.

``execute_on`` hands a run to a zygote (the local one, or the agent inside a docker container),
passes its files, stdin and limits on file descriptors, then supervises it to the end: the
result channel and the control socket (``_LiveSession``), stdout/stderr capture under the output cap,
the wall-clock and startup deadlines, kills through the init's pidfd, cgroup accounting
(memory peak, CPU of every process) and the final :class:`ExecResult` (``_result``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import select
import signal
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any, Protocol

from llmgym.sandbox import _zygote
from llmgym.sandbox._cgroup import CgroupManager, CgroupRun
from llmgym.sandbox._fds import close_fds, fit_pipe, payload_fd, stdin_fd
from llmgym.sandbox.base import RunRequest, RunSession
from llmgym.sandbox.limits import Limits
from llmgym.sandbox.result import ExecResult, Status

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

_CPU_CHECK_S = 0.1
"""How often the CPU time of a run's cgroup is compared with its limit, from its start on."""

_POLLIN = select.POLLIN


class ZygoteLike(Protocol):
    """Something that accepts one run per message (a local zygote or a container's agent)."""

    def submit(self, message: dict[str, Any], fds: Sequence[int]) -> None: ...


# ----------------------------------------------------------------------------------------------
# One run, seen from the parent
# ----------------------------------------------------------------------------------------------


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


@functools.lru_cache(maxsize=256)
def _limits_message(lim: Limits) -> dict[str, Any]:
    """``Limits`` as the run's process reads them (read-only: shared between runs)."""
    return {**lim.to_dict(), "cpu_limit_s": lim.cpu_limit_s}


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
    stdin_w: int | None = None
    talk: _LiveSession | None = None
    ctrl: socket.socket | None = None
    child_fds: list[int] = []
    try:
        if cgroups is not None and cgroups.available:
            cg_run = cgroups.create(lim.memory_mb, lim.max_processes + 1)
            if compiled:
                cg_compile = cgroups.create(clim.memory_mb, clim.max_processes + 1)
        argv, inproc, pyboot = _argv_for(request, settings)
        names: list[str] = []

        def give(name: str, fd: int) -> None:
            names.append(name)
            child_fds.append(fd)

        ctrl, ctrl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        give("control", ctrl_child.detach())  # first: the zygote finds it there
        give("payload", payload_fd(request.all_files()))
        if request.session is None:
            give("stdin", stdin_fd(request.stdin))
        else:  # a pipe this side writes into as the session goes
            stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(stdin_w, False)
            give("stdin", stdin_r)
        streams: dict[str, _Stream] = {}
        for name in ("stdout", "stderr", "result"):
            r, w = os.pipe2(os.O_CLOEXEC)
            fit_pipe(w, lim.max_output_bytes)
            to_close.append(r)
            os.set_blocking(r, False)
            streams[name] = _Stream(name, r, lim.max_output_bytes)
            give(name, w)
        # Before the program's code runs, its process may leave one byte here: "C", Python
        # could not compile the program; "E", the sandbox's setup of the program failed.
        status_r, status_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        to_close.append(status_r)
        give("status", status_w)
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
            "limits": _limits_message(lim),
            "compile_limits": _limits_message(clim) if compiled else None,
            "env": env,
            "tmp_mb": tmp_mb or lim.memory_mb,
            "degraded": degraded,
        }
        t_submit = time.monotonic()
        try:
            zygote.submit(message, child_fds)
        finally:
            close_fds(child_fds)
            child_fds = []
        run = _Supervisor(request, ctrl, streams, cg_run, t_submit)
        if request.session is not None and stdin_w is not None:  # narrows both for mypy
            talk = run.talk = _LiveSession(run, request.session, stdin_w, request.stdin)
            stdin_w = None  # the talk closes it
        run.supervise()
        if talk is not None and talk.error is not None:
            raise talk.error
        try:
            marker = os.read(status_r, 16)
        except OSError:  # nothing written (BlockingIOError when a writer is still alive)
            marker = b""
        return _result(request, settings, run, cg_compile, marker, oom_probe)
    finally:
        close_fds(child_fds)
        close_fds(to_close)
        if stdin_w is not None:
            close_fds([stdin_w])
        if talk is not None:
            talk.close_now()
        if ctrl is not None:
            ctrl.close()
        for cg in (cg_run, cg_compile):
            if cg is not None and cgroups is not None:
                cgroups.retire(cg)


STARVATION_CREDIT = 3.0
"""A run's wall limit stretches by the time it waited for a CPU, up to this many limits."""


def _run_delay_s(tid: int | str) -> float:
    """Seconds thread ``tid`` spent runnable but waiting for a CPU (0 if unknown or gone)."""
    try:
        with open(f"/proc/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):  # no CONFIG_SCHED_INFO, or the thread is gone
        return 0.0


def _pidfd_pid(pidfd: int) -> int | None:
    """The pid, in this process's namespace, of the process behind ``pidfd``."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError, IndexError):
        pass
    return None


class _LiveSession:
    """A :class:`~llmgym.sandbox.base.RunSession` at work: the run's stdin (a pipe written as
    the session sends) and the hooks, driven by the supervisor's loop."""

    def __init__(self, run: _Supervisor, session: RunSession, stdin_w: int, first: bytes) -> None:
        self.run, self.session, self.fd = run, session, stdin_w
        self.pending = bytearray(first)
        self.closing = False
        self.closed = False
        self.error: Exception | None = None  # a hook raised: the run is killed, this re-raised

    # -- SessionIO ----------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if not self.closed and not self.closing:
            self.pending += data
            self.write()  # most of the time the pipe takes it all at once

    def close_input(self) -> None:
        self.closing = True
        if not self.pending:
            self._close()

    def kill(self) -> None:
        self.run.kill("session")

    def outputs(self) -> tuple[bytes, bytes]:
        out, err = self.run.streams["stdout"], self.run.streams["stderr"]
        for s in (out, err):
            for _ in range(64):  # what is waiting now, not what keeps coming
                if s.eof:
                    break
                size = len(s.buf)
                try:
                    passed = s.read()
                except OSError:
                    break
                if passed:
                    self.run.output_limit_stream = self.run.output_limit_stream or s.name
                    self.run.kill("output_limit")
                if len(s.buf) == size:
                    break
        return bytes(out.buf), bytes(err.buf)

    # -- the loop's side ----------------------------------------------------------------------

    def write(self) -> None:
        """Write what is pending, as much as the pipe takes."""
        try:
            n = os.write(self.fd, self.pending)
        except BlockingIOError:
            return
        except OSError:  # the program closed its stdin or is gone: nothing more goes in
            self.pending.clear()
            self._close()
            return
        del self.pending[:n]
        if not self.pending and self.closing:
            self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pending.clear()
            close_fds([self.fd])

    def close_now(self) -> None:
        """The run is over: drop what was never written."""
        self._close()

    def call(self, hook: str, *args: Any) -> None:
        if self.error is not None:
            return
        try:
            getattr(self.session, hook)(*args, self)
        except Exception as exc:  # noqa: BLE001 - raised once the run is over (execute_on)
            self.error = exc
            self.kill()

    def due(self, now: float) -> bool:
        deadline = self.session.deadline
        return self.error is None and deadline is not None and now >= deadline


class _Supervisor:
    """Watches one run from this side: its output, its messages, its limits, its end.

    Messages on the control socket: ``started`` (from the zygote, with the run's kill switch: a
    pidfd of the run's init, or of the program in a container), ``compiled`` and ``running``
    (from the program's process before its code runs; ``running`` brings the start time and a
    pidfd of that process), ``exit`` (from the zygote, which reaped the program: wait status
    and rusage) or ``error``. The run is over when the kill switch's process is dead and the
    control socket is closed.
    """

    def __init__(
        self,
        request: RunRequest,
        ctrl: socket.socket,
        streams: dict[str, _Stream],
        cg_run: CgroupRun | None,
        t_submit: float,
    ) -> None:
        self.request = request
        self.ctrl = ctrl
        self.streams = streams
        self.cg_run = cg_run
        self.t_submit = t_submit
        self.pidfd: int | None = None
        self.kill_reason: str | None = None
        self.output_limit_stream: str | None = None
        self.compile_msg: dict[str, Any] | None = None
        self.exit_msg: dict[str, Any] | None = None
        self.error_detail: str | None = None
        self.t_running: float | None = None  # monotonic: when the program's code starts
        self.prog: int | None = None  # its process, in this process's pid namespace
        self.prog_fd: int | None = None  # a pidfd of it: readable once it has ended
        self.prog_waited = 0.0  # its CPU wait before that
        self.t_prog_end: float | None = None  # when this side saw it end
        self.t_end: float | None = None
        self.talk: _LiveSession | None = None  # the request's session, if it has one

    def kill(self, reason: str) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except OSError:
                # EINVAL: the run's processes live in a pid namespace this process cannot
                # reach (a trainer in a container of its own driving the docker backend's
                # containers). The zygote can: ask it.
                try:
                    self.ctrl.send(b'{"type": "kill"}')
                except OSError:
                    pass

    def starved_s(self) -> float:
        """The longest CPU wait of a thread of the run since its code started.

        The maximum over threads, not the sum: concurrent waits overlap. A thread that started
        later waited all of its ``run_delay`` in the run; the program's own main thread only
        what it waited since ``running``.
        """
        if self.prog is None and self.prog_fd is not None:
            self.prog = _pidfd_pid(self.prog_fd)  # looked up when first needed: rarely
        if self.prog is None:
            return 0.0
        tids: list[int] = self.cg_run.tasks() if self.cg_run is not None else []
        if not tids:
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{self.prog}/task")]
            except OSError:
                return 0.0
        worst = 0.0
        for tid in tids:
            waited = _run_delay_s(tid)
            if tid == self.prog:
                waited -= self.prog_waited
            worst = max(worst, waited)
        return worst

    def supervise(self) -> None:
        lim = self.request.limits
        budget = _STARTUP_GRACE_S + lim.wall_time_s * (1 + STARVATION_CREDIT) + _KILL_GRACE_S
        if self.request.compiled:
            budget += self.request.compile_limits.wall_time_s
        backstop = self.t_submit + budget
        deadline = cap = limit_at = float("inf")
        # poll(), not a selector: a handful of descriptors, watched for a few milliseconds.
        poller = select.poll()
        watched: dict[int, Any] = {}  # fd -> its stream, or what it is

        def watch(fd: int, what: Any, events: int = _POLLIN) -> None:
            poller.register(fd, events)
            watched[fd] = what

        def unwatch(fd: int) -> None:
            poller.unregister(fd)
            del watched[fd]

        for s in self.streams.values():
            watch(s.fd, s)
        ctrl_fd = self.ctrl.fileno()
        watch(ctrl_fd, "ctrl")
        dead = ctrl_eof = False
        next_cpu_check = float("inf")  # set when the program starts
        talk, writing = self.talk, False
        if talk is not None:
            talk.call("on_start")
        try:
            while not (dead and ctrl_eof):
                if talk is not None:  # watch the stdin pipe only while there is something to write
                    want = bool(talk.pending) and not talk.closed
                    if want != writing:
                        if want:
                            watch(talk.fd, "stdin", select.POLLOUT)
                        else:
                            unwatch(talk.fd)
                        writing = want
                now = time.monotonic()
                if now > backstop:
                    if self.kill_reason is None:
                        self.kill("backstop")
                        backstop = now + _KILL_GRACE_S + 3.0
                    else:
                        self.error_detail = (
                            self.error_detail or "the run did not end after being killed"
                        )
                        break
                if (
                    now >= deadline
                    and self.kill_reason is None
                    and self.exit_msg is None
                    and self.t_prog_end is None
                    and self.prog_fd is not None
                    and not _readable([self.prog_fd])  # ended, its news not read yet: no kill
                ):
                    # The wall limit, not counting the time the run waited for a CPU.
                    if deadline < cap:
                        deadline = min(cap, limit_at + self.starved_s())
                    if now >= deadline:
                        self.kill("wall")
                timeout = min(backstop, deadline) - now
                timeout = min(timeout, next_cpu_check - now)
                if talk is not None and talk.session.deadline is not None:
                    timeout = min(timeout, talk.session.deadline - now)
                # Rounded up: woken a little late, never early (an early wake-up only loops).
                events = poller.poll(-(-max(0.0, min(timeout, 1.0)) * 1000 // 1))
                now = time.monotonic()
                for fd, _ in events:
                    data = watched.get(fd)
                    if data is None:  # unwatched while handling an earlier event
                        continue
                    if isinstance(data, _Stream):
                        size = len(data.buf)
                        if data.read():
                            self.output_limit_stream = self.output_limit_stream or data.name
                            self.kill("output_limit")
                        if data.eof:
                            unwatch(fd)
                        if talk is not None and data.name == "result" and len(data.buf) > size:
                            talk.call("on_result", bytes(data.buf[size:]))
                    elif data == "stdin":
                        if talk is not None:
                            talk.write()
                    elif data == "ctrl":
                        flags = 0
                        while True:
                            msg, fds = _recv_ctrl(self.ctrl, flags)
                            if msg is _NOTHING:
                                break
                            if msg is None:
                                ctrl_eof = True
                                unwatch(ctrl_fd)
                                if self.pidfd is None:
                                    dead = True  # nothing was ever started, or the start failed
                                break
                            self._heard(msg, fds, now, watch)
                            if msg.get("type") not in ("exit", "error"):
                                break
                            # The end of the socket follows at once: take it in this wake-up.
                            flags = _DONTWAIT
                        if self.t_running is not None and limit_at == float("inf"):
                            limit_at = deadline = self.t_running + lim.wall_time_s
                            cap = self.t_running + lim.wall_time_s * (1 + STARVATION_CREDIT)
                            if self.cg_run is not None:
                                next_cpu_check = self.t_running + _CPU_CHECK_S
                    elif data == "dead":
                        dead = True
                        unwatch(fd)
                    elif data == "prog":
                        self.t_prog_end = now
                        unwatch(fd)
                if talk is not None and talk.due(now):
                    talk.call("on_timer")
                # The aggregate CPU limit over all processes and threads (RLIMIT_CPU is per
                # process).
                if self.cg_run is not None and now >= next_cpu_check:
                    next_cpu_check = now + _CPU_CHECK_S
                    cpu = self.cg_run.cpu_time_s()
                    if cpu is not None and cpu > lim.cpu_limit_s + 0.05:
                        self.kill("cpu")
            for s in self.streams.values():  # every writer is gone: read what is left
                size = len(s.buf)
                while not s.eof:
                    try:
                        if s.read():
                            self.output_limit_stream = self.output_limit_stream or s.name
                        if not s.eof and s.fd not in _readable([s.fd]):
                            break
                    except OSError:
                        break
                if talk is not None and s.name == "result" and len(s.buf) > size:
                    talk.call("on_result", bytes(s.buf[size:]))
        finally:
            close_fds([fd for fd in (self.pidfd, self.prog_fd) if fd is not None])
        self.t_end = time.monotonic()

    def _heard(self, msg: dict[str, Any], fds: list[int], now: float, watch: Any) -> None:
        """One message on the control socket (see the class docstring)."""
        kind = msg.get("type")
        if kind == "started" and fds and self.pidfd is None:
            self.pidfd = fds.pop(0)
            watch(self.pidfd, "dead")
            if self.kill_reason is not None:
                self.kill(self.kill_reason)
        elif kind == "running" and self.t_running is None and fds:
            self.t_running = float(msg.get("t", now))
            self.prog_waited = float(msg.get("waited", 0.0))
            self.prog_fd = fds.pop(0)
            watch(self.prog_fd, "prog")
        elif kind == "compiled":
            self.compile_msg = msg
        elif kind == "exit":
            self.exit_msg = msg
        elif kind == "error":
            self.error_detail = str(msg.get("detail"))
        close_fds(fds)


def _readable(fds: list[int]) -> list[int]:
    return select.select(fds, [], [], 0)[0]


_NOTHING: dict[str, Any] = {}
"""What :func:`_recv_ctrl` returns when asked not to wait and no message is there."""

_DONTWAIT = int(socket.MSG_DONTWAIT)  # plain ints: or-ing the enum builds a new member per call
_RECV_FLAGS = int(socket.MSG_CMSG_CLOEXEC)
_CTRL_ANCILLARY = socket.CMSG_SPACE(4 * 4)


def _recv_ctrl(sock: socket.socket, flags: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message on a run's control socket and the descriptors it brought; ``None`` at
    its end; :data:`_NOTHING` when ``flags`` holds ``MSG_DONTWAIT`` and none is there."""
    try:
        data, anc, _, _ = sock.recvmsg(1 << 20, _CTRL_ANCILLARY, _RECV_FLAGS | flags)
    except BlockingIOError:
        return (_NOTHING if flags & _DONTWAIT else None), []
    except ConnectionResetError:
        return None, []
    fds: list[int] = []
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(payload) // 4
            fds.extend(struct.unpack(f"{n}i", payload[: n * 4]))
    if not data:
        close_fds(fds)
        return None, []
    try:
        return json.loads(data), fds
    except ValueError:
        return {"type": "error", "detail": "unreadable message from the run"}, fds


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
    run: _Supervisor,
    cg_compile: CgroupRun | None,
    marker: bytes,
    oom_probe: Any = None,
) -> ExecResult:
    lim = request.limits
    streams, cg_run = run.streams, run.cg_run
    exit_msg, compile_msg, kill_reason = run.exit_msg, run.compile_msg, run.kill_reason
    out, err, res = streams["stdout"], streams["stderr"], streams["result"]
    exit_code, sig = _decode_status(exit_msg.get("status") if exit_msg else None)
    t_end = run.t_end if run.t_end is not None else time.monotonic()
    if exit_msg is not None and run.t_running is not None:
        # The earlier of the two sightings of the program's end (each side may be late).
        ended = min(float(exit_msg.get("t", t_end)), run.t_prog_end or t_end)
        wall = max(0.0, ended - run.t_running)
    else:
        wall = t_end - (run.t_running if run.t_running is not None else run.t_submit)
    cg_cpu = cg_run.cpu_time_s() if cg_run is not None else None
    if cg_cpu is not None:
        cpu = cg_cpu
    elif exit_msg is not None:
        cpu = float(exit_msg.get("cpu", 0.0))
    else:
        cpu = 0.0
    peak_bytes = cg_run.peak_memory_bytes() if cg_run is not None else None
    if peak_bytes is None and oom_probe is not None and hasattr(oom_probe, "peak_memory_bytes"):
        peak_bytes = oom_probe.peak_memory_bytes()  # a container's cgroup (docker backend)
    if peak_bytes is None and exit_msg is not None:
        peak_bytes = int(exit_msg.get("maxrss_kb", 0)) * 1024
    peak_mb = (peak_bytes or 0) / (1 << 20)
    if exit_code == 0:
        oom = 0  # a clean exit is "ok" whatever the OOM killer did: no need to ask
    elif cg_run is not None:
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
    timed_out = kill_reason in ("wall", "backstop", "cpu")
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and cpu >= lim.cpu_limit_s * 0.95 and not oom
    ):
        timed_out = True
    if run.error_detail is not None or (
        exit_msg is None and compile_msg is None and kill_reason is None
    ):
        status = "sandbox_error"
        detail = run.error_detail or "the run ended without a report from the sandbox"
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
    elif marker == b"C":
        status = "compile_error"
        compile_output = err.buf.decode("utf-8", "replace")
        detail = "Python could not compile the program"
    elif marker == b"E":
        status = "sandbox_error"
        detail = "the program's sandbox setup failed: " + err.buf.decode("utf-8", "replace")[-500:]
    elif kill_reason == "output_limit" or run.output_limit_stream is not None:
        # Passing the cap is an output limit even when a timer or the end came first.
        status = "output_limit"
        detail = (
            f"{run.output_limit_stream} passed {lim.max_output_bytes} bytes; the run was killed"
        )
    elif timed_out:
        status = "timeout"
        if kill_reason in ("cpu", None) or sig == signal.SIGXCPU:
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
        max_rss_mb=round(int(exit_msg.get("maxrss_kb", 0)) / 1024, 3) if exit_msg else None,
    )
