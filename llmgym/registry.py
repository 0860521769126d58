"""The registry: built-ins under ``llm/`` in Gymnasium's registry, entry-point plugins, declarative envs."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import tomllib
import warnings
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from llmgym import error

PLUGIN_GROUP = "llmgym.envs"
_IDS: set[str] = set()
_PLUGINS: dict[str, str | None] = {}


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


def load_plugins() -> dict[str, str | None]:
    """Load the ``llmgym.envs`` entry points and the spec files in ``LLMGYM_SPECS``
    (``os.pathsep``-separated); a broken plugin warns and the others still load.

    An entry point may name an env class (registered under the entry point's name, which
    must be an env id such as ``"acme/Tickets-v0"``), a function that registers envs, or a
    module whose import registers them. Returns ``{entry point name: error or None}``.
    """
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        if ep.name in _PLUGINS:
            continue
        try:
            obj = ep.load()
            if isinstance(obj, type) and issubclass(obj, gym.Env):
                register(ep.name, ep.value)
            elif callable(obj):
                obj()
            _PLUGINS[ep.name] = None
        except Exception as e:
            _PLUGINS[ep.name] = f"{type(e).__name__}: {e}"
            warnings.warn(
                f"llmgym plugin {ep.name!r} ({ep.value}) failed to load and was skipped; "
                f"other environments are unaffected. Cause: {type(e).__name__}: {e}",
                RuntimeWarning,
                stacklevel=2,
            )
    for spec in filter(None, os.environ.get("LLMGYM_SPECS", "").split(os.pathsep)):
        key = f"spec:{spec}"
        if key in _PLUGINS:
            continue
        try:
            load_spec(spec, overwrite=True)
            _PLUGINS[key] = None
        except Exception as e:
            _PLUGINS[key] = f"{type(e).__name__}: {e}"
            warnings.warn(f"LLMGYM_SPECS: {spec} was skipped: {e}", RuntimeWarning, stacklevel=2)
    return dict(_PLUGINS)


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


# --- declarative envs ------------------------------------------------------------------------

_SPEC_KEYS = {
    "id",
    "tasks",
    "verifier",
    "verifier_options",
    "extract",
    "prompt_template",
    "system_prompt",
    "domain",
    "reward_range",
    "max_turns",
    "description",
    "answer_required",
}


def register_task_env(
    id: str,
    tasks: Any,
    verifier: Any = "exact",
    *,
    verifier_options: Mapping[str, Any] | None = None,
    extract: str | None = None,
    prompt_template: str | None = None,
    system_prompt: str | None = None,
    domain: str = "custom",
    reward_range: tuple[float, float] | None = None,
    max_turns: int = 1,
    description: str = "",
    answer_required: bool = True,
    overwrite: bool = False,
) -> str:
    """Register an env from tasks (JSONL path or list), a verifier and a prompt template.

    Everything is checked now (the tasks load and each has an answer, the verifier exists
    and takes the options given, the template fills), so a bad spec fails at registration,
    not in the middle of training. ``verifier`` may be a list of weighted verifiers
    (``[{"verifier": "exact", "weight": 0.8}, ...]``); ``max_turns`` > 1 gives a wrong answer
    the verifier's feedback and another try.
    """
    from llmgym.envs.declarative import DeclarativeEnv, render_template

    if not isinstance(id, str):
        raise error.InvalidSpec(f"Expects the env id as a str, actual type: {type(id).__name__}")
    try:
        parse_env_id(id)
    except gym.error.Error as e:
        raise error.InvalidSpec(f"Bad env id {id!r}: {e}. Use 'namespace/Name-v0'.") from None
    if id in gym.registry and not overwrite:
        raise error.InvalidSpec(f"{id!r} is already registered; pass overwrite=True to replace it")
    if isinstance(tasks, (str, Path)):
        tasks = str(Path(tasks).resolve())
    if reward_range is not None:
        try:
            lo, hi = (float(x) for x in reward_range)
        except (TypeError, ValueError):
            raise error.InvalidSpec(
                f"reward_range must be two numbers, actual: {reward_range!r}"
            ) from None
        reward_range = (lo, hi)
    kwargs: dict[str, Any] = {
        "tasks": tasks,
        "verifier": verifier,
        "verifier_options": dict(verifier_options or {}),
        "extract": extract,
        "prompt_template": prompt_template,
        "system_prompt": system_prompt,
        "domain": domain,
        "reward_range": reward_range,
        "max_turns": max_turns,
        "answer_required": answer_required,
    }
    env = DeclarativeEnv(**kwargs)  # validates tasks, verifier, extraction
    if prompt_template is not None:
        for task in env.source.iter_tasks(1):
            render_template(prompt_template, task)
    if id in gym.registry:
        del gym.registry[id]
    register(id, "llmgym.envs.declarative:DeclarativeEnv", kwargs=kwargs)
    gym.registry[id].description = description  # type: ignore[attr-defined]
    return id


def _import_beside(folder: Path, verifier: Any) -> None:
    """Make a ``"module:function"`` verifier whose module sits beside the spec file importable
    (its folder joins ``sys.path``), so a spec and its Python verifier travel together."""
    targets = verifier if isinstance(verifier, list) else [verifier]
    for target in targets:
        if isinstance(target, Mapping):
            target = target.get("verifier")
        if not isinstance(target, str) or ":" not in target:
            continue
        root = target.partition(":")[0].split(".")[0]
        if (folder / f"{root}.py").is_file() or (folder / root / "__init__.py").is_file():
            where = str(folder.resolve())
            if where not in sys.path:
                sys.path.insert(0, where)


def load_spec(path: str | Path, *, overwrite: bool = False) -> list[str]:
    """Register the env(s) of a YAML or TOML spec file; returns their ids.

    The file holds one env (``id``, ``tasks``, ``verifier`` ...) or ``envs: [...]``. A
    relative ``tasks`` path is taken from the spec file's folder, and a ``"module:function"``
    verifier whose module file sits in that folder is imported from there (no PYTHONPATH).
    """
    path = Path(path)
    if not path.is_file():
        raise error.InvalidSpec(f"No such spec file: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            raise error.InvalidSpec(f"Expects a .yaml, .yml or .toml spec, actual: {path.name}")
    except error.InvalidSpec:
        raise
    except Exception as e:
        raise error.InvalidSpec(f"{path}: cannot parse: {e}") from None
    if not isinstance(data, Mapping):
        raise error.InvalidSpec(f"{path}: expects a mapping at the top level")
    specs = data.get("envs", [data]) if "envs" in data else [data]
    if not isinstance(specs, list) or not specs:
        raise error.InvalidSpec(f"{path}: 'envs' must be a non-empty list")
    ids = []
    for i, spec in enumerate(specs):
        where = f"{path} (env {i})"
        if not isinstance(spec, Mapping):
            raise error.InvalidSpec(f"{where}: each env is a mapping")
        unknown = sorted(set(map(str, spec)) - _SPEC_KEYS)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(_SPEC_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise error.InvalidSpec(
                f"{where}: unknown key(s) {unknown}{hint}; expected {sorted(_SPEC_KEYS)}"
            )
        for key in ("id", "tasks"):
            if key not in spec:
                raise error.InvalidSpec(f"{where}: missing {key!r}")
        spec = dict(spec)
        tasks = spec.pop("tasks")
        if isinstance(tasks, str):
            tasks = path.parent / tasks
        _import_beside(path.parent, spec.get("verifier"))
        try:
            ids.append(register_task_env(spec.pop("id"), tasks, overwrite=overwrite, **spec))
        except error.Error as e:
            raise type(e)(f"{where}: {e}") from None
        except TypeError as e:
            raise error.InvalidSpec(f"{where}: {e}") from None
    return ids
