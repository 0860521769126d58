"""What a judge reads off a run cannot be bent by the run, on every backend (issue 13).

One hostile property per test, each against the local and the docker backend:

- state_leak: nothing one run leaves (deep paths past PATH_MAX, POSIX message queues, SysV
  IPC, files in /tmp and /dev/shm, memory hidden in a deep tmpfs path) reaches the next run in
  the same container;
- agent_kill: a run that signals pid 1, every pid it sees or ``kill(-1)`` hurts no later run,
  and a run that would time out still ends as ``timeout`` whatever it signals;
- hidden_memory: memory held in a child process, in tmpfs files or in a memfd counts in the
  run's peak, and an overrun through any of them is ``memory_limit``;
- hidden_cpu: CPU burnt by children, reaped or not, counts in the run's CPU time;
- pidns_kill: a parent that lives in a pid namespace of its own (a trainer in a container
  driving the host's dockerd) still kills a run at its limit: ``timeout``, never
  ``sandbox_error``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from llmgym.sandbox import BackendUnavailable, Limits, Sandbox, get_sandbox

from .conftest import _no_docker

LIM = Limits(wall_time_s=10, memory_mb=256, max_processes=32)


@pytest.fixture(scope="module", params=["local", "docker"])
def one_box(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A sandbox whose runs share one place: the docker backend with a single container."""
    try:
        sb = get_sandbox(request.param, **({"pool_size": 1} if request.param == "docker" else {}))
    except BackendUnavailable as exc:
        if request.param == "docker":
            _no_docker(f"docker backend unavailable: {exc}")
        pytest.skip(f"local sandbox unavailable: {exc}")
    yield sb
    sb.close()


def run(sb: Sandbox, code: str, limits: Limits = LIM):  # type: ignore[no-untyped-def]
    return sb.run(code=textwrap.dedent(code), limits=limits)


LEAVE_STATE = """
import ctypes, os, sys
os.chdir("/tmp")
for i in range(400):  # a chain deeper than PATH_MAX (4096), made one level at a time
    os.mkdir("d" * 20)
    os.chdir("d" * 20)
with open("hidden-inputs", "w") as f:
    f.write("SECRET-HIDDEN-INPUT " * 50)
for k in range(15):  # 150 MB hidden past PATH_MAX (files of at most max_file_bytes)
    with open(f"ballast{k}", "wb") as f:
        f.write(b"x" * (10 << 20))
os.chdir("/")
os.makedirs("/tmp/judge", exist_ok=True)
open("/tmp/judge/judge.py", "w").write("print('squatted')")
open("/dev/shm/note", "w").write("SECRET-HIDDEN-INPUT")
libc = ctypes.CDLL(None, use_errno=True)
librt = ctypes.CDLL("librt.so.1", use_errno=True)
librt.mq_open.restype = ctypes.c_int
mq = librt.mq_open(b"/llmgym-leak", os.O_CREAT | os.O_RDWR, 0o666, None)
print("mq", mq, ctypes.get_errno())
if mq >= 0:
    librt.mq_send(mq, b"SECRET-HIDDEN-INPUT", 19, 0)
libc.shmget.restype = ctypes.c_int
print("shm", libc.shmget(0x4C4C4D, 4096, 0o1666))
print("left")
"""

LOOK_FOR_STATE = """
import ctypes, os, sys
found = []
for root in ("/tmp", "/dev/shm", "/dev/mqueue"):
    try:
        for dirpath, dirs, files in os.walk(root):
            found += [os.path.join(dirpath, n) for n in dirs + files]
            break
    except OSError:
        pass
librt = ctypes.CDLL("librt.so.1", use_errno=True)
librt.mq_open.restype = ctypes.c_int
if librt.mq_open(b"/llmgym-leak", os.O_RDONLY, 0, None) >= 0:
    found.append("mqueue /llmgym-leak")
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.restype = ctypes.c_int
if libc.shmget(0x4C4C4D, 0, 0) >= 0:
    found.append("sysv shm")
# The interpreter's own mount (a checkout under /tmp puts its venv there) is not a leftover.
mounts = [os.path.realpath(p) + "/" for p in (sys.prefix, sys.base_prefix, sys.executable)]
print(sorted(f for f in found if not f.endswith("main.py")
             and not any(m.startswith(f + "/") for m in mounts)))
x = bytearray(200 << 20)  # an honest program using most of its memory
for i in range(0, len(x), 4096):
    x[i] = 1
print("fits")
"""


def test_state_leak_nothing_a_run_leaves_reaches_the_next_run(one_box: Sandbox) -> None:
    first = run(one_box, LEAVE_STATE, Limits(wall_time_s=20, memory_mb=256, max_processes=32))
    assert first.status == "ok", first
    for _ in range(2):  # the pool's single container, twice
        res = run(one_box, LOOK_FOR_STATE)
        assert res.status == "ok", (res.status, res.detail, res.stderr[-500:])
        assert res.stdout == "[]\nfits\n", res.stdout


SIGNAL_EVERYTHING = """
import os, signal
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL):
    for pid in [1, -1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
print("sent")
"""


def test_agent_kill_signals_from_a_run_hurt_no_later_run(one_box: Sandbox) -> None:
    for _ in range(3):
        res = run(one_box, SIGNAL_EVERYTHING)
        assert res.status in ("ok", "runtime_error"), res
    after = [run(one_box, "print(5)") for _ in range(5)]
    assert [(r.status, r.stdout) for r in after] == [("ok", "5\n")] * 5


def test_agent_kill_a_run_that_would_time_out_still_scores_timeout(one_box: Sandbox) -> None:
    res = run(
        one_box,
        SIGNAL_EVERYTHING + "import time\ntime.sleep(30)\n",
        Limits(wall_time_s=1.0, memory_mb=256, max_processes=32),
    )
    assert res.status == "timeout", (res.status, res.detail)
    assert run(one_box, "print(6)").stdout == "6\n"


HOLD = {  # each holds MB megabytes outside the program's own process, then says "held"
    "child": """
        import os, sys, time
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            x = bytearray(MB << 20)
            for i in range(0, len(x), 4096): x[i] = 1
            os.write(w, b"1"); time.sleep(5); os._exit(0)
        os.close(w)
        if not os.read(r, 1):  # the child died (the OOM killer): so does the program
            sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) or 1)
        print("held")
        """,
    "tmpfs": """
        for k in range(MB // 10):
            with open(f"/tmp/ballast{k}", "wb") as f: f.write(b"x" * (10 << 20))
        print("held")
        """,
    "shm": """
        for k in range(MB // 10):
            with open(f"/dev/shm/ballast{k}", "wb") as f: f.write(b"x" * (10 << 20))
        print("held")
        """,
    "memfd": """
        import os
        fds = []  # one memfd per 10 MB: a file each, so each stays under max_file_bytes
        for k in range(MB // 10):
            fds.append(os.memfd_create(f"ballast{k}"))
            os.write(fds[-1], b"x" * (10 << 20))
        print("held")
        """,
}


@pytest.mark.parametrize("where", sorted(HOLD))
def test_hidden_memory_outside_the_process_counts_in_the_peak(one_box: Sandbox, where: str) -> None:
    res = run(one_box, HOLD[where].replace("MB", "100"))
    assert res.status == "ok" and res.stdout == "held\n", (res.status, res.detail)
    assert res.peak_memory_mb >= 100, (where, res.peak_memory_mb)


@pytest.mark.parametrize("where", sorted(HOLD))
def test_hidden_memory_an_overrun_anywhere_is_a_memory_limit(one_box: Sandbox, where: str) -> None:
    code = HOLD[where].replace("MB", "300")
    res = run(one_box, code, Limits(wall_time_s=10, memory_mb=128, max_processes=32))
    assert res.status == "memory_limit", (where, res.status, res.detail, res.stderr[-300:])
    assert run(one_box, "print(7)").stdout == "7\n"  # and the next run is whole


def test_hidden_cpu_of_unreaped_children_counts(one_box: Sandbox) -> None:
    res = run(
        one_box,
        """
        import os, time
        for _ in range(2):
            if os.fork() == 0:  # never waited for: the run ends with them still running
                t = time.process_time()
                while time.process_time() - t < 0.4:
                    pass
                time.sleep(30)
        time.sleep(3.0)  # room for both on a busy machine
        print("done")
        """,
    )
    assert res.status == "ok", res
    assert res.cpu_time_s >= 0.6, res.cpu_time_s


PIDNS_PARENT = """
import json
from llmgym.sandbox import get_sandbox, Limits
sb = get_sandbox({backend!r}, **({options!r}))
lim = Limits(wall_time_s=1.0, memory_mb=128)
res = [sb.run(code="import time; time.sleep(30)", limits=lim) for _ in range(2)]
ok = sb.run(code="print(8)")
sb.close()
print(json.dumps({{"statuses": [r.status for r in res], "details": [r.detail for r in res],
                  "after": ok.stdout}}))
"""


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_pidns_kill_a_parent_in_its_own_pid_namespace_still_times_runs_out(backend: str) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1)")
    if backend == "docker":
        try:
            get_sandbox("docker", pool_size=1).close()
        except BackendUnavailable as exc:
            _no_docker(f"docker backend unavailable: {exc}")
    options = {"pool_size": 1} if backend == "docker" else {}
    code = PIDNS_PARENT.format(backend=backend, options=options)
    proc = subprocess.run(
        ["unshare", "--pid", "--fork", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["statuses"] == ["timeout", "timeout"], out
    assert out["after"] == "8\n"


def test_the_zygote_never_writes_bytecode_into_the_installed_package(one_box: Sandbox) -> None:
    """``python -E`` ignores PYTHONDONTWRITEBYTECODE: the zygote runs with ``-B`` so neither it nor
    the runs it forks write ``.pyc`` files beside llmgym's (or anyone's) sources."""
    res = run(one_box, "import sys\nprint(sys.flags.dont_write_bytecode, sys.dont_write_bytecode)")
    assert res.status == "ok", res
    assert res.stdout == "1 True\n"
