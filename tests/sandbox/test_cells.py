"""The local backend's cells: each run's process, namespaces and init, made ahead and never reused.

What the fast path's speed-ups could break, one attack or property each: several zygotes serve
runs side by side (concurrent runs must stay apart), each zygote's init spawner makes the next
init ahead and closes finished runs' namespaces (nothing may be reused or held), the runs' init
is a static executable of a few bytes, the seccomp filter is a binary search (the same verdict
for every syscall as the deny list), empty stdin is ``/dev/null`` (opened for each run alone),
only a negative OOM score adjustment is reset, and run cgroups are made and removed in batches
(none handed out twice, none left behind).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from llmgym.sandbox import Sandbox, get_sandbox

from .conftest import FAST

SHOW_NAMESPACES = """
import os, time
print(" ".join(os.readlink("/proc/self/ns/" + ns) for ns in ("pid", "mnt", "net", "ipc")))
open("/tmp/mine-{i}", "w").write("x")
open("/dev/shm/mine-{i}", "w").write("x")
time.sleep({hold})  # every run of the batch is alive at once
# what runs write (a checkout under /tmp also shows its read-only mount point: the same in every run)
ours = lambda d: sorted(n for n in os.listdir(d) if n == "main.py" or n.startswith("mine-"))
print(ours("/tmp"), ours("/dev/shm"))
"""


@pytest.fixture(scope="module")
def two_zygotes() -> Iterator[Sandbox]:
    sb = get_sandbox("local", zygotes=2, max_concurrency=4)
    yield sb
    sb.close()


def _zygote_pids(sb: Sandbox) -> list[int]:
    """The zygotes' pids (each is the child of the launcher the sandbox started)."""
    out = []
    for z in sb._zygotes[False]:  # type: ignore[attr-defined]
        out += _children(z.proc.pid)
    return out


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_concurrent_runs_on_several_zygotes_get_namespaces_and_tmp_of_their_own(
    two_zygotes: Sandbox,
) -> None:
    # Four runs alive at once, spread over both zygotes: no namespace is shared, and no run
    # sees another's /tmp or /dev/shm.
    items = [
        {"code": SHOW_NAMESPACES.format(i=i, hold=2.0), "limits": FAST.replace(wall_time_s=20)}
        for i in range(4)
    ]
    results = two_zygotes.run_many(items, concurrency=4)
    seen: list[list[str]] = []
    for i, res in enumerate(results):
        assert res.ok, res
        namespaces, listing = res.stdout.splitlines()
        seen.append(namespaces.split())
        assert listing == f"{['main.py', f'mine-{i}']} {[f'mine-{i}']}", res.stdout
    for kind in range(4):  # pid, mnt, net, ipc: four different ones of each
        assert len({ns[kind] for ns in seen}) == 4, seen


def test_concurrent_runs_are_spread_over_the_zygotes(two_zygotes: Sandbox) -> None:
    import threading

    started = threading.Barrier(3)
    results = []

    def one() -> None:
        started.wait()
        results.append(two_zygotes.run(code="import time; time.sleep(1.5)", limits=FAST))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    started.wait()
    time.sleep(0.7)
    busy = [z.in_flight for z in two_zygotes._zygotes[False]]  # type: ignore[attr-defined]
    for t in threads:
        t.join()
    assert busy == [1, 1], busy
    assert [r.status for r in results] == ["ok", "ok"], results


def test_nothing_a_run_leaves_reaches_later_runs_on_any_zygote(two_zygotes: Sandbox) -> None:
    leave = textwrap.dedent(
        """
        import ctypes, os
        open("/tmp/leftover", "w").write("x")
        open("/dev/shm/leftover", "w").write("x")
        libc = ctypes.CDLL(None)
        print(libc.shmget(0x4321, 4096, 0o1666) >= 0)
        """
    )
    look = textwrap.dedent(
        """
        import ctypes, os
        libc = ctypes.CDLL(None)
        print(os.path.exists("/tmp/leftover"), os.path.exists("/dev/shm/leftover"),
              libc.shmget(0x4321, 0, 0))
        """
    )
    for _ in range(3):  # pairs in flight at once: both zygotes take runs
        firsts = two_zygotes.run_many([{"code": leave, "limits": FAST}] * 2, concurrency=2)
        assert [r.stdout for r in firsts] == ["True\n"] * 2, firsts
        later = two_zygotes.run_many([{"code": look, "limits": FAST}] * 4, concurrency=2)
        assert [r.stdout.split() for r in later] == [["False", "False", "-1"]] * 4, later


def test_finished_runs_namespaces_are_released_and_one_init_waits_ahead(
    two_zygotes: Sandbox,
) -> None:
    # The zygote hands a finished run's namespaces to its init spawner, which closes them:
    # neither may keep them. Each zygote keeps exactly one cell ahead (a program process in
    # its namespaces, and its init) and one more init made ahead by the spawner.
    two_zygotes.run_many([{"code": "print(1)", "limits": FAST}] * 30, concurrency=2)
    time.sleep(0.5)
    for zygote in _zygote_pids(two_zygotes):
        helpers = _children(zygote)
        spawners = [p for p in helpers if _comm(p) == "llmgym-spawner"]
        assert len(spawners) == 1, [(p, _comm(p)) for p in helpers]
        held = []
        for pid in (zygote, spawners[0]):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(("mnt:", "net:", "ipc:")):
                    held.append((pid, target))
        # The zygote's spare holds its own namespaces; nobody holds a finished run's.
        assert held == [], held
        init = "llmgym-init" if platform.machine() == "x86_64" else "sleep"
        inits = [p for p in _children(spawners[0]) if _comm(p) == init]
        assert len(inits) == 2, inits  # the spare's init and the one made ahead
        spares = [p for p in helpers if _comm(p) == "llmgym-run"]
        assert len(spares) == 1, spares


def test_a_dead_zygote_is_replaced_and_the_pool_keeps_serving() -> None:
    with get_sandbox("local", zygotes=2) as sb:
        assert sb.run(code="print(1)", limits=FAST).ok
        dead = sb._zygotes[False][0]  # type: ignore[attr-defined]
        dead.proc.kill()  # its zygote dies with it (parent-death signal)
        dead.proc.wait()
        results = sb.run_many([{"code": "print(2)", "limits": FAST}] * 6, concurrency=2)
        assert [r.stdout for r in results] == ["2\n"] * 6, results
        pool = sb._zygotes[False]  # type: ignore[attr-defined]
        assert len(pool) == 2 and dead not in pool and all(z.alive() for z in pool)


def test_zygotes_argument_is_checked() -> None:
    from llmgym.sandbox import InvalidRunRequest

    with pytest.raises(InvalidRunRequest, match="zygotes"):
        get_sandbox("local", zygotes=0)


# -- the runs' init ----------------------------------------------------------------------------


def test_the_runs_init_is_the_static_pause_loop(local_sandbox: Sandbox) -> None:
    res = local_sandbox.run(
        code=textwrap.dedent(
            """
            import os, signal
            print(open("/proc/1/comm").read().strip(), os.getpid())
            for path in ("/proc/1/exe", "/proc/1/mem", "/proc/1/environ"):
                try:
                    open(path, "rb").read(1)
                    print("READ", path)
                except OSError:
                    pass
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
                try:
                    os.kill(1, sig)
                    print("SIGNALLED")
                except OSError:
                    pass
            print("alive")
            """
        ),
        limits=FAST,
    )
    assert res.ok, res
    name = "llmgym-init" if platform.machine() == "x86_64" else "sleep"
    assert res.stdout == f"{name} 2\nalive\n", res.stdout


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the pause loop is written for x86_64")
def test_init_executable_sleeps_until_killed(tmp_path: object) -> None:
    from llmgym.sandbox._zygote import init_executable

    elf = init_executable("x86_64")
    assert elf is not None and len(elf) == 129 and elf[:4] == b"\x7fELF"
    assert struct.unpack("<H", elf[18:20])[0] == 62  # e_machine: x86-64
    assert init_executable("no-such-machine") is None
    path = os.path.join(str(tmp_path), "init")
    with open(path, "wb") as f:
        f.write(elf)
    os.chmod(path, 0o555)
    proc = subprocess.Popen([path])
    try:
        time.sleep(0.3)
        assert proc.poll() is None  # pausing, not crashed
        with open(f"/proc/{proc.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "S"  # asleep, not spinning
    finally:
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=5) == -signal.SIGKILL


# -- the seccomp filter ----------------------------------------------------------------------


def _emulate(prog: list[bytes], arch: int, nr: int, arg0: int) -> int:
    """Run a classic BPF seccomp program (the instructions the filter uses) on one syscall."""
    ins = [struct.unpack("HBBI", p) for p in prog]
    pc, acc = 0, 0
    for _ in range(len(ins) + 1):  # forward jumps only: at most one pass
        code, jt, jf, k = ins[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = {0: nr, 4: arch, 16: arg0}[k]
            pc += 1
        elif code == 0x15:  # JEQ
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # JGE
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x45:  # JSET
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:  # RET
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the program did not return")


def test_seccomp_binary_search_gives_the_deny_lists_verdict_for_every_syscall() -> None:
    import errno

    from llmgym.sandbox import _seccomp as sc

    if not sc.SUPPORTED:
        pytest.skip(sc.supported_reason())
    table = sc._TABLE
    assert table is not None
    prog = sc.build_filter()
    deny = set(table["deny"].values())
    allow, kill = sc._SECCOMP_RET_ALLOW, sc._SECCOMP_RET_KILL_PROCESS

    def expected(nr: int, arg0: int) -> int:  # the deny list read plainly
        if table["x32_bit"] and nr >= table["x32_bit"]:
            return kill
        if nr == table["clone3"]:
            return sc._SECCOMP_RET_ERRNO | errno.ENOSYS
        if nr == table["clone"]:
            return sc._SECCOMP_RET_ERRNO | errno.EPERM if arg0 & sc._CLONE_NEW_FLAGS else allow
        if nr in (table["socket"], table["socketpair"]):
            ok = arg0 in sc._ALLOWED_SOCKET_FAMILIES
            return allow if ok else sc._SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
        return sc._SECCOMP_RET_ERRNO | errno.EPERM if nr in deny else allow

    for nr in [*range(1024), table["x32_bit"] or 0, 0x40000000 + 59, 0xFFFFFFFF]:
        for arg0 in (0, 1, 2, 10, 16, 17, 40, 0x20000000, 0x40000000, 0x00020000 | 0x11):
            assert _emulate(prog, table["arch"], nr, arg0) == expected(nr, arg0), (nr, arg0)
    assert _emulate(prog, 0x40000003, 1, 0) == kill  # a foreign ABI
    # Far fewer comparisons than one per denied syscall, for every syscall.
    assert len(prog) < 3 * len(deny) + 40


# -- stdin ------------------------------------------------------------------------------------


def test_empty_stdin_is_a_null_device_of_the_run_alone(sandbox: Sandbox) -> None:
    # /dev/null opened for each run: status flags one run sets on its stdin reach no other.
    taint = textwrap.dedent(
        """
        import fcntl, os, sys
        fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
        print(repr(sys.stdin.read()))
        """
    )
    look = "import fcntl, os\nprint(bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK))"
    for _ in range(2):
        assert sandbox.run(code=taint, limits=FAST).stdout == "''\n"
        assert sandbox.run(code=look, limits=FAST).stdout == "False\n"
    res = sandbox.run(code="import sys; print(sys.stdin.read())", stdin="given\n", limits=FAST)
    assert res.stdout == "given\n\n", res


# -- OOM score --------------------------------------------------------------------------------

OOM_SCORE_PROBE = """
import json, os, sys
with open("/proc/self/oom_score_adj", "w") as f:
    f.write(sys.argv[1])
from llmgym.sandbox import Limits, get_sandbox
with get_sandbox("local") as sb:
    res = sb.run(code="print(open('/proc/self/oom_score_adj').read().strip())")
    big = sb.run(code="x = bytearray(96 << 20)", limits=Limits(memory_mb=48))
print(json.dumps([res.status, res.stdout.strip(), big.status]))
"""


@pytest.mark.parametrize("score", ["300", "-500"])
def test_runs_of_a_parent_with_an_oom_score_stay_killable_by_their_limit(score: str) -> None:
    # A negative score is raised to 0, so that the OOM killer of a run's memory limit may
    # choose the program. A positive one (a Kubernetes pod's, say) is kept: the program is no
    # less killable, and lowering a score set by a privileged runtime needs CAP_SYS_RESOURCE,
    # which a container's root often lacks (the spare would fail to start).
    if os.geteuid() != 0:
        pytest.skip("the sandbox's cgroups need root")
    if score.startswith("-"):
        try:
            with open("/proc/self/oom_score_adj") as f:
                own = f.read().strip()
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write(score)
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write(own)
        except OSError:
            pytest.skip("lowering the OOM score needs CAP_SYS_RESOURCE")
    out = subprocess.run(
        [sys.executable, "-c", OOM_SCORE_PROBE, score],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    status, seen, big = json.loads(out.stdout.splitlines()[-1])
    assert status == "ok"
    assert seen == (score if not score.startswith("-") else "0")
    assert big == "memory_limit"


# -- run cgroups, made and removed in batches -------------------------------------------------


def test_spent_run_cgroups_go_soon_without_waiting_for_a_full_batch() -> None:
    # The helper removes spent cgroups by the batch; one that waits alone still goes within
    # LINGER_S (plus the time the helper needs), and no cgroup is handed out twice.
    from llmgym.sandbox._cgroup import CgroupManager

    m = CgroupManager()
    try:
        if not m.available:
            pytest.skip(f"no cgroups here: {m.reason}")
        given = [m.create(64, 8) for _ in range(3)]
        dirs = [d for run in given for d in run.dirs.values()]
        assert len(set(dirs)) == len(dirs)
        m.retire(given[0])  # one alone: fewer than BATCH
        deadline = time.monotonic() + 5
        while any(os.path.exists(d) for d in given[0].dirs.values()):
            assert time.monotonic() < deadline, "a lone spent cgroup was never removed"
            time.sleep(0.02)
        for run in given[1:]:
            m.retire(run)
        ahead = m.settled()
        assert not any(os.path.exists(d) for d in dirs)
        assert not set(ahead) & set(dirs)  # made ahead: new ones, never those handed out
        assert 0 < len(ahead) <= m.READY * len(m.bases)
    finally:
        m.close()
