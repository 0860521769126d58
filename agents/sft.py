"""Supervised fine-tuning (and next-token pretraining) on Accelerate: ``llmgym sft --config FILE``.

Data is one of
- ``env:<env id>``: conversations played by the env's own oracle (``oracle_action()``) on
  ``num_examples`` seeds: the small set of demonstrations SFT needs before RL;
- a JSONL file of ``{"messages": [...]}`` chat records (loss on assistant tokens only), or of
  ``{"text": "..."}`` records (loss on every token: next-token pretraining).

Conversations are tokenized exactly as the RL rollouts build them (:mod:`llmgym.agents.rollout`):
the prompt through the chat template, each assistant turn as the template renders it (its end
token included, trained), each environment turn as the template's delta (not trained), so what
SFT teaches is the token layout GRPO and PPO then sample.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.agents.config import ScaleConfig, require


@dataclass
class SFTConfig(ScaleConfig):
    """SFT hyper-parameters (and everything :class:`ScaleConfig` and :class:`TrainConfig` have:
    LoRA, precision, gradient checkpointing and trackers; ``max_length`` is SFT's context rule)."""

    output_dir: str = "runs/sft"
    """Run directory: ``metrics.jsonl``, TensorBoard events, checkpoints and ``final/``."""
    data: str = "env:llm/Math-v0"
    """``env:<env id>`` (oracle demonstrations of ``env_id``'s env with ``env_kwargs``) or a
    JSONL file of ``{"messages": [...]}`` or ``{"text": ...}`` records."""
    num_examples: int = 64
    """Demonstrations to record with ``data: env:...``."""
    data_seed: int = 0
    """First env seed of the recorded demonstrations."""
    batch_size: int = 16
    """Examples per step, over all processes."""
    max_length: int = 1024
    """Longer examples are cut to this many tokens."""
    lr_schedule: str = "cosine"
    """``constant``, ``linear`` or ``cosine`` (decay to 0 over ``total_steps``)."""
    learning_rate: float = 1e-3
    """Peak AdamW learning rate."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            isinstance(self.data, str) and bool(self.data),
            "data must be 'env:<env id>' or a JSONL path",
        )
        if not self.data.startswith("env:"):
            require(
                Path(self.data).is_file(),
                f"data file {self.data!r} does not exist; pass a JSONL path or 'env:<env id>'",
            )
        require(self.num_examples >= 1, "num_examples must be >= 1")
        require(self.batch_size >= 1, "batch_size must be >= 1")
        require(self.max_length >= 8, "max_length must be >= 8")


# --- data ------------------------------------------------------------------------------------------


def conversation_tokens(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[Any] = ()
) -> tuple[list[int], list[int]]:
    """``(token ids, loss mask)`` of a chat: 1 on assistant turns (their end token included)."""
    from llmgym.core import clean_text

    def render(msgs: Sequence[dict[str, Any]], gen: bool) -> str:
        text: str = tokenizer.apply_chat_template(
            [
                dict(m, content=clean_text(m["content"]))
                if isinstance(m.get("content"), str)
                else m
                for m in msgs
            ],
            tools=list(tools) or None,
            add_generation_prompt=gen,
            tokenize=False,
        )
        return text

    ids: list[int] = []
    mask: list[int] = []
    done_text = ""
    for k, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        prompt_text = render(messages[:k], True)
        full_text = render(messages[: k + 1], False)
        if not (prompt_text.startswith(done_text) and full_text.startswith(prompt_text)):
            raise error.Error(
                "The chat template is not prefix-preserving; SFT cannot mark assistant tokens exactly. "
                "Use a template that only appends (e.g. llmgym.agents.tiny.CHAT_TEMPLATE)."
            )
        for text, trained in (
            (prompt_text[len(done_text) :], 0),
            (full_text[len(prompt_text) :], 1),
        ):
            piece = tokenizer(text, add_special_tokens=False).input_ids if text else []
            ids += piece
            mask += [trained] * len(piece)
        done_text = full_text
    return ids, mask


def text_tokens(tokenizer: Any, text: str) -> tuple[list[int], list[int]]:
    """``(token ids, loss mask)`` of raw text for next-token pretraining (every token trained)."""
    from llmgym.core import clean_text

    ids = list(tokenizer(clean_text(text), add_special_tokens=False).input_ids)
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return ids, [1] * len(ids)


def oracle_conversations(
    env_id: str, env_kwargs: dict[str, Any], seeds: Sequence[int]
) -> list[dict[str, Any]]:
    """``{"messages", "tools"}`` of one oracle-played episode per seed."""
    from llmgym.agents.rollout import make_env

    env = make_env(env_id, env_kwargs)
    out = []
    try:
        for seed in seeds:
            _, info = env.reset(seed=seed)
            tools = info.get("tools") or []
            for _ in range(1000):
                _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
                if terminated or truncated:
                    break
            out.append({"messages": info["messages"], "tools": tools})
    finally:
        env.close()
    return out


def load_examples(cfg: SFTConfig, tokenizer: Any) -> list[tuple[list[int], list[int]]]:
    """Tokenized ``(ids, mask)`` examples of ``cfg.data``."""
    if cfg.data.startswith("env:"):
        env_id = cfg.data[4:] or cfg.env_id
        records: list[dict[str, Any]] = oracle_conversations(
            env_id, cfg.env_kwargs, range(cfg.data_seed, cfg.data_seed + cfg.num_examples)
        )
    else:
        from llmgym.tasks import read_jsonl

        try:
            records = list(read_jsonl(cfg.data))
        except error.InvalidTask as e:
            raise error.Error(f"SFT data: {e}") from None
    examples = []
    for i, rec in enumerate(records):
        if isinstance(rec.get("messages"), list):
            ids, mask = conversation_tokens(tokenizer, rec["messages"], rec.get("tools") or ())
        elif isinstance(rec.get("text"), str):
            ids, mask = text_tokens(tokenizer, rec["text"])
        else:
            raise error.Error(f"SFT record {i} needs 'messages' (a chat) or 'text' (raw text)")
        ids, mask = ids[: cfg.max_length], mask[: cfg.max_length]
        if sum(mask[1:]) > 0:
            examples.append((ids, mask))
    if not examples:
        raise error.Error(f"No trainable examples in {cfg.data!r} (no assistant tokens or text)")
    return examples


# --- the trainer -----------------------------------------------------------------------------------


class SFTTrainer:
    """Next-token cross-entropy on the masked tokens of each example, token-averaged over the batch."""

    def __init__(self, cfg: SFTConfig, accelerator: Any = None, *, examples: Any = None):
        import torch
        from accelerate.utils import set_seed

        from llmgym.agents.checkpoint import Generators, load_checkpoint, resume_point
        from llmgym.agents.modeling import build_optimizer, disable_dropout, set_torch_threads
        from llmgym.agents.precision import make_accelerator
        from llmgym.agents.runlog import MetricsLogger, write_run_config
        from llmgym.agents.scale import build_trainable_model
        from llmgym.agents.tracking import open_trackers

        self.cfg = cfg
        # --- processes, seeding, model -------------------------------------------------------------
        set_torch_threads(cfg.torch_threads)
        self.accelerator = accelerator or make_accelerator(cfg.mixed_precision)
        acc = self.accelerator
        self.rank, self.world = acc.process_index, acc.num_processes
        require(
            cfg.batch_size % self.world == 0,
            f"batch_size ({cfg.batch_size}) must be divisible by the number of processes ({self.world})",
        )
        set_seed(cfg.seed)
        self.gens = Generators(cfg.seed, self.rank, device=acc.device)
        # Loaded, dropout off, checkpointed, with LoRA adapters (then only they train).
        model, self.tokenizer = build_trainable_model(cfg, disable_dropout)
        model.train()
        optimizer, lr_sched = build_optimizer(model.parameters(), cfg, cfg.total_steps)
        self.model, self.optimizer, self.lr_scheduler = acc.prepare(model, optimizer, lr_sched)

        # --- data -------------------------------------------------------------------------------
        self.examples = examples if examples is not None else load_examples(cfg, self.tokenizer)
        self._order: list[int] = []

        # --- checkpointed state, logging, resume ----------------------------------------------------
        acc.register_for_checkpointing(self.gens)
        self.step = 0
        ckpt = resume_point(cfg.output_dir, cfg.resume)
        acc.wait_for_everyone()  # every process looked before the main one writes
        self.log = MetricsLogger(
            cfg.output_dir,
            tensorboard=cfg.tensorboard,
            enabled=acc.is_main_process,
            trackers=open_trackers(cfg, "sft") if acc.is_main_process else [],
        )
        if acc.is_main_process:  # what `llmgym report` shows as hyperparameters
            write_run_config(cfg.output_dir, "sft", cfg.to_dict())
        if ckpt is not None:
            state = load_checkpoint(acc, ckpt)
            self.step = int(state["step"])
            self._order = list(state.get("order", []))
            self.log.truncate_after(self.step)
        self._torch = torch

    def _next_batch(self) -> list[int]:
        """Indices of this step's examples (the same on every process): shuffled epochs."""
        out: list[int] = []
        while len(out) < self.cfg.batch_size:
            if not self._order:
                self._order = [int(i) for i in self.gens.tasks.permutation(len(self.examples))]
            out.append(self._order.pop())
        return out

    def train_step(self) -> dict[str, float]:
        cfg, acc, torch = self.cfg, self.accelerator, self._torch
        from llmgym.agents.modeling import pad_right, token_logprobs

        t0 = time.perf_counter()
        batch = self._next_batch()
        per = cfg.batch_size // self.world
        mine = [self.examples[i] for i in batch[self.rank * per : (self.rank + 1) * per]]
        pad = self.tokenizer.pad_token_id or 0
        ids, attn = pad_right([e[0] for e in mine], pad)
        mask, _ = pad_right([e[1] for e in mine], 0)
        dev = acc.device
        ids, attn = ids.to(dev), attn.to(dev)
        mask = mask[:, 1:].float().to(dev)
        local_tokens = mask.sum()
        total_tokens = (
            acc.reduce(local_tokens.clone(), reduction="sum") if self.world > 1 else local_tokens
        )
        norm = float(total_tokens) / self.world
        loss_sum = 0.0
        chunks = list(range(0, len(mine), cfg.micro_batch_size))
        for c, s in enumerate(chunks):
            rows = slice(s, s + cfg.micro_batch_size)
            with acc.no_sync(self.model) if c < len(chunks) - 1 else contextlib.nullcontext():
                lp, _, _ = token_logprobs(self.model, ids[rows], attn[rows])
                loss = -(lp * mask[rows]).sum() / max(norm, 1.0)
                acc.backward(loss)
            loss_sum += float(loss.detach())
        grad_norm = (
            float(acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
            if cfg.max_grad_norm > 0
            else 0.0
        )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        lr = self.lr_scheduler.get_last_lr()[0]
        self.lr_scheduler.step()
        self.step += 1
        loss_t = torch.tensor([loss_sum], device=dev)
        loss_t = acc.reduce(loss_t, reduction="sum") / self.world if self.world > 1 else loss_t
        elapsed = time.perf_counter() - t0
        return {
            "losses/sft": float(loss_t[0]) * self.world,
            "charts/learning_rate": lr,
            "charts/grad_norm": grad_norm,
            "charts/tokens_per_s": float(total_tokens) / elapsed,
            "charts/samples_per_s": cfg.batch_size / elapsed,
            "time/step_s": elapsed,
        }

    def train(self) -> dict[str, float]:
        from tqdm.auto import tqdm

        from llmgym.agents.checkpoint import save_checkpoint

        cfg, acc = self.cfg, self.accelerator
        bar = tqdm(
            total=cfg.total_steps,
            initial=self.step,
            desc="sft",
            disable=not (cfg.progress and acc.is_main_process),
            dynamic_ncols=True,
        )
        metrics: dict[str, float] = {}
        while self.step < cfg.total_steps:
            metrics = self.train_step()
            if cfg.check_weights_every and self.step % cfg.check_weights_every == 0:
                from llmgym.agents.modeling import check_in_sync

                check_in_sync(acc, self.model, self.step)
                metrics["charts/weights_in_sync"] = 1.0
            if self.step % cfg.log_every == 0 or self.step == cfg.total_steps:
                self.log.log(self.step, metrics)
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['losses/sft']:.3f}")
            if cfg.save_every and self.step % cfg.save_every == 0 and self.step < cfg.total_steps:
                save_checkpoint(
                    acc,
                    cfg.output_dir,
                    self.step,
                    keep=cfg.keep_checkpoints,
                    extra={"order": self._order},
                )
        bar.close()
        save_checkpoint(
            acc, cfg.output_dir, self.step, keep=cfg.keep_checkpoints, extra={"order": self._order}
        )
        self.save_model(Path(cfg.output_dir) / "final")
        self.log.close()
        return metrics

    def save_model(self, path: str | Path) -> None:
        """The model and tokenizer with ``save_pretrained``; under LoRA the merged model, its
        adapters in ``<path>/adapter``."""
        from llmgym.agents.peft_adapters import is_peft, save_for_evaluation

        acc = self.accelerator
        acc.wait_for_everyone()
        model = acc.unwrap_model(self.model)
        if acc.is_main_process and is_peft(model):
            save_for_evaluation(model, self.tokenizer, path)
        elif acc.is_main_process:
            model.save_pretrained(path)
            self.tokenizer.save_pretrained(path)
        acc.wait_for_everyone()


def write_jsonl(path: str | Path, records: Sequence[dict[str, Any]]) -> Path:
    """Write records as JSONL (the format ``data:`` reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmgym.agents.sft --config FILE [--set key=value ...]`` (works under accelerate launch)."""
    import argparse

    parser = argparse.ArgumentParser(prog="llmgym.agents.sft", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML config (SFTConfig fields)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--output-dir", help="overrides output_dir")
    parser.add_argument("--resume", action="store_true", help="resume from the latest checkpoint")
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    if args.output_dir:
        extra["output_dir"] = args.output_dir
    if args.resume:
        extra["resume"] = True
    cfg = SFTConfig.load(args.config, args.overrides, **extra)
    metrics = SFTTrainer(cfg).train()
    print(
        f"done: loss {metrics.get('losses/sft', float('nan')):.4f}; model in {cfg.output_dir}/final",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
