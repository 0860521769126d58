"""The sandbox's zygote: a warm interpreter that lives inside the isolation and forks runs.

Run as a plain script (``python -E -s _zygote.py CONFIG_JSON``) by the local backend, and as the
init process of each container by the docker backend; it imports nothing from llmgym, only the
standard library and ``_seccomp`` beside it.

Process tree of one run, namespaces mode (local backend)::

    parent (llmgym)  --socket-->  zygote Z (pid 1 of its own pid/mount/net/ipc/uts namespaces,
                                  a read-only root built from bind mounts, pre-imported stdlib)
                                    fork, in a new pid namespace
                                    -> run init I (pid 1 of the run: joins the run's cgroups,
                                       new mount/ipc/net namespaces, private /tmp and /dev/shm,
                                       fresh /proc, writes the files, enforces the wall limit,
                                       reaps orphans, reports to the parent)
                                         fork -> program P (pid 2: rlimits, no-new-privs, no
                                                 capabilities, uid 65534, seccomp; then either
                                                 execs the program or, for Python's fast path,
                                                 runs the code in this already-warm interpreter)

When I exits the kernel kills every process left in the run's pid namespace, so daemons and
double forks die with the run. In container mode (docker backend) Z is the container's init, runs
one run at a time, makes I a child subreaper instead of a namespace init, and wipes /tmp,
/dev/shm and SysV IPC objects before each run; the container supplies the rest of the isolation.

Protocol: the parent sends one SOCK_SEQPACKET message per run: a JSON request plus file
descriptors (payload memfd, stdin, stdout, stderr, result channel, control socket, cgroup.procs
files). I sends JSON messages back on the control socket: ``started`` (with a pidfd of I, so the
parent can kill the whole run without trusting Z), ``compiled``, then ``exit`` or ``error``.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

try:  # imported as llmgym.sandbox._zygote (tests, type checking) or run as a script
    from . import _seccomp
except ImportError:  # pragma: no cover - script mode
    import _seccomp  # type: ignore[no-redef]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
MAX_MSG = 1 << 16
MAX_FDS = 16
COMPILE_OUTPUT_CAP = 64 << 10
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.syscall.restype = ctypes.c_long


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def prctl(option: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
    return _check(_libc.prctl(option, a, b, c, d), f"prctl({option})")


def mount(
    src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {src} -> {dst}")


def umount(path: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(path.encode(), flags), f"umount {path}")


def pivot_root(new: str, old: str) -> None:
    nr = SYS_PIVOT_ROOT[os.uname().machine]
    _check(_libc.syscall(nr, new.encode(), old.encode()), "pivot_root")


def set_name(name: bytes) -> None:
    """The process name ``ps`` and ``perf`` show (comm)."""
    _libc.prctl(
        PR_SET_NAME, ctypes.cast(ctypes.c_char_p(name), ctypes.c_void_p).value or 0, 0, 0, 0
    )


def write_file(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------
# Building the zygote's world (namespaces mode)
# ----------------------------------------------------------------------------------------------


def _mountinfo_under(prefix: str) -> list[tuple[str, str]]:
    """(mount point, per-mount options) of every mount at or below ``prefix``."""
    out = []
    with open("/oldroot/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix.rstrip("/") + "/"):
                out.append((point, fields[5]))
    return out


def _remount_readonly(point: str, opts: str) -> None:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
    # Flags of the original mount are locked in a user namespace: keep them.
    for name, bit in (("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
        if name in opts.split(","):
            flags |= bit
    try:
        mount(None, point, None, flags | MS_NODEV)
    except OSError:
        mount(None, point, None, flags)


def _bind(src: str, dst: str) -> None:
    """Bind ``src`` (a path under /oldroot) read-only at ``dst`` (under /newroot)."""
    if os.path.islink(src):
        target = os.readlink(src)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.lexists(dst):
            os.symlink(target, dst)
        return
    if not os.path.exists(src):
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    elif not os.path.exists(dst):
        os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(src, dst, None, MS_BIND | MS_REC)
    for point, opts in reversed(_mountinfo_under(dst)):
        _remount_readonly(point, opts)


def _write_etc(root: str, cfg: dict[str, Any]) -> None:
    etc = root + "/etc"
    os.makedirs(etc, exist_ok=True)
    uid, gid = cfg["uid"], cfg["gid"]
    files = {
        "passwd": f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{gid}:sandbox:/tmp:/bin/sh\n",
        "group": f"root:x:0:\nsandbox:x:{gid}:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "hostname": "sandbox\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    }
    for name, text in files.items():
        with open(f"{etc}/{name}", "w") as f:
            f.write(text)
    for name in cfg.get("etc_binds", []):
        _bind("/oldroot/etc/" + name, f"{etc}/{name}")


def build_root(cfg: dict[str, Any]) -> None:
    """Pivot into a fresh read-only root holding only what the runtimes need."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    os.mkdir("/tmp/oldroot")
    os.mkdir("/tmp/newroot")
    pivot_root("/tmp", "/tmp/oldroot")
    os.chdir("/")
    mount("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
    for path in cfg["binds"]:
        _bind("/oldroot" + path, "/newroot" + path)
    _write_etc("/newroot", cfg)
    # /dev: a few safe device nodes, each a read-only bind of the host's node.
    os.makedirs("/newroot/dev", exist_ok=True)
    mount("tmpfs", "/newroot/dev", "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for node in ("null", "zero", "full", "random", "urandom"):
        dst = "/newroot/dev/" + node
        os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o666))
        mount("/oldroot/dev/" + node, dst, None, MS_BIND)
        mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, "/newroot/dev/" + name)
    os.mkdir("/newroot/dev/shm")
    mount(None, "/newroot/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    for d in ("proc", "tmp"):
        os.makedirs("/newroot/" + d, exist_ok=True)
    mount("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir("/newroot")
    pivot_root(".", ".")
    umount(".")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_sandbox(cfg: dict[str, Any]) -> None:
    """Create the zygote's namespaces; returns in the zygote (pid 1), never in the launcher."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC
    if not cfg["network"]:
        flags |= CLONE_NEWNET
    if cfg["userns"]:
        flags |= CLONE_NEWUSER
    host_uid, host_gid = os.getuid(), os.getgid()
    unshare(flags)
    if cfg["userns"]:
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"{cfg['uid']} {host_uid} 1\n")
        write_file("/proc/self/gid_map", f"{cfg['gid']} {host_gid} 1\n")
    pid = os.fork()
    if pid:  # the launcher: wait for the zygote and mirror its end
        os.closerange(3, 1 << 16)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _libc.sethostname(b"sandbox", 7)
    build_root(cfg)


# ----------------------------------------------------------------------------------------------
# The program process
# ----------------------------------------------------------------------------------------------

PYBOOT = r'''
def _llmgym_pyrun(path, status_fd):
    """Run ``path`` as ``python path`` would, reporting a SyntaxError on ``status_fd``."""
    import atexit, builtins, io, os, sys, types, traceback
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="strict")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    sys.argv = [path]
    sys.dont_write_bytecode = True
    if sys.path and sys.path[0] in ("", "."):
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        traceback.print_exception(type(exc), exc, None)
        sys.stderr.flush()
        os.write(status_fd, b"C")
        os._exit(1)
    os.close(status_fd)
    preexisting = set(sys.modules)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    main.__cached__ = None
    sys.modules["__main__"] = main
    exit_code = 0
    try:
        exec(code, main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            exit_code = 0
        elif isinstance(exc.code, int):
            exit_code = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            exit_code = 1
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        exc = exc.with_traceback(tb)  # hide this bootstrap's own frame, as `python main.py` would
        try:
            sys.excepthook(type(exc), exc, tb)
        except BaseException:
            pass
        exit_code = 1
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        pass
    # Finalize like interpreter shutdown: dropping the program's globals flushes and closes
    # the files it left open (fd 3, the result channel, most of all).
    try:
        import gc

        for name, mod in list(sys.modules.items()):
            if name not in preexisting and getattr(mod, "__dict__", None) is not None:
                mod.__dict__.clear()
        main.__dict__.clear()
        gc.collect()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            exit_code = exit_code or 120
    os._exit(exit_code)
'''
_SECCOMP_PROG = b"".join(_seccomp.build_filter()) if _seccomp.SUPPORTED else b""
try:
    with open("/proc/sys/kernel/cap_last_cap") as _f:
        _LAST_CAP = int(_f.read())
except OSError:  # pragma: no cover
    _LAST_CAP = 40
_boot_ns: dict[str, Any] = {}
exec(PYBOOT, _boot_ns)


def _set_rlimit(which: int, soft: int, hard: int | None = None) -> None:
    hard = soft if hard is None else hard
    try:
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OSError):
        cur_soft, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            resource.setrlimit(which, (min(soft, cur_hard), cur_hard))


def _drop_privileges(cfg: dict[str, Any]) -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if cfg["mode"] == "container":
        return  # the container already runs unprivileged, with no capabilities
    # The capability bounding set and ambient set were emptied once, in the zygote.
    if cfg["userns"]:
        # One uid is mapped: stay on it, but with an empty capability set.
        hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        nr = SYS_CAPSET[os.uname().machine]
        _check(_libc.syscall(nr, hdr, data), "capset")
    else:
        os.setgroups([])
        os.setresgid(cfg["gid"], cfg["gid"], cfg["gid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])


def become_program(
    cfg: dict[str, Any],
    limits: dict[str, Any],
    stdio: list[int],
    env: dict[str, str],
    degraded: bool,
) -> None:
    """In a freshly forked child: wire stdio, apply limits, shed every privilege."""
    os.setsid()
    set_name(b"llmgym-run")
    prctl(PR_SET_DUMPABLE, 1)
    if cfg["mode"] == "namespaces" and not cfg["userns"]:
        try:
            write_file("/proc/self/oom_score_adj", "0")
        except OSError:
            pass
    # Move the sources out of the way first: a source may sit on another one's target number.
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in stdio]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(stdio), 1 << 16)
    # The zygote set every other disposition as a program expects; init only added SIGCHLD.
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    cpu = max(1, int(-(-float(limits["cpu_limit_s"]) // 1)))
    _set_rlimit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _set_rlimit(resource.RLIMIT_FSIZE, int(limits["max_file_bytes"]))
    _set_rlimit(resource.RLIMIT_CORE, 0)
    _set_rlimit(resource.RLIMIT_NOFILE, 1024)
    _set_rlimit(resource.RLIMIT_MEMLOCK, 8 << 20)
    if degraded:  # no cgroup: per-process limits are all there is
        _set_rlimit(resource.RLIMIT_NPROC, int(limits["max_processes"]) + 8)
        vm = _vm_size()
        _set_rlimit(resource.RLIMIT_AS, int(limits["memory_mb"]) * (1 << 20) + vm + (64 << 20))
    os.chdir("/tmp")
    os.umask(0o022)
    if env != os.environ:  # the zygote runs with the default environment already
        os.environ.clear()
        os.environ.update(env)
    _drop_privileges(cfg)
    if cfg["seccomp"]:
        _seccomp.install(_SECCOMP_PROG)


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _exec(argv: list[str], env: dict[str, str]) -> None:
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"sandbox: cannot execute {argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(127)


# ----------------------------------------------------------------------------------------------
# The run's init
# ----------------------------------------------------------------------------------------------


def _send(sock: socket.socket, msg: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(msg).encode()
    try:
        if fds:
            sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
            )
        else:
            sock.send(data)
    except OSError:
        pass  # the parent is gone or gave up on this run: nobody to tell


def _read_payload(fd: int) -> list[tuple[str, int, bytes]]:
    data = b""
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        data += chunk
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + hlen])
    blob = memoryview(data)[8 + hlen :]
    return [(p, mode, bytes(blob[off : off + n])) for p, mode, off, n in header["files"]]


def _write_files(files: list[tuple[str, int, bytes]], owner: tuple[int, int] | None) -> None:
    for rel, mode, content in files:
        path = "/tmp/" + rel
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o755, exist_ok=True)
        fd = os.open(
            path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)


def _setup_run_namespaces(cfg: dict[str, Any]) -> None:
    flags = CLONE_NEWNS | CLONE_NEWIPC
    if not cfg["network"]:
        flags |= CLONE_NEWNET
    unshare(flags)
    # Sized for real when the request comes (a remount); the cgroup bounds it too.
    opts = "size=64m,mode=1777,nr_inodes=16k"
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _resize_tmp(size_mb: int) -> None:
    opts = f"size={int(size_mb)}m,mode=1777,nr_inodes=16k"
    for point in ("/tmp", "/dev/shm"):
        mount(None, point, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, opts)


class _Reaper:
    """Reaps every child of this init; wakes up on SIGCHLD through a pipe."""

    def __init__(self) -> None:
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.statuses: dict[int, tuple[int, Any]] = {}

    def reap(self) -> None:
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = (status, ru)

    def wait(self, pid: int, start: float, limit: float, starved_before: float) -> bool:
        """Wait for ``pid`` to end; False when its wall limit passes first.

        The limit counts the time since ``start`` (monotonic) minus the time the run's tasks
        spent runnable but waiting for a CPU (``starved_s``, up to ``STARVATION_CREDIT`` times
        ``limit``): on a host busy with other work a program is not charged for CPU it was
        never given, while a sleeping or blocked program is killed on time.
        """
        deadline = start + limit
        cap = start + limit * (1 + STARVATION_CREDIT)
        while True:
            self.reap()
            if pid in self.statuses:
                return True
            now = time.monotonic()
            if now >= deadline and deadline < cap:
                deadline = min(cap, start + limit + starved_s(pid, starved_before))
            remaining = deadline - now
            if remaining <= 0:
                return False
            select.select([self.wake_r], [], [], min(remaining, 1.0))
            try:
                os.read(self.wake_r, 512)
            except BlockingIOError:
                pass

    def kill_all_and_reap(self) -> None:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while True:
            try:
                pid, status, ru = os.wait4(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            self.statuses[pid] = (status, ru)


STARVATION_CREDIT = 3.0
"""A run's wall limit stretches by the time it waited for a CPU, up to this many limits."""


def _run_delay_s(pid: int | str, tid: int | str) -> float:
    """Seconds task ``tid`` of ``pid`` has spent runnable but waiting for a CPU (0 if unknown)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):  # no CONFIG_SCHED_INFO, or the task is gone
        return 0.0


def starved_s(prog: int, prog_before: float) -> float:
    """The longest CPU wait of any live task of the run since the program was let go.

    Every process this init can see belongs to the run (its own /proc), except itself. A task
    that started after the go waited all of its ``run_delay``; the program's main thread only
    what it waited since (``prog_before``). The maximum, not the sum: concurrent waits overlap.
    """
    me = os.getpid()
    worst = 0.0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    except OSError:
        return 0.0
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            waited = _run_delay_s(p, t)
            if int(t) == prog:
                waited -= prog_before
            worst = max(worst, waited)
    return worst


def _cpu_of(ru: Any) -> float:
    return float(ru.ru_utime + ru.ru_stime)


def _compile_phase(
    req: dict[str, Any],
    cfg: dict[str, Any],
    reaper: _Reaper,
    env: dict[str, str],
    degraded: bool,
    cg_fds: list[int],
) -> dict[str, Any]:
    limits = req["compile_limits"]
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            _join_cgroup(cg_fds)
            become_program(cfg, limits, [null, out_w, out_w], env, degraded)
            _exec(req["compile_argv"], env)
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(null)
    os.set_blocking(out_r, False)
    deadline = t0 + float(limits["wall_time_s"])
    output = bytearray()
    eof = False
    timed_out = False
    while True:
        reaper.reap()
        if pid in reaper.statuses and eof:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(
            [reaper.wake_r] + ([] if eof else [out_r]), [], [], min(remaining, 1.0)
        )
        if out_r in ready:
            try:
                chunk = os.read(out_r, 1 << 16)
                if not chunk:
                    eof = True
                elif len(output) < COMPILE_OUTPUT_CAP:
                    output += chunk[: COMPILE_OUTPUT_CAP - len(output)]
            except BlockingIOError:
                pass
        if reaper.wake_r in ready:
            try:
                os.read(reaper.wake_r, 512)
            except BlockingIOError:
                pass
    os.close(out_r)
    # Nothing of the compile step outlives it (the program's process, waiting, is spared).
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while pid not in reaper.statuses:
        try:
            done, wstatus, ru = os.wait4(pid, 0)
            reaper.statuses[done] = (wstatus, ru)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    status = reaper.statuses.get(pid, (None, None))[0]
    return {
        "status": status,
        "timed_out": timed_out,
        "output": output.decode("utf-8", "replace"),
        "time": time.monotonic() - t0,
    }


def _join_cgroup(fd_list: list[int]) -> None:
    for fd in fd_list:
        os.write(fd, b"0")
        os.close(fd)


def _split_fds(names: list[str], fds: list[int]) -> dict[str, Any]:
    fdmap: dict[str, Any] = {"cg_compile": [], "cg_run": []}
    for name, fd in zip(names, fds, strict=True):
        if name.startswith("cg_"):
            fdmap[name.rsplit(":", 1)[0]].append(fd)
        else:
            fdmap[name] = fd
    return fdmap


def warm_init(cfg: dict[str, Any], zsock: socket.socket) -> None:
    """A run's init, made ahead of its request: namespaces, mounts and the program's process
    are ready before the request comes, so a run's latency is only what depends on it."""
    set_name(b"llmgym-init")
    namespaces = cfg["mode"] == "namespaces"
    if namespaces:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if not cfg["userns"]:
            try:  # the memory-limit OOM killer must pick the program, not this init
                write_file("/proc/self/oom_score_adj", "-1000")
            except OSError:
                pass
        _setup_run_namespaces(cfg)
    else:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_DUMPABLE, 0)
    reaper = _Reaper()
    go_init, go_prog = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    prog = os.fork()
    if prog == 0:
        zsock.close()
        go_init.close()
        warm_program(cfg, go_prog)
    go_prog.close()
    try:
        req, fds = _recv(zsock)
    except OSError:
        req, fds = None, []
    zsock.close()
    if req is None or len(fds) != len(req["fds"]):
        os._exit(0)
    fdmap = _split_fds(req["fds"], fds)
    ctrl = socket.socket(fileno=fdmap["control"])
    try:
        _run_init(req, fdmap, cfg, ctrl, reaper, prog, go_init)
    except BaseException as exc:  # the sandbox failed, not the program
        _send(ctrl, {"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    os._exit(0)


def warm_program(cfg: dict[str, Any], go: socket.socket) -> None:
    """The program's process, waiting for its go. Never returns."""
    try:
        msg, fds = _recv(go)
    except OSError:
        os._exit(0)
    if msg is None:
        os._exit(0)
    try:
        fdmap = _split_fds(msg["fds"], fds)
        _join_cgroup(fdmap["cg_run"])
        stdio = [fdmap[k] for k in ("stdin", "stdout", "stderr", "result", "status")]
        become_program(cfg, msg["limits"], stdio, msg["env"], msg["degraded"])
        if msg["inproc"]:
            _boot_ns["_llmgym_pyrun"]("/tmp/" + msg["main"], 4)
        if not msg["pyboot"]:
            os.close(4)
        _exec(msg["argv"], msg["env"])
    except BaseException as exc:
        try:
            os.write(2, f"sandbox: program setup failed: {exc}\n".encode())
            os.write(4, b"E")
        except OSError:
            pass
    os._exit(127)


def _run_init(
    req: dict[str, Any],
    fds: dict[str, Any],
    cfg: dict[str, Any],
    ctrl: socket.socket,
    reaper: _Reaper,
    prog: int,
    go: socket.socket,
) -> None:
    namespaces = cfg["mode"] == "namespaces"
    # The parent's kill switch: this init in a namespace (its death ends the namespace), or, in a
    # container, the program (the zygote is the init there and must survive).
    pidfd = os.pidfd_open(os.getpid() if namespaces else prog)
    _send(ctrl, {"type": "started"}, [pidfd])
    os.close(pidfd)
    if namespaces:
        _resize_tmp(req["tmp_mb"])
    files = _read_payload(fds["payload"])
    os.close(fds["payload"])
    _write_files(files, None)
    degraded = bool(req["degraded"])
    env = req["env"]
    if req.get("compile_argv") is not None:
        result = _compile_phase(req, cfg, reaper, env, degraded, fds["cg_compile"])
        status = result["status"]
        ok = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        ok = ok and not result["timed_out"]
        _send(ctrl, {"type": "compiled", "ok": ok, **result}, None)
        if not ok:
            return
    for fd in fds["cg_compile"]:
        os.close(fd)
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    stdio = {k: fds[k] for k in ("stdin", "stdout", "stderr", "result")}
    stdio["status"] = status_w
    names = list(stdio) + [f"cg_run:{i}" for i in range(len(fds["cg_run"]))]
    go_fds = list(stdio.values()) + fds["cg_run"]
    limits = req["limits"]
    go_msg = {k: req[k] for k in ("limits", "env", "degraded", "inproc", "pyboot", "main", "argv")}
    go_msg["fds"] = names
    ru_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited_before = _run_delay_s(prog, prog)  # the program is blocked on its go: a still value
    t0 = time.monotonic()
    _send(go, go_msg, go_fds)
    for fd in go_fds:
        os.close(fd)
    go.close()
    finished = reaper.wait(prog, t0, float(limits["wall_time_s"]), waited_before)
    wall = time.monotonic() - t0
    reaper.kill_all_and_reap()
    status, ru = reaper.statuses[prog]
    os.set_blocking(status_r, False)
    try:
        marker = os.read(status_r, 16)
    except BlockingIOError:
        marker = b""
    os.close(status_r)
    total = resource.getrusage(resource.RUSAGE_CHILDREN)
    _send(
        ctrl,
        {
            "type": "exit",
            "status": status,
            "timed_out": not finished,
            "wall": wall,
            "cpu": _cpu_of(total) - _cpu_of(ru_before),
            "maxrss_kb": ru.ru_maxrss,
            "pycompile_error": marker == b"C",
            "setup_error": marker == b"E",
        },
    )


# ----------------------------------------------------------------------------------------------
# The zygote's loop
# ----------------------------------------------------------------------------------------------


def _wipe(path: str) -> None:
    """Remove everything below ``path`` (container mode: what the last run left)."""
    try:
        entries = os.scandir(path)
    except OSError:
        return
    with entries:
        for entry in entries:
            full = entry.path
            try:
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(full, 0o700)
                    _wipe(full)
                    os.rmdir(full)
                else:
                    os.unlink(full)
            except OSError:
                pass


def _remove_sysv_ipc() -> None:
    libc = _libc
    for table, ctl in (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl")):
        try:
            with open(f"/proc/sysvipc/{table}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            ident = int(line.split()[1])
            getattr(libc, ctl)(ident, 0, 0)  # IPC_RMID == 0


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    data, ancdata, _flags, _addr = sock.recvmsg(
        MAX_MSG, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
    )
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(payload) // 4
            fds.extend(struct.unpack(f"{n}i", payload[: n * 4]))
    if not data:
        return None, fds
    return json.loads(data), fds


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a missing optional module is not fatal
            pass


class _Spares:
    """The zygote's one pre-made run (init + program), replaced as soon as it is used."""

    def __init__(self, cfg: dict[str, Any], sock: socket.socket) -> None:
        self.cfg = cfg
        self.sock = sock
        self.namespaces = cfg["mode"] == "namespaces"
        self.own_pidns = (
            os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC) if self.namespaces else -1
        )
        self.spare: tuple[int, socket.socket] | None = None
        self.used: set[int] = set()

    def make(self) -> None:
        zs, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = -1
        if self.namespaces:
            unshare(CLONE_NEWPID)
        try:
            pid = os.fork()
        finally:
            if self.namespaces and pid != 0:
                setns(self.own_pidns, CLONE_NEWPID)  # the next fork needs a fresh one again
        if pid == 0:
            zs.close()
            self.sock.close()
            if self.own_pidns >= 0:
                os.close(self.own_pidns)
            warm_init(self.cfg, child)
        child.close()
        self.spare = (pid, zs)

    def take(self) -> tuple[int, socket.socket]:
        if self.spare is None or _exited(self.spare[0]):
            if self.spare is not None:
                self.spare[1].close()
            self.make()
        assert self.spare is not None
        spare, self.spare = self.spare, None
        self.used.add(spare[0])
        return spare


_container_reaper: _Reaper | None = None


def _container_run(
    cfg: dict[str, Any], sock: socket.socket, req: dict[str, Any], fds: list[int]
) -> None:
    """Container mode: the zygote (pid 1, deaf to its runs' signals) is the run's init itself."""
    global _container_reaper
    if _container_reaper is None:
        _container_reaper = _Reaper()
    reaper = _container_reaper
    reaper.statuses.clear()
    fdmap = _split_fds(req["fds"], [os.dup(fd) for fd in fds])
    ctrl = socket.socket(fileno=fdmap["control"])
    go_init, go_prog = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    prog = os.fork()
    if prog == 0:
        sock.close()
        ctrl.close()
        go_init.close()
        warm_program(cfg, go_prog)
    go_prog.close()
    try:
        _run_init(req, fdmap, cfg, ctrl, reaper, prog, go_init)
    except BaseException as exc:  # the sandbox failed, not the program
        _send(ctrl, {"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        reaper.kill_all_and_reap()
        # Best effort on this rare path: some of these were closed already.
        for key, value in fdmap.items():
            for fd in value if isinstance(value, list) else [value]:
                if key != "control":
                    try:
                        os.close(fd)
                    except OSError:
                        pass
    finally:
        reaper.kill_all_and_reap()
        go_init.close()
        ctrl.close()


def _exited(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done != 0


def serve(cfg: dict[str, Any], sock: socket.socket) -> None:
    namespaces = cfg["mode"] == "namespaces"
    set_name(b"llmgym-zygote")
    sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    _preload(cfg.get("preload", []))
    if namespaces:
        _drop_bounding_set()
    # Dispositions a program expects (Python's own startup ignores SIGPIPE and SIGXFSZ for it).
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    gc.collect()
    gc.freeze()  # keeps forked children from touching (and copying) the zygote's objects
    spares = _Spares(cfg, sock)
    if namespaces:
        spares.make()
    sock.send(json.dumps({"type": "ready", "pid": os.getpid()}).encode())
    while True:
        try:
            ready, _, _ = select.select([sock], [], [], 1.0)
        except InterruptedError:
            continue
        _reap_children()
        if not ready:
            continue
        try:
            req, fds = _recv(sock)
        except (ConnectionResetError, InterruptedError):
            req, fds = None, []
        if req is None:  # the parent is gone: take every run down with us
            os._exit(0)
        if len(fds) != len(req["fds"]):
            for fd in fds:
                os.close(fd)
            continue
        if not namespaces:  # one run at a time per container: clean up after the last one
            _wait_all_children()
            _wipe("/tmp")
            _wipe("/dev/shm")
            _remove_sysv_ipc()
        try:
            if namespaces:
                pid, zs = spares.take()
                _send(zs, req, fds)
                zs.close()
            else:
                _container_run(cfg, sock, req, fds)
        except OSError as exc:
            ctrl = socket.socket(fileno=os.dup(fds[req["fds"].index("control")]))
            _send(ctrl, {"type": "error", "detail": f"cannot start the run: {exc}"})
            ctrl.close()
        for fd in fds:
            os.close(fd)
        if namespaces:
            try:
                spares.make()
            except OSError:
                pass  # retried at the next request


def _drop_bounding_set() -> None:
    """Empty the capability bounding and ambient sets: nothing exec'd later can gain a capability."""
    for cap in range(_LAST_CAP + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_all_children() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    if cfg["mode"] == "namespaces":
        sock = socket.socket(fileno=cfg["fd"])
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(cfg["socket_path"])
    try:
        if cfg["mode"] == "namespaces":
            enter_sandbox(cfg)
        else:
            prctl(PR_SET_DUMPABLE, 0)
        serve(cfg, sock)
    except BaseException as exc:  # report why the zygote died
        try:
            sock.send(
                json.dumps({"type": "fatal", "detail": f"{type(exc).__name__}: {exc}"}).encode()
            )
        finally:
            os._exit(71)


if __name__ == "__main__":
    main(sys.argv)
