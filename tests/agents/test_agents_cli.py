"""``llmgym sft`` / ``llmgym train`` through the agents CLI."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml
from agents_common import DIGITS_ENV

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
        cli.cmd_train(_args("train", "--config", str(grpo), "--algo", "ppo"))
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

    # The training report shows each run's hyper-parameters, read from what the run wrote.
    from llmgym.agents.runlog import read_run_config
    from llmgym.evaluation.report import write_report

    assert read_run_config(tmp_path / "s")["algo"] == "sft"
    assert read_run_config(tmp_path / "s")["num_examples"] == 4
    for run, algo, settings in (
        ("g", "grpo", {"group_size": "2", "prompts_per_step": "2", "env_id": DIGITS_ENV}),
        ("p", "ppo", {"episodes_per_step": "4", "mini_batches": "1"}),
        ("s", "sft", {"batch_size": "2", "total_steps": "2", "data": f"env:{DIGITS_ENV}"}),
    ):
        page = write_report(tmp_path / run).read_text()
        assert '<h2 id="hyperparameters">Hyperparameters</h2>' in page, run
        assert "from config.yaml" in page
        cells = dict(re.findall(r"<tr><td>([^<]+)</td><td>([^<]*)</td></tr>", page))
        assert cells["algo"] == algo and cells["model"] == tiny_dir, (run, cells)
        for key, value in {"learning_rate": cells["learning_rate"], **settings}.items():
            assert cells[key] == value, (run, key, cells.get(key))
        # the hyper-parameters come before the curves
        assert page.index("Hyperparameters") < page.index("<h2>losses</h2>")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_subparsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_train_rejects_unknown_algo_and_fields(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algo: dqn\n")
    with pytest.raises(ConfigError, match="algo must be one of"):
        cli.cmd_train(_args("train", "--config", str(bad)))
    typo = tmp_path / "typo.yaml"
    typo.write_text("algo: grpo\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="did you mean learning_rate"):
        cli.cmd_train(_args("train", "--config", str(typo)))


def test_config_errors_are_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("algo: grpo\nlearning_rat: 0.1\n")
    for argv in (
        ["train", "--config", str(typo)],
        ["train", "--config", str(tmp_path / "missing.yaml")],
        ["sft", "--set", "learning_rate"],
        ["train", "--set", "learning_rate=[1"],
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("llmgym: error: ") and err.count("\n") == 1, err
    assert "did you mean learning_rate" in (
        cli.main(["train", "--config", str(typo)]) and capsys.readouterr().err
    )
