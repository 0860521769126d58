"""ToolCalling-v0 reward integrity (issue 13): the facts credit rewards precision, not only recall.

After the right calls, a policy that lists every value it saw in the tool results states every
required fact by accident. Each test plays the gold calls, then ends with a hostile final answer
built only from what the episode showed (the tool results and the prompt), and compares it with
the oracle's precise answer on the same task.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmgym.envs.tools import ToolCallingEnv
from llmgym.envs.tools.families import FAMILIES

FAMILY_NAMES = sorted(f.name for f in FAMILIES)


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if value is None or isinstance(value, bool):
        return []
    return [str(value)]


def _seen_values(info: dict[str, Any]) -> list[str]:
    """Every scalar value the tool results showed, in order, once each."""
    out: list[str] = []
    for m in info["messages"]:
        if m["role"] != "tool":
            continue
        try:
            out += _leaves(json.loads(m["content"]))
        except ValueError:
            continue
    return list(dict.fromkeys(out))


def _play_gold_calls(
    env: ToolCallingEnv, family: str, seed: int, difficulty: float
) -> dict[str, Any]:
    _, info = env.reset(seed=seed, options={"family": family, "difficulty": difficulty})
    while env.episode.extra["gold_turns"] < len(env.episode.task.answer["calls"]):
        _, _, terminated, truncated, info = env.step(env.oracle_action())
        assert not (terminated or truncated)
    return info


def _final(env: ToolCallingEnv, text: str) -> float:
    snapshot = env.get_state()
    _, reward, terminated, _, _ = env.step(text)
    env.set_state(snapshot)
    assert terminated
    return float(reward)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_shotgun_attack_listing_every_seen_value_scores_below_the_precise_answer(
    family: str,
) -> None:
    env = ToolCallingEnv()
    checked = 0
    for seed in (0, 1, 2):
        for difficulty in (0.0, 0.7):
            info = _play_gold_calls(env, family, seed, difficulty)
            oracle = _final(env, env.oracle_action())
            assert oracle == 1.0
            facts = [f[0] for f in env.episode.task.answer["facts"]]
            seen = _seen_values(info)
            extra = [v for v in seen if v not in facts]
            if len(extra) < 2:
                continue  # the results held nothing but the facts: listing them is the answer
            checked += 1
            for listed in (seen, facts + extra, extra + facts):
                shotgun = "Done. " + "; ".join(listed)
                assert _final(env, shotgun) <= 0.5 * oracle, (family, seed, shotgun[:300])
            # Facts plus one value nobody asked for (a code, a name, an amount...): less than
            # the precise answer.
            prompt = env.episode.task.prompt
            stray = [
                v for v in extra
                if re.search(r"[\dA-Z@]", v) and len(v) >= 2 and v not in prompt
                and not any(v in f or f in v for f in facts)
            ]  # fmt: skip
            if stray:
                one_more = "Done. " + "; ".join(facts + stray[:1])
                assert _final(env, one_more) < oracle, (family, seed, one_more[:300])
    if family not in ("calc_expression",):
        assert checked or not env.episode.task.answer["facts"], family


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    family=st.sampled_from(FAMILY_NAMES),
    seed=st.integers(0, 20),
    picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=12),
    source=st.sampled_from(("prompt", "results", "both")),
)
def test_prompt_derived_answers_never_reach_the_oracle_reward_property(
    family: str, seed: int, picks: list[int], source: str
) -> None:
    """No final answer built from the prompt's words and the tool results' values alone, sent
    without the gold calls, reaches the oracle's reward; after the gold calls, a list of seen
    values that is not the facts alone scores below the oracle."""
    env = ToolCallingEnv()
    obs, _ = env.reset(seed=seed, options={"family": family, "difficulty": 0.0})
    words = re.findall(r"[\w@.'-]+", obs)
    no_calls = "Done. " + " ".join(words[p % len(words)] for p in picks)
    snapshot = env.get_state()
    _, reward, *_ = env.step(no_calls)
    env.set_state(snapshot)
    task = env.episode.task
    if task.answer["calls"]:
        assert reward < 1.0, no_calls
    info = _play_gold_calls(env, family, seed, 0.0)
    seen = _seen_values(info)
    pool = (words if source == "prompt" else []) + (seen if source != "prompt" else [])
    facts = [f[0] for f in task.answer["facts"]]
    listed = list(dict.fromkeys(pool[p % len(pool)] for p in picks)) if pool else []
    reward = _final(env, "Done. " + "; ".join(listed))
    if set(listed) - set(facts) and any(v in seen and v not in facts for v in listed):
        assert reward < 1.0, listed


HEDGES = ("{f} or {o}", "{o} or {f}", "either {f} or {o}", "possibly {f}", "{f}?", "{f}, {o}",
          "{o}; {f}", "{f}/{o}", "{f} (or maybe {o})")  # fmt: skip


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_hedge_attack_a_fact_offered_with_alternatives_scores_zero(family: str) -> None:
    """The right calls, then the fact hedged with another value of the results or the prompt:
    "385.53 or 12.5", "possibly ACC-1610", "385.53, 2" (a list of candidates) earn nothing."""
    env = ToolCallingEnv()
    checked = 0
    for seed in (0, 1, 2):
        info = _play_gold_calls(env, family, seed, 0.0)
        facts = [f[0] for f in env.episode.task.answer["facts"]]
        if not facts:
            continue
        shown = _seen_values(info) + re.findall(r"\b\d+(?:\.\d+)?\b", env.episode.task.prompt)
        others = [v for v in shown if re.search(r"\d", v) and not any(v in f for f in facts)]
        if not others:
            continue
        checked += 1
        for form in HEDGES:
            hedged = form.format(f=facts[0], o=others[0])
            answer = "Done. " + "; ".join([hedged, *facts[1:]])
            assert _final(env, answer) == 0.0, (family, seed, answer)
    if not checked:
        pytest.skip(f"{family}: no fact beside another coded value to hedge with")


def test_plain_sentences_around_facts_still_score() -> None:
    """An honest answer may restate the request and name the fact in a sentence."""
    env = ToolCallingEnv()
    info = _play_gold_calls(env, "sensor_stats", 0, 0.0)
    fact = env.episode.task.answer["facts"][0][0]
    for text in (f"Done. The average is {fact}.", f"The average reading is {fact} l.", fact):
        assert _final(env, text) == 1.0, text
    assert info["messages"]
