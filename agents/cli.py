"""``llmgym sft`` and ``llmgym train`` (GRPO or PPO): trainers from YAML configs.

``llmgym train --config configs/grpo.yaml --model DIR --set learning_rate=3e-4 --output-dir runs/x``; the
algorithm is the file's ``algo:`` (``grpo`` or ``ppo``) unless ``--algo`` says otherwise. Several
processes: ``accelerate launch --num_processes 2 --cpu -m llmgym.agents.grpo --config ...``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

ALGOS = ("grpo", "ppo", "expert_iteration")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML file of config fields (see configs/)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field (value read as YAML); repeatable",
    )
    p.add_argument(
        "--model",
        help="what to train (overrides model): a save_pretrained directory, a hub id, or tiny",
    )
    p.add_argument("--output-dir", help="run directory (overrides output_dir)")
    p.add_argument("--resume", action="store_true", help="resume from the run's latest checkpoint")


def _extra(args: argparse.Namespace) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if args.model:
        extra["model"] = args.model
    if args.output_dir:
        extra["output_dir"] = args.output_dir
    if args.resume:
        extra["resume"] = True
    return extra


def cmd_sft(args: argparse.Namespace) -> int:
    from llmgym.agents.sft import SFTConfig, SFTTrainer

    cfg = SFTConfig.load(args.config, args.overrides, **_extra(args))
    trainer = SFTTrainer(cfg)  # writes <output_dir>/config.yaml (what `llmgym report` shows)
    metrics = trainer.train()
    print(
        f"sft done: loss {metrics.get('losses/sft', float('nan')):.4f}; model in {cfg.output_dir}/final"
    )
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from llmgym.agents.config import ConfigError, read_yaml

    algo = args.algo
    if algo is None:
        algo = read_yaml(args.config).get("algo", "grpo") if args.config else "grpo"
    if algo not in ALGOS:
        raise ConfigError(
            f"algo must be one of {ALGOS}, got {algo!r} (set 'algo:' in the file or --algo)"
        )
    if algo == "expert_iteration":
        from llmgym.agents.expert_iteration import ExpertIterationConfig, run

        result = run(ExpertIterationConfig.load(args.config, args.overrides, **_extra(args)))
        print(
            f"expert iteration done: {result['policy_samples']} policy samples; "
            f"model in {result['final_model']}"
        )
        return 0
    trainer: Any
    if algo == "grpo":
        from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

        trainer = GRPOTrainer(GRPOConfig.load(args.config, args.overrides, **_extra(args)))
    else:
        from llmgym.agents.ppo import PPOConfig, PPOTrainer

        trainer = PPOTrainer(PPOConfig.load(args.config, args.overrides, **_extra(args)))
    try:
        metrics = trainer.train()
    finally:
        trainer.close()
    print(
        f"{algo} done: reward {metrics.get('rewards/mean', float('nan')):.3f}, "
        f"success {metrics.get('rewards/success_rate', float('nan')):.3f}; "
        f"metrics in {trainer.cfg.output_dir}/metrics.jsonl, model in {trainer.cfg.output_dir}/final"
    )
    return 0


def add_subparsers(subparsers: Any) -> None:
    """Add ``sft`` and ``train`` to the ``llmgym`` command's subparsers."""
    p = subparsers.add_parser("sft", help="supervised fine-tuning / pretraining (configs/sft.yaml)")
    _common(p)
    p.set_defaults(func=cmd_sft)
    p = subparsers.add_parser(
        "train", help="RL training: GRPO or PPO (configs/grpo.yaml, configs/ppo.yaml)"
    )
    _common(p)
    p.add_argument(
        "--algo",
        choices=ALGOS,
        help="grpo, ppo or expert_iteration (default: the config's algo:, else grpo)",
    )
    p.set_defaults(func=cmd_train)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m llmgym.agents.cli train --config ...``."""
    from llmgym.cli import ArgumentParser, run_cli

    def build() -> argparse.ArgumentParser:
        parser = ArgumentParser(prog="llmgym")
        add_subparsers(parser.add_subparsers(dest="command", required=True))
        return parser

    return run_cli(build, argv)


if __name__ == "__main__":
    sys.exit(main())
