"""PPO and SFT with the real-model-scale options (LoRA, bf16 autocast, gradient checkpointing,
trackers, the context rule), as GRPO has them (tests/agents/test_agents_scale.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from agents_common import DIGITS_ENV, MATH, MATH_KWARGS

from llmgym.agents.config import ConfigError
from llmgym.agents.ppo import PPOConfig, PPOTrainer
from llmgym.agents.sft import SFTConfig, SFTTrainer


@pytest.fixture
def fresh_accelerate_state() -> Iterator[None]:
    """One process holds one Accelerate state: a test that asks for bf16 resets it before and
    after, so the tests around it keep fp32."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def _ppo(tiny_dir: str, out: Path, **kw: Any) -> PPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": DIGITS_ENV,
        "output_dir": str(out),
        "total_steps": 2,
        "episodes_per_step": 4,
        "max_new_tokens": 6,
        "learning_rate": 1e-2,
        "progress": False,
        "tensorboard": False,
        "value_head_std": 0.01,
    }
    return PPOConfig(**{**base, **kw})


def _sft(tiny_dir: str, out: Path, **kw: Any) -> SFTConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "data": "env:llm/Math-v0",
        "env_kwargs": {"family": "arith.add_small", "difficulty": 0.0},
        "num_examples": 4,
        "batch_size": 4,
        "micro_batch_size": 2,
        "output_dir": str(out),
        "total_steps": 2,
        "progress": False,
        "tensorboard": False,
    }
    return SFTConfig(**{**base, **kw})


def _state(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ppo_with_lora_trains_adapters_and_value_head_only_and_the_reference_is_the_base(
    tiny_dir: str, tmp_path: Path
) -> None:
    from llmgym.agents.peft_adapters import AdapterReference
    from llmgym.agents.tiny import load

    cfg = _ppo(tiny_dir, tmp_path, lora_r=4, lora_alpha=8, kl_coef=0.1, gradient_checkpointing=True)
    trainer = PPOTrainer(cfg)
    assert isinstance(trainer.ref, AdapterReference)  # no second copy of the weights
    policy = trainer._policy()
    before = _state(policy)
    metrics = trainer.train()
    after = _state(policy)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and all(".lora_" in n or n.startswith("value_head.") for n in changed)
    assert any(".lora_B." in n for n in changed) and "value_head.weight" in changed
    assert "losses/kl_penalty" in metrics and "losses/value" in metrics
    merged, _ = load(tmp_path / "final")  # merged model, adapters beside it, and the critic
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert (tmp_path / "final" / "adapter" / "adapter_config.json").is_file()
    assert (tmp_path / "final" / "value_head.pt").is_file()
    trainer.close()


def test_ppo_lora_rejects_a_moving_reference(tiny_dir: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="reference: fixed"):
        _ppo(tiny_dir, tmp_path, lora_r=4, kl_coef=0.1, reference="refresh", ref_update_every=1)


@pytest.mark.timeout(120)
def test_ppo_context_rule_error_stops_before_sampling(tiny_dir: str, tmp_path: Path) -> None:
    from llmgym import error

    cfg = _ppo(  # Math-v0's prompts are longer than the 15 tokens this budget leaves them
        tiny_dir,
        tmp_path,
        env_id=MATH,
        env_kwargs=MATH_KWARGS,
        max_total_tokens=22,
        context_overflow="error",
    )
    trainer = PPOTrainer(cfg)
    try:
        with pytest.raises(error.Error, match="leaves no room for max_new_tokens"):
            trainer.train_step()
    finally:
        trainer.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ppo_bf16_autocast_keeps_fp32_weights(
    tiny_dir: str, tmp_path: Path, fresh_accelerate_state: None
) -> None:
    trainer = PPOTrainer(_ppo(tiny_dir, tmp_path, mixed_precision="bf16", total_steps=1))
    assert trainer.accelerator.mixed_precision == "bf16"
    metrics = trainer.train()
    assert all(p.dtype == torch.float32 for p in trainer._policy().parameters())
    assert metrics["losses/policy"] == metrics["losses/policy"]  # finite, not NaN
    trainer.close()


@pytest.mark.timeout(180)
def test_sft_with_lora_and_checkpointing_trains_adapters_and_saves_merged(
    tiny_dir: str, tmp_path: Path
) -> None:
    from llmgym.agents.tiny import load

    cfg = _sft(tiny_dir, tmp_path, lora_r=4, lora_alpha=8, gradient_checkpointing=True)
    trainer = SFTTrainer(cfg)
    model = trainer.accelerator.unwrap_model(trainer.model)
    before = _state(model)
    metrics = trainer.train()
    changed = {n for n, v in _state(model).items() if not torch.equal(before[n], v)}
    assert changed and all(".lora_" in n for n in changed)
    assert metrics["losses/sft"] > 0
    merged, _ = load(tmp_path / "final")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert (tmp_path / "final" / "adapter" / "adapter_config.json").is_file()


@pytest.mark.timeout(180)
def test_sft_bf16_loss_is_close_to_fp32_and_trackers_get_the_run(
    tiny_dir: str, tmp_path: Path, fresh_accelerate_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the local file store of the issue
    fp32 = SFTTrainer(_sft(tiny_dir, tmp_path / "fp32", total_steps=1)).train_step()
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    cfg = _sft(
        tiny_dir,
        tmp_path / "bf16",
        total_steps=1,
        mixed_precision="bf16",
        trackers=["mlflow"],
        mlflow_tracking_uri=(tmp_path / "mlruns").as_uri(),
    )
    trainer = SFTTrainer(cfg)
    assert trainer.accelerator.mixed_precision == "bf16"
    metrics = trainer.train()
    assert metrics["losses/sft"] == pytest.approx(fp32["losses/sft"], rel=0.05)
    runs = list((tmp_path / "mlruns").rglob("meta.yaml"))
    assert runs  # the MLflow file store holds the run (with its params: the config)
    params = [p.name for p in (tmp_path / "mlruns").rglob("params/*")]
    assert "learning_rate" in params and "lora_r" in params
