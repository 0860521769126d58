"""``llmgym sft`` / ``llmgym train`` through the agents CLI."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml
from conftest import DIGITS_ENV

from llmgym.agents import cli
from llmgym.agents.config import ConfigError
from llmgym.agents.runlog import read_metrics


def test_add_subparsers_registers_sft_and_train() -> None:
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["train", "--config", "x.yaml", "--set", "beta=0.1", "--algo", "ppo", "--resume"]
    )
    assert (
        args.func is cli.cmd_train
        and args.overrides == ["beta=0.1"]
        and args.algo == "ppo"
        and args.resume
    )
    assert parser.parse_args(["sft"]).func is cli.cmd_sft


def test_train_and_sft_commands_run(tiny_dir: str, tmp_path: Path) -> None:
    grpo = tmp_path / "grpo.yaml"
    grpo.write_text(
        yaml.safe_dump(
            {
                "algo": "grpo",
                "model": tiny_dir,
                "env_id": DIGITS_ENV,
                "total_steps": 1,
                "prompts_per_step": 2,
                "group_size": 2,
                "max_new_tokens": 4,
                "progress": False,
            }
        )
    )
    assert cli.main(["train", "--config", str(grpo), "--output-dir", str(tmp_path / "g")]) == 0
    assert read_metrics(tmp_path / "g")[0]["step"] == 1
    ppo = tmp_path / "ppo.yaml"
    ppo.write_text(
        yaml.safe_dump(
            {
                "model": tiny_dir,
                "env_id": DIGITS_ENV,
                "total_steps": 1,
                "max_new_tokens": 4,
                "progress": False,
            }
        )
    )
    args = ["train", "--config", str(ppo), "--algo", "ppo", "--output-dir", str(tmp_path / "p")]
    assert cli.main([*args, "--set", "episodes_per_step=4", "--set", "mini_batches=1"]) == 0
    assert "losses/value" in read_metrics(tmp_path / "p")[0]
    with pytest.raises(ConfigError, match="PPOConfig has no field 'group_size'"):
        cli.main(["train", "--config", str(grpo), "--algo", "ppo"])
    sft = tmp_path / "sft.yaml"
    sft.write_text(
        yaml.safe_dump(
            {
                "model": tiny_dir,
                "data": f"env:{DIGITS_ENV}",
                "num_examples": 4,
                "batch_size": 2,
                "total_steps": 2,
                "progress": False,
            }
        )
    )
    assert cli.main(["sft", "--config", str(sft), "--output-dir", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "final" / "config.json").is_file()


def test_train_rejects_unknown_algo_and_fields(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algo: dqn\n")
    with pytest.raises(ConfigError, match="algo must be one of"):
        cli.main(["train", "--config", str(bad)])
    typo = tmp_path / "typo.yaml"
    typo.write_text("algo: grpo\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="did you mean learning_rate"):
        cli.main(["train", "--config", str(typo)])
