"""Value estimates of unfinished search nodes from a reward model.

``reward_model=`` in the searches takes a callable ``fn(messages) -> float``, a
``(model, tokenizer)`` pair of a transformers sequence classifier, or the path (or hub id) of one.
The score of a conversation is the classifier's single logit (``num_labels == 1``) or the
probability of its last label (``num_labels >= 2``: "good" taken as the last class).

What it is not: a verifier. Env rewards stay the rewards; a reward model only estimates what a
node that has not ended will still earn, in place of a rollout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from llmgym import error

ValueFn = Callable[[Sequence[dict[str, Any]]], float]

MAX_RM_TOKENS = 2048
"""The longest conversation (in tokens, from its end) a sequence classifier is shown."""


def value_function(reward_model: Any) -> ValueFn:
    """A function scoring a conversation, from any of the accepted ``reward_model`` forms."""
    if isinstance(reward_model, (tuple, list)) and len(reward_model) == 2:
        return _classifier(*reward_model)
    if isinstance(reward_model, str):
        return _classifier(*_load(reward_model))
    if callable(reward_model):
        return _checked(reward_model)
    raise error.Error(
        "Expects reward_model to be a callable fn(messages) -> float, a (model, tokenizer) pair "
        f"or the path of a transformers sequence classifier; actual type: {type(reward_model).__name__}"
    )


def _checked(fn: Callable[..., Any]) -> ValueFn:
    def score(messages: Sequence[dict[str, Any]]) -> float:
        value = float(fn(messages))
        if not math.isfinite(value):
            raise error.Error(f"The reward model gave a non-finite score {value!r}")
        return value

    return score


def _load(path: str) -> tuple[Any, Any]:
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError:
        raise error.DependencyNotInstalled(
            "A reward model needs transformers and torch: pip install 'llmgym[agents]'"
        ) from None
    model = AutoModelForSequenceClassification.from_pretrained(path)
    model.eval()
    return model, AutoTokenizer.from_pretrained(path)


def render(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> str:
    """The conversation as the classifier reads it: its chat template, else role-tagged lines."""
    if getattr(tokenizer, "chat_template", None):
        text: str = tokenizer.apply_chat_template(list(messages), tokenize=False)
        return text
    return "\n".join(
        f"{m.get('role')}: {m.get('content') or ''}"
        + ("".join(json.dumps(c, sort_keys=True) for c in m.get("tool_calls") or []))
        for m in messages
    )


def _classifier(model: Any, tokenizer: Any) -> ValueFn:
    import torch

    device = next(model.parameters()).device

    def score(messages: Sequence[dict[str, Any]]) -> float:
        ids = tokenizer(render(tokenizer, messages), add_special_tokens=True)["input_ids"]
        ids = ids[-MAX_RM_TOKENS:]  # the end holds the latest answer, which is being judged
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids], device=device)).logits[0].float()
        if logits.numel() == 1:
            return float(logits[0])
        return float(torch.softmax(logits, dim=-1)[-1])

    return score
