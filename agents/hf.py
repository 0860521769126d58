"""Local transformers models as policies: batched KV-cache sampling that keeps token ids and logprobs.

:func:`sample` is the generation engine the trainers share: left-padded batches, a KV cache,
temperature / top-k / top-p sampling from a seeded ``torch.Generator``, stop at any of the stop
ids, and per-token logprobs under the temperature-scaled distribution (what the trainers
recompute, so ratios start at exactly 1 up to float error). :class:`HFPolicy` wraps it behind the
:class:`~llmgym.agents.policies.Policy` interface (``load_policy("hf:<path>")``) with the
tokenizer's chat template and a tool-call parser for ``<tool_call>{json}</tool_call>`` blocks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmgym import error, toolcalls
from llmgym.agents.policies import Policy, Request, Response
from llmgym.core import clean_text

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass
class Samples:
    """Completions of a batch of prompts, in the prompts' order."""

    token_ids: list[list[int]]
    """Sampled ids of each completion, the stop token included when one was produced."""
    logprobs: list[list[float]]
    """Logprob of each sampled id under the temperature-scaled distribution."""
    finished: list[bool]
    """True when the completion ended with a stop id; False when cut at ``max_new_tokens``."""


def sample(
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
) -> Samples:
    """Sample a completion for every prompt (lists of token ids) with a KV cache.

    ``temperature == 0`` is greedy decoding (logprobs then come from the unscaled logits).
    """
    import torch

    if not prompts:
        return Samples([], [], [])
    if max_new_tokens < 1:
        raise error.Error(f"max_new_tokens must be >= 1, actual: {max_new_tokens}")
    device = next(model.parameters()).device
    lengths = [len(p) for p in prompts]
    if min(lengths) == 0:
        raise error.Error("Every prompt needs at least one token")
    width = max(lengths)
    batch = len(prompts)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((batch, width), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    out_ids = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    out_lp = torch.zeros((batch, max_new_tokens), device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    n_out = torch.zeros(batch, dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = model(
                input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True
            )
            cache = _cache_of(out)
            logits = out.logits[:, -1, :].float()
            last_pos = positions[:, -1]
            for t in range(max_new_tokens):
                token, logprob = _pick(logits, temperature, top_k, top_p, generator)
                token = torch.where(done, torch.full_like(token, pad_id), token)
                out_ids[:, t] = token
                out_lp[:, t] = torch.where(done, torch.zeros_like(logprob), logprob)
                n_out += (~done).long()
                done = done | torch.isin(token, stop)
                if bool(done.all()) or t == max_new_tokens - 1:
                    break
                mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], 1)
                last_pos = last_pos + 1
                out = model(
                    input_ids=token[:, None],
                    attention_mask=mask,
                    position_ids=last_pos[:, None],
                    cache=cache,
                    use_cache=True,
                )
                cache = _cache_of(out)
                logits = out.logits[:, -1, :].float()
    finally:
        model.train(was_training)
    ids, lps, counts = out_ids.tolist(), out_lp.tolist(), n_out.tolist()
    return Samples(
        token_ids=[row[:n] for row, n in zip(ids, counts, strict=True)],
        logprobs=[row[:n] for row, n in zip(lps, counts, strict=True)],
        finished=[bool(d) for d in done.tolist()],
    )


def _cache_of(output: Any) -> Any:
    cache = output.get("cache")  # transformers >= 5.2 names it ``cache``
    return cache if cache is not None else output.get("past_key_values")


def _pick(logits: Any, temperature: float, top_k: int, top_p: float, generator: Any) -> Any:
    import torch

    if temperature <= 0:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(-1, token[:, None])[:, 0]
    scaled = logits / temperature
    logprobs = torch.log_softmax(scaled, -1)
    filtered = scaled
    if top_k and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(filtered, descending=True)
        cumulative = torch.softmax(sorted_logits, -1).cumsum(-1)
        drop = cumulative - torch.softmax(sorted_logits, -1) > top_p  # keep the first token past p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        filtered = torch.full_like(filtered, float("-inf")).scatter(-1, order, sorted_logits)
    probs = torch.softmax(filtered, -1)
    token = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def parse_tool_calls(text: str) -> str | dict[str, Any]:
    """The action for a completion: a dict with ``tool_calls`` when it holds well-formed
    ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, else the text itself.
    The blocks are read by :func:`llmgym.toolcalls.parse_tool_calls`, as the envs read them.

    >>> parse_tool_calls('ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    {'content': 'ok', 'tool_calls': [{'id': 'call_0', 'type': 'function', 'function': {'name': 'add', 'arguments': {'a': 1}}}]}
    >>> parse_tool_calls("<tool_call>{not json}</tool_call>")
    '<tool_call>{not json}</tool_call>'
    """
    if "<tool_call>" not in text:
        return text
    parsed = toolcalls.parse_tool_calls(text, "hermes")  # the one parser every env uses
    if not parsed or any(c.error for c in parsed):
        return text
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for i, c in enumerate(parsed)
    ]
    return {"content": _TOOL_CALL.sub("", text).strip(), "tool_calls": calls}


def render_prompt(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[Any] = ()
) -> list[int]:
    """Token ids of a conversation followed by the assistant's generation prompt."""
    text = tokenizer.apply_chat_template(
        [_clean_message(m) for m in messages],
        tools=list(tools) or None,
        add_generation_prompt=True,
        tokenize=False,
    )
    return list(tokenizer(text, add_special_tokens=False).input_ids)


def _clean_message(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    if isinstance(out.get("content"), str):
        out["content"] = clean_text(out["content"])
    return out


def stop_ids_of(tokenizer: Any, model: Any = None) -> list[int]:
    """The ids that end an assistant turn: the tokenizer's EOS plus the model's configured EOS ids."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(i) for i in eos)
    if not ids:
        raise error.Error(
            "The tokenizer has no eos_token; set tokenizer.eos_token to the end-of-turn token"
        )
    return sorted(ids)


def context_length(model: Any, tokenizer: Any = None) -> int | None:
    """The longest sequence (prompt + completion) the model takes: its config's position
    limit (``max_position_embeddings``, ``n_positions``, ``n_ctx``, ``max_seq_len``), else the
    tokenizer's ``model_max_length`` when it is a real limit; None when neither says."""
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10**7:
        return value
    return None


def fit_prompt(ids: list[int], budget: int) -> list[int]:
    """A prompt cut to ``budget`` tokens by the documented rule: keep its first
    ``min(256, budget // 4)`` tokens (the system prompt and how the task begins) and fill the
    rest from its end (the question and the latest turns); the middle goes.

    >>> fit_prompt(list(range(10)), 8)
    [0, 1, 4, 5, 6, 7, 8, 9]
    """
    if len(ids) <= budget:
        return ids
    head = min(256, budget // 4)
    return ids[:head] + ids[len(ids) - (budget - head) :]


class HFPolicy(Policy):
    """A transformers causal LM with a chat template, sampling batched prompts with a KV cache.

    Settings: ``temperature`` (0 = greedy), ``top_k``, ``top_p``, ``max_new_tokens``,
    ``batch_size``, ``seed``, ``device``, ``parse_tools`` (turn ``<tool_call>`` blocks into
    ``tool_calls``; default True), ``context_overflow``: what happens to a prompt that does not
    fit the model's context (:func:`context_length`) with ``max_new_tokens`` after it, checked
    before anything is allocated: ``"truncate"`` (default; cut by :func:`fit_prompt`, and
    counted in ``truncated_prompts``) or ``"error"`` (that request fails with a clear error,
    the others run).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        spec: str = "hf:<in-memory>",
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        batch_size: int = 64,
        seed: int = 0,
        parse_tools: bool = True,
        context_overflow: str = "truncate",
    ):
        import torch

        if tokenizer.chat_template is None:
            raise error.Error(
                "The tokenizer has no chat template; set tokenizer.chat_template (see llmgym.agents.tiny)"
            )
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise error.Error("Expects temperature >= 0, 0 < top_p <= 1 and top_k >= 0")
        if max_new_tokens < 1 or batch_size < 1:
            raise error.Error("Expects max_new_tokens >= 1 and batch_size >= 1")
        if context_overflow not in ("truncate", "error"):
            raise error.Error(
                f"Expects context_overflow 'truncate' or 'error', actual: {context_overflow!r}"
            )
        self.context = context_length(model, tokenizer)
        self.context_overflow = context_overflow
        self.truncated_prompts = 0
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.temperature, self.top_k, self.top_p = float(temperature), int(top_k), float(top_p)
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
        self.parse_tools = parse_tools
        self.settings = {
            "temperature": temperature,
            "top_k": top_k,
            "top_p": top_p,
            "max_new_tokens": max_new_tokens,
            "batch_size": batch_size,
            "seed": seed,
            "parse_tools": parse_tools,
            "context_overflow": context_overflow,
        }
        self.generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
        self.stop_ids = stop_ids_of(tokenizer, model)

    @classmethod
    def from_spec(cls, path: str, *, device: str | None = None, **settings: Any) -> HFPolicy:
        """``hf:<path>``: a directory saved with ``save_pretrained`` or a hub id."""
        from llmgym.agents.tiny import load_model_and_tokenizer

        if not path:
            raise error.Error("Expects 'hf:<path or hub id>', e.g. 'hf:runs/demo/grpo/final'")
        model, tokenizer = load_model_and_tokenizer(path)
        if device is not None:
            model.to(device)
        return cls(model, tokenizer, spec=f"hf:{path}", **settings)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        prompts: list[list[int] | None] = []
        responses: list[Response | None] = [None] * len(requests)
        for i, req in enumerate(requests):
            try:
                prompts.append(self._fit(i, render_prompt(self.tokenizer, req.messages, req.tools),
                                         responses))  # fmt: skip
            except Exception as e:  # a malformed conversation fails alone
                prompts.append(None)
                responses[i] = Response(
                    "", error=f"cannot render the prompt: {type(e).__name__}: {e}"
                )
        order = sorted(
            (i for i, p in enumerate(prompts) if p is not None), key=lambda i: len(prompts[i] or ())
        )
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out = sample(
                self.model,
                [prompts[i] or [] for i in chunk],
                max_new_tokens=self.max_new_tokens,
                stop_ids=self.stop_ids,
                pad_id=self.tokenizer.pad_token_id,
                temperature=self.temperature,
                top_k=self.top_k,
                top_p=self.top_p,
                generator=self.generator,
            )
            for j, i in enumerate(chunk):
                ids = out.token_ids[j]
                body = ids[:-1] if out.finished[j] else ids
                text = self.tokenizer.decode(body, skip_special_tokens=False)
                action = parse_tool_calls(text) if self.parse_tools else text
                responses[i] = Response(
                    action,
                    prompt_tokens=len(prompts[i] or ()),
                    completion_tokens=len(ids),
                    token_ids=ids,
                    logprobs=out.logprobs[j],
                )
        return [r if r is not None else Response("", error="no response") for r in responses]

    def _fit(self, i: int, ids: list[int], responses: list[Response | None]) -> list[int] | None:
        """The prompt as it will be sampled, or None (and an error response) when it cannot
        fit the model's context with ``max_new_tokens`` after it."""
        if self.context is None or len(ids) + self.max_new_tokens <= self.context:
            return ids
        budget = self.context - self.max_new_tokens
        if self.context_overflow == "error" or budget < 16:
            responses[i] = Response(
                "",
                prompt_tokens=len(ids),
                error=f"the prompt has {len(ids)} tokens; with max_new_tokens="
                f"{self.max_new_tokens} it does not fit the model's context of {self.context} "
                "tokens (context_overflow='truncate' cuts it instead)",
            )
            return None
        self.truncated_prompts += 1
        return fit_prompt(ids, budget)

    def close(self) -> None:
        self.model = None
