"""Fork safety: a forked child never uses or tears down its parent's sandboxes and worker pools.

Each case runs in a fresh interpreter (``SCENARIO``): it starts a resource (a local or docker
sandbox, the math verifier's sympy workers, the coding judge's process-wide sandbox), uses it,
forks a child that leaves by normal shutdown, by an exception or by ``os._exit``, then uses the
resource 50 more times and closes it. Every use must succeed, and once closed nothing of it may
be left: no process, no cgroup, no container, no temporary folder. The child also runs work of
its own (in the inherited sandbox, which makes a zygote of its own for it) and reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCENARIO = textwrap.dedent(
    r"""
    import glob, json, os, sys, tempfile, time

    resource, exit_mode = sys.argv[1], sys.argv[2]

    def sandbox_uses(backend):
        from llmgym.sandbox import get_sandbox

        sb = get_sandbox(backend, **({"pool_size": 1} if backend == "docker" else {}))

        def use():
            res = sb.run(code="print(6 * 7)")
            return res.status if res.stdout == "42\n" else f"{res.status}: {res.detail}"

        return use, sb.close

    def math_uses():
        from llmgym.rewards.math import sympy_pool

        def use():
            reply = sympy_pool.get_pool().call(("ping",), 60.0)
            return "ok" if reply == "pong" else repr(reply)

        return use, sympy_pool.shutdown

    def judge_uses():
        import gymnasium as gym
        import llmgym  # noqa: F401
        from llmgym.envs.coding.judge import shipping

        env = gym.make("llm/Coding-v0", family="clock_add", difficulty=0.0)

        def use():
            env.reset(seed=3)
            _, reward, *_, info = env.step(env.unwrapped.oracle_action())
            status = info["exec"]["status"]
            return "ok" if status == "passed" else f"{status}: {info['exec'].get('detail')}"

        return use, shipping.close_shared_sandboxes

    def our_cgroups(pid):
        found = []
        for base in glob.glob("/sys/fs/cgroup/**/llmgym", recursive=True):
            try:
                names = os.listdir(base)
            except OSError:  # removed meanwhile (another process's sandbox closed)
                continue
            found += [n for n in names if n.startswith((f"r{pid}.", f"o{pid}."))]
        return found

    def descendants(root):
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        out = []
        for pid in parents:
            p, hops = parents.get(pid), 0
            while p and hops < 64:
                if p == root:
                    out.append(pid)
                    break
                p, hops = parents.get(p), hops + 1
        return out

    use, close = {"local": lambda: sandbox_uses("local"), "docker": lambda: sandbox_uses("docker"),
                  "math": math_uses, "judge": judge_uses}[resource]()
    first = use()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        # Work of its own, in what it inherited: a fresh zygote / pool / sandbox for it.
        mine = [use() for _ in range(3)]
        os.write(w, json.dumps({"child": mine, "pid": os.getpid()}).encode())
        os.close(w)
        if exit_mode == "os_exit":
            os._exit(0)
        if exit_mode == "exception":
            raise RuntimeError("the child fails and exits through normal shutdown")
        sys.exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        told = json.loads(f.read() or "{}")
    _, status = os.waitpid(child, 0)
    after = [use() for _ in range(50)]
    close()
    deadline = time.monotonic() + 10
    while descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    containers = []
    if resource == "docker":
        import docker

        client = docker.from_env()
        # A removal the daemon is still finishing is no leak: wait for it, within a deadline.
        deadline = time.monotonic() + 15
        while True:
            containers = [c.id[:12] for pid in (os.getpid(), told.get("pid"))
                          for c in client.containers.list(
                              all=True, filters={"label": f"llmgym.sandbox={pid}"})]
            if not containers or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    print(json.dumps({
        "first": first, "child": told.get("child"), "child_exit": os.waitstatus_to_exitcode(status),
        "after": after, "processes": descendants(os.getpid()),
        "cgroups": our_cgroups(os.getpid()) + our_cgroups(told.get("pid")),
        "containers": containers,
        "temp": sorted(os.listdir(tempfile.gettempdir())),  # a folder of this run's own
    }))
    """
)


def _scenario(resource: str, exit_mode: str, tmp: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO, resource, exit_mode],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": tmp},  # what it leaves in temp folders shows there
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _need_docker() -> None:
    from .conftest import _no_docker

    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:  # noqa: BLE001 - no SDK or no daemon
        _no_docker(f"no Docker daemon answers: {exc}")


@pytest.mark.parametrize("exit_mode", ["normal", "exception", "os_exit"])
@pytest.mark.parametrize("resource", ["local", "docker", "math", "judge"])
def test_forked_child_exit_never_tears_down_the_parents_resources(
    resource: str, exit_mode: str, tmp_path: Path
) -> None:
    if resource == "docker":
        _need_docker()
    out = _scenario(resource, exit_mode, str(tmp_path))
    assert out["first"] == "ok"
    assert out["child"] == ["ok"] * 3, out["child"]  # the child's own work runs too
    assert out["child_exit"] == (1 if exit_mode == "exception" else 0)
    assert out["after"] == ["ok"] * 50, [s for s in out["after"] if s != "ok"]
    assert out["processes"] == [], out
    assert out["cgroups"] == [], out
    assert out["containers"] == [], out
    assert out["temp"] == [], out


def test_cgroup_manager_after_fork_forgets_the_parents_and_draws_a_new_token() -> None:
    from llmgym.sandbox._cgroup import CgroupManager

    manager = CgroupManager()
    if not manager.available:
        pytest.skip(f"no cgroups here: {manager.reason}")
    try:
        run = manager.create(64, 8)
        manager.retire(run)
        parent_dirs = set(manager.owned())
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - reported through the pipe
            try:
                before = set(manager.owned())
                mine = manager.create(64, 8)
                report = {
                    "inherited": sorted(before),
                    "new": sorted(mine.dirs.values()),
                    "exists": [os.path.isdir(d) for d in mine.dirs.values()],
                }
                manager.retire(mine)
                manager.close()
                os.write(w, json.dumps(report).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            report = json.loads(f.read())
        os.waitpid(child, 0)
        assert report["inherited"] == []  # nothing of the parent's is the child's
        assert all(report["exists"])
        assert not set(report["new"]) & parent_dirs
        assert all(f"r{child}." in os.path.basename(d) for d in report["new"])
        assert all(os.path.isdir(d) for d in parent_dirs)  # the child's close left them
        assert all(not os.path.exists(d) for d in report["new"])  # and removed its own
        assert manager.create(64, 8) is not None  # the parent goes on
    finally:
        manager.close()


def test_async_vector_coding_env_after_a_parent_step_scores_every_oracle_step() -> None:
    """``gym.make_vec(..., vectorization_mode="async")`` forks its workers from a parent that
    already stepped (so it holds the judge's sandbox): every worker's oracle must get full
    marks (before the fix, workers inherited the parent's cgroup names and collided)."""
    import gymnasium as gym

    import llmgym  # noqa: F401

    env = gym.make("llm/Coding-v0")
    env.reset(seed=0)
    *_, info = env.step(env.unwrapped.oracle_action())
    assert info["exec"]["status"] == "passed"
    high = env.unwrapped.reward_range[1]
    env.close()
    vec = gym.make_vec("llm/Coding-v0", num_envs=3, vectorization_mode="async")
    try:
        rewards = []
        for seed in range(6):
            vec.reset(seed=seed * 10)
            actions = vec.call("oracle_action")
            _, reward, *_ = vec.step(actions)
            rewards += [float(r) for r in reward]
        assert rewards == [high] * len(rewards), rewards
    finally:
        vec.close()
