"""Per-run cgroups (v1 or v2, chosen at run time) for memory, pids and CPU accounting.

One :class:`CgroupRun` per execution (two for compiled languages: the compile step is accounted
apart). The parent creates it, the run's init joins it by writing to ``cgroup.procs`` file
descriptors handed to it, and the parent reads the counters and removes it after the run.

- v1 (e.g. this project's CI hosts, hybrid mounts included): ``memory``, ``pids`` and ``cpuacct``
  hierarchies, nested under the caller's own cgroup in each, so a session-wide limit still holds.
- v2: a ``llmgym`` cgroup at the root of the unified hierarchy with the memory and pids
  controllers delegated to it (a cgroup that holds processes cannot delegate: see
  ``cgroups(7)``, "no internal processes").
- Given ``parents`` (the docker backend: a container's own cgroups), the ``llmgym`` directory
  is made below those instead, so a run is accounted and limited inside its container.

Without write access to either, :class:`CgroupManager` reports why and the sandbox degrades to
rlimits (``RLIMIT_AS``, ``RLIMIT_NPROC``) and ``getrusage`` measurements.

Names and owners. Every manager draws a random token when it starts (and again in a forked
child): its runs are ``r<pid>.<token>-<n>``, so no two managers' names meet, whatever pid
namespaces they live in and however the kernel reuses pids and namespace inodes. Beside them
the manager keeps an *anchor*, an empty cgroup ``o<pid>.<token>`` that it holds open under an
exclusive ``flock`` for as long as it lives: the kernel drops the lock when the owner dies
(SIGKILL and OOM included), and flock works on cgroupfs inodes, which every pid namespace
shares. So any process can tell an orphan from a live manager's cgroup: a run whose anchor is
gone or unlocked is an orphan. A new manager sweeps the orphans of its own ``llmgym``
directories that hold no process (:func:`sweep`); ``llmgym sandbox check`` lists every orphan
on the host (:func:`find_leftovers`) and ``llmgym sandbox clean`` removes them.

A forked child neither uses nor removes what its parent's managers made: at the fork
(``os.register_at_fork``), and wherever a manager finds that it runs in another process than
its owner, it forgets the parent's cgroups and starts afresh, with a token of its own.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import itertools
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["CgroupManager", "CgroupRun", "Leftover", "find_leftovers", "orphans", "sweep"]

_V1_CONTROLLERS = ("memory", "pids", "cpuacct")
_ROOT = "/sys/fs/cgroup"
BASE_NAME = "llmgym"
_RUN_NAME = re.compile(r"r(\d+)\.([0-9a-f]+)-\d+")
_ANCHOR_NAME = re.compile(r"o(\d+)\.([0-9a-f]+)")
_LEGACY_NAME = re.compile(r"r(\d+)@(\d+)-\d+")
"""Run cgroups of llmgym before owner anchors: ``r<pid>@<pid namespace inode>-<n>``."""
_NAME_TRIES = 16
_LIVE: weakref.WeakSet[CgroupManager] = weakref.WeakSet()


def settled_everywhere(timeout: float = 5.0) -> list[str]:
    """:meth:`CgroupManager.settled` for every manager of this process: the directories of
    the cgroups made ahead, all that should be left of the runs so far."""
    return [d for m in list(_LIVE) for d in m.settled(timeout)]


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(fd)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for v2) -> path of this process's cgroup."""
    out: dict[str, str] = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _holds_processes(path: str) -> bool:
    """Whether the cgroup at ``path`` (or one below it) holds a process."""
    try:
        if _read(path + "/cgroup.procs").split():
            return True
    except OSError:
        return False
    try:
        children = [e.path for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    return any(_holds_processes(c) for c in children)


@contextlib.contextmanager
def _claimed(path: str) -> Iterator[bool]:
    """Try to take an anchor's lock: True while held (its owner is gone), False if it lives."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield True  # gone meanwhile: nobody owns it
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock, if taken


class CgroupRun:
    """The cgroup(s) of one run: a directory per v1 controller, or one v2 directory."""

    def __init__(self, manager: CgroupManager | None, dirs: dict[str, str], version: int) -> None:
        self.manager = manager
        self.dirs = dirs  # controller -> directory ("" for v2)
        self.version = version

    def open_procs(self) -> list[int]:
        """Write-only fds of ``cgroup.procs``: writing ``b"0"`` moves the writer in."""
        return [
            os.open(f"{d}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs.values()
        ]

    def cpu_time_s(self) -> float | None:
        """CPU time of every process and thread that ever ran in the cgroup, reaped or not."""
        try:
            if self.version == 1:
                return int(_read(self.dirs["cpuacct"] + "/cpuacct.usage")) / 1e9
            for line in _read(self.dirs[""] + "/cpu.stat").splitlines():
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError, KeyError):
            pass
        return None

    def peak_memory_bytes(self) -> int | None:
        """The high-water mark of every page charged to the cgroup: all its processes'
        memory, and the tmpfs, memfd and page-cache pages they touched first."""
        try:
            if self.version == 1:
                return int(_read(self.dirs["memory"] + "/memory.max_usage_in_bytes"))
            return int(_read(self.dirs[""] + "/memory.peak"))
        except (OSError, ValueError, KeyError):
            return None

    def oom_kills(self) -> int:
        try:
            if self.version == 1:
                text = _read(self.dirs["memory"] + "/memory.oom_control")
            else:
                text = _read(self.dirs[""] + "/memory.events")
        except (OSError, KeyError):
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out.update(int(p) for p in _read(d + "/cgroup.procs").split())
            except OSError:
                pass
        return sorted(out)

    def tasks(self) -> list[int]:
        """Thread ids in the run's cgroup (every thread of every process of the run)."""
        for c, d in self.dirs.items():
            try:
                return [
                    int(t) for t in _read(d + ("/cgroup.threads" if c == "" else "/tasks")).split()
                ]
            except (OSError, ValueError):
                continue
        return []

    def kill_all(self) -> None:
        """SIGKILL everything still in the cgroup (backstop: the run's pid namespace does it first)."""
        if self.version == 2:
            try:
                _write(self.dirs[""] + "/cgroup.kill", "1")
                return
            except OSError:
                pass
        for _ in range(50):
            pids = [p for p in self.pids() if p > 0]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)

    def remove(self, timeout: float = 2.0) -> None:
        """Remove the directories, waiting (bounded) for dying processes to leave."""
        deadline = time.monotonic() + timeout
        for d in self.dirs.values():
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        self.kill_all()
                        try:
                            os.rmdir(d)
                        except OSError:
                            pass
                        break
                    time.sleep(0.001)


# -- orphans ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    """A cgroup that a sandbox made and nobody owns any more."""

    path: str
    kind: str
    """``run``, ``anchor`` (a dead manager's marker) or ``legacy`` (named by an older llmgym)."""
    owner_pid: int
    """The pid of the manager that made it, in the pid namespace it lived in."""
    holds_processes: bool


def orphans(base: str, *, legacy_anywhere: bool = False) -> list[Leftover]:
    """The orphans directly below one ``llmgym`` directory (see the module docstring).

    Cgroups named by an older llmgym (``r<pid>@<pid namespace>-<n>``) count when made in this
    pid namespace by a pid that is gone; with ``legacy_anywhere``, wherever they were made
    (nothing tells whether their owner lives: what ``llmgym sandbox clean`` assumes, since this
    version names its cgroups otherwise)."""
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    dead: dict[str, bool] = {}  # anchor name -> whether its owner is gone

    def owner_gone(anchor: str) -> bool:
        if anchor not in dead:
            with _claimed(os.path.join(base, anchor)) as claimed:
                dead[anchor] = claimed
        return dead[anchor]

    pidns = _pid_namespace()
    out: list[Leftover] = []
    runs_of: dict[str, int] = {}
    for name in names:
        path = os.path.join(base, name)
        m = _RUN_NAME.fullmatch(name)
        if m is not None:
            anchor = f"o{m.group(1)}.{m.group(2)}"
            if owner_gone(anchor):
                out.append(Leftover(path, "run", int(m.group(1)), _holds_processes(path)))
            else:
                runs_of[anchor] = runs_of.get(anchor, 0) + 1
            continue
        m = _LEGACY_NAME.fullmatch(name)
        if m is not None:
            # Only this pid namespace can tell whether the pid lives; elsewhere it means
            # another process, and an older llmgym may still use it.
            if legacy_anywhere or (int(m.group(2)) == pidns and not _alive(int(m.group(1)))):
                out.append(Leftover(path, "legacy", int(m.group(1)), _holds_processes(path)))
            continue
    for name in names:
        m = _ANCHOR_NAME.fullmatch(name)
        if m is not None and owner_gone(name):
            out.append(Leftover(os.path.join(base, name), "anchor", int(m.group(1)), False))
    return out


def sweep(
    base: str, *, kill: bool = False, legacy_anywhere: bool = False
) -> tuple[list[Leftover], list[Leftover]]:
    """Remove the orphans below the ``llmgym`` directory ``base``: (removed, kept).

    An orphan that still holds a process is kept (the kernel refuses to remove it) unless
    ``kill``, which kills its processes first. A dead owner's anchor goes once its runs have.
    """
    removed: list[Leftover] = []
    kept: list[Leftover] = []
    found = orphans(base, legacy_anywhere=legacy_anywhere)
    for item in [o for o in found if o.kind != "anchor"]:
        if item.holds_processes and kill:
            CgroupRun(None, {"": item.path}, 1).kill_all()
        try:
            os.rmdir(item.path)
            removed.append(item)
        except FileNotFoundError:
            removed.append(item)
        except OSError:
            kept.append(item)
    for item in [o for o in found if o.kind == "anchor"]:
        token = os.path.basename(item.path)[1:]
        if any(os.path.basename(k.path)[1:].startswith(token + "-") for k in kept):
            kept.append(item)  # still names the owner of what is left
            continue
        try:
            os.rmdir(item.path)
        except FileNotFoundError:
            pass
        except OSError:
            kept.append(item)
            continue
        removed.append(item)
    return removed, kept


def llmgym_directories(root: str = _ROOT, depth: int = 10) -> list[str]:
    """Every ``llmgym`` directory in every cgroup hierarchy of this host (containers' too)."""
    found: list[str] = []
    start = root.rstrip("/").count("/")
    for path, dirs, _files in os.walk(root):
        if os.path.basename(path) == BASE_NAME:
            found.append(path)
            dirs[:] = []  # runs and anchors hold no llmgym directory of their own
            continue
        if path.count("/") - start >= depth:
            dirs[:] = []
    return found


def find_leftovers(root: str = _ROOT) -> list[Leftover]:
    """The orphans of every ``llmgym`` directory on this host (what ``sandbox clean`` removes)."""
    return [o for base in llmgym_directories(root) for o in orphans(base, legacy_anywhere=True)]


# -- the manager -----------------------------------------------------------------------------


class CgroupManager:
    """Finds a writable cgroup hierarchy once; hands out per-run cgroups.

    Args:
        enabled: ``False`` makes a manager that hands out nothing (the sandbox uses rlimits).
        parents: directories to make the ``llmgym`` directory in, by controller (v1:
            ``memory``, ``pids``, ``cpuacct``; v2: ``""``), instead of this process's own
            cgroups (v1) or the root (v2): a container's cgroups, for the docker backend.
    """

    def __init__(self, enabled: bool = True, *, parents: Mapping[str, str] | None = None) -> None:
        self.version: int | None = None
        self.reason = ""
        self._bases: dict[str, str] = {}
        self._parents = dict(parents) if parents is not None else None
        self._memsw: bool | None = None
        self._closed = False
        self._reset()
        _LIVE.add(self)
        if not enabled:
            self.reason = "cgroups disabled by the caller"
            return
        try:
            self._detect()
        except OSError as exc:
            self.version = None
            self.reason = (
                f"cgroups unavailable ({exc.strerror or exc}): limits fall back to rlimits"
            )

    def _reset(self) -> None:
        """Own nothing yet: what a new manager, or a forked child's copy, starts from."""
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._anchor_lock = threading.Lock()
        self._ready: dict[tuple[int, int], list[CgroupRun]] = {}
        self._doomed: list[CgroupRun] = []
        self._helper: threading.Thread | None = None
        self._making = False  # the helper is between taking work and putting results back
        self._lingering = False  # the helper waits on a timer for the rest of a batch
        self._flush = False  # settled() wants the spent ones removed now
        self._anchors: dict[str, int] = {}  # base -> the locked fd of this manager's anchor
        self._token = ""
        self._names = itertools.count()

    def _after_fork(self) -> None:
        """In a forked child: the parent's cgroups, anchors and helper are not this process's.
        Forget them (closing only this process's copies of the anchors' descriptors: the
        parent keeps its locks) and start afresh on the next run."""
        for fd in self._anchors.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._reset()

    def _own(self) -> None:
        """Called on every use: a fork that bypassed ``register_at_fork`` (a C library's
        ``fork()``) is noticed here instead."""
        if os.getpid() != self._owner:
            self._after_fork()

    @property
    def available(self) -> bool:
        return self.version is not None

    @property
    def bases(self) -> dict[str, str]:
        """The ``llmgym`` directory of each hierarchy (controller -> path; ``""`` for v2)."""
        return dict(self._bases)

    def describe(self) -> str:
        if self.version is None:
            return f"none ({self.reason})"
        return f"v{self.version} ({', '.join(sorted(self._bases.values()))})"

    def _detect(self) -> None:
        parents = self._parents
        if parents is not None:
            v2 = list(parents) == [""]
        else:
            v2 = os.path.exists(f"{_ROOT}/cgroup.controllers")
        if v2:
            self._setup_v2(parents[""] if parents is not None else _ROOT)
            return
        if parents is None:
            own = _own_cgroups()
            missing = [c for c in _V1_CONTROLLERS if not os.path.isdir(f"{_ROOT}/{c}")]
            if missing:
                raise OSError(0, f"cgroup v1 controllers not mounted: {missing}")
            parents = {
                c: os.path.join(_ROOT, c, own.get(c, "/").lstrip("/")) for c in _V1_CONTROLLERS
            }
        for c in _V1_CONTROLLERS:
            base = os.path.join(parents[c], BASE_NAME)
            os.makedirs(base, exist_ok=True)
            self._bases[c] = base
        self.version = 1
        self._probe()

    def _setup_v2(self, parent: str) -> None:
        controllers = _read(f"{parent}/cgroup.controllers").split()
        for needed in ("memory", "pids"):
            if needed not in controllers:
                raise OSError(0, f"cgroup v2 controller {needed!r} not available in {parent}")
        base = f"{parent}/{BASE_NAME}"
        os.makedirs(base, exist_ok=True)
        enabled = _read(f"{parent}/cgroup.subtree_control").split()
        for c in ("memory", "pids"):
            if c not in enabled:
                _write(f"{parent}/cgroup.subtree_control", f"+{c}")
        if set(_read(f"{base}/cgroup.subtree_control").split()) < {"memory", "pids"}:
            _write(f"{base}/cgroup.subtree_control", "+memory +pids")
        self._bases[""] = base
        self.version = 2
        self._probe()

    def _probe(self) -> None:
        """A run cgroup can be made, limited and removed; then the dead's orphans go."""
        try:
            self._make(64, 8).remove()
        except OSError:
            self._release_anchors()
            self.version = None
            raise
        for base in self._bases.values():
            sweep(base)

    # -- the anchor ---------------------------------------------------------------------------

    def _anchor(self) -> None:
        """Make and lock this manager's anchor in every base, under a fresh token."""
        for _ in range(_NAME_TRIES):
            token = secrets.token_hex(6)
            name = f"o{os.getpid()}.{token}"
            held: dict[str, int] = {}
            try:
                for base in self._bases.values():
                    held[base] = self._lock_new(os.path.join(base, name))
            except (FileExistsError, BlockingIOError, FileNotFoundError):
                for base, fd in held.items():  # another token; nothing of this one stays
                    self._drop_anchor(base, name, fd)
                continue
            except OSError:
                for base, fd in held.items():
                    self._drop_anchor(base, name, fd)
                raise
            self._anchors, self._token = held, token
            return
        raise OSError(errno.EEXIST, "no free cgroup name for this sandbox's anchor")

    @staticmethod
    def _lock_new(path: str) -> int:
        try:
            os.mkdir(path)
        except FileNotFoundError:  # the base went (another manager closed): remake it
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mkdir(path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A sweep may have taken it for a dead owner's between mkdir and flock.
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError(errno.ENOENT, "anchor swept", path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def _drop_anchor(base: str, name: str, fd: int) -> None:
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            pass
        os.close(fd)

    def _release_anchors(self) -> None:
        name = f"o{self._owner}.{self._token}"
        for base, fd in self._anchors.items():
            self._drop_anchor(base, name, fd)
        self._anchors = {}

    # -- made ahead, removed behind -----------------------------------------------------------
    #
    # Making a run's cgroups (a directory per controller, limits written) and removing them
    # after it take a few tenths of a millisecond of a run's critical path. A helper thread
    # makes the next ones ahead, for the limits used lately, and removes spent ones behind:
    # every run still gets cgroups made for it alone, never used before. It works in batches:
    # woken when a pair of limits runs low (it then makes up to READY) or when BATCH spent
    # ones wait (or LINGER_S after the first), so that one wake-up of the thread (a futex and
    # a switch of threads each) serves several runs.

    READY = 4
    """Cgroups kept made ahead for each of the last ``KEYS`` limit pairs asked for."""
    REFILL = 2
    """Fewer than this many made ahead for a pair wakes the helper, which makes up to READY."""
    BATCH = 4
    """This many spent cgroups wake the helper to remove them."""
    LINGER_S = 0.05
    """How long a spent cgroup waits at most for the others of its batch."""
    KEYS = 4

    def create(self, memory_mb: int, max_processes: int) -> CgroupRun:
        """A new run cgroup with ``memory_mb`` MiB and ``max_processes`` tasks at most."""
        self._own()
        key = (memory_mb, max_processes)
        with self._lock:
            if self._closed:
                return self._make(memory_mb, max_processes)
            ready = self._ready.pop(key, [])
            run = ready.pop() if ready else None
            self._ready[key] = ready  # most recently asked for: last
            while len(self._ready) > self.KEYS:
                stale = next(iter(self._ready))
                self._doomed.extend(self._ready.pop(stale))
            self._start_helper()
            if len(ready) < self.REFILL:
                self._wake.notify()
        return run if run is not None else self._make(memory_mb, max_processes)

    def retire(self, run: CgroupRun) -> None:
        """Remove ``run``'s cgroups once its processes are gone (by the helper thread, soon)."""
        if os.getpid() != self._owner:
            return  # made by the process this one was forked from: not this one's to remove
        with self._lock:
            if not self._closed and self._helper is not None:
                self._doomed.append(run)
                if len(self._doomed) >= self.BATCH or not self._lingering:
                    self._wake.notify()  # a batch is full, or the helper waits with no timer
                return
        run.remove()

    def settled(self, timeout: float = 5.0) -> list[str]:
        """Wait (bounded) until the spent cgroups are removed and the next ones made; the
        directories of those made ahead, which are all that should be left of the runs."""
        self._own()
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                busy = bool(self._doomed) or self._making or self._low() is not None
                if busy and self._helper is not None:
                    self._flush = True  # now, not at the end of a batch
                    self._wake.notify()
                ready = [d for rs in self._ready.values() for r in rs for d in r.dirs.values()]
            if not busy or time.monotonic() > deadline:
                return ready
            time.sleep(0.01)

    def owned(self) -> list[str]:
        """Every directory this manager holds now: its anchors and the runs made ahead."""
        self._own()
        anchors = [os.path.join(b, f"o{self._owner}.{self._token}") for b in self._anchors]
        return anchors + self.settled(0)

    def _start_helper(self) -> None:
        if self._helper is None:
            self._helper = threading.Thread(target=self._help, name="llmgym-cgroups", daemon=True)
            self._helper.start()

    def _due(self) -> bool:
        """Whether the helper has work now (called with the lock held)."""
        return self._flush or len(self._doomed) >= self.BATCH or self._low() is not None

    def _help(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._due():
                    if self._doomed:  # the rest of a batch gets LINGER_S to come
                        self._lingering = True
                        if not self._wake.wait(self.LINGER_S):
                            break
                    else:
                        self._lingering = False
                        self._wake.wait()
                self._lingering = self._flush = False
                if self._closed:
                    return
                doomed, self._doomed = self._doomed, []
                self._making = True
            try:
                for run in doomed:
                    run.remove()
                while True:  # make up every pair that is short
                    with self._lock:
                        key = None if self._closed else self._wanted()
                    if key is None:
                        break
                    self._make_ahead(key)
            finally:
                with self._lock:
                    self._making = False

    def _make_ahead(self, key: tuple[int, int]) -> None:
        try:
            run = self._make(*key)
        except OSError:  # made on demand instead, until asked for again
            with self._lock:
                self._doomed.extend(self._ready.pop(key, []))
            return
        with self._lock:
            if self._closed or key not in self._ready:
                self._doomed.append(run)
            else:
                self._ready[key].append(run)

    def _wanted(self) -> tuple[int, int] | None:
        for key, ready in self._ready.items():
            if len(ready) < self.READY:
                return key
        return None

    def _low(self) -> tuple[int, int] | None:
        for key, ready in self._ready.items():
            if len(ready) < self.REFILL:
                return key
        return None

    def _make(self, memory_mb: int, max_processes: int) -> CgroupRun:
        if not self._anchors:
            with self._anchor_lock:  # the helper and a run may both get here first
                if not self._anchors:
                    self._anchor()
        assert self.version is not None
        for _ in range(_NAME_TRIES):
            name = f"r{self._owner}.{self._token}-{next(self._names)}"
            dirs = {c: os.path.join(b, name) for c, b in self._bases.items()}
            try:
                return self._make_dirs(dirs, memory_mb, max_processes)
            except FileExistsError:  # cannot happen with a fresh token; never fail a run on it
                continue
        raise OSError(errno.EEXIST, "no free cgroup name for a run")

    def _make_dirs(self, dirs: dict[str, str], memory_mb: int, max_processes: int) -> CgroupRun:
        assert self.version is not None
        made: dict[str, str] = {}
        try:
            for c, d in dirs.items():
                try:
                    os.mkdir(d)
                except FileNotFoundError:  # another manager removed the shared base: remake it
                    os.makedirs(os.path.dirname(d), exist_ok=True)
                    if c == "":
                        _write(os.path.dirname(d) + "/cgroup.subtree_control", "+memory +pids")
                    os.mkdir(d)
                made[c] = d
            limit = memory_mb << 20
            if "memory" in dirs:
                _write(dirs["memory"] + "/memory.limit_in_bytes", str(limit))
                if self._memsw is None:  # swap accounting: the kernel has it or not, for good
                    self._memsw = os.path.exists(dirs["memory"] + "/memory.memsw.limit_in_bytes")
                if self._memsw:
                    try:
                        _write(dirs["memory"] + "/memory.memsw.limit_in_bytes", str(limit))
                    except OSError:
                        pass
                _write(dirs["pids"] + "/pids.max", str(max_processes))
            else:
                d = dirs[""]
                _write(d + "/memory.max", str(limit))
                try:
                    _write(d + "/memory.swap.max", "0")
                except OSError:
                    pass
                _write(d + "/pids.max", str(max_processes))
        except OSError:
            CgroupRun(self, made, self.version).remove()
            raise
        return CgroupRun(self, dirs, self.version)

    def close(self) -> None:
        """Remove the cgroups made ahead and the spent ones, the anchor, then the ``llmgym``
        directories when nothing else uses them. In a process forked from the owner, only
        forgets them."""
        _LIVE.discard(self)
        if os.getpid() != self._owner:
            self._after_fork()
            self._closed = True
            return
        with self._lock:
            self._closed = True
            self._wake.notify()
            helper = self._helper
        if helper is not None and helper is not threading.current_thread():
            helper.join()
        with self._lock:
            left = self._doomed + [r for ready in self._ready.values() for r in ready]
            self._doomed, self._ready = [], {}
        for run in left:
            run.remove()
        self._release_anchors()
        for base in self._bases.values():
            # What dead managers left here goes too: a forked child that used this sandbox
            # and left by os._exit, say (its zygote dies with it; its cgroups would not).
            sweep(base)
            try:
                os.rmdir(base)
            except OSError:
                pass


def _after_fork_in_child() -> None:
    for manager in list(_LIVE):
        manager._after_fork()


def _close_at_exit() -> None:
    """At interpreter exit: every manager this process owns removes what it made."""
    for manager in list(_LIVE):
        if manager._owner == os.getpid():
            try:
                manager.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)
