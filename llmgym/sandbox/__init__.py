"""Secure, fast, truthfully measured execution of untrusted programs.

>>> from llmgym.sandbox import get_sandbox, Limits
>>> sb = get_sandbox("local")                                    # doctest: +SKIP
>>> res = sb.run(code="print(1)", limits=Limits(wall_time_s=5, memory_mb=256))  # doctest: +SKIP
>>> res.status, res.stdout                                       # doctest: +SKIP
('ok', '1\\n')

Backends: ``"local"`` (default; Linux namespaces, no daemon), ``"docker"`` (a pool of warm
hardened containers) and ``"ray"`` (the local backend on a Ray cluster's CPU workers). All three
share the API: ``run(code=None, *, command=None, files=None, stdin="", language="python",
limits=Limits(), compile_limits=None, env=None) -> ExecResult``, ``run_many`` and ``arun``.

What it covers
--------------
- Isolation, local backend: every run gets its own pid, mount, network, IPC namespaces (uts and,
  when not root, user namespaces are shared with the zygote); a read-only root holding only
  /usr, /lib*, /bin, the Python installation (a virtual environment's with it) and what you
  add with ``ro_paths`` (those below the host's /tmp or /dev/shm reappear, read-only, in each
  run's own); a fresh private /tmp and /dev/shm (tmpfs, bounded by ``memory_mb``), a fresh
  /proc that shows the run's processes only; a cleared environment; uid 65534, no capabilities, no-new-privs; a
  seccomp filter (ptrace, mount, namespaces, kernel modules, bpf, perf, io_uring, keyrings,
  AF_VSOCK/netlink/packet sockets... see ``_seccomp``); rlimits (CPU, file size, core, fds);
  cgroups v1 or v2 for memory, process count and CPU accounting. No network unless
  ``Limits(network=True)``: not even loopback is shared between runs.
- Every process of a run is gone when ``run`` returns: the run is a pid namespace whose init
  exits last, so daemons, double forks and ``kill -1`` cannot outlive or escape it.
- Truthful facts: ``status`` comes from the wait status, the cgroup's OOM counter and the
  sandbox's own timers and byte counters, never from the program's output. CPU time is the sum
  over all the run's processes (getrusage of the reaped tree), peak memory is the cgroup's
  high-water mark (so files written to /tmp count), stdout/stderr are capped while streaming.
- Languages: Python, C, C++ (compiled inside the sandbox with ``compile_limits``), shell; see
  ``LANGUAGES``. Python's fast path forks a warm zygote that already lives in the sandbox, so a
  run costs one fork (and its namespaces) instead of an interpreter start.
- Limits hold on a busy host without turning into false timeouts: the wall limit does not count
  the time the run waited for a CPU other work held (up to 3 more limits; see
  ``Limits.wall_time_s``), CPU time and memory are the kernel's counts for the run alone.

The result channel (for judges)
-------------------------------
Every program gets a pipe on **file descriptor 3** besides stdout and stderr. What it writes
there comes back as ``ExecResult.result_bytes`` (capped at ``max_output_bytes``). A test harness
shipped in ``files=`` can write its verdicts there as JSON while the candidate's prints go to
stdout, so a judge never has to parse the program's stdout::

    harness = '''
    import json, os, solution
    out = os.fdopen(3, "w")          # take fd 3 before running untrusted code
    results = []
    for args, want in TESTS:
        try:
            results.append(solution.f(*args) == want)
        except Exception:
            results.append(False)
    out.write(json.dumps(results)); out.close()
    '''
    res = sb.run(code=harness, files={"solution.py": candidate})
    verdicts = json.loads(res.result_bytes)

The candidate runs in the harness's process, so it *can* find and write fd 3 too: a judge that
needs tamper evidence must add its own protocol (a per-run nonce, counting results, dup-ing the
fd away and closing 3 before importing the candidate...). The sandbox provides the separate
channel and the isolation; it does not make an in-process harness trustworthy.

Sessions: talking with a running program (local and docker)
------------------------------------------------------------
``sb.execute(request, session=s)`` with a :class:`~llmgym.sandbox.base.RunSession` ``s`` turns
the run's stdin into a pipe this process writes as the run goes: the request's ``stdin`` first,
then whatever ``s`` sends from its hooks (``on_start``, ``on_result`` with each chunk written
on fd 3, ``on_timer`` once ``s.deadline`` passes). A hook can also close the input, read the
output printed so far or kill the run. Hooks run on the calling thread and must not block; one
that raises ends the run, which then reports ``sandbox_error``. The coding judge's direct mode
(one process per run, the judge's loop here) is built on it.

What it does not cover
----------------------
- Kernel exploits: this is namespaces + seccomp, not a VM. Run hostile code on a disposable VM
  (or use gVisor/Firecracker under the docker backend) when kernel 0-days are in scope.
- Side channels (timing, cache, /proc/cpuinfo and /proc/meminfo show the host's hardware) and
  the CPU time a run's kernel work charges to others.
- Without root or cgroup delegation, limits degrade to rlimits (per process; RLIMIT_NPROC is
  shared by concurrent runs) and measurements to getrusage; ``get_sandbox().isolation()`` and
  ``llmgym sandbox check`` say so.
- The seccomp filter exists for x86_64 and aarch64 only.
- The fast path shares the zygote's hash seed (``PYTHONHASHSEED``) across runs and exposes its
  pre-imported modules; ``fast_path=False`` gives each run a fresh interpreter.
- docker backend: per-run isolation inside a warm container is process-level (one run at a time
  per container, every leftover process killed and /tmp, /dev/shm and SysV IPC wiped after each
  run); the container supplies namespaces, no network, a read-only root, no capabilities, and
  its own memory and process limits. It needs a local Docker daemon.
"""

from __future__ import annotations

from typing import Any

from llmgym.sandbox.base import RunRequest, RunSession, Sandbox, SessionIO, make_request
from llmgym.sandbox.errors import (
    BackendUnavailable,
    InvalidLimits,
    InvalidRunRequest,
    SandboxClosed,
    SandboxError,
    UnknownBackend,
    UnknownLanguage,
)
from llmgym.sandbox.languages import LANGUAGES, Language
from llmgym.sandbox.limits import Limits
from llmgym.sandbox.result import STATUSES, ExecResult, Status

__all__ = [
    "LANGUAGES",
    "STATUSES",
    "BackendUnavailable",
    "ExecResult",
    "InvalidLimits",
    "InvalidRunRequest",
    "Language",
    "Limits",
    "RunRequest",
    "RunSession",
    "Sandbox",
    "SandboxClosed",
    "SandboxError",
    "SessionIO",
    "Status",
    "UnknownBackend",
    "UnknownLanguage",
    "get_sandbox",
    "make_request",
]

BACKENDS = ("local", "docker", "ray")


def get_sandbox(backend: str = "local", **options: Any) -> Sandbox:
    """A sandbox of the given backend; ``options`` go to its constructor.

    - ``"local"``: :class:`llmgym.sandbox.local.LocalSandbox` (``fast_path``, ``python``,
      ``preload``, ``preload_sources``, ``ro_paths``, ``cgroups``, ``seccomp``,
      ``max_concurrency``).
    - ``"docker"``: :class:`llmgym.sandbox.docker.DockerSandbox` (``image``, ``pool_size``...).
    - ``"ray"``: :class:`llmgym.sandbox.ray.RaySandbox` (``address``, ``local_options``...).

    Starting a sandbox costs a little (a zygote, containers, a Ray connection): make one and
    share it; it is thread-safe. Close it with ``close()`` or a ``with`` block.

    >>> get_sandbox("vm")
    Traceback (most recent call last):
    ...
    llmgym.sandbox.errors.UnknownBackend: unknown sandbox backend 'vm'; choose one of ('local', 'docker', 'ray')
    """
    if backend == "local":
        from llmgym.sandbox.local import LocalSandbox

        return LocalSandbox(**options)
    if backend == "docker":
        from llmgym.sandbox.docker import DockerSandbox

        return DockerSandbox(**options)
    if backend == "ray":
        from llmgym.sandbox.ray import RaySandbox

        return RaySandbox(**options)
    raise UnknownBackend(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
