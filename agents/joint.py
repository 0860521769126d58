"""Joint training of the demo's tiny model on several task families: the shared pieces of
``benchmarks/joint.py``.

What is here: the four families of the benchmark (a clock family in a ``clock`` domain, a
declarative env registered from generated tasks, and three ``llm/Math-v0`` arithmetic families of
rising difficulty) as one ``llm/Mixture-v0``; the shared base model (the demo's tiny Llama,
pre-trained on facts of all four families and fine-tuned on a few worked solutions of each,
built once and cached); held-out success per family; and one *arm* of the benchmark: GRPO from
the base model with tasks chosen sequentially (``sequential_scheduler``), uniformly (the
mixture's own draw) or by :class:`~llmgym.agents.scheduler.TaskScheduler`, evaluated per family
every few steps.

It is not a trainer (GRPO is :mod:`llmgym.agents.grpo`) and decides nothing about what the
figures mean: ``benchmarks/joint.py`` compares the arms.
"""

from __future__ import annotations

import functools
import json
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.agents.scheduler import TaskScheduler

CLOCK_ID = "joint/Clock-v0"
INSTRUCTION = "Put your final answer in \\boxed{}."


@dataclass(frozen=True)
class Family:
    """One family of the benchmark: a mixture member with a single family."""

    member: str
    """The member's name in the mixture (the arm is ``"<member>::<family>"``)."""
    env_id: str
    family: str

    @property
    def arm(self) -> str:
        return f"{self.member}::{self.family}"


FAMILIES = (
    Family("clock", CLOCK_ID, "clock.later"),
    Family("add", "llm/Math-v0", "arith.add_small"),
    Family("mul", "llm/Math-v0", "arith.mul"),
    Family("div", "llm/Math-v0", "arith.div"),
)
"""In the sequential arm's order: easiest first (as the model starts: see the README table)."""

ARMS = tuple(f.arm for f in FAMILIES)
MIXTURE_ID = "llm/Mixture-v0"
KINDS = ("sequential", "uniform", "scheduler")
"""The benchmark's arms: how each chooses its tasks."""


# --- the clock family --------------------------------------------------------------------------


def clock_tasks() -> list[dict[str, Any]]:
    """What a 12-hour clock shows 1 to 9 hours after each hour: 108 questions, a ``fact`` each."""
    tasks = []
    for start in range(1, 13):
        for hours in range(1, 10):
            answer = (start + hours - 1) % 12 + 1
            tasks.append(
                {
                    "id": f"clock.{start}.{hours}",
                    "family": "clock.later",
                    "prompt": f"It is {start} o'clock. What time is it {hours} hours later?",
                    "answer": str(answer),
                    "metadata": {"fact": f"{hours} hours after {start} o'clock it is {answer}."},
                }
            )
    return tasks


def clock_spec() -> dict[str, Any]:
    """``joint/Clock-v0`` as :func:`llmgym.register_task_env` fields (``configs/joint/clock.yaml``
    ships the same, tested): exact match of the response's last number (bare or boxed), so a
    hedge or a list scores as its last number only."""
    return {
        "id": CLOCK_ID,
        "tasks": clock_tasks(),
        "verifier": "exact",
        "extract": "regex:(?<![0-9.-])([0-9]+)[^0-9]*$",  # no decimals or signs
        "prompt_template": "{prompt}\n\n" + INSTRUCTION.replace("{}", "{{}}"),
        "domain": "clock",
        "description": "Hours on a 12-hour clock (the joint benchmark's non-math domain).",
    }


def register_clock() -> str:
    """Register ``joint/Clock-v0`` (once per process)."""
    from llmgym.declarative import register_task_env
    from llmgym.registry import list_envs

    if CLOCK_ID not in list_envs("joint"):
        spec = clock_spec()
        register_task_env(spec.pop("id"), spec.pop("tasks"), **spec)
    return CLOCK_ID


def mixture_kwargs() -> dict[str, Any]:
    """``llm/Mixture-v0`` kwargs: one member per family, equal weights, difficulty 0."""
    register_clock()
    envs = []
    for f in FAMILIES:
        kwargs: dict[str, Any] = {"difficulty": 0.0}
        if f.env_id == "llm/Math-v0":
            kwargs["families"] = [f.family]
        envs.append({"id": f.env_id, "name": f.member, "kwargs": kwargs})
    return {"envs": envs}


# --- data of the shared pre-training and SFT ----------------------------------------------------

_EXPR = re.compile(r"\$(.+?)\$|What is (\d+ \+ \d+)\?")
"""The expression of a Math-v0 prompt: ``Compute $8 \\times 3$.`` or ``What is 4 + 7?``."""


def _math_facts(rng: random.Random) -> tuple[str, str]:
    """One multiplication or division exercise and its equation, in Math-v0's wording."""
    if rng.random() < 0.5:  # Math-v0's arith.mul and arith.div at difficulty 0
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        expr, value = f"{a} \\times {b}", a * b
    else:
        divisor, quotient = rng.randint(2, 9), rng.randint(2, 12)
        expr, value = f"{divisor * quotient} \\div {divisor}", quotient
    return f"Compute ${expr}$.", f"{expr} = {value}."


def pretraining_corpus(n: int, seed: int) -> list[str]:
    """A third of the demo's documents (addition facts and exercises, chat small talk), the rest
    this benchmark's own: multiplication, division and clock facts, bare and after the
    exercise in the env's wording. No chat-formatted exercise and no ``\\boxed{}`` answer."""
    from llmgym.agents import demo

    rng = random.Random(seed)
    clock = clock_tasks()
    docs = demo.pretraining_corpus(n // 3, seed)
    for i in range(n - len(docs)):
        parts = []
        for _ in range(6):
            if rng.random() < 0.3:
                task = rng.choice(clock)
                fact = task["metadata"]["fact"]
                prompt = f"{task['prompt']}\n\n{INSTRUCTION}\n"
            else:
                prompt, fact = _math_facts(rng)
                prompt = f"{prompt}\n\n{INSTRUCTION}\n"
            parts.append(prompt + fact if i % 2 else fact)
        docs.append(" ".join(parts))
    return docs


def worked_solution(prompt: str, answer: str, fact: str | None = None) -> str:
    """A demonstration: the clock fact, or the equation (what the pre-training taught; the
    math verifier reads the right side of the last equation, the clock env the last number)."""
    if fact is not None:
        return fact
    expr = _EXPR.search(prompt)
    if expr is None:
        return f"The answer is {answer}."
    return f"{expr.group(1) or expr.group(2)} = {answer}."


def sft_records(per_family: int) -> list[dict[str, Any]]:
    """``per_family`` chat demonstrations of each family, on seeds ``0 .. per_family - 1``."""
    import llmgym

    facts = {t["prompt"]: t["metadata"]["fact"] for t in clock_tasks()}
    records = []
    for f in FAMILIES:
        env = llmgym.make(MIXTURE_ID, disable_env_checker=True, family=f.arm, **mixture_kwargs())
        for s in range(per_family):
            obs, info = env.reset(seed=s)
            task: Any = env.unwrapped.episode.task  # type: ignore[attr-defined]
            answer = str(task.answer)
            solution = worked_solution(obs, answer, facts.get(obs.split("\n")[0]))
            records.append(
                {"messages": [*info["messages"], {"role": "assistant", "content": solution}]}
            )
        env.close()
    return records


# --- the shared base model ------------------------------------------------------------------------


@dataclass
class BaseConfig:
    """The shared pre-training and SFT (the demo's sizes; every arm starts from its result)."""

    seed: int = 0
    hidden_size: int = 64
    num_layers: int = 2
    vocab_size: int = 512
    pretrain_docs: int = 6000
    pretrain_steps: int = 800
    pretrain_batch: int = 32
    sft_per_family: int = 64
    sft_steps: int = 200
    learning_rates: dict[str, float] = field(
        default_factory=lambda: {"pretrain": 3e-3, "sft": 1e-3}
    )


def build_base(cfg: BaseConfig, out: str | Path, *, log: Callable[[str], Any] = print) -> Path:
    """The SFT model every arm starts from, ``<out>/sft/final``; built once per config (a
    ``base.json`` beside it records the config it was built with) and reused after."""
    from llmgym.agents import demo
    from llmgym.agents.sft import SFTConfig, SFTTrainer, write_jsonl

    out = Path(out)
    final, stamp = out / "sft" / "final", out / "base.json"
    if final.is_dir() and stamp.is_file() and json.loads(stamp.read_text()) == asdict(cfg):
        log(f"[base] reusing {final}")
        return final
    demo._quiet()
    t0 = time.perf_counter()
    docs = pretraining_corpus(cfg.pretrain_docs, cfg.seed)
    demos = sft_records(cfg.sft_per_family)
    demo.tiny_llama(cfg, docs, demos, out / "tiny")
    common = {"progress": False, "torch_threads": 1, "seed": cfg.seed}
    write_jsonl(out / "data" / "pretrain.jsonl", [{"text": d} for d in docs])
    write_jsonl(out / "data" / "sft.jsonl", demos)
    stages = (
        ("pretrain", out / "tiny", "pretrain.jsonl", cfg.pretrain_steps, cfg.pretrain_batch),
        ("sft", out / "pretrain" / "final", "sft.jsonl", cfg.sft_steps, 16),
    )
    for name, model, data, steps, batch in stages:
        loss = SFTTrainer(
            SFTConfig(
                model=str(model),
                data=str(out / "data" / data),
                output_dir=str(out / name),
                total_steps=steps,
                batch_size=batch,
                learning_rate=cfg.learning_rates[name],
                warmup_steps=10,
                **common,
            )
        ).train()["losses/sft"]
        log(f"[base] {name}: {steps} steps, loss {loss:.3f} ({time.perf_counter() - t0:.0f} s)")
    stamp.write_text(json.dumps(asdict(cfg)))
    return final


# --- held-out success per family --------------------------------------------------------------------

HELD_OUT_SEED = 1_000_000
"""First evaluation seed: SFT used seeds 0..n-1, GRPO draws task seeds from its own stream."""


@functools.cache
def question_seeds(arm: str, episodes: int, tries: int = 5000) -> tuple[int, ...]:
    """Seeds (from :data:`HELD_OUT_SEED` on) of up to ``episodes`` *distinct* questions of a
    family. Every family here has at most 108 questions, so an evaluation over all of them
    measures the model exactly, without the noise of drawing questions with repeats (which
    would make ``best - final`` positive by chance alone)."""
    import llmgym

    env = llmgym.make(MIXTURE_ID, disable_env_checker=True, family=arm, **mixture_kwargs())
    seen: dict[str, int] = {}
    for seed in range(HELD_OUT_SEED, HELD_OUT_SEED + tries):
        question, _ = env.reset(seed=seed)  # math task ids carry the seed: key on the text
        seen.setdefault(question, seed)
        if len(seen) == episodes:
            break
    env.close()
    return tuple(seen.values())


def family_success(
    model: Any, tokenizer: Any, episodes: int, *, max_new_tokens: int = 40
) -> dict[str, float]:
    """Greedy success of ``model`` on up to ``episodes`` distinct questions of each family."""
    from llmgym.agents.rollout import evaluate

    out = {}
    for arm in ARMS:
        kwargs = {**mixture_kwargs(), "family": arm}
        seeds = question_seeds(arm, episodes)
        res = evaluate(
            model, tokenizer, MIXTURE_ID, kwargs, seeds=seeds, max_new_tokens=max_new_tokens
        )
        out[arm] = res.success_rate
    return out


# --- the arms ------------------------------------------------------------------------------------------


def sequential_scheduler(steps: int) -> dict[str, Any]:
    """The sequential arm's ``SchedulerConfig``: every prompt from one family, the families of
    ``ARMS`` in turn, a quarter of the steps each (A, then B, ...), at difficulty 0."""
    return {
        "strategy": "sequential",
        "order": list(ARMS),
        "phase_steps": max(1, steps // len(ARMS)),
        "curriculum": False,
        "max_difficulty": 0.0,
    }


@dataclass
class ArmConfig:
    """One arm's GRPO run (the same for every arm but ``kind`` and ``scheduler``)."""

    kind: str
    """``sequential``, ``uniform`` or ``scheduler``."""
    steps: int
    eval_every: int
    eval_episodes: int
    prompts_per_step: int = 16
    group_size: int = 8
    max_new_tokens: int = 40
    learning_rate: float = 2e-4
    seed: int = 0
    scheduler: dict[str, Any] = field(default_factory=dict)
    """TaskScheduler settings of the ``scheduler`` arm."""


def _episodes_by_family(metrics: dict[str, float]) -> dict[str, int]:
    from llmgym.evaluation.monitor import clean_name

    out = {}
    for arm in ARMS:
        keys = [k for k in metrics if k.endswith(f"/{clean_name(arm)}/episodes")]
        out[arm] = int(sum(metrics[k] for k in keys if k.startswith("family/")))
    return out


def _decision(step: int, scheduler: TaskScheduler) -> dict[str, Any]:
    """What the scheduler did at ``step``: each arm's weight, smoothed success, pause, picks."""
    m = scheduler.metrics()
    return {
        "step": step,
        **{
            arm: {
                key: m[f"scheduler/{scheduler.metric_names[arm]}/{key}"]
                for key in ("weight", "p_success", "paused", "picks", "difficulty")
            }
            for arm in ARMS
        },
    }


def run_arm(
    cfg: ArmConfig, base_model: str | Path, out: str | Path, *, log: Callable[[str], Any] = print
) -> dict[str, Any]:
    """Train one arm from ``base_model``; evaluate every family every ``eval_every`` steps.

    Returns ``evals`` (``{"step", "episodes", "success": {arm: rate}}``, step 0 included),
    ``episodes`` (per family), ``decisions`` (per step, with a scheduler) and ``seconds``.
    """
    from llmgym.agents.grpo import GRPOConfig, GRPOTrainer

    register_clock()
    if cfg.kind not in KINDS:
        raise error.Error(f"ArmConfig.kind must be one of {KINDS}, got {cfg.kind!r}")
    scheduler = {"sequential": sequential_scheduler(cfg.steps), "scheduler": cfg.scheduler}.get(
        cfg.kind
    )
    shutil.rmtree(Path(out) / cfg.kind, ignore_errors=True)  # an arm always starts afresh
    trainer = GRPOTrainer(
        GRPOConfig(
            model=str(base_model),
            env_id=MIXTURE_ID,
            env_kwargs=mixture_kwargs(),
            output_dir=str(Path(out) / cfg.kind),
            total_steps=cfg.steps,
            prompts_per_step=cfg.prompts_per_step,
            group_size=cfg.group_size,
            max_new_tokens=cfg.max_new_tokens,
            learning_rate=cfg.learning_rate,
            tensorboard=False,
            progress=False,
            torch_threads=1,
            seed=cfg.seed,
            scheduler=scheduler,
        )
    )
    t0 = time.perf_counter()
    model, tokenizer = trainer.accelerator.unwrap_model(trainer.model), trainer.tokenizer
    episodes = dict.fromkeys(ARMS, 0)
    result: dict[str, Any] = {"evals": [], "decisions": [], "episodes": episodes}

    def evaluate(step: int) -> None:
        success = family_success(model, tokenizer, cfg.eval_episodes)
        model.train()
        result["evals"].append({"step": step, "episodes": trainer.episodes, "success": success})
        rates = " ".join(f"{a.split('::')[0]} {v:.0%}" for a, v in success.items())
        log(
            f"[{cfg.kind} seed {cfg.seed}] step {step:4d} ({time.perf_counter() - t0:.0f} s): {rates}"
        )

    try:
        evaluate(0)
        for step in range(1, cfg.steps + 1):
            metrics = trainer.train_step()
            for arm, n in _episodes_by_family(metrics).items():
                episodes[arm] += n
            if trainer.scheduler is not None and cfg.kind == "scheduler":
                result["decisions"].append(_decision(step, trainer.scheduler))
            if step % cfg.eval_every == 0 or step == cfg.steps:
                evaluate(step)
    finally:
        trainer.close()
    result["seconds"] = time.perf_counter() - t0
    return result


def run_seed(
    base: BaseConfig, arms: Sequence[ArmConfig], out: str | Path
) -> dict[str, dict[str, Any]]:
    """One seed of the benchmark: its base model (``<out>/base``), then each arm. Each arm's
    result is saved to ``<out>/<kind>.json`` with its config and reused by a rerun with the same
    config, so an interrupted benchmark resumes where it stopped (at an arm's boundary)."""
    out = Path(out)
    model = build_base(base, out / "base")
    results = {}
    for arm in arms:
        saved = out / f"{arm.kind}.json"
        if saved.is_file() and json.loads(saved.read_text())["config"] == asdict(arm):
            results[arm.kind] = json.loads(saved.read_text())["result"]
            print(f"[{arm.kind} seed {arm.seed}] reusing {saved}", flush=True)
            continue
        results[arm.kind] = run_arm(arm, model, out, log=lambda line: print(line, flush=True))
        saved.write_text(json.dumps({"config": asdict(arm), "result": results[arm.kind]}))
    return results
