"""Best-of-N, beam search and MCTS on a synthetic env whose reward tree is known (search_envs.py):
the optimum is found, budgets hold, failures keep a partial tree, hostile envs and policies."""

from __future__ import annotations

import json
import threading
from typing import Any

import gymnasium as gym
import pytest
from search_envs import (
    OPTIMUM,
    FailingPolicy,
    LetterPolicy,
    LetterTreeEnv,
    MixedOraclePolicy,
    all_words,
)

from llmgym import error
from llmgym.policies import Policy, Request, Response
from llmgym.search import (
    Budget,
    SearchError,
    beam_search,
    best_of_n,
    mcts,
    parse_spec,
    search,
)

SEEDS = range(10)


def fresh_env() -> LetterTreeEnv:
    env = LetterTreeEnv()
    env.reset(seed=0)
    return env


def without_time(tree: dict[str, Any]) -> dict[str, Any]:
    return {**tree, "stats": {k: v for k, v in tree["stats"].items() if k != "wall_s"}}


def test_the_known_optimum_is_what_brute_force_finds() -> None:
    env = fresh_env()
    root = env.get_state()
    best = 0.0
    for word in all_words():
        env.set_state(root)
        best = max(best, sum(env.step(letter)[1] for letter in word))
    assert best == pytest.approx(OPTIMUM)


@pytest.mark.timeout(120)
def test_mcts_finds_the_optimum_within_budget_and_beats_best_of_n() -> None:
    env = fresh_env()
    found = [mcts(env, LetterPolicy(s), calls=200) for s in SEEDS]
    assert all(r.reward == pytest.approx(OPTIMUM) and r.success for r in found)
    assert all(r.stats["calls"] <= 200 for r in found)
    # best-of-N with the same 200 calls (66 episodes of 3 turns)
    bon = [best_of_n(env, LetterPolicy(s), n=66, budget=200) for s in SEEDS]
    assert sum(r.success for r in bon) <= 6 < 10 == sum(r.success for r in found)
    assert sum(r.reward for r in found) > sum(r.reward for r in bon)


def test_beam_keeps_exactly_the_top_b_unfinished_children_by_value() -> None:
    result = beam_search(fresh_env(), LetterPolicy(3), width=2, expand=4)
    nodes = {n.id: n for n in result.nodes}
    assert len(result.stats["rounds"]) == 3
    for rnd in result.stats["rounds"]:
        live = [(nid, v) for nid, v, terminal in rnd["candidates"] if not terminal]
        ranked = [nid for nid, v in sorted(live, key=lambda c: (-c[1], c[0]))]
        assert rnd["kept"] == ranked[:2]
        for nid, v, _ in rnd["candidates"]:  # value = discounted return so far (no estimate)
            assert v == pytest.approx(nodes[nid].ret)
    # the next round expanded exactly the kept nodes
    for before, after in zip(result.stats["rounds"], result.stats["rounds"][1:], strict=False):
        parents = {nodes[nid].parent for nid, *_ in after["candidates"]}
        assert parents <= set(before["kept"])


@pytest.mark.parametrize("method", ["best_of_n:6", "beam:2x3", "mcts:30"])
def test_a_seeded_search_is_deterministic(method: str) -> None:
    a = search(fresh_env(), LetterPolicy(0), method, seed=7)
    b = search(fresh_env(), LetterPolicy(99), method, seed=7)  # the seed reseeds the policy
    assert without_time(a.tree()) == without_time(b.tree())
    c = search(fresh_env(), LetterPolicy(0), method, seed=8)
    assert without_time(c.tree()) != without_time(a.tree())


@pytest.mark.parametrize("method", ["best_of_n:6", "beam:3x3", "mcts:40"])
def test_the_tree_is_json_and_the_env_is_left_at_the_root(method: str) -> None:
    env = fresh_env()
    before = env.get_state()
    result = search(env, LetterPolicy(1), method)
    assert env.get_state() == before
    tree = json.loads(json.dumps(result.tree()))
    assert tree["nodes"][0]["parent"] is None and tree["best"] == result.best.id
    assert tree["best_path"][0] == 0 and tree["best_path"][-1] == result.best.id
    for node in tree["nodes"][1:]:
        assert node["id"] in tree["nodes"][node["parent"]]["children"]
    assert [n.action for n in result.path(result.best)[1:]] == result.actions
    said = [m["content"] for m in result.messages if m["role"] == "assistant"]
    assert said == result.actions


@pytest.mark.parametrize("calls", [1, 2, 5, 17, 64])
@pytest.mark.parametrize("method", ["best_of_n:8", "beam:4x4", "mcts:500"])
def test_the_call_budget_is_never_exceeded(method: str, calls: int) -> None:
    policy = LetterPolicy(0)
    result = search(fresh_env(), policy, method, budget=Budget(calls=calls))
    assert result.stats["calls"] == policy.calls <= calls


class Chatty(Policy):
    """Answers of ``size`` characters with no token count; declares a cap when ``cap``."""

    def __init__(self, size: int, cap: int | None = None):
        self.settings = {"max_new_tokens": cap} if cap else {}
        self.size = size
        self.n = 0

    def generate(self, requests: Any) -> list[Response]:
        self.n += len(requests)
        return [Response("abcd"[self.n % 4] + "x" * self.size) for _ in requests]


@pytest.mark.parametrize("method", ["best_of_n:8", "beam:4x4", "mcts:64"])
def test_the_token_budget_is_never_exceeded(method: str) -> None:
    capped = search(fresh_env(), LetterPolicy(0), method, budget=Budget(tokens=5))
    assert capped.stats["tokens"] <= 5 and capped.stats["discarded_tokens"] == 0
    # no declared cap: an answer that would pass the budget is discarded and the search ends
    loose = search(fresh_env(), Chatty(39), method, budget=Budget(tokens=25))
    assert loose.stats["tokens"] <= 25 and loose.stats["discarded_tokens"] > 0
    assert sum(n.tokens for n in loose.nodes) == loose.stats["tokens"]


@pytest.mark.timeout(60)
def test_huge_actions_are_clipped_in_the_tree_and_counted_in_tokens() -> None:
    result = best_of_n(fresh_env(), Chatty(5_000_000), n=2, budget=Budget(calls=6))
    text = json.dumps(result.tree())
    assert len(text) < 50_000 and "more characters" in text
    assert result.stats["tokens"] >= 6 * 1_250_000
    # a policy whose answers pass the cap it declares: they are discarded, never counted
    liar = best_of_n(fresh_env(), Chatty(5_000_000, cap=10), n=2, budget=Budget(tokens=10**6))
    assert liar.stats["tokens"] == 0 and liar.stats["discarded_tokens"] > 10**6


def test_a_policy_that_raises_mid_search_gives_a_clear_error_and_a_partial_tree() -> None:
    for method in ("best_of_n:8", "beam:2x4", "mcts:64"):
        with pytest.raises(SearchError, match="ConnectionError: model server went away") as caught:
            search(fresh_env(), FailingPolicy(fail_at=10), method)
        partial = caught.value.partial
        assert partial is not None and len(partial.nodes) > 1
        assert "went away" in partial.stats["failed"]
        json.dumps(partial.tree())


def test_a_callable_policy_that_raises_is_reported_with_the_node() -> None:
    def flaky(messages: Any, tools: Any) -> str:
        if len(messages) > 3:
            raise ValueError("bad turn")
        return "c"

    with pytest.raises(SearchError, match=r"node \d+: ValueError: bad turn"):
        mcts(fresh_env(), flaky, calls=10)


@pytest.mark.timeout(60)
def test_a_policy_that_times_out_gives_a_clear_error_and_a_partial_tree() -> None:
    release = threading.Event()
    policy = FailingPolicy(fail_at=5, block=release)
    try:
        with pytest.raises(SearchError, match="did not answer within") as caught:
            mcts(fresh_env(), policy, calls=40, policy_timeout_s=0.3)
        assert caught.value.partial is not None and len(caught.value.partial.nodes) >= 3
    finally:
        release.set()


class NotText(Policy):
    def __init__(self) -> None:
        self.settings = {}

    def generate(self, requests: Any) -> list[Response]:
        return [Response(12345) for _ in requests]  # type: ignore[arg-type]


class Short(Policy):
    def __init__(self) -> None:
        self.settings = {}

    def generate(self, requests: Any) -> list[Response]:
        return [Response("a")]


def test_hostile_policies_get_clear_errors() -> None:
    with pytest.raises(SearchError, match="invalid message"):
        best_of_n(fresh_env(), NotText(), n=2)
    with pytest.raises(SearchError, match="1 responses for 3 requests"):
        best_of_n(fresh_env(), Short(), n=3)


class NoSnapshots(gym.Env[str, str]):
    def step(self, action: Any) -> Any:
        return "", 0.0, True, False, {}


def test_an_env_without_snapshots_or_before_reset_is_refused_before_any_call() -> None:
    policy = LetterPolicy(0)
    with pytest.raises(SearchError, match="get_state"):
        mcts(NoSnapshots(), policy, calls=8)
    with pytest.raises(SearchError, match="reset"):
        best_of_n(LetterTreeEnv(), policy, n=2)
    assert policy.calls == 0


def test_a_finished_episode_is_its_own_best_trajectory() -> None:
    env = fresh_env()
    for letter in "cbd":
        env.step(letter)
    result = mcts(env, LetterPolicy(0), calls=8)
    assert result.stats["calls"] == 0 and result.best.id == 0


def test_a_reward_model_scores_unfinished_nodes() -> None:
    seen: list[int] = []

    def prefers_c(messages: Any) -> float:
        seen.append(len(messages))
        return 1.0 if "so far: c" in messages[-1]["content"] else 0.0

    result = beam_search(fresh_env(), LetterPolicy(2), width=1, expand=4, reward_model=prefers_c)
    assert seen and result.actions[0] == "c"
    scored = [n for n in result.nodes if n.estimate is not None and not n.terminal]
    assert scored and {n.estimate for n in scored} <= {0.0, 1.0}
    with pytest.raises(error.Error, match="non-finite"):
        mcts(fresh_env(), LetterPolicy(0), calls=8, reward_model=lambda m: float("nan"))
    with pytest.raises(error.Error, match="reward_model"):
        mcts(fresh_env(), LetterPolicy(0), calls=8, reward_model=42)


@pytest.mark.parametrize(
    "spec", ["beam", "mcts:0", "best_of_n:2x2", "mcts:4x4", "dfs:3", "beam:4x", "", "mcts:-1"]
)
def test_bad_specs_and_settings_are_refused(spec: str) -> None:
    with pytest.raises(error.Error, match="search|Search"):
        parse_spec(spec)


def test_bad_settings_are_refused() -> None:
    env = fresh_env()
    for call in (
        lambda: mcts(env, LetterPolicy(0), calls=0),
        lambda: mcts(env, LetterPolicy(0), calls=4, value="median"),
        lambda: mcts(env, LetterPolicy(0), calls=4, gamma=0.0),
        lambda: beam_search(env, LetterPolicy(0), width=0),
        lambda: best_of_n(env, LetterPolicy(0), n=2, budget=Budget(calls=True)),  # type: ignore[arg-type]
        lambda: best_of_n(env, LetterPolicy(0), n=2, budget="lots"),  # type: ignore[arg-type]
    ):
        with pytest.raises(error.Error):
            call()
    with pytest.raises(error.Error, match="at least one"):
        Budget()


def test_discount_weighs_later_rewards_less() -> None:
    result = best_of_n(fresh_env(), lambda m, t: "c" if len(m) < 3 else "b", n=1, gamma=0.5)
    assert result.reward == pytest.approx(0.25 + 0.5 * 0.25 + 0.25 * 0.0)


def test_samples_are_batched_in_one_policy_call() -> None:
    class Counting(LetterPolicy):
        def __init__(self) -> None:
            super().__init__(0)
            self.batches: list[int] = []

        def generate(self, requests: Any) -> list[Response]:
            self.batches.append(len(requests))
            return super().generate(requests)

    policy = Counting()
    best_of_n(fresh_env(), policy, n=8)
    assert policy.batches == [8, 8, 8]  # the first turns in one call, then the episodes in step
    policy.batches.clear()
    beam_search(fresh_env(), policy, width=2, expand=4)
    assert policy.batches == [4, 8, 8]  # every node of the beam in one call
    assert Request  # re-exported for policies written against the search


def test_the_oracle_sees_each_node_s_state_in_a_batched_call() -> None:
    from llmgym.search import beam_search as beam

    result = beam(fresh_env(), "oracle", width=3, expand=1)
    assert result.success and result.actions == ["c", "b", "d"]
    mixed = best_of_n(fresh_env(), MixedOraclePolicy(), n=4)  # oracle and wrong turns, batched
    assert mixed.success
