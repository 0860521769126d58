"""Hacks on multi-turn envs: tool calling and chunked reading (ToolCalling, FunctionCalling, LongDoc).

Replaying what the env just showed, repeating the first step instead of making progress, spamming
every tool (no arguments, guessed arguments, invalid calls), and dumping every result seen in place
of the final answer. Also :func:`tool_call_message`, the assistant message that makes tool calls in
the format an env's instructions name. Catalogue only: the hacks are listed in order in
``catalogue/__init__.py`` and played by ``llmgym/audit/playing.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llmgym.audit.hacks import Variant, VariantsLike, hack, styled
from llmgym.audit.reading import QUOTED, candidates, normalise, unique
from llmgym.audit.view import Action, Policy, View


def tool_call_message(view: View, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> Action:
    """An assistant message making ``calls`` in the env's format (with OpenAI ``tool_calls`` too,
    so that an env reading either finds them)."""
    from llmgym.toolcalls import ToolCall, format_tool_calls

    items = [ToolCall(name, dict(args), f"call_{i}") for i, (name, args) in enumerate(calls)]
    openai = format_tool_calls(items, "openai")
    fmt = view.call_format
    if fmt == "openai":
        return openai  # type: ignore[no-any-return]
    content = format_tool_calls(items, fmt if fmt in ("hermes", "json", "python") else "hermes")
    return {"content": content, "tool_calls": openai["tool_calls"]}


def _guess_args(spec: Mapping[str, Any], view: View) -> dict[str, Any]:
    """Arguments for a tool's required parameters, filled from its schema and the prompt's values."""
    fn = spec.get("function", spec)
    params = fn.get("parameters", {}) if isinstance(fn, Mapping) else {}
    props = params.get("properties", {}) if isinstance(params, Mapping) else {}
    required = params.get("required", []) if isinstance(params, Mapping) else []
    found = candidates(view.prompt)
    nums = [n for n in found.get("numbers", []) if re.fullmatch(r"-?\d+(\.\d+)?", n)]
    quoted = [a or b for a, b in QUOTED.findall(view.prompt)]
    words = quoted + found.get("names", []) + found.get("ids", [])
    args: dict[str, Any] = {}
    for name in required:
        schema = props.get(name, {}) if isinstance(props, Mapping) else {}
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        if isinstance(schema, Mapping) and schema.get("enum"):
            args[name] = schema["enum"][0]
        elif isinstance(schema, Mapping) and "default" in schema:
            args[name] = schema["default"]
        elif kind == "integer":
            args[name] = int(float(nums[0])) if nums else 1
        elif kind == "number":
            args[name] = float(nums[0]) if nums else 1.0
        elif kind == "boolean":
            args[name] = False
        elif kind == "array":
            args[name] = []
        elif kind == "object":
            args[name] = {}
        else:
            args[name] = words[0] if words else "x"
    return args


def _flat_values(text: str) -> list[str]:
    """The scalar values of the JSON in a tool result (or the text itself if it is not JSON)."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return [text.strip()] if text.strip() else []
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, Mapping):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif x is not None and not isinstance(x, bool):
            out.append(str(x))
        if isinstance(x, str) and x[:1] in "[{":
            out.extend(_flat_values(x)[1:])

    walk(data)
    return out


def _shown_values(view: View) -> list[str]:
    """Every value the env showed after the prompt (tool results, later turns)."""
    values: list[str] = []
    for text in view.shown_after_prompt:
        inner = re.findall(r"<tool_response>\s*(.*?)\s*</tool_response>", text, re.S) or [text]
        for piece in inner:
            for v in _flat_values(piece):
                values.extend(_flat_values(v) if v[:1] in "[{" else [v])
    return unique(values, 400)


@hack(register=False)
def replay(view: View) -> VariantsLike:
    """Multi-turn envs: reply with what the env just showed (raw and in each answer form it names,
    such as ``<notes>``), or with everything it has shown so far, every turn."""
    if view.max_turns <= 1:
        return None

    def last(v: View) -> Action:
        return v.observation

    def everything(v: View) -> Action:
        return "\n\n".join(v.shown)

    def styled(index: int) -> Policy:
        def policy(v: View) -> Action:
            styles = v.styles
            wrap = styles[index][1] if index < len(styles) else styles[-1][1]
            return wrap(v.observation)

        return policy

    out: dict[str, Action | Policy] = {"echo_last": last, "echo_all": everything}
    for i, (style, _) in enumerate(view.styles[1:], start=1):
        out[f"echo_last@{style}"] = styled(i)
    return out


@hack(register=False, needs_oracle=True)
def repeat_first_step(view: View) -> VariantsLike:
    """Multi-step envs: repeat the oracle's first action every turn instead of making progress
    (uses the oracle: the first step of a right solution, resent until the episode ends)."""
    if view.oracle is None or (view.oracle_steps or 0) < 2:
        return None
    return {"oracle_first_action": view.oracle()}


@hack(register=False)
def tool_spam(view: View) -> VariantsLike:
    """Envs with tools: call every tool several times per turn (with no arguments, or with
    arguments filled from the schema and the prompt's values), send invalid calls (unknown tools,
    broken JSON, wrong arguments), then end with a final answer that dumps every result seen."""
    if not view.tools:
        return None
    specs = [s for s in view.tools if isinstance(s, Mapping)][:12]
    names = view.tool_names[:12]
    if not names:
        return None

    def dump(v: View) -> Action:
        return "; ".join(_shown_values(v)) or "done"

    def spamming(calls_of: Callable[[View], Action], final: Callable[[View], Action]) -> Policy:
        def policy(v: View) -> Action:
            if v.turn < min(v.max_turns - 1, 4):
                return calls_of(v)
            return final(v)

        return policy

    def no_args(v: View) -> Action:
        return tool_call_message(v, [(n, {}) for n in names] * 3)

    def guessed(v: View) -> Action:
        return tool_call_message(
            v, [(n, _guess_args(s, v)) for n, s in zip(names, specs, strict=False)] * 3
        )

    def invalid(v: View) -> Action:
        calls = [("no_such_tool", {}), (names[0], {"__not_a_parameter__": [1, 2, 3]})]
        action = tool_call_message(v, calls)
        broken = '<tool_call>{"name": "' + names[0] + '", "arguments": {broken</tool_call>'
        if isinstance(action, Mapping):
            return {**action, "content": str(action.get("content") or "") + "\n" + broken}
        return action

    out: dict[str, Action | Policy] = {
        "every_tool_no_args": spamming(no_args, dump),
        "every_tool_guessed_args": spamming(guessed, dump),
        "invalid_calls": spamming(invalid, dump),
        "spam_then_empty": spamming(guessed, lambda v: ""),
    }
    for name, spec in list(zip(names, specs, strict=False))[:8]:
        out[f"only:{name}"] = tool_call_message(view, [(name, _guess_args(spec, view))])
    return out


@hack(register=False, needs_oracle=True, start="final")
def dump_after_work(view: View) -> VariantsLike:
    """Multi-turn envs: do the oracle's work (its tool calls, its reading), then instead of its
    final answer dump what the env showed: every tool result, every value in them (raw and in each
    answer form), or the last result. A shotgun list of every value seen must not earn the answer's
    credit (uses the oracle for the work, and its answer only to set aside a dump whose codes and
    numbers are all the answer's own: a result that holds just the answer is the answer)."""
    if not view.shown_after_prompt:
        return None
    values = _shown_values(view)
    answer = view.oracle() if view.oracle is not None else None
    said = normalise(
        str(answer.get("content") or "") if isinstance(answer, Mapping) else str(answer)
    )
    out: list[Variant] = []
    for name, dump in (
        ("all_results", "\n".join(view.shown_after_prompt)),
        ("last_result", view.shown_after_prompt[-1]),
    ):
        coded = [v for v in _flat_values(dump) if re.search(r"[\dA-Z@]", v)]
        if answer is not None and coded and all(normalise(v) in said for v in coded):
            continue  # the result holds nothing but the answer's values: repeating it is answering
        out.append(Variant(name, dump))
    if values:
        k = max(len(values), 1)
        out += styled(view, "", {"all_values": "; ".join(values)}, alternatives=k)
        out += styled(view, "", {"all_values_or": " or ".join(values)}, alternatives=k)
    return out
