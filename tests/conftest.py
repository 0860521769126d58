"""Suite-wide checks: after the whole test suite no ``llmgym`` cgroup is left in any hierarchy."""

from __future__ import annotations

import os
import sys
import time

import pytest


def _left_cgroups() -> list[str]:
    """Run cgroups and owner anchors under every ``llmgym`` directory of the host, except those
    a live sandbox of this very process still holds (a run without xdist: closed at exit)."""
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
        for name in names:
            path = os.path.join(base, name)
            if os.path.isdir(path) and path not in live:
                left.append(path)
    return left


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
