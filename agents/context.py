"""Context limits for training rollouts: the longest episode a model takes, and chunked reading
for long documents that do not fit it.

The rule, applied before anything is sampled:

1. an episode's budget is ``min(max_total_tokens, the model's context length)``
   (:func:`llmgym.agents.hf.context_length`: the config's position limit, else the tokenizer's);
2. a first prompt longer than ``budget - max_new_tokens - 1`` (room for a whole turn and the
   end token that closes a completion cut at ``max_new_tokens``) is cut by
   :func:`llmgym.agents.hf.fit_prompt` (its head and its tail kept) with
   ``context_overflow: truncate``, or stops the run with a clear error with ``error``
   (:func:`llmgym.agents.rollout.collect` applies it);
3. every later turn stops at the budget: an episode whose next turn could not fit ends
   truncated (``max_new_tokens`` is never cut short mid-turn);
4. ``llm/LongDoc-v0`` with neither ``mode`` nor ``subtask_mode`` given, whose longest documents
   cannot fit the budget, reads them chunk by chunk (``subtask_mode: sequential``), with chunks
   sized so that a probe episode's observation, plus ``max_new_tokens`` of notes, fits
   (:func:`reading_kwargs`).

It does not shorten documents or pick a model; a config that leaves no room for a prompt is
rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmgym.agents.config import ConfigError

MIN_PROMPT_TOKENS = 16
"""Room a budget must leave for a prompt after ``max_new_tokens``."""
PROBE_EPISODES = 4
"""Episodes whose first chunk :func:`reading_kwargs` measures."""


def context_budget(model: Any, tokenizer: Any, max_total_tokens: int, max_new_tokens: int) -> int:
    """The longest episode: ``max_total_tokens`` capped at the model's context length."""
    from llmgym.agents.hf import context_length

    limit = context_length(model, tokenizer)
    budget = min(max_total_tokens, limit) if limit else max_total_tokens
    if budget - max_new_tokens < MIN_PROMPT_TOKENS:
        raise ConfigError(
            f"The model's context ({limit} tokens) leaves {budget - max_new_tokens} tokens for a "
            f"prompt after max_new_tokens={max_new_tokens}; lower max_new_tokens"
        )
    return budget


def reading_kwargs(
    env_id: str,
    env_kwargs: Mapping[str, Any],
    tokenizer: Any,
    budget: int,
    max_new_tokens: int,
) -> dict[str, Any]:
    """Extra ``gym.make`` arguments that make a long-document env read in chunks when its longest
    document does not fit ``budget`` (rule 4 of the module docstring); ``{}`` otherwise."""
    if env_id.split("/")[-1].split("-v")[0] != "LongDoc":
        return {}
    if "mode" in env_kwargs or "subtask_mode" in env_kwargs:
        return {}  # the user chose how to read
    from llmgym.envs.longdoc import LongDocEnv

    longest = int(_default(LongDocEnv, "length_range")[1])
    if "length_range" in env_kwargs:
        longest = int(env_kwargs["length_range"][1])
    if longest + max_new_tokens <= budget:
        return {}
    return {
        "subtask_mode": "sequential",
        "chunk_tokens": _fitting_chunk(
            env_kwargs, tokenizer, budget - max_new_tokens - 1, max_new_tokens
        ),
        "tokenizer": tokenizer,  # documents measured in the model's tokens
    }


def _fitting_chunk(env_kwargs: Mapping[str, Any], tokenizer: Any, room: int, notes: int) -> int:
    """A ``chunk_tokens`` (the env's estimate units) whose rendered first observations, with
    ``notes`` tokens of the reader's notes added, fit ``room`` model tokens on probe episodes:
    the env counts chunks with a character estimate, so the size is measured, not assumed. An
    episode whose later chunk is larger still ends truncated when it would not fit (rule 3)."""
    from llmgym.agents.hf import render_prompt
    from llmgym.agents.rollout import make_env

    chunk = max(MIN_PROMPT_TOKENS, room // 2)
    for _ in range(8):
        kwargs = {**env_kwargs, "subtask_mode": "sequential", "chunk_tokens": chunk}
        env = make_env("llm/LongDoc-v0", {**kwargs, "tokenizer": tokenizer})
        try:  # chunks end at section breaks, so their sizes vary: take the largest of a few
            used = notes + max(
                len(render_prompt(tokenizer, env.reset(seed=seed)[1]["messages"]))
                for seed in range(PROBE_EPISODES)
            )
        finally:
            env.close()
        if used <= room:
            return chunk
        if chunk == MIN_PROMPT_TOKENS:
            break
        chunk = max(MIN_PROMPT_TOKENS, int(chunk * room / used * 0.8))
    raise ConfigError(
        f"Even {chunk}-token chunks of llm/LongDoc-v0 do not fit {room} tokens with "
        f"{notes} tokens of notes; raise max_total_tokens or lower max_new_tokens"
    )


def _default(cls: type, name: str) -> Any:
    import inspect

    return inspect.signature(cls).parameters[name].default
