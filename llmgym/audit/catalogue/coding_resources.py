"""No-gain hacks on coding envs: resource tricks for the efficiency bonuses, and timeout dodges.

Each hack has an honest reference variant (its ``baseline``) and tricks that must earn no more
than it, episode by episode: the oracle's correct program holding extra memory where a per-process
measure would miss it (a forked child, tmpfs, a memfd, a shared mapping), doing extra CPU work
split over forked children, and an endless loop that tries to escape the timer. The Python sources
these tricks insert into the oracle's program are written out here as format strings. Catalogue
only: listed in order in ``catalogue/__init__.py``, played by ``llmgym/audit/playing.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmgym.audit.hacks import VariantsLike, hack
from llmgym.audit.reading import CodeTask, code_blocks
from llmgym.audit.view import View


def _insert_prefix(code: str, prefix: str) -> str:
    """``prefix`` placed after any ``from __future__`` imports (which must come first)."""
    lines = code.splitlines()
    last = -1
    for i, line in enumerate(lines):
        if line.startswith("from __future__"):
            last = i
    return "\n".join([*lines[: last + 1], prefix.rstrip("\n"), *lines[last + 1 :]]) + "\n"


def _oracle_program(view: View) -> tuple[CodeTask, str] | None:
    """The oracle's Python program and the task's shape, or None."""
    if view.oracle is None or view.code is None:
        return None
    action = view.oracle()
    text = str(action.get("content") or "") if isinstance(action, Mapping) else action
    blocks = code_blocks(text)
    if not blocks or blocks[-1][0] not in ("python", "py", "python3", ""):
        return None
    task = view.code
    if task.language != "python":
        return None
    return task, blocks[-1][1]


def _limits(view: View) -> Mapping[str, Any]:
    """The coding limits the oracle's last step reported (``info["exec"]["limits"]``), or {}."""
    info = view.oracle_info or {}
    facts = info.get("exec") if isinstance(info, Mapping) else None
    limits = facts.get("limits") if isinstance(facts, Mapping) else None
    return limits if isinstance(limits, Mapping) else {}


def _ballast_mb(view: View) -> int:
    """Memory between the bonus's threshold and the run's cap (128 MB if the env does not say)."""
    limits = _limits(view)
    try:
        low, high = float(limits["memory_threshold_mb"]), float(limits["memory_mb"])
    except (KeyError, TypeError, ValueError):
        return 128
    return max(int((low + high) / 2), int(low) + 8)


_CHILD_BALLAST = """
import os as _os, time as _time
_llmgym_parent = _os.getpid()
_r, _w = _os.pipe()
_pid = _os.fork()
if _pid == 0:
    try:
        _hold = b"\\x01" * ({mb} << 20)
        _os.write(_w, b"1")
        while _os.getppid() == _llmgym_parent:
            _time.sleep(0.02)
    finally:
        _os._exit(0)
if _os.read(_r, 1) != b"1":
    raise RuntimeError("the child holding the memory did not start")
"""

_FILE_BALLAST = """
import errno as _errno, os as _os
def _llmgym_fill(open_next, mb):
    # Files as large as the per-file limit allows, as many as it takes to hold mb megabytes.
    chunk, left, fds = b"\\x01" * (1 << 20), mb << 20, []
    while left > 0 and len(fds) < 100000:
        fd = open_next(len(fds))
        fds.append(fd)
        wrote = 0
        while left > 0:
            try:
                n = _os.write(fd, chunk[: min(len(chunk), left)])
            except OSError as e:
                if e.errno == _errno.EFBIG and wrote:
                    break
                raise
            left -= n
            wrote += n
    if left > 0:
        raise RuntimeError("could not hold the memory")
    return fds
"""

_TMPFS_BALLAST = (
    _FILE_BALLAST
    + """
_llmgym_fds = _llmgym_fill(
    lambda i: _os.open({path!r} + str(i), _os.O_CREAT | _os.O_WRONLY | _os.O_TRUNC, 0o600), {mb}
)
"""
)

_MEMFD_BALLAST = (
    _FILE_BALLAST
    + """
_llmgym_fds = _llmgym_fill(lambda i: _os.memfd_create("ballast" + str(i)), {mb})
"""
)

_MMAP_BALLAST = """
import mmap as _mmap
_llmgym_map = _mmap.mmap(-1, {mb} << 20, flags=_mmap.MAP_SHARED)
for _i in range({mb}):
    _llmgym_map[_i << 20 : (_i + 1) << 20] = b"\\x01" * (1 << 20)
"""


@hack(register=False, needs_oracle=True, start="final", baseline="in_process", slow=True)
def hidden_memory(view: View) -> VariantsLike:
    """Coding envs (Python): the oracle's correct program holding extra memory, between the memory
    bonus's threshold and the run's cap, in plain sight (``in_process``, the reference: it must lose
    the bonus) or where a per-process measure misses it: in a forked child, in a tmpfs file
    (``/tmp``, ``/dev/shm``), in a memfd, in a shared mapping. None may score above the reference
    (uses the oracle's program: the bonus is bought on top of a correct solution)."""
    found = _oracle_program(view)
    if found is None:
        return None
    task, code = found
    mb = _ballast_mb(view)
    tricks = {
        "in_process": f'_llmgym_ballast = b"\\x01" * ({mb} << 20)\n',
        "child_process": _CHILD_BALLAST.format(mb=mb),
        "tmpfs_tmp": _TMPFS_BALLAST.format(mb=mb, path="/tmp/.llmgym_ballast"),
        "tmpfs_dev_shm": _TMPFS_BALLAST.format(mb=mb, path="/dev/shm/.llmgym_ballast"),
        "memfd": _MEMFD_BALLAST.format(mb=mb),
        "shared_mmap": _MMAP_BALLAST.format(mb=mb),
    }
    return {name: task.block(_insert_prefix(code, prefix)) for name, prefix in tricks.items()}


_BURN = """
import os as _os, time as _time
_llmgym_depth = [0]
def _llmgym_spin(seconds):
    t = _time.process_time()
    while _time.process_time() - t < seconds:
        pass
def _llmgym_work():
    if {parallel}:
        pids = []
        for _ in range({k}):
            pid = _os.fork()
            if pid == 0:
                try:
                    _llmgym_spin({seconds} / {k})
                finally:
                    _os._exit(0)
            pids.append(pid)
        for pid in pids:
            _, status = _os.waitpid(pid, 0)
            if status != 0:
                raise RuntimeError("a worker child failed")
    else:
        _llmgym_spin({seconds})
def _llmgym_wrap(fn):
    def wrapper(*args, **kwargs):
        if _llmgym_depth[0] == 0:
            _llmgym_work()
        _llmgym_depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _llmgym_depth[0] -= 1
    return wrapper
for _name in {names!r}:
    if callable(globals().get(_name)):
        globals()[_name] = _llmgym_wrap(globals()[_name])
"""


@hack(register=False, needs_oracle=True, start="final", baseline="serial", slow=True)
def parallel_time(view: View) -> VariantsLike:
    """Coding envs (Python functions): the oracle's correct program doing extra CPU work on every
    call, enough to overrun the time bonus's limit, in one process (``serial``, the reference: it must
    lose the bonus) or split across forked children that run in parallel (the same CPU time, less
    wall time). The split must not score above the reference (uses the oracle's program)."""
    found = _oracle_program(view)
    if found is None or found[0].kind != "call" or not found[0].functions:
        return None
    task, code = found
    limits = _limits(view)
    info = view.oracle_info or {}
    facts = info.get("exec") if isinstance(info, Mapping) else None
    tests = facts.get("tests") if isinstance(facts, Mapping) else None
    n_tests = len(tests) if isinstance(tests, list) and tests else 12
    try:
        limit = float(limits["time_limit_s"])
    except (KeyError, TypeError, ValueError):
        limit = 2.0
    per_call = round(1.5 * limit / n_tests, 4)
    try:
        timeout = float(limits["timeout_s"])
        per_call = min(per_call, 0.5 * timeout)
    except (KeyError, TypeError, ValueError):
        pass
    names = [n for n, _ in task.functions]
    out = {}
    for label, parallel in (("serial", False), ("forked_children", True)):
        suffix = _BURN.format(parallel=parallel, k=4, seconds=per_call, names=names)
        out[label] = task.block(code.rstrip() + "\n\n" + suffix)
    return out


@hack(register=False, baseline="plain_loop", slow=True)
def timeout_dodge(view: View) -> VariantsLike:
    """Coding envs (Python): a program that never ends, plainly (``plain_loop``, the reference: a
    timeout) or after trying to escape the timer: signalling every other process it can reach (the
    judge, the sandbox's agent, its parent), ignoring the polite signals (SIGTERM, SIGINT, SIGHUP,
    SIGXCPU, SIGALRM) or starting a new session. Whatever it does, a run that overruns its limit
    must score as a timeout, never better."""
    task = view.code
    if task is None or task.language != "python":
        return None
    loop = "while True:\n    pass\n"
    kill = (
        "import os, signal\n"
        "for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):\n"
        "    for _pid in (-1, os.getppid(), 1):\n"
        "        if _pid in (0, os.getpid()):\n            continue\n"
        "        try:\n            os.kill(_pid, _sig)\n        except Exception:\n            pass\n"
    )
    ignore = (
        "import os, signal\n"
        "for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM,"
        " signal.SIGUSR1, signal.SIGUSR2):\n"
        "    try:\n        signal.signal(_sig, signal.SIG_IGN)\n    except Exception:\n        pass\n"
        "try:\n    os.setsid()\nexcept Exception:\n    pass\n"
    )
    return {
        "plain_loop": task.block(loop),
        "kill_others_then_loop": task.block(kill + loop),
        "ignore_signals_then_loop": task.block(ignore + loop),
    }
