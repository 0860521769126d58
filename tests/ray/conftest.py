"""A local Ray cluster per test module: a head (no CPUs) and two worker nodes with their own
resources (``node_a``, ``node_b``), all on loopback; stopped after the module, which then checks
that none of the Ray processes it ran is left.

This folder has no ``__init__.py`` on purpose: a test package named ``ray`` would shadow Ray.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("ray")

from llmgym.ray import LoopbackCluster  # noqa: E402

WORKERS = [
    {"num_cpus": 2, "resources": {"node_a": 1}},
    {"num_cpus": 2, "resources": {"node_b": 1}},
]


def ray_processes_below(root: int) -> set[int]:
    """The live descendants of ``root`` that are Ray's (raylets, GCS, workers, agents)."""
    parent: dict[int, int] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - below
        below |= frontier
    out = set()
    for pid in below:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"ray" in f.read():
                    out.add(pid)
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    before = ray_processes_below(os.getpid())
    c = LoopbackCluster(WORKERS)
    started: set[int] = set()
    try:
        yield c
    finally:
        started = ray_processes_below(os.getpid()) - before
        c.shutdown()
    deadline = time.monotonic() + 30
    while (left := {p for p in started if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"Ray processes left after the cluster stopped: {sorted(left)}"
