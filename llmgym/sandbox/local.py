"""The local backend: Linux namespaces, cgroups, seccomp and a warm zygote. No daemon needed."""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from llmgym.sandbox import _seccomp
from llmgym.sandbox._cgroup import CgroupManager
from llmgym.sandbox._fds import close_fds, memfd
from llmgym.sandbox.base import RunRequest, Sandbox, default_concurrency
from llmgym.sandbox.errors import BackendUnavailable, InvalidRunRequest
from llmgym.sandbox.result import ExecResult
from llmgym.sandbox.supervisor import RunSettings, execute_on

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

MAX_ZYGOTES = 8
"""The most zygotes a sandbox starts by default for each network setting (see ``zygotes=``)."""

INIT_SPAWNER = True
"""Each run's init is ``sleep`` spawned by a helper (see ``_zygote.InitSpawner``); ``False``
forks a small Python init from the zygote instead (what happens anyway where no ``sleep``
binary exists, and when not root). Read when a sandbox starts; for tests and measurements."""

_ROOT_BINDS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_ETC_BINDS = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives",
)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The zygote process
# ----------------------------------------------------------------------------------------------


class _Zygote:
    """A running zygote: a socket to send runs on, and its process."""

    def __init__(
        self,
        python: str,
        config: dict[str, Any],
        env: dict[str, str],
        timeout: float = 60.0,
        preload_sources: Mapping[str, str] | None = None,
    ) -> None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        cfg = dict(config, fd=child_sock.fileno())
        pass_fds = [child_sock.fileno()]
        if preload_sources:  # on a file descriptor: argv is limited to 128 KiB an argument
            sources_fd = memfd("llmgym-preload", json.dumps(dict(preload_sources)).encode())
            cfg["preload_sources_fd"] = sources_fd
            pass_fds.append(sources_fd)
        try:
            self.proc = subprocess.Popen(
                [python, "-E", "-s", "-B", ZYGOTE_SCRIPT, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=pass_fds,
                env=env,
                cwd="/",
            )
        finally:
            child_sock.close()
            close_fds(pass_fds[1:])
        self.sock = parent_sock
        self._send_lock = threading.Lock()
        self.in_flight = 0  # runs handed to it and not over yet (the owner's lock guards it)
        self._timeout = timeout

    def wait_ready(self) -> None:
        """Wait for the zygote's word that it serves; raise BackendUnavailable, saying why, if
        it does not come."""
        ready, _, _ = _select([self.sock], self._timeout)
        msg: dict[str, Any] = {}
        if ready:
            try:
                data = self.sock.recv(1 << 16)
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

    def forget(self) -> None:
        """In a forked child: close this process's copies of the zygote's socket and log, and
        leave the zygote (the parent's) running."""
        for f in (self.sock, self._stderr):
            try:
                f.close()
            except OSError:
                pass

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
# The backend
# ----------------------------------------------------------------------------------------------


def _host_binds(python: str, extra: Sequence[str]) -> list[str]:
    paths = [p for p in _ROOT_BINDS if os.path.lexists(p)]
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(python)]
    candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    # A virtual environment's interpreter: its pyvenv.cfg and site-packages come too.
    for venv in (os.path.dirname(python), os.path.dirname(os.path.dirname(python))):
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            candidates.append(venv)
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


class _Retrying:
    """Submits to a zygote; when it has died, starts another in its place and tries once more."""

    __slots__ = ("network", "owner", "zygote")

    def __init__(self, owner: LocalSandbox, network: bool, zygote: _Zygote) -> None:
        self.owner, self.network, self.zygote = owner, network, zygote

    def submit(self, message: dict[str, Any], fds: Sequence[int]) -> None:
        try:
            self.zygote.submit(message, fds)
        except OSError:
            self.zygote = self.owner._replace(self.network, self.zygote)
            self.zygote.submit(message, fds)


class LocalSandbox(Sandbox):
    """Runs programs on this host in Linux namespaces, with cgroups and seccomp.

    Args:
        fast_path: run Python code in a fork of the warm zygote (default) instead of a fresh
            interpreter. Isolation is the same; only the interpreter start is skipped.
        python: interpreter for Python programs (default: the one running llmgym).
        preload: modules the zygote imports once, for the fast path.
        preload_sources: modules given as source, ``{name: source}``: the zygote compiles and
            runs each once and registers it in ``sys.modules``, so a run's ``import name``
            finds it warm instead of loading it from shipped files every run (a test
            harness, for instance). Trusted code: it runs in the zygote before privileges are
            dropped, and every run (the candidate's code included) can read it. A failure
            to run one stops the sandbox from starting. ``preloaded`` lists their names.
        ro_paths: more host paths to show read-only inside the sandbox.
        cgroups: use cgroups when the host allows it (default); ``False`` forces rlimits.
        seccomp: install the syscall filter (default).
        max_concurrency: runs in flight for ``run_many``/``arun`` (default: usable CPUs).
        zygotes: zygotes started for each network setting (default: ``max_concurrency``, at
            most the usable CPUs and ``MAX_ZYGOTES``). Each forks its runs one at a time; a run
            goes to the one with the fewest runs in flight, so concurrent runs are forked in
            parallel. Each costs one warm interpreter's memory (about 16 MiB) and its start.
    """

    backend = "local"
    supports_sessions = True

    def __init__(
        self,
        *,
        fast_path: bool = True,
        python: str | None = None,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        preload_sources: Mapping[str, str] | None = None,
        ro_paths: Sequence[str] = (),
        cgroups: bool = True,
        seccomp: bool = True,
        max_concurrency: int | None = None,
        zygotes: int | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency)
        if zygotes is not None and (not isinstance(zygotes, int) or zygotes < 1):
            raise InvalidRunRequest(f"zygotes expects an int >= 1, actual: {zygotes!r}")
        self.zygotes = zygotes or min(self.max_concurrency, default_concurrency(), MAX_ZYGOTES)
        sources = dict(preload_sources or {})
        for name, source in sources.items():
            if not (isinstance(name, str) and all(p.isidentifier() for p in name.split("."))):
                raise InvalidRunRequest(
                    f"preload_sources expects dotted module names as keys, actual: {name!r}"
                )
            if not isinstance(source, str):
                raise InvalidRunRequest(
                    f"preload_sources[{name!r}] expects Python source (str), actual type: "
                    f"{type(source).__name__}"
                )
        self._preload_sources = sources
        self.preloaded: frozenset[str] = frozenset(sources)
        """Names of the modules given in ``preload_sources``: every run finds them imported."""
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
            "init_spawner": INIT_SPAWNER,
        }
        self._settings = RunSettings(
            backend=self.backend, python=self.python, fast_path=fast_path, mode="namespaces"
        )
        self._zygotes: dict[bool, list[_Zygote]] = {}
        self._zlock = threading.Lock()
        self._pool(network=False)  # fail now, with the reason, if this host cannot sandbox

    def _start(self, network: bool, n: int) -> list[_Zygote]:
        """``n`` new zygotes, started side by side; each is ready when this returns."""
        started: list[_Zygote] = []
        try:
            for _ in range(n):
                started.append(
                    _Zygote(
                        self.python,
                        dict(self._config, network=network),
                        self._settings.base_env,
                        preload_sources=self._preload_sources,
                    )
                )
            for i, z in enumerate(started):
                try:
                    z.wait_ready()
                except BackendUnavailable:
                    started.pop(i)
                    raise
        except BackendUnavailable as exc:
            for z in started:
                z.close()
            hint = (
                " (unprivileged user namespaces may be disabled: "
                "sysctl kernel.unprivileged_userns_clone=1, or run as root)"
                if self._userns
                else ""
            )
            raise BackendUnavailable(f"{exc}{hint}") from None
        return started

    def _pool(self, network: bool) -> list[_Zygote]:
        """The zygotes of a network setting, started on first use. Call with no lock held."""
        with self._zlock:
            pool = self._zygotes.get(network)
            if pool is None:
                pool = self._zygotes[network] = self._start(network, self.zygotes)
            return pool

    def _replace(self, network: bool, dead: _Zygote) -> _Zygote:
        """A new zygote in the place of ``dead`` (one that no longer takes runs)."""
        with self._zlock:
            pool = self._zygotes.setdefault(network, [])
            if dead not in pool:  # another thread replaced it already
                return min(pool, key=lambda z: z.in_flight) if pool else dead
            (new,) = self._start(network, 1)
            pool[pool.index(dead)] = new
        dead.close()
        return new

    def _execute(self, request: RunRequest) -> ExecResult:
        network = request.limits.network
        pool = self._zygotes.get(network) or self._pool(network)
        with self._zlock:
            counted = min(pool, key=lambda z: z.in_flight)  # the first of the least busy
            counted.in_flight += 1
        z = counted if counted.alive() else self._replace(network, counted)
        try:
            return execute_on(_Retrying(self, network, z), request, self._settings, self._cgroups)
        finally:
            with self._zlock:
                counted.in_flight -= 1

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
            "peak_memory": "cgroup" if self._cgroups.available else "rss",
            "seccomp": self._seccomp,
            "read_only_paths": self._config["binds"],
            "fast_path": self.fast_path,
            "zygotes": self.zygotes,
            "python": self.python,
            "degraded": degraded,
        }

    def _forked(self) -> None:
        super()._forked()
        for pool in self._zygotes.values():
            for z in pool:
                z.forget()
        self._zygotes = {}  # the next run starts this process's own zygotes
        self._zlock = threading.Lock()
        # The cgroup manager forgets the parent's cgroups by itself (see _cgroup).

    def close(self) -> None:
        super().close()
        with self._zlock:
            for pool in self._zygotes.values():
                for z in pool:
                    z.close()
            self._zygotes.clear()
        self._cgroups.close()
