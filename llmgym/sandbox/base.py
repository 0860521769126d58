"""The backend-independent part of a sandbox: argument checking, ``run_many`` and ``arun``."""

from __future__ import annotations

import abc
import asyncio
import atexit
import os
import posixpath
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from llmgym.sandbox.errors import InvalidRunRequest, SandboxClosed
from llmgym.sandbox.languages import Language, resolve_language
from llmgym.sandbox.limits import Limits
from llmgym.sandbox.result import ExecResult

__all__ = [
    "RunRequest",
    "RunSession",
    "Sandbox",
    "SessionIO",
    "default_concurrency",
    "make_request",
]

_RUN_KWARGS = ("code", "command", "files", "stdin", "language", "limits", "compile_limits", "env")


def default_concurrency() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class RunRequest:
    """One validated execution request (what ``run()``'s arguments mean)."""

    language: Language
    limits: Limits
    compile_limits: Limits
    code: str | None = None
    command: tuple[str, ...] | None = None
    files: tuple[tuple[str, bytes, int], ...] = ()
    """(relative path under /tmp, content, mode)."""
    stdin: bytes = b""
    env: Mapping[str, str] = field(default_factory=dict)
    session: RunSession | None = field(default=None, compare=False, repr=False)
    """Talks with the run while it runs (see :meth:`Sandbox.execute`)."""

    @property
    def compiled(self) -> bool:
        return self.code is not None and self.language.compile is not None

    def all_files(self) -> list[tuple[str, bytes, int]]:
        out = list(self.files)
        if self.code is not None:
            out.append((self.language.source, self.code.encode("utf-8", "surrogatepass"), 0o644))
        return out


class SessionIO(Protocol):
    """What a :class:`RunSession` can do to its run."""

    def send(self, data: bytes) -> None:
        """Write ``data`` to the run's stdin (buffered here; never blocks)."""

    def close_input(self) -> None:
        """Close the run's stdin once what was sent is written (the program reads EOF)."""

    def kill(self) -> None:
        """End the run now (SIGKILL to every process of it)."""

    def outputs(self) -> tuple[bytes, bytes]:
        """The run's stdout and stderr so far, after reading what is waiting in their pipes."""


class RunSession:
    """A conversation with a program while it runs, for the local and docker backends.

    With a session the run's stdin is a pipe: the request's ``stdin`` is written first, then
    whatever the session sends. Each chunk the program writes on its result channel (fd 3)
    goes to :meth:`on_result` as it arrives, and :meth:`on_timer` is called once
    ``time.monotonic()`` passes :attr:`deadline`. The hooks run on the thread that called
    :meth:`Sandbox.execute`, one at a time, and must not block. The run's limits still
    apply; the result is the usual :class:`ExecResult` (``result_bytes`` holds the channel).
    """

    deadline: float | None = None
    """When :meth:`on_timer` is due (``time.monotonic()``), or ``None``."""

    def on_start(self, io: SessionIO) -> None:
        """The run was handed to the sandbox (its program may not have started yet)."""

    def on_result(self, data: bytes, io: SessionIO) -> None:
        """``data``: the next bytes the program wrote on its result channel."""

    def on_timer(self, io: SessionIO) -> None:
        """:attr:`deadline` has passed; set a new one (or ``None``) not to be called again."""


def _clean_path(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidRunRequest(f"files keys are paths (str), actual type: {type(name).__name__}")
    if not name or "\0" in name or name.startswith("/"):
        raise InvalidRunRequest(
            f"files key {name!r} must be a non-empty relative path (it lands under /tmp)"
        )
    norm = posixpath.normpath(name)
    if norm.startswith("..") or norm in (".", ""):
        raise InvalidRunRequest(f"files key {name!r} must stay inside /tmp (no '..')")
    return norm


def make_request(
    code: str | None = None,
    *,
    command: str | Sequence[str] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    stdin: str | bytes = "",
    language: str = "python",
    limits: Limits | Mapping[str, Any] | None = None,
    compile_limits: Limits | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> RunRequest:
    """Check ``run()``'s arguments; raise :class:`InvalidRunRequest` with a fix when they are wrong."""
    lang = resolve_language(language)
    if code is None and command is None:
        raise InvalidRunRequest("run() needs code= (a program) or command= (a command line)")
    if code is not None and command is not None:
        raise InvalidRunRequest(
            "run() takes code= or command=, not both: put extra sources in files= and run them "
            "with command="
        )
    if code is not None and not isinstance(code, str):
        raise InvalidRunRequest(f"code expects a str, actual type: {type(code).__name__}")
    cmd: tuple[str, ...] | None = None
    if command is not None:
        if isinstance(command, str):
            cmd = ("/bin/sh", "-c", command)
        elif isinstance(command, Sequence) and all(isinstance(a, str) for a in command):
            cmd = tuple(command)
        else:
            raise InvalidRunRequest("command expects a str (run by /bin/sh -c) or a list of str")
        if not cmd or not cmd[0]:
            raise InvalidRunRequest("command must not be empty")
    clean_files: list[tuple[str, bytes, int]] = []
    if files is not None:
        if not isinstance(files, Mapping):
            raise InvalidRunRequest(
                f"files expects a mapping path -> str|bytes, actual type: {type(files).__name__}"
            )
        for name, content in files.items():
            path = _clean_path(name)
            if isinstance(content, str):
                data = content.encode("utf-8", "surrogatepass")
            elif isinstance(content, (bytes, bytearray, memoryview)):
                data = bytes(content)
            else:
                raise InvalidRunRequest(
                    f"files[{name!r}] expects str or bytes, actual type: {type(content).__name__}"
                )
            if code is not None and path == lang.source:
                raise InvalidRunRequest(
                    f"files[{name!r}] collides with the {lang.name} source file; rename it"
                )
            clean_files.append((path, data, 0o755 if data.startswith(b"#!") else 0o644))
    if isinstance(stdin, str):
        stdin_bytes = stdin.encode("utf-8", "surrogatepass")
    elif isinstance(stdin, (bytes, bytearray, memoryview)):
        stdin_bytes = bytes(stdin)
    else:
        raise InvalidRunRequest(f"stdin expects str or bytes, actual type: {type(stdin).__name__}")
    env_dict: dict[str, str] = {}
    if env is not None:
        if not isinstance(env, Mapping):
            raise InvalidRunRequest(f"env expects a mapping, actual type: {type(env).__name__}")
        for k, v in env.items():
            if (
                not isinstance(k, str)
                or not isinstance(v, str)
                or not k
                or "=" in k
                or "\0" in k + v
            ):
                raise InvalidRunRequest(f"env entry {k!r}={v!r} is not a valid variable")
            env_dict[k] = v
    lim = Limits.coerce(dict(limits) if isinstance(limits, Mapping) else limits)
    clim = (
        lang.compile_limits
        if compile_limits is None
        else Limits.coerce(
            dict(compile_limits) if isinstance(compile_limits, Mapping) else compile_limits
        )
    )
    return RunRequest(
        language=lang,
        limits=lim,
        compile_limits=clim,
        code=code,
        command=cmd,
        files=tuple(clean_files),
        stdin=stdin_bytes,
        env=env_dict,
    )


_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for sb in list(_LIVE):
        sb._forked()


def _close_at_exit() -> None:
    """At interpreter exit, while threads still run: close every sandbox this process made
    (a forked child's copies of its parent's are not its own and are left alone)."""
    for sb in list(_LIVE):
        if sb._owner_pid == os.getpid() and not sb._closed:
            try:
                sb.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)


class Sandbox(abc.ABC):
    """A place to run untrusted programs. Subclasses implement :meth:`_execute`.

    Thread-safe: ``run`` may be called from many threads at once. ``run_many`` and ``arun`` keep at
    most ``max_concurrency`` runs in flight (default: the number of usable CPUs), so CPU-bound
    programs never share a core and their wall times stay honest.

    Fork-safe: what a sandbox runs on (zygotes, containers, cgroups, helper threads) belongs to
    the process that made it. In a forked child the sandbox forgets all of it, without stopping
    or removing any of it, and makes its own on first use; closing it there, or the child's exit,
    never touches the parent's.
    """

    backend: str = "abstract"
    supports_sessions: bool = False
    """Whether :meth:`execute` takes a ``session`` (a :class:`RunSession`)."""

    def __init__(self, *, max_concurrency: int | None = None) -> None:
        if max_concurrency is not None and (
            not isinstance(max_concurrency, int) or max_concurrency < 1
        ):
            raise InvalidRunRequest(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        self.max_concurrency = max_concurrency or default_concurrency()
        self._closed = False
        self._owner_pid = os.getpid()
        self._executor_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        _LIVE.add(self)

    # -- public API ---------------------------------------------------------------------------

    def run(
        self,
        code: str | None = None,
        *,
        command: str | Sequence[str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        stdin: str | bytes = "",
        language: str = "python",
        limits: Limits | Mapping[str, Any] | None = None,
        compile_limits: Limits | Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run one program and return what happened. See the package docstring."""
        request = make_request(
            code,
            command=command,
            files=files,
            stdin=stdin,
            language=language,
            limits=limits,
            compile_limits=compile_limits,
            env=env,
        )
        return self.execute(request)

    def execute(self, request: RunRequest, session: RunSession | None = None) -> ExecResult:
        """Run an already validated :class:`RunRequest`; with ``session`` (a
        :class:`RunSession`), talk with the program while it runs."""
        if self._closed:
            raise SandboxClosed(f"this {self.backend} sandbox is closed; create a new one")
        self._own()
        session = session if session is not None else request.session
        if session is not None:
            if not self.supports_sessions:
                raise InvalidRunRequest(
                    f"the {self.backend} backend cannot talk with a running program; "
                    "use the local or docker backend for a session"
                )
            if not isinstance(session, RunSession):
                raise InvalidRunRequest(
                    f"session expects a RunSession, actual type: {type(session).__name__}"
                )
            request = replace(request, session=session)
        try:
            return self._execute(request)
        except Exception as exc:  # noqa: BLE001 - an infrastructure failure is a result, not a crash
            return ExecResult.sandbox_failure(
                f"{type(exc).__name__}: {exc}", language=request.language.name, backend=self.backend
            )

    def run_many(
        self, items: Iterable[Mapping[str, Any]], *, concurrency: int | None = None
    ) -> list[ExecResult]:
        """Run many programs, each item being ``run()``'s keyword arguments; order is kept.

        Every item is checked before anything runs. At most ``concurrency`` (default
        ``max_concurrency``) run at once.
        """
        requests = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidRunRequest(
                    f"run_many item {i} expects a dict of run() arguments, actual type: "
                    f"{type(item).__name__}"
                )
            unknown = set(item) - set(_RUN_KWARGS)
            if unknown:
                raise InvalidRunRequest(
                    f"run_many item {i} has unknown keys {sorted(unknown)}; valid: {list(_RUN_KWARGS)}"
                )
            requests.append(make_request(**item))
        if not requests:
            return []
        workers = min(concurrency or self.max_concurrency, len(requests))
        if workers == 1:
            return [self.execute(r) for r in requests]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llmgym-sandbox") as pool:
            return list(pool.map(self.execute, requests))

    async def arun(self, code: str | None = None, **kwargs: Any) -> ExecResult:
        """``run()`` for asyncio: at most ``max_concurrency`` in flight across all callers."""
        request = make_request(code, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._shared_executor(), self.execute, request)

    def isolation(self) -> dict[str, Any]:
        """What this backend isolates and what is degraded on this host (for ``sandbox check``)."""
        return {"backend": self.backend}

    def close(self) -> None:
        """Stop the backend's helpers (zygote, containers...). Idempotent. In a process forked
        from the one that made them, they are not this process's: only forgotten."""
        self._own()
        self._closed = True
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def _own(self) -> None:
        """Called on every use: a fork that bypassed ``register_at_fork`` is noticed here."""
        if os.getpid() != self._owner_pid:
            self._forked()

    def _forked(self) -> None:
        """In a forked child: forget the parent's helpers (subclasses forget theirs too)."""
        self._owner_pid = os.getpid()
        self._executor_lock = threading.Lock()
        self._executor = None  # its threads live in the parent only

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- for subclasses -----------------------------------------------------------------------

    def _shared_executor(self) -> ThreadPoolExecutor:
        self._own()
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix="llmgym-sandbox-async"
                )
            return self._executor

    @abc.abstractmethod
    def _execute(self, request: RunRequest) -> ExecResult:
        """Run ``request``; user-code failures are results, infrastructure failures may raise."""
