"""Tool calls: parse them from model output, describe Python functions as JSON-schema specs,
validate arguments, and grade single-shot calls with a BFCL-style AST match.

Covered: four call formats (Hermes ``<tool_call>`` tags, bare JSON, Python-call syntax read
with :mod:`ast` and never evaluated, OpenAI ``tool_calls`` dicts), the JSON-schema subset that
tool specs use (types, enums, required, nested arrays/objects, numeric and length bounds),
and BFCL's "possible answer" format. Not covered: ``$ref``, ``oneOf``/``anyOf``/``allOf``,
``pattern`` (a model-chosen string against a spec regex could backtrack), positional
arguments in Python calls (the spec's parameter order is not part of a call's meaning).

Every parser here is bounded: text past :data:`MAX_PARSE_CHARS`, an argument blob past
:data:`MAX_ARGUMENT_CHARS`, values nested deeper than :data:`MAX_DEPTH` or more than
:data:`MAX_CALLS` calls give a :class:`ToolCall` whose ``error`` says so, never an exception.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import keyword
import math
import re
import tokenize
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llmgym.rewards.base import RewardResult

MAX_CALLS = 64
"""Calls read from one message; later ones become a single error call (BFCL's multi-turn
ground truth makes up to 34 in one turn)."""
MAX_ARGUMENT_CHARS = 65_536
"""Characters of one call's text (JSON object or Python call)."""
MAX_PARSE_CHARS = 262_144
"""A json/python-format message longer than this is not read for calls (it is a final answer)."""
MAX_DEPTH = 16
"""Nesting depth of argument values (a list in a dict in ... counts one level each)."""

FORMATS = ("hermes", "json", "python", "openai", "auto")
CallFormat = Literal["hermes", "json", "python", "openai", "auto"]


@dataclass(frozen=True, eq=True)
class ToolCall:
    """One parsed call: ``name`` and ``arguments``, or ``error`` saying why it could not be read.

    >>> ToolCall("get_weather", {"city": "Paris"}).to_openai("call_0")["function"]["name"]
    'get_weather'
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_openai(self, call_id: str | None = None) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` item for this call (arguments as a JSON string)."""
        return {
            "id": call_id or self.id or "call_0",
            "type": "function",
            "function": {
                "name": self.name,
                "arguments": json.dumps(self.arguments, ensure_ascii=False),
            },
        }


class _ParseError(ValueError):
    pass


# --- values: depth-bounded checks and conversions ------------------------------------------


def value_depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """Nesting depth of lists/dicts in ``value``, computed without recursion and capped at ``limit``.

    >>> value_depth({"a": [1, [2]]})
    3
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, tuple, dict)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest >= limit:
                return limit
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth) for c in children)
    return deepest


_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def _shallow(value: Any, depth: int = 1) -> bool:
    """Whether the containers in ``value`` (a dict or list) nest at most :data:`MAX_DEPTH` deep."""
    for v in value.values() if type(value) is dict or isinstance(value, Mapping) else value:
        if type(v) in _PLAIN_SCALARS:
            continue
        if isinstance(v, (list, tuple, Mapping)) and (
            depth >= MAX_DEPTH or not _shallow(v, depth + 1)
        ):
            return False
    return True


def _loads_bounded(text: str) -> Any:
    if len(text) > MAX_ARGUMENT_CHARS:
        raise _ParseError(
            f"call text is {len(text)} characters, over the {MAX_ARGUMENT_CHARS} limit"
        )
    try:
        value = json.loads(text)
    except RecursionError:
        raise _ParseError(f"arguments are nested deeper than {MAX_DEPTH} levels") from None
    except (json.JSONDecodeError, ValueError) as e:
        raise _ParseError(f"not valid JSON ({e})") from None
    if value_depth(value) > MAX_DEPTH:
        raise _ParseError(f"arguments are nested deeper than {MAX_DEPTH} levels")
    return value


def _arguments_from(raw: Any) -> dict[str, Any]:
    """A call's arguments from a dict or a JSON string encoding one."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        raw = _loads_bounded(raw) if raw.strip() else {}
    if not isinstance(raw, Mapping):
        raise _ParseError(f"arguments must be a JSON object, got {type(raw).__name__}")
    if not _shallow(raw):
        raise _ParseError(f"arguments are nested deeper than {MAX_DEPTH} levels")
    if not all(type(k) is str for k in raw):
        raise _ParseError("argument names must be strings")
    return dict(raw)


def _call_from_object(obj: Any, call_id: str | None = None) -> ToolCall | None:
    """A call from a decoded JSON object, or None when the object is not call-shaped."""
    if not isinstance(obj, Mapping):
        return None
    if isinstance(obj.get("function"), Mapping) and "name" not in obj:  # OpenAI item shape
        call_id = obj.get("id") if isinstance(obj.get("id"), str) else call_id
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str):
        return None
    raw = obj.get("arguments", obj.get("parameters", {}))
    try:
        return ToolCall(name, _arguments_from(raw), call_id)
    except _ParseError as e:
        return ToolCall(name, {}, call_id, f"{name}: {e}")


# --- formats ------------------------------------------------------------------------------------

_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_PY_LINE = re.compile(r"^\s*[A-Za-z_][\w.]*\s*\(.*\)\s*;?\s*$")


def _parse_hermes(text: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    pos = text.find(_HERMES_OPEN)
    while pos != -1:
        start = pos + len(_HERMES_OPEN)
        end = text.find(_HERMES_CLOSE, start)
        body = text[start:] if end == -1 else text[start:end]
        calls.append(_hermes_body(body.strip()))
        if end == -1 or len(calls) > MAX_CALLS:
            break
        pos = text.find(_HERMES_OPEN, end + len(_HERMES_CLOSE))
    return calls


def _hermes_body(body: str) -> ToolCall:
    try:
        obj = _loads_bounded(body)
    except _ParseError as e:
        return ToolCall("", {}, None, f"<tool_call> body is not a JSON call: {e}")
    call = _call_from_object(obj)
    if call is None:
        return ToolCall("", {}, None, '<tool_call> body must be {"name": ..., "arguments": {...}}')
    return call


def _parse_json(text: str) -> list[ToolCall]:
    if len(text) > MAX_PARSE_CHARS:
        return []
    fenced = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("", "json")]
    candidates = fenced or [text]
    for candidate in candidates:
        value = _first_json(candidate.strip())
        calls = _calls_from_json_value(value)
        if calls:
            return calls
    return []


def _first_json(text: str) -> Any:
    """The whole text as JSON, else the first JSON value that starts at a '{' or '['."""
    if not text:
        return None
    if text[0] in "{[":
        try:
            return _loads_bounded(text)
        except _ParseError as e:
            if "nested deeper" in str(e) or "over the" in str(e):
                return _Bad(str(e))
    decoder = json.JSONDecoder()
    starts = [m.start() for m, _ in zip(re.finditer(r"[{\[]", text), range(8), strict=False)]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except RecursionError:
            return _Bad(f"arguments are nested deeper than {MAX_DEPTH} levels")
        except ValueError:
            continue
        if value_depth(value) > MAX_DEPTH:
            return _Bad(f"arguments are nested deeper than {MAX_DEPTH} levels")
        return value
    return None


@dataclass(frozen=True)
class _Bad:
    error: str


def _calls_from_json_value(value: Any) -> list[ToolCall]:
    if isinstance(value, _Bad):
        return [ToolCall("", {}, None, value.error)]
    if isinstance(value, Mapping):
        call = _call_from_object(value)
        return [call] if call else []
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        calls = [_call_from_object(v) for v in value]
        if all(c is not None for c in calls):
            return [c for c in calls if c is not None]
    return []


def _parse_python(text: str) -> list[ToolCall]:
    if len(text) > MAX_PARSE_CHARS:
        return []
    fenced = [
        body
        for lang, body in _FENCE.findall(text)
        if lang.lower() in ("", "python", "py", "tool_code")
    ]
    if fenced:
        calls: list[ToolCall] = []
        for body in fenced:
            calls.extend(_python_block(body, strict=True) or [])
        return calls
    whole = _python_block(text, strict=False)
    if whole is not None:
        return whole
    calls = []
    for line in text.splitlines():
        if _PY_LINE.match(line):
            calls.extend(_python_block(line.strip().rstrip(";"), strict=True) or [])
    return calls


def _python_block(code: str, *, strict: bool) -> list[ToolCall] | None:
    """Calls in a block of code; None when the block is not all calls (and not ``strict``)."""
    code = code.strip()
    if not code:
        return []
    if len(code) > MAX_PARSE_CHARS:
        return [ToolCall("", {}, None, "the code block is too long to read as calls")]
    try:
        tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        renamed = _rename_keyword_arguments(code)
        tree = None
        if renamed is not None:
            with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
                tree = ast.parse(renamed, mode="exec")
        if tree is None:
            if not strict:
                return None
            return [ToolCall("", {}, None, f"not a Python call: {type(e).__name__}: {e}")]
    assert tree is not None
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(value, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Call) for e in value.elts
        ):
            nodes.extend(value.elts)
        elif isinstance(value, ast.Call):
            nodes.append(value)
        elif not strict:
            return None
        else:
            return [ToolCall("", {}, None, "only function calls like f(a=1) are allowed")]
    return [_python_call(node) for node in nodes]


_KEYWORDS = "|".join(keyword.kwlist)
_KEYWORD_ARG = re.compile(
    r"(?:[(,]\s*(?:" + _KEYWORDS + r")\s*=(?!=))|(?:\b(?:" + _KEYWORDS + r")\s*\()"
)
_KEYWORD_PREFIX = "__llmgym_kw_"


def _rename_keyword_arguments(code: str) -> str | None:
    """``code`` with parameters and functions named by a Python keyword (``f(from=1)``,
    ``api.import(x=1)``, which ``ast`` cannot read) renamed so it parses; :func:`_python_call`
    restores the names. None when none."""
    if not _KEYWORD_ARG.search(code):
        return None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    out = []
    for i, tok in enumerate(tokens):
        if (
            tok.type == tokenize.NAME
            and keyword.iskeyword(tok.string)
            and 0 < i < len(tokens) - 1
            and tokens[i - 1].string in ("(", ",")
            and tokens[i + 1].string == "="
        ) or (
            tok.type == tokenize.NAME
            and keyword.iskeyword(tok.string)
            and i < len(tokens) - 1
            and tokens[i + 1].string == "("
            and (i == 0 or tokens[i - 1].type != tokenize.NAME)
            and (
                i == 0
                or tokens[i - 1].string in ("(", ",", "[", ".", ";", "")
                or tokens[i - 1].type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT)
            )
        ):
            tok = tok._replace(string=_KEYWORD_PREFIX + tok.string)
        out.append(tok)
    try:
        return tokenize.untokenize(out)  # type: ignore[no-any-return]
    except ValueError:
        return None


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr.removeprefix(_KEYWORD_PREFIX))
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id.removeprefix(_KEYWORD_PREFIX))
    return ".".join(reversed(parts))


def _python_call(node: ast.expr) -> ToolCall:
    assert isinstance(node, ast.Call)
    name = _dotted(node.func)
    if name is None:
        return ToolCall("", {}, None, "the called object must be a plain function name")
    if node.args:
        return ToolCall(
            name, {}, None, f"{name}: positional arguments are not supported; pass name=value"
        )
    arguments: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return ToolCall(name, {}, None, f"{name}: **kwargs is not supported; pass name=value")
        arg = kw.arg.removeprefix(_KEYWORD_PREFIX)
        try:
            arguments[arg] = _literal(kw.value, 1)
        except _ParseError as e:
            return ToolCall(name, {}, None, f"{name}: argument {arg!r}: {e}")
    return ToolCall(name, arguments)


_NAMED_CONSTANTS = {"true": True, "false": False, "null": None, "none": None}


def _literal(node: ast.expr, depth: int) -> Any:
    """A JSON-like value from a literal expression; anything else is refused, never evaluated."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (str, int, float, bool)) or node.value is None:
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise _ParseError("numbers must be finite")
            return node.value
        raise _ParseError(f"{type(node.value).__name__} literals are not supported")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = node.operand
        number = inner.value if isinstance(inner, ast.Constant) else None
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return -number if isinstance(node.op, ast.USub) else number
        raise _ParseError("only numbers can carry a sign")
    if isinstance(node, ast.Name) and node.id.lower() in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[node.id.lower()]
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
        if depth > MAX_DEPTH:
            raise _ParseError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.Dict):
            out: dict[str, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise _ParseError("dict keys must be string literals")
                out[k.value] = _literal(v, depth + 1)
            return out
        return [_literal(e, depth + 1) for e in node.elts]
    raise _ParseError(
        f"{type(node).__name__} is not a literal (only strings, numbers, booleans, None, lists and dicts)"
    )


def _parse_openai(message: Any) -> list[ToolCall]:
    if not isinstance(message, Mapping):
        return []
    raw = message.get("tool_calls")
    if not isinstance(raw, (list, tuple)):
        return []
    calls = []
    for i, item in enumerate(raw):
        call_id = f"call_{i}"
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            call_id = item["id"]
        call = _call_from_object(item, call_id)
        calls.append(
            call
            if call is not None
            else ToolCall("", {}, call_id, f"tool_calls[{i}] needs function.name and arguments")
        )
    return calls


def parse_tool_calls(message: str | Mapping[str, Any], fmt: str = "auto") -> list[ToolCall]:
    """The tool calls in an assistant message (a string or an OpenAI-style dict).

    ``fmt`` is ``"hermes"``, ``"json"``, ``"python"``, ``"openai"`` or ``"auto"`` (OpenAI
    ``tool_calls`` if present, else Hermes tags, else JSON, else Python calls). A call that
    cannot be read comes back with ``error`` set, so the caller can tell the model why.
    An empty list means the message has no calls (a final answer).

    >>> parse_tool_calls('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>', "hermes")
    [ToolCall(name='f', arguments={'x': 1}, id=None, error=None)]
    >>> parse_tool_calls('[f(x=1), g(s="a")]', "python")[1].arguments
    {'s': 'a'}
    >>> parse_tool_calls("__import__('os').system('rm -rf /')", "python")[0].error is not None
    True
    """
    if fmt not in FORMATS:
        raise ValueError(f"Expects fmt in {FORMATS}, actual: {fmt!r}")
    if isinstance(message, Mapping):
        text = message.get("content")
        text = text if isinstance(text, str) else ""
    elif isinstance(message, str):
        text = message
    else:
        return []
    if fmt == "openai":
        calls = _parse_openai(message)
    elif fmt == "hermes":
        calls = _parse_hermes(text)
    elif fmt == "json":
        calls = _parse_json(text)
    elif fmt == "python":
        calls = _parse_python(text)
    else:
        calls = _parse_openai(message)
        if not calls and _HERMES_OPEN in text:
            calls = _parse_hermes(text)
        if not calls:
            calls = _parse_json(text)
        if not calls:
            calls = _parse_python(text)
    if len(calls) > MAX_CALLS:
        extra = len(calls) - MAX_CALLS
        calls = calls[:MAX_CALLS] + [
            ToolCall(
                "",
                {},
                None,
                f"too many calls in one message (at most {MAX_CALLS}); {extra}+ ignored",
            )
        ]
    return calls


def format_tool_calls(calls: Iterable[ToolCall | tuple[str, Mapping[str, Any]]], fmt: str) -> Any:
    """Calls written in a format: text for hermes/json/python, an assistant dict for openai.

    The inverse of :func:`parse_tool_calls` (what an oracle or a prompt example writes).

    >>> format_tool_calls([("f", {"x": 1})], "python")
    'f(x=1)'
    >>> parse_tool_calls(format_tool_calls([("f", {"x": [1, "a"]})], "hermes"), "hermes")[0].arguments
    {'x': [1, 'a']}
    """
    items = [c if isinstance(c, ToolCall) else ToolCall(c[0], dict(c[1])) for c in calls]
    if fmt == "openai":
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [c.to_openai(c.id or f"call_{i}") for i, c in enumerate(items)],
        }
    if fmt == "hermes":
        return "\n".join(
            f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments}, ensure_ascii=False)}\n</tool_call>"
            for c in items
        )
    if fmt == "json":
        objs = [{"name": c.name, "arguments": c.arguments} for c in items]
        return json.dumps(objs[0] if len(objs) == 1 else objs, ensure_ascii=False)
    if fmt == "python":
        return "\n".join(
            f"{c.name}({', '.join(f'{k}={_py_repr(v)}' for k, v in c.arguments.items())})"
            for c in items
        )
    raise ValueError(f"Expects fmt in {FORMATS[:4]}, actual: {fmt!r}")


def _py_repr(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{json.dumps(k, ensure_ascii=False)}: {_py_repr(v)}" for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py_repr(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


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
