"""Peak memory and tokens/s of GRPO: full fine-tuning vs LoRA, with and without gradient
checkpointing, llmgym's trainer beside TRL's GRPOTrainer in the same settings.

Settings, the same for both trainers (those of ``grpo_vs_trl.py``, scaled down): ``llm/Math-v0``
``arith.add_small``, 16 samples a step (4 prompts x G = 4), at most 32 new tokens, learning rate
2e-4 constant, beta 0, DAPO loss, clip 0.2 / 0.28, dropout off, one torch thread; LoRA rank 8,
alpha 16, dropout 0, on every linear layer but the head (``all-linear``) through peft for both.
Each (trainer, variant) runs in a fresh process for ``--steps`` steps; step 1 is a warm-up outside
the timer.

Reported per run: peak memory (CPU: the process's peak RSS, ``VmHWM``, and its rise over the RSS
once the model is loaded, which is what training adds; GPU: ``torch.cuda.max_memory_allocated``),
that rise per model parameter, trainable parameters, and generated tokens/s over steps 2..N.
On CPU with a tiny model the interpreter and torch dominate the RSS; the rise and the GPU figure
are the ones that scale with the model.

    python benchmarks/grpo_memory.py [--steps 5] [--model DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grpo_vs_trl import ENV_ID, ENV_KWARGS, LR, _peak_rss_mb, _setup, trl_args

GROUP, SAMPLES, MAX_NEW = 4, 16, 32
LORA = {"lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "lora_target_modules": "all-linear"}
VARIANTS = {
    "full": {"lora": False, "checkpointing": False},
    "full+ckpt": {"lora": False, "checkpointing": True},
    "lora": {"lora": True, "checkpointing": False},
    "lora+ckpt": {"lora": True, "checkpointing": True},
}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _gpu_peak_mb() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / 2**20


def _params(model: Any) -> tuple[int, int]:
    total = sum(p.numel() for p in model.parameters())
    return total, sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_llmgym(model: str, steps: int, variant: dict[str, bool], workdir: str, queue: Any) -> None:
    _setup()
    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(
        model=model,
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        output_dir=f"{workdir}/llmgym",
        total_steps=steps,
        prompts_per_step=SAMPLES // GROUP,
        group_size=GROUP,
        max_new_tokens=MAX_NEW,
        learning_rate=LR,
        progress=False,
        tensorboard=False,
        measure_update_kl=False,
        torch_threads=1,
        micro_batch_size=SAMPLES,
        gradient_checkpointing=variant["checkpointing"],
        **(LORA if variant["lora"] else {}),
    )
    trainer = GRPOTrainer(cfg)
    loaded = _rss_mb()
    trainer.train_step()  # warm-up, outside the timer
    t0, tokens = time.perf_counter(), 0
    for _ in range(steps - 1):
        m = trainer.train_step()
        tokens += round(m["charts/completion_length"] * SAMPLES)
    wall = time.perf_counter() - t0
    total, trainable = _params(trainer._unwrapped())
    queue.put(_result(loaded, tokens, wall, total, trainable))


def run_trl(model: str, steps: int, variant: dict[str, bool], workdir: str, queue: Any) -> None:
    _setup()
    import dataclasses

    from transformers.trainer_callback import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.agents.tiny import load
    from llmgym.integrations.trl import prompt_dataset, reward_function

    policy, tokenizer = load(model)
    fields = trl_args(workdir, steps, GROUP, 0)
    fields.update(
        per_device_train_batch_size=SAMPLES,
        max_completion_length=MAX_NEW,
        gradient_checkpointing=variant["checkpointing"],
    )
    if "activation_checkpointing" in {f.name for f in dataclasses.fields(GRPOConfig)}:
        fields["activation_checkpointing"] = variant["checkpointing"]
    peft_config = None
    if variant["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=LORA["lora_r"],
            lora_alpha=LORA["lora_alpha"],
            lora_dropout=LORA["lora_dropout"],
            target_modules=LORA["lora_target_modules"],
            task_type="CAUSAL_LM",
        )
    score = reward_function(ENV_ID, ENV_KWARGS)
    counted: dict[int, int] = {}
    holder: dict[str, Any] = {}

    def reward(*a: Any, **kw: Any) -> list[float]:
        step = holder["trainer"].state.global_step + 1
        counted[step] = counted.get(step, 0) + sum(len(c) for c in kw["completion_ids"])
        out: list[float] = score(*a, **kw)
        return out

    reward.__name__ = "llmgym_reward"
    trainer = GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        reward_funcs=[reward],
        train_dataset=prompt_dataset(ENV_ID, steps * SAMPLES // GROUP, env_kwargs=ENV_KWARGS),
        args=GRPOConfig(**fields),
        peft_config=peft_config,
    )
    holder["trainer"] = trainer
    trainer.remove_callback(PrinterCallback)
    loaded = _rss_mb()
    marks: dict[int, float] = {}

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            marks[state.global_step] = time.perf_counter()

    trainer.add_callback(StepClock())
    trainer.train()
    tokens = sum(counted.get(s, 0) for s in range(2, steps + 1))
    total, trainable = _params(trainer.model)
    queue.put(_result(loaded, tokens, marks[steps] - marks[1], total, trainable))


def _result(loaded: float, tokens: int, wall: float, total: int, trainable: int) -> dict[str, Any]:
    peak = _peak_rss_mb()
    return {
        "peak_rss_mb": peak,
        "rise_mb": peak - loaded,
        "rise_bytes_per_param": (peak - loaded) * 2**20 / total,
        "gpu_peak_mb": _gpu_peak_mb(),
        "params": total,
        "trainable": trainable,
        "tokens_per_s": tokens / wall if wall > 0 else float("nan"),
    }


def _in_child(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    try:
        result: dict[str, Any] = queue.get(timeout=1800)
    finally:
        proc.join(timeout=60)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--model", help="a saved causal LM (default: a fresh tiny model)")
    parser.add_argument("--trainers", nargs="+", default=["llmgym", "trl"])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from llmgym.agents.tiny import build_tiny

            model = str(Path(tmp) / "tiny")
            build_tiny("tiny", output_dir=model)
        rows = []
        runners = {"llmgym": run_llmgym, "trl": run_trl}
        for name, variant in VARIANTS.items():
            for trainer in args.trainers:
                work = tempfile.mkdtemp(dir=tmp)
                res = _in_child(runners[trainer], model, args.steps, variant, work)
                rows.append({"trainer": trainer, "variant": name, **res})
                print(_line(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


def _line(r: dict[str, Any]) -> str:
    gpu = f"{r['gpu_peak_mb']:.0f} MB" if r["gpu_peak_mb"] is not None else "-"
    return (
        f"{r['trainer']:7s} {r['variant']:10s} peak RSS {r['peak_rss_mb']:7.0f} MB  "
        f"rise {r['rise_mb']:6.1f} MB ({r['rise_bytes_per_param']:5.1f} B/param)  GPU {gpu}  "
        f"trainable {r['trainable']:>9,d}/{r['params']:,d}  {r['tokens_per_s']:7.0f} tok/s"
    )


if __name__ == "__main__":
    sys.exit(main())
