"""GRPO's config: sampling, objective, KL and reference, tasks and evaluation, with the
real-model-scale options of :class:`~llmgym.agents.config.ScaleConfig` (LoRA, precision,
checkpointing, context, trackers).

It is only the dataclass and its checks; the trainer is :mod:`llmgym.agents.grpo`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmgym.agents.config import ScaleConfig, alert_rules_error, require
from llmgym.agents.reference import REFERENCE_MODES

LOSS_TYPES = ("dapo", "grpo", "bnpo", "dr_grpo")
SCALE_REWARDS = ("group", "batch", "none")


def check_engine(cfg: GRPOConfig) -> None:
    """Reject generation-engine settings that cannot work, saying how to fix them."""
    from urllib.parse import urlparse

    from llmgym.agents.engines import ENGINES

    require(
        cfg.generation_engine in ENGINES,
        f"generation_engine must be one of {ENGINES}, got {cfg.generation_engine!r}",
    )
    url = cfg.vllm_server_url
    require(
        url is None or cfg.generation_engine == "vllm",
        "vllm_server_url is used by generation_engine: vllm only; set it, or drop the URL",
    )
    if url is not None:
        parts = urlparse(url) if isinstance(url, str) else None
        try:
            port = parts.port if parts is not None else None
        except ValueError:
            port = None
        require(
            parts is not None
            and parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and port is not None
            and parts.path in ("", "/")
            and not (parts.query or parts.fragment or parts.username),
            f"vllm_server_url must be http(s)://host:port (a trl vllm-serve server), got {url!r}",
        )
    require(
        0 < cfg.vllm_gpu_memory_utilization < 1,
        f"vllm_gpu_memory_utilization must be in (0, 1), got {cfg.vllm_gpu_memory_utilization}",
    )
    require(
        cfg.generation_engine == "hf" or not cfg.load_in_4bit,
        "generation_engine: vllm cannot take merged weights into a 4-bit base; use "
        "load_in_4bit: false (LoRA on a bf16 base) or generation_engine: hf",
    )


# --- config ------------------------------------------------------------------------------------


@dataclass
class GRPOConfig(ScaleConfig):
    """GRPO hyper-parameters (and everything :class:`ScaleConfig` and :class:`TrainConfig` have)."""

    output_dir: str = "runs/grpo"
    """Run directory: ``metrics.jsonl``, TensorBoard events, checkpoints and ``final/``."""

    # --- sampling -----------------------------------------------------------------------------
    prompts_per_step: int = 16
    """Distinct tasks per step, over all processes."""
    group_size: int = 8
    """Episodes per task (G); the advantage of an episode is relative to its group."""
    max_new_tokens: int = 64
    """Longest completion per turn."""
    max_total_tokens: int = 1024
    """Longest episode (prompt, every turn and env message); an episode that would exceed it ends truncated."""
    temperature: float = 1.0
    """Sampling temperature (logprobs are computed at the same temperature)."""
    top_k: int = 0
    """Sample among the k most likely tokens (0: all)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1: all)."""
    env_workers: int = 1
    """Threads stepping environments (helps envs that wait on sandboxes)."""
    generation_engine: str = "hf"
    """What samples the rollouts: ``hf`` (the policy's own forward) or ``vllm`` (needs a GPU and
    ``pip install 'llmgym[vllm]'``); the vLLM engine gets the policy's weights after every update
    (merged weights under LoRA). See ``llmgym.agents.engines``."""
    vllm_server_url: str | None = None
    """With ``generation_engine: vllm``: the ``http://host:port`` of a ``trl vllm-serve`` server;
    None runs vLLM inside each training process (colocated)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Colocated vLLM: the fraction of GPU memory it takes (weights and KV cache); training gets the rest."""

    # --- objective ------------------------------------------------------------------------------
    loss_type: str = "dapo"
    """Loss aggregation: ``dapo``, ``grpo``, ``bnpo`` or ``dr_grpo`` (see the module docstring)."""
    scale_rewards: str = "group"
    """Divide centred rewards by the ``group`` std, the ``batch`` std, or ``none``."""
    epsilon_low: float = 0.2
    """Lower clip: ratios below ``1 - epsilon_low`` stop pushing probability down."""
    epsilon_high: float = 0.28
    """Upper clip (clip-higher): ratios above ``1 + epsilon_high`` stop pushing probability up."""
    num_iterations: int = 1
    """Passes over each batch of rollouts (mu); > 1 reuses samples with importance ratios."""
    mini_batches: int = 1
    """Optimizer steps per pass (the batch is split into this many mini-batches)."""
    mask_truncated_completions: bool = False
    """Exclude episodes with a completion cut at ``max_new_tokens`` from the loss."""
    dynamic_sampling: bool = False
    """Drop groups whose rewards are all equal (they have zero advantage)."""
    dynamic_sampling_rounds: int = 0
    """Extra rollout rounds to refill the batch with informative groups (with ``dynamic_sampling``)."""

    # --- KL and reference ------------------------------------------------------------------------
    beta: float = 0.0
    """KL coefficient (k3 estimator, in the loss). 0: no reference model is loaded."""
    reference: str = "fixed"
    """Reference model when ``beta > 0``: ``fixed``, ``refresh`` (copy the policy every
    ``ref_update_every`` steps) or ``mix`` (move ``ref_mix_alpha`` toward it every ``ref_update_every`` steps)."""
    ref_update_every: int = 0
    """Steps between reference updates for ``refresh`` and ``mix``."""
    ref_mix_alpha: float = 0.1
    """Fraction of the way the ``mix`` reference moves toward the policy at each update."""
    kl_target: float = 0.0
    """If > 0, adapt ``beta`` so the measured KL tracks this target (adaptive KL controller)."""
    kl_horizon: int = 10_000
    """Samples over which the adaptive controller corrects a KL error by at most 20 %."""
    measure_update_kl: bool = True
    """Without a reference, log ``kl`` as the KL between the policies before and after each update
    (one extra no-grad forward pass)."""

    # --- tasks, evaluation ------------------------------------------------------------------------
    scheduler: dict[str, Any] | None = None
    """Task scheduler settings (``llmgym.agents.scheduler.SchedulerConfig`` fields), or None to
    draw tasks from the env's own distribution. ``{}`` uses the defaults."""
    eval_every: int = 0
    """Evaluate (greedy) on held-out seeds every N steps (0: never during training)."""
    eval_episodes: int = 64
    """Held-out episodes per evaluation."""
    eval_seed: int = 1_000_000
    """First held-out seed (training tasks are drawn from a different stream)."""

    tree_search: str | None = None
    """Tree-GRPO (``llmgym.agents.tree_grpo``): search each step's tasks with this spec
    (``beam:2x4``, ``mcts:16``) and train on sibling groups (samples that share a prefix, their
    values normalised within the group) instead of ``group_size`` independent episodes. One
    process only (the searches of several would differ in size), and the HF engine."""

    # --- monitoring ----------------------------------------------------------------------------
    alerts: list[dict[str, Any]] = field(default_factory=list)
    """Alert rules (``llmgym.evaluation.monitor.AlertRule`` fields), e.g. ``[{rule: forgetting,
    points: 10, action: checkpoint}, {rule: kl_above, bound: 0.5, action: stop}]``: each fired
    alert is logged, appended to ``alerts.jsonl`` and marked on ``llmgym report RUN --watch``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.prompts_per_step >= 1, "prompts_per_step must be >= 1")
        require(
            self.group_size >= 2,
            f"group_size must be >= 2 (advantages are relative to the group), got {self.group_size}",
        )
        require(self.max_new_tokens >= 1, "max_new_tokens must be >= 1")
        require(
            self.max_total_tokens > self.max_new_tokens,
            f"max_total_tokens ({self.max_total_tokens}) must exceed max_new_tokens ({self.max_new_tokens}) "
            "to leave room for the prompt",
        )
        require(self.temperature > 0, "temperature must be > 0 for GRPO (it samples); try 1.0")
        require(0 < self.top_p <= 1 and self.top_k >= 0, "need 0 < top_p <= 1 and top_k >= 0")
        require(self.env_workers >= 1, "env_workers must be >= 1")
        check_engine(self)
        if self.tree_search is not None:
            from llmgym import error
            from llmgym.search import parse_spec

            try:
                parse_spec(self.tree_search)
            except error.Error as e:
                require(False, f"tree_search: {e}")
            require(not self.dynamic_sampling, "tree_search and dynamic_sampling do not combine")
            require(
                self.generation_engine == "hf",
                "tree_search samples with the policy itself: use generation_engine: hf",
            )
        require(
            self.loss_type in LOSS_TYPES,
            f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}",
        )
        require(
            self.scale_rewards in SCALE_REWARDS,
            f"scale_rewards must be one of {SCALE_REWARDS}, got {self.scale_rewards!r}",
        )
        require(
            0 <= self.epsilon_low < 1 and self.epsilon_high >= 0,
            f"need 0 <= epsilon_low < 1 and epsilon_high >= 0, got {self.epsilon_low}, {self.epsilon_high}",
        )
        require(self.num_iterations >= 1, "num_iterations must be >= 1")
        require(
            1 <= self.mini_batches <= self.prompts_per_step * self.group_size,
            "mini_batches must be between 1 and prompts_per_step * group_size",
        )
        require(self.dynamic_sampling_rounds >= 0, "dynamic_sampling_rounds must be >= 0")
        require(
            not self.dynamic_sampling_rounds or self.dynamic_sampling,
            "dynamic_sampling_rounds needs dynamic_sampling: true",
        )
        require(self.beta >= 0, f"beta must be >= 0, got {self.beta}")
        require(
            self.reference in REFERENCE_MODES,
            f"reference must be one of {REFERENCE_MODES}, got {self.reference!r}",
        )
        require(
            self.reference == "fixed" or self.ref_update_every >= 1,
            f"reference: {self.reference} needs ref_update_every >= 1 (steps between updates)",
        )
        require(
            self.reference == "fixed" or self.beta > 0,
            f"reference: {self.reference} has no effect with beta = 0; set beta > 0 (e.g. 0.04)",
        )
        require(0 < self.ref_mix_alpha <= 1, "ref_mix_alpha must be in (0, 1]")
        require(
            not self.lora_r or self.reference == "fixed",
            f"with lora_r > 0 the reference is the base model with its adapters disabled, which "
            f"never moves: use reference: fixed (got {self.reference!r})",
        )
        require(self.kl_target >= 0, "kl_target must be >= 0 (0: fixed beta)")
        require(
            not self.kl_target or self.beta > 0,
            "kl_target adapts beta, which must start > 0; set beta (e.g. 0.04)",
        )
        require(self.kl_horizon >= 1, "kl_horizon must be >= 1")
        require(
            self.eval_every >= 0 and self.eval_episodes >= 1,
            "need eval_every >= 0, eval_episodes >= 1",
        )
        require(
            self.scheduler is None or isinstance(self.scheduler, dict),
            "scheduler must be a mapping of SchedulerConfig fields (or null)",
        )
        problem = alert_rules_error(self.alerts)
        require(problem is None, str(problem))
