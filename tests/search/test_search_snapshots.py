"""Registry-wide: a search over every registered env keeps its branches apart.

For each env id (as the contract tests do), a best-of-N search with the oracle-mixed policy
branches from the first state; afterwards every node's snapshot still holds the conversation it
had when it was made, stepping one branch leaves the other's snapshot as it was, and the env is
back at the root.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest
from search_envs import MixedOraclePolicy

import llmgym
from llmgym.search import Budget, best_of_n
from llmgym.search.tree import episode_fields

ENV_IDS = llmgym.list_envs()


def frozen(state: Any) -> str:
    return json.dumps(state, sort_keys=True, default=repr)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_search_branches_never_share_state(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        env.reset(seed=0)
        base = env.unwrapped
        root = frozen(base.get_state())
        result = best_of_n(env, MixedOraclePolicy(), n=2, budget=Budget(calls=8))
        assert frozen(base.get_state()) == root
        assert frozen(result.nodes[0].state) == root
        for node in result.nodes:
            assert episode_fields(node.state)["messages"] == node.messages, (env_id, node.id)
        first, second = (result.nodes[i] for i in result.nodes[0].children[:2])
        assert first.action != second.action  # the oracle's answer, and a wrong one
        assert first.messages != second.messages
        kept = {n.id: frozen(n.state) for n in result.nodes}
        for node in (first, second):  # step each branch on: no other snapshot moves
            base.set_state(node.state)
            if not node.terminal:
                env.unwrapped.step("Another try.")
        assert {n.id: frozen(n.state) for n in result.nodes} == kept
        base.set_state(second.state)
        assert frozen(base.get_state()) == kept[second.id]
    finally:
        env.close()
