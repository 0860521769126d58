"""EnvPool: envs as Ray actors on a cluster's CPU nodes, scaled between a minimum and a maximum.

``acquire()`` hands out a :class:`~llmgym.ray.env.RayEnv` (an ``LLMEnv`` whose episode lives in an
actor); ``close()`` on it gives the actor back. An acquire that finds no idle actor starts one
while the pool is under ``max_actors`` (demand: episodes waiting), else waits for a release;
actors idle longer than ``idle_timeout_s`` are stopped down to ``min_actors``. Actors are placed
by Ray (``scheduling="SPREAD"`` spreads them over nodes; ``resources`` pins them to nodes that
offer a custom resource). :meth:`EnvPool.run_episodes` plays many seeds at once. A dead actor is
replaced and its episode resumed from the last snapshot (see ``env.py``); every wait on Ray has a
timeout. This is not a scheduler of its own: Ray places and starts the actors.

>>> with EnvPool("llm/Math-v0", max_actors=4) as pool:  # doctest: +SKIP
...     results = pool.run_episodes("oracle", seeds=range(100))
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llmgym import error
from llmgym.ray.actors import EnvWorker, EpisodeResult, play_episode
from llmgym.ray.cluster import cluster_cpus, connect, env_spec, ray_module
from llmgym.ray.env import ActorDied, CallTimedOut, RayEnv, fetch

_CLOSE_S = 10.0
"""How long stopping actors waits for their envs to close before killing them."""

Policy = str | Callable[[str, dict[str, Any]], Any] | Sequence[Sequence[Any]]
"""``"oracle"``, ``policy(observation, info) -> action`` (called on the driver, from several
threads at once), or one list of actions per seed (scripted episodes)."""


@dataclass(eq=False)
class ActorInfo:
    """One env actor of a pool: its handle, where it runs, and what its env looks like."""

    handle: Any = field(repr=False)
    label: str
    node_id: str
    pid: int
    description: dict[str, Any] = field(repr=False)

    def __str__(self) -> str:
        return f"{self.label} (pid {self.pid} on node {self.node_id[:12]})"


class EnvPool:
    """Env actors of one env id and kwargs; see the module docstring.

    Args:
        env_id, kwargs: what each actor makes (``gym.make(env_id, **kwargs)``); the spec is
            shipped from this process, so envs registered only here work too.
        min_actors, max_actors: the pool's bounds (``max_actors`` defaults to the cluster's
            CPUs divided by ``num_cpus_per_actor``).
        address: the Ray cluster (see :func:`llmgym.ray.cluster.connect`); a process already
            connected keeps its connection. A pool that connected disconnects when closed.
        num_cpus_per_actor, resources, scheduling: each actor's Ray options (``scheduling``:
            ``"SPREAD"``, ``"DEFAULT"`` or a Ray scheduling strategy object).
        idle_timeout_s: an actor idle this long is stopped (down to ``min_actors``; None: never).
        timeout_s: the longest wait for one env call (reset, step, ...).
        start_timeout_s: the longest wait for an actor to start (a worker process, llmgym
            imported, the env made).
        max_retries: how many times one call may move to a new actor after its actor died.
    """

    def __init__(
        self,
        env_id: str,
        kwargs: Mapping[str, Any] | None = None,
        *,
        min_actors: int = 0,
        max_actors: int | None = None,
        address: str | None = None,
        num_cpus_per_actor: float = 1,
        resources: Mapping[str, float] | None = None,
        scheduling: Any = "SPREAD",
        idle_timeout_s: float | None = 60.0,
        timeout_s: float = 300.0,
        start_timeout_s: float = 120.0,
        max_retries: int = 2,
    ):
        if not isinstance(min_actors, int) or min_actors < 0:
            raise error.Error(f"Expects min_actors to be an int >= 0, actual: {min_actors!r}")
        if max_actors is not None and (not isinstance(max_actors, int) or max_actors < 1):
            raise error.Error(f"Expects max_actors to be an int >= 1, actual: {max_actors!r}")
        if max_actors is not None and max_actors < min_actors:
            raise error.Error(
                f"Expects min_actors <= max_actors, actual: {min_actors} > {max_actors}"
            )
        if timeout_s <= 0 or start_timeout_s <= 0 or num_cpus_per_actor < 0 or max_retries < 0:
            raise error.Error(
                "Expects timeout_s > 0, start_timeout_s > 0, num_cpus_per_actor >= 0 and "
                "max_retries >= 0"
            )
        self.env_id = env_id
        self.kwargs = dict(kwargs or {})
        self._spec = env_spec(env_id)
        self._owns_ray = connect(address)
        ray = ray_module()
        if max_actors is None:
            per = num_cpus_per_actor or 1
            max_actors = max(1, min_actors, int(cluster_cpus() // per))
        self.min_actors = min_actors
        self.max_actors = max_actors
        self.idle_timeout_s = idle_timeout_s
        self.timeout_s = float(timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.max_retries = max_retries
        self._options = {
            "num_cpus": num_cpus_per_actor,
            "resources": dict(resources or {}),
            "scheduling_strategy": scheduling,
        }
        self._actor_class = ray.remote(EnvWorker).options(
            max_restarts=0, max_task_retries=0, **self._options
        )
        self._cond = threading.Condition()
        self._idle: list[tuple[ActorInfo, float]] = []
        self._busy: set[ActorInfo] = set()
        self._starting = 0
        self._waiting = 0
        self._closed = False
        self._count = 0
        self.started = 0
        self.replaced = 0
        self.stopped_idle = 0
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        try:
            now = time.monotonic()
            self._idle = [(a, now) for a in self._start(min_actors)]
        except BaseException:
            self.close()
            raise
        if idle_timeout_s is not None and max_actors > min_actors:
            self._reaper = threading.Thread(
                target=self._reap_loop, name="llmgym-ray-pool-reaper", daemon=True
            )
            self._reaper.start()

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"<EnvPool {self.env_id} actors={s['actors']} busy={s['busy']} "
            f"[{self.min_actors}, {self.max_actors}]>"
        )

    # --- actors ---------------------------------------------------------------------------------

    def _start(self, n: int) -> list[ActorInfo]:
        """Start ``n`` actors at once and wait until each has made its env; an actor that
        dies while starting (its node going down) is started again, ``max_retries`` times."""
        if n == 0:
            return []
        deadline = time.monotonic() + self.start_timeout_s
        handles = [self._actor_class.remote(self._spec, self.kwargs) for _ in range(n)]
        started: list[ActorInfo] = []
        try:
            for i in range(n):
                started.append(self._ready(handles, i, deadline))
        except (ActorDied, CallTimedOut) as exc:
            for handle in handles:
                self._kill(handle)
            raise error.Error(
                f"Could not start an env actor for {self.env_id} with kwargs {self.kwargs}: "
                f"{exc} (each actor asks for {self._options['num_cpus']} CPU and resources "
                f"{self._options['resources']}; the cluster has "
                f"{ray_module().cluster_resources()})"
            ) from None
        return started

    def _ready(self, handles: list[Any], i: int, deadline: float) -> ActorInfo:
        """Wait for ``handles[i]`` to start (replacing it in the list if it dies starting)."""
        for attempt in range(self.max_retries + 1):
            left = max(0.001, deadline - time.monotonic())
            try:
                info = fetch(
                    handles[i].ready.remote(), left, f"starting an env actor for {self.env_id}"
                )
                break
            except ActorDied as exc:
                if exc.init_failed or attempt == self.max_retries:
                    raise
                handles[i] = self._actor_class.remote(self._spec, self.kwargs)
        with self._cond:
            self._count += 1
            self.started += 1
            label = f"{self.env_id}#{self._count}"
        return ActorInfo(handles[i], label, info.pop("node_id"), info.pop("pid"), info)

    def _kill(self, handle: Any) -> None:
        """Stop an actor at once (dead, hung, or never started)."""
        try:
            ray_module().kill(handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already dead, or the cluster is gone: nothing to stop
            pass

    def _close_actors(self, actors: list[ActorInfo]) -> None:
        """Close live actors' envs (a sandbox's processes, a database) within ``_CLOSE_S``,
        then stop the actors."""
        if not actors:
            return
        refs = [a.handle.close.remote() for a in actors]
        deadline = time.monotonic() + _CLOSE_S
        for actor, ref in zip(actors, refs, strict=True):
            try:
                fetch(ref, max(0.001, deadline - time.monotonic()), f"closing {actor}")
            except Exception:  # noqa: BLE001 - a failed close still ends in the kill below
                pass
            self._kill(actor.handle)

    def _size(self) -> int:
        return len(self._idle) + len(self._busy) + self._starting

    def _take(self, timeout_s: float | None) -> ActorInfo:
        """An idle actor, a new one while under ``max_actors``, or the next one released."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    if self._closed:
                        raise error.Error(f"{self!r} is closed")
                    if self._idle:
                        actor, _ = self._idle.pop()  # the most recently used: the warmest
                        self._busy.add(actor)
                        return actor
                    if self._size() < self.max_actors:
                        self._starting += 1
                        break
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise error.Error(
                            f"No env actor of {self.env_id} came free within {timeout_s:g} s "
                            f"(all {self.max_actors} busy); raise max_actors or release envs"
                        )
                    self._cond.wait(left)
            finally:
                self._waiting -= 1
        return self._add_started()

    def _add_started(self) -> ActorInfo:
        """Start the actor whose slot the caller reserved (``_starting``) and mark it busy."""
        try:
            (actor,) = self._start(1)
        except BaseException:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._starting -= 1
            closed = self._closed
            if not closed:
                self._busy.add(actor)
        if closed:
            self._close_actors([actor])
            raise error.Error(f"{self!r} is closed")
        return actor

    def _give(self, actor: ActorInfo, broken: bool = False) -> None:
        with self._cond:
            mine = actor in self._busy
            self._busy.discard(actor)
            keep = mine and not broken and not self._closed
            if keep:
                self._idle.append((actor, time.monotonic()))
            self._cond.notify()
        if not keep:
            self._close_actors([actor])

    def _replace(self, dead: ActorInfo) -> ActorInfo:
        """Stop ``dead`` and start another in its slot (for an env that goes on there)."""
        with self._cond:
            self._busy.discard(dead)
            self._starting += 1
            self.replaced += 1
        self._kill(dead.handle)
        return self._add_started()

    def shrink(self) -> int:
        """Stop the actors idle longer than ``idle_timeout_s``, down to ``min_actors``."""
        if self.idle_timeout_s is None:
            return 0
        now = time.monotonic()
        with self._cond:
            spare = self._size() - self.min_actors
            old = [a for a, t in self._idle if now - t > self.idle_timeout_s][: max(0, spare)]
            self._idle = [(a, t) for a, t in self._idle if a not in old]
            self.stopped_idle += len(old)
        self._close_actors(old)
        return len(old)

    def _reap_loop(self) -> None:
        assert self.idle_timeout_s is not None
        period = min(max(self.idle_timeout_s / 4, 0.05), 5.0)
        while not self._stop.wait(period):
            self.shrink()

    # --- envs -----------------------------------------------------------------------------------

    def acquire(self, timeout_s: float | None = None) -> RayEnv:
        """An env in an actor of this pool (``close()`` gives it back); waits at most
        ``timeout_s`` for one to come free when all ``max_actors`` are busy (None: until one
        does; busy envs end their calls within ``timeout_s`` each)."""
        return RayEnv(self, self._take(timeout_s))

    def release(self, env: RayEnv, *, broken: bool = False) -> None:
        """Give ``env``'s actor back (``broken``: stop it instead). ``env.close()`` calls this."""
        self._give(env.actor, broken)

    @contextlib.contextmanager
    def env(self, timeout_s: float | None = None) -> Iterator[RayEnv]:
        """``with pool.env() as env:`` an env for the block, given back after it."""
        env = self.acquire(timeout_s)
        try:
            yield env
        finally:
            env.close()

    def actors(self, *, busy: bool | None = None) -> list[ActorInfo]:
        """The live actors and where each runs: all, or only the busy (or idle) ones."""
        with self._cond:
            idle = [a for a, _ in self._idle] if busy is not True else []
            return idle + (list(self._busy) if busy is not False else [])

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {
                "actors": self._size(),
                "idle": len(self._idle),
                "busy": len(self._busy),
                "starting": self._starting,
                "waiting": self._waiting,
                "started": self.started,
                "replaced": self.replaced,
                "stopped_idle": self.stopped_idle,
            }

    # --- many episodes --------------------------------------------------------------------------

    def run_episodes(
        self,
        policy: Policy,
        seeds: Iterable[int],
        *,
        options: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
    ) -> list[EpisodeResult]:
        """Play one episode per seed, up to ``concurrency`` (default ``max_actors``) at once;
        results in the order of ``seeds``.

        ``"oracle"`` and scripted actions play whole episodes inside the actors (one call per
        batch of episodes; an actor that dies has its batch played again, from each episode's
        reset, on a new actor). A callable policy runs here, one ``RayEnv`` step at a time, and
        an episode whose actor dies resumes from its last snapshot.
        """
        seeds = list(seeds)
        if any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
            raise error.Error("Expects seeds as ints")
        workers = concurrency or self.max_actors
        if callable(policy):
            return self._run_here(policy, seeds, options, workers)
        if isinstance(policy, str):
            if policy != "oracle":
                raise error.Error(
                    f"Expects 'oracle', a callable or action lists, actual: {policy!r}"
                )
            plays: list[Any] = ["oracle"] * len(seeds)
        else:
            plays = [list(actions) for actions in policy]
            if len(plays) != len(seeds):
                raise error.Error(
                    f"Expects one list of actions per seed: {len(plays)} lists for {len(seeds)} seeds"
                )
        jobs = [
            (seed, dict(options) if options else None, p)
            for seed, p in zip(seeds, plays, strict=True)
        ]
        size = max(1, min(32, len(jobs) // (workers * 4)))
        batches = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        with ThreadPoolExecutor(workers, thread_name_prefix="llmgym-ray-episodes") as pool:
            done = list(pool.map(self._play_batch, batches))
        return [r for batch in done for r in batch]

    def _play_batch(
        self, jobs: list[tuple[int, dict[str, Any] | None, Any]]
    ) -> list[EpisodeResult]:
        actor = self._take(None)
        try:
            for attempt in range(self.max_retries + 1):
                what = f"playing {len(jobs)} episode(s) on env actor {actor}"
                try:
                    results: list[EpisodeResult] = fetch(
                        actor.handle.play.remote(jobs), self.timeout_s * len(jobs), what
                    )
                except ActorDied as exc:
                    if attempt == self.max_retries:
                        raise ActorDied(f"{exc}; gave up after {attempt} new actor(s)") from None
                    actor = self._replace(actor)
                    continue
                except CallTimedOut:
                    actor = self._replace(actor)
                    raise
                for r in results:
                    r.retries = attempt
                return results
            raise AssertionError("unreachable")
        finally:
            self._give(actor)

    def _run_here(
        self,
        policy: Callable[[str, dict[str, Any]], Any],
        seeds: list[int],
        options: Mapping[str, Any] | None,
        workers: int,
    ) -> list[EpisodeResult]:
        def one(seed: int) -> EpisodeResult:
            with self.env() as env:
                result = play_episode(env, seed, options, lambda _e, obs, info: policy(obs, info))
                result.node_id, result.retries = env.actor.node_id, env.retries
                return result

        with ThreadPoolExecutor(workers, thread_name_prefix="llmgym-ray-episodes") as pool:
            return list(pool.map(one, seeds))

    # --- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every actor (busy ones too) and the reaper; disconnect if this pool connected."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            actors = [a for a, _ in self._idle] + list(self._busy)
            self._idle, self._busy = [], set()
            self._cond.notify_all()
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join(timeout=10)
        self._close_actors(actors)
        if self._owns_ray:
            ray_module().shutdown()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
