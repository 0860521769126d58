"""Tool specs: JSON-schema specs from Python functions (type hints and docstrings), and the
validation of a call's arguments against a spec. Part of the tool-call protocol; re-exported by
:mod:`llmgym.toolcalls` and :mod:`llmgym.rewards.tools`.

Covered: the JSON-schema subset that tool specs use (types, enums, required, nested
arrays/objects, numeric and length bounds). Not covered: ``$ref``, ``oneOf``/``anyOf``/``allOf``,
``pattern`` (a model-chosen string against a spec regex could backtrack).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from llmgym.toolcalls import MAX_DEPTH, value_depth

# --- specs from Python functions -------------------------------------------------------------

_DOC_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$"
)
_DOC_ARG = re.compile(r"^\s*\**(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google- or reST-style docstring."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = None
    for line in lines:
        head = _DOC_SECTION.match(line)
        if head:
            section, current, arg_indent = head.group(1).lower(), None, None
            continue
        rest = _REST_PARAM.match(line)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
            continue
        if section is None:
            summary.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            indent = len(line) - len(line.lstrip())
            m = _DOC_ARG.match(line)
            if m and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = m.group(1)
                params[current] = m.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "rest" and current and line.strip() and not line.lstrip().startswith(":"):
            params[current] = (params[current] + " " + line.strip()).strip()
    paragraphs = "\n".join(summary).strip().split("\n\n")
    description = " ".join(paragraphs[0].split()) if paragraphs and paragraphs[0] else ""
    return description, params


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema of a type hint.

    >>> type_schema(list[int])
    {'type': 'array', 'items': {'type': 'integer'}}
    >>> type_schema(typing.Literal["a", "b"])
    {'type': 'string', 'enum': ['a', 'b']}
    """
    if tp is inspect.Parameter.empty or tp is Any or tp is object:
        return {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        for extra in args[1:]:
            if isinstance(extra, Mapping):
                schema.update(extra)
        return schema
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return type_schema(members[0])
        return {"type": sorted({type_schema(m).get("type", "string") for m in members})}
    if origin is Literal:
        values = list(args)
        kinds = {type(v) for v in values}
        schema = {"enum": values}
        if len(kinds) == 1:
            schema = {"type": _PRIMITIVE[kinds.pop()], "enum": values}
        return schema
    if tp in _PRIMITIVE:
        return {"type": _PRIMITIVE[tp]}
    if tp in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence):
        schema = {"type": "array"}
        if args and args[0] is not Ellipsis:
            if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:
                return {"type": "array", "minItems": len(args), "maxItems": len(args)}
            item = type_schema(args[0])
            if item:
                schema["items"] = item
        return schema
    if tp is dict or origin in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2:
            value = type_schema(args[1])
            if value:
                schema["additionalProperties"] = value
        return schema
    raise TypeError(
        f"No JSON schema for the type hint {tp!r}; use str, int, float, bool, list, dict, Literal"
    )


_PRIMITIVE: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def function_spec(
    fn: Callable[..., Any], *, skip: Sequence[str] = ("self", "cls", "db")
) -> dict[str, Any]:
    """The OpenAI-style tool spec of a plain Python function, from its hints and docstring.

    Parameters named in ``skip`` (the execution context, such as the database) are left out;
    parameters without a default are required; the docstring's first paragraph describes
    the function and its ``Args:`` section each parameter.

    >>> def get_weather(city: str, unit: typing.Literal["C", "F"] = "C") -> dict:
    ...     '''Current weather in a city.
    ...
    ...     Args:
    ...         city: City name, e.g. "Paris".
    ...         unit: Temperature unit.
    ...     '''
    >>> spec = function_spec(get_weather)["function"]
    >>> spec["parameters"]["required"], spec["parameters"]["properties"]["unit"]["enum"]
    (['city'], ['C', 'F'])
    """
    description, docs = _parse_docstring(inspect.getdoc(fn) or "")
    hints = typing.get_type_hints(fn, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        schema = type_schema(hints.get(name, inspect.Parameter.empty))
        if name in docs and "description" not in schema:
            schema["description"] = docs[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif param.default is not None and _json_safe(param.default):
            schema["default"] = param.default
        properties[name] = schema
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


# --- argument validation ------------------------------------------------------------------------

_TYPE_ALIASES = {
    "dict": "object",
    "float": "number",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "any": "any",
}


def parameters_schema(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The parameters schema of an OpenAI tool, a bare function spec, or a parameters schema."""
    if isinstance(spec.get("function"), Mapping):
        spec = spec["function"]
    if isinstance(spec.get("parameters"), Mapping):
        return spec["parameters"]  # type: ignore[no-any-return]
    return spec


def spec_name(spec: Mapping[str, Any]) -> str | None:
    fn = spec["function"] if isinstance(spec.get("function"), Mapping) else spec
    name = fn.get("name")
    return name if isinstance(name, str) else None


def _type_ok(value: Any, kind: str) -> bool:
    kind = _TYPE_ALIASES.get(kind, kind)
    if kind == "any":
        return True
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "array":
        return isinstance(value, (list, tuple))
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "null":
        return value is None
    return True  # an unknown type word in a spec constrains nothing


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def validate_arguments(spec: Mapping[str, Any], args: Any, *, max_errors: int = 10) -> list[str]:
    """What is wrong with ``args`` for the tool ``spec`` (empty list: valid).

    Unknown arguments are errors unless the schema sets ``additionalProperties: true``;
    ``int`` is accepted where a number is expected, ``bool`` never counts as a number.

    >>> spec = {"name": "f", "parameters": {"type": "object", "required": ["n"],
    ...         "properties": {"n": {"type": "integer", "minimum": 1}}}}
    >>> validate_arguments(spec, {"n": 0, "x": 1})
    ["argument 'n' must be >= 1, got 0", "unknown argument 'x' (expected: n)"]
    >>> validate_arguments(spec, {"n": 2})
    []
    """
    errors: list[str] = []
    if not isinstance(args, Mapping):
        return [f"arguments must be an object, got {_json_type(args)}"]
    if value_depth(args) > MAX_DEPTH:
        return [f"arguments are nested deeper than {MAX_DEPTH} levels"]
    schema = dict(parameters_schema(spec))
    schema.setdefault("additionalProperties", False)
    schema["type"] = "object"
    _validate(args, schema, "", errors, top=True)
    return errors[:max_errors]


def _validate(
    value: Any, schema: Mapping[str, Any], path: str, errors: list[str], top: bool = False
) -> None:
    if len(errors) >= 20:
        return
    where = f"argument {path!r}" if path else "arguments"
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_type_ok(value, str(k)) for k in kinds):
            want = " or ".join(_TYPE_ALIASES.get(str(k), str(k)) for k in kinds)
            errors.append(f"{where} must be {want}, got {_json_type(value)}")
            return
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_same_json(value, e) for e in enum):
        errors.append(f"{where} must be one of {enum!r}, got {_short(value)}")
        return
    if isinstance(value, str):
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            errors.append(f"{where} is longer than {schema['maxLength']} characters")
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            errors.append(f"{where} is shorter than {schema['minLength']} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)) and value < lo:
            errors.append(f"{where} must be >= {lo}, got {_short(value)}")
        if isinstance(hi, (int, float)) and value > hi:
            errors.append(f"{where} must be <= {hi}, got {_short(value)}")
    if isinstance(value, (list, tuple)):
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            errors.append(f"{where} has more than {schema['maxItems']} items")
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            errors.append(f"{where} has fewer than {schema['minItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value[:1000]):
                _validate(item, items, f"{path}[{i}]", errors)
    if isinstance(value, Mapping):
        props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
        assert isinstance(props, Mapping)
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        assert isinstance(required, list)
        prefix = f"{path}." if path else ""
        extra = schema.get("additionalProperties", not top and not props)
        for key in value:
            if key in props:
                _validate(value[key], props[key], prefix + str(key), errors)
            elif isinstance(extra, Mapping):
                _validate(value[key], extra, prefix + str(key), errors)
            elif extra is False:
                expected = ", ".join(sorted(map(str, props))) or "none"
                errors.append(f"unknown argument {prefix + str(key)!r} (expected: {expected})")
        for key in required:
            if key not in value:
                errors.append(f"missing required argument {prefix + str(key)!r}")


def _same_json(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = [
    "function_spec",
    "parameters_schema",
    "spec_name",
    "type_schema",
    "validate_arguments",
]
