"""LoRA and QLoRA adapters through ``peft``: wrap a causal LM, use its base as the KL reference,
save a merged copy for evaluation.

What it does: :func:`apply_lora` turns a loaded model into a ``peft`` model whose only trainable
weights are the adapters (target modules, rank, alpha, dropout from the config);
:class:`AdapterReference` is the KL reference of a LoRA run, the same model with its adapters
switched off (the frozen base, no second copy of the weights); :func:`save_for_evaluation`
writes the adapters under ``adapter/`` and the merged full model beside them, so
``hf:<path>`` and ``llmgym eval`` load it like any checkpoint. :func:`load_4bit` loads the base
of a QLoRA run in 4-bit NF4.

What it is not: QLoRA needs bitsandbytes and a CUDA GPU; on any other machine it stops with an
error saying so (the CPU tests cover LoRA in fp32 and bf16, not 4-bit). Merging a 4-bit base
dequantizes it, so a QLoRA run's merged copy is saved in the compute dtype.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llmgym import error

PEFT_EXTRA = "pip install 'llmgym[peft]'  (or: pip install peft==0.21.2)"


def _peft() -> Any:
    try:
        import peft
    except ImportError:
        raise error.DependencyNotInstalled(
            f"LoRA (lora_r > 0) needs the peft library: {PEFT_EXTRA}"
        ) from None
    return peft


def apply_lora(model: Any, cfg: Any) -> Any:
    """``model`` wrapped with LoRA adapters from ``cfg`` (``lora_r``, ``lora_alpha``,
    ``lora_dropout``, ``lora_target_modules``); only the adapters require gradients."""
    peft = _peft()
    targets = cfg.lora_target_modules
    lora = peft.LoraConfig(
        r=int(cfg.lora_r),
        lora_alpha=int(cfg.lora_alpha),
        lora_dropout=float(cfg.lora_dropout),
        target_modules=targets if isinstance(targets, str) else list(targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    if getattr(model, "is_loaded_in_4bit", False):
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    try:
        return peft.get_peft_model(model, lora)
    except ValueError as e:  # peft names the modules it could not find
        raise error.Error(
            f"Cannot add LoRA adapters: {e}. Set lora_target_modules to module names of this "
            "model (print(model) lists them) or to 'all-linear'."
        ) from None


def is_peft(model: Any) -> bool:
    """Whether ``model`` (or the model an Accelerate/DDP wrapper holds) carries peft adapters."""
    while hasattr(model, "module"):
        model = model.module
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def trainable_names(model: Any) -> list[str]:
    """Names of the parameters that require gradients."""
    return [name for name, p in model.named_parameters() if p.requires_grad]


class AdapterReference:
    """The KL reference of a LoRA run: the policy with its adapters disabled (the base weights).

    It holds no weights of its own. ``with ref.active(): ref.model(...)`` computes the base model's
    outputs; outside that block ``ref.model`` is the policy. The reference never moves (mode
    ``fixed``), so :meth:`update` does nothing and there is nothing to checkpoint.
    """

    mode = "fixed"

    def __init__(self, policy: Any):
        if not is_peft(policy):
            raise error.Error("AdapterReference needs a peft model (apply_lora first)")
        self.model = policy

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        inner = self.model
        while hasattr(inner, "module"):
            inner = inner.module
        with inner.disable_adapter():
            yield

    def update(self, policy: Any, step: int) -> bool:
        return False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def save_for_evaluation(model: Any, tokenizer: Any, path: str | Path) -> Path:
    """Write the adapters to ``path/adapter`` and the merged full model (with the tokenizer) to
    ``path``; the training model keeps its adapters (a copy is merged)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path / "adapter")
    merged = copy.deepcopy(model).merge_and_unload()
    merged.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_4bit(spec: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` with the base weights in 4-bit NF4 (bf16 compute) for QLoRA."""
    import torch

    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise error.DependencyNotInstalled(
            "load_in_4bit (QLoRA) needs bitsandbytes and a CUDA GPU: pip install bitsandbytes"
        ) from None
    if not torch.cuda.is_available():
        raise error.Error("load_in_4bit (QLoRA) needs a CUDA GPU; use LoRA (lora_r > 0) on CPU")
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    quant = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_use_double_quant=True,
    )
    tokenizer = AutoTokenizer.from_pretrained(spec)
    model = AutoModelForCausalLM.from_pretrained(
        spec,
        quantization_config=quant,
        dtype=torch.bfloat16,
        device_map={"": torch.cuda.current_device()},  # this process's GPU (Accelerate set it)
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
