"""BFCL's Java and JavaScript categories: argument values are code strings, read as BFCL reads them.

In ``simple_java`` and ``simple_javascript`` the model sees every parameter typed ``string``
(with the Java/JavaScript type in its description) and passes code: ``"42L"``, ``"true"``,
``'new ArrayList<>(Arrays.asList("a", "b"))'``, ``"{'k': 1}"``. BFCL converts each string with
its ``java_type_converter`` / ``js_type_converter`` into a Python value and then applies its usual
AST rules; :func:`convert_calls` does the same conversion (a port of those converters, regular
expressions unchanged, so the values and verdicts are BFCL's), and :func:`literal` writes a
gold value back as code for the oracle. Text longer than :data:`MAX_CODE_CHARS` is left as the
string it is (the converters' patterns backtrack on long input; no gold value is that long).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from llmgym.toolcalls import ToolCall

MAX_CODE_CHARS = 4096

JAVA_TYPES = {
    "byte": "integer",
    "short": "integer",
    "integer": "integer",
    "long": "integer",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "char": "string",
    "Array": "array",
    "ArrayList": "array",
    "Set": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "String": "string",
    "any": "string",
}
"""BFCL's ``JAVA_TYPE_CONVERSION`` in JSON-schema words: what a converted value must be."""
JS_TYPES = {
    "String": "string",
    "integer": "integer",
    "float": "number",
    "Bigint": "integer",
    "Boolean": "boolean",
    "dict": "object",
    "array": "array",
    "any": "string",
}
"""BFCL's ``JS_TYPE_CONVERSION`` in JSON-schema words."""
_UNSUPPORTED = {"Set", "Hashtable", "Queue", "Stack"}  # BFCL raises NotImplementedError on these
LANGUAGE_TYPES = {"java": JAVA_TYPES, "javascript": JS_TYPES}


class Unconvertible(ValueError):
    """BFCL's converter fails on this value (an unsupported type): the call cannot fit."""


# --- Java (bfcl_eval/eval_checker/ast_eval/type_convertor/java_type_converter.py) -------------


def java_value(value: str, kind: str, item: str | None = None) -> Any:
    """A Java code string as BFCL reads it for a parameter of Java type ``kind``.

    >>> java_value("42L", "long"), java_value("true", "boolean"), java_value("3.5f", "float")
    (42, True, 3.5)
    >>> java_value('new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String")
    ['a', 'b']
    """
    if kind not in JAVA_TYPES:
        raise Unconvertible(f"unsupported Java type {kind!r}")
    if len(value) > MAX_CODE_CHARS:
        return value
    if kind in ("byte", "short", "integer"):
        return int(value) if re.match(r"^-?\d+$", value) else value
    if kind == "float":
        if not re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$", value):
            return value
        return float(re.sub(r"[fF]$", "", value))
    if kind == "double":
        return float(value) if re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$", value) else value
    if kind == "long":
        return int(re.sub(r"[lL]$", "", value)) if re.match(r"^-?\d+[lL]$", value) else value
    if kind == "boolean":
        return value == "true" if value in ("true", "false") else value
    if kind in ("char", "String", "any"):
        return value  # BFCL's char pattern never matches: a char stays the string it is
    if kind == "ArrayList":
        return _java_arraylist(value, item)
    if kind == "Array":
        return _java_array(value, item)
    if kind == "HashMap":
        return _java_hashmap(value)
    raise Unconvertible(f"BFCL does not convert the Java type {kind!r}")


def _java_element(text: str, item: str | None) -> Any:
    if item in ("char", "String"):
        return text[1:-1]  # quotes removed
    return java_value(text, item) if item else _java_literal_value(text)


def _java_arraylist(value: str, item: str | None) -> Any:
    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", value)
    if m:
        return [_java_element(e.strip(), item) for e in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", value, re.DOTALL)
    if m:
        return [_java_element(e.strip(), item) for e in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", value):
        return []
    return value


def _java_array(value: str, item: str | None) -> Any:
    m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", value)
    if not m:
        return value
    parts = [x.strip() for x in m.group(1).split(",") if x.strip()]
    return [java_value(x, item) if item else _java_literal_value(x) for x in parts]


def _java_hashmap(value: str) -> Any:
    m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", value, re.DOTALL)
    if m:
        puts = m.group(1)
        found = re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", puts) if puts.strip() else []
        return {k: _java_literal_value(v.strip()) for k, v in found}
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", value):
        return {}
    return value


def _java_literal_value(text: str) -> Any:
    """BFCL's ``parse_java_value``: a Java literal without a declared type."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if re.match(r"^-?\d+[lL]$", text):
        return int(text[:-1])
    if re.match(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$", text):
        return float(re.sub(r"[fF]$", "", text))
    for number in (int, float):
        with contextlib.suppress(ValueError):
            return number(text)
    return text


# --- JavaScript (bfcl_eval/eval_checker/ast_eval/type_convertor/js_type_converter.py) -----------


def js_value(value: str, kind: str, item: str | None = None) -> Any:
    """A JavaScript code string as BFCL reads it for a parameter of JS type ``kind``.

    >>> js_value("123n", "Bigint"), js_value("[1, 'two', true]", "array")
    (123, [1, 'two', True])
    >>> js_value("{'key': 123}", "dict")
    {'key': 123}
    """
    if kind not in JS_TYPES:
        raise Unconvertible(f"unsupported JavaScript type {kind!r}")
    if len(value) > MAX_CODE_CHARS:
        return value
    if kind == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (
            value.startswith("'") and value.endswith("'")
        )
        return value[1:-1] if quoted else value
    if kind == "integer":
        return int(value) if re.match(r"^-?\d+$", value) else value
    if kind == "float":
        return float(value) if re.match(r"^-?\d+(\.\d+)?$", value) else value
    if kind == "Bigint":
        return int(value[:-1]) if re.match(r"^-?\d+n$", value) else value
    if kind == "Boolean":
        return value == "true" if value in ("true", "false") else value
    if kind == "dict":
        return _js_collection(value, "dict", item)
    if kind == "array":
        return _js_collection(value, "array", item)
    return value  # any


def _js_collection(code: str, kind: str, item: str | None = None) -> Any:
    code = code.strip()
    if kind == "array":
        pattern_2d = (
            r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)"
        )
        try:
            m = re.match(pattern_2d, code)
            if m:
                rows = []
                for i, inner in enumerate(re.findall(r"\[(.*?)\]", m.group(0))):
                    inner = inner.strip()
                    if i == 0 and inner.startswith("["):
                        inner = inner[1:]
                    rows.append([_js_literal_value(e.strip()) for e in inner.split(",")])
                return rows
            m = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
            if not m:
                return code
            body = m.group(1) if m.group(1) is not None else m.group(2)
            body = (body or "").strip()
            elements = body.split(",") if body else []
            if item:
                return [js_value(e.strip(), item) for e in elements]
            return [_js_literal_value(e.strip()) for e in elements]
        except (ValueError, IndexError):
            return code
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    out: dict[str, Any] = {}
    for key, value in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
        key, value = key.strip().strip("'\""), value.strip()
        if value.startswith("[") and value.endswith("]"):
            out[key] = _js_collection(value, "array")
        elif value.startswith("{") and value.endswith("}"):
            out[key] = _js_collection(value, "dict")
        else:
            out[key] = _js_literal_value(value.strip("'\""))
    return out


def _js_literal_value(text: str) -> Any:
    """BFCL's ``parse_js_value``: a JavaScript literal without a declared type."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if (text.startswith('"') and text.endswith('"')) or (
        text.startswith("'") and text.endswith("'")
    ):
        return text[1:-1]
    for number in (int, float):
        with contextlib.suppress(ValueError):
            return number(text)
    return text


# --- calls ----------------------------------------------------------------------------------------


def grading_functions(functions: list[Mapping[str, Any]], language: str) -> list[dict[str, Any]]:
    """The function docs with each Java/JS type replaced by the JSON type its converted value
    must have (what :func:`llmgym.rewards.tools.ast_match` checks after :func:`convert_calls`)."""
    words = LANGUAGE_TYPES[language]
    out = []
    for fn in functions:
        params = fn.get("parameters", {})
        props: dict[str, Any] = {}
        for name, schema in params.get("properties", {}).items():
            kind = schema.get("type")
            prop: dict[str, Any] = {"type": words.get(kind, kind)}
            item = (schema.get("items") or {}).get("type")
            if kind in ("Array", "ArrayList", "array") and item is not None:
                prop["items"] = {"type": words.get(item, item)}
            props[name] = prop
        out.append(
            {
                "name": fn["name"],
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": list(params.get("required", [])),
                },
            }
        )
    return out


def convert_calls(
    calls: list[ToolCall], functions: list[Mapping[str, Any]], language: str
) -> list[ToolCall]:
    """Calls with their code-string arguments converted as BFCL converts them (``functions``:
    BFCL's docs with the Java/JS types). A non-string argument, or one of a type BFCL cannot
    convert, makes the call an error (BFCL: "Incorrect type ... Expected type String")."""
    docs = {f["name"]: f.get("parameters", {}).get("properties", {}) for f in functions}
    convert = java_value if language == "java" else js_value
    out = []
    for call in calls:
        props = docs.get(call.name)
        if call.error is not None or props is None:
            out.append(call)
            continue
        args: dict[str, Any] = {}
        problem = None
        for key, value in call.arguments.items():
            schema = props.get(key)
            if not isinstance(schema, Mapping):
                args[key] = value  # an unknown parameter: the match says so
                continue
            kind = str(schema.get("type"))
            if not isinstance(value, str):
                problem = f"{call.name}: argument {key!r} must be a string of {language} code"
                break
            item = (schema.get("items") or {}).get("type")
            nested = item if kind in ("Array", "ArrayList", "array") else None
            try:
                args[key] = convert(value, kind, nested)
            except (Unconvertible, ValueError, IndexError, RecursionError):
                problem = f"{call.name}: argument {key!r} cannot be read as {language} {kind}"
                break
        out.append(
            ToolCall(call.name, {}, call.id, problem)
            if problem
            else call.__class__(call.name, args, call.id)
        )
    return out


# --- the oracle's code ----------------------------------------------------------------------------


def _number(value: float) -> str:
    """A float written without an exponent (what BFCL's number patterns accept)."""
    text = format(Decimal(repr(float(value))), "f")
    return text if "." in text else text + ".0"


def literal(value: Any, kind: str, item: str | None, language: str) -> str:
    """A gold value written as the code string that BFCL's converter reads back as that value.

    >>> literal(42, "long", None, "java"), literal(["a", "b"], "ArrayList", "String", "java")
    ('42L', 'new ArrayList<>(Arrays.asList("a", "b"))')
    >>> literal({"k": 1}, "dict", None, "javascript")
    "{'k': 1}"
    """
    if isinstance(value, str):
        return value  # strings, and variables named by a string, are written as they are
    if language == "java":
        return _java_literal(value, kind, item)
    return _js_literal(value, kind, item)


def _java_scalar(value: Any, kind: str | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long" and isinstance(value, int):
        return f"{value}L"
    if kind == "float" and isinstance(value, (int, float)):
        return _number(value) + "f"
    if kind == "double" and isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, float) and math.isfinite(value):
        return _number(value)
    if isinstance(value, str) and kind in ("String", "char", None):
        return json.dumps(value) if kind is None or kind == "String" else f"'{value}'"
    return str(value)


def _java_literal(value: Any, kind: str, item: str | None) -> str:
    if kind == "ArrayList" and isinstance(value, list):
        if not value:
            return "new ArrayList<>()"
        return f"new ArrayList<>(Arrays.asList({', '.join(_java_item(v, item) for v in value)}))"
    if kind == "Array" and isinstance(value, list):
        # BFCL does not unquote an Array's elements: strings go in bare
        parts = ", ".join(
            v if isinstance(v, str) and item in ("String", "char", "any") else _java_scalar(v, item)
            for v in value
        )
        return f"new {'Object' if item in (None, 'any') else item}[]{{{parts}}}"
    if kind == "HashMap" and isinstance(value, Mapping):
        puts = " ".join(
            f"put({json.dumps(str(k))}, {_java_scalar(v, None)});" for k, v in value.items()
        )
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return _java_scalar(value, kind)


def _java_item(value: Any, item: str | None) -> str:
    """An ArrayList element: quoted for String/char (BFCL strips the quotes), verbatim for
    ``any`` (BFCL keeps the element's text), else a literal of the element type."""
    if item in ("String", "char"):
        return json.dumps(str(value))
    if item == "any":
        return value if isinstance(value, str) else java_text(value)
    return _java_scalar(value, item)


def java_text(value: Any) -> str:
    """A scalar as Java code writes it (``true``, ``42``, ``2.5``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _number(value) if isinstance(value, float) else str(value)


def _js_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return "'" + value + "'"
    if isinstance(value, list):
        return "[" + ", ".join(_js_scalar(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"'{k}': {_js_scalar(v)}" for k, v in value.items()) + "}"
    return str(value)


def _js_literal(value: Any, kind: str, item: str | None) -> str:
    if kind == "Bigint" and isinstance(value, int):
        return f"{value}n"
    return _js_scalar(value)
