"""Precision and activation memory for the trainers: the Accelerator with the config's autocast,
and gradient checkpointing.

``mixed_precision: bf16`` (or ``fp16``) runs forward passes under autocast while the weights, the
gradients and AdamW's state stay fp32 (the model is loaded in fp32; Accelerate only wraps its
``forward``), so updates are not lost to bf16 rounding. This module does not cast weights
(no pure-bf16 training) and does not choose the precision for you: the config or
``accelerate launch`` does.
"""

from __future__ import annotations

import os
from typing import Any

from llmgym.agents.config import ConfigError


def make_accelerator(mixed_precision: str | None) -> Any:
    """An ``Accelerator`` with ``mixed_precision`` (None: whatever ``accelerate launch`` set)."""
    from accelerate import Accelerator

    kwargs = {} if mixed_precision is None else {"mixed_precision": mixed_precision}
    try:
        accelerator = Accelerator(**kwargs)
    except ValueError as e:  # the process already made an Accelerator with another precision
        raise ConfigError(
            f"mixed_precision={mixed_precision!r}: {e}. One process has one Accelerate state: run "
            "each precision in its own process (or set mixed_precision in the accelerate config)."
        ) from None
    launched = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if launched > accelerator.num_processes:  # each process would train alone, unsynchronised
        raise ConfigError(
            f"{launched} processes were launched but Accelerate joined none of them "
            f"(it sees {accelerator.num_processes}): on a machine without GPUs set "
            "ACCELERATE_USE_CPU=true (see configs/accelerate/cpu_2proc.yaml)"
        )
    return accelerator


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute each transformer block's activations in the backward pass (non-reentrant, so it
    works with frozen base weights under LoRA and with inputs that need no gradient)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"{type(model).__name__} does not support gradient checkpointing; "
            "set gradient_checkpointing: false"
        )
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def is_checkpointing(model: Any) -> bool:
    """Whether a training forward of ``model`` (or the model a wrapper holds) recomputes
    activations, which also drops any KV cache handed to it."""
    while hasattr(model, "module"):
        model = model.module
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    name = (
        "is_activation_checkpointing"
        if hasattr(type(model), "is_activation_checkpointing")
        else "is_gradient_checkpointing"
    )
    return bool(getattr(model, name, False)) and bool(model.training)
