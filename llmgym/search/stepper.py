"""Stepping a search's children together: env clones, each stepped from a snapshot, in threads.

An expansion of K children is K env steps, each from its parent's snapshot. :class:`Stepper`
runs them on up to ``workers`` copies of the env at once (the search's own env and clones of it),
so that steps which wait outside the interpreter overlap: a coding env's sandbox run (a
subprocess), the math env's sympy worker, a remote env's request. Results come back in the jobs'
order, so a search builds the same tree whatever the number of workers.

A clone is a deep copy of the env that shares its task source (exact, when the env can be
copied), else the env made again from its registry spec (``gym.make(env.spec)``: an env holding a
lock or a sandbox); it is kept only if it restores a snapshot exactly and moving it leaves the
env's snapshot unchanged (a clone shares no episode state). When no clone can be made, the steps
run one after another in the search's env.

What it is not: a vector env (clones are stepped from snapshots, not episodes of their own) nor a
process pool: a step that only computes in Python holds the GIL and gains nothing from threads.
An env whose steps share state outside the instance (a module-level cache without a lock) must be
searched with ``env_workers=1``.
"""

from __future__ import annotations

import copy
import json
import logging
import queue
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

logger = logging.getLogger(__name__)

ENV_WORKERS = 8
"""Env steps run at once by default. A step mostly waits on its sandbox process, so more steps
than CPUs still overlap (CodingMultiTurn-v0 on 2 busy cores: 4 and 8 workers alike, 2 slower),
and the sandbox's wall-time limit does not count time spent waiting for a CPU."""


@dataclass
class Stepped:
    """What one step from a snapshot gave, and the snapshot after it."""

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    state: dict[str, Any]


Job = tuple[Mapping[str, Any], Any]
"""A snapshot to restore and the action to step from it."""


def _frozen(state: Any) -> str:
    return json.dumps(state, sort_keys=True, default=repr)


def _copied(env: Any) -> Any:
    """A deep copy that shares the env's task source (a read-only catalogue, possibly a large
    dataset, whose caches have their own locks) and has no episode until ``set_state`` (the
    episode may hold a live resource such as a database connection, which the copy must neither
    share nor close). An env whose source holds more than a catalogue copies it in its own
    ``__deepcopy__`` (``llm/Mixture-v0``: the member envs)."""
    memo: dict[int, Any] = {}
    source, episode = getattr(env, "source", None), getattr(env, "episode", None)
    if source is not None:
        memo[id(source)] = source
    if episode is not None:
        memo[id(episode)] = None
    return copy.deepcopy(env, memo)


def _remade(env: Any) -> Any:
    spec = getattr(env, "spec", None)
    if spec is None:
        raise TypeError(f"{type(env).__name__} cannot be copied and has no registry spec")
    return gym.make(spec).unwrapped


def clone_env(
    env: Any, state: Mapping[str, Any] | None = None, *, probe: bool = True
) -> Any | None:
    """A copy of ``env`` that restores ``state`` (default: ``env``'s current snapshot) exactly and
    steps apart from ``env``, or None.

    Apart: with ``probe``, moving the copy to another state (:func:`_move`, one env step) must
    leave ``env``'s snapshot as it was, so that an env whose parts a copy shares (a catalogue
    that also holds envs) is stepped one at a time rather than wrongly in threads. A copy that
    shares a part is dropped without closing it: closing it would close what ``env`` still uses.
    A :class:`Stepper` probes its first clone only: the others are made the same way."""
    own = env.get_state()
    state = own if state is None else state
    for make in (_copied, _remade):
        try:
            twin = make(env)
        except Exception as e:  # noqa: BLE001 - an env that cannot be copied this way
            logger.debug("search: cannot clone %s by %s: %s", type(env).__name__, make, e)
            continue
        verdict = _verdict(env, own, twin, state, probe)
        if verdict == "apart":
            return twin
        if verdict == "shares":
            env.set_state(own)
            logger.info(
                "search: a copy of %s shares its episode state; not used", type(env).__name__
            )
        else:
            close_quietly(twin)
    return None


def _move(env: Any) -> None:
    """Put ``env`` in another state than its snapshot: one step of an empty message, or a new
    episode where that step fails (an ended episode)."""
    try:
        env.step("")
    except Exception:  # noqa: BLE001 - any failure: the new episode moves it as well
        env.reset(seed=0)


def _verdict(
    env: Any, own: Mapping[str, Any], twin: Any, state: Mapping[str, Any], probe: bool
) -> str:
    """``"shares"`` when moving ``twin`` (with ``probe``) moved ``env`` off ``own``; else
    ``"apart"`` when ``twin`` restores ``state`` exactly, ``"fails"`` when it does not."""
    try:
        twin.set_state(state)
        if probe:
            _move(twin)
        ready = True
    except Exception as e:  # noqa: BLE001 - a clone that does not restore is not used
        logger.debug("search: a clone of %s does not restore: %s", type(env).__name__, e)
        ready = False
    try:
        if _frozen(env.get_state()) != _frozen(own):
            return "shares"
        if not ready:
            return "fails"
        twin.set_state(state)
        return "apart" if _frozen(twin.get_state()) == _frozen(state) else "fails"
    except Exception as e:  # noqa: BLE001
        logger.debug("search: a clone of %s does not restore: %s", type(env).__name__, e)
        return "fails"


def close_quietly(env: Any) -> None:
    """Close a clone; a failure is logged (the search's result must not depend on it)."""
    try:
        env.close()
    except Exception as e:  # noqa: BLE001
        logger.warning("search: closing an env clone failed: %s: %s", type(e).__name__, e)


def step_from(env: Any, state: Mapping[str, Any], action: Any) -> Stepped:
    """Restore ``state`` in ``env``, step ``action``, and snapshot the result."""
    env.set_state(state)
    _, reward, terminated, truncated, info = env.step(action)
    return Stepped(float(reward), bool(terminated), bool(truncated), info, env.get_state())


class Stepper:
    """Steps jobs on the search's env and up to ``workers - 1`` clones of it (made on first need,
    closed by :meth:`close`)."""

    def __init__(self, env: Any, workers: int):
        self.envs = [env]
        self.workers = workers
        self.can_clone = workers > 1
        self.clones = 0
        """Clones made (they stay counted once closed)."""

    def step_all(self, jobs: Sequence[Job]) -> list[Stepped | Exception]:
        """Each job's outcome, in order: the step, or the exception it raised. With one env the
        steps run in order and stop at the first failure (the list is then shorter)."""
        if len(jobs) > 1:  # a job's snapshot: a state the search steps from, not an ended one
            self._grow(min(self.workers, len(jobs)), jobs[0][0])
        width = min(len(self.envs), len(jobs))
        if width <= 1:
            return self._in_order(jobs)
        free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for env in self.envs[:width]:
            free.put(env)
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="llmgym-search-step") as pool:
            return list(pool.map(lambda job: self._on_free_env(free, job), jobs))

    def close(self) -> None:
        """Close the clones (never the search's own env)."""
        for twin in self.envs[1:]:
            close_quietly(twin)
        del self.envs[1:]

    def _in_order(self, jobs: Sequence[Job]) -> list[Stepped | Exception]:
        out: list[Stepped | Exception] = []
        for state, action in jobs:
            try:
                out.append(step_from(self.envs[0], state, action))
            except Exception as e:  # noqa: BLE001 - reported by the caller at its place
                out.append(e)
                break
        return out

    @staticmethod
    def _on_free_env(free: queue.SimpleQueue[Any], job: Job) -> Stepped | Exception:
        env = free.get()  # as many threads as envs: one is always free
        try:
            return step_from(env, *job)
        except Exception as e:  # noqa: BLE001 - reported by the caller at its place
            return e
        finally:
            free.put(env)

    def _grow(self, wanted: int, state: Mapping[str, Any]) -> None:
        while self.can_clone and len(self.envs) < wanted:
            twin = clone_env(self.envs[0], state, probe=self.clones == 0)
            if twin is None:
                self.can_clone = False
                logger.info(
                    "search: %s cannot be cloned; its steps run one at a time",
                    type(self.envs[0]).__name__,
                )
                return
            self.envs.append(twin)
            self.clones += 1
