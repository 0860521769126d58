"""Plugins: envs other packages register through the ``llmgym.envs`` entry-point group, and
spec files named by ``LLMGYM_SPECS``; loaded once when llmgym is imported."""

from __future__ import annotations

import os
import warnings
from importlib import metadata

import gymnasium as gym

from llmgym.declarative import load_spec
from llmgym.registry import register

PLUGIN_GROUP = "llmgym.envs"
_PLUGINS: dict[str, str | None] = {}


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
