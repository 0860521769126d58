"""Provenance: what is needed to reproduce an evaluation and to compare two of them honestly."""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("gymnasium", "numpy", "torch", "transformers", "accelerate", "vllm", "openai")


def utc_now() -> str:
    """The current UTC time as ISO 8601 with seconds, e.g. ``2025-01-31T12:00:00Z``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_revision(path: str | Path | None = None) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the git checkout holding ``path`` (llmgym's source by
    default), or None when it is not in a git checkout or git is missing."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {
        "commit": commit.stdout.strip(),
        "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None,
    }


def package_versions() -> dict[str, str]:
    """Installed versions of llmgym and the packages that change results (none imported)."""
    out = {}
    for name in ("llmgym", *_PACKAGES):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    """The host: name, OS, CPU count, Python, and the accelerators the environment exposes."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
    }
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        info["cuda_visible_devices"] = visible
    return info


def env_version(env_id: str) -> dict[str, Any]:
    """The registered version of an env: its ``-vN`` suffix, entry point, a hash of the
    entry point's module source, and its registered kwargs (a hash when they are large,
    e.g. a declarative env's inline task list)."""
    import gymnasium as gym
    from gymnasium.envs.registration import parse_env_id

    spec = gym.spec(env_id)
    _, _, version = parse_env_id(env_id)
    if isinstance(spec.entry_point, str):
        entry = spec.entry_point
        module = entry.partition(":")[0]
    else:
        entry = f"{getattr(spec.entry_point, '__module__', '?')}:{getattr(spec.entry_point, '__qualname__', '?')}"
        module = getattr(spec.entry_point, "__module__", "")
    kwargs = _jsonable(spec.kwargs)
    text = json.dumps(kwargs, sort_keys=True)
    if len(text) > 4000:
        kwargs = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "chars": len(text)}
    return {
        "version": version,
        "entry_point": entry,
        "module_sha256": _module_hash(module),
        "registered_kwargs": kwargs,
    }


def _module_hash(module: str) -> str | None:
    """SHA-256 of a module's source file, found without importing it (None if unknown)."""
    try:
        found = importlib.util.find_spec(module) if module else None
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    if not origin or not os.path.isfile(origin):
        return None
    with open(origin, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _jsonable(value: Any) -> Any:
    """``value`` with what JSON cannot hold replaced by its ``repr`` (recursively)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def collect(**facts: Any) -> dict[str, Any]:
    """Provenance of a run now: versions, git revision, machine, command line, plus ``facts``
    (env ids and kwargs, suite, seeds, policy spec and sampling settings...)."""
    from llmgym import __version__

    return {
        "llmgym_version": __version__,
        "git": git_revision(),
        "packages": package_versions(),
        "machine": machine(),
        "argv": list(sys.argv),
        **{k: _jsonable(v) for k, v in facts.items()},
    }
