"""Suite-wide checks: after the whole test suite no ``llmgym`` cgroup is left in any hierarchy."""

from __future__ import annotations

import os
import sys
import time

import pytest


def _left_cgroups() -> list[str]:
    """Run cgroups and owner anchors under every ``llmgym`` directory of the host, except those
    a live sandbox of this very process still holds (a run without xdist: closed at exit) and
    those a live program outside this session owns (another run on the same machine)."""
    if not os.path.isdir("/sys/fs/cgroup"):
        return []
    from llmgym.sandbox import _cgroup

    live: set[str] = set()
    for manager in list(_cgroup._LIVE):
        try:
            live.update(manager.owned())
        except Exception:  # noqa: BLE001 - a manager closed meanwhile holds nothing
            continue
    left = []
    for base in _cgroup.llmgym_directories():
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        orphans = {o.path for o in _cgroup.orphans(base)}
        for name in names:
            path = os.path.join(base, name)
            if not os.path.isdir(path) or path in live:
                continue
            if path not in orphans and _another_live_process(name):
                continue  # a sandbox of another program on this machine, alive and holding it
            left.append(path)
    return left


def _another_live_process(name: str) -> bool:
    """Whether the cgroup ``name`` belongs to a live process outside this test session's tree
    (another test run or trainer on the same machine): its owner pid lives and descends not
    from this process. Pid 1 (a sandbox made in a fresh pid namespace) never qualifies."""
    from llmgym.sandbox import _cgroup

    m = _cgroup._RUN_NAME.fullmatch(name) or _cgroup._ANCHOR_NAME.fullmatch(name)
    if m is None:
        return False
    pid = int(m.group(1))
    if pid <= 1 or pid == os.getpid():
        return False
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the parent's pid
        except (OSError, ValueError, IndexError):
            return False  # gone (or unreadable): not another live program's
        if pid == os.getpid():
            return False  # a descendant of this session: its cgroups are this suite's
    return True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller checks once every worker has exited
    deadline = time.monotonic() + 10  # helper threads of exiting workers finish their removals
    left = _left_cgroups()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _left_cgroups()
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"llmgym cgroups left behind after the test suite: {left[:20]}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
