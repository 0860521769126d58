"""GRPO on Accelerate: group-relative policy optimisation over any llmgym environment.

Run it with ``llmgym train --config configs/grpo.yaml`` or, on several processes,
``accelerate launch --num_processes 2 --cpu -m llmgym.agents.grpo --config configs/grpo.yaml``.

Each step draws ``prompts_per_step`` tasks (the same list on every process), plays ``group_size``
episodes of each (``reset(options={"task_id": ...})``), gathers every episode's reward from every
process, normalises rewards within each group, and takes a clipped policy-gradient step on the
tokens the policy sampled. Where this departs from the DeepSeekMath paper, following later work:

- clip-higher (DAPO): separate ``epsilon_low`` / ``epsilon_high`` clip bounds;
- loss aggregation ``dapo`` by default (token mean over the whole global batch); ``grpo``
  (per-sequence mean, then mean), ``bnpo`` (token mean over the local batch) and ``dr_grpo``
  (token sum over ``batch * max completion tokens``, Dr. GRPO) are options;
- ``scale_rewards``: divide by the group std (paper), the batch std, or not at all (Dr. GRPO);
- ``beta = 0`` by default (no KL term, no reference model in memory); with ``beta > 0`` the k3
  estimator against a fixed or dynamic reference (``reference: refresh | mix``), optionally with an
  adaptive coefficient (``kl_target``);
- optional dynamic sampling (DAPO): groups whose rewards are all equal carry no signal and are
  dropped, with up to ``dynamic_sampling_rounds`` extra rollout rounds to refill the batch;
- optional masking of completions cut at ``max_new_tokens`` (DAPO's overlong filtering);
- multi-turn episodes train on the exact token ids sampled, environment tokens masked out;
  an episode's reward is the sum of its steps' rewards.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmgym.agents.advantages import group_advantages
from llmgym.agents.config import ConfigError, require
from llmgym.agents.grpo_config import LOSS_TYPES, SCALE_REWARDS, GRPOConfig
from llmgym.agents.reference import k3
from llmgym.agents.runlog import PhaseClock

__all__ = [
    "LOSS_TYPES",
    "SCALE_REWARDS",
    "GRPOConfig",
    "GRPOTrainer",
    "grpo_loss",
    "group_advantages",
]

# --- the objective (pure functions, unit-tested on small tensors) -------------------------------


def grpo_loss(
    logprobs: Any,
    old_logprobs: Any,
    advantages: Any,
    mask: Any,
    *,
    loss_type: str = "dapo",
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.28,
    beta: float = 0.0,
    ref_logprobs: Any = None,
    max_completion_length: int | None = None,
    num_sequences: float | None = None,
    num_tokens: float | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The clipped GRPO objective on ``[batch, length]`` token tensors, aggregated by ``loss_type``.

    ``num_sequences`` / ``num_tokens`` override the normalisers (the trainer passes whole-batch
    and, for ``dapo``, all-process counts so micro-batches add up to the batch loss).
    Returns ``(loss, stats)``; stats are detached sums for logging (``kl_rows``: per row).
    """
    import torch

    mask = mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages[:, None]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high) * adv
    per_token = -torch.min(unclipped, clipped)
    kl = None
    if beta > 0:
        if ref_logprobs is None:
            raise ConfigError("beta > 0 needs ref_logprobs (a reference model)")
        kl = k3(logprobs, ref_logprobs)
        per_token = per_token + beta * kl
    n_seq = float(num_sequences) if num_sequences is not None else float(mask.shape[0])
    n_tok = float(num_tokens) if num_tokens is not None else float(mask.sum())
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1)).sum() / max(n_seq, 1.0)
    elif loss_type in ("bnpo", "dapo"):
        loss = (per_token * mask).sum() / max(n_tok, 1.0)
    elif loss_type == "dr_grpo":
        if not max_completion_length:
            raise ConfigError("loss_type dr_grpo needs max_completion_length")
        loss = (per_token * mask).sum() / max(n_seq * max_completion_length, 1.0)
    else:
        raise ConfigError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    with torch.no_grad():
        low = ((ratio < 1 - epsilon_low) & (adv < 0)).to(mask.dtype) * mask
        high = ((ratio > 1 + epsilon_high) & (adv > 0)).to(mask.dtype) * mask
        stats = {
            "tokens": mask.sum(),
            "clip_low": low.sum(),
            "clip_high": high.sum(),
            "pg": (-torch.min(unclipped, clipped) * mask).sum(),
            "kl_rows": (kl * mask).sum(1) if kl is not None else mask.new_zeros(mask.shape[0]),
        }
        stats["kl"] = stats["kl_rows"].sum()
    return loss, stats


# --- the trainer ---------------------------------------------------------------------------------


class GRPOTrainer:
    """Trains ``cfg.model`` on ``cfg.env_id`` with GRPO; ``train()`` runs ``cfg.total_steps`` steps."""

    def __init__(self, cfg: GRPOConfig, accelerator: Any = None, engine: Any = None):
        """``engine``: a :class:`~llmgym.agents.engines.GenerationEngine` to sample with instead
        of the one ``cfg.generation_engine`` names."""
        import torch
        from accelerate.utils import set_seed

        from llmgym.agents.checkpoint import Generators, load_checkpoint, resume_point
        from llmgym.agents.context import context_budget, reading_kwargs
        from llmgym.agents.engines import WeightSync, make_engine
        from llmgym.agents.modeling import build_optimizer, disable_dropout, set_torch_threads
        from llmgym.agents.monitoring import TrainMonitor
        from llmgym.agents.precision import make_accelerator
        from llmgym.agents.reference import AdaptiveKLController, FixedKLController, ReferenceModel
        from llmgym.agents.rollout import make_env, task_families
        from llmgym.agents.runlog import MetricsLogger
        from llmgym.agents.scale import build_trainable_model, reference_for
        from llmgym.agents.scheduler import SchedulerConfig, TaskScheduler
        from llmgym.agents.sharding import check_deepspeed_batches, enable_cpu_fsdp
        from llmgym.agents.tracking import open_trackers

        self.cfg = cfg
        # --- processes and seeding ------------------------------------------------------------
        set_torch_threads(cfg.torch_threads)
        self.accelerator = accelerator or make_accelerator(cfg.mixed_precision)
        acc = self.accelerator
        self.rank, self.world = acc.process_index, acc.num_processes
        total = cfg.prompts_per_step * cfg.group_size
        require(
            total % self.world == 0,
            f"prompts_per_step * group_size ({total}) must be divisible by the number of processes "
            f"({self.world}); change prompts_per_step or group_size",
        )
        self.local_n = total // self.world
        require(
            cfg.tree_search is None or self.world == 1,
            "tree_search runs in one process (each process's searches would differ in size)",
        )
        check_deepspeed_batches(
            acc, math.ceil(self.local_n / cfg.mini_batches), cfg.micro_batch_size
        )
        self.sharded = enable_cpu_fsdp(acc)  # FSDP2 / ZeRO-3: see llmgym.agents.sharding
        require(
            not (self.sharded and cfg.beta > 0 and not cfg.lora_r),
            "beta > 0 under FSDP or ZeRO-3 needs lora_r > 0 (the reference is then the policy "
            "with its adapters disabled); a second sharded copy as reference is not supported",
        )
        set_seed(cfg.seed)
        self.gens = Generators(cfg.seed, self.rank, device=acc.device)

        # --- model, optimizer, reference --------------------------------------------------------
        model, self.tokenizer = build_trainable_model(cfg, disable_dropout)
        model.train()
        # The longest episode: the config's max_total_tokens, capped by the model's context.
        self.max_total = context_budget(
            model, self.tokenizer, cfg.max_total_tokens, cfg.max_new_tokens
        )
        optimizer, lr_sched = build_optimizer(model.parameters(), cfg, cfg.total_steps)
        self.model, self.optimizer, self.lr_scheduler = acc.prepare(model, optimizer, lr_sched)
        # Generation: the policy itself, or vLLM synced after every update (see engines).
        self.engine = engine or make_engine(cfg, self._unwrapped(), acc, self.max_total)
        self.weight_sync = WeightSync(self.engine, acc, main_only=bool(cfg.vllm_server_url))
        self.ref: Any = None  # ReferenceModel, or AdapterReference (the base) under LoRA
        if cfg.beta > 0:
            self.ref = reference_for(cfg, self.model, acc.unwrap_model(self.model), ReferenceModel)
        self.kl_ctl = (
            AdaptiveKLController(cfg.beta, target=cfg.kl_target, horizon=cfg.kl_horizon)
            if cfg.kl_target
            else FixedKLController(cfg.beta)
        )

        # --- environments and task scheduler -----------------------------------------------------
        env_kwargs = {
            **cfg.env_kwargs,
            **reading_kwargs(
                cfg.env_id, cfg.env_kwargs, self.tokenizer, self.max_total, cfg.max_new_tokens
            ),
        }  # a long-document env whose documents cannot fit reads them chunk by chunk
        self.env_kwargs = env_kwargs
        self.envs = [make_env(cfg.env_id, env_kwargs) for _ in range(self.local_n)]
        self.probe_env = make_env(cfg.env_id, env_kwargs)
        self.max_turns = int(getattr(self.probe_env.unwrapped, "max_turns", 1))
        self.scheduler: TaskScheduler | None = None
        if cfg.scheduler is not None:
            self.scheduler = TaskScheduler(
                task_families(self.probe_env), SchedulerConfig.from_dict(dict(cfg.scheduler))
            )

        # --- checkpointed state, logging, resume --------------------------------------------------
        self.monitor = TrainMonitor(cfg.alerts, cfg.output_dir, write=acc.is_main_process)
        for obj in (self.gens, self.kl_ctl, self.scheduler, self.ref, self.monitor):
            if obj is not None:
                acc.register_for_checkpointing(obj)
        self.step = 0
        self.episodes = 0
        ckpt = resume_point(cfg.output_dir, cfg.resume)
        acc.wait_for_everyone()  # every process looked before the main one writes
        self.log = MetricsLogger(
            cfg.output_dir,
            tensorboard=cfg.tensorboard,
            enabled=acc.is_main_process,
            trackers=open_trackers(cfg, "grpo") if acc.is_main_process else [],
        )
        if ckpt is not None:
            state = load_checkpoint(acc, ckpt)
            self.step, self.episodes = int(state["step"]), int(state.get("episodes", 0))
            self.log.truncate_after(self.step)
        if acc.is_main_process:
            Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
            import yaml

            (Path(cfg.output_dir) / "config.yaml").write_text(
                yaml.safe_dump({"algo": "grpo", **cfg.to_dict()}, sort_keys=False)
            )
        self._torch = torch

    # --- one step: tasks -> rollouts -> advantages -> update -------------------------------------

    def _tree_rollouts(
        self, tasks: list[Any]
    ) -> tuple[list[Any], list[float], list[Any], list[list[Any]]]:
        """Tree-GRPO: search each task; siblings that share a prefix are the groups. Returns the
        samples, their advantages, their summaries, and each task's played episodes."""
        from llmgym.agents.hf import HFPolicy, stop_ids_of
        from llmgym.agents.tree_grpo import search_episodes, tree_rollouts

        cfg = self.cfg
        assert cfg.tree_search is not None
        policy = HFPolicy(
            self._unwrapped(),
            self.tokenizer,
            temperature=cfg.temperature,
            top_k=cfg.top_k,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
        )
        resets = [{"seed": t.seed, "options": t.options()} for t in tasks]
        trajs, advantages, results = tree_rollouts(
            self.envs[0],
            policy,
            self.tokenizer,
            resets,
            cfg.tree_search,
            stop_ids=stop_ids_of(self.tokenizer),
            seed=cfg.seed + self.step,
        )
        played = [
            search_episodes(r, t.task_id, t.domain) for r, t in zip(results, tasks, strict=True)
        ]
        return trajs, advantages, [t.summary() for t in trajs], played

    def train_step(self) -> dict[str, float]:
        """One GRPO step; returns its metrics (identical on every process)."""
        cfg, torch = self.cfg, self._torch
        t_start = time.perf_counter()
        timings: dict[str, float] = {}
        from accelerate.utils import gather_object

        from llmgym.agents.monitoring import FamilyTally, episodes_of, family_key
        from llmgym.agents.rollout import collect, draw_tasks
        from llmgym.agents.sharding import full_parameters

        # 1. Rollouts: the same task list on every process; this process plays its slice.
        #    With dynamic sampling, extra rounds replace groups whose rewards are all equal.
        kept_trajs: list[Any] = []  # this process's trajectories of kept groups
        kept_adv: list[float] = []
        all_summaries: list[Any] = []  # every episode of every round, all processes
        watched: list[Any] = []  # the same episodes, with their tasks' families (the monitor's)
        drawn: list[Any] = []  # every round's tasks: the families every process names alike
        kept_keys: list[tuple[str, str]] = []  # each kept trajectory's family
        kept_groups, zero_std_groups = 0, 0
        rounds = 1 + (cfg.dynamic_sampling_rounds if cfg.dynamic_sampling else 0)
        start = self.rank * self.local_n
        t0 = time.perf_counter()
        for round_ in range(rounds):
            tasks = draw_tasks(
                self.probe_env,
                cfg.prompts_per_step,
                self.gens.tasks,
                self.scheduler,
                advance=round_ == 0,  # a refill round belongs to the same step
            )
            drawn += tasks
            if cfg.tree_search is not None:
                kept_trajs, kept_adv, local, played = self._tree_rollouts(tasks)
                kept_keys = [family_key(t) for t in kept_trajs]
                all_summaries += local
                # the scheduler and the monitor count the whole episodes each search played
                flat = [e for task_eps in played for e in task_eps]
                owners = [task for task, eps in zip(tasks, played, strict=True) for _ in eps]
                watched += episodes_of(owners, flat, 1)
                rows, start_row = [], 0
                for eps in played:
                    rows.append(range(start_row, start_row + len(eps)))
                    start_row += len(eps)
                self._update_scheduler(tasks, flat, None, rows)
                kept_groups = cfg.prompts_per_step if kept_trajs else 0
                break
            mine = [tasks[(start + j) // cfg.group_size] for j in range(self.local_n)]
            # Sampling with the policy itself: gathered once, so generation gathers nothing.
            gather = not self.engine.holds_weights
            with (
                full_parameters(self.accelerator, self.model)
                if gather
                else contextlib.nullcontext()
            ):
                trajs = collect(
                    self.envs,
                    self._unwrapped(),
                    self.tokenizer,
                    seeds=[t.seed for t in mine],
                    options=[t.options() for t in mine],
                    max_new_tokens=cfg.max_new_tokens,
                    max_total_tokens=self.max_total,
                    context_overflow=cfg.context_overflow,
                    temperature=cfg.temperature,
                    top_k=cfg.top_k,
                    top_p=cfg.top_p,
                    generator=self.gens.sampling,
                    env_workers=cfg.env_workers,
                    timings=timings,
                    engine=self.engine,
                )
            # 2. Gather every episode's reward from every process, then normalise within groups.
            local = [t.summary() for t in trajs]
            summaries = gather_object(local) if self.world > 1 else local
            all_summaries += summaries
            watched += episodes_of(tasks, summaries, cfg.group_size)
            rewards = torch.tensor([s.reward for s in summaries], dtype=torch.float32)
            advantages = group_advantages(rewards, cfg.group_size, cfg.scale_rewards)
            zero_std = (rewards.view(-1, cfg.group_size).std(dim=1) < 1e-6).tolist()
            zero_std_groups += sum(zero_std)
            self._update_scheduler(tasks, summaries, advantages)
            for g in range(cfg.prompts_per_step):
                if kept_groups >= cfg.prompts_per_step:
                    break
                if cfg.dynamic_sampling and zero_std[g]:
                    continue
                kept_groups += 1
                for j in range(self.local_n):
                    if (start + j) // cfg.group_size == g:
                        kept_trajs.append(trajs[j])
                        kept_keys.append(family_key(mine[j]))
                        kept_adv.append(float(advantages[start + j]))
            if kept_groups >= cfg.prompts_per_step:
                break
        timings["rollout_s"] = time.perf_counter() - t0
        self.episodes += len(all_summaries)

        # 3. Policy update on this process's kept episodes.
        t0 = time.perf_counter()
        tally = FamilyTally(kept_keys, [family_key(t) for t in drawn])
        stats = self._update(kept_trajs, kept_adv, timings, tally) if kept_groups else {}
        timings["update_s"] = time.perf_counter() - t0
        if kept_groups:  # the next rollouts sample from the updated policy
            t0 = time.perf_counter()
            self.weight_sync(self.model)
            timings["weight_sync_s"] = time.perf_counter() - t0

        # 4. Reference model and KL coefficient.
        self.step += 1
        if self.ref is not None:
            self.ref.update(self._unwrapped(), self.step)
        if "kl" in stats and self.ref is not None:
            self.kl_ctl.update(stats["kl"], n_steps=len(all_summaries))

        # 5. Metrics (computed from gathered data: identical on every process).
        from llmgym.agents.rollout import rollout_metrics

        elapsed = time.perf_counter() - t_start
        tokens = sum(s.completion_tokens for s in all_summaries)
        metrics: dict[str, float] = {**rollout_metrics(all_summaries), **stats}
        metrics.update(
            {
                "charts/learning_rate": self.lr_scheduler.get_last_lr()[0],
                "charts/beta": self.kl_ctl.value,
                "charts/episodes": float(self.episodes),
                "charts/processes": float(self.world),
                "charts/samples_per_s": len(all_summaries) / elapsed,
                "charts/tokens_per_s": tokens / elapsed,
                "charts/kept_groups": float(kept_groups),
                "charts/zero_std_groups_frac": zero_std_groups
                * cfg.group_size
                / len(all_summaries),
                "time/step_s": elapsed,
                **{f"time/{k}": v for k, v in timings.items()},
            }
        )
        if self.scheduler is not None:
            metrics.update(self.scheduler.metrics())
        metrics.update(self.monitor.observe(self.step, watched, metrics, tally.sums))
        return metrics

    def _update_scheduler(
        self,
        tasks: Sequence[Any],
        summaries: Sequence[Any],
        advantages: Any,
        groups: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Each task's episodes (``groups``: their indices; default ``group_size`` in a row) to
        the scheduler."""
        if self.scheduler is None:
            return
        g = self.cfg.group_size
        for i, task in enumerate(tasks):
            rows = range(i * g, (i + 1) * g) if groups is None else groups[i]
            if task.arm is None or not rows:
                continue
            self.scheduler.update(
                task.arm,
                [summaries[j].is_success for j in rows],
                advantages=[] if advantages is None else [float(advantages[j]) for j in rows],
                step=self.step + 1,
                question=task.question,
            )

    def _update(
        self,
        trajs: list[Any],
        advantages: list[float],
        timings: dict[str, float],
        tally: Any = None,
    ) -> dict[str, float]:
        """num_iterations x mini_batches optimizer steps on the kept episodes; returns loss stats.
        ``tally`` (a :class:`~llmgym.agents.monitoring.FamilyTally` naming each trajectory's
        family) receives the per-family KL and entropy.

        Adds to ``timings``: ``logprobs_s`` (no-grad passes: old and reference logprobs, the
        update KL), ``forward_s`` (forward and loss), ``backward_s``, ``optimizer_s`` (clip, step).
        """
        cfg, acc, torch = self.cfg, self.accelerator, self._torch
        clock = PhaseClock(timings)
        F = torch.nn.functional
        from llmgym.agents.modeling import CompletionBatch, completion_logprobs
        from llmgym.agents.monitoring import FamilyTally
        from llmgym.agents.sharding import collective_passes

        tally = tally if tally is not None else FamilyTally([])
        if cfg.mask_truncated_completions:
            keep = [i for i, t in enumerate(trajs) if not t.completion_truncated]
            trajs, advantages = [trajs[i] for i in keep], [advantages[i] for i in keep]
            tally.keep(keep)
        pad = self.tokenizer.pad_token_id or 0
        dev = acc.device
        # Each distinct prompt once, then every episode's tokens after it (see CompletionBatch);
        # a process with nothing to train still joins every collective, on one dummy row.
        batch = CompletionBatch.build(
            [t.token_ids for t in trajs] or [[pad, pad]],
            [t.prompt_length for t in trajs] or [1],
            [t.loss_mask for t in trajs] or [[0, 0]],
            pad,
        ).to(dev)
        loss_mask = batch.loss_mask
        adv = torch.tensor(advantages or [0.0], dtype=torch.float32, device=dev)
        n, width = batch.ids.shape
        tally.begin(n, dev)

        def forward(model: Any, rows: Any, grad: bool, entropy: bool = False) -> tuple[Any, Any]:
            with torch.set_grad_enabled(grad):
                lp, ent = completion_logprobs(
                    model,
                    batch.select(rows),
                    temperature=cfg.temperature,
                    with_entropy=entropy,
                    one_pass=self.sharded,
                )
            pad_to = (0, width - lp.shape[1])  # select() trims the rows' padding; restore it
            return F.pad(lp, pad_to), F.pad(ent, pad_to) if ent is not None else None

        starts = list(range(0, n, cfg.micro_batch_size))
        passes = collective_passes(acc, len(starts))  # sharded: the same count on every process

        def no_grad_logprobs(model: Any) -> Any:
            parts = []
            with clock("logprobs_s"):
                for p in range(passes):
                    real = p < len(starts)  # a padding pass only joins the others' gathers
                    rows = list(range(starts[p], min(starts[p] + cfg.micro_batch_size, n)))
                    lp = forward(model, rows if real else [0], False)[0]
                    if real:
                        parts.append(lp)
            return torch.cat(parts, 0)

        # With one pass and one mini-batch the policy that sampled is the one being trained:
        # the old logprobs are the first forward's, detached (no second forward), as in TRL.
        on_policy = cfg.num_iterations == 1 and cfg.mini_batches == 1
        old_lp = None if on_policy else no_grad_logprobs(self.model)
        pre_lp = torch.zeros(n, width, device=dev)  # kept for the update KL
        ref_lp = None
        if self.ref is not None:  # beta > 0 only
            with self.ref.active():
                ref_lp = no_grad_logprobs(self.ref.model)

        sums: dict[str, float] = {
            "tokens": 0.0,
            "clip_low": 0.0,
            "clip_high": 0.0,
            "pg": 0.0,
            "kl": 0.0,
        }
        entropy_sum, grad_norms, losses = 0.0, [], []
        order = list(range(n))
        mb_size = math.ceil(n / cfg.mini_batches)
        for _ in range(cfg.num_iterations):
            for mb_start in range(0, cfg.mini_batches * mb_size, mb_size):
                rows_mb = order[mb_start : mb_start + mb_size]
                # Normalisers over the whole mini-batch (and, for dapo, every process).
                local_tokens = float(loss_mask[rows_mb].sum()) if rows_mb else 0.0
                counts = torch.tensor(
                    [local_tokens, float(len(rows_mb) if trajs else 0)], device=dev
                )
                global_counts = acc.reduce(counts, reduction="sum") if self.world > 1 else counts
                micro = [
                    rows_mb[s : s + cfg.micro_batch_size]
                    for s in range(0, len(rows_mb), cfg.micro_batch_size)
                ]
                n_micro = self._max_over_processes(len(micro))
                num_tokens = (
                    float(global_counts[0]) / self.world
                    if cfg.loss_type == "dapo"
                    else local_tokens
                )
                for m in range(n_micro):
                    rows = micro[m] if m < len(micro) else [0]  # padding pass: zero-weighted
                    weight = 1.0 if m < len(micro) and trajs else 0.0
                    sync = m == n_micro - 1
                    with contextlib.nullcontext() if sync else acc.no_sync(self.model):
                        clock.start("forward_s")
                        lp, ent = forward(self.model, rows, True, entropy=True)
                        if old_lp is None and weight:
                            pre_lp[rows] = lp.detach()
                        mask = loss_mask[rows] * weight
                        old = old_lp[rows] if old_lp is not None else lp.detach()
                        loss, st = grpo_loss(
                            lp,
                            old,
                            adv[rows] if trajs else adv[:1].expand(len(rows)),
                            mask,
                            loss_type=cfg.loss_type,
                            epsilon_low=cfg.epsilon_low,
                            epsilon_high=cfg.epsilon_high,
                            beta=self.kl_ctl.value if self.ref is not None else 0.0,
                            ref_logprobs=ref_lp[rows] if ref_lp is not None else None,
                            max_completion_length=cfg.max_new_tokens * self.max_turns,
                            num_sequences=max(len(rows_mb), 1),
                            num_tokens=num_tokens,
                        )
                        clock.start("backward_s")
                        acc.backward(loss)
                        clock.stop()
                    losses.append(float(loss.detach()))
                    for key in sums:
                        sums[key] += float(st[key])
                    if ent is not None:
                        entropy_sum += float((ent * mask.to(ent.dtype)).sum())
                        tally.add(rows, mask, ent, st["kl_rows"])
                with clock("optimizer_s"):
                    if cfg.max_grad_norm > 0:
                        grad_norms.append(
                            float(acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
                        )
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)
        self.lr_scheduler.step()

        # Statistics summed over processes, reported per trained token.
        vec = torch.tensor(
            [
                sums["tokens"],
                sums["clip_low"],
                sums["clip_high"],
                sums["pg"],
                sums["kl"],
                entropy_sum,
            ],
            device=dev,
        )
        vec = torch.cat([vec, tally.by_family()])  # per family: reduced with the totals
        vec = acc.reduce(vec, reduction="sum") if self.world > 1 else vec
        tally.finish(vec[6:], cfg.num_iterations, kl=self.ref is not None)
        tok = max(float(vec[0]), 1.0)
        out = {
            "losses/policy": float(vec[3]) / tok,
            "losses/total": sum(losses) / (cfg.num_iterations * cfg.mini_batches),
            "clip_frac": float(vec[1] + vec[2]) / tok,
            "clip_frac/low": float(vec[1]) / tok,
            "clip_frac/high": float(vec[2]) / tok,
            "entropy": float(vec[5]) / tok,
            "charts/trained_tokens": float(vec[0]) / max(cfg.num_iterations, 1),
        }
        if grad_norms:
            out["charts/grad_norm"] = sum(grad_norms) / len(grad_norms)
        if self.ref is not None:
            out["kl"] = float(vec[4]) / tok
            out["losses/kl_penalty"] = self.kl_ctl.value * out["kl"]
        elif cfg.measure_update_kl:  # every process joins the reduce, trained tokens or not
            new_lp = no_grad_logprobs(self.model)
            before = old_lp if old_lp is not None else pre_lp
            m = loss_mask.to(new_lp.dtype)
            kl_rows = (k3(before, new_lp) * m).sum(1)
            kl_sum = torch.tensor([float(kl_rows.sum()), float(m.sum())], device=dev)
            kl_sum = torch.cat([kl_sum, tally.by_family(kl_rows)])
            kl_sum = acc.reduce(kl_sum, reduction="sum") if self.world > 1 else kl_sum
            out["kl"] = float(kl_sum[0]) / max(float(kl_sum[1]), 1.0)
            tally.finish(vec[6:], cfg.num_iterations, kl=True, update_kl=kl_sum[2:])
        return out

    def _max_over_processes(self, value: int) -> int:
        if self.world == 1:
            return value
        t = self._torch.tensor([value], device=self.accelerator.device)
        return int(self.accelerator.gather(t).max())

    def _unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    # --- the loop ----------------------------------------------------------------------------------

    def train(self) -> dict[str, float]:
        """Run to ``total_steps`` (from a resumed step if any); returns the last step's metrics."""
        from tqdm.auto import tqdm

        from llmgym.agents.checkpoint import save_checkpoint

        cfg, acc = self.cfg, self.accelerator
        bar = tqdm(
            total=cfg.total_steps,
            initial=self.step,
            desc="grpo",
            disable=not (cfg.progress and acc.is_main_process),
            dynamic_ncols=True,
        )
        metrics: dict[str, float] = {}
        while self.step < cfg.total_steps:
            metrics = self.train_step()
            checking = cfg.check_weights_every and self.step % cfg.check_weights_every == 0
            if checking and not self.sharded:  # sharded weights exist once: nothing to compare
                from llmgym.agents.modeling import check_in_sync

                check_in_sync(acc, self.model, self.step)
                metrics["charts/weights_in_sync"] = 1.0
            if cfg.eval_every and self.step % cfg.eval_every == 0:
                metrics.update(self.evaluate())
            if (
                self.step % cfg.log_every == 0
                or self.step == cfg.total_steps
                or self.monitor.alerts
            ):
                self.log.log(self.step, metrics)
            bar.update(1)
            bar.set_postfix(
                reward=f"{metrics.get('rewards/mean', 0):.3f}",
                success=f"{metrics.get('rewards/success_rate', 0):.2f}",
            )
            if self.monitor.action == "stop":  # an alert ends the run (saved below, resumable)
                break
            saving = cfg.save_every and self.step % cfg.save_every == 0
            if (saving or self.monitor.action == "checkpoint") and self.step < cfg.total_steps:
                save_checkpoint(
                    acc,
                    cfg.output_dir,
                    self.step,
                    keep=cfg.keep_checkpoints,
                    extra={"episodes": self.episodes},
                )
        bar.close()
        save_checkpoint(
            acc,
            cfg.output_dir,
            self.step,
            keep=cfg.keep_checkpoints,
            extra={"episodes": self.episodes},
        )
        self.save_model(Path(cfg.output_dir) / "final")
        self.log.close()
        return metrics

    def evaluate(self, seeds: Sequence[int] | None = None) -> dict[str, float]:
        """Greedy success on held-out seeds (main process evaluates; every process gets the numbers)."""
        from accelerate.utils import broadcast_object_list

        from llmgym.agents.rollout import evaluate
        from llmgym.agents.sharding import full_parameters

        cfg, acc = self.cfg, self.accelerator
        seeds = (
            list(seeds)
            if seeds is not None
            else list(range(cfg.eval_seed, cfg.eval_seed + cfg.eval_episodes))
        )
        result: list[Any] = [None]
        with full_parameters(acc, self.model):  # every process gathers; the main one plays
            res = (
                evaluate(
                    self._unwrapped(),
                    self.tokenizer,
                    cfg.env_id,
                    self.env_kwargs,
                    seeds=seeds,
                    max_new_tokens=cfg.max_new_tokens,
                    max_total_tokens=self.max_total,
                )
                if acc.is_main_process
                else None
            )
        self._unwrapped().train()
        if res is not None:
            result = [
                {
                    "eval/success_rate": res.success_rate,
                    "eval/mean_reward": res.mean_reward,
                    **{f"eval/success/{d}": v for d, v in res.per_domain.items()},
                }
            ]
        if self.world > 1:
            broadcast_object_list(result)
        out: dict[str, float] = result[0]
        return out

    def save_model(self, path: str | Path) -> None:
        """The policy and tokenizer with ``save_pretrained`` (``hf:<path>`` loads it); under
        LoRA the merged model, its adapters in ``<path>/adapter``."""
        from llmgym.agents.peft_adapters import is_peft, save_for_evaluation
        from llmgym.agents.sharding import plain_copy

        acc = self.accelerator
        acc.wait_for_everyone()
        # Sharded: the gathered weights in a plain model on the main process (None elsewhere).
        model = plain_copy(acc, self.model, self.cfg) if self.sharded else self._unwrapped()
        if acc.is_main_process and is_peft(model):  # merged, adapters in adapter/
            save_for_evaluation(model, self.tokenizer, path)
        elif acc.is_main_process:
            model.save_pretrained(path)
            self.tokenizer.save_pretrained(path)
        acc.wait_for_everyone()

    def close(self) -> None:
        for env in [*self.envs, self.probe_env]:
            env.close()
        self.engine.close()
        self.log.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmgym.agents.grpo --config FILE [--set key=value ...]`` (works under accelerate launch)."""
    import argparse

    parser = argparse.ArgumentParser(prog="llmgym.agents.grpo", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML config (GRPOConfig fields)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--output-dir", help="overrides output_dir")
    parser.add_argument("--resume", action="store_true", help="resume from the latest checkpoint")
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    if args.output_dir:
        extra["output_dir"] = args.output_dir
    if args.resume:
        extra["resume"] = True
    cfg = GRPOConfig.load(args.config, args.overrides, **extra)
    trainer = GRPOTrainer(cfg)
    try:
        metrics = trainer.train()
    finally:
        trainer.close()
    if trainer.accelerator.is_main_process:
        print(
            f"done: {cfg.total_steps} steps, reward {metrics.get('rewards/mean', float('nan')):.3f}, "
            f"success {metrics.get('rewards/success_rate', float('nan')):.3f}; model in {cfg.output_dir}/final",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
