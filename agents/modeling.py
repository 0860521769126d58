"""Model plumbing the trainers share: sampling, padding, per-token logprobs and entropy, optimizer and LR schedule.

Two shortcuts keep GRPO's step cheap on the tiny CPU models without changing what is computed.
A group's G episodes start from one prompt: :func:`sample_completions` prefills each distinct
prompt once and copies its KV cache to the group's rows, and :func:`completion_logprobs` runs the
training forward over each distinct prompt once and over the completions with that (differentiable)
cache, so the prompt's gradient is the sum over the group, as in a full forward of every row. Only
positions that enter the loss get a log-softmax (:func:`selective_logprobs`).

>>> import torch
>>> ids, mask = pad_right([[5, 6, 7], [8]], pad_id=0)
>>> ids.tolist(), mask.tolist()
([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

# --- sampling --------------------------------------------------------------------------------


def sample_completions(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    pad_id: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: Any = None,
) -> Any:
    """A completion for every prompt (lists of token ids): :func:`llmgym.agents.hf.sample`'s
    contract and sampling distribution, with the work a GRPO batch does not need left out.

    - each distinct prompt is prefilled once (a group's G rows share it) and its KV cache copied
      to its rows; only the last prompt position gets logits;
    - rows that produced a stop id leave the batch (and the cache), so later steps run on the
      rows still generating;
    - a token is drawn by inverting the CDF with one uniform per row (exactly the categorical
      distribution ``torch.multinomial`` draws from, at a fraction of its cost on CPU).

    ``temperature == 0`` is greedy decoding. Returns :class:`llmgym.agents.hf.Samples`.
    """
    import torch

    from llmgym import error
    from llmgym.agents.hf import Samples

    if not prompts:
        return Samples([], [], [])
    if max_new_tokens < 1:
        raise error.Error(f"max_new_tokens must be >= 1, actual: {max_new_tokens}")
    if min(len(p) for p in prompts) == 0:
        raise error.Error("Every prompt needs at least one token")
    device = next(model.parameters()).device
    index: dict[tuple[int, ...], int] = {}
    rows = torch.tensor(
        [index.setdefault(tuple(p), len(index)) for p in prompts], dtype=torch.long, device=device
    )
    distinct = list(index)
    width, batch = max(len(p) for p in distinct), len(prompts)
    input_ids = torch.full((len(distinct), width), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((len(distinct), width), dtype=torch.long)
    for i, p in enumerate(distinct):  # left-padded: every prompt ends at the last column
        input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        prompt_mask[i, width - len(p) :] = 1
    input_ids, prompt_mask = input_ids.to(device), prompt_mask.to(device)
    positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    out_ids = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    out_lp = torch.zeros((batch, max_new_tokens), device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    counts = torch.full((batch,), max_new_tokens, dtype=torch.long, device=device)
    params = _forward_parameters(model)
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = model(
                input_ids=input_ids,
                attention_mask=prompt_mask,
                position_ids=positions,
                use_cache=True,
                **extra,
            )
            cache = _cache_of(out)
            logits = out.logits[:, -1, :].float()
            if len(distinct) < batch:
                cache.batch_select_indices(rows)
                logits = logits[rows]
            mask = torch.ones((batch, width + max_new_tokens), dtype=torch.long, device=device)
            mask[:, :width] = prompt_mask[rows]
            last_pos = positions[rows, -1]
            live = torch.arange(batch, device=device)  # the output row of each batch row
            for t in range(max_new_tokens):
                token, logprob = _draw(logits, temperature, top_k, top_p, generator)
                out_ids[live, t] = token
                out_lp[live, t] = logprob
                stopped = torch.isin(token, stop)
                if t == max_new_tokens - 1:
                    finished[live] = stopped
                    break
                if bool(stopped.any()):
                    finished[live[stopped]] = True
                    counts[live[stopped]] = t + 1
                    going = (~stopped).nonzero()[:, 0]
                    if not len(going):
                        break
                    live, token, last_pos, mask = (
                        live[going],
                        token[going],
                        last_pos[going],
                        mask[going],
                    )
                    cache.batch_select_indices(going)
                last_pos = last_pos + 1
                out = model(
                    input_ids=token[:, None],
                    attention_mask=mask[:, : width + t + 1],
                    position_ids=last_pos[:, None],
                    use_cache=True,
                    **{_cache_argument(params): cache},
                )
                cache = _cache_of(out)
                logits = out.logits[:, -1, :].float()
    finally:
        model.train(was_training)
    ids, lps, sizes = out_ids.tolist(), out_lp.tolist(), counts.tolist()
    return Samples(
        token_ids=[row[:n] for row, n in zip(ids, sizes, strict=True)],
        logprobs=[row[:n] for row, n in zip(lps, sizes, strict=True)],
        finished=finished.tolist(),
    )


def _draw(
    logits: Any, temperature: float, top_k: int, top_p: float, generator: Any
) -> tuple[Any, Any]:
    """A token per row and its logprob under the temperature-scaled distribution."""
    import torch

    if temperature <= 0:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(-1, token[:, None])[:, 0]
    scaled = logits / temperature if temperature != 1.0 else logits
    logprobs = torch.log_softmax(scaled, -1)
    if (top_k and top_k < scaled.shape[-1]) or top_p < 1.0:
        filtered = scaled
        if top_k and top_k < scaled.shape[-1]:
            kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
            filtered = filtered.masked_fill(filtered < kth, float("-inf"))
        if top_p < 1.0:
            sorted_logits, order = torch.sort(filtered, descending=True)
            sorted_probs = torch.softmax(sorted_logits, -1)
            drop = sorted_probs.cumsum(-1) - sorted_probs > top_p  # keep the first token past p
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            filtered = torch.full_like(filtered, float("-inf")).scatter(-1, order, sorted_logits)
        probs = torch.softmax(filtered, -1)
    else:
        probs = logprobs.exp()
    token = categorical(probs, generator)
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def categorical(probs: Any, generator: Any = None) -> Any:
    """One index per row of ``probs`` ``[rows, n]`` (non-negative, any scale), drawn with
    probability proportional to its entry: the CDF (in float64) inverted at one uniform per row.
    An index with zero probability is never drawn.

    >>> import torch
    >>> categorical(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 5.0]])).tolist()
    [1, 2]
    """
    import torch

    from llmgym import error

    cdf = probs.double().cumsum(-1)
    if not bool((cdf[:, -1] > 0).all()):  # NaN too: what torch.multinomial refuses
        raise error.Error("Cannot sample: a row of probabilities sums to 0 or is not finite")
    u = torch.rand(
        (probs.shape[0], 1), generator=generator, dtype=torch.float64, device=probs.device
    )
    index = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]
    # u < 1, so the point lies below the total; rounding aside, it never lands past the last
    # index with mass: clamp to that index.
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).int().argmax(-1)
    return torch.minimum(index, last)


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
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        use_cache=False,
        output_hidden_states=output_hidden_states,
    )
    logprobs, entropy = selective_logprobs(
        out.logits[:, :-1, :], input_ids[:, 1:], temperature=temperature, with_entropy=with_entropy
    )
    hidden = out.hidden_states[-1] if output_hidden_states else None
    return logprobs, entropy, hidden


def selective_logprobs(
    logits: Any, targets: Any, *, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[Any, Any]:
    """``log_softmax(logits / temperature)`` at ``targets`` (and the entropy, without gradient).

    One logsumexp and one gather over ``[..., vocab]``: the full log-softmax is never built.

    >>> import torch
    >>> logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    >>> lp, ent = selective_logprobs(logits, torch.tensor([0, 2]), with_entropy=True)
    >>> torch.allclose(lp, torch.log_softmax(logits, -1)[[0, 1], [0, 2]])
    True
    >>> round(float(ent[1]), 4)  # uniform over 3 tokens: log 3
    1.0986
    """
    import torch

    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logsumexp = torch.logsumexp(logits, dim=-1)
    logprobs = logits.gather(-1, targets[..., None])[..., 0] - logsumexp
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.exp(logits - logsumexp[..., None])
            entropy = logsumexp - (probs * logits).sum(-1)
    return logprobs, entropy


# --- GRPO batches: each distinct prompt once, then the completions ------------------------------


@dataclass
class CompletionBatch:
    """Episodes split into a prompt (shared within a GRPO group) and what follows it.

    Built by :meth:`build` from whole token sequences; read by :func:`completion_logprobs`.
    Completion-side tensors are ``[episodes, width]``, right-padded; position ``j`` is token
    ``prompt_length + j`` of the episode (its sampled tokens and, in multi-turn episodes, the
    environment's turns between them).
    """

    prompt_ids: Any
    """``[distinct prompts, longest prompt]``, right-padded."""
    prompt_mask: Any
    """1 on the prompt tokens of ``prompt_ids``."""
    prompt_of: Any
    """``[episodes]``: the row of ``prompt_ids`` each episode starts with."""
    ids: Any
    """``[episodes, width]``: the tokens after the prompt."""
    mask: Any
    """1 on the real tokens of ``ids``."""
    loss_mask: Any
    """1 where ``ids`` holds a token the policy sampled (trained on), else 0."""

    @classmethod
    def build(
        cls,
        token_ids: Sequence[Sequence[int]],
        prompt_lengths: Sequence[int],
        loss_masks: Sequence[Sequence[int]],
        pad_id: int,
    ) -> CompletionBatch:
        """Split every episode at its prompt length; equal prompts are stored once."""
        import torch

        index: dict[tuple[int, ...], int] = {}
        prompt_of = [
            index.setdefault(tuple(ids[:n]), len(index))
            for ids, n in zip(token_ids, prompt_lengths, strict=True)
        ]
        prompt_ids, prompt_mask = pad_right(list(index), pad_id)
        rest, rest_mask = pad_right(
            [ids[n:] for ids, n in zip(token_ids, prompt_lengths, strict=True)], pad_id
        )
        loss, _ = pad_right([m[n:] for m, n in zip(loss_masks, prompt_lengths, strict=True)], 0)
        return cls(
            prompt_ids,
            prompt_mask,
            torch.tensor(prompt_of, dtype=torch.long),
            rest,
            rest_mask,
            loss,
        )

    def select(self, rows: Any) -> CompletionBatch:
        """The episodes ``rows`` (a list or index tensor), with only the prompts they use."""
        import torch

        rows = torch.as_tensor(rows, dtype=torch.long, device=self.ids.device)
        used, prompt_of = torch.unique(self.prompt_of[rows], return_inverse=True)
        width = int(self.mask[rows].sum(1).max())  # drop the padding these rows do not need
        return CompletionBatch(
            self.prompt_ids[used],
            self.prompt_mask[used],
            prompt_of,
            self.ids[rows, :width],
            self.mask[rows, :width],
            self.loss_mask[rows, :width],
        )

    def to(self, device: Any) -> CompletionBatch:
        return CompletionBatch(*(getattr(self, f.name).to(device) for f in fields(self)))


BUCKET_COST = 48
"""What one more pass costs, in padded token positions: :func:`length_buckets` splits a batch
only where padding saves more than this (measured on the tiny CPU models, where a pass's fixed
cost is that of about 40-60 token positions)."""


def completion_logprobs(
    model: Any,
    batch: CompletionBatch,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    bucket_cost: int = BUCKET_COST,
    one_pass: bool = False,
) -> tuple[Any, Any]:
    """Logprob (and entropy) of every ``batch.ids`` token where ``batch.loss_mask`` is 1, 0 elsewhere.

    Equal to :func:`token_logprobs` on the whole sequences, computed as one pass over the distinct
    prompts (their KV cache and the logits of their last token), then passes over the episodes'
    tokens after their prompts, attending to their prompt's cache: the episodes go in runs of
    similar length (:func:`length_buckets`), each padded only to its own longest. With gradients
    on, the cache stays in the graph, so each prompt's gradient gathers every episode of its
    group. Shapes ``[episodes, width]``.

    ``one_pass`` computes the same from one forward over whole sequences
    (:func:`full_sequence_logprobs`): a sharded model needs the same number of forward passes on
    every process, and the number of runs depends on each process's episodes.
    """
    import torch

    from llmgym.agents.precision import is_checkpointing

    if one_pass or is_checkpointing(model):  # a checkpointed block drops the KV cache
        return full_sequence_logprobs(
            model, batch, temperature=temperature, with_entropy=with_entropy
        )
    pids, pmask, of = batch.prompt_ids, batch.prompt_mask, batch.prompt_of
    lengths = pmask.sum(1)
    if _has_dropout(model):  # a shared prompt pass would share its dropout masks: one per episode
        pids, pmask, lengths, of = (
            pids[of],
            pmask[of],
            lengths[of],
            torch.arange(len(of), device=of.device),
        )
    params = _forward_parameters(model)
    # Logits are needed at each prompt's last token only: keep those from the shortest one's on.
    keep_from = int(lengths.min()) - 1 if "logits_to_keep" in params else 0
    extra = {"logits_to_keep": pids.shape[1] - keep_from} if keep_from else {}
    out = model(
        input_ids=pids,
        attention_mask=pmask,
        position_ids=torch.arange(pids.shape[1], device=pids.device).expand_as(pids),
        use_cache=True,
        **extra,
    )
    cache = _cache_of(out)
    last = out.logits[
        torch.arange(len(pids), device=pids.device), lengths - 1 - keep_from
    ]  # after each prompt
    sizes = batch.mask.sum(1).tolist()
    buckets = length_buckets(sizes, bucket_cost)
    width = batch.ids.shape[1]
    lps: list[Any] = []
    ents: list[Any] = []
    for rows in buckets:
        rows_t = torch.tensor(rows, dtype=torch.long, device=of.device)
        w = max(sizes[r] for r in rows)
        ids, loss_mask = batch.ids[rows_t, :w], batch.loss_mask[rows_t, :w]
        prompt = of[rows_t]
        out = model(
            input_ids=ids,
            attention_mask=torch.cat([pmask[prompt], batch.mask[rows_t, :w]], 1),
            position_ids=lengths[prompt][:, None] + torch.arange(w, device=ids.device),
            use_cache=True,
            # Each episode's copy of its prompt's cache: a differentiable index (the gradients of
            # a group's episodes add up in the prompt pass).
            **{_cache_argument(params): _cache_rows(cache, prompt, alone=len(buckets) == 1)},
        )
        # The first token after the prompt is predicted by the prompt's last logits, token j by j - 1.
        first_lp, first_ent = selective_logprobs(
            last[prompt], ids[:, 0], temperature=temperature, with_entropy=with_entropy
        )
        keep = loss_mask[:, 1:].bool()
        rest_lp, rest_ent = selective_logprobs(
            out.logits[:, :-1][keep], ids[:, 1:][keep], temperature=temperature,
            with_entropy=with_entropy,
        )  # fmt: skip
        for acc, first, rest in ((lps, first_lp, rest_lp), (ents, first_ent, rest_ent)):
            if rest is not None:
                scattered = torch.zeros(keep.shape, dtype=rest.dtype, device=rest.device)
                full = torch.cat(
                    [(first * loss_mask[:, 0])[:, None], scattered.masked_scatter(keep, rest)], 1
                )
                acc.append(torch.nn.functional.pad(full, (0, width - w)))

    def assemble(parts: list[Any]) -> Any:
        if not parts:
            return None
        if len(parts) == 1 and buckets[0] == list(range(len(batch.ids))):
            return parts[0]
        order = torch.tensor([r for rows in buckets for r in rows], device=of.device)
        return torch.cat(parts, 0)[torch.argsort(order)]

    return assemble(lps), assemble(ents)


def full_sequence_logprobs(
    model: Any, batch: CompletionBatch, *, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[Any, Any]:
    """What :func:`completion_logprobs` returns, from one pass over each episode's whole sequence
    (its prompt left-padded, then its tokens) without a KV cache: the path for gradient
    checkpointing, which recomputes blocks and cannot carry a cache between passes."""
    import torch

    of, mask, ids = batch.prompt_of, batch.mask, batch.ids
    lengths = batch.prompt_mask.sum(1)[of]
    width_p, width = batch.prompt_ids.shape[1], ids.shape[1]
    # Left-pad each prompt so every one ends at column width_p - 1.
    shift = (width_p - lengths)[:, None]
    cols = (torch.arange(width_p, device=ids.device)[None, :] - shift).clamp(min=0)
    prompt_mask = (torch.arange(width_p, device=ids.device)[None, :] >= shift).long()
    prompt = batch.prompt_ids[of].gather(1, cols) * prompt_mask
    input_ids = torch.cat([prompt, ids], 1)
    attention = torch.cat([prompt_mask, mask], 1)
    positions = (attention.cumsum(1) - 1).clamp(min=0)
    extra = {"logits_to_keep": width + 1} if "logits_to_keep" in _forward_parameters(model) else {}
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        use_cache=False,
        **extra,
    )
    logits = out.logits[:, -(width + 1) : -1]  # position p predicts token p + 1
    lp, ent = selective_logprobs(logits, ids, temperature=temperature, with_entropy=with_entropy)
    keep = batch.loss_mask.to(lp.dtype)
    return lp * keep, ent * keep if ent is not None else None


def length_buckets(lengths: Sequence[int], cost: int) -> list[list[int]]:
    """Row indices in runs of similar length, chosen so that padding every run to its own longest
    row, plus ``cost`` per run, adds up to the least (an exact search over the sorted lengths).

    >>> length_buckets([1, 9, 2, 10], cost=4)
    [[0, 2], [1, 3]]
    >>> length_buckets([1, 9, 2, 10], cost=100)
    [[0, 2, 1, 3]]
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    sorted_lengths = [lengths[i] for i in order]
    n = len(order)
    ends = [i for i in range(n) if i == n - 1 or sorted_lengths[i + 1] != sorted_lengths[i]]
    best: dict[int, tuple[int, int]] = {-1: (0, -1)}  # last row of a run -> (total, previous end)
    for end in ends:
        best[end] = min(
            (best[start][0] + (end - start) * sorted_lengths[end] + cost, start) for start in best
        )
    runs, end = [], n - 1
    while end >= 0:
        start = best[end][1]
        runs.append(order[start + 1 : end + 1])
        end = start
    return runs[::-1]


def _cache_rows(cache: Any, rows: Any, *, alone: bool) -> Any:
    """The KV cache with row i holding row ``rows[i]``: the cache itself when ``alone`` (its only
    use), else a shallow copy (the layers' tensors are indexed, never changed in place)."""
    import copy

    if not alone:
        cache = copy.copy(cache)
        cache.layers = [copy.copy(layer) for layer in cache.layers]
    cache.batch_select_indices(rows)
    return cache


def _cache_of(output: Any) -> Any:
    cache = output.get("cache")  # transformers >= 5.2 names it ``cache``
    return cache if cache is not None else output.get("past_key_values")


def _forward_parameters(model: Any) -> set[str]:
    import inspect

    while hasattr(model, "module"):  # DistributedDataParallel and other wrappers
        model = model.module
    if hasattr(model, "get_base_model"):  # peft: its forward takes **kwargs for the base's
        model = model.get_base_model()
    return set(inspect.signature(model.forward).parameters)


def _cache_argument(forward_parameters: set[str]) -> str:
    """The keyword a causal LM takes its KV cache by (transformers >= 5.2: ``cache``)."""
    return "cache" if "cache" in forward_parameters else "past_key_values"


def _has_dropout(model: Any) -> bool:
    """Whether a forward pass in this mode draws dropout masks (modules or attention dropout)."""
    import torch

    def active(m: Any) -> bool:
        if isinstance(m, torch.nn.Dropout):
            return m.p > 0
        p = getattr(m, "attention_dropout", 0.0)
        return isinstance(p, float) and p > 0

    return bool(model.training) and any(active(m) for m in model.modules())


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
