"""GRPO trainer: updates, exact resume, references, dynamic sampling, multi-turn, scheduler, mixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from agents_common import DIGITS_ENV, MATH, MATH_KWARGS, TOOL_ENV

from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.runlog import read_metrics


def _cfg(tiny_dir: str, out: Path, **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": DIGITS_ENV,
        "output_dir": str(out),
        "total_steps": 2,
        "prompts_per_step": 4,
        "group_size": 4,
        "max_new_tokens": 6,
        "learning_rate": 1e-3,
        "progress": False,
        "tensorboard": False,
        "micro_batch_size": 8,
    }
    base.update(kw)
    return GRPOConfig(**base)


def _params(trainer: GRPOTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer._unwrapped().parameters()]


def test_weights_change_after_a_step_and_metrics_are_logged(tiny_dir: str, tmp_path: Path) -> None:
    trainer = GRPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=1, tensorboard=True))
    before = _params(trainer)
    metrics = trainer.train()
    after = _params(trainer)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    for key in (
        "losses/policy",
        "charts/learning_rate",
        "charts/samples_per_s",
        "charts/tokens_per_s",
        "rewards/mean",
        "rewards/length",
        "kl",
        "entropy",
        "clip_frac",
        "time/rollout_s",
        "time/update_s",
        "time/generate_s",
        "time/step_s",
    ):
        assert key in metrics, key
    (record,) = read_metrics(tmp_path)
    assert record["step"] == 1 and record["rewards/length"] == pytest.approx(
        metrics["rewards/length"]
    )
    assert (tmp_path / "final" / "config.json").is_file() and (tmp_path / "config.yaml").is_file()
    assert any((tmp_path / "tb").iterdir())


def test_resume_is_exact(tiny_dir: str, tmp_path: Path) -> None:
    straight = GRPOTrainer(_cfg(tiny_dir, tmp_path / "a", total_steps=4, save_every=2))
    straight.train()
    first = GRPOTrainer(_cfg(tiny_dir, tmp_path / "b", total_steps=2, save_every=2))
    first.train()
    resumed = GRPOTrainer(_cfg(tiny_dir, tmp_path / "b", total_steps=4, save_every=2, resume=True))
    assert resumed.step == 2
    resumed.train()
    for a, b in zip(_params(straight), _params(resumed), strict=True):
        assert torch.equal(a, b)

    def strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        volatile = ("time", "charts/samples", "charts/tokens")
        return [{k: v for k, v in r.items() if not k.startswith(volatile)} for r in records]

    assert strip(read_metrics(tmp_path / "a")) == strip(read_metrics(tmp_path / "b"))
    assert [r["step"] for r in read_metrics(tmp_path / "b")] == [1, 2, 3, 4]


def test_kl_with_dynamic_reference_and_adaptive_beta(tiny_dir: str, tmp_path: Path) -> None:
    cfg = _cfg(
        tiny_dir,
        tmp_path,
        beta=0.05,
        reference="refresh",
        ref_update_every=1,
        kl_target=0.01,
        kl_horizon=100,
        total_steps=2,
    )
    trainer = GRPOTrainer(cfg)
    m1 = trainer.train_step()
    assert trainer.ref is not None and trainer.ref.updates == 1
    assert m1["kl"] >= 0 and "losses/kl_penalty" in m1
    assert m1["charts/beta"] != 0.05  # the adaptive controller moved it
    for a, b in zip(trainer.ref.model.parameters(), trainer._unwrapped().parameters(), strict=True):
        assert torch.equal(a, b)  # refreshed to the policy


def test_dynamic_sampling_drops_uninformative_groups(tiny_dir: str, tmp_path: Path) -> None:
    # A random model never solves Math: every group has equal rewards, so nothing is trained.
    trainer = GRPOTrainer(
        _cfg(
            tiny_dir,
            tmp_path,
            env_id=MATH,
            env_kwargs=MATH_KWARGS,
            dynamic_sampling=True,
            dynamic_sampling_rounds=1,
        )
    )
    before = _params(trainer)
    m = trainer.train_step()
    assert m["charts/kept_groups"] == 0 and m["charts/zero_std_groups_frac"] == 1.0
    assert m["charts/episodes"] == 2 * 16  # one extra round was tried
    assert all(torch.equal(a, b) for a, b in zip(before, _params(trainer), strict=True))


def test_truncated_completions_can_be_masked(tiny_dir: str, tmp_path: Path) -> None:
    trainer = GRPOTrainer(
        _cfg(tiny_dir, tmp_path, max_new_tokens=1, mask_truncated_completions=True)
    )
    m = trainer.train_step()
    assert m["charts/completion_truncated_frac"] > 0
    assert m["charts/trained_tokens"] == pytest.approx(
        16 * (1 - m["charts/completion_truncated_frac"])
    )


def test_multi_turn_with_reused_samples(tiny_dir: str, tmp_path: Path) -> None:
    cfg = _cfg(
        tiny_dir, tmp_path, env_id=TOOL_ENV, num_iterations=2, mini_batches=2, loss_type="grpo"
    )
    trainer = GRPOTrainer(cfg)
    m = trainer.train_step()
    assert m["charts/turns"] >= 1 and "clip_frac" in m and "rewards/toyarith" in m


def test_scheduler_over_a_mixture(tiny_dir: str, tmp_path: Path) -> None:
    env_kwargs = {
        "envs": [
            {"id": DIGITS_ENV},
            {"id": MATH, "kwargs": {"families": ["arith.add_small", "arith.mul"]}},
        ]
    }
    cfg = _cfg(
        tiny_dir,
        tmp_path,
        env_id="llm/Mixture-v0",
        env_kwargs=env_kwargs,
        scheduler={"min_episodes": 4},
        total_steps=2,
        save_every=1,
    )
    trainer = GRPOTrainer(cfg)
    metrics = trainer.train()
    assert trainer.scheduler is not None
    arms = set(trainer.scheduler.arms)
    assert f"{MATH}::arith.mul" in arms and f"{DIGITS_ENV}::default" in arms
    assert any(k.startswith("scheduler/") for k in metrics)
    state = trainer.scheduler.state_dict()
    resumed = GRPOTrainer(
        _cfg(
            tiny_dir,
            tmp_path,
            env_id="llm/Mixture-v0",
            env_kwargs=env_kwargs,
            scheduler={"min_episodes": 4},
            total_steps=2,
            resume=True,
        )
    )
    assert resumed.scheduler is not None and resumed.scheduler.state_dict() == state


def test_uneven_process_split_is_rejected(tiny_dir: str, tmp_path: Path) -> None:
    class FakeAccelerator:
        process_index, num_processes = 0, 3

    with pytest.raises(ValueError, match="divisible by the number of processes"):
        GRPOTrainer(_cfg(tiny_dir, tmp_path), accelerator=FakeAccelerator())


def test_config_written_for_provenance(tiny_dir: str, tmp_path: Path) -> None:
    GRPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=1)).close()
    import yaml

    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["algo"] == "grpo" and saved["model"] == tiny_dir
    assert json.dumps(saved)  # plain data


def test_weight_check_detects_desynchronised_processes(
    tiny_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import accelerate.utils

    from llmgym.agents.modeling import check_in_sync, weights_digest
    from llmgym.agents.tiny import load

    model, _ = load(tiny_dir)

    class TwoProcesses:
        num_processes = 2

        def unwrap_model(self, m: Any) -> Any:
            return m

    digest = weights_digest(model)
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda xs: [*xs, digest])
    assert check_in_sync(TwoProcesses(), model, step=1) == digest
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda xs: [*xs, "f" * 64])
    with pytest.raises(Exception, match="different weights"):
        check_in_sync(TwoProcesses(), model, step=2)


def test_a_second_run_into_the_same_directory_must_resume(tiny_dir: str, tmp_path: Path) -> None:
    GRPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=1)).train()
    with pytest.raises(ValueError, match="pass resume: true"):
        GRPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=2))
    again = GRPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=2, resume=True))
    assert again.step == 1


# --- the update's shortcuts compute what the plain forward computes ------------------------------


def test_selective_logprobs_equal_log_softmax_then_gather() -> None:
    from llmgym.agents.modeling import selective_logprobs

    gen = torch.Generator().manual_seed(0)
    targets = torch.randint(0, 300, (6, 9), generator=gen)
    for dtype in (torch.float32, torch.float64):
        logits = (3 * torch.randn(6, 9, 300, generator=gen)).to(dtype)
        for temperature in (1.0, 0.7):
            lp, ent = selective_logprobs(
                logits, targets, temperature=temperature, with_entropy=True
            )
            full = torch.log_softmax(logits / temperature, -1)
            picked = full.gather(-1, targets[..., None])[..., 0]
            assert ((lp - picked).abs() <= 1e-6 * picked.abs().clamp(min=1)).all()  # float32 ulps
            assert torch.allclose(ent, -(full.exp() * full).sum(-1), atol=1e-5)
        if dtype == torch.float64:
            assert (lp - picked).abs().max() <= 1e-6


def _episodes(tok: Any) -> tuple[list[list[int]], list[int], list[list[int]]]:
    """Three groups (prompts of two lengths), completions of 1-9 tokens, one multi-turn episode
    whose environment tokens (mask 0) sit between two completions."""
    g = torch.Generator().manual_seed(1)
    prompts = [tok(f"What is {a} + 7?", add_special_tokens=False).input_ids for a in (3, 45, 3)]
    prompts[2] = prompts[2] + [tok.eos_token_id]  # a third prompt, one token longer
    seqs, lengths, masks = [], [], []
    for i in range(12):
        prompt = prompts[i % 3]
        n = 1 + int(torch.randint(0, 9, (1,), generator=g))
        completion = torch.randint(5, 300, (n,), generator=g).tolist()
        mask = [1] * n
        if i == 4:  # completion, 3 environment tokens, completion
            completion, mask = completion + [7, 8, 9] + completion, mask + [0, 0, 0] + mask
        seqs.append(prompt + completion)
        lengths.append(len(prompt))
        masks.append([0] * len(prompt) + mask)
    return seqs, lengths, masks


@pytest.mark.parametrize("bucket_cost", [0, 10**9])  # a run per length, or one run
def test_completion_logprobs_equal_the_full_forward_values_and_gradients(
    tiny_dir: str, bucket_cost: int
) -> None:
    from llmgym.agents.modeling import (
        CompletionBatch,
        completion_logprobs,
        pad_right,
        token_logprobs,
    )
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    model.train()
    seqs, lengths, masks = _episodes(tok)
    ids, attn = pad_right(seqs, tok.pad_token_id)
    weights = torch.randn(
        ids.shape[0], ids.shape[1] - 1, generator=torch.Generator().manual_seed(2)
    )
    full_lp, full_ent, _ = token_logprobs(model, ids, attn, temperature=0.8, with_entropy=True)
    full_mask, _ = pad_right(masks, 0)
    (full_lp * full_mask[:, 1:] * weights).sum().backward()
    full_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    batch = CompletionBatch.build(seqs, lengths, masks, tok.pad_token_id)
    assert batch.prompt_ids.shape[0] == 3  # each distinct prompt once
    lp, ent = completion_logprobs(
        model, batch, temperature=0.8, with_entropy=True, bucket_cost=bucket_cost
    )
    # Token j after an episode's prompt is token prompt_length + j: its logprob sits at
    # prompt_length + j - 1 in the full forward's next-token layout.
    placed = torch.zeros_like(lp)
    for i, n in enumerate(lengths):
        w = len(seqs[i]) - n
        placed[i, :w] = weights[i, n - 1 : n - 1 + w]
        on = batch.loss_mask[i, :w].bool()
        assert torch.allclose(lp[i, :w][on], full_lp[i, n - 1 : n - 1 + w][on], atol=1e-5)
        assert torch.allclose(ent[i, :w][on], full_ent[i, n - 1 : n - 1 + w][on], atol=1e-4)
    assert (lp[batch.loss_mask == 0] == 0).all()
    (lp * batch.loss_mask * placed).sum().backward()
    for a, b in zip(full_grads, (p.grad for p in model.parameters()), strict=True):
        assert torch.allclose(a, b, atol=1e-5 * max(1.0, float(a.abs().max())))


def test_completion_logprobs_give_each_episode_its_own_prompt_pass_under_dropout(
    tiny_dir: str,
) -> None:
    from llmgym.agents.modeling import CompletionBatch, completion_logprobs
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    seqs, lengths, masks = _episodes(tok)
    batch = CompletionBatch.build(seqs, lengths, masks, tok.pad_token_id)
    rows_seen: list[int] = []
    model.register_forward_pre_hook(
        lambda m, args, kw: rows_seen.append(kw["input_ids"].shape[0]), with_kwargs=True
    )
    model.train()
    completion_logprobs(model, batch, bucket_cost=10**9)
    assert rows_seen == [3, 12]  # distinct prompts, then every episode
    model.model.layers[0].self_attn.attention_dropout = 0.1  # now a forward draws masks
    rows_seen.clear()
    completion_logprobs(model, batch, bucket_cost=10**9)
    assert rows_seen == [12, 12]  # a prompt pass per episode: no dropout mask is shared


def test_on_policy_old_logprobs_are_the_forwards_own(tiny_dir: str) -> None:
    # With one iteration and one mini-batch the trainer skips the old-logprob forward and uses
    # the training forward's logprobs, detached: the loss and its gradient are those of the
    # two-forward computation.
    from llmgym.agents.grpo import grpo_loss
    from llmgym.agents.modeling import CompletionBatch, completion_logprobs
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    model.train()
    seqs, lengths, masks = _episodes(tok)
    batch = CompletionBatch.build(seqs, lengths, masks, tok.pad_token_id)
    adv = torch.linspace(-1, 1, len(seqs))
    results = []
    for separate_old in (True, False):
        model.zero_grad()
        old = None
        if separate_old:
            with torch.no_grad():
                old, _ = completion_logprobs(model, batch)
        lp, _ = completion_logprobs(model, batch)
        loss, _ = grpo_loss(lp, old if old is not None else lp.detach(), adv, batch.loss_mask)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert torch.allclose(loss_a, loss_b, atol=1e-6)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_length_buckets_pay_for_a_pass_only_when_padding_costs_more() -> None:
    from llmgym.agents.modeling import length_buckets

    lengths = [3, 30, 4, 31, 3, 29]
    assert length_buckets(lengths, cost=10**6) == [[0, 4, 2, 5, 1, 3]]  # one run, by length
    runs = length_buckets(lengths, cost=10)
    assert runs == [[0, 4, 2], [5, 1, 3]]
    assert sorted(r for run in length_buckets(lengths, cost=0) for r in run) == list(range(6))
