"""PPO trainer: value head, KL in the reward, adaptive KL, early stop, checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from agents_common import DIGITS_ENV, TOOL_ENV

from llmgym.agents.ppo import PPOConfig, PPOTrainer
from llmgym.agents.runlog import read_metrics


def _cfg(tiny_dir: str, out: Path, **kw: Any) -> PPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": DIGITS_ENV,
        "output_dir": str(out),
        "total_steps": 2,
        "episodes_per_step": 8,
        "mini_batches": 2,
        "ppo_epochs": 2,
        "max_new_tokens": 6,
        "learning_rate": 1e-3,
        "progress": False,
        "tensorboard": False,
        "value_head_std": 0.01,
    }
    base.update(kw)
    return PPOConfig(**base)


def test_ppo_step_updates_policy_and_value_head(tiny_dir: str, tmp_path: Path) -> None:
    trainer = PPOTrainer(_cfg(tiny_dir, tmp_path, kl_coef=0.1, kl_target=0.5, kl_horizon=50))
    policy = trainer._policy()
    before_lm = [p.detach().clone() for p in policy.lm.parameters()]
    before_v = policy.value_head.weight.detach().clone()
    metrics = trainer.train()
    assert any(
        not torch.equal(a, b) for a, b in zip(before_lm, policy.lm.parameters(), strict=True)
    )
    assert not torch.equal(before_v, policy.value_head.weight)
    for key in (
        "losses/policy",
        "losses/value",
        "losses/kl_penalty",
        "kl",
        "entropy",
        "clip_frac",
        "charts/kl_coef",
        "charts/approx_kl",
        "rewards/length",
        "time/score_s",
    ):
        assert key in metrics, key
    assert metrics["charts/kl_coef"] != 0.1  # adaptive
    assert (tmp_path / "final" / "value_head.pt").is_file()
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]


def test_ppo_without_kl_loads_no_reference_and_early_stops(tiny_dir: str, tmp_path: Path) -> None:
    trainer = PPOTrainer(
        _cfg(tiny_dir, tmp_path, kl_coef=0.0, target_kl=1e-9, ppo_epochs=4, learning_rate=1e-2)
    )
    assert trainer.ref is None
    m = trainer.train_step()
    assert (
        m["charts/early_stop"] == 1.0 and m["charts/updates"] == 2
    )  # stopped after the first epoch
    assert m["kl"] == m["charts/approx_kl"] > 0  # without a reference: how far the update moved
    assert m["losses/kl_penalty"] == 0.0


def test_ppo_resume_is_exact(tiny_dir: str, tmp_path: Path) -> None:
    straight = PPOTrainer(
        _cfg(
            tiny_dir,
            tmp_path / "a",
            total_steps=2,
            kl_coef=0.05,
            reference="mix",
            ref_update_every=1,
        )
    )
    straight.train()
    first = PPOTrainer(
        _cfg(
            tiny_dir,
            tmp_path / "b",
            total_steps=1,
            kl_coef=0.05,
            reference="mix",
            ref_update_every=1,
        )
    )
    first.train()
    again = PPOTrainer(
        _cfg(
            tiny_dir,
            tmp_path / "b",
            total_steps=2,
            kl_coef=0.05,
            reference="mix",
            ref_update_every=1,
            resume=True,
        )
    )
    again.train()
    for a, b in zip(straight._policy().parameters(), again._policy().parameters(), strict=True):
        assert torch.equal(a, b)
    assert straight.ref is not None and again.ref is not None
    for a, b in zip(straight.ref.model.parameters(), again.ref.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_ppo_multi_turn(tiny_dir: str, tmp_path: Path) -> None:
    trainer = PPOTrainer(
        _cfg(tiny_dir, tmp_path, env_id=TOOL_ENV, episodes_per_step=4, mini_batches=1)
    )
    m = trainer.train_step()
    assert m["charts/turns"] >= 1 and "rewards/toyarith" in m


def test_ppo_continues_with_its_value_head(tiny_dir: str, tmp_path: Path) -> None:
    trainer = PPOTrainer(_cfg(tiny_dir, tmp_path / "one", total_steps=1))
    trainer.train()
    saved = trainer._policy().value_head.weight.detach().clone()
    again = PPOTrainer(_cfg(str(tmp_path / "one" / "final"), tmp_path / "two", total_steps=1))
    assert torch.equal(again._policy().value_head.weight, saved)
