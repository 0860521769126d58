"""llmgym GRPO vs TRL's GRPOTrainer, in alternating rounds, on the same timer scope.

Same SFT'd tiny Llama (``--model``; default: the demo's pretrain+SFT stages are run first), task
(``llm/Math-v0`` ``arith.add_small``), samples per step (64: 64 / G prompts x G samples, so G = 4,
8, 16 train on 16, 8, 4 prompts a step), 32 new tokens at most, learning rate 2e-4, constant
schedule, Adam betas (0.9, 0.99), grad-norm clip 1.0, beta 0, DAPO loss, clip 0.2 / 0.28, group
std scaling, temperature 1, dropout off, one torch thread each, no dataloader workers.

Protocol. For every group size G and seed, llmgym and TRL run in turns (which goes first
alternates round by round), each in a fresh process so its peak memory is its own. TRL is set up
as a speed-minded user would: ``gradient_checkpointing=False`` (TRL's GRPOConfig turns it on by
default), no saving, no completions logging, logging only at the last step, no tqdm, no printer
callback; the full list of GRPOConfig fields set is printed.

Timer scope, identical for both: the training step loop only, from the end of step 1 (the
warm-up step, excluded for both) to the end of step N; model loading, trainer construction,
dataset/env building, starting the math verifier's sympy worker, saving and evaluation are
outside it. llmgym: ``perf_counter`` and
``process_time`` around ``train_step()`` calls 2..N (back to back). TRL: the same clocks read in a
``TrainerCallback.on_step_end`` (after the optimizer and LR-scheduler step, before logging), at the
end of step 1 and of step N, so the loop's own between-step work (next batch, callbacks, the
logging check) is inside. Samples and generated tokens counted are those of steps 2..N.

Reported per G: samples/s and generated tokens/s (median over seeds, min-max), their ratio, CPU
seconds per 1000 samples, peak RSS at the end of training, the mean training reward over the last
5 steps, greedy held-out success on 200 seeds (mean over seeds; 95% Wilson interval on the pooled
successes, which covers evaluation noise only; and, with >= 2 seeds, a t-interval over the
per-seed rates, which also covers run-to-run variance), and where each trainer's step time goes:
generation, scoring/env, other rollout work, no-grad logprob passes (old/reference policy), the
update's forward (and loss), backward and optimizer (clip and step), the rest.

    python benchmarks/grpo_vs_trl.py [--steps 30] [--groups 4 8 16] [--seeds 0 1 2]
                                     [--model runs/demo/sft/final] [--json results.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ENV_ID = "llm/Math-v0"
ENV_KWARGS = {"family": "arith.add_small", "difficulty": 0.0}
SAMPLES_PER_STEP, MAX_NEW, LR, HELD_OUT = 64, 32, 2e-4, 200
PHASES = (
    "generation",
    "scoring/env",
    "other rollout",
    "logprobs",
    "forward",
    "backward",
    "optimizer",
    "rest",
)


def trl_args(workdir: str, steps: int, group: int, seed: int) -> dict[str, Any]:
    """The GRPOConfig fields this benchmark sets (printed with the results)."""
    return {
        "output_dir": f"{workdir}/trl",
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,  # TRL's default is True; a speed-minded user turns it off
        "per_device_train_batch_size": SAMPLES_PER_STEP,
        "gradient_accumulation_steps": 1,
        "num_generations": group,
        "max_completion_length": MAX_NEW,
        "max_steps": steps,
        "learning_rate": LR,
        "lr_scheduler_type": "constant",
        "adam_beta1": 0.9,
        "adam_beta2": 0.99,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "loss_type": "dapo",
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "beta": 0.0,
        "num_iterations": 1,
        "temperature": 1.0,
        "scale_rewards": "group",
        "disable_dropout": True,
        "log_completions": False,
        "logging_steps": steps,  # one log, after the last step (outside the timer)
        "report_to": "none",
        "save_strategy": "no",
        "disable_tqdm": True,
        "seed": seed,
        "dataloader_num_workers": 0,
    }


def _setup() -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renames
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    _warm_verifier()


def _warm_verifier() -> None:
    """Start the math verifier's sympy worker now, before the model loads: its first start
    (importing sympy, about 0.4 s of waiting) is a once-per-process cost, like loading the model,
    and would otherwise land inside the timer of whichever trainer first samples an answer that
    needs sympy, at a random step."""
    try:
        from llmgym.rewards.math import sympy_pool

        sympy_pool.warm_up()
    except (ImportError, AttributeError):  # a verifier without the pool: nothing to warm
        pass


def _peak_rss_mb() -> float:
    """This process's own peak RSS. Not ``ru_maxrss``: Linux keeps that across ``execve``, so a
    spawned child would report its parent's peak (here the parent that trained the SFT model)
    whenever that is higher. ``VmHWM`` belongs to the address space, which exec replaces."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _finish(name: str, out: Path, result: dict[str, Any], queue: Any) -> None:
    from llmgym.agents.demo import held_out_success

    result["name"] = name
    result["held_out"] = held_out_success(out, HELD_OUT)
    queue.put(result)


def run_llmgym(model: str, steps: int, group: int, seed: int, workdir: str, queue: Any) -> None:
    _setup()
    import torch

    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(
        model=model,
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        output_dir=f"{workdir}/llmgym",
        seed=seed,
        total_steps=steps,
        prompts_per_step=SAMPLES_PER_STEP // group,
        group_size=group,
        max_new_tokens=MAX_NEW,
        learning_rate=LR,
        adam_betas=(0.9, 0.99),
        max_grad_norm=1.0,
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
    rewards: list[float] = []
    split = dict.fromkeys(PHASES, 0.0)
    samples = tokens = 0
    trainer.train_step()  # step 1: warm-up, outside the timer (as for TRL)
    threads = torch.get_num_threads()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps - 1):
        m = trainer.train_step()
        n = SAMPLES_PER_STEP
        rewards.append(m["rewards/mean"])
        samples += n
        tokens += round(m["charts/completion_length"] * n)
        gen, env = m.get("time/generate_s", 0.0), m.get("time/env_s", 0.0)
        split["generation"] += gen
        split["scoring/env"] += env
        split["other rollout"] += m["time/rollout_s"] - gen - env
        for phase in ("logprobs", "forward", "backward", "optimizer"):
            split[phase] += m.get(f"time/{phase}_s", 0.0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    split["rest"] += wall - sum(split.values())  # batching, metrics, the loop between steps
    result = {
        "samples": samples,
        "tokens": tokens,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": _peak_rss_mb(),
        "rewards": rewards,
        "split": split,
        "threads": threads,
    }
    trainer.save_model(f"{workdir}/llmgym/final")
    _finish("llmgym", Path(f"{workdir}/llmgym/final"), result, queue)


def run_trl(model: str, steps: int, group: int, seed: int, workdir: str, queue: Any) -> None:
    _setup()
    import torch
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.agents.tiny import load
    from llmgym.integrations.trl import prompt_dataset, reward_function

    prompts = SAMPLES_PER_STEP // group
    policy, tokenizer = load(model)
    fields = trl_args(workdir, steps, group, seed)
    if "activation_checkpointing" in {f.name for f in dataclasses.fields(GRPOConfig)}:
        fields["activation_checkpointing"] = False  # transformers >= 5's name for it
    args = GRPOConfig(**fields)
    per_step: dict[int, dict[str, float]] = {}  # step (1-based) -> phase seconds, samples, tokens

    def bucket(trainer: Any) -> dict[str, float]:
        return per_step.setdefault(trainer.state.global_step + 1, {})

    def add(trainer: Any, key: str, value: float) -> None:
        b = bucket(trainer)
        b[key] = b.get(key, 0.0) + value

    score = reward_function(ENV_ID, ENV_KWARGS)
    holder: dict[str, Any] = {}

    @functools.wraps(score)
    def recorded_reward(*a: Any, **kw: Any) -> list[float]:
        out: list[float] = score(*a, **kw)
        add(holder["trainer"], "reward_sum", float(sum(out)))
        add(holder["trainer"], "samples", float(len(out)))
        add(holder["trainer"], "tokens", float(sum(len(c) for c in kw["completion_ids"])))
        return out

    trainer = GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        reward_funcs=[recorded_reward],
        train_dataset=prompt_dataset(
            ENV_ID, steps * prompts, env_kwargs=ENV_KWARGS, seed=500_000 + 10_000 * seed
        ),
        args=args,
    )
    holder["trainer"] = trainer
    trainer.remove_callback(PrinterCallback)

    def timed(owner: Any, method: str, key: str, when: Any = None) -> None:
        inner = getattr(owner, method)

        @functools.wraps(inner)
        def wrapper(*a: Any, **kw: Any) -> Any:
            if when is not None and not when():
                return inner(*a, **kw)
            s0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                add(trainer, key, time.perf_counter() - s0)

        setattr(owner, method, wrapper)

    def in_rollout() -> bool:
        return bool(bucket(trainer).get("in_rollout"))

    def rollout(*a: Any, **kw: Any) -> Any:
        bucket(trainer)["in_rollout"] = 1.0
        try:
            return rollout_inner(*a, **kw)
        finally:
            bucket(trainer)["in_rollout"] = 0.0

    rollout_inner = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = rollout
    timed(trainer, "_generate", "generation")  # tokenizing prompts + model.generate + decoding
    timed(trainer, "_calculate_rewards", "scoring/env")  # the env's verifier on every completion
    # no-grad old/reference logprobs, when the config needs them (not with beta 0, one iteration)
    timed(trainer, "_get_per_token_logps_and_entropies", "logprobs", when=in_rollout)
    timed(
        trainer, "_generate_and_score_completions", "rollout"
    )  # all the above + padding, advantages
    timed(
        trainer, "compute_loss", "forward"
    )  # (in training_step, after the rollout) forward + loss
    timed(trainer.accelerator, "backward", "backward")
    timed(trainer, "_clip_grad_norm", "optimizer")  # + optimizer.step, timed by the callback below

    marks: dict[int, tuple[float, float]] = {}

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            bucket(trainer)["begin"] = time.perf_counter()

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            bucket(trainer)["optimizer_begin"] = time.perf_counter()

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            add(trainer, "optimizer", time.perf_counter() - bucket(trainer).pop("optimizer_begin"))

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            marks[state.global_step] = (time.perf_counter(), time.process_time())
            holder["threads"] = torch.get_num_threads()  # as training runs
            b = per_step[state.global_step]
            b["step"] = marks[state.global_step][0] - b.pop("begin")

    trainer.add_callback(StepClock())
    if args.gradient_checkpointing or getattr(policy, "is_gradient_checkpointing", False):
        raise RuntimeError("TRL's gradient checkpointing is on; this benchmark runs it off")
    trainer.train()
    (t1, c1), (tn, cn) = marks[1], marks[steps]
    wall, cpu = tn - t1, cn - c1
    timed_steps = [per_step[k] for k in range(2, steps + 1)]
    split = dict.fromkeys(PHASES, 0.0)
    for b in timed_steps:
        split["generation"] += b["generation"]
        split["scoring/env"] += b["scoring/env"]
        split["logprobs"] += b.get("logprobs", 0.0)
        split["other rollout"] += (
            b["rollout"] - b["generation"] - b["scoring/env"] - b.get("logprobs", 0.0)
        )
        for phase in ("forward", "backward", "optimizer"):
            split[phase] += b[phase]
    split["rest"] = wall - sum(split.values())  # zero_grad, LR, logging check, between steps
    result = {
        "samples": int(sum(b["samples"] for b in timed_steps)),
        "tokens": int(sum(b["tokens"] for b in timed_steps)),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": _peak_rss_mb(),
        "rewards": [b["reward_sum"] / b["samples"] for b in timed_steps],
        "split": split,
        "threads": holder["threads"],
    }
    trainer.save_model(f"{workdir}/trl/final")
    tokenizer.save_pretrained(f"{workdir}/trl/final")
    _finish("TRL", Path(f"{workdir}/trl/final"), result, queue)


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


# --- statistics ----------------------------------------------------------------------------------


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(xs: list[float]) -> tuple[float, float] | None:
    """95% t-interval of the mean of ``xs`` (None with fewer than 2 values)."""
    if len(xs) < 2:
        return None
    mean, sd = statistics.fmean(xs), statistics.stdev(xs)
    half = T95.get(len(xs) - 1, 1.96) * sd / math.sqrt(len(xs))
    return (mean - half, mean + half)


def _mmm(xs: list[float], fmt: str) -> str:
    med = statistics.median(xs)
    if len(xs) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(xs), fmt)}-{format(max(xs), fmt)})"


def _held(rs: list[dict[str, Any]]) -> str:
    rates = [r["held_out"] for r in rs]
    lo, hi = wilson(sum(round(x * HELD_OUT) for x in rates), HELD_OUT * len(rates))
    text = f"{statistics.fmean(rates):.1%} [W {lo:.1%}-{hi:.1%}"
    t = t_interval(rates)
    if t is not None:
        text += f"; t {max(0.0, t[0]):.1%}-{min(1.0, t[1]):.1%}"
    return text + "] (" + ", ".join(f"{x:.1%}" for x in rates) + ")"


def report(results: dict[int, dict[str, list[dict[str, Any]]]], steps: int) -> None:
    print(
        f"\nGRPO, {steps} steps (step 1 untimed) x {SAMPLES_PER_STEP} samples "
        f"(64/G prompts x G), {MAX_NEW} new tokens, lr {LR}; medians over seeds (min-max)\n"
    )
    print(
        "| G | trainer | samples/s | gen tokens/s | CPU s / 1k samples | peak RSS MB "
        "| train reward, last 5 | held-out success, mean [95% CI] (per seed) "
        "| vs TRL, per-seed ratios: samples/s; tokens/s; CPU per sample |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for g, by in results.items():
        pairs = list(zip(by["llmgym"], by["TRL"], strict=True))  # same (G, seed), same round
        sps_x = [o["samples"] / o["wall_s"] / (t["samples"] / t["wall_s"]) for o, t in pairs]
        tps_x = [o["tokens"] / o["wall_s"] / (t["tokens"] / t["wall_s"]) for o, t in pairs]
        cpu_x = [t["cpu_s"] / t["samples"] / (o["cpu_s"] / o["samples"]) for o, t in pairs]
        for name in ("TRL", "llmgym"):
            rs = by[name]
            sps = [r["samples"] / r["wall_s"] for r in rs]
            tps = [r["tokens"] / r["wall_s"] for r in rs]
            cpu = [1000 * r["cpu_s"] / r["samples"] for r in rs]
            rss = [r["peak_rss_mb"] for r in rs]
            tail = [statistics.fmean(r["rewards"][-5:]) for r in rs]
            ratio = (
                "-"
                if name == "TRL"
                else "; ".join(_mmm(x, ".2f") + "x" for x in (sps_x, tps_x, cpu_x))
            )
            print(
                f"| {g} | {name} | {_mmm(sps, '.1f')} | {_mmm(tps, '.0f')} | {_mmm(cpu, '.2f')} "
                f"| {_mmm(rss, '.0f')} | {_mmm(tail, '.3f')} | {_held(rs)} | {ratio} |"
            )
    print("\nwhere the timed step time goes (share of timed wall, summed over seeds)\n")
    print("| G | trainer | " + " | ".join(PHASES) + " | ms / step |")
    print("|---|---|" + "---|" * (len(PHASES) + 1))
    for g, by in results.items():
        for name in ("TRL", "llmgym"):
            rs = by[name]
            wall = sum(r["wall_s"] for r in rs)
            shares = [sum(r["split"][p] for r in rs) / wall for p in PHASES]
            ms = 1000 * wall / (len(rs) * (steps - 1))
            print(f"| {g} | {name} | " + " | ".join(f"{s:.0%}" for s in shares) + f" | {ms:.0f} |")
    for g, by in results.items():
        step_ms = {
            name: {
                p: 1000 * sum(r["split"][p] for r in rs) / (len(rs) * (steps - 1)) for p in PHASES
            }
            for name, rs in by.items()
        }
        print(
            f"G={g} ms/step, TRL -> llmgym: "
            + "; ".join(
                f"{p} {step_ms['TRL'][p]:.0f} -> {step_ms['llmgym'][p]:.0f}" for p in PHASES
            )
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per run (step 1 is untimed)")
    parser.add_argument("--groups", type=int, nargs="+", default=[4, 8, 16], help="group sizes G")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--model", help="an SFT'd model directory (default: run the demo's first stages)"
    )
    parser.add_argument("--json", help="also write every run's raw figures to this file")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be >= 2 (step 1 is the untimed warm-up)")
    for g in args.groups:
        if g < 2 or SAMPLES_PER_STEP % g:
            parser.error(f"G must be >= 2 and divide {SAMPLES_PER_STEP}, got {g}")
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        model = args.model
        if model is None:
            from llmgym.agents.demo import DemoConfig, prepare

            print("preparing the SFT model (the demo's pretrain + SFT stages)...", file=sys.stderr)
            prepare(DemoConfig(output_dir=f"{workdir}/demo"), log=lambda *a: None)
            model = f"{workdir}/demo/sft/final"
        rnd = 0
        for g in args.groups:
            results[g] = {"TRL": [], "llmgym": []}
            for seed in args.seeds:
                order = [run_llmgym, run_trl] if rnd % 2 == 0 else [run_trl, run_llmgym]
                rnd += 1
                for target in order:
                    run_dir = f"{workdir}/g{g}-seed{seed}"  # a fresh output_dir per run
                    r = _in_child(target, model, args.steps, g, seed, run_dir)
                    r.update(group=g, seed=seed)
                    results[g][r["name"]].append(r)
                    print(
                        f"G={g} seed={seed} {r['name']:6}: {r['samples'] / r['wall_s']:.1f} samples/s, "
                        f"{r['tokens'] / r['wall_s']:.0f} tokens/s, held-out {r['held_out']:.1%} "
                        f"({r['threads']} torch thread(s))",
                        file=sys.stderr,
                    )
                    if args.json:  # as it goes, so a cut-short run keeps what it measured
                        Path(args.json).write_text(json.dumps(results, indent=1))
    fields = trl_args("<tmp>", args.steps, 0, 0)
    for key in ("output_dir", "num_generations", "seed"):
        fields.pop(key)
    print("\nTRL GRPOConfig fields set (besides output_dir, num_generations = G, seed = the seed):")
    print("  " + ", ".join(f"{k}={v!r}" for k, v in fields.items()))
    print(
        "timer scope (both): the step loop from the end of step 1 to the end of step "
        f"{args.steps}, i.e. steps 2..{args.steps} and the loop between them; excluded: model "
        "loading, trainer construction, dataset and env building, starting the math verifier's "
        "sympy worker, step 1, saving, evaluation. "
        "llmgym: clocks around train_step() calls 2..N; TRL: clocks read in on_step_end "
        "(after the optimizer and LR step). CPU = process_time over the same span."
    )
    print(
        "split: generation = llmgym's time/generate_s (sampling incl. logprobs) | TRL's _generate "
        "(prompt templating + model.generate + decoding); scoring/env = llmgym's time/env_s "
        "(env resets, prompt rendering, decoding, env.step) | TRL's _calculate_rewards; other "
        "rollout = task drawing, gathering, advantages (llmgym) | padding, advantages, metrics in "
        "_generate_and_score_completions (TRL); logprobs = no-grad old/reference passes (none "
        "with beta 0 and one iteration, for both); forward = forward + loss (llmgym's passes "
        "with gradients | TRL's compute_loss); backward = the backward calls; optimizer = grad "
        "clip + optimizer step; rest = batching, zero_grad, LR step, metrics, the loop."
    )
    report(results, args.steps)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
