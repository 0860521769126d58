"""The ray backend on a local Ray cluster started by the test."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from llmgym.sandbox import Limits, Sandbox, get_sandbox

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_sandbox() -> Iterator[Sandbox]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield get_sandbox("ray")
    finally:
        ray.shutdown()


def test_runs_on_workers_and_keeps_order(ray_sandbox: Sandbox) -> None:
    results = ray_sandbox.run_many([{"code": f"print({i} ** 2)"} for i in range(8)])
    assert [r.stdout for r in results] == [f"{i**2}\n" for i in range(8)]
    assert all(r.backend == "local" for r in results)  # executed by each worker's local sandbox
    bad = ray_sandbox.run(code="import sys; sys.exit(4)")
    assert bad.status == "runtime_error" and bad.exit_code == 4
    slow = ray_sandbox.run(code="while True: pass", limits=Limits(wall_time_s=1))
    assert slow.status == "timeout"


def _ray_workers_running(name: bytes) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if name in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def test_worker_dying_mid_run_is_a_sandbox_error(ray_sandbox: Sandbox) -> None:
    out: list[object] = []
    t = threading.Thread(
        target=lambda: out.append(
            ray_sandbox.run(code="import time; time.sleep(60)", limits=Limits(wall_time_s=90))
        )
    )
    t.start()
    deadline = time.monotonic() + 60
    killed = []
    while not killed and time.monotonic() < deadline:
        for pid in _ray_workers_running(b"ray::_run_on_worker"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.2)
    t.join(timeout=120)
    assert killed, "never saw the Ray worker running the task"
    assert not t.is_alive(), "run() hung after its worker died"
    (res,) = out
    assert res.status == "sandbox_error", res  # type: ignore[attr-defined]
    assert "Ray worker" in res.detail  # type: ignore[attr-defined]
