"""Fixtures for the sandbox tests: one sandbox per backend per worker, and a leak check.

The ``sandbox`` fixture is parametrized over the backends that the behaviour tests share
(local and docker); the docker one skips, saying why, where no daemon answers.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import NoReturn

import pytest

from llmgym.sandbox import BackendUnavailable, Limits, Sandbox, get_sandbox

FAST = Limits(wall_time_s=5, memory_mb=256, max_processes=32)


def _descendants(root: int) -> list[int]:
    """Pids of every live process below ``root`` (zombies included)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out = []
    for pid in parents:
        p = parents.get(pid)
        seen = 0
        while p and seen < 64:
            if p == root:
                out.append(pid)
                break
            p = parents.get(p)
            seen += 1
    return out


def _our_fds(prefix: str) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


def _mounts() -> list[str]:
    """Mount points that could be ours (others' Docker containers come and go meanwhile)."""
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if "llmgym" in line]


def _our_containers() -> list[str]:
    try:
        import docker

        client = docker.from_env(timeout=10)
        found = client.containers.list(all=True, filters={"label": f"llmgym.sandbox={os.getpid()}"})
        client.close()
        return [c.id[:12] for c in found]
    except Exception:  # noqa: BLE001 - no SDK or no daemon: no containers either
        return []


def _own_run_cgroups(anchors: bool = False) -> list[str]:
    """This process's run cgroups (``r<pid>.<token>-<n>``), in every hierarchy (containers'
    included), and with ``anchors`` its sandboxes' anchors (``o<pid>.<token>``) too."""
    prefixes = (f"r{os.getpid()}.", f"o{os.getpid()}.") if anchors else (f"r{os.getpid()}.",)
    found = []
    for root, dirs, _files in os.walk("/sys/fs/cgroup"):
        if os.path.basename(root) == "llmgym":
            found += [os.path.join(root, d) for d in dirs if d.startswith(prefixes)]
            dirs[:] = []
        if root.count("/") > 8:
            dirs[:] = []
    return found


@pytest.fixture(scope="session")
def local_sandbox() -> Iterator[Sandbox]:
    try:
        sb = get_sandbox("local")
    except BackendUnavailable as exc:
        pytest.skip(f"local sandbox unavailable on this host: {exc}")
    yield sb
    sb.close()


_docker_error: list[str] = []


def _no_docker(reason: str) -> NoReturn:
    """Skip, saying why; CI sets LLMGYM_REQUIRE_DOCKER=1 so that a missing daemon fails instead."""
    if os.environ.get("LLMGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{reason} (LLMGYM_REQUIRE_DOCKER=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_sandbox() -> Iterator[Sandbox]:
    if _docker_error:
        _no_docker(_docker_error[0])
    try:
        sb = get_sandbox("docker", pool_size=2)
    except BackendUnavailable as exc:
        _docker_error.append(f"docker backend unavailable: {exc}")
        _no_docker(_docker_error[0])
    yield sb
    sb.close()


@pytest.fixture(params=["local", "docker"])
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """The sandbox of each backend that the shared behaviour tests run against."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture(scope="session", autouse=True)
def no_leftovers() -> Iterator[None]:
    """After the suite: no process, mount, cgroup or fd of ours is left behind."""
    mounts = _mounts()
    pipes = _our_fds("pipe:")
    yield
    # Processes that live until exit when other suites ran in this process (the coding
    # judge's sandboxes, the math verifier's sympy workers, reasoning-gym's scorer) are
    # closed as the exit would close them: they are not leftovers.
    coding_judge = sys.modules.get("llmgym.envs.coding.judge.shipping")
    if coding_judge is not None:
        coding_judge.close_shared_sandboxes()
    sympy_workers = sys.modules.get("llmgym.rewards.math.sympy_pool")
    if sympy_workers is not None:
        sympy_workers.shutdown()
    reasoning_scorer = sys.modules.get("llmgym.envs.reasoning.bridge.worker")
    if reasoning_scorer is not None:  # reasoning-gym's scoring worker, closed at exit too
        reasoning_scorer.shutdown()
    deadline = time.monotonic() + 10
    while _descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = []
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                leftover.append((pid, f.read()[:80]))
        except OSError:
            pass
    ours = [p for p in leftover if b"llmgym" in p[1] or b"ray" not in p[1]]
    assert not ours, f"processes left behind: {ours}"
    assert _mounts() == mounts, "mounts left behind in the test process's namespace"
    assert not _our_containers(), f"containers left behind: {_our_containers()}"
    left = _own_run_cgroups(anchors=True)
    assert not left, f"cgroups left behind: {left}"
    assert not _our_fds("/memfd:llmgym"), "payload/stdin memfds leaked"
    # Ray and the Docker SDK keep sockets of their own; pipes are ours (stdout, stderr, results).
    assert len(_our_fds("pipe:")) <= len(pipes) + 4, "pipes leaked"
