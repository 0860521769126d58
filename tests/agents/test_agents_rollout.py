"""Token-exact rollouts: sampled ids are kept verbatim, env tokens are masked, metrics are right."""

from __future__ import annotations

from typing import Any

import pytest
from agents_common import MATH, MATH_KWARGS, TOOL_ENV

import llmgym
from llmgym.agents import rollout
from llmgym.agents.hf import Samples
from llmgym.agents.rollout import collect, draw_tasks, evaluate, make_env, rollout_metrics
from llmgym.agents.tiny import load


def _char_ids(tokenizer: Any, text: str) -> list[int]:
    """A deliberately non-canonical tokenization: one token per character."""
    ids = []
    for ch in text:
        piece = tokenizer(ch, add_special_tokens=False).input_ids
        ids.extend(piece)
    return ids


def test_multi_turn_keeps_sampled_ids_and_masks_env_tokens(
    tiny_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tok = load(tiny_dir)
    env = make_env(TOOL_ENV)
    _, info = env.reset(seed=3)
    task = env.unwrapped.episode.task
    a, b = task.metadata["a"], task.metadata["b"]
    call_text = f'<tool_call>{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}</tool_call>'
    scripted = [
        _char_ids(tok, call_text) + [tok.eos_token_id],
        _char_ids(tok, str(a + b)) + [tok.eos_token_id],
    ]
    canonical = tok(call_text, add_special_tokens=False).input_ids
    assert scripted[0][:-1] != canonical  # re-tokenizing the text would change the ids

    def fake_sample(model: Any, prompts: Any, **kw: Any) -> Samples:
        ids = scripted.pop(0)
        return Samples([ids], [[-0.5] * len(ids)], [True])

    monkeypatch.setattr(rollout, "sample", fake_sample)
    (traj,) = collect([env], model, tok, seeds=[3], options=[None], max_new_tokens=200)
    assert traj.reward == 1.0 and traj.is_success and traj.num_turns == 2
    sampled = [t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m]
    first = _char_ids(tok, call_text) + [tok.eos_token_id]
    assert sampled == first + _char_ids(tok, str(a + b)) + [tok.eos_token_id]
    assert [lp for lp, m in zip(traj.logprobs, traj.loss_mask, strict=True) if m] == [-0.5] * len(
        sampled
    )
    # Between the two completions: exactly the template's tool turn and the next generation prompt, untrained.
    end_first = traj.turn_ends[0] + 1
    env_segment = []
    i = end_first
    while not traj.loss_mask[i]:
        env_segment.append(traj.token_ids[i])
        i += 1
    assert tok.decode(env_segment) == f"<|tool|>{a + b}<|end|><|assistant|>"
    assert traj.prompt_length == len(
        tok(
            tok.apply_chat_template(
                info["messages"], tools=info["tools"], add_generation_prompt=True, tokenize=False
            ),
            add_special_tokens=False,
        ).input_ids
    )
    assert traj.turn_ends == [end_first - 1, len(traj.token_ids) - 1]


def test_real_model_rollout_invariants(tiny_dir: str) -> None:
    import torch

    model, tok = load(tiny_dir)
    envs = [make_env(TOOL_ENV) for _ in range(4)]
    trajs = collect(
        envs,
        model,
        tok,
        seeds=[0, 1, 2, 3],
        options=[None] * 4,
        max_new_tokens=8,
        generator=torch.Generator().manual_seed(0),
    )
    for t in trajs:
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
        assert (
            t.completion_truncated
        )  # 8 random tokens rarely stop: the end token is appended, untrained
        assert sum(t.loss_mask) == 8 * t.num_turns
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.loss_mask, strict=True) if not m)
        assert all(lp <= 0.0 for lp, m in zip(t.logprobs, t.loss_mask, strict=True) if m)
        assert t.num_turns == 1 or t.truncated or t.is_success is False
    m = rollout_metrics(trajs)
    assert m["rewards/toyarith"] == m["rewards/mean"] == 0.0
    assert m["charts/completion_truncated_frac"] == 1.0


def test_context_limit_ends_episode(tiny_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = load(tiny_dir)
    env = make_env(TOOL_ENV)
    env.reset(seed=0)
    call = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    ids = tok(call, add_special_tokens=False).input_ids + [tok.eos_token_id]
    monkeypatch.setattr(
        rollout, "sample", lambda m, p, **kw: Samples([ids], [[0.0] * len(ids)], [True])
    )
    (traj,) = collect(
        [env],
        model,
        tok,
        seeds=[0],
        options=[None],
        max_new_tokens=50,
        max_total_tokens=len(ids) + 150,
    )
    assert traj.truncated and traj.num_turns == 1 and not traj.is_success


def test_env_error_ends_only_that_episode(tiny_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = load(tiny_dir)
    good, bad = make_env(MATH, MATH_KWARGS), make_env(MATH, MATH_KWARGS)

    def boom(action: Any) -> Any:
        raise RuntimeError("verifier crashed")

    monkeypatch.setattr(bad, "step", boom)
    trajs = collect([good, bad], model, tok, seeds=[0, 1], options=[None, None], max_new_tokens=4)
    assert trajs[0].env_error is None
    assert trajs[1].env_error == "RuntimeError: verifier crashed" and trajs[1].reward == 0.0


def test_draw_tasks_is_deterministic_and_replayable() -> None:
    import numpy as np

    probe = make_env(MATH, MATH_KWARGS)
    a = draw_tasks(probe, 5, np.random.default_rng(7))
    b = draw_tasks(probe, 5, np.random.default_rng(7))
    assert [t.task_id for t in a] == [t.task_id for t in b]
    env = make_env(MATH, MATH_KWARGS)
    for t in a:
        _, info = env.reset(seed=t.seed, options=t.options())
        assert info["task_id"] == t.task_id and t.domain == "math"


def test_evaluate_greedy_is_reproducible(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    r1 = evaluate(model, tok, MATH, MATH_KWARGS, seeds=range(6), max_new_tokens=6, batch_size=4)
    r2 = evaluate(model, tok, MATH, MATH_KWARGS, seeds=range(6), max_new_tokens=6, batch_size=3)
    assert r1.episodes == 6 and [t.texts for t in r1.trajectories] == [
        t.texts for t in r2.trajectories
    ]
    assert 0.0 <= r1.success_rate <= 1.0 and set(r1.per_domain) == {"math"}


def test_sandbox_rates_from_exec_info() -> None:
    from llmgym.agents.rollout import Trajectory

    trajs = [
        Trajectory("a", "coding", "f", 0.0, turn_rewards=[0.0], exec_statuses=["timeout"]),
        Trajectory(
            "b", "coding", "f", 0.0, turn_rewards=[1.0], exec_statuses=["ok", "memory_limit"]
        ),
        Trajectory("c", "math", "f", 0.0, turn_rewards=[1.0]),
    ]
    m = rollout_metrics([t.summary() for t in trajs])
    assert m["sandbox/timeout_rate"] == pytest.approx(1 / 3)
    assert m["sandbox/oom_rate"] == pytest.approx(1 / 3)
    assert m["sandbox/crash_rate"] == 0.0
    assert m["sandbox/coding/timeout_rate"] == pytest.approx(1 / 3)
    assert m["rewards/coding"] == 0.5 and m["rewards/math"] == 1.0


def test_collect_rejects_mismatched_arguments(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    with pytest.raises(llmgym.error.Error, match="one seed"):
        collect([make_env(MATH)], model, tok, seeds=[0, 1], options=[None], max_new_tokens=2)
