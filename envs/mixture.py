"""MixtureEnv (``llm/Mixture-v0``): several llmgym environments behind one, sampled by weight, for joint training."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from llmgym import error
from llmgym.core import LLMEnv
from llmgym.tasks import Difficulty, Task, TaskSource

SEP = "::"
"""Separates the member name from the member's own task id or family: ``"llm/Math-v0::arith.add:0.00:7"``."""


@dataclass
class Member:
    """One environment of a mixture."""

    name: str
    env: LLMEnv
    weight: float
    kwargs: dict[str, Any] = field(default_factory=dict)


def split_id(text: str) -> tuple[str, str]:
    """``"name::rest"`` -> ``("name", "rest")``; InvalidTask/UnknownFamily callers say what is wrong.

    >>> split_id("llm/Math-v0::arith.add_small:0.00:3")
    ('llm/Math-v0', 'arith.add_small:0.00:3')
    """
    name, sep, rest = text.partition(SEP)
    if not sep:
        raise ValueError(f"expects '<member>{SEP}<id>', got {text!r}")
    return name, rest


class MixtureSource(TaskSource):
    """Tasks of the members, with member-prefixed ids and families."""

    domain = "mixture"

    def __init__(self, members: Sequence[Member]):
        self.members = {m.name: m for m in members}
        self._names = [m.name for m in members]
        weights = np.array([m.weight for m in members], dtype=float)
        self._p = weights / weights.sum()

    def member(self, name: str) -> Member:
        try:
            return self.members[name]
        except KeyError:
            raise error.UnknownTask(
                f"No member {name!r} in this mixture; members: {self._names}"
            ) from None

    def families(self) -> list[str]:
        return [f"{n}{SEP}{f}" for n in self._names for f in self.members[n].env.source.families()]

    def wrap(self, name: str, task: Task) -> Task:
        return replace(task, id=f"{name}{SEP}{task.id}", family=f"{name}{SEP}{task.family}")

    def unwrap(self, task: Task) -> tuple[Member, Task]:
        """The member a mixture task belongs to, and the task as that member knows it."""
        try:
            name, inner_id = split_id(task.id)
            _, inner_family = split_id(task.family)
        except ValueError as e:
            raise error.UnknownTask(f"Not a mixture task: {e}") from None
        return self.member(name), replace(task, id=inner_id, family=inner_family)

    def sample(
        self, rng: np.random.Generator, *, difficulty: Difficulty = None, family: str | None = None
    ) -> Task:
        if family is not None:
            try:
                name, inner_family = split_id(family)
            except ValueError:
                raise error.UnknownFamily(
                    f"Mixture families are '<member>{SEP}<family>', got {family!r}; see list_families()"
                ) from None
        else:
            name = self._names[int(rng.choice(len(self._names), p=self._p))]
            inner_family = None
        m = self.member(name)
        inner = m.env.source.sample(
            rng,
            difficulty=difficulty if difficulty is not None else m.env.difficulty,
            family=inner_family if inner_family is not None else m.env.family,
        )
        return self.wrap(name, inner)

    def get(self, task_id: str) -> Task:
        try:
            name, inner_id = split_id(task_id)
        except (ValueError, AttributeError):
            raise error.UnknownTask(
                f"Mixture task ids are '<member>{SEP}<task id>', got {task_id!r}"
            ) from None
        return self.wrap(name, self.member(name).env.source.get(inner_id))


def _parse_members(envs: Any) -> list[tuple[str, str, float, dict[str, Any]]]:
    """``(name, env id, weight, kwargs)`` of each entry of the ``envs`` argument."""
    if envs is None:
        from llmgym.registry import list_envs

        ids = [
            i
            for i in list_envs("llm")
            if "Mixture" not in i  # a mixture of mixtures would recurse
        ]
        if not ids:
            raise error.Error("No llm/ environments are registered; pass envs=[...] explicitly")
        return [(i, i, 1.0, {}) for i in ids]
    if isinstance(envs, Mapping):
        envs = [{"id": k, "weight": v} for k, v in envs.items()]
    if isinstance(envs, str) or not isinstance(envs, Sequence) or not envs:
        raise error.Error(
            "Expects envs as a non-empty list of env ids or {'id', 'weight', 'kwargs', 'name'} dicts, "
            f"or a mapping {{env id: weight}}; actual: {envs!r:.100}"
        )
    out = []
    for i, entry in enumerate(envs):
        if isinstance(entry, str):
            entry = {"id": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            raise error.Error(
                f"envs[{i}] must be an env id or a dict with an 'id', got {entry!r:.100}"
            )
        unknown = set(entry) - {"id", "weight", "kwargs", "name"}
        if unknown:
            raise error.Error(
                f"envs[{i}]: unknown key(s) {sorted(unknown)}; expected id, weight, kwargs, name"
            )
        weight = entry.get("weight", 1.0)
        if not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise error.Error(f"envs[{i}]: weight must be a finite number > 0, got {weight!r}")
        kwargs = entry.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise error.Error(f"envs[{i}]: kwargs must be a mapping of gym.make keyword arguments")
        name = entry.get("name", entry["id"])
        if not isinstance(name, str) or not name or SEP in name:
            raise error.Error(
                f"envs[{i}]: name must be a non-empty str without {SEP!r}, got {name!r}"
            )
        out.append((name, entry["id"], float(weight), dict(kwargs)))
    names = [n for n, *_ in out]
    if len(set(names)) != len(names):
        raise error.Error(
            "Two members share a name; give each entry a distinct 'name' (e.g. the same env id twice "
            "with different kwargs)"
        )
    return out


class MixtureEnv(LLMEnv):
    """Several llmgym environments behind one: each episode is a task of one member, drawn by weight.

    ## Description
    Joint training across domains: ``llm/Mixture-v0`` holds member environments (any registered
    llmgym env ids, each with its own kwargs and a sampling weight). ``reset`` draws a member by
    weight (or the one ``options`` name) and a task of that member, and every later call (``step``,
    ``oracle_action``, ``get_state``, ``render``) goes to that member, so each domain keeps its own
    prompts, tools, verifier and multi-turn logic. Task ids and families are prefixed with the
    member's name (``"llm/Math-v0::arith.add_small:0.00:7"``), so ``options={"task_id": ...}``
    replays any task and ``llmgym.list_families("llm/Mixture-v0")`` lists every member's families
    (the arms of :class:`llmgym.agents.scheduler.TaskScheduler`). ``info["domain"]`` is the member
    task's own domain, so training logs ``rewards/<domain>`` per domain.

    ## Action Space
    ``Text()``: the assistant's message (``str`` or OpenAI-style dict), passed to the member.

    ## Observation Space
    ``Text()``: the member's observations.

    ## Rewards
    The member's reward. ``reward_range`` is the current episode's member's range (before the
    first reset, the union of the members' ranges).

    ## Starting State
    A member drawn with the env's ``np_random`` by weight, then a task drawn by that member's
    source (with the member's own ``difficulty``/``family`` unless ``options`` or the mixture's
    ``difficulty`` override them).

    ## Episode End
    As the member's episode ends.

    ## Arguments
    ``envs``: a list of env ids or ``{"id", "weight", "kwargs", "name"}`` dicts, or a mapping
    ``{env id: weight}``; default: every registered ``llm/`` env, weight 1. Plus ``difficulty``,
    ``family`` (a ``"<member>::<family>"`` name) and ``render_mode``.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/Mixture-v0", envs=[{"id": "llm/Math-v0", "weight": 3,
    ...     "kwargs": {"family": "arith.add_small", "difficulty": 0.0}}, "llm/LongDoc-v0"])
    >>> obs, info = env.reset(seed=0)
    >>> info["task_id"].split("::")[0], info["domain"]
    ('llm/Math-v0', 'math')
    """

    domain = "mixture"

    def __init__(
        self,
        envs: Any = None,
        *,
        difficulty: Difficulty = None,
        family: str | None = None,
        render_mode: str | None = None,
    ):
        members = []
        for name, env_id, weight, kwargs in _parse_members(envs):
            try:
                env = gym.make(
                    env_id, disable_env_checker=True, render_mode=render_mode, **kwargs
                ).unwrapped
            except error.DependencyNotInstalled:
                if envs is None:  # the default mixture: every env this installation can make
                    continue
                raise
            except gym.error.Error as e:
                raise error.Error(f"Mixture member {name!r}: cannot make {env_id!r}: {e}") from None
            if not isinstance(env, LLMEnv):
                raise error.Error(f"Mixture member {name!r} ({env_id}) is not an llmgym.LLMEnv")
            members.append(Member(name, env, weight, kwargs))
        source = MixtureSource(members)
        max_obs = max(
            (getattr(m.env.observation_space, "max_length", None) or 0 for m in members),
            default=0,
        )
        super().__init__(
            source,
            difficulty=difficulty,
            family=family,
            render_mode=render_mode,
            max_turns=max(m.env.max_turns for m in members),
            max_observation_length=max_obs or (1 << 20),
        )
        self.source: MixtureSource = source
        self.members = source.members
        lows, highs = zip(*(m.env.reward_range for m in members), strict=True)
        self._union_range = (min(lows), max(highs))
        self.reward_range = self._union_range
        self._current: Member | None = None

    # --- routing -----------------------------------------------------------------------------------

    def _member(self) -> Member:
        if self._current is None:
            raise error.ResetNeeded("Cannot call step() before reset(); call env.reset() first")
        return self._current

    def _choose(self, options: Mapping[str, Any] | None) -> Task:
        options = dict(options or {})
        unknown = set(options) - {"task_id", "task", "difficulty", "family"}
        if unknown:
            raise error.Error(
                f"Unknown reset option(s) {sorted(map(str, unknown))}; expected task_id, task, difficulty, family"
            )
        if options.get("task") is not None:
            task = options["task"]
            return task if isinstance(task, Task) else Task.from_dict(task)
        if options.get("task_id") is not None:
            return self.source.get(options["task_id"])
        return self.source.sample(
            self.np_random,
            difficulty=options.get("difficulty", self.difficulty),
            family=options.get("family", self.family),
        )

    # --- Gymnasium API ---------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)
        member, inner = self.source.unwrap(self._choose(options))
        member_seed = int(self.np_random.integers(0, 2**31 - 1))
        obs, info = member.env.reset(seed=member_seed, options={"task": inner})
        self._current = member
        self.reward_range = member.env.reward_range
        return obs, self._outer_info(info)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._member().env.step(action)
        return obs, reward, terminated, truncated, self._outer_info(info)

    def _outer_info(self, info: dict[str, Any]) -> dict[str, Any]:
        member = self._member()
        info = dict(info)
        if "task_id" in info:
            info["task_id"] = f"{member.name}{SEP}{info['task_id']}"
        if "family" in info:
            info["family"] = f"{member.name}{SEP}{info['family']}"
        info["member"] = member.name
        return info

    def render(self) -> str | None:  # type: ignore[override]
        return None if self._current is None else self._current.env.render()

    def close(self) -> None:
        for m in self.members.values():
            m.env.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> MixtureEnv:
        """A copy with its own member envs. A caller that shares this env's task source through
        ``memo`` (``llmgym.search`` clones an env so, sharing its catalogue and leaving out its
        episode) gets the same for each member instead: this source also holds the member envs,
        and a copy sharing them would step and close the original's episodes."""
        if memo.get(id(self.source)) is self.source:
            del memo[id(self.source)]
            episode = self.episode
            for m in self.members.values():
                memo[id(m.env.source)] = m.env.source
                if episode is not None and id(episode) in memo and m.env.episode is not None:
                    memo[id(m.env.episode)] = memo[id(episode)]
        twin = object.__new__(type(self))
        memo[id(self)] = twin
        for name, value in vars(self).items():
            twin.__dict__[name] = copy.deepcopy(value, memo)
        return twin

    # --- delegated hooks ------------------------------------------------------------------------------

    @property
    def episode(self) -> Any:
        return None if self._current is None else self._current.env.episode

    def secrets(self, task: Task) -> list[str]:
        if SEP in task.id:
            member, inner = self.source.unwrap(task)
            return member.env.secrets(inner)
        return self._member().env.secrets(task)

    def task_reward_range(self, task: Task) -> tuple[float, float]:
        if SEP in task.id:
            member, inner = self.source.unwrap(task)
            return member.env.task_reward_range(inner)
        return self._member().env.task_reward_range(task)

    def oracle_action(self) -> Any:
        return self._member().env.oracle_action()

    def get_state(self) -> dict[str, Any]:
        member = self._member()
        return {
            "format": 1,
            "env": type(self).__name__,
            "member": member.name,
            "state": member.env.get_state(),
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or state.get("env") != type(self).__name__:
            raise error.InvalidState("Expects a snapshot returned by MixtureEnv.get_state()")
        try:
            member = self.source.member(state["member"])
        except (KeyError, error.UnknownTask) as e:
            raise error.InvalidState(f"Malformed mixture snapshot: {e}") from None
        member.env.set_state(state["state"])
        self.np_random.bit_generator.state = state["rng"]
        self._current = member
        self.reward_range = member.env.reward_range
