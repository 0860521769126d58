"""A Gymnasium vector env whose sub-envs are Ray actors, stepped in parallel.

:func:`make_vec` returns a :class:`RayVectorEnv`: the same observations, rewards, flags and infos
as ``gymnasium.vector.SyncVectorEnv`` over the same envs and seeds (a tuple of strings per
observation batch, infos as dicts of arrays with ``_key`` masks, and Gymnasium's autoreset modes,
``next_step`` by default), but every sub-env's ``reset``/``step`` is sent to its actor before any
answer is awaited. Sub-envs are :class:`~llmgym.ray.env.RayEnv`\\ s of one
:class:`~llmgym.ray.pool.EnvPool`, so a dead actor's episode resumes from its last snapshot.

``gym.make_vec(id, vectorization_mode=...)`` cannot route here: Gymnasium 1.x accepts only its
own modes (``sync``, ``async``, ``vector_entry_point``), and a spec's ``vector_entry_point`` would
become the default of every ``gym.make_vec(id)`` and is not told the env id. Call
``llmgym.ray.make_vec`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from llmgym import error
from llmgym.ray.env import Pending, RayEnv
from llmgym.ray.pool import EnvPool


def _check_num_envs(num_envs: Any) -> None:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise error.Error(f"Expects num_envs to be an int >= 1, actual: {num_envs!r}")


class RayVectorEnv(VectorEnv):  # type: ignore[type-arg]
    """``num_envs`` envs of one pool, reset and stepped together; see the module docstring."""

    def __init__(
        self,
        pool: EnvPool,
        num_envs: int,
        *,
        copy: bool = True,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ):
        _check_num_envs(num_envs)
        self.pool = pool
        self.envs: list[RayEnv] = []
        try:
            self.envs = [pool.acquire() for _ in range(num_envs)]
        except BaseException:
            self.close()
            raise
        self.num_envs = num_envs
        self.copy = copy
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._observations: Any = create_empty_array(self.single_observation_space, num_envs)
        self._env_obs: list[Any] = [None] * num_envs
        self._rewards = np.zeros((num_envs,), dtype=np.float64)
        self._terminations = np.zeros((num_envs,), dtype=np.bool_)
        self._truncations = np.zeros((num_envs,), dtype=np.bool_)
        self._autoreset_envs = np.zeros((num_envs,), dtype=np.bool_)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env (``seed``: None, an int for ``seed + i``, or one per env)."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                f"but got length={len(seeds)}."
            )
        options = dict(options) if options is not None else None
        mask = np.ones((self.num_envs,), dtype=np.bool_)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"), dtype=np.bool_)
            if mask.shape != (self.num_envs,) or not mask.any():
                raise ValueError(
                    f"`options['reset_mask']` must be a bool array of shape ({self.num_envs},) "
                    "with at least one True value"
                )
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._autoreset_envs[mask] = False
        pending = {
            i: self.envs[i].reset_async(seed=seeds[i], options=options)
            for i in range(self.num_envs)
            if mask[i]
        }
        infos: dict[str, Any] = {}
        for i, p in pending.items():
            self._env_obs[i], info = self.envs[i].reset_wait(p)
            infos = self._add_info(infos, info, i)
        return self._batch(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env at once (autoreset as ``autoreset_mode`` says)."""
        sent: list[tuple[str, Pending]] = []
        for i, action in enumerate(iterate(self.action_space, actions)):
            env = self.envs[i]
            if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset_envs[i]:
                sent.append(("reset", env.reset_async()))
            else:
                if self.autoreset_mode == AutoresetMode.DISABLED:
                    assert not self._autoreset_envs[i], f"{self._autoreset_envs=}"
                sent.append(("step", env.step_async(action)))
        infos: dict[str, Any] = {}
        ended: dict[int, Pending] = {}
        for i, (kind, pending) in enumerate(sent):
            env = self.envs[i]
            if kind == "reset":
                self._env_obs[i], info = env.reset_wait(pending)
                self._rewards[i] = 0.0
                self._terminations[i] = self._truncations[i] = False
            else:
                obs, reward, terminated, truncated, info = env.step_wait(pending)
                self._env_obs[i], self._rewards[i] = obs, reward
                self._terminations[i], self._truncations[i] = terminated, truncated
                if self.autoreset_mode == AutoresetMode.SAME_STEP and (terminated or truncated):
                    infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                    ended[i] = env.reset_async()
                    continue
            infos = self._add_info(infos, info, i)
        for i, pending in ended.items():  # SAME_STEP: the resets, sent together, then awaited
            self._env_obs[i], info = self.envs[i].reset_wait(pending)
            infos = self._add_info(infos, info, i)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (
            self._batch(),
            np.copy(self._rewards),
            np.copy(self._terminations),
            np.copy(self._truncations),
            infos,
        )

    def _batch(self) -> Any:
        self._observations = concatenate(
            self.single_observation_space, self._env_obs, self._observations
        )
        return deepcopy(self._observations) if self.copy else self._observations

    def render(self) -> tuple[Any, ...] | None:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the actors (the pool is this vector env's own)."""
        self.pool.close()


def make_vec(
    env_id: str,
    num_envs: int = 1,
    *,
    address: str | None = None,
    autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    num_cpus_per_actor: float = 1,
    timeout_s: float = 300.0,
    **kwargs: Any,
) -> RayVectorEnv:
    """``num_envs`` copies of ``gym.make(env_id, **kwargs)`` in Ray actors spread over the
    cluster at ``address``, as one Gymnasium vector env.

    >>> envs = llmgym.ray.make_vec("llm/Math-v0", num_envs=8)  # doctest: +SKIP
    >>> observations, infos = envs.reset(seed=0)  # doctest: +SKIP
    """
    _check_num_envs(num_envs)
    pool = EnvPool(
        env_id,
        kwargs,
        min_actors=num_envs,
        max_actors=num_envs,
        address=address,
        num_cpus_per_actor=num_cpus_per_actor,
        idle_timeout_s=None,
        timeout_s=timeout_s,
    )
    try:
        return RayVectorEnv(pool, num_envs, autoreset_mode=autoreset_mode)
    except BaseException:
        pool.close()
        raise
