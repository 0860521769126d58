"""check_env: Gymnasium's checker plus the LLM contract; EnvContractTests for plugin authors."""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env as gym_check_env

from llmgym import error
from llmgym.core import LLMEnv

GARBAGE_ACTIONS = ("", "asdf qwerty", "I don't know.", "\x00\ud800 ☃ " * 50, "}{)(][" * 20)


class ContractViolation(error.Error, AssertionError):
    """An environment breaks the llmgym environment contract."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolation(message)


def _unwrap(env: gym.Env[Any, Any]) -> LLMEnv:
    base = env.unwrapped
    _expect(isinstance(base, LLMEnv), f"Expects an llmgym.LLMEnv, actual: {type(base).__name__}")
    assert isinstance(base, LLMEnv)
    return base


def _in_range(env: LLMEnv, reward: float, where: str) -> None:
    lo, hi = env.reward_range
    _expect(math.isfinite(reward), f"{where}: reward {reward!r} is not finite")
    _expect(
        lo - 1e-9 <= reward <= hi + 1e-9,
        f"{where}: reward {reward} outside reward_range {env.reward_range}",
    )


def _play(env: LLMEnv, seed: int, policy: Any) -> tuple[float, list[float], dict[str, Any], str]:
    obs, info = env.reset(seed=seed)
    rewards: list[float] = []
    for _ in range(10_000):
        obs, reward, terminated, truncated, info = env.step(policy(env))
        _expect(env.observation_space.contains(obs), "observation is not in the observation space")
        _in_range(
            env, float(reward), f"seed {seed}, task {env.episode.task.id if env.episode else '?'}"
        )
        rewards.append(float(reward))
        if terminated or truncated:
            break
    return sum(rewards), rewards, info, obs


DATASET_ORACLE_LIMIT = 1000
"""How many tasks of a dataset ``check_env`` plays the oracle on by default: all of a dataset up
to this size (HumanEval, MBPP, a BFCL category), an even spread of a larger one."""


def _oracle_task_ids(base: LLMEnv, exhaustive: bool, per_family: int) -> list[tuple[str, str]]:
    """(task id, family) of the tasks whose oracle :func:`check_env` plays: every task of a
    dataset (up to :data:`DATASET_ORACLE_LIMIT` unless ``exhaustive``); ``per_family`` tasks of
    each procedural family, at spread difficulties."""
    source = getattr(base, "source", None)
    if source is None:
        return []
    tasks = None
    try:
        tasks = list(source)  # type: ignore[call-overload]
    except TypeError:
        pass
    if tasks is not None:
        if not exhaustive and len(tasks) > DATASET_ORACLE_LIMIT:
            step = len(tasks) / DATASET_ORACLE_LIMIT
            tasks = [tasks[int(i * step)] for i in range(DATASET_ORACLE_LIMIT)]
        return [(t.id, t.family) for t in tasks]
    build = getattr(source, "build", None)
    if build is None:
        return []
    out = []
    count = per_family * (4 if exhaustive else 1)
    for fam in source.families():
        for k in range(count):
            difficulty = k / max(count - 1, 1)
            out.append((build(fam, difficulty, k).id, fam))
    return out


def check_oracles(
    env: gym.Env[Any, Any], *, exhaustive: bool = False, per_family: int = 2
) -> list[tuple[str, str]]:
    """Play the oracle on every task of a dataset env (or ``per_family`` tasks of each
    procedural family) and return ``(task id, feedback)`` for each that does not succeed."""
    base = _unwrap(env)
    failures = []
    for task_id, _family in _oracle_task_ids(base, exhaustive, per_family):
        base.reset(options={"task_id": task_id})
        info: dict[str, Any] = {}
        for _ in range(10_000):
            _, _, terminated, truncated, info = base.step(base.oracle_action())
            if terminated or truncated:
                break
        if not info.get("is_success"):
            failures.append((task_id, str(info.get("feedback"))[:300]))
    return failures


def check_env(
    env: gym.Env[Any, Any],
    *,
    seeds: tuple[int, ...] = (0, 1, 2),
    skip_gymnasium: bool = False,
    exhaustive: bool = False,
    oracle_per_family: int = 2,
) -> None:
    """Check Gymnasium's contract and llmgym's; raises ContractViolation naming what failed.

    LLM checks: ``reset(seed)`` is deterministic; secrets (gold answers, hidden tests) never
    appear in observations or messages; rewards are finite and in ``reward_range``; the
    oracle succeeds with full marks on single-step episodes; empty and garbage answers do
    not succeed and score below the oracle; non-text actions and stepping a finished
    episode raise clear errors; ``get_state``/``set_state`` replays exactly.

    Beyond the seeds, the oracle must succeed on every task of a dataset env (the first
    :data:`DATASET_ORACLE_LIMIT`, spread, unless ``exhaustive``) and on ``oracle_per_family``
    tasks of each procedural family (four times as many with ``exhaustive``): a dataset whose
    grader cannot pass a few of its own reference solutions fails here, not in training.
    """
    base = _unwrap(env)
    if not skip_gymnasium:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gym_check_env(base, skip_render_check=True)

    for seed in seeds:
        obs_a, info_a = base.reset(seed=seed)
        obs_b, info_b = base.reset(seed=seed)
        _expect(
            obs_a == obs_b and info_a["task_id"] == info_b["task_id"],
            f"reset(seed={seed}) is not deterministic",
        )
        for key in (
            "task_id",
            "domain",
            "family",
            "difficulty",
            "messages",
            "tools",
            "subtask",
            "max_turns",
        ):
            _expect(key in info_a, f"reset info lacks {key!r}")
        _expect(
            base.observation_space.contains(obs_a),
            "reset observation is not in the observation space",
        )
        assert base.episode is not None
        secrets = base.secrets(base.episode.task)
        shown = obs_a + "".join(str(m.get("content")) for m in info_a["messages"])
        for secret in secrets:
            _expect(
                secret not in shown,
                f"seed {seed}: a secret ({secret[:40]!r}...) appears in the prompt",
            )

        oracle_return, oracle_rewards, info, _ = _play(base, seed, lambda e: e.oracle_action())
        _expect(
            bool(info.get("is_success")),
            f"seed {seed}: the oracle does not succeed ({info.get('feedback')!r})",
        )
        if len(oracle_rewards) == 1:
            mode = base.episode.mode if base.episode else None
            task = base.episode.task if base.episode else None
            full = (
                base.reward_range[1]
                if mode == "joint" or task is None
                else base.task_reward_range(task)[1]
            )
            _expect(
                abs(oracle_rewards[0] - full) < 1e-6,
                f"seed {seed}: the oracle scores {oracle_rewards[0]}, not full marks {full}",
            )
        for garbage in GARBAGE_ACTIONS:
            ret, _, info, obs = _play(base, seed, lambda e, g=garbage: g)
            _expect(not info.get("is_success"), f"seed {seed}: garbage {garbage[:20]!r} succeeds")
            _expect(
                ret < oracle_return,
                f"seed {seed}: garbage {garbage[:20]!r} scores as much as the oracle",
            )
            for secret in secrets:
                text = obs + "".join(str(m.get("content")) for m in info["messages"])
                _expect(secret not in text, f"seed {seed}: a secret leaks into the feedback")

        # Misuse: stepping a finished episode, non-text actions.
        try:
            base.step("late")
            raise ContractViolation("step() after the episode ended did not raise ResetNeeded")
        except error.ResetNeeded:
            pass
        base.reset(seed=seed)
        for bad in (None, 42, ["list"], {"content": 3}):
            try:
                base.step(bad)
                raise ContractViolation(f"step({bad!r}) did not raise InvalidAction")
            except gym.error.InvalidAction:
                pass

        # Snapshots: branch from the start twice and get the same step.
        base.reset(seed=seed)
        state = base.get_state()
        first = base.step(base.oracle_action())
        base.set_state(state)
        second = base.step(base.oracle_action())
        _expect(
            first[:4] == second[:4],
            f"seed {seed}: set_state(get_state()) does not replay the same step",
        )

    if oracle_per_family > 0 or exhaustive:
        failed = check_oracles(base, exhaustive=exhaustive, per_family=max(oracle_per_family, 1))
        _expect(
            not failed,
            f"the oracle fails {len(failed)} task(s), e.g. "
            + "; ".join(f"{tid}: {why}" for tid, why in failed[:3]),
        )


class EnvContractTests:
    """Pytest mixin: subclass it, set ``env_id`` (and ``env_kwargs``), and the contract is tested.

    >>> class TestMyEnv(EnvContractTests):  # doctest: +SKIP
    ...     env_id = "acme/Tickets-v0"
    """

    env_id: str = ""
    env_kwargs: dict[str, Any] = {}
    seeds: tuple[int, ...] = (0, 1, 2)

    def make_env(self) -> gym.Env[Any, Any]:
        return gym.make(self.env_id, **self.env_kwargs)

    def test_contract(self) -> None:
        env = self.make_env()
        try:
            check_env(env, seeds=self.seeds)
        finally:
            env.close()

    def test_step_before_reset(self) -> None:
        env = self.make_env().unwrapped
        try:
            env.step("hello")
        except gym.error.ResetNeeded:
            return
        finally:
            env.close()
        raise ContractViolation("step() before reset() did not raise ResetNeeded")

    def test_replay_by_task_id(self) -> None:
        env = self.make_env()
        obs, info = env.reset(seed=self.seeds[0])
        env.reset(seed=self.seeds[0] + 1000)
        again, info2 = env.reset(options={"task_id": info["task_id"]})
        env.close()
        if again != obs or info2["task_id"] != info["task_id"]:
            raise ContractViolation("reset(options={'task_id': ...}) does not replay the task")
