"""What runs inside an env actor: the env, the calls a driver may make on it, whole episodes.

:class:`EnvWorker` is the body of the actors of :class:`~llmgym.ray.pool.EnvPool` (Ray makes it
an actor class when a pool starts; this module does not import Ray). Its env is made from the
spec the driver shipped, and after ``reset`` and each ``step`` it hands back a snapshot
(``get_state``) with the result, which the driver keeps to resume the episode elsewhere if this
actor dies. :func:`apply` is the list of calls a proxy env may make (the session hosts of Ray
Serve use it too); :func:`play_episode` plays one episode against a policy, in an actor (the
oracle, scripted actions) or on the driver (any callable).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llmgym import error

MAX_EPISODE_STEPS = 10_000
"""Steps after which an episode that never ends is an error (as in ``llmgym eval``)."""

Choose = Callable[[Any, str, dict[str, Any]], Any]
"""How a policy picks an action: ``choose(env, observation, info) -> action``."""


@dataclass
class EpisodeResult:
    """One finished episode: what the env said at each step, and where it ran."""

    seed: int
    task_id: str
    rewards: list[float]
    terminated: bool
    truncated: bool
    success: bool
    node_id: str = field(default="", compare=False)
    """The Ray node whose actor played the last step (not part of the outcome)."""
    retries: int = field(default=0, compare=False)
    """How many times the episode moved to a new actor after one died."""

    @property
    def reward(self) -> float:
        return float(sum(self.rewards))


def describe(env: gym.Env[Any, Any]) -> dict[str, Any]:
    """What a proxy of ``env`` mirrors: spaces, reward ranges, render modes, domain."""
    base = env.unwrapped
    return {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "reward_range": tuple(getattr(base, "reward_range", (0.0, 1.0))),
        "outcome_reward_range": tuple(getattr(base, "outcome_reward_range", (0.0, 1.0))),
        "metadata": dict(env.metadata),
        "render_mode": env.render_mode,
        "domain": getattr(base, "domain", "generic"),
    }


def apply(env: gym.Env[Any, Any], op: str, args: Sequence[Any]) -> Any:
    """Run one call of a proxy env on the real ``env``; anything else is refused."""
    base: Any = env.unwrapped  # an LLMEnv; another env raises AttributeError on its calls
    if op == "reset":
        seed, options = args
        return env.reset(seed=seed, options=options)
    if op == "step":
        obs, reward, terminated, truncated, info = env.step(args[0])
        return obs, float(reward), bool(terminated), bool(truncated), info
    if op == "render":
        return env.render()
    if op == "get_state":
        return base.get_state()
    if op == "set_state":
        base.set_state(args[0])
        return None
    if op == "oracle_action":
        return base.oracle_action()
    if op == "secrets":
        return base.secrets(args[0])
    if op == "task_reward_range":
        return tuple(base.task_reward_range(args[0]))
    raise error.Error(f"Unknown env call {op!r}")


def snapshot(env: gym.Env[Any, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(get_state(), None)``, or ``(None, why not)`` for an env that cannot snapshot."""
    get_state = getattr(env.unwrapped, "get_state", None)
    if get_state is None:
        return None, f"{type(env.unwrapped).__name__} has no get_state()"
    try:
        return get_state(), None
    except Exception as exc:  # noqa: BLE001 - any failure means "no snapshot", said below
        return None, f"get_state() failed: {type(exc).__name__}: {exc}"


def oracle(env: Any, observation: str, info: dict[str, Any]) -> Any:
    """The oracle policy: the env's own gold action."""
    return env.unwrapped.oracle_action()


def scripted(actions: Sequence[Any]) -> Choose:
    """A policy playing ``actions`` in order (an error if the episode outlasts them)."""

    def choose(env: Any, observation: str, info: dict[str, Any]) -> Any:
        turn = int(info.get("turn", 0))
        if turn >= len(actions):
            raise error.Error(
                f"The scripted actions ran out: the episode is still going after {len(actions)} "
                "steps; give one action per step"
            )
        return actions[turn]

    return choose


def play_episode(
    env: Any, seed: int, options: Mapping[str, Any] | None, choose: Choose
) -> EpisodeResult:
    """Reset ``env`` with ``seed`` and step it with ``choose`` until the episode ends."""
    observation, info = env.reset(seed=seed, options=dict(options) if options else None)
    task_id = str(info.get("task_id", ""))
    rewards: list[float] = []
    for _ in range(MAX_EPISODE_STEPS):
        observation, reward, terminated, truncated, info = env.step(choose(env, observation, info))
        rewards.append(float(reward))
        if terminated or truncated:
            return EpisodeResult(
                seed=seed,
                task_id=task_id,
                rewards=rewards,
                terminated=bool(terminated),
                truncated=bool(truncated),
                success=bool(info.get("is_success")),
            )
    raise error.Error(f"The episode of seed {seed} did not end after {MAX_EPISODE_STEPS} steps")


class EnvWorker:
    """The body of one env actor: one env, made from the spec the driver shipped."""

    def __init__(self, spec: gym.envs.registration.EnvSpec, kwargs: dict[str, Any]):
        import ray

        from llmgym.ray.cluster import install_specs

        install_specs([spec])
        # No OrderEnforcing wrapper: a snapshot restored here starts mid-episode, which it would
        # refuse; the env itself raises ResetNeeded on a step before reset (LLMEnv does).
        unordered = dataclasses.replace(spec, order_enforce=False)
        self.env = gym.make(unordered, disable_env_checker=True, **kwargs)
        self.node_id = ray.get_runtime_context().get_node_id()

    def ready(self) -> dict[str, Any]:
        """Where this actor runs (node id, pid) and what its env looks like."""
        return {"node_id": self.node_id, "pid": os.getpid(), **describe(self.env)}

    def reset(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any] | None, str | None]:
        result = apply(self.env, "reset", (seed, options))
        return (result, *snapshot(self.env))

    def step(self, action: Any) -> tuple[Any, dict[str, Any] | None, str | None]:
        result = apply(self.env, "step", (action,))
        return (result, *snapshot(self.env))

    def restore(self, state: dict[str, Any]) -> None:
        apply(self.env, "set_state", (state,))

    def snapshot(self) -> tuple[dict[str, Any] | None, str | None]:
        return snapshot(self.env)

    def call(self, op: str, args: Sequence[Any]) -> Any:
        return apply(self.env, op, args)

    def play(self, jobs: Sequence[tuple[int, dict[str, Any] | None, Any]]) -> list[EpisodeResult]:
        """Play whole episodes here: each job is ``(seed, options, actions or "oracle")``."""
        results = []
        for seed, options, policy in jobs:
            choose = oracle if policy == "oracle" else scripted(policy)
            result = play_episode(self.env, seed, options, choose)
            result.node_id = self.node_id
            results.append(result)
        return results

    def close(self) -> None:
        self.env.close()
