"""Former module paths: ``import llmgym.<old.path>`` keeps working after a module moved.

A package that moved some of its modules calls :func:`keep_former_paths` in its ``__init__``
with a table ``{"old_name": "new.dotted.path"}``. Importing ``package.old_name`` then imports
the module at its new path, warns once (:class:`DeprecationWarning`) and binds the same module
object under both names, so ``isinstance`` checks, registries and monkeypatching agree. Nothing
is imported until a former path is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType

_FORMER: dict[str, str] = {}
"""Full former name -> full new name, for every package that registered a table."""


class _Loader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module ran when it was imported under its new name; the import system has just
        # stamped the alias's spec on it: give it back its own (reload, pickling by name).
        module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = _FORMER.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(new))


_FINDER = _Finder()


def keep_former_paths(package: str, moved: Mapping[str, str]) -> None:
    """Let ``package.<old>`` import as the module now at ``moved[old]`` (a full dotted path)."""
    for old, new in moved.items():
        if "." in old or not old.isidentifier():
            raise ValueError(f"a former module name is one identifier, got {old!r}")
        _FORMER[f"{package}.{old}"] = new
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def former_paths() -> dict[str, str]:
    """Every registered former path and the module it now names (for tests and docs)."""
    return dict(_FORMER)
