"""llmgym GRPO vs TRL's GRPOTrainer: same tiny model, task, group size, lengths and learning rate.

Each trainer runs in its own process (so peak memory is its own), one after the other, from the
same SFT'd tiny Llama (``--model``, default: the demo's pretrain+SFT stages are run first), on
``llm/Math-v0`` ``arith.add_small`` with 8 prompts x 8 samples per step, 32 new tokens at most,
learning rate 2e-4, constant schedule, beta 0, DAPO loss, clip 0.2 / 0.28, one thread each.
Reported: training samples/s (wall) and CPU seconds per 1000 samples (the machine is shared, so
the CPU ratio is the steadier one), peak resident memory, the mean training reward over the last
5 steps, and the greedy held-out success of each final model on the same 200 seeds.

    python benchmarks/grpo_vs_trl.py [--steps 30] [--model runs/demo/sft/final]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ID = "llm/Math-v0"
ENV_KWARGS = {"family": "arith.add_small", "difficulty": 0.0}
PROMPTS, GROUP, MAX_NEW, LR = 8, 8, 32, 2e-4


def _setup() -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _finish(
    name: str, out: Path, rewards: list[float], wall: float, cpu: float, steps: int, queue: Any
) -> None:
    from llmgym.agents.demo import held_out_success

    queue.put(
        {
            "name": name,
            "samples": steps * PROMPTS * GROUP,
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rewards": rewards,
            "held_out": held_out_success(out, 200),
        }
    )


def run_llmgym(model: str, steps: int, workdir: str, queue: Any) -> None:
    _setup()
    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(
        model=model,
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        output_dir=f"{workdir}/llmgym",
        total_steps=steps,
        prompts_per_step=PROMPTS,
        group_size=GROUP,
        max_new_tokens=MAX_NEW,
        learning_rate=LR,
        adam_betas=(0.9, 0.99),
        loss_type="dapo",
        epsilon_low=0.2,
        epsilon_high=0.28,
        beta=0.0,
        temperature=1.0,
        progress=False,
        tensorboard=False,
        measure_update_kl=False,
        torch_threads=1,
        micro_batch_size=64,
    )
    trainer = GRPOTrainer(cfg)
    rewards = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        rewards.append(trainer.train_step()["rewards/mean"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    trainer.save_model(f"{workdir}/llmgym/final")
    _finish("llmgym GRPO", Path(f"{workdir}/llmgym/final"), rewards, wall, cpu, steps, queue)


def run_trl(model: str, steps: int, workdir: str, queue: Any) -> None:
    _setup()
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.agents.tiny import load
    from llmgym.integrations.trl import prompt_dataset, reward_function

    policy, tokenizer = load(model)
    args = GRPOConfig(
        output_dir=f"{workdir}/trl",
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=PROMPTS * GROUP,
        num_generations=GROUP,
        max_completion_length=MAX_NEW,
        max_steps=steps,
        learning_rate=LR,
        lr_scheduler_type="constant",
        adam_beta1=0.9,
        adam_beta2=0.99,
        weight_decay=0.0,
        max_grad_norm=1.0,
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        temperature=1.0,
        scale_rewards="group",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        reward_funcs=[reward_function(ENV_ID, ENV_KWARGS)],
        train_dataset=prompt_dataset(ENV_ID, steps * PROMPTS, env_kwargs=ENV_KWARGS, seed=500_000),
        args=args,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # TRL's per-step log dicts; the table says it all
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    trainer.save_model(f"{workdir}/trl/final")
    tokenizer.save_pretrained(f"{workdir}/trl/final")
    _finish("TRL GRPOTrainer", Path(f"{workdir}/trl/final"), rewards, wall, cpu, steps, queue)


def _in_child(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    while True:
        try:
            result: dict[str, Any] = queue.get(timeout=5)
            break
        except Exception:  # queue.Empty: is the child still alive?
            if not proc.is_alive():
                raise RuntimeError(
                    f"{target.__name__} failed (exit code {proc.exitcode}); see its traceback above"
                ) from None
    proc.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--model", help="an SFT'd model directory (default: run the demo's first stages)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        model = args.model
        if model is None:
            from llmgym.agents.demo import DemoConfig, prepare

            print("preparing the SFT model (the demo's pretrain + SFT stages)...", file=sys.stderr)
            prepare(DemoConfig(output_dir=f"{workdir}/demo"), log=lambda *a: None)
            model = f"{workdir}/demo/sft/final"
        ours = _in_child(run_llmgym, model, args.steps, workdir)
        theirs = _in_child(run_trl, model, args.steps, workdir)
    rows = []
    for r in (theirs, ours):
        tail = r["rewards"][-5:]
        rows.append(
            (
                r["name"],
                r["samples"] / r["wall_s"],
                1000 * r["cpu_s"] / r["samples"],
                r["peak_rss_mb"],
                sum(tail) / len(tail),
                r["held_out"],
            )
        )
    base = rows[0]
    print(
        f"\nGRPO, {args.steps} steps x {PROMPTS} prompts x {GROUP} samples, {MAX_NEW} new tokens, lr {LR}\n"
    )
    print(
        "| trainer | samples/s (wall) | CPU s / 1k samples | peak RSS (MB) | train reward, last 5 steps | held-out success | speed vs TRL (wall / CPU) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, sps, cpu_k, rss, reward, held in rows:
        print(
            f"| {name} | {sps:.1f} | {cpu_k:.1f} | {rss:.0f} | {reward:.3f} | {held:.1%} | "
            f"{sps / base[1]:.2f}x / {base[2] / cpu_k:.2f}x |"
        )
    curve = lambda r: " ".join(f"{x:.2f}" for x in r["rewards"][:: max(1, args.steps // 10)])  # noqa: E731
    print(
        f"\nreward curve (every {max(1, args.steps // 10)} steps)\n  TRL   : {curve(theirs)}\n  llmgym: {curve(ours)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
