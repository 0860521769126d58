"""Envs whose episode lives in a Ray actor, used in the driver as a local ``LLMEnv``.

:class:`ActorEnv` is the proxy: ``reset``, ``step``, ``get_state``/``set_state``,
``oracle_action``, ``secrets`` and ``render`` run in an actor and raise there the same
``llmgym.error`` classes the env raises in-process. :class:`RayEnv` is the one an
:class:`~llmgym.ray.pool.EnvPool` hands out: it keeps the snapshot that came back with the last
``reset``/``step``, and when its actor dies (the process, or its node) it moves to a fresh actor,
restores that snapshot and makes the call again, so the episode goes on with the same result;
an env that cannot snapshot gets an :class:`ActorDied` naming the dead actor instead. Every wait
on Ray has a timeout. The Ray Serve session envs (``llmgym.ray.serving``) are ActorEnvs too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

from llmgym import error
from llmgym.core import Episode, LLMEnv, episode_of
from llmgym.ray.cluster import ray_module
from llmgym.tasks import Task

if TYPE_CHECKING:
    from llmgym.ray.pool import ActorInfo, EnvPool


class ActorDied(error.Error):
    """An env actor died (its process or its node) and the call could not go on elsewhere."""

    init_failed = False
    """True when the actor never started: its constructor (the env's ``gym.make``) raised."""


class CallTimedOut(error.Error):
    """An env actor did not answer within the timeout; it was stopped."""


def fetch(ref: Any, timeout_s: float, what: str) -> Any:
    """``ray.get(ref)`` within ``timeout_s``: the env's own error re-raised as itself, a dead
    actor as :class:`ActorDied`, no answer as :class:`CallTimedOut`."""
    ray = ray_module()
    exceptions = ray.exceptions
    try:
        return ray.get(ref, timeout=timeout_s)
    except exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, Exception):
            raise cause from None
        raise error.Error(f"{what} failed: {exc}") from None
    except exceptions.GetTimeoutError:
        raise CallTimedOut(f"{what} did not answer within {timeout_s:g} s") from None
    except (
        exceptions.RayActorError,
        exceptions.ObjectLostError,
        exceptions.NodeDiedError,
        exceptions.WorkerCrashedError,
    ) as exc:
        init_failed = bool(getattr(exc, "actor_init_failed", False))
        lines = [line for line in str(exc).splitlines() if line.strip()] or [""]
        # a failed constructor's own exception is the last line of Ray's traceback
        died = ActorDied(f"{what}: {type(exc).__name__}: {lines[-1 if init_failed else 0]}")
        died.init_failed = init_failed
        raise died from None


class ActorEnv(LLMEnv):
    """An ``LLMEnv`` whose env lives in a Ray actor; subclasses say how a call reaches it."""

    def __init__(self, env_id: str, description: Mapping[str, Any]):
        # LLMEnv.__init__ is not called: the task source and the grading live in the actor.
        self.env_id = env_id
        self.source = None  # type: ignore[assignment]
        self.observation_space = description["observation_space"]
        self.action_space = description["action_space"]
        self.reward_range = tuple(description["reward_range"])  # type: ignore[assignment]
        self.outcome_reward_range = tuple(description["outcome_reward_range"])  # type: ignore[assignment]
        self.metadata = dict(description["metadata"])
        self.render_mode = description["render_mode"]
        self.domain = description["domain"]  # type: ignore[misc]
        self._episode = None

    def _call(self, op: str, *args: Any) -> Any:
        """Run ``llmgym.ray.actors.apply(env, op, args)`` in the actor and return its result."""
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)  # seeds the local np_random, as the env does there
        obs, info = self._call("reset", seed, options)
        return obs, info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._call("step", action)
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:  # type: ignore[override]
        if self.render_mode is None:
            return None
        out = self._call("render")
        return None if out is None else str(out)

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("get_state")
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise error.InvalidState("Expects a snapshot returned by get_state()")
        self._call("set_state", dict(state))

    def oracle_action(self) -> Any:
        return self._call("oracle_action")

    def secrets(self, task: Task) -> list[str]:
        return list(self._call("secrets", task))

    def task_reward_range(self, task: Task) -> tuple[float, float]:
        lo, hi = self._call("task_reward_range", task)
        return (float(lo), float(hi))

    @property
    def episode(self) -> Episode | None:
        """The actor's episode, rebuilt from a snapshot (None before the first reset)."""
        try:
            return episode_of(self.get_state())
        except error.ResetNeeded:
            return None


_NO_EPISODE = "no episode yet"


@dataclass
class Pending:
    """A call sent to an actor and not yet collected (what ``*_async`` returns)."""

    ref: Any
    actor: ActorInfo
    method: str
    args: tuple[Any, ...]


class RayEnv(ActorEnv):
    """An env of an :class:`~llmgym.ray.pool.EnvPool`, in one of its actors; ``close()`` gives
    the actor back to the pool. Resumes on a fresh actor from the last snapshot if its actor
    dies (at most ``pool.max_retries`` times per call)."""

    def __init__(self, pool: EnvPool, actor: ActorInfo):
        super().__init__(pool.env_id, actor.description)
        self.kwargs = dict(pool.kwargs)
        self._pool = pool
        self._actor = actor
        self._state: dict[str, Any] | None = None
        self._no_snapshot: str | None = _NO_EPISODE
        self._closed = False
        self.retries = 0
        """How many times this env moved to a new actor because one died."""

    def __repr__(self) -> str:
        return f"<RayEnv {self.env_id} in {self._actor}>"

    __str__ = __repr__

    @property
    def actor(self) -> ActorInfo:
        """The actor this env's episode lives in now."""
        return self._actor

    # --- calls, split in two so that a vector env can have many in flight -------------------

    def _submit(self, method: str, *args: Any) -> Pending:
        if self._closed:
            raise error.Error(f"{self!r} is closed")
        actor = self._actor
        return Pending(getattr(actor.handle, method).remote(*args), actor, method, args)

    def _collect(self, pending: Pending, attempt: int = 0) -> Any:
        what = f"{pending.method} on env actor {pending.actor}"
        try:
            return fetch(pending.ref, self._pool.timeout_s, what)
        except ActorDied as exc:
            if attempt >= self._pool.max_retries:
                raise ActorDied(
                    f"{exc}; the episode already moved {attempt} time(s) and gives up"
                ) from None
            self._move(pending, exc)
            return self._collect(self._submit(pending.method, *pending.args), attempt + 1)
        except CallTimedOut:
            self._actor = self._pool._replace(pending.actor)
            if self._state is not None:
                self._restore()
            raise

    def _move(self, pending: Pending, exc: ActorDied) -> None:
        """Replace the dead actor; restore the episode there unless the call starts one."""
        self._actor = self._pool._replace(pending.actor)
        self.retries += 1
        if pending.method == "reset" or self._no_snapshot == _NO_EPISODE:
            return  # nothing to resume: the call starts the episode, or there is none yet
        if self._state is None:
            raise ActorDied(
                f"The env actor {pending.actor} died mid-episode ({exc}) and {self.env_id} "
                f"keeps no snapshot to resume from ({self._no_snapshot}); call reset() to "
                "start another episode"
            ) from None
        self._restore()

    def _restore(self) -> None:
        assert self._state is not None
        what = f"restoring the snapshot on env actor {self._actor}"
        fetch(self._actor.handle.restore.remote(self._state), self._pool.timeout_s, what)

    def _call(self, op: str, *args: Any) -> Any:
        return self._collect(self._submit("call", op, args))

    def _keep(self, state: dict[str, Any] | None, problem: str | None) -> None:
        self._state, self._no_snapshot = state, problem

    # --- the Gymnasium API, with the snapshot kept after each call ----------------------------

    def reset_async(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Pending:
        gym.Env.reset(self, seed=seed)
        return self._submit("reset", seed, options)

    def reset_wait(self, pending: Pending) -> tuple[str, dict[str, Any]]:
        (obs, info), state, problem = self._collect(pending)
        self._keep(state, problem)
        return obs, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        return self.reset_wait(self.reset_async(seed=seed, options=options))

    def step_async(self, action: Any) -> Pending:
        return self._submit("step", action)

    def step_wait(self, pending: Pending) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        result, state, problem = self._collect(pending)
        self._keep(state, problem)
        obs, reward, terminated, truncated, info = result
        return obs, reward, terminated, truncated, info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.step_wait(self.step_async(action))

    def get_state(self) -> dict[str, Any]:
        if self._state is not None:
            return copy.deepcopy(self._state)
        return super().get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        self._keep(*self._collect(self._submit("snapshot")))

    @property
    def episode(self) -> Episode | None:
        if self._state is not None:
            return episode_of(self._state)
        return super().episode

    def close(self) -> None:
        """Give the actor back to the pool (the env is unusable afterwards)."""
        if not self._closed:
            self._closed = True
            self._pool.release(self)

    def discard(self) -> None:
        """Stop this env's actor instead of giving it back (after an error left it in doubt)."""
        if not self._closed:
            self._closed = True
            self._pool.release(self, broken=True)
