"""PPO on Accelerate: token-level actor-critic over any llmgym environment.

Run it with ``llmgym train --config configs/ppo.yaml`` or, on several processes,
``accelerate launch --num_processes 2 --cpu -m llmgym.agents.ppo --config configs/ppo.yaml``.

Each step plays ``episodes_per_step`` episodes (over all processes), scores every sampled token
with the policy, the reference and a value head, and takes ``ppo_epochs`` passes of clipped
updates. The recipe is Ziegler et al. (2019) / Stiennon et al. (2020) as in CleanRL's PPO:

- every sampled token is an action; the reward of a turn is credited to the turn's last token,
  and each token pays ``kl_coef * (logp - ref_logp)`` (the KL penalty is in the reward);
- the KL coefficient is adaptive (``kl_target`` and ``kl_horizon``: Ziegler's proportional
  controller on the per-episode KL, logged as ``charts/episode_kl``) or fixed; the reference is
  fixed or dynamic (``reference: refresh | mix``). The logged ``kl`` is per sampled token, as
  GRPO's: against the reference, or without one the update's approximate KL to the rollout policy;
- GAE (``gamma``, ``lam``) runs over the policy's tokens only: environment tokens of multi-turn
  episodes are not actions, so the value bootstraps across them;
- advantages are whitened over the batch (all processes); the value loss is clipped around the
  rollout values (``clip_range_value``); ``target_kl`` stops the epochs early when the policy
  has moved too far from the rollout policy.

The value head is a linear layer on the policy's last hidden state (a shared trunk, as in
TRL's ``AutoModelForCausalLMWithValueHead``), so one model is trained and checkpointed. The live
monitor (:class:`~llmgym.agents.monitoring.TrainMonitor`, the config's ``alerts:``) sees every
step's episodes and each family's KL and entropy per token, as in GRPO.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym.agents.config import ScaleConfig, alert_rules_error, require
from llmgym.agents.reference import REFERENCE_MODES

# --- config ------------------------------------------------------------------------------------


@dataclass
class PPOConfig(ScaleConfig):
    """PPO hyper-parameters (and everything :class:`ScaleConfig` and :class:`TrainConfig` have:
    LoRA, precision, gradient checkpointing, the context rule, trackers)."""

    output_dir: str = "runs/ppo"
    """Run directory: ``metrics.jsonl``, TensorBoard events, checkpoints and ``final/``."""

    # --- sampling -----------------------------------------------------------------------------
    episodes_per_step: int = 64
    """Episodes per step, over all processes."""
    max_new_tokens: int = 64
    """Longest completion per turn."""
    max_total_tokens: int = 1024
    """Longest episode (prompt, every turn and env message)."""
    temperature: float = 1.0
    """Sampling temperature (logprobs are computed at the same temperature)."""
    top_k: int = 0
    """Sample among the k most likely tokens (0: all)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1: all)."""
    env_workers: int = 1
    """Threads stepping environments."""

    # --- PPO ---------------------------------------------------------------------------------------
    ppo_epochs: int = 4
    """Passes over each batch of rollouts."""
    mini_batches: int = 4
    """Optimizer steps per pass."""
    clip_range: float = 0.2
    """Policy ratio clip."""
    clip_range_value: float = 0.2
    """Value clip around the rollout's values (0 disables value clipping)."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""
    gamma: float = 1.0
    """Discount per policy token."""
    lam: float = 0.95
    """GAE lambda."""
    whiten_advantages: bool = True
    """Normalise advantages to zero mean and unit variance over the batch."""
    target_kl: float = 0.0
    """Stop the epochs early when the approximate KL to the rollout policy exceeds this (0: never)."""
    value_head_std: float = 0.0
    """Init std of the value head weights (0: zeros, so initial values are the bias, 0)."""

    # --- KL penalty in the reward ---------------------------------------------------------------
    kl_coef: float = 0.05
    """Initial KL coefficient (0 with ``kl_target: 0``: no reference model is loaded)."""
    kl_target: float = 0.0
    """If > 0, adapt ``kl_coef`` so the per-episode KL tracks this many nats (Ziegler et al.)."""
    kl_horizon: int = 10_000
    """Episodes over which the adaptive controller corrects a KL error by at most 20 %."""
    reference: str = "fixed"
    """``fixed``, ``refresh`` (copy the policy every ``ref_update_every`` steps) or ``mix``."""
    ref_update_every: int = 0
    """Steps between reference updates for ``refresh`` and ``mix``."""
    ref_mix_alpha: float = 0.1
    """Fraction of the way the ``mix`` reference moves toward the policy at each update."""

    # --- tasks, evaluation ------------------------------------------------------------------------
    scheduler: dict[str, Any] | None = None
    """Task scheduler settings (``SchedulerConfig`` fields), or None for the env's own distribution."""
    eval_every: int = 0
    """Evaluate (greedy) on held-out seeds every N steps (0: never during training)."""
    eval_episodes: int = 64
    """Held-out episodes per evaluation."""
    eval_seed: int = 1_000_000
    """First held-out seed."""
    alerts: list[dict[str, Any]] = field(default_factory=list)
    """Alert rules (``llmgym.evaluation.monitor.AlertRule`` fields), as in GRPO's config: each
    fired alert is logged, appended to ``alerts.jsonl`` and marked on ``llmgym report RUN
    --watch``; ``action: checkpoint`` saves, ``action: stop`` saves and ends the run."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.episodes_per_step >= 1, "episodes_per_step must be >= 1")
        require(
            not self.lora_r or self.reference == "fixed",
            f"with lora_r > 0 the reference is the base model with its adapters disabled, which "
            f"never moves: use reference: fixed (got {self.reference!r})",
        )
        require(self.max_new_tokens >= 1, "max_new_tokens must be >= 1")
        require(
            self.max_total_tokens > self.max_new_tokens,
            f"max_total_tokens ({self.max_total_tokens}) must exceed max_new_tokens ({self.max_new_tokens})",
        )
        require(self.temperature > 0, "temperature must be > 0 for PPO (it samples); try 1.0")
        require(0 < self.top_p <= 1 and self.top_k >= 0, "need 0 < top_p <= 1 and top_k >= 0")
        require(self.env_workers >= 1, "env_workers must be >= 1")
        require(self.ppo_epochs >= 1, "ppo_epochs must be >= 1")
        require(
            1 <= self.mini_batches <= self.episodes_per_step,
            f"mini_batches must be between 1 and episodes_per_step ({self.episodes_per_step})",
        )
        require(
            0 < self.clip_range < 1,
            f"clip_range must be in (0, 1), got {self.clip_range}; 0.2 is usual",
        )
        require(
            self.clip_range_value >= 0, "clip_range_value must be >= 0 (0 disables value clipping)"
        )
        require(
            self.vf_coef >= 0 and self.entropy_coef >= 0, "vf_coef and entropy_coef must be >= 0"
        )
        require(0 < self.gamma <= 1 and 0 <= self.lam <= 1, "need 0 < gamma <= 1 and 0 <= lam <= 1")
        require(self.target_kl >= 0, "target_kl must be >= 0 (0: no early stop)")
        require(self.value_head_std >= 0, "value_head_std must be >= 0")
        require(self.kl_coef >= 0, "kl_coef must be >= 0")
        require(self.kl_target >= 0, "kl_target must be >= 0 (0: fixed kl_coef)")
        require(
            not self.kl_target or self.kl_coef > 0,
            "kl_target adapts kl_coef, which must start > 0; set kl_coef (e.g. 0.05)",
        )
        require(self.kl_horizon >= 1, "kl_horizon must be >= 1")
        require(self.reference in REFERENCE_MODES, f"reference must be one of {REFERENCE_MODES}")
        require(
            self.reference == "fixed" or self.ref_update_every >= 1,
            f"reference: {self.reference} needs ref_update_every >= 1 (steps between updates)",
        )
        require(
            self.reference == "fixed" or self.kl_coef > 0,
            f"reference: {self.reference} has no effect with kl_coef = 0; set kl_coef > 0",
        )
        require(0 < self.ref_mix_alpha <= 1, "ref_mix_alpha must be in (0, 1]")
        require(
            self.eval_every >= 0 and self.eval_episodes >= 1,
            "need eval_every >= 0, eval_episodes >= 1",
        )
        require(
            self.scheduler is None or isinstance(self.scheduler, dict),
            "scheduler must be a mapping of SchedulerConfig fields (or null)",
        )
        sched = self.scheduler or {}
        require(
            not sched.get("question_rest") and sched.get("strategy") != "signal",
            "PPO has no groups: scheduler question_rest and strategy 'signal' need GRPO's groups "
            "(their rewards' spread); use another strategy and question_rest: 0",
        )
        problem = alert_rules_error(self.alerts)
        require(problem is None, str(problem))


# --- pieces (pure functions, unit-tested) --------------------------------------------------------


def gae(rewards: Any, values: Any, mask: Any, gamma: float, lam: float) -> tuple[Any, Any]:
    """Advantages and returns over the positions where ``mask`` is 1 (others are skipped).

    ``[batch, length]`` tensors; the value after the last action is 0 (episodes end).

    >>> import torch
    >>> adv, ret = gae(torch.tensor([[0.0, 0.0, 1.0]]), torch.zeros(1, 3), torch.tensor([[1, 0, 1]]), 1.0, 1.0)
    >>> adv.tolist(), ret.tolist()
    ([[1.0, 0.0, 1.0]], [[1.0, 0.0, 1.0]])
    """
    import torch

    mask = mask.to(values.dtype)
    advantages = torch.zeros_like(values)
    last_gae = torch.zeros_like(values[:, 0])
    next_value = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        here = delta + gamma * lam * last_gae
        advantages[:, t] = here * m
        last_gae = torch.where(m > 0, here, last_gae)
        next_value = torch.where(m > 0, values[:, t], next_value)
    return advantages, (advantages + values) * mask


def ppo_losses(
    logprobs: Any,
    old_logprobs: Any,
    advantages: Any,
    values: Any,
    old_values: Any,
    returns: Any,
    mask: Any,
    *,
    clip_range: float,
    clip_range_value: float,
) -> tuple[Any, Any, dict[str, Any]]:
    """Clipped policy loss and clipped value loss, token means over ``mask``.

    Returns ``(policy_loss, value_loss, stats)``; ``stats["approx_kl_rows"]`` is each row's
    summed approximate KL to the rollout policy (the per-family figures add them up).
    """
    import torch

    mask = mask.to(logprobs.dtype)
    n = mask.sum().clamp(min=1)
    ratio = torch.exp(logprobs - old_logprobs)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    policy_loss = (torch.max(pg1, pg2) * mask).sum() / n
    v_loss = (values - returns) ** 2
    if clip_range_value > 0:
        clipped = old_values + torch.clamp(values - old_values, -clip_range_value, clip_range_value)
        v_loss = torch.max(v_loss, (clipped - returns) ** 2)
    value_loss = 0.5 * (v_loss * mask).sum() / n
    with torch.no_grad():
        log_ratio = logprobs - old_logprobs
        approx_kl_rows = ((torch.exp(log_ratio) - 1 - log_ratio) * mask).sum(1)
        stats = {
            "clip": (((ratio - 1).abs() > clip_range).to(mask.dtype) * mask).sum(),
            "approx_kl": approx_kl_rows.sum(),
            "approx_kl_rows": approx_kl_rows,
            "tokens": mask.sum(),
        }
    return policy_loss, value_loss, stats


def whiten(values: Any, mask: Any, mean: float, std: float) -> Any:
    """``(values - mean) / std`` where ``mask`` is 1, 0 elsewhere."""
    return (values - mean) / (std + 1e-8) * mask.to(values.dtype)


class PolicyWithValue:
    """Wraps a causal LM and a value head in one ``torch.nn.Module`` (built lazily: torch is optional)."""

    def __new__(cls, lm: Any, std: float = 0.0) -> Any:
        import torch

        class _PolicyWithValue(torch.nn.Module):
            def __init__(self, lm: Any, std: float):
                super().__init__()
                self.lm = lm
                hidden = lm.config.get_text_config().hidden_size
                self.value_head = torch.nn.Linear(hidden, 1)
                if std > 0:
                    torch.nn.init.normal_(self.value_head.weight, std=std)
                else:
                    torch.nn.init.zeros_(self.value_head.weight)
                torch.nn.init.zeros_(self.value_head.bias)

            def forward(
                self, input_ids: Any, attention_mask: Any, temperature: float = 1.0
            ) -> tuple[Any, Any, Any]:
                from llmgym.agents.modeling import token_logprobs

                lp, ent, hidden = token_logprobs(
                    self.lm,
                    input_ids,
                    attention_mask,
                    temperature=temperature,
                    with_entropy=True,
                    output_hidden_states=True,
                )
                values = self.value_head(hidden[:, :-1, :].float())[..., 0]
                return lp, ent, values

        return _PolicyWithValue(lm, std)


# --- the trainer ---------------------------------------------------------------------------------


class PPOTrainer:
    """Trains ``cfg.model`` on ``cfg.env_id`` with PPO; ``train()`` runs ``cfg.total_steps`` steps."""

    def __init__(self, cfg: PPOConfig, accelerator: Any = None):
        import torch
        from accelerate.utils import set_seed

        from llmgym.agents.checkpoint import Generators, load_checkpoint, resume_point
        from llmgym.agents.context import context_budget
        from llmgym.agents.modeling import build_optimizer, disable_dropout, set_torch_threads
        from llmgym.agents.monitoring import TrainMonitor
        from llmgym.agents.precision import make_accelerator
        from llmgym.agents.reference import AdaptiveKLController, FixedKLController, ReferenceModel
        from llmgym.agents.rollout import make_env, task_families
        from llmgym.agents.runlog import MetricsLogger
        from llmgym.agents.scale import build_trainable_model, reference_for
        from llmgym.agents.scheduler import SchedulerConfig, TaskScheduler
        from llmgym.agents.tracking import open_trackers

        self.cfg = cfg
        self._torch = torch
        # --- processes and seeding ------------------------------------------------------------
        set_torch_threads(cfg.torch_threads)
        self.accelerator = accelerator or make_accelerator(cfg.mixed_precision)
        acc = self.accelerator
        self.rank, self.world = acc.process_index, acc.num_processes
        require(
            cfg.episodes_per_step % self.world == 0,
            f"episodes_per_step ({cfg.episodes_per_step}) must be divisible by the number of processes ({self.world})",
        )
        self.local_n = cfg.episodes_per_step // self.world
        set_seed(cfg.seed)
        self.gens = Generators(cfg.seed, self.rank, device=acc.device)

        # --- policy with value head, optimizer, reference ------------------------------------------
        # Loaded, dropout off, checkpointed, with LoRA adapters (then they and the value head train).
        lm, self.tokenizer = build_trainable_model(cfg, disable_dropout)
        self.max_total = context_budget(
            lm, self.tokenizer, cfg.max_total_tokens, cfg.max_new_tokens
        )
        model = PolicyWithValue(lm, cfg.value_head_std)
        value_head_file = Path(cfg.model) / "value_head.pt"
        if value_head_file.is_file():  # continuing from a PPO model keeps its critic
            model.value_head.load_state_dict(torch.load(value_head_file))
        model.train()
        optimizer, lr_sched = build_optimizer(model.parameters(), cfg, cfg.total_steps)
        self.model, self.optimizer, self.lr_scheduler = acc.prepare(model, optimizer, lr_sched)
        self.ref: Any = None  # ReferenceModel, or AdapterReference (the base) under LoRA
        if cfg.kl_coef > 0:
            self.ref = reference_for(cfg, self._policy().lm, self._policy().lm, ReferenceModel)
        self.kl_ctl = (
            AdaptiveKLController(cfg.kl_coef, target=cfg.kl_target, horizon=cfg.kl_horizon)
            if cfg.kl_target
            else FixedKLController(cfg.kl_coef)
        )

        # --- environments and task scheduler -----------------------------------------------------
        self.envs = [make_env(cfg.env_id, cfg.env_kwargs) for _ in range(self.local_n)]
        self.probe_env = make_env(cfg.env_id, cfg.env_kwargs)
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
            trackers=open_trackers(cfg, "ppo") if acc.is_main_process else [],
        )
        if ckpt is not None:
            state = load_checkpoint(acc, ckpt)
            self.step, self.episodes = int(state["step"]), int(state.get("episodes", 0))
            self.log.truncate_after(self.step)
        if acc.is_main_process:
            import yaml

            Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
            (Path(cfg.output_dir) / "config.yaml").write_text(
                yaml.safe_dump({"algo": "ppo", **cfg.to_dict()}, sort_keys=False)
            )

    def _policy(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    # --- one step: rollouts -> rewards and values -> GAE -> epochs of clipped updates ----------

    def train_step(self) -> dict[str, float]:
        """One PPO step; returns its metrics (identical on every process)."""
        cfg, acc, torch = self.cfg, self.accelerator, self._torch
        from accelerate.utils import gather_object

        from llmgym.agents.modeling import pad_right, token_logprobs
        from llmgym.agents.monitoring import FamilyTally, episodes_of, family_key
        from llmgym.agents.rollout import collect, draw_tasks, rollout_metrics

        t_start = time.perf_counter()
        timings: dict[str, float] = {}

        # 1. Rollouts: the same task list everywhere; this process plays its slice.
        t0 = time.perf_counter()
        tasks = draw_tasks(self.probe_env, cfg.episodes_per_step, self.gens.tasks, self.scheduler)
        mine = tasks[self.rank * self.local_n : (self.rank + 1) * self.local_n]
        trajs = collect(
            self.envs,
            self._policy().lm,
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
        )
        local = [t.summary() for t in trajs]
        summaries = gather_object(local) if self.world > 1 else local
        self.episodes += len(summaries)
        timings["rollout_s"] = time.perf_counter() - t0

        # 2. Score the sampled tokens: rollout logprobs and values, reference logprobs.
        t0 = time.perf_counter()
        pad = self.tokenizer.pad_token_id or 0
        ids, attn = pad_right([t.token_ids for t in trajs], pad)
        mask, _ = pad_right([t.loss_mask for t in trajs], 0)
        dev = acc.device
        ids, attn = ids.to(dev), attn.to(dev)
        mask = mask[:, 1:].float().to(dev)  # position i scores token i + 1
        n, width = ids.shape[0], ids.shape[1] - 1
        old_lp, old_values, ref_lp = (torch.zeros(n, width, device=dev) for _ in range(3))
        with torch.no_grad():
            for s in range(0, n, cfg.micro_batch_size):
                rows = slice(s, s + cfg.micro_batch_size)
                lp, _, v = self.model(ids[rows], attn[rows], temperature=cfg.temperature)
                old_lp[rows], old_values[rows] = lp, v
                if self.ref is not None:
                    with self.ref.active():  # under LoRA: the policy with adapters disabled
                        ref_lp[rows] = token_logprobs(
                            self.ref.model, ids[rows], attn[rows], temperature=cfg.temperature
                        )[0]

        # 3. Per-token rewards (KL penalty on every action, turn rewards on each turn's last token), GAE.
        kl_tokens = (old_lp - ref_lp) * mask if self.ref is not None else torch.zeros_like(old_lp)
        rewards = -self.kl_ctl.value * kl_tokens
        for i, t in enumerate(trajs):
            for end, r in zip(t.turn_ends, t.turn_rewards, strict=True):
                rewards[i, end - 1] += r
        advantages, returns = gae(rewards, old_values, mask, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            sums = torch.tensor(
                [
                    float((advantages * mask).sum()),
                    float((advantages**2 * mask).sum()),
                    float(mask.sum()),
                ],
                device=dev,
            )
            sums = acc.reduce(sums, reduction="sum") if self.world > 1 else sums
            mean = float(sums[0] / sums[2].clamp(min=1))
            var = float(sums[1] / sums[2].clamp(min=1)) - mean**2
            advantages = whiten(advantages, mask, mean, math.sqrt(max(var, 0.0)))
        episode_kl = kl_tokens.sum(1)
        kl_stats = torch.tensor([float(episode_kl.sum()), float(n), float(mask.sum())], device=dev)
        kl_stats = acc.reduce(kl_stats, reduction="sum") if self.world > 1 else kl_stats
        mean_episode_kl = float(kl_stats[0] / kl_stats[1].clamp(min=1))  # the controller's
        token_kl = float(kl_stats[0] / kl_stats[2].clamp(min=1))  # the logged ``kl``
        timings["score_s"] = time.perf_counter() - t0

        # 4. Epochs of clipped updates over mini-batches; stop early past target_kl.
        t0 = time.perf_counter()
        totals = {
            "pg": 0.0,
            "vf": 0.0,
            "clip": 0.0,
            "approx_kl": 0.0,
            "tokens": 0.0,
            "entropy": 0.0,
        }
        updates, epochs, early_stop = 0, 0, False
        # Each family's KL (the reference's, else the update's) and entropy: every epoch adds
        # each row once, so the sums over ``epochs`` passes divide back to one pass.
        tally = FamilyTally([family_key(t) for t in mine], [family_key(t) for t in tasks])
        tally.begin(n, dev)
        mb = math.ceil(n / cfg.mini_batches)
        for _epoch in range(cfg.ppo_epochs):
            perm = torch.randperm(n, generator=self.gens.sampling, device=dev).tolist()
            epoch_kl = torch.zeros(2, device=dev)
            for start in range(0, n, mb):
                rows_mb = perm[start : start + mb]
                micro = [
                    rows_mb[s : s + cfg.micro_batch_size]
                    for s in range(0, len(rows_mb), cfg.micro_batch_size)
                ]
                for k, rows in enumerate(micro):
                    with (
                        contextlib.nullcontext() if k == len(micro) - 1 else acc.no_sync(self.model)
                    ):
                        lp, ent, v = self.model(ids[rows], attn[rows], temperature=cfg.temperature)
                        m = mask[rows]
                        pg, vf, st = ppo_losses(
                            lp,
                            old_lp[rows],
                            advantages[rows],
                            v,
                            old_values[rows],
                            returns[rows],
                            m,
                            clip_range=cfg.clip_range,
                            clip_range_value=cfg.clip_range_value,
                        )
                        ent_mean = (ent * m).sum() / m.sum().clamp(min=1)
                        loss = (
                            (pg + cfg.vf_coef * vf - cfg.entropy_coef * ent_mean)
                            * len(rows)
                            / len(rows_mb)
                        )
                        acc.backward(loss)
                    totals["pg"] += float(pg.detach()) * float(st["tokens"])
                    totals["vf"] += float(vf.detach()) * float(st["tokens"])
                    totals["entropy"] += float(ent_mean.detach()) * float(st["tokens"])
                    for key in ("clip", "approx_kl", "tokens"):
                        totals[key] += float(st[key])
                    row_kl = episode_kl[rows] if self.ref is not None else st["approx_kl_rows"]
                    tally.add(rows, m, ent, row_kl)
                    epoch_kl += torch.tensor(
                        [float(st["approx_kl"]), float(st["tokens"])], device=dev
                    )
                if cfg.max_grad_norm > 0:
                    acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                updates += 1
            epochs += 1
            if cfg.target_kl:
                kl_now = acc.reduce(epoch_kl, reduction="sum") if self.world > 1 else epoch_kl
                if float(kl_now[0] / kl_now[1].clamp(min=1)) > cfg.target_kl:
                    early_stop = True
                    break
        self.lr_scheduler.step()
        timings["update_s"] = time.perf_counter() - t0

        # 5. Reference model, KL controller, scheduler.
        self.step += 1
        if self.ref is not None:
            self.ref.update(self._policy().lm, self.step)
        self.kl_ctl.update(mean_episode_kl, n_steps=cfg.episodes_per_step)
        if self.scheduler is not None:
            by_arm: dict[str, list[bool]] = {}
            for task, s in zip(tasks, summaries, strict=True):
                if task.arm is not None:
                    by_arm.setdefault(task.arm, []).append(s.is_success)
            for arm, successes in by_arm.items():
                self.scheduler.update(arm, successes, step=self.step)

        # 6. Metrics.
        vec = torch.tensor(
            [totals[k] for k in ("pg", "vf", "clip", "approx_kl", "tokens", "entropy")],
            device=dev,
        )
        vec = torch.cat([vec, tally.by_family()])  # per family: reduced with the totals
        vec = acc.reduce(vec, reduction="sum") if self.world > 1 else vec
        tally.finish(vec[6:], epochs, kl=True)
        tok = max(float(vec[4]), 1.0)
        elapsed = time.perf_counter() - t_start
        metrics = {
            **rollout_metrics(summaries),
            "losses/policy": float(vec[0]) / tok,
            "losses/value": float(vec[1]) / tok,
            "losses/kl_penalty": self.kl_ctl.value * mean_episode_kl,
            "clip_frac": float(vec[2]) / tok,
            "entropy": float(vec[5]) / tok,
            "kl": token_kl if self.ref is not None else float(vec[3]) / tok,
            "charts/approx_kl": float(vec[3]) / tok,
            "charts/trained_tokens": float(vec[4]) / max(epochs, 1),
            "charts/kl_coef": self.kl_ctl.value,
            "charts/updates": float(updates),
            "charts/early_stop": float(early_stop),
            "charts/learning_rate": self.lr_scheduler.get_last_lr()[0],
            "charts/episodes": float(self.episodes),
            "charts/processes": float(self.world),
            "charts/samples_per_s": len(summaries) / elapsed,
            "charts/tokens_per_s": sum(s.completion_tokens for s in summaries) / elapsed,
            "charts/value_mean": float((old_values * mask).sum() / mask.sum().clamp(min=1)),
            "time/step_s": elapsed,
            **{f"time/{k}": v for k, v in timings.items()},
        }
        if self.ref is not None:
            metrics["charts/episode_kl"] = mean_episode_kl
        if self.scheduler is not None:
            metrics.update(self.scheduler.metrics())
        watched = episodes_of(tasks, summaries, 1)
        metrics.update(self.monitor.observe(self.step, watched, metrics, tally.sums))
        return metrics

    # --- the loop ----------------------------------------------------------------------------------

    def train(self) -> dict[str, float]:
        """Run to ``total_steps`` (from a resumed step if any); returns the last step's metrics."""
        from tqdm.auto import tqdm

        from llmgym.agents.checkpoint import save_checkpoint

        cfg, acc = self.cfg, self.accelerator
        bar = tqdm(
            total=cfg.total_steps,
            initial=self.step,
            desc="ppo",
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

        cfg, acc = self.cfg, self.accelerator
        seeds = (
            list(seeds)
            if seeds is not None
            else list(range(cfg.eval_seed, cfg.eval_seed + cfg.eval_episodes))
        )
        result: list[Any] = [None]
        if acc.is_main_process:
            res = evaluate(
                self._policy().lm,
                self.tokenizer,
                cfg.env_id,
                cfg.env_kwargs,
                seeds=seeds,
                max_new_tokens=cfg.max_new_tokens,
                max_total_tokens=self.max_total,
            )
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
        """The language model and tokenizer with ``save_pretrained``, plus ``value_head.pt``; under
        LoRA the merged model, its adapters in ``<path>/adapter``."""
        import torch

        from llmgym.agents.peft_adapters import is_peft, save_for_evaluation

        acc = self.accelerator
        acc.wait_for_everyone()
        if acc.is_main_process:
            policy = self._policy()
            if is_peft(policy.lm):
                save_for_evaluation(policy.lm, self.tokenizer, path)
            else:
                policy.lm.save_pretrained(path)
                self.tokenizer.save_pretrained(path)
            torch.save(policy.value_head.state_dict(), Path(path) / "value_head.pt")
        acc.wait_for_everyone()

    def close(self) -> None:
        for env in [*self.envs, self.probe_env]:
            env.close()
        self.log.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmgym.agents.ppo --config FILE [--set key=value ...]`` (works under accelerate launch)."""
    import argparse

    parser = argparse.ArgumentParser(prog="llmgym.agents.ppo", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML config (PPOConfig fields)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--output-dir", help="overrides output_dir")
    parser.add_argument("--resume", action="store_true", help="resume from the latest checkpoint")
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    if args.output_dir:
        extra["output_dir"] = args.output_dir
    if args.resume:
        extra["resume"] = True
    cfg = PPOConfig.load(args.config, args.overrides, **extra)
    trainer = PPOTrainer(cfg)
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
