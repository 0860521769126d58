"""The main job: pretrain, SFT and GRPO a tiny model on Math-v0's easiest family, then evaluate it.

``python -m llmgym.agents.demo`` (or ``llmgym demo`` / ``make demo``) runs the three training
stages of the background articles on a model built from a config, on CPU, in a few minutes:

1. **Pre-training** (what the model knows): next-token prediction on generated text: addition
   facts as equations ("4 + 7 = 11."), exercises in the env's wording followed by the equation
   ("What is 4 + 7?", the answer instruction, "4 + 7 = 11."), and chat-formatted small talk (so
   the chat template's role tokens mean something). No chat-formatted math and no ``\\boxed{}``
   answer appear in it.
2. **SFT** (interaction alignment): a short stage on a small set of demonstrations: Math-v0
   prompts in the chat format answered with a worked solution ("4 + 7 = 11, so the answer is
   \\boxed{11}."). Too short to make the behaviour reliable: the SFT model often writes the right
   equation and then boxes a wrong number.
3. **GRPO** (RL on the env's verified reward): groups of 8 samples per task, tasks drawn from the
   env's own stream.

Both models are evaluated greedily on held-out seeds (episodes with seeds that neither stage
drew; the family has only 81 distinct sums, so held-out means unseen episodes, not unseen sums).
The run prints before/after, saves the reward curve to ``<output-dir>/reward_curve.png`` and
everything to ``<output-dir>/results.json``. Everything is seeded and runs on one CPU thread,
so a rerun on the same machine gives the same numbers. ``--quick`` runs the same code path with
fewer steps (what the test suite runs); ``--ppo`` also trains PPO from the same SFT model.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ENV_ID = "llm/Math-v0"
ENV_KWARGS: dict[str, Any] = {"family": "arith.add_small", "difficulty": 0.0}
_QUESTION = re.compile(r"What is (\d+) \+ (\d+)\?")
INSTRUCTION = "Put your final answer in \\boxed{}."
"""Math-v0's answer instruction: pretraining text quotes it (a textbook's exercise wording)."""


@dataclass
class DemoConfig:
    """Sizes and budgets of the demo's stages."""

    output_dir: str = "runs/demo"
    """Where every stage writes its run directory, and the results and reward curve go."""
    seed: int = 0
    """Seeds the corpus, the model's initialisation, sampling and task draws."""
    hidden_size: int = 64
    """Tiny Llama width."""
    num_layers: int = 2
    """Tiny Llama depth."""
    vocab_size: int = 512
    """BPE vocabulary of the locally trained tokenizer."""
    pretrain_docs: int = 4000
    """Generated pretraining documents."""
    pretrain_steps: int = 600
    """Next-token steps."""
    pretrain_batch: int = 32
    """Documents per pretraining step."""
    sft_examples: int = 32
    """Demonstrations in the SFT set (seeds 0 .. sft_examples - 1)."""
    sft_steps: int = 100
    """SFT steps (16 examples each)."""
    grpo_steps: int = 60
    """GRPO steps (16 tasks x 8 samples each)."""
    ppo_steps: int = 60
    """PPO steps (128 episodes each), with ``--ppo``."""
    eval_episodes: int = 200
    """Held-out episodes per evaluation."""
    learning_rates: dict[str, float] = field(
        default_factory=lambda: {"pretrain": 3e-3, "sft": 1e-3, "grpo": 2e-4, "ppo": 2e-4}
    )
    """Peak learning rate of each stage."""
    report: bool = True
    """End with ``llmgym.evaluate`` of the SFT and GRPO models (HTML reports, a comparison) and
    the GRPO run's training report, under ``<output-dir>/eval``."""


QUICK: dict[str, Any] = {"grpo_steps": 30, "ppo_steps": 20, "eval_episodes": 100}
"""``--quick``: the same code path, shorter (what ``tests/agents/test_agents_demo.py`` runs)."""


# --- data for the first two stages -----------------------------------------------------------------


def pretraining_corpus(n: int, seed: int) -> list[str]:
    """Generated documents: runs of addition facts, and chat-formatted small talk without math."""
    from llmgym.agents.tiny import END

    rng = random.Random(seed)
    words = [
        "hello",
        "thanks",
        "please",
        "sure",
        "the",
        "a",
        "weather",
        "today",
        "is",
        "nice",
        "what",
        "time",
        "does",
        "it",
        "open",
        "close",
        "morning",
        "evening",
        "book",
        "read",
        "write",
        "answer",
        "question",
        "good",
        "great",
        "fine",
        "yes",
        "no",
        "maybe",
        "help",
    ]
    docs = []
    for i in range(n):
        if i % 4 == 3:
            turns = []
            for _ in range(rng.randint(1, 2)):
                user = (
                    " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "?"
                )
                reply = (
                    " ".join(rng.choice(words) for _ in range(rng.randint(3, 8))).capitalize() + "."
                )
                turns.append(f"<|user|>{user}{END}<|assistant|>{reply}{END}")
            docs.append("".join(turns))
        else:
            facts = []
            for _ in range(6):
                a, b = rng.randint(1, 9), rng.randint(1, 9)
                if i % 4 in (1, 2):
                    facts.append(f"What is {a} + {b}?\n\n{INSTRUCTION}\n{a} + {b} = {a + b}.")
                else:
                    facts.append(f"{a} + {b} = {a + b}.")
            docs.append(" ".join(facts))
    return docs


def worked_solution(prompt: str, answer: str) -> str:
    """The demonstration for one add_small prompt: the equation, then the boxed answer."""
    match = _QUESTION.search(prompt)
    if match is None:
        return f"The answer is \\boxed{{{answer}}}."
    a, b = match.groups()
    return f"{a} + {b} = {answer}, so the answer is \\boxed{{{answer}}}."


def sft_records(n: int) -> list[dict[str, Any]]:
    """``n`` chat demonstrations on Math-v0 seeds ``0 .. n - 1``."""
    import llmgym

    env = llmgym.make(ENV_ID, disable_env_checker=True, **ENV_KWARGS)
    records = []
    for s in range(n):
        obs, info = env.reset(seed=s)
        base: Any = env.unwrapped
        answer = str(base.episode.task.answer)
        records.append(
            {
                "messages": [
                    *info["messages"],
                    {"role": "assistant", "content": worked_solution(obs, answer)},
                ]
            }
        )
    env.close()
    return records


# --- the stages ---------------------------------------------------------------------------------------


def _quiet() -> None:
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    logging.getLogger("accelerate").setLevel(
        logging.ERROR
    )  # "removed shared tensor" on tied weights


STAGE_DIRS = ("base", "data", "pretrain", "sft", "grpo", "ppo", "eval")
"""What the demo writes under its output directory (removed when it starts again)."""

HELD_OUT_SEED = 1_000_000
"""First held-out evaluation seed: SFT uses seeds 0..sft_examples-1, RL draws its own task stream."""


def held_out_success(model_dir: str | Path, episodes: int) -> float:
    """Greedy success of a saved model on the held-out seeds."""
    from llmgym.agents.rollout import evaluate
    from llmgym.agents.tiny import load

    model, tokenizer = load(model_dir)
    seeds = range(HELD_OUT_SEED, HELD_OUT_SEED + episodes)
    return evaluate(
        model, tokenizer, ENV_ID, ENV_KWARGS, seeds=seeds, max_new_tokens=32
    ).success_rate


def tiny_llama(
    sizes: Any, docs: Sequence[str], demos: Sequence[dict[str, Any]], output_dir: str | Path
) -> tuple[Any, Any]:
    """The demo's tiny Llama (4 heads, a 4x MLP; ``sizes`` gives ``hidden_size``,
    ``num_layers``, ``vocab_size`` and ``seed``) and a BPE tokenizer trained on ``docs`` and the
    demos' messages, saved to ``output_dir``."""
    from llmgym.agents.tiny import TinyConfig, build_tiny

    tiny = TinyConfig(
        hidden_size=sizes.hidden_size,
        num_layers=sizes.num_layers,
        num_heads=4,
        intermediate_size=4 * sizes.hidden_size,
        vocab_size=sizes.vocab_size,
        seed=sizes.seed,
    )
    corpus = [*docs, *(m["content"] for r in demos for m in r["messages"])]
    return build_tiny(tiny, corpus=corpus, output_dir=output_dir)


def prepare(cfg: DemoConfig, *, log: Any = print) -> dict[str, Any]:
    """Stages 0-2: build the tiny model, pretrain it, SFT it; the SFT model is ``<out>/sft/final``."""
    from llmgym.agents.sft import SFTConfig, SFTTrainer, write_jsonl

    _quiet()
    out = Path(cfg.output_dir)
    for stage in STAGE_DIRS:  # the demo owns these: a rerun starts from scratch
        shutil.rmtree(out / stage, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"config": asdict(cfg), "env_id": ENV_ID, "env_kwargs": ENV_KWARGS}
    lr = cfg.learning_rates
    common = {"progress": False, "torch_threads": 1, "seed": cfg.seed}

    # 0. A tiny Llama and a BPE tokenizer, built from a config on generated text.
    docs = pretraining_corpus(cfg.pretrain_docs, cfg.seed)
    demos = sft_records(cfg.sft_examples)
    model, tokenizer = tiny_llama(cfg, docs, demos, out / "base")
    results["parameters"] = sum(p.numel() for p in model.parameters())
    log(f"[0/3] tiny Llama: {results['parameters']:,} parameters, vocabulary {len(tokenizer)}")

    # 1. Pre-training: next-token prediction on generated text.
    t0 = time.perf_counter()
    write_jsonl(out / "data" / "pretrain.jsonl", [{"text": d} for d in docs])
    pre = SFTConfig(
        model=str(out / "base"),
        data=str(out / "data" / "pretrain.jsonl"),
        output_dir=str(out / "pretrain"),
        total_steps=cfg.pretrain_steps,
        batch_size=cfg.pretrain_batch,
        learning_rate=lr["pretrain"],
        warmup_steps=10,
        **common,
    )
    loss = SFTTrainer(pre).train()["losses/sft"]
    results["pretrain"] = {"loss": loss, "seconds": time.perf_counter() - t0}
    log(
        f"[1/3] pre-training: {cfg.pretrain_steps} steps, loss {loss:.3f} ({results['pretrain']['seconds']:.0f} s)"
    )

    # 2. SFT: a short stage on a small set of demonstrations.
    t0 = time.perf_counter()
    write_jsonl(out / "data" / "sft.jsonl", demos)
    sft = SFTConfig(
        model=str(out / "pretrain" / "final"),
        data=str(out / "data" / "sft.jsonl"),
        output_dir=str(out / "sft"),
        total_steps=cfg.sft_steps,
        batch_size=16,
        learning_rate=lr["sft"],
        **common,
    )
    loss = SFTTrainer(sft).train()["losses/sft"]
    sft_success = held_out_success(out / "sft" / "final", cfg.eval_episodes)
    results["sft"] = {"loss": loss, "success": sft_success, "seconds": time.perf_counter() - t0}
    log(
        f"[2/3] SFT on {cfg.sft_examples} demonstrations: {cfg.sft_steps} steps, loss {loss:.3f}; "
        f"held-out success {sft_success:.1%}"
    )

    return results


def run(cfg: DemoConfig, *, ppo: bool = False, log: Any = print) -> dict[str, Any]:
    """Run every stage; returns the results (also written to ``results.json``)."""
    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    t_start, cpu_start = time.perf_counter(), time.process_time()
    results = prepare(cfg, log=log)
    out = Path(cfg.output_dir)
    lr = cfg.learning_rates
    common = {"progress": False, "torch_threads": 1, "seed": cfg.seed}
    sft_success = results["sft"]["success"]

    # 3. GRPO on the env's verified reward.
    t0 = time.perf_counter()
    grpo = GRPOConfig(
        model=str(out / "sft" / "final"),
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        output_dir=str(out / "grpo"),
        total_steps=cfg.grpo_steps,
        prompts_per_step=16,
        group_size=8,
        max_new_tokens=32,
        learning_rate=lr["grpo"],
        eval_every=max(1, cfg.grpo_steps // 5),
        eval_episodes=cfg.eval_episodes,
        tensorboard=False,
        **common,
    )
    trainer = GRPOTrainer(grpo)
    trainer.train()
    trainer.close()
    grpo_success = held_out_success(out / "grpo" / "final", cfg.eval_episodes)
    results["grpo"] = {"success": grpo_success, "seconds": time.perf_counter() - t0}
    log(f"[3/3] GRPO: {cfg.grpo_steps} steps; held-out success {grpo_success:.1%}")

    if ppo:
        from llmgym.agents.ppo import PPOConfig, PPOTrainer

        t0 = time.perf_counter()
        ppo_cfg = PPOConfig(
            model=str(out / "sft" / "final"),
            env_id=ENV_ID,
            env_kwargs=ENV_KWARGS,
            output_dir=str(out / "ppo"),
            total_steps=cfg.ppo_steps,
            episodes_per_step=128,
            ppo_epochs=2,
            mini_batches=2,
            kl_coef=0.02,
            max_new_tokens=32,
            learning_rate=lr["ppo"],
            eval_every=max(1, cfg.ppo_steps // 5),
            eval_episodes=cfg.eval_episodes,
            tensorboard=False,
            **common,
        )
        ppo_trainer = PPOTrainer(ppo_cfg)
        ppo_trainer.train()
        ppo_trainer.close()
        ppo_success = held_out_success(out / "ppo" / "final", cfg.eval_episodes)
        results["ppo"] = {"success": ppo_success, "seconds": time.perf_counter() - t0}
        log(f"[ppo] PPO: {cfg.ppo_steps} steps; held-out success {ppo_success:.1%}")

    results["seconds"] = time.perf_counter() - t_start
    results["improvement_points"] = 100 * (grpo_success - sft_success)
    results["cpu_seconds"] = time.process_time() - cpu_start
    plot_reward_curves(out, out / "reward_curve.png", results)
    if cfg.report:
        results["reports"] = evaluation_reports(cfg, log=log)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


def evaluation_reports(cfg: DemoConfig, *, log: Any = print) -> dict[str, str]:
    """4. The standard evaluation of the SFT and GRPO models on the held-out tasks
    (``llmgym.evaluate``: results, summary and an HTML report each), their comparison, and
    the GRPO run's training report."""
    from llmgym.evaluation import evaluate
    from llmgym.evaluation.compare import compare_runs, comparison_html, comparison_text
    from llmgym.evaluation.report import write_report

    out = Path(cfg.output_dir)
    shutil.rmtree(out / "eval", ignore_errors=True)
    entry = {
        "id": ENV_ID,
        "kwargs": ENV_KWARGS,
        "seed": HELD_OUT_SEED,
        "episodes": cfg.eval_episodes,
    }
    reports = {}
    for stage in ("sft", "grpo"):
        result = evaluate(
            [entry],
            policy=f"hf:{out / stage / 'final'}",
            settings={"temperature": 0.0, "max_new_tokens": 32},
            out=out / "eval" / stage,
            progress=False,
        )
        overall = result.summary["overall"]
        reports[stage] = str(out / "eval" / stage / "report.html")
        log(
            f"[eval] {stage.upper()}: success {overall['success_rate']:.1%} on "
            f"{overall['episodes']} held-out tasks -> {reports[stage]}"
        )
    comparison = compare_runs(out / "eval" / "sft", out / "eval" / "grpo")
    reports["compare"] = str(out / "eval" / "compare.html")
    Path(reports["compare"]).write_text(comparison_html(comparison), encoding="utf-8")
    log(comparison_text(comparison))
    reports["training"] = str(write_report(out / "grpo"))
    log(f"[eval] training curves: {reports['training']}")
    return reports


def plot_reward_curves(out: Path, path: Path, results: dict[str, Any]) -> Path | None:
    """Training reward per step of GRPO (and PPO), held-out success during training, and the
    SFT model's held-out success as a baseline, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from llmgym.agents.runlog import read_metrics

    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=120)
    colors = {"grpo": "tab:blue", "ppo": "tab:orange"}
    for name in ("grpo", "ppo"):
        if name not in results:
            continue
        records = read_metrics(out / name)
        ax.plot(
            [r["charts/episodes"] for r in records],
            [r["rewards/mean"] for r in records],
            color=colors[name],
            alpha=0.6,
            linewidth=1,
            label=f"{name.upper()} training reward (sampled)",
        )
        evals = [r for r in records if "eval/success_rate" in r]
        ax.plot(
            [0] + [r["charts/episodes"] for r in evals],
            [results["sft"]["success"]] + [r["eval/success_rate"] for r in evals],
            "o-",
            color=colors[name],
            label=f"{name.upper()} held-out success (greedy)",
        )
    ax.axhline(results["sft"]["success"], color="gray", linestyle="--", label="SFT model, held-out")
    ax.set_xlabel("training episodes")
    ax.set_ylabel("reward / success")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Tiny Llama on {ENV_ID} (arith.add_small): SFT -> RL")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The demo's options on ``parser`` (``llmgym demo`` adds them to its subcommand)."""
    parser.add_argument("--output-dir", default="runs/demo", help="where the runs and results go")
    parser.add_argument(
        "--quick", action="store_true", help="fewer steps: the same code path, faster"
    )
    parser.add_argument("--ppo", action="store_true", help="also train PPO from the SFT model")
    parser.add_argument("--seed", type=int, default=0, help="seeds the corpus, model and sampling")
    return parser


def main(argv: Sequence[str] | argparse.Namespace | None = None) -> int:
    """``python -m llmgym.agents.demo [--output-dir DIR] [--quick] [--ppo]``; ``argv`` may also be
    a Namespace parsed by a parser that :func:`add_arguments` set up."""
    if isinstance(argv, argparse.Namespace):
        args = argv
    else:
        parser = add_arguments(
            argparse.ArgumentParser(prog="llmgym demo", description=__doc__.split("\n")[0])
        )
        args = parser.parse_args(list(argv) if argv is not None else None)
    cfg = DemoConfig(output_dir=args.output_dir, seed=args.seed, **(QUICK if args.quick else {}))
    results = run(cfg, ppo=args.ppo)
    sft, grpo = results["sft"]["success"], results["grpo"]["success"]
    print(
        f"\nHeld-out success on {ENV_ID} arith.add_small ({cfg.eval_episodes} episodes, greedy):\n"
        f"  after SFT : {sft:6.1%}\n  after GRPO: {grpo:6.1%}   ({results['improvement_points']:+.1f} points)"
        + (f"\n  after PPO : {results['ppo']['success']:6.1%}" if "ppo" in results else "")
        + f"\nTotal time {results['seconds'] / 60:.1f} min. Reward curve: {Path(cfg.output_dir) / 'reward_curve.png'}"
        + "".join(f"\n{name} report: {path}" for name, path in results.get("reports", {}).items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
