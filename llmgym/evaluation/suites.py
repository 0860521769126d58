"""Evaluation suites: versioned files that pin env ids, kwargs, seeds and episode counts.

A released suite never changes; a change is a new file with a new version (``core-v1``).
The suites shipped with llmgym are the ``*.json`` files beside this module; a suite can
also be any JSON or YAML file of the same shape::

    {"name": "core-v0", "description": "...", "samples": 1, "k": [1],
     "envs": [{"id": "llm/Math-v0", "kwargs": {}, "seed": 1000, "episodes": 200}, ...]}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym import error

SUITE_DIR = Path(__file__).resolve().parent
_SUITE_KEYS = {"name", "description", "samples", "k", "envs"}
_ENTRY_KEYS = {"id", "name", "kwargs", "seed", "episodes"}


@dataclass(frozen=True)
class EnvEntry:
    """One env of an evaluation: which env, built how, and which tasks.

    ``episodes`` is the number of distinct tasks drawn (task ``i`` is the one
    ``reset(seed=seed + i)`` gives); ``None`` means every task of a finite (dataset)
    source. ``name`` labels the entry in results (the env id unless one env appears twice).
    """

    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    episodes: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise error.Error(f"Expects an env id string, actual: {self.id!r}")
        if not isinstance(self.kwargs, Mapping):
            raise error.Error(
                f"{self.id}: kwargs must be a mapping, actual type: {type(self.kwargs).__name__}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise error.Error(f"{self.id}: seed must be an int >= 0, actual: {self.seed!r}")
        if self.episodes is not None and (
            isinstance(self.episodes, bool)
            or not isinstance(self.episodes, int)
            or self.episodes < 1
        ):
            raise error.Error(
                f"{self.id}: episodes must be an int >= 1 (or None for a whole dataset), "
                f"actual: {self.episodes!r}"
            )
        if not isinstance(self.name, str):
            raise error.Error(f"{self.id}: name must be a str, actual: {self.name!r}")
        object.__setattr__(self, "kwargs", dict(self.kwargs))
        object.__setattr__(self, "name", self.name or self.id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kwargs": dict(self.kwargs),
            "seed": self.seed,
            "episodes": self.episodes,
        }


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its entries plus the defaults it pins (samples per task, pass@k's k)."""

    name: str
    envs: tuple[EnvEntry, ...]
    description: str = ""
    samples: int = 1
    k: tuple[int, ...] = (1,)
    sha256: str = ""
    path: str = ""

    def check_registered(self) -> None:
        """Raise :class:`llmgym.error.Error` naming every pinned env that is not registered."""
        import gymnasium as gym

        missing = [e.id for e in self.envs if e.id not in gym.registry]
        if missing:
            raise error.Error(
                f"Suite {self.name!r} pins env(s) that are not registered: {missing}. "
                "Install the llmgym version (or the plugin package) that provides them, or "
                "evaluate the registered ones by id (llmgym.list_envs() lists them)."
            )

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "path": self.path}


def list_suites() -> list[str]:
    """The names of the suites shipped with llmgym."""
    return sorted(p.stem for p in SUITE_DIR.glob("*.json"))


def load_suite(name_or_path: str | Path) -> Suite:
    """A shipped suite by name (``"core-v0"``) or a suite file (JSON or YAML), validated."""
    path = Path(name_or_path)
    if not path.is_file():
        if isinstance(name_or_path, str) and name_or_path in list_suites():
            path = SUITE_DIR / f"{name_or_path}.json"
        else:
            raise error.Error(
                f"No suite {str(name_or_path)!r}: neither a shipped suite ({list_suites()}) "
                "nor a suite file"
            )
    raw = path.read_bytes()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(raw)
        else:
            data = json.loads(raw)
    except Exception as e:
        raise error.Error(f"{path}: cannot parse the suite: {e}") from None
    return parse_suite(data, where=str(path), sha256=hashlib.sha256(raw).hexdigest())


def parse_suite(data: Any, *, where: str = "suite", sha256: str = "") -> Suite:
    """A :class:`Suite` from its parsed file, every field checked with a message naming it."""
    if not isinstance(data, Mapping):
        raise error.Error(f"{where}: expects a JSON object at the top level")
    unknown = set(data) - _SUITE_KEYS
    if unknown:
        raise error.Error(
            f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_SUITE_KEYS)}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise error.Error(f"{where}: 'name' must be a non-empty string such as 'core-v0'")
    samples = data.get("samples", 1)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise error.Error(f"{where}: 'samples' must be an int >= 1, actual: {samples!r}")
    ks = data.get("k", [1])
    if (
        not isinstance(ks, list)
        or not ks
        or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks)
    ):
        raise error.Error(f"{where}: 'k' must be a non-empty list of ints >= 1, actual: {ks!r}")
    envs = data.get("envs")
    if not isinstance(envs, list) or not envs:
        raise error.Error(f"{where}: 'envs' must be a non-empty list of env entries")
    entries = []
    for i, raw in enumerate(envs):
        at = f"{where}: envs[{i}]"
        if not isinstance(raw, Mapping):
            raise error.Error(f"{at}: each entry is an object with 'id', 'episodes', 'seed'")
        bad = set(raw) - _ENTRY_KEYS
        if bad:
            raise error.Error(f"{at}: unknown key(s) {sorted(bad)}; expected {sorted(_ENTRY_KEYS)}")
        for key in ("id", "episodes", "seed"):
            if key not in raw:
                raise error.Error(f"{at}: a suite pins {key!r} for every env")
        try:
            entries.append(EnvEntry(**raw))
        except error.Error as e:
            raise error.Error(f"{at}: {e}") from None
    check_unique_names(entries, where)
    return Suite(
        name=name,
        envs=tuple(entries),
        description=str(data.get("description", "")),
        samples=samples,
        k=tuple(ks),
        sha256=sha256,
        path=where,
    )


def check_unique_names(entries: Sequence[EnvEntry], where: str = "evaluation") -> None:
    seen: set[str] = set()
    for e in entries:
        if e.name in seen:
            raise error.Error(
                f"{where}: {e.name!r} appears twice; give each entry of the same env a distinct 'name'"
            )
        seen.add(e.name)
