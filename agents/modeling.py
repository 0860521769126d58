"""Model plumbing the trainers share: padding, per-token logprobs and entropy, optimizer and LR schedule.

>>> import torch
>>> ids, mask = pad_right([[5, 6, 7], [8]], pad_id=0)
>>> ids.tolist(), mask.tolist()
([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def pad_right(
    seqs: Sequence[Sequence[float]], pad_id: float, *, dtype: Any = None
) -> tuple[Any, Any]:
    """``(values, mask)`` tensors of right-padded sequences."""
    import torch

    width = max((len(s) for s in seqs), default=0)
    dtype = dtype or torch.long
    values = torch.full((len(seqs), width), pad_id, dtype=dtype)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            values[i, : len(s)] = torch.tensor(list(s), dtype=dtype)
            mask[i, : len(s)] = 1
    return values, mask


def token_logprobs(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    output_hidden_states: bool = False,
) -> tuple[Any, Any, Any]:
    """Logprob of each token given the ones before it: shape ``[batch, length - 1]``.

    Logits are divided by ``temperature`` (what the sampler drew from). Returns
    ``(logprobs, entropy or None, last hidden states or None)``.
    """
    import torch

    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        use_cache=False,
        output_hidden_states=output_hidden_states,
    )
    logits = out.logits[:, :-1, :].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logsumexp = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, input_ids[:, 1:, None])[..., 0]
    logprobs = picked - logsumexp
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)
            entropy = logsumexp - (probs * logits).sum(-1)
    hidden = out.hidden_states[-1] if output_hidden_states else None
    return logprobs, entropy, hidden


def disable_dropout(model: Any) -> None:
    """Set every ``torch.nn.Dropout`` probability (and config dropout fields) to 0."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    config = getattr(model, "config", None)
    for name in (
        "attention_dropout",
        "hidden_dropout",
        "resid_pdrop",
        "embd_pdrop",
        "attn_pdrop",
        "dropout",
    ):
        if config is not None and isinstance(getattr(config, name, None), float):
            setattr(config, name, 0.0)


def build_optimizer(params: Any, cfg: Any, total_steps: int) -> tuple[Any, Any]:
    """AdamW and a warmup + constant/linear/cosine LR schedule from a ``TrainConfig``."""
    import torch

    optimizer = torch.optim.AdamW(
        [p for p in params if p.requires_grad],
        lr=cfg.learning_rate,
        betas=tuple(cfg.adam_betas),
        weight_decay=cfg.weight_decay,
    )

    def factor(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.lr_schedule == "constant":
            return 1.0
        progress = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
        progress = min(max(progress, 0.0), 1.0)
        if cfg.lr_schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def weights_digest(model: Any) -> str:
    """A SHA-256 of every parameter's bytes: equal digests mean bit-identical weights."""
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def check_in_sync(accelerator: Any, model: Any, step: int) -> str:
    """Raise unless every process holds the same weights; returns this process's digest."""
    from accelerate.utils import gather_object

    from llmgym import error

    digest = weights_digest(accelerator.unwrap_model(model))
    digests = gather_object([digest]) if accelerator.num_processes > 1 else [digest]
    if len(set(digests)) > 1:
        raise error.Error(
            f"After step {step} the processes hold different weights ({[d[:8] for d in digests]}): "
            "gradients were not synchronised. Launch with `accelerate launch` and do not call the "
            "model outside the trainer between steps."
        )
    return digest


def set_torch_threads(n: int) -> None:
    """``torch.set_num_threads(n)`` when ``n > 0``."""
    if n > 0:
        import torch

        torch.set_num_threads(n)
