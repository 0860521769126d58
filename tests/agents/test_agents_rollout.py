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

    monkeypatch.setattr(rollout, "sample_completions", fake_sample)
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
        rollout, "sample_completions", lambda m, p, **kw: Samples([ids], [[0.0] * len(ids)], [True])
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


# --- the sampler: hf.sample's contract and distribution, with a group's prompt prefilled once ---


def _prompts(tok: Any) -> list[list[int]]:
    """Two groups of equal prompts and one prompt of another length, interleaved."""
    a = tok("What is 3 + 4?", add_special_tokens=False).input_ids
    b = tok("What is 12 + 30? Answer.", add_special_tokens=False).input_ids
    return [a, b, a, a, b[2:], b]


def test_sample_completions_is_hf_sample_when_greedy(tiny_dir: str) -> None:
    from llmgym.agents.hf import sample, stop_ids_of
    from llmgym.agents.modeling import sample_completions

    model, tok = load(tiny_dir)
    kw: dict[str, Any] = {
        "max_new_tokens": 12,
        "stop_ids": stop_ids_of(tok, model),
        "pad_id": tok.pad_token_id,
        "temperature": 0.0,
    }
    ref, out = sample(model, _prompts(tok), **kw), sample_completions(model, _prompts(tok), **kw)
    assert out.token_ids == ref.token_ids and out.finished == ref.finished
    for a, b in zip(out.logprobs, ref.logprobs, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def test_sampled_tokens_end_at_a_stop_and_carry_their_recomputed_logprobs(tiny_dir: str) -> None:
    import torch

    from llmgym.agents.hf import stop_ids_of
    from llmgym.agents.modeling import pad_right, sample_completions, token_logprobs

    model, tok = load(tiny_dir)
    stops = stop_ids_of(tok, model)
    prompts = _prompts(tok) * 4
    out = sample_completions(
        model,
        prompts,
        max_new_tokens=10,
        stop_ids=stops,
        pad_id=tok.pad_token_id,
        temperature=0.9,
        generator=torch.Generator().manual_seed(0),
    )
    assert any(out.finished) and not all(out.finished)  # some stop, some run to the limit
    ids, attn = pad_right([p + c for p, c in zip(prompts, out.token_ids, strict=True)], 0)
    lp, _, _ = token_logprobs(model, ids, attn, temperature=0.9)
    for i, (p, c) in enumerate(zip(prompts, out.token_ids, strict=True)):
        assert 1 <= len(c) <= 10 and not any(t in stops for t in c[:-1])
        assert out.finished[i] == (c[-1] in stops) and (out.finished[i] or len(c) == 10)
        assert torch.allclose(
            lp[i, len(p) - 1 : len(p) - 1 + len(c)], torch.tensor(out.logprobs[i]), atol=1e-5
        )


def test_categorical_draws_in_proportion_and_never_a_zero_probability() -> None:
    import torch

    from llmgym.agents.modeling import categorical

    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0]]).expand(100_000, 5)
    draws = categorical(probs, torch.Generator().manual_seed(3))
    freq = torch.bincount(draws, minlength=5) / len(draws)
    assert freq[1] == 0 and freq[4] == 0
    assert torch.allclose(freq, probs[0], atol=0.01)
    # Unnormalised rows, a single nonzero entry at either end, the last uniform's rounding.
    edge = torch.tensor([[0.0, 0.0, 2.0], [3.0, 0.0, 0.0], [1e-30, 1.0, 0.0]])
    for seed in range(50):
        assert categorical(edge, torch.Generator().manual_seed(seed))[:2].tolist() == [2, 0]


def test_a_group_prompt_is_rendered_once_into_separate_token_lists(
    tiny_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tok = load(tiny_dir)
    calls: list[int] = []
    real = rollout.render_prompt

    def counting(*a: Any, **kw: Any) -> list[int]:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(rollout, "render_prompt", counting)
    probe = make_env(MATH, MATH_KWARGS)
    _, info = probe.reset(seed=11)
    envs = [make_env(MATH, MATH_KWARGS) for _ in range(4)]
    trajs = collect(
        envs,
        model,
        tok,
        seeds=[None, None, None, 12],
        options=[{"task_id": info["task_id"]}] * 3 + [None],
        max_new_tokens=4,
    )
    assert trajs[3].task_id != info["task_id"]
    assert len(calls) == 2  # the group's prompt, then the fourth env's own task
    assert len({id(t.token_ids) for t in trajs}) == 4
    assert (
        trajs[0].token_ids[: trajs[0].prompt_length] == trajs[1].token_ids[: trajs[1].prompt_length]
    )


@pytest.mark.parametrize("domain", ["right/../../etc", "a b\n<script>", "", "/", "é" * 200])
def test_domain_names_from_task_data_reach_metric_keys_cleaned(domain: str) -> None:
    from llmgym.agents.rollout import Trajectory
    from llmgym.evaluation.monitor import clean_name

    trajs = [
        Trajectory(task_id="t", domain=domain, family="f", difficulty=0.0, turn_rewards=[1.0]),
        Trajectory(
            task_id="u", domain="math", family="f", difficulty=0.0, exec_statuses=["timeout"]
        ),
    ]
    trajs[0].exec_statuses = ["ok"]
    m = rollout_metrics(trajs)
    name = clean_name(domain)
    assert m[f"rewards/{name}"] == 1.0 and m["rewards/math"] == 0.0
    assert m[f"sandbox/{name}/timeout_rate"] == 0.0 and m["sandbox/math/timeout_rate"] == 1.0
    for key in m:
        assert ".." not in key.split("/") and all(c.isprintable() for c in key) and len(key) < 100
        assert key.count("/") <= 2
