"""Policies: map a batch of conversations to a batch of assistant messages.

They live in the core (``llmgym.policies``; ``llmgym.agents.policies`` re-exports them) so that
evaluation and the integrations use them without importing the agents. Model policies are
plugins named by string, as Gymnasium's entry points are: ``hf:`` and ``openai:`` load
``llmgym.agents.hf`` and ``llmgym.agents.openai_policy`` only when asked for.

Specs: ``"oracle"`` (each env's ``oracle_action()``), ``"hf:<path>"`` (transformers),
``"openai:<model>@<url>"`` (any OpenAI-compatible chat-completions server), a
``"module:function"`` path, or a Python callable ``fn(messages, tools) -> str | dict``.

>>> policy = load_policy(lambda messages, tools: "42")
>>> policy.generate([Request(messages=[{"role": "user", "content": "6*7?"}])])[0].action
'42'
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmgym import error
from llmgym.registry import import_callable

Message = dict[str, Any]


@dataclass
class Request:
    """One conversation to continue: its messages, the tools on offer, and (for the oracle) the env."""

    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    env: Any = None


@dataclass
class Response:
    """One assistant turn: the action for ``env.step`` and what it cost.

    ``token_ids`` and ``logprobs`` are the sampled completion's tokens when the policy
    produced them (local models); ``error`` is set when the policy failed on this request
    (the action is then an empty message, recorded as a failure, never a crash).
    """

    action: str | dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    error: str | None = None


class Policy(ABC):
    """Maps a batch of conversations to a batch of assistant messages."""

    spec: str = ""
    settings: dict[str, Any]

    @abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Response]:
        """One response per request, in order."""

    async def agenerate(self, requests: Sequence[Request]) -> list[Response]:
        """Async version; by default runs :meth:`generate` in a worker thread."""
        return await asyncio.to_thread(self.generate, requests)

    def close(self) -> None:
        """Release servers, models and connections."""
        return None


class CallablePolicy(Policy):
    """A Python callable ``fn(messages, tools) -> str | dict`` applied to each request.

    An exception or a non-message return becomes a ``Response`` with ``error`` set.
    """

    def __init__(self, fn: Callable[..., Any], spec: str | None = None):
        self.fn = fn
        self.spec = spec or str(getattr(fn, "__qualname__", None) or repr(fn))
        self.settings = {}

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            try:
                action = self.fn(req.messages, req.tools)
            except Exception as e:
                out.append(Response("", error=f"{type(e).__name__}: {e}"))
                continue
            if not isinstance(action, (str, dict)):
                out.append(
                    Response("", error=f"policy returned {type(action).__name__}, not str or dict")
                )
            else:
                out.append(Response(action))
        return out


class OraclePolicy(Policy):
    """Plays each env's ``oracle_action()``: validates environments and evaluation pipelines."""

    spec = "oracle"

    def __init__(self) -> None:
        self.settings = {}

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            if req.env is None:
                raise error.Error("The oracle policy needs Request.env (the live environment)")
            out.append(Response(req.env.unwrapped.oracle_action()))
        return out


_FACTORIES: dict[str, str] = {
    "hf": "llmgym.agents.hf:HFPolicy.from_spec",
    "openai": "llmgym.agents.openai_policy:OpenAIPolicy.from_spec",
}


def load_policy(spec: str | Callable[..., Any] | Policy, **settings: Any) -> Policy:
    """A policy from a spec string, a callable or a Policy (returned as is).

    ``settings`` are sampling settings (temperature, max_new_tokens, ...) for model policies.
    """
    if isinstance(spec, Policy):
        return spec
    if callable(spec):
        return CallablePolicy(spec)
    if not isinstance(spec, str) or not spec:
        raise error.Error(f"Expects a policy spec string or a callable, actual: {spec!r}")
    if spec == "oracle":
        return OraclePolicy()
    kind, sep, rest = spec.partition(":")
    if sep and kind in _FACTORIES:
        factory = import_callable(_FACTORIES[kind])
        policy: Policy = factory(rest, **settings)
        return policy
    if sep:
        try:
            fn = import_callable(spec)
        except error.Error as e:
            raise error.Error(f"Cannot load policy {spec!r}: {e}") from None
        return CallablePolicy(fn, spec=spec)
    raise error.Error(
        f"Unknown policy spec {spec!r}; expected 'oracle', 'hf:<path>', 'openai:<model>@<url>' "
        "or 'module:function'"
    )
