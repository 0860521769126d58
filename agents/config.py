"""Trainer configs: the fields every trainer shares, YAML loading and ``key=value`` overrides.

Each trainer's config is a dataclass with a docstring under every field and a
``__post_init__`` that rejects bad values and bad combinations with a message that says how
to fix them (:class:`ConfigError`). A YAML file is a flat mapping of field names:

>>> from llmgym.agents.config import TrainConfig, parse_overrides
>>> parse_overrides(["learning_rate=3e-4", "env_kwargs={difficulty: 0.0}"])
{'learning_rate': 0.0003, 'env_kwargs': {'difficulty': 0.0}}
>>> TrainConfig(learning_rate=-1)
Traceback (most recent call last):
...
llmgym.agents.config.ConfigError: learning_rate must be > 0, got -1; try 1e-4 ... 1e-3 for tiny models
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from llmgym import error

C = TypeVar("C", bound="TrainConfig")


class ConfigError(error.Error, ValueError):
    """A trainer config value or combination is invalid; the message says how to fix it."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


@dataclass
class TrainConfig:
    """Fields shared by ``llmgym sft`` and ``llmgym train`` (GRPO and PPO)."""

    # --- model and data -------------------------------------------------------------------
    model: str = "tiny"
    """What to train: a directory saved with ``save_pretrained``, a hub id, or ``tiny`` /
    ``tiny:<preset>`` for a freshly initialised tiny model (``llmgym.agents.tiny``)."""
    env_id: str = "llm/Math-v0"
    """Environment to train on: any ``llm/*`` id, ``llm/Mixture-v0``, or a registered custom id."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make(env_id, ...)`` (e.g. ``{family: arith.add_small, difficulty: 0.0}``)."""
    output_dir: str = "runs/train"
    """Run directory: ``metrics.jsonl``, TensorBoard events, checkpoints and the final model."""
    seed: int = 0
    """Seeds task sampling, generation and initialisation (each rank adds its index for sampling)."""

    # --- optimisation -----------------------------------------------------------------------
    total_steps: int = 100
    """Number of optimizer-visible training steps (one batch of rollouts or data each)."""
    learning_rate: float = 1e-4
    """Peak AdamW learning rate."""
    lr_schedule: str = "constant"
    """``constant``, ``linear`` (decay to 0) or ``cosine`` (decay to 0), after warmup."""
    warmup_steps: int = 0
    """Linear warmup steps of the learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0 disables clipping)."""
    micro_batch_size: int = 64
    """Sequences per forward/backward pass on each process (gradients accumulate over micro-batches)."""
    disable_dropout: bool = True
    """Set every dropout probability to 0 (RL ratios and values are noisy with dropout)."""

    # --- logging and checkpoints -----------------------------------------------------------
    log_every: int = 1
    """Write metrics every N steps (``metrics.jsonl``, TensorBoard)."""
    tensorboard: bool = True
    """Also write TensorBoard event files under ``<output_dir>/tb``."""
    progress: bool = True
    """Show a progress bar on the main process."""
    save_every: int = 0
    """Save a resumable checkpoint every N steps (0: only at the end)."""
    keep_checkpoints: int = 2
    """How many of the most recent checkpoints to keep."""
    resume: bool = False
    """Resume from the latest checkpoint in ``output_dir`` (model, optimizer, LR schedule, RNG, scheduler)."""
    torch_threads: int = 0
    """``torch.set_num_threads`` per process (0: leave torch's default)."""
    check_weights_every: int = 0
    """Every N steps, compare a digest of the weights across processes and stop with an error if
    they differ (0: never): cheap insurance for multi-process runs."""

    def __post_init__(self) -> None:
        require(
            isinstance(self.model, str) and bool(self.model),
            "model must be a path, hub id or 'tiny'",
        )
        require(
            isinstance(self.env_id, str) and "/" in self.env_id,
            f"env_id must be a registered env id such as 'llm/Math-v0', got {self.env_id!r}",
        )
        require(
            isinstance(self.env_kwargs, Mapping),
            f"env_kwargs must be a mapping of gym.make keyword arguments, got {type(self.env_kwargs).__name__}",
        )
        self.env_kwargs = dict(self.env_kwargs)
        require(self.total_steps >= 1, f"total_steps must be >= 1, got {self.total_steps}")
        require(
            self.learning_rate > 0,
            f"learning_rate must be > 0, got {self.learning_rate}; try 1e-4 ... 1e-3 for tiny models",
        )
        require(
            self.lr_schedule in ("constant", "linear", "cosine"),
            f"lr_schedule must be 'constant', 'linear' or 'cosine', got {self.lr_schedule!r}",
        )
        require(
            0 <= self.warmup_steps < self.total_steps,
            f"warmup_steps must be in [0, total_steps={self.total_steps}), got {self.warmup_steps}",
        )
        self.adam_betas = tuple(self.adam_betas)  # type: ignore[assignment]
        require(
            len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas),
            f"adam_betas must be two numbers in [0, 1), got {self.adam_betas}",
        )
        require(self.weight_decay >= 0, "weight_decay must be >= 0")
        require(self.max_grad_norm >= 0, "max_grad_norm must be >= 0 (0 disables clipping)")
        require(self.micro_batch_size >= 1, "micro_batch_size must be >= 1")
        require(self.log_every >= 1, "log_every must be >= 1")
        require(self.save_every >= 0, "save_every must be >= 0 (0: save only at the end)")
        require(self.keep_checkpoints >= 1, "keep_checkpoints must be >= 1")
        require(self.torch_threads >= 0, "torch_threads must be >= 0 (0: torch's default)")
        require(self.check_weights_every >= 0, "check_weights_every must be >= 0 (0: never)")

    # --- loading ------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
        """A config from a mapping; unknown keys are rejected with the closest field names."""
        names = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=3)
                hint = (
                    f"; did you mean {' or '.join(close)}?"
                    if close
                    else f"; fields: {', '.join(names)}"
                )
                raise ConfigError(f"{cls.__name__} has no field {key!r}{hint}")
        hints = typing.get_type_hints(cls)
        values = {k: _coerce(k, hints.get(k), v) for k, v in data.items()}
        try:
            return cls(**values)
        except TypeError as e:
            raise ConfigError(f"{cls.__name__}: {e}") from None

    @classmethod
    def load(
        cls: type[C],
        path: str | Path | None = None,
        overrides: Sequence[str] = (),
        **kwargs: Any,
    ) -> C:
        """A config from a YAML file, then ``key=value`` overrides, then keyword arguments."""
        data: dict[str, Any] = dict(read_yaml(path)) if path is not None else {}
        data.pop("algo", None)  # which trainer a file is for; the CLI reads it
        data.update(parse_overrides(overrides))
        data.update(kwargs)
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRECISIONS = ("no", "bf16", "fp16")
TRACKERS = ("mlflow", "wandb")


@dataclass
class ScaleConfig(TrainConfig):
    """What a real model (0.5B-8B on GPUs) needs beside :class:`TrainConfig`: adapters, precision,
    activation checkpointing, the context rule and experiment trackers.

    Every default leaves training exactly as without these fields (full fine-tuning in fp32,
    metrics.jsonl and TensorBoard only).
    """

    # --- parameter-efficient training (peft) ------------------------------------------------
    lora_r: int = 0
    """LoRA rank; 0 trains every weight. With ``lora_r > 0`` only the adapters train and the KL
    reference is the same model with its adapters disabled (no second copy of the weights)."""
    lora_alpha: int = 16
    """LoRA scaling numerator (the update is scaled by ``lora_alpha / lora_r``)."""
    lora_dropout: float = 0.0
    """Dropout on the adapters' input (kept even with ``disable_dropout``, which covers the base)."""
    lora_target_modules: list[str] | str = "all-linear"
    """Modules that get adapters: a list of module names (``[q_proj, v_proj]``, ``[c_attn]``) or
    ``all-linear`` (every linear layer but the output head)."""
    load_in_4bit: bool = False
    """QLoRA: load the base weights in 4-bit NF4 (needs ``lora_r > 0``, CUDA and bitsandbytes)."""

    # --- precision and memory ------------------------------------------------------------------
    mixed_precision: str | None = None
    """``no``, ``bf16`` or ``fp16`` autocast; the weights and optimizer state stay fp32. None: what
    ``accelerate launch`` was configured with (fp32 when run directly). fp16 needs a GPU."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about a third more compute); the
    log-prob passes then run over whole sequences instead of sharing each prompt's KV cache."""

    # --- context ------------------------------------------------------------------------------------
    context_overflow: str = "truncate"
    """A first prompt that does not fit ``min(max_total_tokens, the model's context)`` with
    ``max_new_tokens`` after it: ``truncate`` (keep its head and tail, see
    ``llmgym.agents.hf.fit_prompt``; counted in ``charts/prompt_truncated_frac``) or ``error``
    (stop with a message before anything is sampled)."""

    # --- tracking ---------------------------------------------------------------------------------
    trackers: list[str] = field(default_factory=list)
    """Experiment trackers beside metrics.jsonl and TensorBoard: ``mlflow``, ``wandb``."""
    tracker_project: str = "llmgym"
    """MLflow experiment / W&B project name."""
    mlflow_tracking_uri: str | None = None
    """MLflow store; None: ``$MLFLOW_TRACKING_URI``, else a local file store in ``<output_dir>/mlruns``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.lora_r >= 0, f"lora_r must be >= 0 (0: full fine-tuning), got {self.lora_r}")
        require(self.lora_alpha > 0, f"lora_alpha must be > 0, got {self.lora_alpha}")
        require(
            0 <= self.lora_dropout < 1, f"lora_dropout must be in [0, 1), got {self.lora_dropout}"
        )
        targets = self.lora_target_modules
        require(
            (isinstance(targets, str) and bool(targets))
            or (
                isinstance(targets, list)
                and bool(targets)
                and all(isinstance(t, str) and t for t in targets)
            ),
            "lora_target_modules must be 'all-linear' or a non-empty list of module names",
        )
        require(
            not self.load_in_4bit or self.lora_r > 0,
            "load_in_4bit (QLoRA) trains adapters on a frozen 4-bit base: set lora_r (e.g. 16)",
        )
        require(
            self.mixed_precision is None or self.mixed_precision in PRECISIONS,
            f"mixed_precision must be one of {PRECISIONS} (or null), got {self.mixed_precision!r}",
        )
        require(
            self.context_overflow in ("truncate", "error"),
            f"context_overflow must be 'truncate' or 'error', got {self.context_overflow!r}",
        )
        require(
            isinstance(self.trackers, list) and all(t in TRACKERS for t in self.trackers),
            f"trackers must be a list drawn from {TRACKERS}, got {self.trackers!r}",
        )


def alert_rules_error(rules: Any) -> str | None:
    """What is wrong with an ``alerts:`` list of a trainer config (None: nothing)."""
    from llmgym.evaluation.monitor import parse_rules

    try:
        parse_rules(rules)
    except error.Error as e:
        return f"alerts: {e}"
    return None


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """YAML reads ``1e-4`` as a string: turn strings into the numbers a field expects."""
    if not isinstance(value, str) or hint is None:
        return value
    options = typing.get_args(hint) or (hint,)
    for kind in (int, float):
        if kind in options and str not in options:
            try:
                return kind(value)
            except ValueError:
                raise ConfigError(f"{name} expects a {kind.__name__}, got {value!r}") from None
    return value


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"No such config file: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expects a mapping of config fields at the top level")
    return data


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` with each value read as YAML (numbers, booleans, lists, mappings)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Overrides are key=value, got {item!r} (e.g. learning_rate=3e-4)")
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"Override {item!r}: the value is not valid YAML: {e}") from None
        if isinstance(parsed, str):
            try:
                parsed = float(parsed)  # YAML 1.1 leaves 3e-4 a string
            except ValueError:
                pass
        out[key.strip()] = parsed
    return out
