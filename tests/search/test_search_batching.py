"""Batched search (issue 20): the env steps of one policy call's children run together on env
clones, and MCTS samples several simulations' expansions in one policy call.

The trees must be exactly those of the one-at-a-time path under a seed, on the test env and on
every registered env id; steps must really overlap; failures keep the same partial tree; clones
and threads must not outlive a search; budgets hold at every batch size.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import pytest
from search_envs import OPTIMUM, LetterPolicy, LetterTreeEnv, MixedOraclePolicy

import llmgym
from llmgym import error
from llmgym.policies import Policy, Request, Response
from llmgym.search import Budget, SearchError, beam_search, best_of_n, mcts, search
from llmgym.search.methods import puct_child
from llmgym.search.stepper import Stepped, Stepper, clone_env, step_from
from llmgym.search.tree import Tree

SPECS = ["best_of_n:8", "beam:3x4", "mcts:60"]
STEP_S = 0.2
"""How long a SlowLetterEnv step waits."""


def fresh(env_cls: type[LetterTreeEnv] = LetterTreeEnv) -> LetterTreeEnv:
    env = env_cls()
    env.reset(seed=0)
    return env


def comparable(result: Any) -> dict[str, Any]:
    """The tree JSON without what may differ between runs that build the same tree."""
    tree = result.tree()
    tree["stats"] = {k: v for k, v in tree["stats"].items() if k not in ("wall_s", "env_clones")}
    return tree


class SlowLetterEnv(LetterTreeEnv):
    """Each step waits outside the interpreter (as a sandbox run does) and records how many
    steps were in flight at once."""

    lock = threading.Lock()
    in_flight = 0
    most = 0

    def respond(self, episode: Any, message: dict[str, Any]) -> Any:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
        try:
            time.sleep(STEP_S)
            return super().respond(episode, message)
        finally:
            with cls.lock:
                cls.in_flight -= 1


class BrokenOnD(LetterTreeEnv):
    """The env itself fails on the letter "d" (a sandbox down, say)."""

    def respond(self, episode: Any, message: dict[str, Any]) -> Any:
        if message["content"].startswith("d"):
            raise RuntimeError("sandbox went away")
        return super().respond(episode, message)


class Uncopyable(LetterTreeEnv):
    """Holds a lock (deepcopy fails) and has no registry spec: cannot be cloned."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.guard = threading.Lock()


class SelfNamed(LetterTreeEnv):
    """Its snapshot names the instance, so a clone never restores it exactly."""

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "instance": id(self)}


class Counted(LetterTreeEnv):
    """Counts the instances closed (the clones a search made)."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


class SpellsInItsSource(LetterTreeEnv):
    """Keeps the word spelt in its task source too (as the mixture kept its member envs there):
    a copy that shares the source spells into the original's word."""

    closed = 0

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.source.pad = {"word": ""}  # type: ignore[attr-defined]

    def respond(self, episode: Any, message: dict[str, Any]) -> Any:
        turn = super().respond(episode, message)
        self.source.pad["word"] = episode.extra["word"]  # type: ignore[attr-defined]
        return turn

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "pad": dict(self.source.pad)}  # type: ignore[attr-defined]

    def set_state(self, state: Any) -> None:
        super().set_state(state)
        self.source.pad["word"] = state["pad"]["word"]  # type: ignore[attr-defined]

    def close(self) -> None:
        type(self).closed += 1


class BatchSizes(LetterPolicy):
    """A LetterPolicy that records the number of samples of each generate call."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.sizes: list[int] = []

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.sizes.append(len(requests))
        return super().generate(requests)


# --- env steps together -----------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [0, 3])
def test_steps_on_clones_build_the_tree_of_the_one_by_one_path(spec: str, seed: int) -> None:
    alone = search(fresh(), LetterPolicy(seed), spec, env_workers=1)
    together = search(fresh(), LetterPolicy(seed), spec, env_workers=4)
    assert comparable(together) == comparable(alone)
    assert alone.stats["env_clones"] == 0 < together.stats["env_clones"] <= 3
    assert [n.state for n in together.nodes] == [n.state for n in alone.nodes]


@pytest.mark.timeout(60)
def test_steps_of_one_call_really_overlap() -> None:
    SlowLetterEnv.most = 0
    start = time.perf_counter()
    result = best_of_n(fresh(SlowLetterEnv), LetterPolicy(0), n=8, budget=8, env_workers=8)
    wall = time.perf_counter() - start
    steps = result.stats["env_steps"]  # one per distinct letter sampled
    assert steps >= 3 and result.stats["generate_calls"] == 1
    assert SlowLetterEnv.most > 1
    assert wall < steps * STEP_S  # one after another would take at least this
    SlowLetterEnv.most = 0
    best_of_n(fresh(SlowLetterEnv), LetterPolicy(0), n=8, budget=8, env_workers=1)
    assert SlowLetterEnv.most == 1


@pytest.mark.parametrize("workers", [1, 4])
def test_an_env_failure_keeps_the_partial_tree_of_the_one_by_one_path(workers: int) -> None:
    with pytest.raises(SearchError, match="RuntimeError: sandbox went away") as caught:
        best_of_n(fresh(BrokenOnD), LetterPolicy(0), n=12, env_workers=workers)
    partial = caught.value.partial
    assert partial is not None
    with pytest.raises(SearchError) as reference:
        best_of_n(fresh(BrokenOnD), LetterPolicy(0), n=12, env_workers=1)
    assert reference.value.partial is not None
    assert comparable(partial) == comparable(reference.value.partial)
    assert all(not str(n.action or "").startswith("d") for n in partial.nodes)
    assert len(partial.nodes) > 1
    json.dumps(partial.tree())


def test_an_env_that_cannot_be_cloned_is_stepped_one_by_one() -> None:
    env = fresh(Uncopyable)
    assert clone_env(env) is None
    result = best_of_n(env, LetterPolicy(1), n=6, env_workers=8)
    assert result.stats["env_clones"] == 0
    assert comparable(result) == comparable(best_of_n(fresh(), LetterPolicy(1), n=6, env_workers=1))


def test_a_clone_that_does_not_restore_the_snapshot_is_not_used() -> None:
    assert clone_env(fresh(SelfNamed)) is None
    assert clone_env(fresh()) is not None


def test_clones_are_closed_and_no_thread_outlives_a_search() -> None:
    Counted.closed = 0
    result = beam_search(fresh(Counted), LetterPolicy(2), width=2, expand=4, env_workers=4)
    assert result.stats["env_clones"] == Counted.closed == 3
    with pytest.raises(SearchError):
        best_of_n(fresh(BrokenOnD), LetterPolicy(0), n=12, env_workers=4)
    names = [t.name for t in threading.enumerate()]
    assert not [n for n in names if n.startswith("llmgym-search-step")], names


def test_the_search_env_is_left_at_the_root_and_not_closed() -> None:
    env = fresh(Counted)
    root = json.dumps(env.get_state(), sort_keys=True)
    Counted.closed = 0
    mcts(env, LetterPolicy(0), calls=40, env_workers=4)
    assert json.dumps(env.get_state(), sort_keys=True) == root
    assert env.step("c")[1] == 0.25  # still usable: only the clones were closed


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "4"])
def test_bad_env_workers_are_refused(workers: Any) -> None:
    with pytest.raises(error.Error, match="env_workers"):
        best_of_n(fresh(), LetterPolicy(0), n=2, env_workers=workers)


def test_a_stepper_with_no_jobs_and_jobs_after_close_work() -> None:
    env = fresh()
    stepper = Stepper(env, 4)
    assert stepper.step_all([]) == []
    root = env.get_state()
    outs = stepper.step_all([(root, "c"), (root, "a")])
    assert [o.reward for o in outs] == [0.25, 0.3]  # type: ignore[union-attr]
    stepper.close()
    assert [o.reward for o in stepper.step_all([(root, "c"), (root, "b")])] == [0.25, 0.0]  # type: ignore[union-attr]
    stepper.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", llmgym.list_envs())
def test_every_env_id_builds_the_same_tree_on_clones(env_id: str) -> None:
    trees = []
    for workers in (1, 4):
        env = gym.make(env_id)
        try:
            env.reset(seed=0)
            result = best_of_n(
                env, MixedOraclePolicy(), n=4, budget=Budget(calls=10), env_workers=workers
            )
            trees.append(comparable(result))
            clones = result.stats["env_clones"]
        finally:
            env.close()
    assert clones > 0  # the second search did step on clones
    assert json.dumps(trees[0], sort_keys=True, default=repr) == json.dumps(
        trees[1], sort_keys=True, default=repr
    )


def test_a_copy_sharing_episode_state_is_not_used_nor_closed() -> None:
    env = fresh(SpellsInItsSource)
    env.step("c")
    own = env.get_state()
    SpellsInItsSource.closed = 0
    assert clone_env(env) is None  # moving the copy moved the original's word
    assert env.get_state() == own and SpellsInItsSource.closed == 0
    env.set_state(fresh(SpellsInItsSource).get_state())
    result = best_of_n(env, LetterPolicy(1), n=6, env_workers=8)
    assert result.stats["env_clones"] == 0
    assert comparable(result) == comparable(
        best_of_n(fresh(SpellsInItsSource), LetterPolicy(1), n=6, env_workers=1)
    )


def _different_snapshots(env: Any, n: int = 16) -> list[dict[str, Any]]:
    """Snapshots of ``n`` resets, every other one a step on where the episode goes on."""
    out = []
    for seed in range(n):
        env.reset(seed=seed)
        if seed % 2:
            env.step("I am not sure.")
            if env.unwrapped.episode is not None and env.unwrapped.episode.done:
                env.reset(seed=seed)
        out.append(env.get_state())
    return out


def _outcome(out: Stepped | Exception) -> str:
    if isinstance(out, Exception):
        return repr(out)
    return json.dumps([out.reward, out.terminated, out.truncated, out.state], default=repr)


MIXTURES = {
    "math+instruct": {"envs": ["llm/Math-v0", "llm/Instruct-v0"]},
    "joint": "mixture_kwargs",
}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", [*llmgym.list_envs(), *MIXTURES])
def test_every_env_steps_different_snapshots_on_clones_as_one_by_one(env_id: str) -> None:
    if env_id in MIXTURES:
        kwargs = MIXTURES[env_id]
        if kwargs == "mixture_kwargs":
            from llmgym.agents.joint import mixture_kwargs

            kwargs = mixture_kwargs()
        env = gym.make("llm/Mixture-v0", **kwargs).unwrapped
    else:
        env = gym.make(env_id).unwrapped
    try:
        states = _different_snapshots(env)
        actions = []
        for i, state in enumerate(states):
            env.set_state(state)
            actions.append(env.oracle_action() if i % 4 < 2 else f"\\boxed{{{i}}}")
        jobs = list(zip(states, actions, strict=True))
        alone = []
        for state, action in jobs:
            try:
                alone.append(_outcome(step_from(env, state, action)))
            except Exception as e:  # noqa: BLE001 - a failure is an outcome to compare
                alone.append(repr(e))
        twin = clone_env(env)
        assert twin is not None
        own = json.dumps(env.get_state(), sort_keys=True, default=repr)
        for state in states:  # a state set on the clone is not the original's
            twin.set_state(state)
            assert json.dumps(env.get_state(), sort_keys=True, default=repr) == own
        twin.close()
        stepper = Stepper(env, 8)
        together = [_outcome(out) for out in stepper.step_all(jobs)]
        assert stepper.clones == 7
        env.set_state(states[-1])
        stepper.close()
        assert json.dumps(env.get_state(), sort_keys=True, default=repr) == json.dumps(
            states[-1], sort_keys=True, default=repr
        )
        assert together == alone
        env.step(actions[-1])  # still usable: the clones closed only what they own
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_batched_mcts_on_the_sandbox_env_builds_the_same_tree_on_clones() -> None:
    trees = []
    for workers in (1, 8):
        env = gym.make("llm/CodingMultiTurn-v0")
        try:
            env.reset(seed=1)
            result = mcts(env, MixedOraclePolicy(), calls=24, batch=8, env_workers=workers)
            trees.append(comparable(result))
        finally:
            env.close()
    assert trees[0]["stats"]["env_steps"] > 1
    assert json.dumps(trees[0], sort_keys=True) == json.dumps(trees[1], sort_keys=True)


# --- MCTS: several samples per policy call ----------------------------------------------------


def test_mcts_batch_1_samples_one_message_per_call() -> None:
    policy = BatchSizes(0)
    result = mcts(fresh(), policy, calls=60, batch=1)
    assert set(policy.sizes) == {1}
    assert result.stats["generate_calls"] == len(policy.sizes) == result.stats["calls"]


def test_batched_mcts_carries_several_samples_per_call() -> None:
    policy = BatchSizes(0)
    result = mcts(fresh(), policy, calls=120, batch=8)
    assert max(policy.sizes) > 1
    assert result.stats["generate_calls"] == len(policy.sizes) < result.stats["calls"] / 2
    assert sum(policy.sizes) == result.stats["calls"] <= 120


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_batched_mcts_is_deterministic(batch: int) -> None:
    first = mcts(fresh(), LetterPolicy(5), calls=80, batch=batch, seed=1)
    second = mcts(fresh(), LetterPolicy(5), calls=80, batch=batch, seed=1)
    assert comparable(first) == comparable(second)


@pytest.mark.parametrize("calls", [1, 2, 7, 33, 100])
@pytest.mark.parametrize("batch", [1, 3, 8, 32])
def test_batched_mcts_never_exceeds_its_budgets(calls: int, batch: int) -> None:
    policy = BatchSizes(0)
    result = mcts(fresh(), policy, calls=calls, batch=batch, expand=2)
    assert sum(policy.sizes) == result.stats["calls"] <= calls
    tokens = mcts(fresh(), LetterPolicy(0), budget=Budget(tokens=calls), batch=batch, expand=2)
    assert tokens.stats["tokens"] <= calls


@pytest.mark.parametrize("batch", [1, 2, 16])
def test_batched_mcts_caps_its_simulations(batch: int) -> None:
    result = mcts(fresh(), LetterPolicy(0), calls=500, batch=batch, simulations=5, rollouts=False)
    assert result.stats["simulations"] == 5
    assert len(result.nodes) == 6  # each simulation expanded a node by one new child


@pytest.mark.parametrize("rollouts", [True, False])
@pytest.mark.parametrize("batch", [1, 4, 8, 16])
def test_mcts_counts_only_the_selections_that_expanded_or_backed_up(
    batch: int, rollouts: bool
) -> None:
    """A simulation adds one new child or backs up one finished episode (expand=1), one visit of
    the root each; the round's selections that found nothing to grow are not simulations."""
    for seed in range(3):
        result = mcts(fresh(), LetterPolicy(seed), calls=60, batch=batch, rollouts=rollouts)
        assert result.stats["simulations"] == result.nodes[0].visits
    wider = mcts(fresh(), LetterPolicy(0), calls=60, batch=batch, rollouts=rollouts, expand=2)
    assert 0 < wider.stats["simulations"] <= wider.nodes[0].visits


@pytest.mark.timeout(120)
def test_batched_mcts_still_finds_the_optimum_and_beats_best_of_n() -> None:
    seeds = range(10)
    found = [mcts(fresh(), LetterPolicy(s), calls=200, batch=16) for s in seeds]
    bon = [best_of_n(fresh(), LetterPolicy(s), n=66, budget=200) for s in seeds]
    assert sum(r.reward == pytest.approx(OPTIMUM) for r in found) >= 9
    assert sum(r.success for r in found) > sum(r.success for r in bon)


@pytest.mark.parametrize("batch", [0, -2, True, 2.0, "8"])
def test_bad_batches_are_refused(batch: Any) -> None:
    with pytest.raises(error.Error, match="batch"):
        mcts(fresh(), LetterPolicy(0), calls=8, batch=batch)


def test_virtual_visits_send_the_next_selection_elsewhere() -> None:
    env = fresh()
    tree = Tree(env, LetterPolicy(0), budget=Budget(calls=10))
    a, b = tree.expand(tree.root, 1)[0], tree.expand(tree.root, 1)[0]
    assert a is not b
    for node in (tree.root, a, b):
        node.visits, node.value_sum, node.best_value = 1, 0.5, 0.5
    a.logprob = b.logprob = None  # uniform priors: a tie, the oldest wins
    assert puct_child(tree, tree.root, 1.0, "max") is a
    assert puct_child(tree, tree.root, 1.0, "max", {a.id: 1}) is b
    assert puct_child(tree, tree.root, 1.0, "mean", {a.id: 3}) is b
    tree.stepper.close()


class ThenNotText(Policy):
    """A first sample "b", then messages that are not text."""

    def __init__(self) -> None:
        self.settings = {}

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [Response("b")] + [Response(None) for _ in requests[1:]]  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [1, 4])
def test_an_invalid_message_in_a_batched_call_keeps_the_children_before_it(workers: int) -> None:
    with pytest.raises(SearchError, match="invalid message on node 0") as caught:
        best_of_n(fresh(), ThenNotText(), n=4, env_workers=workers)
    partial = caught.value.partial
    assert partial is not None
    assert [n.action for n in partial.nodes] == [None, "b"]
    assert partial.stats["calls"] == 4 and partial.stats["env_steps"] == 1
