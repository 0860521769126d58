"""Which env kwargs a client of ``llmgym serve`` may pass to ``POST /v1/sessions``.

By default a client may pass the keyword arguments that the env's constructor accepts (walked
up the class's ``__init__`` chain while it forwards ``**kwargs``), as plain JSON values, less
the ones that reach beyond the env into the host (:data:`HOST_KWARGS`: data paths, sandbox
backends, models loaded by name, verifier code, format strings, regexes, nested envs). The
operator allows more per env id (``--allow-kwarg ENV:NAME``, ``ServeConfig.allow_kwargs``).

Every number in a kwarg's value (nested ones included) is bounded in size, since numbers size
work and memory (a document's tokens, a timeout, a cache, turns): by :data:`KWARG_MAX` for the
built-in envs' sizing kwargs, by :data:`DEFAULT_KWARG_MAX` for every other one (weights,
tolerances, the next env's counts). The operator raises a bound per env id
(``--kwarg-max ENV:NAME=VALUE``, ``ServeConfig.kwarg_max``). Sessions, memory and steps/s are
limited by :mod:`llmgym.serve.limits`, not here.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium as gym

from llmgym.serve.sessions import ServeError


class KwargRefused(ServeError):
    """An env kwarg this server does not take from clients."""

    status = 400


HOST_KWARGS: dict[str, str] = {
    "tasks": "a dataset path or name reads host files or the network",
    "answers": "a data path reads host files",
    "sandbox": "a sandbox backend other than the server's reaches Docker or a Ray cluster",
    "reward_model": "a model loaded by name reads host files or the network",
    "judge": "a judge endpoint makes the server post prompts and responses to any URL",
    "reward_tokenizer": "a tokenizer loaded by name reads host files or the network",
    "tokenizer": "a tokenizer loaded by name reads host files or the network",
    "verifier": "a 'module:function' verifier imports and runs host code",
    "verifier_options": "it passes arguments to host code",
    "prompt_template": "a format string can read Python attributes ('{prompt.__class__}')",
    "extract": "a client's 'regex:' pattern can backtrack for ever",
    "envs": "member envs carry kwargs of their own, past these checks",
}
"""Kwargs refused unless the operator allows them, and why (the built-in envs' dangerous ones)."""

KWARG_MAX: dict[str, float] = {
    "length_range": 262_144,  # tokens of a long document (LongDoc's default tops at 131,072)
    "context_budget": 262_144,  # tokens of context
    "chunk_tokens": 32_768,
    "notes_tokens": 32_768,
    "max_observation_length": 4 << 20,  # characters of one observation
    "max_code_chars": 1_000_000,
    "max_turns": 1_000,
    "task_cache": 4_096,  # tasks held in memory
    "timeout_s": 60.0,  # seconds of a sandboxed run
}
"""Default upper bounds on the numbers of the built-in envs' kwargs that size work or memory."""

DEFAULT_KWARG_MAX = 10_000.0
"""Default upper bound on every other number in a kwarg (in absolute value)."""

MAX_DEPTH = 4
"""Deepest nesting of lists and objects in one kwarg value."""


def _entry_class(env_id: str) -> Any:
    entry = gym.spec(env_id).entry_point
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        return getattr(importlib.import_module(module), name)
    return entry


def accepted_kwargs(env_id: str) -> frozenset[str]:
    """The keyword arguments ``env_id``'s constructor takes, through ``**kwargs`` forwarding.

    A base class's parameter without a default (``LLMEnv``'s ``source``) is the subclass's to
    fill, never the caller's.
    """
    target = _entry_class(env_id)
    if inspect.isclass(target):
        chain = [c.__dict__["__init__"] for c in target.__mro__ if "__init__" in c.__dict__]
    else:
        chain = [target]
    names: set[str] = set()
    for depth, init in enumerate(chain):
        if init is object.__init__:
            break
        params = list(inspect.signature(init).parameters.values())
        names.update(
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name != "self"
            and (depth == 0 or p.default is not p.empty)
        )
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return frozenset(names)


def _numbers(value: Any) -> Iterator[float]:
    """The numbers in a plain JSON value (booleans are not numbers here)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)


def _json_simple(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, list):
        return all(_json_simple(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_simple(v, depth + 1) for k, v in value.items())
    return False


class KwargPolicy:
    """The kwargs each served env id takes from clients: see the module's docstring."""

    def __init__(
        self,
        env_ids: list[str],
        allow: Mapping[str, list[str]] | None = None,
        kwarg_max: Mapping[str, Mapping[str, float]] | None = None,
    ):
        allow = dict(allow or {})
        kwarg_max = dict(kwarg_max or {})
        for what, table in (("allow_kwargs", allow), ("kwarg_max", kwarg_max)):
            unknown = sorted(set(table) - set(env_ids) - {"*"})
            if unknown:
                raise ServeError(f"{what} names env ids this server does not serve: {unknown}")
        for bounds in kwarg_max.values():
            for name, bound in bounds.items():
                if not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound >= 0):
                    raise ServeError(f"Expects kwarg_max {name} >= 0 and finite, actual: {bound}")
        self._extra = {
            e: frozenset(allow.get(e, ())) | frozenset(allow.get("*", ())) for e in env_ids
        }
        self._max = {
            e: {**KWARG_MAX, **kwarg_max.get("*", {}), **kwarg_max.get(e, {})} for e in env_ids
        }
        self._allowed: dict[str, frozenset[str]] = {}

    def bound(self, env_id: str, name: str) -> float:
        """The largest number (in absolute value) the kwarg ``name`` of ``env_id`` may hold."""
        return self._max[env_id].get(name, DEFAULT_KWARG_MAX)

    def allowed(self, env_id: str) -> frozenset[str]:
        """The kwargs ``env_id`` takes from clients (its module is imported on first ask)."""
        if env_id not in self._allowed:
            safe = accepted_kwargs(env_id) - set(HOST_KWARGS)
            self._allowed[env_id] = safe | self._extra[env_id]
        return self._allowed[env_id]

    def check(self, env_id: str, kwargs: Mapping[str, Any]) -> None:
        """Raise :class:`KwargRefused` unless every kwarg is allowed for ``env_id`` and plain."""
        allowed = self.allowed(env_id)
        for name, value in kwargs.items():
            if name not in allowed:
                why = HOST_KWARGS.get(name)
                reason = (
                    f": {why}; the operator can allow it with --allow-kwarg {env_id}:{name}"
                    if why
                    else f" (it takes: {', '.join(sorted(allowed)) or 'none'})"
                )
                raise KwargRefused(
                    f"This server does not take the kwarg {name!r} for {env_id}{reason}"
                )
            if not _json_simple(value):
                raise KwargRefused(
                    f"Expects the kwarg {name!r} as plain JSON (null, booleans, numbers, strings, "
                    f"lists and objects nested at most {MAX_DEPTH} deep)"
                )
            self._check_size(env_id, name, value)

    def _check_size(self, env_id: str, name: str, value: Any) -> None:
        bound = self.bound(env_id, name)
        for number in _numbers(value):
            if abs(number) > bound:
                raise KwargRefused(
                    f"The kwarg {name!r} holds {number!r}, over this server's bound of {bound:g} "
                    f"for {env_id}; the operator can raise it with --kwarg-max {env_id}:{name}=N"
                )
