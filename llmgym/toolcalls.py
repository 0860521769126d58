"""The tool-call protocol: read calls from model output and write them in a model's format (the
specs and argument validation are :mod:`llmgym.toolspecs`).

The core holds it because envs, the audit, the agents and the reward that grades calls
(:mod:`llmgym.rewards.tools`, which re-exports these names) all speak it. Covered: four call
formats (Hermes ``<tool_call>`` tags, bare JSON, Python-call syntax read with :mod:`ast` and never
evaluated, OpenAI ``tool_calls`` dicts). Not covered: positional arguments in Python calls (the
spec's parameter order is not part of a call's meaning).

Every parser here is bounded: text past :data:`MAX_PARSE_CHARS`, an argument blob past
:data:`MAX_ARGUMENT_CHARS`, values nested deeper than :data:`MAX_DEPTH` or more than
:data:`MAX_CALLS` calls give a :class:`ToolCall` whose ``error`` says so, never an exception.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import keyword
import math
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

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


__all__ = [
    "FORMATS",
    "MAX_ARGUMENT_CHARS",
    "MAX_CALLS",
    "MAX_DEPTH",
    "MAX_PARSE_CHARS",
    "ToolCall",
    "format_tool_calls",
    "parse_tool_calls",
    "value_depth",
]
