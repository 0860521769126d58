"""A seccomp-BPF deny-list for sandboxed programs, built with the standard library alone.

This module is also loaded as a plain script by the sandbox's zygote (no llmgym import), so it
only uses ctypes, os, platform and struct. ``install()`` must run after ``PR_SET_NO_NEW_PRIVS``
(or with CAP_SYS_ADMIN) and applies to the calling thread and everything it forks or execs.

Denied with ``EPERM`` (the program sees an ordinary failure): ptrace and cross-process memory
access, mount and every new-mount-API call, pivot_root/chroot, namespace creation or entry
(``unshare``, ``setns`` and ``clone`` with any ``CLONE_NEW*`` flag), kernel modules, kexec,
reboot, swap, accounting, quotas, BPF, perf events, userfaultfd, keyrings, handle-based opens,
io_uring (its operations bypass seccomp), clock and hostname changes, kernel log, legacy
syscalls, and sockets of any family other than Unix, IPv4 and IPv6 (no AF_VSOCK to a hypervisor,
no netlink, packet or AF_ALG). ``clone3`` answers ``ENOSYS`` so libc falls back to ``clone``,
whose flags the filter can inspect. Foreign ABIs (i386/x32 on x86_64) kill the process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Any

__all__ = ["SUPPORTED", "Filter", "install", "supported_reason"]

# struct sock_filter codes (linux/filter.h)
_LD_W_ABS = 0x20
_JMP_JEQ_K = 0x15
_JMP_JGE_K = 0x35
_JMP_JSET_K = 0x45
_RET_K = 0x06
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
# offsets in struct seccomp_data
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16

_CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
_ALLOWED_SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6

# Syscall numbers: x86_64 from asm/unistd_64.h; aarch64 from asm-generic/unistd.h.
_X86_64: dict[str, Any] = {
    "arch": 0xC000003E,
    "deny": {
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "pidfd_getfd": 438,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "move_mount": 429,
        "open_tree": 428,
        "mount_setattr": 442,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "iopl": 172,
        "ioperm": 173,
        "modify_ldt": 154,
        "acct": 163,
        "quotactl": 179,
        "quotactl_fd": 443,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "lookup_dcookie": 212,
        "syslog": 103,
        "settimeofday": 164,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "adjtimex": 159,
        "sethostname": 170,
        "setdomainname": 171,
        "vhangup": 153,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "nfsservctl": 180,
        "uselib": 134,
        "sysfs": 139,
        "_sysctl": 156,
        "fanotify_init": 300,
        "create_module": 174,
        "get_kernel_syms": 177,
        "query_module": 178,
    },
    "clone": 56,
    "clone3": 435,
    "socket": 41,
    "socketpair": 53,
    "x32_bit": 0x40000000,
}
_AARCH64: dict[str, Any] = {
    "arch": 0xC00000B7,
    "deny": {
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "pidfd_getfd": 438,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "unshare": 97,
        "setns": 268,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "move_mount": 429,
        "open_tree": 428,
        "mount_setattr": 442,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "acct": 89,
        "quotactl": 60,
        "quotactl_fd": 443,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "lookup_dcookie": 18,
        "syslog": 116,
        "settimeofday": 170,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "adjtimex": 171,
        "sethostname": 161,
        "setdomainname": 162,
        "vhangup": 58,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "nfsservctl": 42,
        "fanotify_init": 262,
    },
    "clone": 220,
    "clone3": 435,
    "socket": 198,
    "socketpair": 199,
    "x32_bit": None,
}
_TABLES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}
_TABLE = _TABLES.get(platform.machine().lower())
SUPPORTED = _TABLE is not None and platform.system() == "Linux"


def supported_reason() -> str:
    """Why the filter is unavailable here, or ``""``."""
    if SUPPORTED:
        return ""
    return (
        f"no syscall table for {platform.system()}/{platform.machine()} (x86_64 and aarch64 only)"
    )


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _deny_tree(nrs: list[int], leaf_deny: bytes, leaf_allow: bytes) -> list[bytes]:
    """Instructions that return ``leaf_deny`` when the accumulator (the syscall number) is one
    of the sorted ``nrs`` and ``leaf_allow`` otherwise: a binary search, so that a syscall is
    decided in a handful of comparisons, not one per denied syscall. The kernel runs the filter
    once per syscall number when it is installed (to cache the syscalls always allowed) and on
    every syscall it cannot cache, so its length is paid per run."""
    if len(nrs) <= 3:
        out: list[bytes] = []
        for i, nr in enumerate(nrs):
            # On a match, jump to the deny leaf after the remaining comparisons and the allow.
            out.append(_ins(_JMP_JEQ_K, len(nrs) - i, 0, nr))
        return out + [leaf_allow, leaf_deny]
    mid = len(nrs) // 2
    low = _deny_tree(nrs[:mid], leaf_deny, leaf_allow)
    high = _deny_tree(nrs[mid:], leaf_deny, leaf_allow)
    if len(low) > 255:  # pragma: no cover - a jump offset is 8 bits; the tables are far smaller
        raise ValueError("seccomp deny list too long for one jump")
    return [_ins(_JMP_JGE_K, len(low), 0, nrs[mid]), *low, *high]


def build_filter() -> list[bytes]:
    """The BPF program as a list of 8-byte ``sock_filter`` instructions."""
    assert _TABLE is not None, supported_reason()
    eperm = _SECCOMP_RET_ERRNO | errno.EPERM
    prog: list[bytes] = [
        _ins(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _ins(_JMP_JEQ_K, 1, 0, _TABLE["arch"]),
        _ins(_RET_K, 0, 0, _SECCOMP_RET_KILL_PROCESS),
        _ins(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if _TABLE["x32_bit"]:
        prog += [
            _ins(_JMP_JGE_K, 0, 1, _TABLE["x32_bit"]),
            _ins(_RET_K, 0, 0, _SECCOMP_RET_KILL_PROCESS),
        ]
    prog += [
        _ins(_JMP_JEQ_K, 0, 1, _TABLE["clone3"]),
        _ins(_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    # clone: deny any CLONE_NEW* flag in arg0 (x86_64 and aarch64 both pass flags first).
    prog += [
        _ins(_JMP_JEQ_K, 0, 4, _TABLE["clone"]),
        _ins(_LD_W_ABS, 0, 0, _OFF_ARG0_LO),
        _ins(_JMP_JSET_K, 0, 1, _CLONE_NEW_FLAGS),
        _ins(_RET_K, 0, 0, eperm),
        _ins(_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    # socket / socketpair: allow only the listed address families in arg0.
    fams = _ALLOWED_SOCKET_FAMILIES
    for nr in (_TABLE["socket"], _TABLE["socketpair"]):
        body = [_ins(_LD_W_ABS, 0, 0, _OFF_ARG0_LO)]
        for i, fam in enumerate(fams):
            # jump to the ALLOW at the end of this block on a match
            body.append(_ins(_JMP_JEQ_K, len(fams) - i, 0, fam))
        body += [
            _ins(_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
            _ins(_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        ]
        prog.append(_ins(_JMP_JEQ_K, 0, len(body), nr))
        prog += body
        # reload nr for the next comparison (body clobbered the accumulator)
        prog.append(_ins(_LD_W_ABS, 0, 0, _OFF_NR))
    deny = sorted(set(_TABLE["deny"].values()))
    prog += _deny_tree(deny, _ins(_RET_K, 0, 0, eperm), _ins(_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]


class Filter:
    """A filter made ready to install: the BPF program and its ``sock_fprog``, built once
    (in the zygote) so that installing it in a freshly forked program is one prctl call."""

    def __init__(self, prog: bytes | None = None) -> None:
        if prog is None:
            prog = b"".join(build_filter())
        self._buf = ctypes.create_string_buffer(prog, len(prog))
        self._fprog = _SockFprog(len(prog) // 8, ctypes.addressof(self._buf))
        self._ref = ctypes.byref(self._fprog)

    def install(self) -> None:
        """Install it on the calling thread; it then applies to everything it forks or execs."""
        if _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._ref, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp filter: {os.strerror(err)}")


def install(prog: bytes | None = None) -> None:
    """Install the filter (``build_filter()`` joined, by default) on the calling thread.

    It then applies to everything the thread later forks or execs.
    """
    Filter(prog).install()
