"""Per-run cgroups (v1 or v2, chosen at run time) for memory, pids and CPU accounting.

One :class:`CgroupRun` per execution (two for compiled languages: the compile step is accounted
apart). The parent creates it, the run's init joins it by writing to ``cgroup.procs`` file
descriptors handed to it, and the parent reads the counters and removes it after the run.

- v1 (e.g. this project's CI hosts, hybrid mounts included): ``memory``, ``pids`` and ``cpuacct``
  hierarchies, nested under the caller's own cgroup in each, so a session-wide limit still holds.
- v2: a ``llmgym`` cgroup at the root of the unified hierarchy with the memory and pids
  controllers delegated to it (a cgroup that holds processes cannot delegate: see
  ``cgroups(7)``, "no internal processes").

Without write access to either, :class:`CgroupManager` reports why and the sandbox degrades to
rlimits (``RLIMIT_AS``, ``RLIMIT_NPROC``) and ``getrusage`` measurements.

Run cgroups are named ``r<pid>@<pid namespace>-<n>`` after the process that made them; a new
manager removes the empty ones that a process of its pid namespace, now dead, left behind.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
import weakref

__all__ = ["CgroupManager", "CgroupRun"]

_V1_CONTROLLERS = ("memory", "pids", "cpuacct")
_RUN_NAME = re.compile(r"r(\d+)@(\d+)-\d+")
_ROOT = "/sys/fs/cgroup"
_NAMES = itertools.count()
"""Run cgroup numbers, shared by every manager of this process: names never collide."""
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


class CgroupRun:
    """The cgroup(s) of one run: a directory per v1 controller, or one v2 directory."""

    def __init__(self, manager: CgroupManager, dirs: dict[str, str]) -> None:
        self.manager = manager
        self.dirs = dirs  # controller -> directory ("" for v2)

    def open_procs(self) -> list[int]:
        """Write-only fds of ``cgroup.procs``: writing ``b"0"`` moves the writer in."""
        return [
            os.open(f"{d}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs.values()
        ]

    def cpu_time_s(self) -> float | None:
        try:
            if self.manager.version == 1:
                return int(_read(self.dirs["cpuacct"] + "/cpuacct.usage")) / 1e9
            for line in _read(self.dirs[""] + "/cpu.stat").splitlines():
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError, KeyError):
            pass
        return None

    def peak_memory_bytes(self) -> int | None:
        try:
            if self.manager.version == 1:
                return int(_read(self.dirs["memory"] + "/memory.max_usage_in_bytes"))
            return int(_read(self.dirs[""] + "/memory.peak"))
        except (OSError, ValueError, KeyError):
            return None

    def oom_kills(self) -> int:
        try:
            if self.manager.version == 1:
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
        if self.manager.version == 2:
            try:
                _write(self.dirs[""] + "/cgroup.kill", "1")
                return
            except OSError:
                pass
        for _ in range(50):
            pids = self.pids()
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


class CgroupManager:
    """Finds a writable cgroup hierarchy once; hands out per-run cgroups."""

    def __init__(self, enabled: bool = True) -> None:
        self.version: int | None = None
        self.reason = ""
        self._bases: dict[str, str] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._ready: dict[tuple[int, int], list[CgroupRun]] = {}
        self._doomed: list[CgroupRun] = []
        self._helper: threading.Thread | None = None
        self._making = False  # the helper is between taking work and putting results back
        self._closed = False
        _LIVE.add(self)
        self._memsw: bool | None = None
        self._pidns = _pid_namespace()
        # r<pid>@<pid namespace>-<n>: whose runs these are, for the sweep of the dead's.
        self._prefix = f"r{os.getpid()}@{self._pidns}-"
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

    @property
    def available(self) -> bool:
        return self.version is not None

    def describe(self) -> str:
        if self.version is None:
            return f"none ({self.reason})"
        return f"v{self.version} ({', '.join(sorted(self._bases.values()))})"

    def _detect(self) -> None:
        if os.path.exists(f"{_ROOT}/cgroup.controllers"):
            self._setup_v2()
            return
        own = _own_cgroups()
        missing = [c for c in _V1_CONTROLLERS if not os.path.isdir(f"{_ROOT}/{c}")]
        if missing:
            raise OSError(0, f"cgroup v1 controllers not mounted: {missing}")
        for c in _V1_CONTROLLERS:
            rel = own.get(c, "/").lstrip("/")
            base = os.path.join(_ROOT, c, rel, "llmgym")
            os.makedirs(base, exist_ok=True)
            self._bases[c] = base
        # Probe: a run cgroup can be made, limited and removed.
        probe = self._make(64, 8)
        probe.remove()
        self.version = 1
        self._sweep()

    def _setup_v2(self) -> None:
        controllers = _read(f"{_ROOT}/cgroup.controllers").split()
        for needed in ("memory", "pids"):
            if needed not in controllers:
                raise OSError(0, f"cgroup v2 controller {needed!r} not available at the root")
        base = f"{_ROOT}/llmgym"
        os.makedirs(base, exist_ok=True)
        enabled = _read(f"{_ROOT}/cgroup.subtree_control").split()
        for c in ("memory", "pids"):
            if c not in enabled:
                _write(f"{_ROOT}/cgroup.subtree_control", f"+{c}")
        if set(_read(f"{base}/cgroup.subtree_control").split()) < {"memory", "pids"}:
            _write(f"{base}/cgroup.subtree_control", "+memory +pids")
        self._bases[""] = base
        self.version = 2
        probe = self._make(64, 8)
        probe.remove()
        self._sweep()

    def _sweep(self) -> None:
        """Remove the run cgroups of sandboxes whose process died without closing them.

        Named ``r<pid>@<pid namespace>-<n>``: one made in this pid namespace by a pid that no
        longer exists goes, when it holds no task (the kernel refuses to remove one that does).
        A live pid is left alone, whoever it is, and so is every run of another pid namespace,
        where the pid means something else.
        """
        for base in self._bases.values():
            try:
                names = os.listdir(base)
            except OSError:
                continue
            for name in names:
                m = _RUN_NAME.fullmatch(name)
                if m is None or int(m.group(2)) != self._pidns or _alive(int(m.group(1))):
                    continue
                try:
                    os.rmdir(os.path.join(base, name))
                except OSError:
                    pass

    # -- made ahead, removed behind -----------------------------------------------------------
    #
    # Making a run's cgroups (a directory per controller, limits written) and removing them
    # after it take a few tenths of a millisecond of a run's critical path. A helper thread
    # makes the next ones ahead, for the limits used lately, and removes spent ones behind:
    # every run still gets cgroups made for it alone, never used before.

    READY = 2
    """Cgroups kept made ahead for each of the last ``KEYS`` limit pairs asked for."""
    KEYS = 4

    def create(self, memory_mb: int, max_processes: int) -> CgroupRun:
        """A new run cgroup with ``memory_mb`` MiB and ``max_processes`` tasks at most."""
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
            self._wake.notify()
        return run if run is not None else self._make(memory_mb, max_processes)

    def retire(self, run: CgroupRun) -> None:
        """Remove ``run``'s cgroups once its processes are gone (by the helper thread)."""
        with self._lock:
            if not self._closed and self._helper is not None:
                self._doomed.append(run)
                self._wake.notify()
                return
        run.remove()

    def settled(self, timeout: float = 5.0) -> list[str]:
        """Wait (bounded) until the spent cgroups are removed and the next ones made; the
        directories of those made ahead, which are all that should be left of the runs."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                busy = bool(self._doomed) or self._making or self._wanted() is not None
                ready = [d for rs in self._ready.values() for r in rs for d in r.dirs.values()]
            if not busy or time.monotonic() > deadline:
                return ready
            time.sleep(0.01)

    def _start_helper(self) -> None:
        if self._helper is None:
            self._helper = threading.Thread(target=self._help, name="llmgym-cgroups", daemon=True)
            self._helper.start()

    def _help(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._doomed and not self._wanted():
                    self._wake.wait()
                if self._closed:
                    return
                doomed, self._doomed = self._doomed, []
                key = self._wanted()
                self._making = True
            try:
                for run in doomed:
                    run.remove()
                if key is not None:
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

    def _make(self, memory_mb: int, max_processes: int) -> CgroupRun:
        name = f"{self._prefix}{next(_NAMES)}"
        dirs = {c: os.path.join(b, name) for c, b in self._bases.items()}
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
            CgroupRun(self, made).remove()
            raise
        return CgroupRun(self, dirs)

    def close(self) -> None:
        """Remove the cgroups made ahead and the spent ones, then this process's base
        directories when nothing else uses them."""
        _LIVE.discard(self)
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
        for base in self._bases.values():
            try:
                os.rmdir(base)
            except OSError:
                pass
