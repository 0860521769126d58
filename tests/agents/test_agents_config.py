"""Trainer configs: bad values and combinations are rejected with a message that says how to fix them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmgym.agents.config import ConfigError, TrainConfig, parse_overrides
from llmgym.agents.grpo import GRPOConfig
from llmgym.agents.ppo import PPOConfig
from llmgym.agents.scheduler import SchedulerConfig
from llmgym.agents.sft import SFTConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize(
    ("cls", "kwargs", "fix"),
    [
        (GRPOConfig, {"group_size": 1}, "advantages are relative to the group"),
        (GRPOConfig, {"loss_type": "mean"}, "one of ('dapo', 'grpo', 'bnpo', 'dr_grpo')"),
        (GRPOConfig, {"scale_rewards": "rank"}, "scale_rewards must be one of"),
        (GRPOConfig, {"reference": "refresh", "beta": 0.04}, "ref_update_every >= 1"),
        (GRPOConfig, {"reference": "mix", "ref_update_every": 5}, "set beta > 0"),
        (GRPOConfig, {"kl_target": 0.1}, "set beta"),
        (GRPOConfig, {"dynamic_sampling_rounds": 2}, "needs dynamic_sampling: true"),
        (
            GRPOConfig,
            {"max_total_tokens": 32, "max_new_tokens": 64},
            "to leave room for the prompt",
        ),
        (GRPOConfig, {"temperature": 0.0}, "try 1.0"),
        (GRPOConfig, {"learning_rate": 0.0}, "try 1e-4"),
        (
            GRPOConfig,
            {"warmup_steps": 200, "total_steps": 100},
            "warmup_steps must be in [0, total_steps=100)",
        ),
        (GRPOConfig, {"env_id": "Math"}, "such as 'llm/Math-v0'"),
        (GRPOConfig, {"mini_batches": 0}, "mini_batches must be between"),
        (PPOConfig, {"clip_range": 1.5}, "0.2 is usual"),
        (PPOConfig, {"kl_target": 1.0, "kl_coef": 0.0}, "set kl_coef"),
        (PPOConfig, {"mini_batches": 100, "episodes_per_step": 8}, "episodes_per_step (8)"),
        (PPOConfig, {"reference": "refresh"}, "ref_update_every >= 1"),
        (SFTConfig, {"data": "/no/such/file.jsonl"}, "pass a JSONL path or 'env:<env id>'"),
        (TrainConfig, {"lr_schedule": "step"}, "'constant', 'linear' or 'cosine'"),
        (TrainConfig, {"adam_betas": (0.9, 1.5)}, "adam_betas must be two numbers in [0, 1)"),
    ],
)
def test_bad_config_is_rejected_with_a_fix(cls: type, kwargs: dict, fix: str) -> None:
    with pytest.raises(ConfigError) as info:
        cls(**kwargs)
    assert fix in str(info.value)


def test_unknown_field_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean group_size"):
        GRPOConfig.from_dict({"group_sise": 4})
    with pytest.raises(ConfigError, match="has no field 'zzz'"):
        GRPOConfig.from_dict({"zzz": 1})


def test_yaml_numbers_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "algo: grpo\nlearning_rate: 1e-4\ngroup_size: '4'\nenv_kwargs: {difficulty: 0.5}\n"
    )
    cfg = GRPOConfig.load(path, ["total_steps=7", "beta=0.04"], output_dir="x")
    assert cfg.learning_rate == 1e-4 and cfg.group_size == 4 and cfg.total_steps == 7
    assert cfg.beta == 0.04 and cfg.env_kwargs == {"difficulty": 0.5} and cfg.output_dir == "x"
    assert parse_overrides(["model=runs/a b"]) == {"model": "runs/a b"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["learning_rate"])
    with pytest.raises(ConfigError, match="expects a int"):
        GRPOConfig.from_dict({"group_size": "many"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        GRPOConfig.load(bad)
    with pytest.raises(ConfigError, match="No such config file"):
        GRPOConfig.load(tmp_path / "missing.yaml")


def test_scheduler_config_validation() -> None:
    with pytest.raises(Exception, match="lower_at < raise_at"):
        SchedulerConfig(lower_at=0.9, raise_at=0.5)
    with pytest.raises(Exception, match="no field"):
        SchedulerConfig.from_dict({"temperature": 1})


@pytest.mark.parametrize("name", ["sft.yaml", "grpo.yaml", "ppo.yaml", "grpo_mixture.yaml"])
def test_repo_configs_load(name: str) -> None:
    data = yaml.safe_load((CONFIGS / name).read_text())
    cls = {"grpo": GRPOConfig, "ppo": PPOConfig}.get(data.get("algo"), SFTConfig)
    cfg = cls.load(CONFIGS / name)
    assert cfg.total_steps >= 1
    if data.get("scheduler"):
        SchedulerConfig.from_dict(data["scheduler"])


@pytest.mark.parametrize("name", ["cpu_2proc.yaml", "deepspeed_zero2.yaml", "fsdp.yaml"])
def test_accelerate_configs_parse(name: str) -> None:
    data = yaml.safe_load((CONFIGS / "accelerate" / name).read_text())
    assert (
        data["distributed_type"] in ("MULTI_CPU", "DEEPSPEED", "FSDP")
        and data["num_processes"] >= 2
    )


@pytest.mark.parametrize("scheduler", [{"question_rest": 5}, {"strategy": "signal"}])
def test_ppo_refuses_scheduler_settings_that_need_groups(scheduler: dict) -> None:
    from llmgym.agents.ppo import PPOConfig

    with pytest.raises(ConfigError, match="PPO has no groups"):
        PPOConfig(model="tiny", env_id="llm/Math-v0", scheduler=scheduler)
