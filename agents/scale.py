"""The trained model of a :class:`~llmgym.agents.config.ScaleConfig` run, and its KL reference.

:func:`build_trainable_model` loads ``cfg.model`` (in 4-bit for QLoRA), switches dropout off,
turns on gradient checkpointing and adds LoRA adapters, in the order that keeps each step valid
(the adapters' own dropout survives ``disable_dropout``). :func:`reference_for` picks the
reference: a frozen copy of the policy, or under LoRA the policy with its adapters disabled.
It does not build optimizers or touch Accelerate; the trainer does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def build_trainable_model(cfg: Any, disable_dropout: Callable[[Any], None]) -> tuple[Any, Any]:
    """``(model, tokenizer)`` ready for ``accelerator.prepare``: loaded, dropout off when
    ``cfg.disable_dropout``, checkpointed when ``cfg.gradient_checkpointing``, with LoRA
    adapters when ``cfg.lora_r > 0`` (only they then require gradients)."""
    from llmgym.agents.peft_adapters import apply_lora, load_4bit
    from llmgym.agents.precision import enable_gradient_checkpointing
    from llmgym.agents.tiny import load_model_and_tokenizer

    if cfg.load_in_4bit:
        model, tokenizer = load_4bit(cfg.model)
    else:
        model, tokenizer = load_model_and_tokenizer(cfg.model)
    if cfg.disable_dropout:
        disable_dropout(model)
    if cfg.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    if cfg.lora_r:
        model = apply_lora(model, cfg)
    return model, tokenizer


def reference_for(cfg: Any, prepared: Any, unwrapped: Any, reference_cls: type) -> Any:
    """The KL reference: under LoRA the adapter-disabled policy (no copy), else
    ``reference_cls`` (:class:`~llmgym.agents.reference.ReferenceModel`) over a copy."""
    if cfg.lora_r:
        from llmgym.agents.peft_adapters import AdapterReference

        return AdapterReference(prepared)
    return reference_cls(
        unwrapped, mode=cfg.reference, update_every=cfg.ref_update_every, alpha=cfg.ref_mix_alpha
    )
