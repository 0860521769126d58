"""Expert iteration from search against GRPO: policy samples spent until held-out success reaches
a target, from the same SFT model on the same family.

Both arms start from the demo's SFT model (``llmgym.agents.demo.prepare``: pre-training and SFT,
before GRPO; built here unless ``--demo`` names it) on the demo's family (``llm/Math-v0``,
``arith.add_small``, difficulty 0), and are evaluated the demo's way: greedy success on 200
held-out episodes (seeds from 1,000,000). The target is ``--target`` (default 0.95; the demo's
GRPO reaches 100% after 60 steps, 7,680 samples).

- ``grpo``: the demo's GRPO settings (16 prompts x 8 samples a step, learning rate 2e-4),
  evaluated every ``--grpo-eval-every`` steps (default 1); each step costs 128 policy samples.
- ``expert_iteration``: rounds of ``agents/expert_iteration.py`` (``algo: expert_iteration``,
  one round per call of its ``run``, each on fresh task seeds): the search (``--search``, from
  ``--tasks-per-round`` tasks) keeps the best trajectory of every successful search and the
  model is fine-tuned on them; evaluated after every round. A round costs the messages its
  searches sampled (``policy_samples``). On a one-turn family the search is over first messages
  only, so best-of-N is the natural search; beam and MCTS add nothing without later turns.
  The defaults (best-of-4 from 32 tasks, 20 SFT steps at 5e-4) make a round cost 128 samples,
  one GRPO step, so both arms are evaluated at the same sample counts.

Policy samples are sampled messages (one per episode here: the family has one turn); the
evaluation's greedy episodes are not counted for either arm. Writes ``expert_iteration.json``
(every evaluation of every arm and seed) and ``expert_iteration_curve.png`` to ``--out`` and prints
the samples-to-target table; ``--report A.json B.json`` merges arms run in separate processes.
It does not tune either arm beyond these defaults.
Run: python benchmarks/expert_iteration.py [--demo runs/demo/sft/final] [--seeds 3] [--target 0.95]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ENV_ID = "llm/Math-v0"
ENV_KWARGS: dict[str, Any] = {"family": "arith.add_small", "difficulty": 0.0}
EVAL_EPISODES = 200


def held_out(model: Any, tokenizer: Any) -> float:
    """The demo's held-out measure: greedy success on 200 episodes from seed 1,000,000."""
    from llmgym.agents.demo import HELD_OUT_SEED
    from llmgym.agents.rollout import evaluate

    seeds = range(HELD_OUT_SEED, HELD_OUT_SEED + EVAL_EPISODES)
    return evaluate(
        model, tokenizer, ENV_ID, ENV_KWARGS, seeds=seeds, max_new_tokens=32
    ).success_rate


def grpo_arm(base: Path, out: Path, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """GRPO from ``base`` until the target or ``--grpo-steps``; evaluations with samples spent."""
    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    trainer = GRPOTrainer(
        GRPOConfig(
            model=str(base),
            env_id=ENV_ID,
            env_kwargs=ENV_KWARGS,
            output_dir=str(out / f"grpo-seed{seed}"),
            total_steps=args.grpo_steps,
            prompts_per_step=16,
            group_size=8,
            max_new_tokens=32,
            learning_rate=2e-4,
            tensorboard=False,
            progress=False,
            torch_threads=1,
            seed=seed,
        )
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    evals: list[dict[str, Any]] = []
    try:
        for step in range(1, args.grpo_steps + 1):
            metrics = trainer.train_step()
            if step % args.grpo_eval_every and step != args.grpo_steps:
                continue
            success = held_out(model, trainer.tokenizer)
            model.train()
            samples = step * 16 * 8
            evals.append({"step": step, "samples": samples, "success": success})
            print(
                f"[grpo seed {seed}] step {step}: {samples} samples, held-out {success:.1%} "
                f"(train success {metrics.get('rewards/success_rate', 0):.2f})",
                flush=True,
            )
            if success >= args.target:
                break
    finally:
        trainer.close()
    return evals


def expert_iteration_arm(
    base: Path, out: Path, seed: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Rounds of search-then-SFT from ``base`` until the target or ``--rounds``."""
    from llmgym.agents.expert_iteration import ExpertIterationConfig, run
    from llmgym.agents.tiny import load

    current, samples = str(base), 0
    evals: list[dict[str, Any]] = []
    for r in range(args.rounds):
        first = 100_000 * (seed + 1) + r * args.tasks_per_round  # fresh tasks every round
        cfg = ExpertIterationConfig(
            model=current,
            env_id=ENV_ID,
            env_kwargs=ENV_KWARGS,
            output_dir=str(out / f"exit-seed{seed}" / f"round{r}"),
            search=args.search,
            iterations=1,
            tasks_per_iteration=args.tasks_per_round,
            total_steps=args.sft_steps,
            seed=first,
            tensorboard=False,
            progress=False,
        )
        result = run(cfg, log=lambda line: print(f"[exit seed {seed}] {line}", flush=True))
        samples += result["policy_samples"]
        current = result["final_model"]
        success = held_out(*load(current))
        evals.append({"round": r + 1, "samples": samples, "success": success})
        print(
            f"[exit seed {seed}] round {r + 1}: {samples} samples, held-out {success:.1%}",
            flush=True,
        )
        if success >= args.target:
            break
    return evals


def samples_to_target(evals: Sequence[dict[str, Any]], target: float) -> int | None:
    """The samples spent at the first evaluation at or above ``target`` (None: never)."""
    return next((e["samples"] for e in evals if e["success"] >= target), None)


def table(results: dict[str, Any], target: float) -> str:
    """README rows: samples to the target per seed, their mean, and the last held-out success."""
    lines = [
        f"| arm | samples to {target:.0%} held-out, per seed | mean | final held-out per seed |",
        "|---|---|---|---|",
    ]
    for arm in ("grpo", "expert_iteration"):
        runs = results[arm]
        reached = [samples_to_target(evals, target) for evals in runs]
        per_seed = ", ".join(f"{n:,}" if n is not None else "not reached" for n in reached)
        done = [n for n in reached if n is not None]
        mean = f"{statistics.mean(done):,.0f}" if len(done) == len(reached) else "-"
        finals = ", ".join(f"{evals[-1]['success']:.1%}" for evals in runs)
        lines.append(f"| {arm} | {per_seed} | {mean} | {finals} |")
    return "\n".join(lines)


def plot(results: dict[str, Any], target: float, path: Path) -> None:
    """Held-out success against policy samples, one line per arm and seed, the target dashed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    colors = {"grpo": "tab:blue", "expert_iteration": "tab:orange"}
    for arm, color in colors.items():
        for seed, evals in enumerate(results.get(arm, [])):
            xs = [0] + [e["samples"] for e in evals]
            ys = [results["base_success"]] + [e["success"] for e in evals]
            ax.plot(xs, ys, "-", color=color, alpha=0.8, label=arm if seed == 0 else None)
    ax.axhline(target, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("policy samples")
    ax.set_ylabel("held-out success (greedy)")
    ax.set_ylim(0, 1.02)
    ax.legend()
    fig.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", help="the demo's SFT model (built when not given)")
    parser.add_argument("--out", default="runs/expert-iteration-bench")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--grpo-steps", type=int, default=60)
    parser.add_argument(
        "--grpo-eval-every",
        type=int,
        default=1,
        help="steps (128 samples each) between evaluations",
    )
    parser.add_argument(
        "--rounds", type=int, default=60, help="at most 7,680 samples: GRPO's 60 steps"
    )
    parser.add_argument("--search", default="best_of_n:4", help="llmgym.search spec per task")
    parser.add_argument("--tasks-per-round", type=int, default=32)
    parser.add_argument("--sft-steps", type=int, default=20, help="SFT steps per round")
    parser.add_argument("--arms", default="grpo,expert_iteration")
    parser.add_argument("--report", nargs="+", help="merge these expert_iteration.json files")
    args = parser.parse_args(argv)
    if args.report:  # arms run in separate processes, one table
        merged: dict[str, Any] = {}
        for path in args.report:
            merged.update(json.loads(Path(path).read_text()))
        print(table(merged, args.target))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        plot(merged, args.target, Path(args.out) / "expert_iteration_curve.png")
        return 0
    import torch

    from llmgym.agents.tiny import load

    torch.set_num_threads(1)  # a tiny model: more threads only contend on a shared CPU
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.demo:
        base = Path(args.demo)
    else:
        from llmgym.agents.demo import DemoConfig, prepare

        prepare(DemoConfig(output_dir=str(out / "demo"), report=False), log=print)
        base = out / "demo" / "sft" / "final"
    t0 = time.perf_counter()
    arms = {"grpo": grpo_arm, "expert_iteration": expert_iteration_arm}
    results: dict[str, Any] = {"args": vars(args), "base_success": held_out(*load(base))}
    for name in args.arms.split(","):
        results[name] = [arms[name](base, out, seed, args) for seed in range(args.seeds)]
    results["seconds"] = time.perf_counter() - t0
    (out / "expert_iteration.json").write_text(json.dumps(results, indent=1))
    print(f"base held-out {results['base_success']:.1%}")
    if all(name in results for name in arms):
        print(table(results, args.target))
    plot(results, args.target, out / "expert_iteration_curve.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
