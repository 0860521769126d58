"""Real-model-scale options of GRPO: LoRA through peft (the reference is the adapter-disabled
base), bf16 autocast with fp32 master weights, gradient checkpointing, micro-batching."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from agents_common import DIGITS_ENV

from llmgym import error
from llmgym.agents.config import ConfigError
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

pytest.importorskip("peft")


def _cfg(tiny_dir: str, out: Path, **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": DIGITS_ENV,
        "output_dir": str(out),
        "total_steps": 1,
        "prompts_per_step": 4,
        "group_size": 4,
        "max_new_tokens": 6,
        "learning_rate": 1e-2,
        "progress": False,
        "tensorboard": False,
        "micro_batch_size": 16,
        "measure_update_kl": False,
    }
    base.update(kw)
    return GRPOConfig(**base)


def _weights(trainer: GRPOTrainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer._unwrapped().named_parameters()}


def _batch(tok: Any) -> Any:
    from llmgym.agents.modeling import CompletionBatch

    g = torch.Generator().manual_seed(3)
    prompts = [tok(f"What is {a} + 7?", add_special_tokens=False).input_ids for a in (3, 45)]
    seqs, lengths, masks = [], [], []
    for i in range(6):
        n = 2 + i
        completion = torch.randint(5, 300, (n,), generator=g).tolist()
        seqs.append(prompts[i % 2] + completion)
        lengths.append(len(prompts[i % 2]))
        masks.append([0] * lengths[-1] + [1] * n)
    return CompletionBatch.build(seqs, lengths, masks, tok.pad_token_id)


@pytest.fixture
def fresh_accelerate_state() -> Iterator[None]:
    """One process holds one Accelerate state: a test that asks for another precision resets it
    before and after, so the tests around it keep fp32."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


# --- LoRA -----------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_lora_step_changes_only_adapters_and_the_reference_is_the_base(
    tiny_dir: str, tmp_path: Path
) -> None:
    from llmgym.agents.modeling import completion_logprobs
    from llmgym.agents.peft_adapters import AdapterReference
    from llmgym.agents.tiny import load

    trainer = GRPOTrainer(_cfg(tiny_dir, tmp_path, lora_r=4, lora_alpha=8, beta=0.04))
    assert isinstance(trainer.ref, AdapterReference)
    assert trainer.ref.model is trainer.model  # no second copy of the weights
    before = _weights(trainer)
    trainer.train()
    after = _weights(trainer)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and all(".lora_" in n for n in changed)
    assert any(".lora_B." in n for n in changed)  # B starts at 0: the adapters now do something
    base, tok = load(tiny_dir)
    batch = _batch(tok)
    policy = trainer._unwrapped()
    with torch.no_grad():
        base_lp, _ = completion_logprobs(base.train(), batch)
        with trainer.ref.active():
            ref_lp, _ = completion_logprobs(policy, batch)
        policy_lp, _ = completion_logprobs(policy, batch)
    assert torch.allclose(ref_lp, base_lp, atol=1e-6)
    assert not torch.allclose(policy_lp, base_lp, atol=1e-4)

    # merge-and-save: final/ is a plain model with the policy's outputs; adapters beside it
    merged, _ = load(tmp_path / "final")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert (tmp_path / "final" / "adapter" / "adapter_config.json").is_file()
    with torch.no_grad():
        merged_lp, _ = completion_logprobs(merged.train(), batch)
    assert torch.allclose(merged_lp, policy_lp, atol=1e-5)


@pytest.mark.timeout(60)
def test_lora_target_modules_that_do_not_exist_fail_clearly(tiny_dir: str, tmp_path: Path) -> None:
    with pytest.raises(error.Error, match="lora_target_modules"):
        GRPOTrainer(_cfg(tiny_dir, tmp_path, lora_r=4, lora_target_modules=["no_such_proj"]))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"lora_r": -1}, "lora_r must be >= 0"),
        ({"lora_r": 4, "lora_dropout": 1.0}, "lora_dropout"),
        ({"lora_r": 4, "lora_target_modules": []}, "lora_target_modules"),
        ({"lora_r": 4, "lora_target_modules": ["q_proj", ""]}, "lora_target_modules"),
        ({"load_in_4bit": True}, "set lora_r"),
        (
            {"lora_r": 4, "beta": 0.04, "reference": "refresh", "ref_update_every": 2},
            "use reference: fixed",
        ),
        ({"mixed_precision": "fp8"}, "mixed_precision must be one of"),
        ({"context_overflow": "drop"}, "context_overflow"),
        ({"trackers": ["tensorboardX"]}, "trackers must be"),
    ],
)
def test_scale_options_reject_bad_values(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GRPOConfig(**kw)


@pytest.mark.timeout(60)
def test_qlora_without_a_gpu_says_what_it_needs(tiny_dir: str, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(error.Error, match="GPU|bitsandbytes"):
        GRPOTrainer(_cfg(tiny_dir, tmp_path, lora_r=4, load_in_4bit=True))


# --- precision ------------------------------------------------------------------------------------


def test_bf16_autocast_loss_is_close_to_fp32(tiny_dir: str) -> None:
    from llmgym.agents.grpo import grpo_loss
    from llmgym.agents.modeling import completion_logprobs
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    model.train()
    batch = _batch(tok)
    adv = torch.linspace(-1, 1, len(batch.ids))

    def loss_and_grads(autocast: bool) -> tuple[float, list[torch.Tensor]]:
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            lp, _ = completion_logprobs(model, batch)
            old = lp.detach() - 0.05  # ratios away from 1, so the clip matters
            loss, _ = grpo_loss(lp, old, adv, batch.loss_mask)
        loss.backward()
        return float(loss), [p.grad.clone() for p in model.parameters()]

    loss32, grads32 = loss_and_grads(False)
    loss16, grads16 = loss_and_grads(True)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master weights
    assert all(g.dtype == torch.float32 for g in grads16)
    assert loss16 == pytest.approx(loss32, rel=2e-2, abs=2e-3)
    cos = torch.nn.functional.cosine_similarity(
        torch.cat([g.flatten() for g in grads16]), torch.cat([g.flatten() for g in grads32]), 0
    )
    assert cos > 0.98


@pytest.mark.timeout(120)
def test_bf16_trainer_keeps_fp32_weights_and_optimizer_state(
    tiny_dir: str, tmp_path: Path, fresh_accelerate_state: None
) -> None:
    trainer = GRPOTrainer(_cfg(tiny_dir, tmp_path, mixed_precision="bf16"))
    assert trainer.accelerator.mixed_precision == "bf16"
    before = _weights(trainer)
    metrics = trainer.train()
    after = _weights(trainer)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert all(p.dtype == torch.float32 for p in after.values())
    for state in trainer.optimizer.state.values():
        assert state["exp_avg"].dtype == torch.float32
    assert metrics["losses/policy"] == metrics["losses/policy"]  # finite (not NaN)


# --- gradient checkpointing and micro-batching ----------------------------------------------------


def test_full_sequence_logprobs_equal_the_shared_prompt_ones(tiny_dir: str) -> None:
    from llmgym.agents.modeling import completion_logprobs, full_sequence_logprobs
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    model.train()
    batch = _batch(tok)
    weights = torch.randn(batch.ids.shape, generator=torch.Generator().manual_seed(4))
    lp, ent = completion_logprobs(model, batch, temperature=0.8, with_entropy=True)
    (lp * weights).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    lp2, ent2 = full_sequence_logprobs(model, batch, temperature=0.8, with_entropy=True)
    (lp2 * weights).sum().backward()
    assert torch.allclose(lp, lp2, atol=1e-5) and torch.allclose(ent, ent2, atol=1e-4)
    for a, p in zip(grads, model.parameters(), strict=True):
        assert torch.allclose(a, p.grad, atol=1e-5 * max(1.0, float(a.abs().max())))


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "variant",
    [
        {"micro_batch_size": 3},  # gradient accumulation over micro-batches
        {"micro_batch_size": 1, "loss_type": "grpo"},
        {"gradient_checkpointing": True},
        {"gradient_checkpointing": True, "lora_r": 4},
    ],
)
def test_memory_options_give_the_same_update(
    tiny_dir: str, tmp_path: Path, variant: dict[str, Any]
) -> None:
    # The rollouts are sampled in eval mode, so they are the same; the update must be too.
    common = {"lora_r": variant.get("lora_r", 0), "loss_type": variant.get("loss_type", "dapo")}
    reference = GRPOTrainer(_cfg(tiny_dir, tmp_path / "ref", **common))
    reference.train()
    other = GRPOTrainer(_cfg(tiny_dir, tmp_path / "var", **{**common, **variant}))
    if variant.get("gradient_checkpointing"):
        from llmgym.agents.precision import is_checkpointing

        assert is_checkpointing(other.model)
    other.train()
    want, got = _weights(reference), _weights(other)
    assert want.keys() == got.keys()
    assert any(not torch.equal(want[n], _weights_at_start(tiny_dir, n, want)) for n in want)
    for name in want:
        assert torch.allclose(want[name], got[name], atol=2e-5), name


def _weights_at_start(tiny_dir: str, name: str, like: dict[str, torch.Tensor]) -> torch.Tensor:
    """The weight ``name`` before training (a LoRA adapter's name maps to nothing: zeros)."""
    from llmgym.agents.tiny import load

    model, _ = load(tiny_dir)
    start = dict(model.named_parameters())
    return start[name].detach() if name in start else torch.zeros_like(like[name])
