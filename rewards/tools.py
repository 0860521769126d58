"""Grading tool calls: BFCL's AST match of calls against possible answers, and the
``tool_call_match`` verifier.

The protocol itself (parsing, formatting, specs, validation) lives in the core,
:mod:`llmgym.toolcalls` and :mod:`llmgym.toolspecs`; their names are re-exported here, where they were first published.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmgym.rewards.base import RewardResult
from llmgym.toolcalls import (
    FORMATS,
    MAX_ARGUMENT_CHARS,
    MAX_CALLS,
    MAX_DEPTH,
    MAX_PARSE_CHARS,
    ToolCall,
    _arguments_from,
    _call_from_object,
    _ParseError,
    _shallow,
    format_tool_calls,
    parse_tool_calls,
    value_depth,
)
from llmgym.toolspecs import (
    _json_type,
    _short,
    function_spec,
    parameters_schema,
    spec_name,
    type_schema,
    validate_arguments,
)

# --- BFCL-style AST match -----------------------------------------------------------------------
#
# The rules are those of BFCL's own checker (bfcl_eval/eval_checker/ast_eval/ast_checker.py), rule
# for rule, so a verdict here is the leaderboard's verdict on the same calls. One departure:
# parallel calls are paired with the gold entries by a maximum matching, not greedily in the gold's
# order (BFCL rejects f(x=1), f(x=2) against f(x in {1, 2}), f(x in {1}): its first pick blocks the
# second). ``tests/envs/test_tools_bfcl_conformance.py`` and ``benchmarks/tools.py`` compare the two.

_STRIP = re.compile(r"[ ,./\-_*^]")
_NORMALIZED: dict[str, str] = {}


def normalize_string(text: str) -> str:
    """BFCL's string standardisation: spaces and ``, . / - _ * ^`` removed, lower case, single
    quotes read as double quotes ("New York, NY" equals "new-york ny").

    >>> normalize_string("New York, NY") == normalize_string("new-york ny") == "newyorkny"
    True
    """
    out = _NORMALIZED.get(text)
    if out is None:
        out = _STRIP.sub("", text).lower().replace("'", '"')
        if len(text) <= 256:
            if len(_NORMALIZED) >= 65_536:
                _NORMALIZED.clear()
            _NORMALIZED[text] = out
    return out


@dataclass(frozen=True)
class AstMatch:
    """The outcome of :func:`ast_match_result`: ``matched``, the ``reasons`` it failed, and
    ``assignment[i]``: the gold entry that call ``i`` matched."""

    matched: bool
    reasons: tuple[str, ...] = ()
    assignment: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return self.matched


def _is_map(value: Any) -> bool:
    """``isinstance(value, Mapping)``, without the ABC check for the common plain types."""
    return type(value) is dict or (type(value) not in _PLAIN and isinstance(value, Mapping))


_PLAIN = frozenset({str, int, float, bool, list, tuple, type(None)})


_Call = tuple[str, Mapping[str, Any], str | None]
"""A call as the matcher reads it: (name, arguments, error)."""


def _as_calls(calls: Any) -> list[_Call]:
    if isinstance(calls, ToolCall) or _is_map(calls):
        calls = [calls]
    if not isinstance(calls, (list, tuple)):
        return [("", {}, f"calls must be a list, got {type(calls).__name__}")]
    out: list[_Call] = []
    for item in calls[: MAX_CALLS + 1]:
        if isinstance(item, ToolCall):
            args = item.arguments
            if item.error is None and not (_is_map(args) and _shallow(args)):
                out.append((item.name, {}, f"{item.name}: arguments too deep or not a dict"))
            else:
                out.append((item.name, args, item.error))
            continue
        if _is_map(item) and len(item) == 1:  # BFCL's {name: {args}}
            ((name, args),) = item.items()
            if _is_map(args) and (name != "function" or "name" not in args):
                name = str(name)
                if type(args) is dict and _shallow(args):  # (a key that is no str fits no gold)
                    out.append((name, args, None))
                else:
                    try:
                        out.append((name, _arguments_from(args), None))
                    except _ParseError as e:
                        out.append((name, {}, str(e)))
                continue
        call = _call_from_object(item)
        out.append((call.name, call.arguments, call.error) if call else ("", {}, "not a call"))
    return out


def _gold_entries(gold: Any) -> list[tuple[str, Mapping[str, Any]]] | None:
    if _is_map(gold):
        gold = [gold]
    if not isinstance(gold, (list, tuple)):
        return None
    entries = []
    for item in gold:
        if not (_is_map(item) and len(item) == 1):
            return None
        ((name, params),) = item.items()
        if not _is_map(params):
            return None
        entries.append((str(name), params))
    return entries


_NONE = type(None)
_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": _NONE,
    # BFCL's own words, for specs passed as BFCL writes them ("any" is a string to BFCL)
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_TYPE_WORDS = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
               dict: "object", _NONE: "null"}  # fmt: skip

_Rule = tuple[type | None, frozenset[type] | None, type | None]
"""A parameter's type as BFCL checks it: (one Python type or None for none/a union, the union's
types or None for any type, the type of an array's items: one level deep, as BFCL)."""
_ANY: _Rule = (None, None, None)
_SIMPLE: dict[str, _Rule] = {w: (t, None, None) for w, t in _PY_TYPES.items()}
_ARRAYS: dict[Any, _Rule] = {w: (list, None, t) for w, t in _PY_TYPES.items()}


def _param_rule(schema: Any) -> _Rule:
    if not _is_map(schema):
        return _ANY
    kind = schema.get("type")
    if type(kind) is str:
        rule = _SIMPLE.get(kind, _ANY)
        if rule[0] is list:
            items = schema.get("items")
            return _ARRAYS.get(items.get("type"), rule) if _is_map(items) else rule
        return rule
    if isinstance(kind, list):
        kinds = frozenset(_PY_TYPES[k] for k in kind if type(k) is str and k in _PY_TYPES)
        return (None, kinds, None) if len(kinds) == len(kind) else _ANY
    return _ANY


_Found = tuple[Sequence[Any], Mapping[str, Any]]


def _spec_for(tools: Any, name: str) -> _Found | None:
    """(required parameters, property schemas) of the offered function ``name``, or None."""
    for spec in tools if isinstance(tools, (list, tuple)) else [tools]:
        if type(spec) is not dict and not _is_map(spec):
            continue
        fn = spec
        called = spec.get("name")
        if called is None:  # an OpenAI tool: {"type": "function", "function": {...}}
            fn = spec.get("function")
            if not _is_map(fn):
                continue
            called = fn.get("name")
        if called != name:
            continue
        schema = fn.get("parameters")
        if not _is_map(schema):
            schema = fn
        props = schema.get("properties")
        required = schema.get("required")
        return (
            required if isinstance(required, list) else (),
            props if _is_map(props) else {},
        )
    return None


def _answer_type(options: list[Any]) -> type | None:
    """The type of the first acceptable value that is not ``""`` (BFCL's "possible answer type")."""
    for o in options:
        if not (type(o) is str and o == ""):
            return type(o)
    return None


def _fits(value: Any, rule: _Rule, options: list[Any]) -> int:
    """BFCL's check of one argument: 0 when it fits, 1 when its type is wrong, 2 when the value is.

    The type: a value of the spec's type fits, and so does a value of the gold's type where the
    two disagree (the gold names a variable, or the spec's type is wrong); such a "variable" is
    compared exactly. Otherwise strings compare standardised, dicts and lists as BFCL's
    ``dict_checker`` and ``list_checker`` do, anything else by equality."""
    py, kinds, item = rule
    vt = type(value)
    if py is None:
        if kinds is not None and vt not in kinds:
            return 1
        py = vt
        gold_type = vt
    else:
        if py is float and vt is int:
            value, vt = (
                float(value),
                float,
            )  # BFCL reads an int where a float is asked as that float
        gold_type = None
        for o in options:
            if not (type(o) is str and o == ""):
                gold_type = type(o)
                break
        if vt is not py:
            if gold_type is not None and vt is gold_type:
                return 0 if _in(value, options) else 2
            return 1
        if item is not None and not _items_fit(value, item, options):
            return 1
        if gold_type is not None and gold_type is not py:
            return 0 if _in(value, options) else 2
    if py is str:
        mine = normalize_string(value)
        for o in options:
            if type(o) is str and normalize_string(o) == mine:
                return 0
        return 2
    if py is dict or (py not in _PLAIN and _is_map(value)):
        return 0 if _dict_ok(value, options) else 2
    if py is list or py is tuple:
        if item is dict:
            return 0 if _list_of_dicts_ok(value, options) else 2
        return 0 if _list_ok(value, options) else 2
    return 0 if _in(value, options) else 2


def _items_fit(value: Sequence[Any], item: type, options: list[Any]) -> bool:
    """BFCL's one-level check of a list's items: each of the spec's item type, or of the type of
    the first item of an acceptable list (any acceptable value that is no list vouches for all)."""
    for option in options:
        if type(option) is not list:
            return True
        item_gold = _answer_type(option)
        if all(type(v) is item or type(v) is item_gold for v in value):
            return True
    return False


def _std(value: Any) -> Any:
    return normalize_string(value) if type(value) is str else value


def _in(value: Any, options: Sequence[Any]) -> bool:
    try:
        return value in options
    except (RecursionError, TypeError, ValueError):
        return False


def _options(accept: Any) -> list[Any]:
    return accept if type(accept) is list else [accept]


def _dict_ok(value: Mapping[str, Any], options: list[Any]) -> bool:
    """BFCL's dict check: every key one of the gold's, each value among its acceptable values
    (strings standardised), every gold key without ``""`` present."""
    for option in options:
        if not _is_map(option):
            continue
        if all(
            key in option and _in(_std(v), [_std(a) for a in _options(option[key])])
            for key, v in value.items()
        ) and all(k in value or _in("", _options(a)) for k, a in option.items()):
            return True
    return False


def _list_ok(value: Sequence[Any], options: list[Any]) -> bool:
    """BFCL's list check: the list, its strings standardised, equals an acceptable list."""
    mine = [_std(v) for v in value]
    return any(
        isinstance(option, (list, tuple, str)) and mine == [_std(o) for o in option]
        for option in options
    )


def _list_of_dicts_ok(value: Sequence[Any], options: list[Any]) -> bool:
    for option in options:
        if not isinstance(option, (list, tuple, str)) or len(option) != len(value):
            continue
        if all(_is_map(v) and _dict_ok(v, [o]) for v, o in zip(value, option, strict=True)):
            return True
    return False


_UNFIT = "does not fit"
"""What :func:`_call_problem` says when asked only whether a call fits."""


def _call_problem(
    call: _Call,
    name: str,
    params: Mapping[str, Any],
    spec: _Found | tuple[()] | None,
    explain: bool = True,
) -> str | None:
    """Why ``call`` does not fit the gold entry ``name(params)`` (``spec``: the offered function,
    ``()`` when no specs are known), or None when it fits (with ``explain=False``, :data:`_UNFIT`
    instead of the reason)."""
    called, args, problem = call
    if problem:
        return problem
    if called != name:
        return f"called {called!r}, expected {name!r}" if explain else _UNFIT
    if spec is None:
        return f"{name!r} is not one of the offered functions" if explain else _UNFIT
    props: Mapping[str, Any] | None = None
    if spec:
        required, props = spec
        for key in required:
            if key not in args:
                return f"{name}: missing required parameter {key!r}" if explain else _UNFIT
    for key, value in args.items():
        if key not in params or (props is not None and key not in props):
            return f"{name}: unexpected parameter {key!r}" if explain else _UNFIT
        options = params[key]
        if type(options) is not list:
            options = [options]
        rule = _ANY
        if props is not None:
            schema = props[key]
            kind = schema.get("type") if type(schema) is dict else None
            rule = _SIMPLE.get(kind, _ANY) if type(kind) is str else _ANY
            if rule is _ANY or rule[0] is list:
                rule = _param_rule(schema)
        verdict = _fits(value, rule, options)
        if verdict:
            if not explain:
                return _UNFIT
            if verdict == 1:
                want = _TYPE_WORDS.get(rule[0], "another type") if rule[0] else "another type"
                return f"{name}: argument {key!r} must be {want}, got {_json_type(value)}"
            return f"{name}: parameter {key!r} = {_short(value)} is not an acceptable value"
    for key, accept in params.items():
        if key not in args and ("" not in accept if type(accept) is list else accept != ""):
            return f"{name}: missing required parameter {key!r}" if explain else _UNFIT
    return None


def ast_match_result(calls: Any, gold: Any, tools: Any = None) -> AstMatch:
    """BFCL's AST match of calls against possible answers, with the reasons it fails.

    ``gold`` is ``[{function_name: {param: [acceptable values...]}}]``, one entry per
    expected call; ``""`` among a parameter's values marks it optional. ``tools`` (specs,
    OpenAI or BFCL style; may be None) supplies required parameters and types. Calls match
    the gold entries one-to-one in any order. The rules are BFCL's: strings compare
    standardised (:func:`normalize_string`), also inside lists and dicts; an int counts where a
    number is asked; where the spec's type and the gold's disagree, a value of the gold's type
    is accepted and compared exactly (README, "Type conflicts").

    >>> gold = [{"f": {"x": [1], "unit": ["cm", ""]}}]
    >>> ast_match_result([{"f": {"x": 1}}], gold).matched
    True
    >>> ast_match_result([{"f": {"x": 2}}], gold).reasons
    ("f: parameter 'x' = 2 is not an acceptable value",)
    """
    return _match(calls, gold, tools, explain=True)


def ast_match(calls: Any, gold: Any, tools: Any = None) -> bool:
    """Whether ``calls`` match the BFCL-style ``gold`` (see :func:`ast_match_result`; this
    skips writing down why they do not).

    >>> gold = [{"add": {"a": [1], "b": [2]}}, {"add": {"a": [3], "b": [4]}}]
    >>> ast_match([{"add": {"a": 3, "b": 4}}, {"add": {"a": 1, "b": 2}}], gold)
    True
    """
    return _match(calls, gold, tools, explain=False).matched


_YES, _NO = AstMatch(True), AstMatch(False)
"""What :func:`_match` answers when not asked to explain."""


def _match(calls: Any, gold: Any, tools: Any, explain: bool) -> AstMatch:
    entries = _gold_entries(gold)
    if entries is None:
        return AstMatch(False, ("malformed gold: expects [{function_name: {param: [values]}}]",))
    parsed = _as_calls(calls)
    if len(parsed) != len(entries):
        return AstMatch(False, (f"expected {len(entries)} call(s), got {len(parsed)}",))
    specs = {n: _spec_for(tools, n) if tools is not None else () for n, _ in entries}
    if len(parsed) == 1:
        name, params = entries[0]
        problem = _call_problem(parsed[0], name, params, specs[name], explain)
        if not explain:
            return _NO if problem else _YES
        return AstMatch(True, (), (0,)) if problem is None else AstMatch(False, (problem,))
    memo: dict[tuple[int, int], bool] = {}

    def fits(i: int, j: int) -> bool:
        ok = memo.get((i, j))
        if ok is None:
            n, p = entries[j]
            call = parsed[i]
            ok = memo[i, j] = call[0] == n and _call_problem(call, n, p, specs[n], False) is None
        return ok

    # BFCL's greedy pass first (each gold entry takes the first free call that fits): it settles
    # calls given in the gold's order at BFCL's cost. When it fails, an entry that no call fits
    # settles it too; else a maximum matching decides.
    calls_left = list(range(len(parsed)))
    picked: dict[int, int] = {}
    for j in range(len(entries)):
        taken = next((i for i in calls_left if fits(i, j)), None)
        if taken is None:
            if not explain and not any(fits(i, j) for i in picked):
                return _NO
            break
        calls_left.remove(taken)
        picked[taken] = j
    else:
        return AstMatch(True, (), tuple(picked[i] for i in range(len(parsed)))) if explain else _YES
    match_of_gold: list[int] = [-1] * len(entries)

    def augment(i: int, seen: list[bool]) -> bool:  # Kuhn's augmenting path
        for j in range(len(entries)):
            if not seen[j] and fits(i, j):
                seen[j] = True
                if match_of_gold[j] == -1 or augment(match_of_gold[j], seen):
                    match_of_gold[j] = i
                    return True
        return False

    for i in range(len(parsed)):
        if not augment(i, [False] * len(entries)) and not explain:
            return _NO
    if all(m != -1 for m in match_of_gold):
        assignment = [0] * len(parsed)
        for j, i in enumerate(match_of_gold):
            assignment[i] = j
        return AstMatch(True, (), tuple(assignment))
    matched_calls = set(match_of_gold)
    reasons: list[str] = []
    for i, call in enumerate(parsed):
        if i in matched_calls:
            continue
        row = [(n == call[0], _call_problem(call, n, p, specs[n])) for n, p in entries]
        problems = [p for same, p in row if same and p] or [p for _, p in row if p]
        reasons.append(
            min(problems, key=len)
            if problems
            else f"call {i} ({call[0]}) duplicates another call's match"
        )
    return AstMatch(False, tuple(dict.fromkeys(reasons)))


def tool_call_match(
    response: str | Mapping[str, Any], gold: Any, *, tools: Any = None, fmt: str = "auto"
) -> RewardResult:
    """Verifier: parse the calls in ``response`` and AST-match them against ``gold``.

    ``gold`` is the possible-answer list, or ``{"ground_truth": [...], "tools": [...]}``.

    >>> tool_call_match('get_time(city="Oslo")', [{"get_time": {"city": ["oslo"]}}]).success
    True
    """
    if isinstance(gold, Mapping) and "ground_truth" in gold:
        tools = gold.get("tools", tools)
        gold = gold["ground_truth"]
    try:
        calls = parse_tool_calls(response, fmt)
    except ValueError as e:
        return RewardResult.of(False, str(e))
    result = ast_match_result(calls, gold, tools)
    feedback = "the calls match" if result.matched else "; ".join(result.reasons[:5])
    return RewardResult.of(result.matched, feedback)


__all__ = [
    "FORMATS",
    "MAX_ARGUMENT_CHARS",
    "MAX_CALLS",
    "MAX_DEPTH",
    "MAX_PARSE_CHARS",
    "AstMatch",
    "ToolCall",
    "ast_match",
    "ast_match_result",
    "format_tool_calls",
    "function_spec",
    "normalize_string",
    "parameters_schema",
    "parse_tool_calls",
    "spec_name",
    "tool_call_match",
    "type_schema",
    "validate_arguments",
    "value_depth",
]
