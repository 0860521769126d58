"""BFCL's multi-turn episodes: calls run on BFCL's own stateful backends, each turn checked as BFCL's
``multi_turn_checker`` checks it.

A :class:`Session` holds two sets of backend instances (``GorillaFileSystem``, ``TradingBot``...,
built from the task's ``initial_config`` by BFCL's ``_load_scenario``): the model's, on which
its calls run as it makes them, and the ground truth's, on which the gold calls of a turn run
when the model ends that turn. A turn ends with a message that holds no readable call. Then,
when the gold turn has calls (BFCL's rules, in its order):

- the model must have made a call in that turn;
- state: every public attribute of every backend equals the ground truth's;
- response: every result of the turn's gold calls appears among the results of the model's
  calls so far (all turns, as a multiset, in any order).

A gold turn without calls (``miss_param``, ``miss_func``: the request cannot be done yet) is not
checked, as in BFCL, but what the model calls in it still runs. More than
:data:`MAX_STEPS_PER_TURN` messages with calls in one turn end the episode (BFCL's forced quit).

Calls are never ``eval``-ed: a parsed call runs as ``method(**arguments)`` on the backend that
defines it (the last of the involved classes wins a shared name, as in BFCL); a result is kept
as BFCL keeps it (a string as is, a dict as JSON, anything else ``str``-ed, an exception as
``"Error during execution: ..."``). The ground truth's calls are Python call strings, read with
:mod:`ast` (positional arguments are named from the method's signature). Not covered: the
backends' own cost (they are BFCL's code; :func:`guard` refuses the few arguments that would
make one run for minutes: huge powers and precisions in ``MathAPI``).
"""

from __future__ import annotations

import ast
import copy
import decimal
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

import mpmath

from llmgym import error
from llmgym.envs.tools.bfcl import peer
from llmgym.toolcalls import MAX_CALLS, ToolCall

MAX_STEPS_PER_TURN = 20
"""BFCL's ``MAXIMUM_STEP_LIMIT``: messages with calls allowed in one turn (one more ends it all)."""
BLOCKED = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
"""Names BFCL refuses to call whatever the backend."""
MAX_PRECISION = 10_000
"""The largest ``precision`` a MathAPI call may ask for (mpmath/decimal digits)."""
MAX_POWER_BITS = 1 << 20
"""The largest integer power MathAPI may compute (in bits)."""


def guard(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why a call must not run (it would compute for minutes or exhaust memory), or None.

    >>> guard("power", {"base": 10, "exponent": 10**9}) is not None
    True
    >>> guard("power", {"base": 2, "exponent": 10}) is None
    True
    """
    precision = arguments.get("precision")
    number = isinstance(precision, (int, float)) and not isinstance(precision, bool)
    if number and not precision <= MAX_PRECISION:  # type: ignore[operator]  # (NaN too)
        return f"precision {precision} is over the limit of {MAX_PRECISION} digits"
    base, exponent = arguments.get("base"), arguments.get("exponent")
    if (
        name == "power"
        and isinstance(base, int)
        and isinstance(exponent, int)
        and abs(base) > 1
        and exponent * math.log2(abs(base)) > MAX_POWER_BITS
    ):
        return "the power is too large to compute"
    return None


def result_text(result: Any) -> str:
    """A call's result as BFCL's ``execute_multi_turn_func_call`` records it."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError, RecursionError):
            pass
    try:
        return str(result)
    except (ValueError, RecursionError) as e:  # an int past Python's digit limit, say
        return f"Error during execution: {e}"


_METHODS: dict[type, frozenset[str]] = {}


def _public_methods(cls: type) -> frozenset[str]:
    """The methods a call may name: public ones (BFCL maps every method without a leading ``_``)."""
    names = _METHODS.get(cls)
    if names is None:
        names = _METHODS[cls] = frozenset(
            n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")
        )
    return names


@cache
def signatures(classes: Sequence[str]) -> dict[str, inspect.Signature]:
    """The signatures of the backends' public methods (later classes win a shared name)."""
    out = {}
    for name in classes:
        cls = peer.backend_class(name)
        for method in _public_methods(cls):
            out[method] = inspect.signature(getattr(cls, method))
    return out


class _Unavailable:
    """Stands in for a backend that cannot run here (web search needs the network)."""

    def __init__(self, name: str, functions: Sequence[str], why: str):
        self.name, self.functions, self.why = name, tuple(functions), why


def build_backends(
    classes: Sequence[str], initial_config: Mapping[str, Any], long_context: bool
) -> dict[str, Any]:
    """Fresh backend instances, loaded as BFCL loads them (memory backends start empty)."""
    instances: dict[str, Any] = {}
    for name in classes:
        cls = peer.backend_class(name)
        instance = cls()
        if name not in peer.STATELESS and not name.startswith("MemoryAPI"):
            config = copy.deepcopy(dict(initial_config.get(name, {})))
            instance._load_scenario(config, long_context=long_context)
        instances[name] = instance
    return instances


def _call_node(text: str) -> ast.Call:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise error.InvalidTask(f"gold call {text!r} is not a Python call: {e.msg}") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise error.InvalidTask(f"gold call {text!r} is not a plain function call")
    return node


def gold_call(text: str, classes: Sequence[str]) -> ToolCall:
    """A ground-truth call string (``"mv(source='a', destination='b')"``, ``"sort('a.txt')"``)
    as a keyword call, positional arguments named from the signature of the method of the
    backends ``classes`` that it calls."""
    name, args = _gold_call(text, tuple(classes))
    return ToolCall(name, copy.deepcopy(args))


@lru_cache(maxsize=1 << 16)
def _gold_call(text: str, classes: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    node = _call_node(text)
    name = node.func.id  # type: ignore[attr-defined]
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError:
        raise error.InvalidTask(
            f"gold call {text!r} has an argument that is not a literal"
        ) from None
    if args:
        sig = signatures(classes).get(name)
        if sig is None:
            raise error.InvalidTask(f"gold call {text!r}: no backend method {name!r}")
        names = [p for p in sig.parameters if p != "self"]
        if len(args) > len(names):
            raise error.InvalidTask(f"gold call {text!r}: too many positional arguments")
        kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
    return name, kwargs


class Session:
    """The state of one BFCL multi-turn (or agentic) episode; deep-copyable for snapshots."""

    def __init__(self, metadata: Mapping[str, Any], gold: Sequence[Sequence[str]] | None):
        classes = list(metadata["involved_classes"])
        config = metadata.get("initial_config", {})
        long_context = bool(metadata.get("long_context"))
        self.model = self._backends(classes, config, long_context, metadata)
        self.gold = build_backends(classes, config, long_context) if gold is not None else {}
        self.turn = 0
        self.steps = 0
        """Messages with calls in the current turn."""
        self.results: list[str] = []
        """The results of every call the model made, all turns (BFCL's response check)."""

    @staticmethod
    def _backends(
        classes: list[str], config: Any, long_context: bool, metadata: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            return build_backends(classes, config, long_context)
        except peer.BfclMissing as e:
            if classes != ["WebSearchAPI"]:
                raise
            names = [f["name"] for f in metadata.get("functions", [])]
            return {"WebSearchAPI": _Unavailable("WebSearchAPI", names, str(e))}

    def _method(self, instances: Mapping[str, Any], name: str) -> Any:
        found = None
        for instance in instances.values():  # later classes win a shared name, as in BFCL
            if isinstance(instance, _Unavailable):
                if name in instance.functions:
                    found = instance
            elif name in _public_methods(type(instance)):
                found = getattr(instance, name)
        return found

    def run(self, call: ToolCall, *, gold: bool = False) -> str:
        """Run one call on the model's backends (or the ground truth's) and return its result."""
        name = call.name
        if name in BLOCKED:
            return f"Error during execution: Function call {name} is not allowed."
        method = self._method(self.gold if gold else self.model, name)
        if method is None:
            return f"Error during execution: name {name!r} is not defined"
        if isinstance(method, _Unavailable):
            return f"Error during execution: {name} cannot run here ({method.why})"
        refused = guard(name, call.arguments)
        if refused:
            return f"Error during execution: {refused}"
        dps = mpmath.mp.dps  # MathAPI sets mpmath's and decimal's precision: keep them as found
        try:
            with decimal.localcontext():
                result = method(**call.arguments)
            return result_text(result)
        except Exception as e:  # noqa: BLE001 - BFCL records any exception as the result
            return f"Error during execution: {e}"
        finally:
            mpmath.mp.dps = dps

    def run_model(self, calls: Sequence[ToolCall]) -> list[str]:
        """Run one message's calls, in order; their results join the response record."""
        out = [self.run(c) for c in calls[:MAX_CALLS]]
        self.results.extend(out)
        self.steps += 1
        return out

    def end_turn(self, gold_calls: Sequence[str], made_calls: bool) -> str | None:
        """Close the current turn: run its gold calls on the ground truth's backends and check
        the model's (BFCL's rules); returns why the turn fails, or None."""
        classes = tuple(self.gold)
        gold_results = [self.run(gold_call(c, classes), gold=True) for c in gold_calls]
        turn = self.turn
        self.turn += 1
        self.steps = 0
        if not gold_calls:
            return None
        if not made_calls:
            return f"turn {turn + 1}: no function was called, but the request needs calls"
        for name, expected in self.gold.items():
            differ = state_differences(self.model[name], expected)
            if differ:
                return (
                    f"turn {turn + 1}: the state of {name} differs from the expected state "
                    f"(in {', '.join(differ[:5])})"
                )
        missing = missing_results(gold_results, self.results)
        if missing:
            return (
                f"turn {turn + 1}: {len(missing)} expected result(s) are missing from the "
                "results of the calls made so far"
            )
        return None


def state_differences(model: Any, gold: Any) -> list[str]:
    """The public attributes of the ground truth's backend whose values the model's backend does
    not have (BFCL's ``_compare_instances``)."""
    out = []
    for attr, value in vars(gold).items():
        if attr.startswith("_"):
            continue
        try:
            same = hasattr(model, attr) and getattr(model, attr) == value
        except (RecursionError, TypeError, ValueError):
            same = False
        if not same:
            out.append(attr)
    return out


def missing_results(expected: Sequence[str], made: Sequence[str]) -> list[str]:
    """The expected results not found among ``made``, each found one used once (BFCL's
    ``_is_subsequence_unordered``)."""
    pool = list(made)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing
