"""GRPO rollouts with vLLM against HF generation on one GPU: tokens/s, time in generation and in
weight sync, and whether vLLM serves the updated policy after the syncs.

It needs a CUDA GPU, ``pip install 'llmgym[vllm]'`` and a local model directory (a 0.5B-class
instruct model saved with ``save_pretrained``): it cannot run in the CPU test environment, where
vLLM is not installed, and nothing in this repository has run it yet, so no figures are recorded
here. Run it on a GPU machine and keep the JSON it writes next to the results it reports.

Settings, the same for both engines: ``llm/Math-v0`` at difficulty 0.3, ``--prompts`` prompts x
``--group`` episodes a step, at most ``--max-new`` new tokens, bf16 autocast, learning rate 1e-5
(LoRA: 1e-4), DAPO loss, beta 0. Each engine runs in a fresh process for ``--steps`` steps (step 1
is a warm-up outside the averages). After training, the vLLM run samples greedy completions of
``CHECK_PROMPTS`` prompts from vLLM and from the trained policy itself: the share of identical
completions says whether the syncs reached vLLM (bf16 kernels differ, so a few may part ways
late; a stale vLLM disagrees on most).

    python benchmarks/vllm_generation.py --model /models/Qwen2.5-0.5B-Instruct [--lora] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
from pathlib import Path
from typing import Any

CHECK_PROMPTS = 32


def _config(args: argparse.Namespace, engine: str, out: str) -> Any:
    from llmgym.agents.grpo import GRPOConfig

    lora = {"lora_r": 16, "lora_alpha": 32} if args.lora else {}
    return GRPOConfig(
        model=args.model,
        env_id="llm/Math-v0",
        env_kwargs={"difficulty": 0.3},
        output_dir=out,
        total_steps=args.steps,
        prompts_per_step=args.prompts,
        group_size=args.group,
        max_new_tokens=args.max_new,
        max_total_tokens=args.max_new + 512,
        learning_rate=1e-4 if args.lora else 1e-5,
        mixed_precision="bf16",
        micro_batch_size=16,
        generation_engine=engine,
        vllm_gpu_memory_utilization=args.vllm_memory,
        tensorboard=False,
        progress=False,
        **lora,
    )


def _agreement(trainer: Any) -> float:
    """Share of greedy completions that vLLM and the trained policy produce identically."""
    from llmgym.agents.engines import HFEngine
    from llmgym.agents.hf import render_prompt, stop_ids_of

    env = trainer.probe_env
    prompts = []
    for seed in range(CHECK_PROMPTS):
        _, info = env.reset(seed=10_000 + seed)
        prompts.append(render_prompt(trainer.tokenizer, info["messages"], info.get("tools") or []))
    kw = {
        "max_new_tokens": 32,
        "stop_ids": stop_ids_of(trainer.tokenizer, trainer._unwrapped()),
        "pad_id": trainer.tokenizer.pad_token_id or 0,
        "temperature": 0.0,
    }
    served = trainer.engine.sample(prompts, **kw).token_ids
    policy = HFEngine(trainer._unwrapped()).sample(prompts, **kw).token_ids
    return sum(a == b for a, b in zip(served, policy, strict=True)) / len(prompts)


def _run(args: argparse.Namespace, engine: str, queue: Any) -> None:
    import torch

    from llmgym.agents.grpo import GRPOTrainer

    trainer = GRPOTrainer(_config(args, engine, tempfile.mkdtemp(prefix=f"vllm-bench-{engine}-")))
    rows = [trainer.train_step() for _ in range(args.steps)][1:]  # step 1: warm-up

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in rows) / len(rows)

    result = {
        "engine": engine,
        "lora": args.lora,
        "tokens_per_s": mean("charts/tokens_per_s"),
        "samples_per_s": mean("charts/samples_per_s"),
        "generate_s": mean("time/generate_s"),
        "weight_sync_s": mean("time/weight_sync_s"),
        "step_s": mean("time/step_s"),
        "reward_mean": mean("rewards/mean"),
        "gpu_peak_gib": torch.cuda.max_memory_allocated() / 2**30,
        "syncs": trainer.weight_sync.syncs,
    }
    if engine == "vllm":
        result["greedy_agreement_after_sync"] = _agreement(trainer)
    trainer.close()
    queue.put(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="local save_pretrained directory")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new", type=int, default=256)
    parser.add_argument("--vllm-memory", type=float, default=0.3)
    parser.add_argument("--lora", action="store_true", help="LoRA r=16 (merged weights synced)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA GPU (and pip install 'llmgym[vllm]')")
    ctx = mp.get_context("spawn")  # a fresh CUDA context and Accelerate state per engine
    results = []
    for engine in ("hf", "vllm"):
        queue = ctx.Queue()
        proc = ctx.Process(target=_run, args=(args, engine, queue))
        proc.start()
        results.append(queue.get())
        proc.join()
    hf, vllm = results
    print(f"{'engine':8} {'tokens/s':>10} {'generate s':>11} {'sync s':>8} {'step s':>8}")
    for r in results:
        print(
            f"{r['engine']:8} {r['tokens_per_s']:10.1f} {r['generate_s']:11.2f} "
            f"{r['weight_sync_s']:8.2f} {r['step_s']:8.2f}"
        )
    print(f"vLLM / HF tokens/s: {vllm['tokens_per_s'] / max(hf['tokens_per_s'], 1e-9):.2f}x")
    print(f"greedy agreement after sync: {vllm['greedy_agreement_after_sync']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
