"""The descriptors a run is handed: memfds holding its files and stdin, pipes sized for its
output (the parent's side; see :mod:`llmgym.sandbox.supervisor`)."""

from __future__ import annotations

import fcntl
import json
import os
import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["close_fds", "fit_pipe", "memfd", "payload_fd", "stdin_fd"]


def memfd(name: str, data: bytes) -> int:
    """A memfd holding ``data``, its offset at the start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def payload_fd(files: list[tuple[str, bytes, int]]) -> int:
    """A memfd holding the run's files: a JSON header (path, mode, offset, size of each) after
    its 8-byte length, then their contents."""
    header: dict[str, list[Any]] = {"files": []}
    offset = 0
    for path, data, mode in files:
        header["files"].append([path, mode, offset, len(data)])
        offset += len(data)
    head = json.dumps(header).encode()
    return memfd(
        "llmgym-payload", b"".join([struct.pack("<Q", len(head)), head, *(d for _, d, _ in files)])
    )


def stdin_fd(data: bytes) -> int:
    """A read-only, sealed memfd holding ``data`` (a pipe would need a writer thread); for no
    data, ``/dev/null`` opened for this run alone (nothing one run does to it reaches another)."""
    if not data:
        return os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
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
_PIPE_REFUSED: set[int] = set()
"""Pipe sizes the kernel refused this process (EPERM: past ``pipe-max-size`` without
CAP_SYS_RESOURCE); not asked for again, three syscalls a run saved."""


def fit_pipe(fd: int, cap: int) -> None:
    """Make the pipe hold ``cap + 1`` bytes where the kernel allows (up to 2 MiB).

    A program that passes its output cap then does so without waiting for this process to
    read: on a busy host a flood is still recognized as one, not mistaken for a timeout.
    Best effort: unprivileged users may not grow pipes past ``/proc/sys/fs/pipe-max-size``.
    """
    if 1 << 16 <= cap < _PIPE_MAX and cap + 1 not in _PIPE_REFUSED:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, cap + 1)
        except PermissionError:
            _PIPE_REFUSED.add(cap + 1)
        except OSError:
            pass


def close_fds(fds: Sequence[int]) -> None:
    """Close each of ``fds``, those already closed included."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
