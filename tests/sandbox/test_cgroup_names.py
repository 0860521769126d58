"""Run cgroups: names unique across pid namespaces and over time, and no leftovers.

A trainer in a container is pid 1 of its pid namespace, and the kernel reuses namespace
inodes: names made of pid and namespace alone collided (``FileExistsError`` on a later run,
a lost reward) and were never swept (pid 1 always looks alive). Names now carry a random token
per manager, and each manager holds a ``flock`` on an anchor cgroup while it lives, so that
whoever finds a cgroup can tell a dead owner's from a live one's, in any pid namespace.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from llmgym.sandbox import _cgroup
from llmgym.sandbox._cgroup import CgroupManager

PID1_RUNS = textwrap.dedent(
    """
    import json, os, sys
    from llmgym.sandbox import get_sandbox, Limits
    assert os.getpid() == 1, os.getpid()
    sb = get_sandbox("local")
    statuses = [sb.run(code="print(7)", limits=Limits(wall_time_s=10)).status for _ in range(25)]
    names = sorted(os.path.basename(d) for d in sb._cgroups.owned())
    print(json.dumps({"statuses": statuses, "names": names}), flush=True)
    os._exit(0)  # as a container's pid 1 that is stopped: no cleanup, cgroups left behind
    """
)


def _manager() -> CgroupManager:
    m = CgroupManager()
    if not m.available:
        m.close()
        pytest.skip(f"no cgroups here: {m.reason}")
    return m


def _as_pid1() -> subprocess.Popen[str]:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make pid namespaces")
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", sys.executable, "-c", PID1_RUNS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, list[str]]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def test_pid_1_sandboxes_in_fresh_pid_namespaces_side_by_side_never_collide() -> None:
    first, second = _as_pid1(), _as_pid1()
    a, b = _finish(first), _finish(second)
    assert a["statuses"] == ["ok"] * 25 and b["statuses"] == ["ok"] * 25
    assert not set(a["names"]) & set(b["names"])  # both pid 1, neither name the other's
    assert all(n.startswith(("r1.", "o1.")) for n in a["names"] + b["names"])
    _manager().close()  # and the next manager sweeps what they left
    left = [o.path for o in _cgroup.find_leftovers() if os.path.basename(o.path) in a["names"]]
    assert left == []


def test_pid_1_sandboxes_one_after_the_other_never_collide() -> None:
    names: list[str] = []
    for _ in range(4):
        out = _finish(_as_pid1())
        assert out["statuses"] == ["ok"] * 25
        assert not set(out["names"]) & set(names)
        names += out["names"]
    # What each left behind (pid 1 "is alive" in every namespace) the next manager sweeps.
    _manager().close()
    left = [o.path for o in _cgroup.find_leftovers() if os.path.basename(o.path) in names]
    assert left == []


def test_an_existing_name_is_skipped_instead_of_failing_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = _manager()
    squatted: list[str] = []
    try:
        # The first token drawn is taken by another manager's live anchor: another is drawn.
        tokens = iter(["feedfacecafe", "0123456789ab"])
        monkeypatch.setattr(_cgroup.secrets, "token_hex", lambda n: next(tokens))
        for base in manager._bases.values():
            path = os.path.join(base, f"o{os.getpid()}.feedfacecafe")
            os.mkdir(path)
            squatted.append(path)
        manager._after_fork()  # as in a fork: a new token and anchor on the next run
        # And the next run names exist already (made by hand, as a reused inode would).
        for base in manager._bases.values():
            for n in range(3):
                path = os.path.join(base, f"r{os.getpid()}.0123456789ab-{n}")
                os.mkdir(path)
                squatted.append(path)
        runs = [manager.create(64, 8) for _ in range(4)]
        got = [d for run in runs for d in run.dirs.values()]
        assert not set(got) & set(squatted)
        assert all(os.path.isdir(d) for d in got)
        for run in runs:
            manager.retire(run)
    finally:
        manager.close()
        for path in reversed(squatted):
            if os.path.isdir(path):
                os.rmdir(path)


KILLED_MID_RUN = textwrap.dedent(
    """
    import json, os, sys, threading
    from llmgym.sandbox import get_sandbox, Limits
    sb = get_sandbox("local")
    sb.run(code="print(1)")
    threading.Thread(
        target=sb.run, kwargs={"code": "import time; time.sleep(120)", "limits": Limits(wall_time_s=200)}
    ).start()
    import time; time.sleep(1.0)
    print(json.dumps(sorted(sb._cgroups.owned())), flush=True)
    time.sleep(300)
    """
)


def test_a_sandbox_killed_mid_run_leaves_cgroups_that_the_next_sandbox_removes() -> None:
    from llmgym.sandbox import get_sandbox

    _manager().close()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_RUN], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    owned = json.loads(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Left behind: its anchors, the cgroups made ahead and the one of the run in flight.
    prefix = (f"r{proc.pid}.", f"o{proc.pid}.")
    left = [o for o in _cgroup.find_leftovers() if os.path.basename(o.path).startswith(prefix)]
    assert {o.path for o in left} >= set(owned) and left
    deadline = time.monotonic() + 20  # its zygote notices the death and takes the run down
    while any(o.holds_processes for o in _cgroup.find_leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    with get_sandbox("local") as sb:
        assert [sb.run(code="print(3)").status for _ in range(10)] == ["ok"] * 10
        still = [p for p in owned if os.path.exists(p)]
    assert still == []


@pytest.fixture
def private_base() -> Iterator[str]:
    """An ``llmgym`` directory of this test's own (in the pids hierarchy, beside this process's
    cgroup), where no sandbox of another test sweeps meanwhile."""
    manager = _manager()
    manager.close()
    own = _cgroup._own_cgroups().get("pids", "/").lstrip("/")
    parent = os.path.join("/sys/fs/cgroup/pids", own, f"llmgym-test-{os.getpid()}")
    if manager.version != 1 or not os.path.isdir(os.path.dirname(parent)):
        pytest.skip("needs the cgroup v1 pids hierarchy")
    base = os.path.join(parent, "llmgym")
    os.makedirs(base)
    yield base
    for entry in os.scandir(base):
        if entry.is_dir():
            os.rmdir(entry.path)
    os.rmdir(base)
    os.rmdir(parent)


def test_sandbox_check_reports_and_clean_removes_the_dead_owners_cgroups(private_base: str) -> None:
    base = private_base
    dead = subprocess.Popen(["true"])
    dead.wait()
    anchor = os.path.join(base, f"o{dead.pid}.deadbeef0000")
    runs = [os.path.join(base, f"r{dead.pid}.deadbeef0000-{n}") for n in range(2)]
    # A live owner's: this test holds the anchor's lock, as a live manager would.
    live_anchor = os.path.join(base, f"o{os.getpid()}.a11ve0000000")
    live_run = os.path.join(base, f"r{os.getpid()}.a11ve0000000-0")
    for path in [anchor, *runs, live_anchor, live_run]:
        os.mkdir(path)
    lock = os.open(live_anchor, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    cli = [sys.executable, "-m", "llmgym.cli", "sandbox"]
    try:
        out = subprocess.run([*cli, "check", "--json"], capture_output=True, text=True, timeout=120)
        reported = {o["path"] for o in json.loads(out.stdout)["leftover_cgroups"]}
        assert {anchor, *runs} <= reported
        assert not {live_anchor, live_run} & reported  # its owner lives: not a leftover
        out = subprocess.run([*cli, "clean", "--json"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        removed = {o["path"] for o in json.loads(out.stdout)["removed"]}
        assert {anchor, *runs} <= removed
        assert not any(os.path.exists(p) for p in [anchor, *runs])
        assert os.path.isdir(live_run) and os.path.isdir(live_anchor)
    finally:
        os.close(lock)


def test_an_orphan_that_holds_a_process_is_kept_unless_clean_kills(private_base: str) -> None:
    path = os.path.join(private_base, "r999999.badc0ffee000-0")  # no anchor: its owner is gone
    os.mkdir(path)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        removed, kept = _cgroup.sweep(private_base)
        assert [o.path for o in kept] == [path] and kept[0].holds_processes
        assert path not in [o.path for o in removed]
        removed, kept = _cgroup.sweep(private_base, kill=True)
        assert path in [o.path for o in removed] and not os.path.exists(path)
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_live_managers_cgroups_are_never_swept_from_another_process() -> None:
    manager = _manager()
    try:
        run = manager.create(64, 8)
        ahead = manager.owned()
        out = subprocess.run(
            [sys.executable, "-m", "llmgym.cli", "sandbox", "clean", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert all(os.path.isdir(d) for d in [*ahead, *run.dirs.values()])
        manager.retire(run)
    finally:
        manager.close()


def test_interpreter_exit_removes_every_cgroup_a_sandbox_made() -> None:
    code = (
        "import os, json\nfrom llmgym.sandbox import get_sandbox\n"
        "sb = get_sandbox('local')\nsb.run(code='print(1)')\n"
        "print(json.dumps(sb._cgroups.owned()))\n"  # and exit without closing it
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    owned = json.loads(out.stdout.strip().splitlines()[-1])
    assert owned and not [p for p in owned if os.path.exists(p)]
