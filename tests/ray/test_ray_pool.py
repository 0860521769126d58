"""EnvPool and the Ray vector env on a local cluster of two worker nodes: placement, autoscaling,
results equal to in-process play, and actors or a whole node killed mid-episode."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import llmgym
from llmgym import error
from llmgym.declarative import DeclarativeEnv
from llmgym.ray import ActorDied, CallTimedOut, EnvPool, LoopbackCluster, make_vec
from llmgym.ray.actors import oracle, play_episode, scripted

ray = pytest.importorskip("ray")

CAPITALS_ID = "raytest/Capitals-v0"
NO_SNAPSHOT_ID = "raytest/NoSnapshot-v0"
STUCK_ID = "raytest/Stuck-v0"
CAPITALS = [
    {"id": "fr", "prompt": "Capital of France?", "answer": "Paris"},
    {"id": "jp", "prompt": "Capital of Japan?", "answer": "Tokyo"},
]
SEQUENTIAL = {"subtask_mode": "sequential"}


class NoSnapshotEnv(DeclarativeEnv):
    """A multi-turn env that cannot snapshot (as one holding a live resource might not)."""

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError("this env holds a live connection it cannot copy")


class StuckEnv(DeclarativeEnv):
    """A multi-turn env whose step never ends when told to wait (a verifier that hangs)."""

    def respond(self, episode: Any, message: dict[str, Any]) -> Any:
        if message["content"] == "hang":
            time.sleep(3600)
        return super().respond(episode, message)


# The test envs travel to the actors by value: the workers cannot import this test module.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def _test_envs() -> Iterator[None]:
    llmgym.register_task_env(CAPITALS_ID, tasks=CAPITALS, max_turns=4, overwrite=True)
    capitals = dict(gym.spec(CAPITALS_ID).kwargs)
    gym.register(NO_SNAPSHOT_ID, entry_point=NoSnapshotEnv, kwargs=capitals)
    gym.register(STUCK_ID, entry_point=StuckEnv, kwargs=capitals)
    yield
    for env_id in (CAPITALS_ID, NO_SNAPSHOT_ID, STUCK_ID):
        gym.registry.pop(env_id, None)


def node_ids(cluster: LoopbackCluster) -> list[str]:
    return [n.node_id for n in cluster.nodes]


@pytest.mark.timeout(120)
def test_actors_spread_over_both_worker_nodes_and_follow_resources(
    cluster: LoopbackCluster,
) -> None:
    a, b = node_ids(cluster)
    with EnvPool("llm/Math-v0", min_actors=2, max_actors=2, timeout_s=60) as pool:
        assert {x.node_id for x in pool.actors()} == {a, b}  # SPREAD, and never the CPU-less head
    pinned = EnvPool(
        "llm/Math-v0", min_actors=2, max_actors=2, resources={"node_b": 0.1}, timeout_s=60
    )
    with pinned:
        assert {x.node_id for x in pinned.actors()} == {b}


@pytest.mark.timeout(120)
def test_episodes_in_actors_equal_the_same_seeds_in_process(cluster: LoopbackCluster) -> None:
    seeds = list(range(10))
    local = gym.make("llm/Math-v0", disable_env_checker=True, **SEQUENTIAL)
    gold = [play_episode(local, s, None, oracle) for s in seeds]
    wrong = [play_episode(local, s, None, lambda *_: "42") for s in seeds]
    assert all(r.success for r in gold) and not any(r.success for r in wrong)
    assert any(len(r.rewards) > 1 for r in gold)  # multi-step episodes
    with EnvPool("llm/Math-v0", SEQUENTIAL, max_actors=2, timeout_s=60) as pool:
        assert pool.run_episodes("oracle", seeds) == gold  # played inside the actors
        here = pool.run_episodes(lambda obs, info: "42", seeds)  # policy here, steps there
        assert here == wrong
        assert {r.node_id for r in here} <= set(node_ids(cluster))
        scripts = [["42"] * len(r.rewards) for r in wrong]
        assert pool.run_episodes(scripts, seeds) == wrong
        with pytest.raises(error.Error, match="one list of actions per seed"):
            pool.run_episodes(scripts[:2], seeds)
        with pytest.raises(error.Error, match="ran out"):
            pool.run_episodes([[]] * len(seeds), seeds)


@pytest.mark.timeout(120)
def test_pool_grows_with_demand_and_shrinks_when_idle(cluster: LoopbackCluster) -> None:
    with EnvPool(
        "llm/Math-v0",
        min_actors=1,
        max_actors=3,
        num_cpus_per_actor=0.5,
        idle_timeout_s=0.5,
        timeout_s=60,
    ) as pool:
        assert pool.stats()["actors"] == 1
        with ThreadPoolExecutor(3) as threads:
            envs = list(threads.map(lambda _: pool.acquire(), range(3)))
        assert pool.stats()["actors"] == 3 and pool.stats()["busy"] == 3
        with pytest.raises(error.Error, match="came free"):
            pool.acquire(timeout_s=0.3)  # at max_actors, all busy
        with ThreadPoolExecutor(1) as threads:
            waiting = threads.submit(pool.acquire, 60)
            time.sleep(0.2)
            envs[0].close()  # the waiting acquire gets this actor, no new one starts
            envs[0] = waiting.result(timeout=60)
        assert pool.stats()["started"] == 3
        for env in envs:
            env.close()
        deadline = time.monotonic() + 30
        while pool.stats()["actors"] > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.stats()["actors"] == 1 and pool.stats()["stopped_idle"] == 2


def _steps(env: Any, actions: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(env.step(a)[:4]) for a in actions]


@pytest.mark.timeout(120)
def test_actor_killed_mid_episode_resumes_from_its_snapshot(cluster: LoopbackCluster) -> None:
    options = {"task_id": "fr"}
    local = gym.make(CAPITALS_ID, disable_env_checker=True)
    first = local.reset(seed=0, options=options)
    expected = _steps(local, ["Lyon", "Nice", "Paris"])
    with EnvPool(CAPITALS_ID, max_actors=2, timeout_s=60) as pool, pool.env() as env:
        assert env.reset(seed=0, options=options) == first
        got = _steps(env, ["Lyon"])
        dead = env.actor
        os.kill(dead.pid, signal.SIGKILL)  # the actor's process, mid-episode
        got += _steps(env, ["Nice"])
        assert env.retries == 1 and env.actor.pid != dead.pid
        ray.kill(env.actor.handle)  # and once more, through Ray
        assert env.oracle_action() == "Paris"
        got += _steps(env, ["Paris"])
        assert got == expected and env.retries == 2
        assert env.get_state()["messages"] == local.unwrapped.get_state()["messages"]
        assert pool.stats()["replaced"] == 2


@pytest.mark.timeout(120)
def test_actor_killed_without_a_snapshot_is_a_clear_error(cluster: LoopbackCluster) -> None:
    options = {"task_id": "jp"}
    with EnvPool(NO_SNAPSHOT_ID, max_actors=1, timeout_s=60) as pool, pool.env() as env:
        env.reset(seed=0, options=options)
        env.step("Kyoto")
        dead = env.actor
        os.kill(dead.pid, signal.SIGKILL)
        with pytest.raises(ActorDied, match=rf"{NO_SNAPSHOT_ID}#1 \(pid {dead.pid}.*no snapshot"):
            env.step("Osaka")
        env.reset(seed=0, options=options)  # the env goes on, on a new actor
        assert env.step("Tokyo")[1] == 1.0


@pytest.mark.timeout(120)
def test_a_call_that_never_answers_times_out_and_the_episode_goes_on(
    cluster: LoopbackCluster,
) -> None:
    with EnvPool(STUCK_ID, max_actors=1, timeout_s=2) as pool, pool.env() as env:
        env.reset(seed=0, options={"task_id": "fr"})
        assert env.step("Lyon")[1] == 0.0
        stuck = env.actor
        start = time.monotonic()
        with pytest.raises(CallTimedOut, match=rf"pid {stuck.pid}.*within 2 s"):
            env.step("hang")
        assert time.monotonic() - start < 30
        assert env.actor.pid != stuck.pid  # stopped and replaced, the last snapshot restored
        assert env.step("Paris")[1:3] == (1.0, True)


@pytest.mark.timeout(120)
def test_env_errors_come_back_as_themselves_and_bad_input_is_refused(
    cluster: LoopbackCluster,
) -> None:
    with pytest.raises(error.UnknownEnv, match="did you mean 'llm/Math-v0'"):
        EnvPool("llm/Mth-v0")
    with pytest.raises(error.Error, match="min_actors <= max_actors"):
        EnvPool("llm/Math-v0", min_actors=3, max_actors=2)
    with pytest.raises(error.Error, match=r"Could not start.*no_such_kwarg"):
        EnvPool("llm/Math-v0", {"no_such_kwarg": 1}, min_actors=1, timeout_s=60)
    with EnvPool("llm/Math-v0", max_actors=1, timeout_s=60) as pool, pool.env() as env:
        with pytest.raises(error.ResetNeeded):
            env.step("1")
        env.reset(seed=0)
        with pytest.raises(error.InvalidAction, match="str or a dict"):
            env.step(12)
        with pytest.raises(error.InvalidState):
            env.set_state({"format": 99})
        env.step("1")
        with pytest.raises(error.ResetNeeded):
            env.step("1")  # the episode ended
        with pytest.raises(error.Error, match="seeds as ints"):
            pool.run_episodes("oracle", ["0"])  # type: ignore[list-item]
        with pytest.raises(error.Error, match="'oracle', a callable"):
            pool.run_episodes("gold", [0])


def test_without_ray_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmgym.ray.cluster import ray_module

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without Ray
    with pytest.raises(error.DependencyNotInstalled, match=r"llmgym\[ray\]"):
        ray_module()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and all(_same(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True))
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_equals_sync_vector_env(cluster: LoopbackCluster, mode: AutoresetMode) -> None:
    n = 3
    # (Math-v0's sequential mode is out: gymnasium's own info batching fails on its "subtask",
    # None in one env and a dict in another)
    sync = gym.make_vec(
        "llm/Math-v0", num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    envs = make_vec("llm/Math-v0", num_envs=n, autoreset_mode=mode, timeout_s=60)
    try:
        assert envs.observation_space == sync.observation_space
        assert _same(envs.reset(seed=11), sync.reset(seed=11))
        ended = 0
        for t in range(10):
            actions = []
            for i, sub in enumerate(sync.envs):  # gold for env i on even steps, else wrong
                ep = sub.unwrapped.episode
                gold = (t + i) % 2 == 0 and ep is not None and not ep.done
                actions.append(sub.unwrapped.oracle_action() if gold else "wrong")
            got, want = envs.step(tuple(actions)), sync.step(tuple(actions))
            assert isinstance(got[0], tuple) and all(isinstance(o, str) for o in got[0])
            assert _same(got, want), f"step {t} differs"
            ended += int(np.sum(want[2] | want[3]))
        assert ended >= n  # episodes ended, and the autoreset that follows was compared too
    finally:
        envs.close()
        sync.close()
    with pytest.raises(error.Error, match="num_envs"):
        make_vec("llm/Math-v0", num_envs=0)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_worker_node_killed_mid_run_loses_and_mixes_up_nothing(cluster: LoopbackCluster) -> None:
    """Last in the module: it takes a worker node away for good."""
    seeds = list(range(16))
    local = gym.make("llm/Math-v0", disable_env_checker=True, **SEQUENTIAL)
    expected = [play_episode(local, s, None, scripted(["7"] * 16)) for s in seeds]
    steps = 0

    def slow(observation: str, info: dict[str, Any]) -> str:
        nonlocal steps
        steps += 1
        time.sleep(0.25)  # episodes stay in flight while the node goes
        return "7"

    out: list[Any] = []

    def play(pool: EnvPool) -> None:
        try:
            out.append(pool.run_episodes(slow, seeds))
        except BaseException as e:  # reported below, not lost in the thread
            out.append(e)

    with EnvPool(
        "llm/Math-v0", SEQUENTIAL, max_actors=4, num_cpus_per_actor=0.5, timeout_s=60
    ) as pool:
        run = threading.Thread(target=play, args=(pool,))
        run.start()
        # Whichever worker node has an episode going is the one to go (SPREAD usually puts
        # actors on both, but a loaded machine may start them all on one).
        workers = {n.node_id: n for n in cluster.nodes}
        deadline = time.monotonic() + 150
        while True:
            busy = [a.node_id for a in pool.actors(busy=True) if a.node_id in workers]
            if steps >= 4 and busy:
                break
            assert run.is_alive(), f"run_episodes ended before the node went: {out}"
            assert time.monotonic() < deadline, (
                f"no episode got going on a worker node: {steps} steps, {pool.stats()}"
            )
            time.sleep(0.02)
        node = workers[busy[0]]
        cluster.remove_node(node)
        run.join(timeout=180)
        assert not run.is_alive(), "run_episodes hung after the node died"
    (results,) = out
    assert not isinstance(results, BaseException), results
    assert results == expected  # same seeds, same rewards, in order: nothing lost or mixed up
    assert sum(r.retries for r in results) >= 1
    assert all(r.node_id != node.node_id for r in results if r.retries)
