"""Planning a run: which task each episode plays, with which reset seed, fixed once.

Task ``i`` of an env entry is the first new task drawn by ``reset(seed=seed + i)`` (a dataset env
gives its tasks in order), and each (task, sample) episode gets a reset seed that is stable across
processes and machines. The plan is what ``plan.json`` stores and what a resumed run replays; it
plays nothing itself (``episodes.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from llmgym import error
from llmgym.evaluation.config import EvalConfig
from llmgym.evaluation.suites import EnvEntry
from llmgym.tasks import stable_seed

DEFAULT_EPISODES = 100
"""Tasks per env when neither the call nor a suite says (a dataset env defaults to all its tasks)."""


@dataclass(frozen=True)
class EpisodePlan:
    """One planned episode: which entry, which task, which sample, which reset seed."""

    key: str
    entry: int
    task_index: int
    task_id: str
    sample: int
    seed: int


def make_env(entry: EnvEntry) -> Any:
    """The entry's env, made with its kwargs; an unregistered id or a non-llmgym env is refused."""
    from llmgym.core import LLMEnv

    if entry.id not in gym.registry:
        from llmgym.registry import list_envs

        raise error.Error(
            f"Env {entry.id!r} is not registered; registered llmgym envs: {list_envs()}"
        )
    env = gym.make(entry.id, disable_env_checker=True, **entry.kwargs)
    if not isinstance(env.unwrapped, LLMEnv):
        env.close()
        raise error.Error(f"{entry.id} is not an llmgym env (LLMEnv); it cannot be evaluated")
    return env


def plan_tasks(entry: EnvEntry, env: Any, *, progress: bool = False) -> list[str]:
    """The task ids of an entry: task ``i`` is the first new one from ``reset(seed=seed + i)``.

    A finite (dataset) source asked for ``episodes=None``, or for at least as many tasks
    as it has, gives every task in its order. Otherwise draws that repeat a task are
    skipped; a source with fewer distinct tasks gives fewer (with a warning).
    """
    from tqdm.auto import tqdm

    source = env.unwrapped.source
    episodes = entry.episodes
    if isinstance(source, Sized) and hasattr(source, "__iter__"):
        family = env.unwrapped.family
        every = [t.id for t in source if family is None or t.family == family]
        if episodes is None or episodes >= len(every):
            if episodes is not None and episodes > len(every):
                warnings.warn(
                    f"{entry.name}: the dataset has {len(every)} tasks; evaluating all of them "
                    f"instead of {episodes}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return every
    if episodes is None:
        episodes = DEFAULT_EPISODES
    ids: list[str] = []
    seen: set[str] = set()
    limit = 10 * episodes + 100
    draws = 0
    with tqdm(
        total=episodes, desc=f"plan {entry.name}", unit="task", disable=not progress, leave=False
    ) as bar:
        while len(ids) < episodes and draws < limit:
            _, info = env.reset(seed=entry.seed + draws)
            draws += 1
            tid = str(info["task_id"])
            if tid not in seen:
                seen.add(tid)
                ids.append(tid)
                bar.update(1)
    if len(ids) < episodes:
        warnings.warn(
            f"{entry.name}: only {len(ids)} distinct tasks in {draws} draws; evaluating those "
            f"instead of {episodes}",
            RuntimeWarning,
            stacklevel=3,
        )
    return ids


def episode_seed(entry: EnvEntry, task_id: str, sample: int) -> int:
    """The reset seed of one episode: stable across processes and machines."""
    return stable_seed("eval", entry.seed, entry.id, task_id, sample) % 2**32


def make_plan(config: EvalConfig) -> tuple[list[EpisodePlan], dict[str, int]]:
    """Every episode of the run, in order; and the number of tasks per entry."""
    plan: list[EpisodePlan] = []
    counts: dict[str, int] = {}
    for i, entry in enumerate(config.envs):
        env = make_env(entry)
        try:
            ids = plan_tasks(entry, env, progress=config.progress)
        finally:
            env.close()
        counts[entry.name] = len(ids)
        for t, tid in enumerate(ids):
            for s in range(config.samples):
                plan.append(
                    EpisodePlan(
                        key=f"{entry.name}|{t}|{s}",
                        entry=i,
                        task_index=t,
                        task_id=tid,
                        sample=s,
                        seed=episode_seed(entry, tid, s),
                    )
                )
    return plan, counts
