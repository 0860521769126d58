"""BFCL's own code, imported from the optional ``bfcl-eval`` package without its heavy dependencies.

``bfcl-eval`` (the Berkeley Function Calling Leaderboard) pins numpy 1.26 and pulls every model
vendor's SDK, so llmgym installs it with ``pip install --no-deps bfcl-eval==2026.3.23`` and
imports only what runs without those packages: the data files, the stateful multi-turn
backends (``eval_checker/multi_turn_eval/func_source_code``), the multi-turn checker, and the
AST checker (whose only tie to the SDKs is a table of model names, replaced here by a stand-in
while it is imported). The backends run multi-turn episodes; the checkers are the peer that the
conformance tests and ``benchmarks/tools.py`` compare llmgym's verdicts and speed with.

Everything here raises :class:`BfclMissing` (with the install command) when the package is absent.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

from llmgym import error

BFCL_VERSION = "2026.3.23"
INSTALL = f"pip install overrides rank-bm25 && pip install --no-deps bfcl-eval=={BFCL_VERSION}"
"""The install command: the checkers and backends import without bfcl-eval's declared deps."""

BACKENDS = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
    "WebSearchAPI": "web_search",
    "MemoryAPI_kv": "memory_kv",
    "MemoryAPI_vector": "memory_vector",
    "MemoryAPI_rec_sum": "memory_rec_sum",
}
"""Backend class -> module under ``bfcl_eval.eval_checker.multi_turn_eval.func_source_code``
(BFCL's ``CLASS_FILE_PATH_MAPPING``)."""
STATELESS = frozenset({"MathAPI"})
"""Backends that take no scenario (BFCL's ``STATELESS_CLASSES``)."""


class BfclMissing(error.Error, ImportError):
    """The optional ``bfcl-eval`` package (or a module of it) cannot be imported."""


def installed() -> bool:
    """Whether ``bfcl_eval`` can be imported.

    >>> isinstance(installed(), bool)
    True
    """
    return importlib.util.find_spec("bfcl_eval") is not None


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise BfclMissing(
            f"{name} cannot be imported ({e}); BFCL's checkers and multi-turn backends come from "
            f"the optional bfcl-eval package: {INSTALL}"
        ) from None


def data_dir() -> Path:
    """The folder of BFCL's data files (``BFCL_v4_*.json``, ``possible_answer/``...)."""
    package = _import("bfcl_eval")
    return Path(package.__file__).resolve().parent / "data"


def backend_class(name: str) -> type:
    """One of BFCL's stateful backend classes (``GorillaFileSystem``, ``TradingBot``...)."""
    module = BACKENDS.get(name)
    if module is None:
        raise error.InvalidTask(f"Unknown BFCL backend {name!r}; known: {sorted(BACKENDS)}")
    prefix = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
    return getattr(_import(f"{prefix}.{module}"), name)  # type: ignore[no-any-return]


class _AnyModel(dict):  # type: ignore[type-arg]
    """Stands in for BFCL's model table: every model keeps dotted function names."""

    def __missing__(self, key: str) -> Any:
        return types.SimpleNamespace(underscore_to_dot=False)


@cache
def ast_checker() -> Any:
    """BFCL's ``ast_checker(func_description, model_output, possible_answer, language,
    test_category, model_name)``, and its ``Language`` enum as ``ast_checker.Language``."""
    name = "bfcl_eval.constants.model_config"
    stub = types.ModuleType(name)
    stub.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    saved = sys.modules.get(name)
    sys.modules[name] = stub  # only while the checker binds the name; the real one stays lazy
    try:
        module = _import("bfcl_eval.eval_checker.ast_eval.ast_checker")
    finally:
        if saved is None:
            del sys.modules[name]
        else:
            sys.modules[name] = saved
    checker = module.ast_checker
    checker.Language = _import("bfcl_eval.constants.enums").Language
    return checker


def memory_prompts() -> tuple[dict[str, str], str]:
    """BFCL's memory agent settings per scenario and its core/archival memory system prompt."""
    prompts = _import("bfcl_eval.constants.default_prompts")
    return prompts.MEMORY_AGENT_SETTINGS, prompts.MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL


@cache
def multi_turn_checker() -> Any:
    """BFCL's ``multi_turn_checker(decoded_turns, ground_truth, test_entry, category, model)``."""
    return _import("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker").multi_turn_checker


def forget_peer_instances(model_name: str) -> None:
    """Drop the backend instances BFCL's multi-turn checker cached under ``model_name``
    (it keeps them as module globals named after the model and the entry)."""
    utils = _import("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    for key in [k for k in vars(utils) if k.startswith(model_name)]:
        delattr(utils, key)
