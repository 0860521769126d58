"""The registry: llmgym's envs in Gymnasium's registry (built-ins under ``llm/``, plugins,
declarative envs), ``make`` with llmgym's errors, and ``"module:function"`` entry points.

Registering reads no env code: entry points are strings imported by ``make``. Declarative envs
are registered by :mod:`llmgym.declarative`, plugins loaded by :mod:`llmgym.plugins`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from llmgym import error

_IDS: set[str] = set()


def register(
    id: str, entry_point: Any, *, kwargs: Mapping[str, Any] | None = None, **spec: Any
) -> None:
    """Register an env with Gymnasium's registry and remember it as an llmgym env.

    llmgym envs check the order of calls themselves (``step`` before ``reset`` raises
    :class:`llmgym.error.ResetNeeded`, a subclass of Gymnasium's), so Gymnasium's
    order-enforcing wrapper, whose error is only Gymnasium's, is off unless asked for."""
    spec.setdefault("order_enforce", False)
    gym.register(id=id, entry_point=entry_point, kwargs=dict(kwargs or {}), **spec)
    _IDS.add(id)


def make(id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gymnasium.make`` whose unknown-id error is an :class:`llmgym.error.UnknownEnv`.

    >>> make("llm/NoSuchEnv-v0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.error.UnknownEnv: ...
    """
    try:
        return gym.make(id, **kwargs)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise error.Error(
            f"{id} does not take that argument: {str(e).split(' was raised')[0]}"
        ) from None
    except gym.error.UnregisteredEnv as e:
        if isinstance(e, error.Error):
            raise
        raise error.UnknownEnv(
            f"{e} Registered llmgym envs: {', '.join(list_envs()) or 'none'}"
        ) from None


def list_envs(namespace: str | None = None) -> list[str]:
    """The ids of llmgym envs (built-ins, plugins, declarative), optionally of one namespace."""
    ids = [i for i in _IDS if i in gym.registry]
    if namespace is not None:
        ids = [i for i in ids if parse_env_id(i)[0] == namespace]
    return sorted(ids)


def list_families(env_id: str, **kwargs: Any) -> list[str]:
    """The task families of an env (each a domain of its own for joint training)."""
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    try:
        return list(env.unwrapped.source.families())  # type: ignore[attr-defined]
    finally:
        env.close()


# --- importing a "module:function" -------------------------------------------------------


def import_callable(path: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` (verifiers, policies, factories); errors say what is
    wrong (an :class:`~llmgym.error.UnknownVerifier`, the name the verifier table has used)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise error.UnknownVerifier(f"Expects 'module:function', actual: {path!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise error.UnknownVerifier(f"Cannot import {path!r}: {e}") from None
    if not callable(obj):
        raise error.UnknownVerifier(f"{path!r} is not callable")
    return obj  # type: ignore[no-any-return]
