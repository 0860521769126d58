"""The sandbox's zygote: a single shipped program, kept whole in one file on purpose.

It is the program the sandbox runs inside its isolation, a warm interpreter that forks runs, not a
library (llmgym imports it only for two constants, ``DEFAULT_PATH`` and ``PYBOOT``). It is shipped
as a file (a script for the local backend, a file copied into the image beside ``_seccomp.py`` for
the docker backend) and imports nothing from llmgym. It stays one file: whatever it imports is
loaded before it forks and so sits in every run, and each extra module would be one more file to
ship into every container. The sections below are its parts.

Run as a plain script (``python -E -s _zygote.py CONFIG_JSON``) by the local backend, and as the
main process of each container by the docker backend (there it connects to a socket bind-mounted
into the container instead of inheriting one); it imports nothing from llmgym, only the standard
library and ``_seccomp`` beside it. Both backends run it the same way:

Processes of one run::

    parent (llmgym)  --socket-->  zygote Z (pid 1 of its own pid/mount/net/ipc/uts namespaces,
                                  a read-only root built from bind mounts, pre-imported stdlib)
      init spawner S (forked from Z once, SIGCHLD ignored), in a new pid namespace, spawns
      -> run init I: :func:`init_executable` (129 bytes that pause until killed; ``sleep``
         where it has no code for the machine), pid 1 of the run; with SIGCHLD ignored the
         kernel reaps the orphans it inherits; its death ends the run. S makes the next I
         while Z goes on, and closes a finished run's namespaces for Z (their teardown waits
         there, not in Z's loop)
      Z forks, into I's pid namespace
      -> program P (pid 2, Z's child: makes the run's mount/IPC/net namespaces, a private /tmp
         and /dev/shm, a fresh /proc; on its request writes the files, compiles, joins the
         run's cgroups, then takes rlimits, no-new-privs, no capabilities, uid 65534, seccomp,
         and execs the program or, for Python's fast path, runs the code in this warm
         interpreter)

Both are made ahead of the request (the "spare"), so a run's latency is what depends on it.
Never twice: a spare serves one request, and the next is made for the next. The local backend
starts several zygotes (``LocalSandbox(zygotes=)``), so that concurrent runs are forked in
parallel.
When P ends, Z reaps it (wait status and rusage for the parent) and kills I: the kernel then
kills every process left in the run's pid namespace, daemons and double forks included. Only
P is a copy of Z: every page a forked Python process writes is a copy-on-write fault, and the
copy of Z's page tables and their teardown cost as much again (see :class:`InitSpawner`).
Where no ``sleep`` binary exists, Z forks I itself, a Python loop that reaps (:func:`run_init`).
In a container (docker backend) Z runs as the container's root with only the capabilities this
needs (``SYS_ADMIN`` for namespaces and mounts, ``SETUID``/``SETGID``, ``SETPCAP``); each run
still gets new namespaces, a fresh /tmp and /dev/shm and uid 65534 without capabilities, so no
run sees what an earlier one left, and none can signal Z (another pid namespace, another uid).

Protocol: the parent sends one SOCK_SEQPACKET message per run: a JSON request plus file
descriptors (control socket first, then payload memfd, stdin, stdout, stderr, result channel,
status pipe, cgroup.procs files); Z forwards it to P without reading it. On the control socket
the parent then gets ``started`` from Z (with a pidfd of I, or of P in a container: the kill
switch), ``compiled`` and ``running`` from P before the program's code runs (``running`` brings
the start time and a pidfd of P), and ``exit`` from Z (or ``error``). The parent may send
``kill`` on the control socket: Z then kills the run (for a parent that cannot reach the run's
processes with a signal, e.g. a trainer in a pid namespace of its own driving a container).
"""

from __future__ import annotations

import _signal
import atexit  # noqa: F401 - the fast path's bootstrap uses these: import them once, here
import ctypes
import fcntl
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
import traceback  # noqa: F401
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

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
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
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
# Building the zygote's world
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


HOST_STASH = "/.llmgym-host"
"""Where host paths below /tmp or /dev/shm are bound in the zygote's root (read-only)."""
RUN_TMPFS = ("/tmp", "/dev/shm")


def _under_run_tmpfs(path: str) -> bool:
    return any(path.startswith(point + "/") for point in RUN_TMPFS)


def _minimal_dev(dev: str, source: str = "/dev") -> None:
    """A read-only /dev at ``dev`` holding a few safe device nodes (read-only binds of those in
    ``source``), the usual fd links and an empty ``shm`` (each run mounts its own there)."""
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for node in ("null", "zero", "full", "random", "urandom"):
        dst = f"{dev}/{node}"
        os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o666))
        mount(f"{source}/{node}", dst, None, MS_BIND)
        mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")
    mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def build_container_root() -> None:
    """In a container: its read-only image stays the root; hide what runs must not share.

    The container's /dev (its /dev/mqueue, /dev/pts, /dev/shm: writable, shared by every
    process of the container) is covered by a minimal one, /sys by an empty read-only tmpfs,
    the bind-mounted socket folder is unmounted, and /proc is this pid namespace's own. No
    ``pivot_root``: Docker's seccomp profile refuses it, and the image holds nothing else.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    _minimal_dev("/tmp/dev")
    mount("/tmp/dev", "/dev", None, MS_MOVE)
    mount("tmpfs", "/sys", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k")
    for point in ("/run/llmgym", "/run"):
        try:
            umount(point)
        except OSError:
            pass
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


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
        # Each run mounts a fresh /tmp and /dev/shm, which would hide what lies below them (a
        # virtual environment in /tmp, say): such paths wait under HOST_STASH and each run
        # binds them back into its own /tmp (_setup_run_namespaces).
        stash = HOST_STASH if _under_run_tmpfs(path) else ""
        _bind("/oldroot" + path, "/newroot" + stash + path)
    _write_etc("/newroot", cfg)
    _write_init("/newroot")
    # /dev: a few safe device nodes, each a read-only bind of the host's node.
    _minimal_dev("/newroot/dev", "/oldroot/dev")
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
    if cfg.get("socket_path"):
        build_container_root()
    else:
        build_root(cfg)


# ----------------------------------------------------------------------------------------------
# The program process
# ----------------------------------------------------------------------------------------------

PYBOOT = r'''
import atexit, builtins, gc, io, os, sys, types, traceback  # here, not in the function: a
# run's fork then skips eight imports' lookups (each touching, so copying, pages of the zygote)


def _llmgym_pyrun(path, status_fd):
    """Run ``path`` as ``python path`` would, reporting a SyntaxError on ``status_fd``."""
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
    n_before = len(sys.modules)
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
        # The program's modules are the newest entries: walk from the end (touching every
        # module would copy their pages, each a page fault in this forked process).
        new = []
        for name in reversed(sys.modules):
            if len(new) >= len(sys.modules) - n_before:
                break
            new.append(sys.modules[name])
        for mod in new:
            if getattr(mod, "__dict__", None) is not None:
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
_SECCOMP = _seccomp.Filter() if _seccomp.SUPPORTED else None
try:
    with open("/proc/sys/kernel/cap_last_cap") as _f:
        _LAST_CAP = int(_f.read())
except OSError:  # pragma: no cover
    _LAST_CAP = 40
_ZYGOTE_ENV = dict(os.environ)
_SIGCHLD = int(signal.SIGCHLD)
_SIG_DFL = int(signal.SIG_DFL)
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
    """In the program's process: wire stdio, apply limits, shed every privilege."""
    # stdio first, so that a failure below can still be told on fd 2 and the status fd 4.
    # Move the sources out of the way first: a source may sit on another one's target number.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in stdio]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(stdio), 1 << 20)
    os.setsid()
    prctl(PR_SET_DUMPABLE, 1)
    # The zygote set every other disposition as a program expects; only SIGCHLD was its own.
    # (_signal: the C module; signal's wrappers would build enums, page faults after a fork.)
    _signal.set_wakeup_fd(-1)
    _signal.signal(_SIGCHLD, _SIG_DFL)
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
    if env != _ZYGOTE_ENV:  # the zygote runs with the default environment already
        os.environ.clear()
        os.environ.update(env)
    _drop_privileges(cfg)
    if cfg["seccomp"] and _SECCOMP is not None:
        _SECCOMP.install()


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
# Messages
# ----------------------------------------------------------------------------------------------


def _send(sock: socket.socket, msg: dict[str, Any], fds: list[int] | None = None) -> None:
    _send_raw(sock, json.dumps(msg).encode(), fds)


def _send_raw(sock: socket.socket, data: bytes, fds: Sequence[int] | None = None) -> None:
    try:
        if fds:
            sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
            )
        else:
            sock.send(data)
    except OSError:
        pass  # the parent is gone or gave up on this run: nobody to tell


def _recv(sock: socket.socket) -> tuple[bytes, list[int], bool]:
    """One message: (data, file descriptors, whether any of it was cut off)."""
    data, ancdata, flags, _addr = sock.recvmsg(
        MAX_MSG, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
    )
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(payload) // 4
            fds.extend(struct.unpack(f"{n}i", payload[: n * 4]))
    return data, fds, bool(flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC))


def _unix(fd: int) -> socket.socket:
    """A socket object for ``fd``, one of the parent's SOCK_SEQPACKET Unix sockets (told, not
    asked: ``socket(fileno=fd)`` alone asks the kernel three questions)."""
    return socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fd)


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _set_comm(name: bytes) -> None:
    """The process name ``ps`` and ``perf`` show; cheaper than a ctypes prctl after a fork."""
    try:
        fd = os.open("/proc/self/comm", os.O_WRONLY)
        try:
            os.write(fd, name)
        finally:
            os.close(fd)
    except OSError:
        pass


# ----------------------------------------------------------------------------------------------
# Setting up a run, in the program's process before its code runs
# ----------------------------------------------------------------------------------------------


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


def _write_files(files: list[tuple[str, int, bytes]]) -> None:
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
        finally:
            os.close(fd)


def _setup_run_namespaces(cfg: dict[str, Any]) -> None:
    """The run's own mount, IPC and (unless shared) network namespaces, /tmp, /dev/shm, /proc."""
    flags = CLONE_NEWNS | CLONE_NEWIPC
    if not cfg["network"]:
        flags |= CLONE_NEWNET
    unshare(flags)
    # Sized for real when the request comes (a remount); the cgroup bounds it too.
    opts = "size=64m,mode=1777,nr_inodes=16k"
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in cfg["binds"]:
        if _under_run_tmpfs(path) and os.path.lexists(HOST_STASH + path):
            _rebind_host_path(HOST_STASH + path, path)


def _rebind_host_path(stash: str, path: str) -> None:
    """Show a stashed host path at its own place in this run's /tmp or /dev/shm, read-only.

    The folders made on the way belong to root, and /tmp is sticky: the program can neither
    remove nor rename them.
    """
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    if os.path.islink(stash):
        os.symlink(os.readlink(stash), path)
        return
    if os.path.isdir(stash):
        os.mkdir(path, 0o755)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
    # A bind of a read-only mount is read-only too (and MS_REC keeps its read-only submounts).
    mount(stash, path, None, MS_BIND | MS_REC)


def _resize_tmp(size_mb: int) -> None:
    opts = f"size={int(size_mb)}m,mode=1777,nr_inodes=16k"
    for point in ("/tmp", "/dev/shm"):
        mount(None, point, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, opts)


class _Reaper:
    """Reaps every child of this process; wakes up on SIGCHLD through a pipe."""

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


def _compile_phase(
    req: dict[str, Any], cfg: dict[str, Any], env: dict[str, str], cg_fds: list[int]
) -> dict[str, Any]:
    """Run the compiler (in its own cgroup, with its own limits) to its end or its deadline."""
    limits = req["compile_limits"]
    degraded = bool(req["degraded"])
    reaper = _Reaper()
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
    # Nothing of the compile step outlives it: the compiler and what it started run as one
    # session (become_program), and any that left it is in the compile cgroup the parent kills.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while True:
        try:
            done, wstatus, ru = os.wait4(-1, 0)
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


def _run_delay_s() -> float:
    """Seconds this thread spent runnable but waiting for a CPU (0 where the kernel can't say)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


# ----------------------------------------------------------------------------------------------
# The run's two processes
# ----------------------------------------------------------------------------------------------


def run_init() -> None:
    """pid 1 of a run's pid namespace: reaps orphans until it is killed.

    Its death is the run's end: the kernel then kills every process left in the namespace. It
    runs as little Python as it can (every page it writes is a copy-on-write fault), and it
    ignores what the run's processes send it (a namespace's init only gets signals it handles).
    """
    _set_comm(b"llmgym-init")
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 1 << 20)
    prctl(PR_SET_DUMPABLE, 0)  # its /proc files stay root's, even to a program of its uid
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:  # no child yet, or none left: sleep until the next one ends
            signal.sigwait({signal.SIGCHLD})
        except InterruptedError:
            pass


_SLEEP = ("/usr/bin/sleep", "/bin/sleep")
_NULL_STDIO = [(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_RDWR, 0) for fd in (0, 1, 2)]
_FOREVER = "2147483647"  # seconds: 68 years, a number every sleep(1) accepts

INIT_PATH = "/.llmgym/llmgym-init"
"""Where :func:`build_root` puts the run's init, :func:`init_executable`, in the zygote's root."""

_PAUSE_LOOP = {
    # machine: (ELF e_machine, code). The whole program: pause(); jump back to it. Nothing but a
    # signal that kills it ends it (SIGCHLD, the only one its children send, is ignored).
    "x86_64": (62, bytes.fromhex("b8220000000f05ebf7")),  # mov eax, 34; syscall; jmp -9
}


def init_executable(machine: str) -> bytes | None:
    """A static executable of 129 bytes that sleeps until killed: each run's init.

    ``sleep`` does the same job, but it is linked dynamically: every run's init would map and
    relocate libc before sleeping, about 0.4 ms of CPU per run. This one is an ELF header, one
    loadable segment and the three instructions of :data:`_PAUSE_LOOP`; it touches no memory
    and makes no syscall but ``pause``. ``None`` on machines it is not written for (``sleep``
    is used there).
    """
    if machine not in _PAUSE_LOOP:
        return None
    e_machine, code = _PAUSE_LOOP[machine]
    base, ehsize, phsize = 0x400000, 64, 56
    size = ehsize + phsize + len(code)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)  # 64-bit, little-endian, ELF v1, SysV
    entry = base + ehsize + phsize  # the code follows the one program header
    # e_type ET_EXEC, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize,
    # e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
    fields = (2, e_machine, 1, entry, ehsize, 0, 0, ehsize, phsize, 1, 0, 0, 0)
    header = ident + struct.pack("<HHIQQQIHHHHHH", *fields)
    # p_type PT_LOAD, p_flags R+X, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align
    segment = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)
    return header + segment + code


def _write_init(root: str) -> None:
    """Put :func:`init_executable` at ``root + INIT_PATH`` where this machine has one."""
    elf = init_executable(os.uname().machine)
    if elf is None:
        return
    os.makedirs(root + os.path.dirname(INIT_PATH), mode=0o755, exist_ok=True)
    fd = os.open(root + INIT_PATH, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o555)
    try:
        os.write(fd, elf)
    finally:
        os.close(fd)


class InitSpawner:
    """Makes each run's init without copying the zygote: a helper that spawns ``sleep`` (or
    :func:`init_executable`, which sleeps as well at a fraction of the cost).

    A namespace's pid 1 must reap the orphans reparented to it; a process whose SIGCHLD is
    ignored has the kernel reap its children for it, and that disposition survives ``exec``.
    So the run's init can be a plain ``sleep`` spawned with SIGCHLD ignored: it sleeps, the
    kernel reaps, and its death (SIGKILL from the zygote or the parent) ends the namespace.
    The zygote itself cannot ignore SIGCHLD (it needs its programs' wait statuses), so the
    spawning is done by this helper, forked from the zygote once: it unshares a new pid
    namespace and spawns (``posix_spawn``: vfork, then exec, no page tables copied) ``sleep`` in
    it, and hands back a pidfd of it. A Python init forked from the zygote costs a copy of the
    zygote's page tables, copy-on-write faults on both sides and the teardown of all of it.
    """

    def __init__(self, sleep: str, close: Sequence[int]) -> None:
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.asked = False  # an init asked for and not taken yet
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _close_all(close)
            self._serve(child, sleep)
        child.close()

    def spawn(self) -> tuple[int, int, int]:
        """(pid, pidfd, pid namespace fd) of a new init, pid 1 of a new pid namespace.

        The next one is asked for at once: the helper spawns it while the zygote goes on, so
        the zygote's loop seldom waits for it (one init is always made ahead, asleep)."""
        if not self.asked:
            self.sock.send(b"i")
        self.asked = False
        data, fds, _ = _recv(self.sock)
        if not data or data.startswith(b"E") or len(fds) != 2:
            _close_all(fds)
            raise OSError(f"the init spawner failed: {data[1:].decode(errors='replace')}")
        try:
            self.sock.send(b"i")
            self.asked = True
        except OSError:  # the helper is gone: the next spawn says so
            pass
        return int(data), fds[0], fds[1]

    def release(self, fds: Sequence[int]) -> bool:
        """Hand a finished run's namespaces to the helper, which closes them: their teardown
        (unmounting, freeing the network stack) then waits in the helper, not in the zygote's
        loop. False if it could not take them (the caller closes them)."""
        try:
            self.sock.sendmsg(
                [b"c"],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))],
                socket.MSG_DONTWAIT,
            )
        except OSError:
            return False
        _close_all(fds)
        return True

    def close(self) -> None:
        self.sock.close()

    @staticmethod
    def _serve(sock: socket.socket, sleep: str) -> None:
        _set_comm(b"llmgym-spawner")
        _signal.set_wakeup_fd(-1)
        _signal.signal(_SIGCHLD, int(signal.SIG_IGN))
        own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        argv = [os.path.basename(sleep), _FOREVER]
        while True:
            try:
                data, fds, _ = _recv(sock)
            except InterruptedError:
                continue
            except OSError:
                os._exit(0)
            if not data:
                os._exit(0)
            if data == b"c":  # a finished run's namespaces: dropping them tears them down
                _close_all(fds)
                continue
            _close_all(fds)
            try:
                unshare(CLONE_NEWPID)
                try:
                    pid = os.posix_spawn(sleep, argv, {}, setsid=True, file_actions=_NULL_STDIO)
                    ns = os.open("/proc/self/ns/pid_for_children", os.O_RDONLY | os.O_CLOEXEC)
                finally:
                    setns(own, CLONE_NEWPID)
                fd = os.pidfd_open(pid)
                try:
                    _send_raw(sock, str(pid).encode(), [fd, ns])
                finally:
                    os.close(fd)
                    os.close(ns)
            except OSError as exc:
                _send_raw(sock, b"E" + str(exc).encode())


_HELD_NS = ("mnt", "net", "ipc")


def spare_program(cfg: dict[str, Any], sock: socket.socket) -> None:
    """The program's process of the next run, made ahead. Never returns.

    Pid 2 of the run's pid namespace (the zygote forked it there), it makes the run's mount,
    IPC and network namespaces, mounts /tmp, /dev/shm and /proc, then waits for its request.
    """
    _set_comm(b"llmgym-run")
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)
    try:
        if cfg.get("oom_score_adj"):  # see Zygote.__init__
            write_file("/proc/self/oom_score_adj", "0")
        _setup_run_namespaces(cfg)
        # The zygote keeps the run's namespaces alive past this process: tearing them down (the
        # mounts, the network stack) then happens after the run is reported, not before.
        held = [os.open(f"/proc/self/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC) for ns in _HELD_NS]
        _send_raw(sock, b"ready", held)
        _close_all(held)
        data, fds, truncated = _recv(sock)
    except OSError:
        os._exit(0)
    sock.close()
    if not data or truncated:
        _close_all(fds)
        os._exit(0)
    program(cfg, data, fds)


def program(cfg: dict[str, Any], data: bytes, fds: list[int]) -> None:
    """One run's program, from its request to its end: never returns.

    Until it becomes the program (``become_program``) this process is the sandbox's own and
    trusted: it sizes /tmp, writes the files, runs the compile step, joins the run's cgroups
    and tells the parent it starts (``running``); then it sheds every privilege and runs code.
    """
    ctrl: socket.socket | None = None
    try:
        req = json.loads(data)
        fdmap = _split_fds(req["fds"], fds)
    except (ValueError, KeyError, TypeError):
        if fds:  # the control socket comes first
            _send(_unix(fds[0]), {"type": "error", "detail": "malformed request"})
        os._exit(70)
    try:
        ctrl = _unix(fdmap["control"])
        _resize_tmp(req["tmp_mb"])
        _write_files(_read_payload(fdmap["payload"]))
        os.close(fdmap["payload"])
        env = req["env"]
        if req.get("compile_argv") is not None:
            result = _compile_phase(req, cfg, env, fdmap["cg_compile"])
            status = result["status"]
            ok = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            ok = ok and not result["timed_out"]
            _send(ctrl, {"type": "compiled", "ok": ok, **result})
            if not ok:
                os._exit(0)
        _close_all(fdmap["cg_compile"])
        _join_cgroup(fdmap["cg_run"])
        me = os.pidfd_open(os.getpid())
        running = {"type": "running", "t": time.monotonic(), "waited": _run_delay_s()}
        _send(ctrl, running, [me])
        os.close(me)
        ctrl.close()
        ctrl = None
    except BaseException as exc:  # the sandbox failed, not the program
        if ctrl is not None:
            _send(ctrl, {"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    try:
        stdio = [fdmap[k] for k in ("stdin", "stdout", "stderr", "result", "status")]
        become_program(cfg, req["limits"], stdio, env, req["degraded"])
        if req["inproc"]:
            _boot_ns["_llmgym_pyrun"]("/tmp/" + req["main"], 4)
        if not req["pyboot"]:
            os.close(4)
        _exec(req["argv"], env)
    except BaseException as exc:
        try:
            os.write(2, f"sandbox: program setup failed: {exc}\n".encode())
            os.write(4, b"E")
        except OSError:
            pass
    os._exit(127)


# ----------------------------------------------------------------------------------------------
# The zygote's loop
# ----------------------------------------------------------------------------------------------


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a missing optional module is not fatal
            pass


def _preload_sources(fd: int) -> None:
    """Run the modules given as source (``{name: source}`` JSON on ``fd``) and register them
    in ``sys.modules``: a run's ``import name`` then finds them warm. Trusted code, like the
    ``preload`` modules: it runs here, before any privilege is dropped. A failure is fatal
    (the parent asked for these modules by name)."""
    with os.fdopen(fd, "rb") as f:
        sources = json.loads(f.read())
    for name, source in sources.items():
        module = types.ModuleType(name)
        module.__file__ = f"<preloaded {name}>"
        sys.modules[name] = module
        try:
            exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)
        except BaseException as exc:
            del sys.modules[name]
            raise RuntimeError(f"preloading the module {name!r} failed: {exc!r}") from None


_STARTED = json.dumps({"type": "started"}).encode()


class _Run:
    """A run in flight, seen from the zygote: its program, its kill switch, its control socket."""

    __slots__ = ("ctrl", "held", "init", "kill_fd", "listening", "prog", "prog_done")

    def __init__(self, prog: int, init: int | None, kill_fd: int, ctrl: int) -> None:
        self.prog, self.init, self.kill_fd, self.ctrl = prog, init, kill_fd, ctrl
        self.prog_done = False
        self.listening = ctrl >= 0  # for the parent's ``kill``, until it closes its end
        self.held: list[int] = []  # the run's namespaces, released once it is reported


class _Spare:
    __slots__ = ("init", "init_fd", "prog", "sock")

    def __init__(self, init: int | None, init_fd: int, prog: int, sock: socket.socket) -> None:
        # init: its pid when this process is its parent (and reaps it), else None.
        self.init, self.init_fd, self.prog, self.sock = init, init_fd, prog, sock


class Zygote:
    """The zygote's state: runs in flight, the spare run, the SIGCHLD pipe.

    Each run is an init (pid 1 of a new pid namespace, see :func:`run_init`) and a program
    forked into that namespace by the zygote (:func:`spare_program`), both made ahead of the
    request. The program is the zygote's child, so the zygote reaps it, reports its wait status
    and rusage to the parent, and kills the init: the run's end.
    """

    def __init__(self, cfg: dict[str, Any], sock: socket.socket) -> None:
        self.cfg = cfg
        self.sock = sock
        # The programs inherit the zygote's OOM score adjustment (the parent's). Only a negative
        # one is raised to 0 (raising needs no privilege): the OOM killer of a run's memory limit
        # must be able to choose the program. A positive one stays (lowering it would need
        # CAP_SYS_RESOURCE, which a container's root often lacks), and costs nothing per run.
        try:
            with open("/proc/self/oom_score_adj") as f:
                cfg["oom_score_adj"] = not cfg["userns"] and int(f.read()) < 0
        except (OSError, ValueError):
            cfg["oom_score_adj"] = False
        self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self.runs: dict[int, _Run] = {}  # by program pid
        self.inits: dict[int, _Run] = {}  # by init pid, until the init is reaped
        self.spare: _Spare | None = None
        self.spawner: InitSpawner | None = None
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_w = wake_w
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def _new_init(self) -> tuple[int, int, int, bool]:
        """A new run's init: (pid, pidfd, its pid namespace, whether this process reaps it)."""
        if self.spawner is not None:
            try:
                pid, fd, ns = self.spawner.spawn()
                return pid, fd, ns, False
            except OSError as exc:
                os.write(2, f"llmgym zygote: {exc}; forking inits from now on\n".encode())
                self.spawner.close()
                self.spawner = None
        unshare(CLONE_NEWPID)
        init = ns = -1
        try:
            init = os.fork()
            if init == 0:
                run_init()
            # Ours, not /proc/<init>/ns/pid: the init soon makes its /proc files unreadable.
            ns = os.open("/proc/self/ns/pid_for_children", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            if init != 0:
                setns(self.own_pidns, CLONE_NEWPID)  # the next fork needs a fresh one again
        return init, os.pidfd_open(init), ns, True

    def make_spare(self) -> None:
        init, init_fd, ns, own_init = self._new_init()
        zs, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        prog = -1
        try:
            try:
                setns(ns, CLONE_NEWPID)
            finally:
                os.close(ns)
            try:
                prog = os.fork()
                if prog == 0:
                    zs.close()
                    spare_program(self.cfg, child)
            finally:
                if prog != 0:
                    setns(self.own_pidns, CLONE_NEWPID)
        except OSError:
            signal.pidfd_send_signal(init_fd, signal.SIGKILL)
            os.close(init_fd)
            zs.close()
            raise
        finally:
            child.close()
        self.spare = _Spare(init if own_init else None, init_fd, prog, zs)

    def start_in_namespaces(self, data: bytes, fds: list[int]) -> None:
        if self.spare is None:
            self.make_spare()
        spare = self.spare
        assert spare is not None
        self.spare = None
        ctrl = fds[0]
        run = _Run(spare.prog, spare.init, spare.init_fd, ctrl)
        self.runs[spare.prog] = run
        if spare.init is not None:
            self.inits[spare.init] = run
        _send_raw(_unix(os.dup(ctrl)), _STARTED, [spare.init_fd])
        try:
            ready, run.held, _ = _recv(spare.sock)  # sent when its namespaces were made
            if ready != b"ready":
                raise OSError("the spare program ended before its run")
            spare.sock.sendmsg(
                [data],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))],
            )
        except OSError as exc:  # the spare program is gone: end this run, say why
            _send(_unix(os.dup(ctrl)), {"type": "error", "detail": str(exc)})
            signal.pidfd_send_signal(spare.init_fd, signal.SIGKILL)
        finally:
            spare.sock.close()
        _close_all(fds[1:])

    def reap(self) -> None:
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run = self.runs.pop(pid, None)
            if run is not None:
                self._program_ended(run, status, ru)
                continue
            run = self.inits.pop(pid, None)
            if run is not None:
                run.init = None
                self._release(run)
                continue
            spare = self.spare
            if spare is not None and pid in (spare.init, spare.prog):
                self.spare = None
                if pid == spare.prog:  # a spare that died before its run: end its namespace
                    signal.pidfd_send_signal(spare.init_fd, signal.SIGKILL)
                    if spare.init is not None:  # still to reap: close its pidfd then
                        dead = _Run(spare.prog, spare.init, spare.init_fd, -1)
                        dead.prog_done = True
                        self.inits[spare.init] = dead
                    else:
                        os.close(spare.init_fd)
                else:
                    os.close(spare.init_fd)
                spare.sock.close()
                continue
            if self.spawner is not None and pid == self.spawner.pid:
                os.write(2, b"llmgym zygote: the init spawner died; forking inits from now on\n")
                self.spawner.close()
                self.spawner = None

    def _program_ended(self, run: _Run, status: int, ru: Any) -> None:
        run.prog_done = True
        try:  # the run's end: every process left in its namespace dies with its init
            signal.pidfd_send_signal(run.kill_fd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        report = {
            "type": "exit",
            "status": status,
            "cpu": _cpu_of(ru),
            "maxrss_kb": ru.ru_maxrss,
            "t": time.monotonic(),
        }
        _send(_unix(run.ctrl), report)  # closed with the socket object
        run.ctrl = -1
        if run.held and not (self.spawner is not None and self.spawner.release(run.held)):
            _close_all(run.held)
        run.held = []
        self._release(run)

    def _release(self, run: _Run) -> None:
        """Close the kill switch once neither the program nor the init needs it any more."""
        if run.prog_done and run.init is None and run.kill_fd >= 0:
            os.close(run.kill_fd)
            run.kill_fd = -1

    def _listened(self) -> dict[int, _Run]:
        """Control sockets of runs in flight that the parent may still send ``kill`` on."""
        return {r.ctrl: r for r in self.runs.values() if r.listening and r.ctrl >= 0}

    def _heard(self, run: _Run) -> None:
        """A message from the parent on a run's control socket: ``kill`` it, or its end."""
        try:
            data = os.read(run.ctrl, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the parent closed its end: nothing more will come
            run.listening = False
            return
        if b"kill" in data and run.kill_fd >= 0:
            try:
                signal.pidfd_send_signal(run.kill_fd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def serve(self) -> None:
        sleep = next((p for p in (INIT_PATH, *_SLEEP) if os.access(p, os.X_OK)), None)
        # Only as root: the init then belongs to root, out of reach of the programs (uid
        # 65534). In a user namespace it would share their uid and stay dumpable.
        root = not self.cfg["userns"]
        if sleep is not None and root and self.cfg.get("init_spawner", True):
            own = [self.sock.fileno(), self.wake_r, self._wake_w, self.own_pidns]
            self.spawner = InitSpawner(sleep, own)
        self.make_spare()
        self.sock.send(json.dumps({"type": "ready", "pid": os.getpid()}).encode())
        sock_fd = self.sock.fileno()
        while True:
            listened = self._listened()
            try:
                ready, _, _ = select.select([sock_fd, self.wake_r, *listened], [], [])
            except InterruptedError:
                continue
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            for fd in ready:
                if fd in listened:
                    self._heard(listened[fd])
            self.reap()
            if sock_fd not in ready:
                continue
            try:
                data, fds, truncated = _recv(self.sock)
            except InterruptedError:
                continue
            except OSError:
                data, fds, truncated = b"", [], False
            if not data and not fds:  # the parent is gone: take every run down with us
                os._exit(0)
            if truncated or not data or not fds:
                if fds:
                    detail = {"type": "error", "detail": "request cut off (too many files?)"}
                    _send(_unix(os.dup(fds[0])), detail)
                _close_all(fds)
                continue
            try:
                self.start_in_namespaces(data, fds)
            except OSError as exc:
                ctrl = _unix(os.dup(fds[0]))
                _send(ctrl, {"type": "error", "detail": f"cannot start the run: {exc}"})
                ctrl.close()
                if fds[0] not in (r.ctrl for r in self.runs.values()):
                    _close_all(fds)
            try:
                self.make_spare()
            except OSError:
                pass  # tried again at the next request


def _cpu_of(ru: Any) -> float:
    return float(ru.ru_utime + ru.ru_stime)


def serve(cfg: dict[str, Any], sock: socket.socket) -> None:
    set_name(b"llmgym-zygote")
    sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    _preload(cfg.get("preload", []))
    if cfg.get("preload_sources_fd") is not None:
        _preload_sources(int(cfg["preload_sources_fd"]))
    _drop_bounding_set()
    # Dispositions a program expects (Python's own startup ignores SIGPIPE and SIGXFSZ for it).
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    zygote = Zygote(cfg, sock)
    gc.collect()
    _release_free_memory()
    gc.freeze()  # keeps forked children from touching (and copying) the zygote's objects
    zygote.serve()


def _release_free_memory() -> None:
    """Give the C heap's free memory back to the kernel (glibc's ``malloc_trim``).

    Starting up and preloading (compiling ``preload_sources`` above all) leave megabytes
    freed but still mapped; every fork copies the page-table entries of whatever is mapped
    and every exit tears them down, so what is not needed should not be there.
    """
    trim = getattr(_libc, "malloc_trim", None)  # glibc only
    if trim is not None:
        try:
            trim(0)
        except (OSError, ctypes.ArgumentError):
            pass


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


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    if cfg.get("socket_path"):  # in a container: the parent's socket is bind-mounted in
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(cfg["socket_path"])
    else:
        sock = socket.socket(fileno=cfg["fd"])
    try:
        enter_sandbox(cfg)
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
