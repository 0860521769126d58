"""Conformance with BFCL's own checkers: gold and perturbed answers, each judged by llmgym and by BFCL.

``ast_cases`` turns each ``ast`` task into its reference calls and perturbations of them
(other acceptable values, a dropped or extra parameter, a changed value or type, a wrong name,
calls reordered, missing or repeated); ``multi_turn_cases`` turns each multi-turn task into its
ground-truth trajectory and perturbations (calls split over steps, dropped, changed, repeated,
swapped, moved to another turn, extra calls, calls in a turn that needs none). The llmgym
verdicts come from :func:`llmgym.envs.tools.function_calling.match_calls` and from playing the
trajectory in ``llm/FunctionCalling-v0``; BFCL's from its ``ast_checker`` and
``multi_turn_checker`` (:mod:`llmgym.envs.tools.bfcl.peer`), given the same calls and possible
answers. Used by ``tests/envs/test_tools_bfcl_conformance.py`` and ``benchmarks/tools.py``.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from llmgym.envs.tools.bfcl import peer
from llmgym.envs.tools.bfcl.datasets import category_of, data_file, language_of
from llmgym.envs.tools.bfcl.multi_turn import MAX_STEPS_PER_TURN, Session, gold_call
from llmgym.envs.tools.function_calling import match_calls, oracle_calls
from llmgym.tasks import Task, read_jsonl, stable_seed
from llmgym.toolcalls import ToolCall, format_tool_calls


@dataclass(frozen=True)
class AstCase:
    """Calls (``[{name: {args}}]``, BFCL's decoded form) to judge against an ``ast`` task."""

    task: Task
    label: str
    calls: list[dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class MultiTurnCase:
    """A trajectory for a multi-turn task: per turn, per step, Python call strings."""

    task: Task
    label: str
    turns: list[list[list[str]]]


# --- AST -----------------------------------------------------------------------------------------


def _changed(value: Any, code: bool) -> list[Any]:
    """Values near ``value`` that a model might write instead."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, float(value), str(value)]
    if isinstance(value, float):
        return [value + 1.5, str(value)] + ([int(value)] if value.is_integer() else [])
    out: list[Any]
    if isinstance(value, str):
        out = [value + "x", value.upper(), " " + value.replace(" ", "_") + ".", ""]
        if code:
            out += [
                value.strip('"'),
                f'"{value}"',
                value.rstrip("LlFfn"),
                value.replace("true", "false"),
            ]
        return out
    if isinstance(value, list):
        out = [list(reversed(value)), value[:-1], value + value[:1]]
        if value and isinstance(value[0], str):
            out.append([s.upper() for s in value])
        if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            out.append([float(v) for v in value])
        return out
    if isinstance(value, Mapping):
        out = []
        for key in list(value)[:2]:
            out.append({k: v for k, v in value.items() if k != key})
            near = _changed(value[key], code)
            if near:
                out.append({**value, key: near[0]})
        out.append({**value, "unexpected_key": 1})
        return out
    return []


def ast_cases(task: Task) -> Iterator[AstCase]:
    """The reference calls of an ``ast`` task and perturbations of them."""
    code = bool(task.metadata.get("language"))
    base = [{c.name: dict(c.arguments)} for c in oracle_calls(task)]
    yield AstCase(task, "gold", base)
    if not code:  # every acceptable value of each parameter (code tasks: written by the oracle)
        for i, entry in enumerate(task.answer["ground_truth"]):
            ((name, params),) = entry.items()
            for key, options in params.items():
                for option in (options if isinstance(options, list) else [])[1:3]:
                    calls = copy.deepcopy(base)
                    if option == "":
                        calls[i][name].pop(key, None)
                        yield AstCase(task, "omit optional", calls)
                    elif not isinstance(option, (Mapping, list)):
                        calls[i][name][key] = option
                        yield AstCase(task, "other acceptable value", calls)
    for i, call in enumerate(base):
        ((name, args),) = call.items()
        for key, value in args.items():
            calls = copy.deepcopy(base)
            del calls[i][name][key]
            yield AstCase(task, "drop parameter", calls)
            for near in _changed(value, code):
                calls = copy.deepcopy(base)
                calls[i][name][key] = near
                yield AstCase(task, "change value", calls)
        calls = copy.deepcopy(base)
        calls[i] = {name + "_x": args}
        yield AstCase(task, "wrong name", calls)
        calls = copy.deepcopy(base)
        calls[i][name]["unexpected_param"] = "1" if code else 1
        yield AstCase(task, "extra parameter", calls)
    if len(base) > 1:
        yield AstCase(task, "reorder calls", list(reversed(base)))
        yield AstCase(task, "missing call", base[:-1])
    yield AstCase(task, "repeated call", base + base[:1])


@cache
def _raw_functions(category: str) -> dict[str, list[dict[str, Any]]]:
    """BFCL's own function docs (its type words) of each task of a category."""
    return {r["id"]: r["function"] for r in read_jsonl(data_file(category))}


def bfcl_ast(case: AstCase) -> bool:
    """BFCL's ``ast_checker`` verdict (a crash of the checker counts as a failure)."""
    checker = peer.ast_checker()
    source = case.task.metadata.get("source", case.task.id)
    category = category_of(source)
    language = {"java": "JAVA", "javascript": "JAVASCRIPT"}.get(language_of(category), "PYTHON")
    try:
        result = checker(
            _raw_functions(category)[source],
            copy.deepcopy(case.calls),
            copy.deepcopy(case.task.answer["ground_truth"]),
            checker.Language[language],
            source if case.task.family == "format_sensitivity" else category,
            "llmgym",
        )
    except Exception:  # noqa: BLE001 - the peer's own bugs count as a rejection
        return False
    return bool(result["valid"])


def llmgym_ast(case: AstCase) -> bool:
    """llmgym's verdict on the same calls (the env's ``ast`` grading)."""
    calls = [ToolCall(n, a) for c in case.calls for n, a in c.items()]
    return match_calls(case.task, calls).matched


# --- multi-turn ----------------------------------------------------------------------------------


def _text(call: ToolCall) -> str:
    return str(format_tool_calls([call], "python"))


def multi_turn_cases(task: Task) -> Iterator[MultiTurnCase]:
    """The ground-truth trajectory of a multi-turn task and perturbations of it."""
    classes = task.metadata["involved_classes"]
    gold = [[gold_call(c, classes) for c in turn] for turn in task.answer["ground_truth"]]
    rng = random.Random(stable_seed("bfcl-conformance", task.id))
    plain = [[[_text(c) for c in turn]] if turn else [] for turn in gold]
    yield MultiTurnCase(task, "gold", plain)
    yield MultiTurnCase(task, "one call a step", [[[_text(c)] for c in turn] for turn in gold])
    busy = [i for i, turn in enumerate(gold) if turn]
    empty = [i for i, turn in enumerate(gold) if not turn]

    def edit(label: str, change: Any) -> MultiTurnCase:
        turns = [[_text(c) for c in turn] for turn in gold]
        change(turns)
        return MultiTurnCase(task, label, [[t] if t else [] for t in turns])

    t = rng.choice(busy)
    yield edit("drop last call", lambda ts: ts[t].pop())
    yield edit("skip a turn", lambda ts: ts[t].clear())
    yield edit(
        "extra call to an unknown function", lambda ts: ts[t].append("no_such_function(x=1)")
    )
    yield edit("repeat a call", lambda ts: ts[t].append(ts[t][-1]))
    if len(gold[t]) > 1:
        yield edit("swap two calls", lambda ts: ts[t].__setitem__(slice(0, 2), ts[t][1::-1]))
    later = [i for i in busy if i > t]
    if later:
        u = later[0]
        yield edit("call a turn early", lambda ts: ts[t].append(ts[u].pop(0)))
    if empty:
        e = empty[0]
        nxt = next((i for i in busy if i > e), None)
        if nxt is not None:
            yield edit("act in a turn that needs no call", lambda ts: ts[e].extend(ts[nxt]))
    for label, new in _argument_edits(gold[t], rng):
        yield edit(label, lambda ts, new=new: ts[t].__setitem__(new[0], new[1]))


def _argument_edits(turn: Sequence[ToolCall], rng: random.Random) -> Iterator[tuple[str, Any]]:
    """(label, (index, new call text)) for a changed string and a changed number argument."""
    for i, call in enumerate(turn):
        strings = [k for k, v in call.arguments.items() if isinstance(v, str)]
        if strings:
            key = rng.choice(strings)
            args = {**call.arguments, key: call.arguments[key] + "_x"}
            yield "change a string argument", (i, _text(ToolCall(call.name, args)))
            break
    for i, call in enumerate(turn):
        numbers = [
            k
            for k, v in call.arguments.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if numbers:
            key = rng.choice(numbers)
            args = {**call.arguments, key: call.arguments[key] + 1}
            yield "change a number argument", (i, _text(ToolCall(call.name, args)))
            break


_runs = itertools.count()


def bfcl_multi_turn(case: MultiTurnCase) -> bool:
    """BFCL's verdict on the trajectory: its inference loop's step limit (more than 20 steps
    with calls in one turn end the entry, which then fails), then its ``multi_turn_checker``."""
    if any(len(turn) > MAX_STEPS_PER_TURN for turn in case.turns):
        return False
    checker = peer.multi_turn_checker()
    meta = case.task.metadata
    entry = {
        "id": case.task.id,
        "initial_config": copy.deepcopy(meta["initial_config"]),
        "involved_classes": list(meta["involved_classes"]),
    }
    model = f"llmgymconformance{next(_runs)}"
    try:
        result = checker(
            copy.deepcopy(case.turns),
            copy.deepcopy(case.task.answer["ground_truth"]),
            entry,
            meta["category"],
            model,
        )
        return bool(result["valid"])
    except Exception:  # noqa: BLE001 - the peer's own bugs count as a rejection
        return False
    finally:
        peer.forget_peer_instances(model)


def llmgym_multi_turn(case: MultiTurnCase, env: Any) -> bool:
    """llmgym's verdict: the trajectory played in ``env`` (a FunctionCalling env, any call
    format), each turn's steps then a message without calls to end the turn."""
    base = env.unwrapped
    base.reset(options={"task": case.task})
    classes = case.task.metadata["involved_classes"]
    info: dict[str, Any] = {}
    for turn in case.turns:
        for step in turn:
            action = format_tool_calls([_decoded(c, classes) for c in step], base.call_format)
            _, _, terminated, truncated, info = base.step(action)
            if terminated or truncated:
                return bool(info.get("is_success"))
        _, _, terminated, truncated, info = base.step("Done.")
        if terminated or truncated:
            return bool(info.get("is_success"))
    return False


def llmgym_multi_turn_checker(case: MultiTurnCase) -> bool:
    """llmgym's verdict from its checker alone (:class:`llmgym.envs.tools.bfcl.multi_turn.Session`
    fed the decoded calls, as BFCL's checker is): the same verdict as playing the env, without
    the env's prompts, parsing and messages."""
    meta = case.task.metadata
    gold = case.task.answer["ground_truth"]
    session = Session(meta, gold)
    classes = meta["involved_classes"]
    for turn, steps in enumerate(case.turns):
        for step in steps:
            session.run_model([_decoded(c, classes) for c in step])
            if session.steps > MAX_STEPS_PER_TURN:
                return False
        if session.end_turn(gold[turn], bool(steps)) is not None:
            return False
    return True


def _decoded(text: str, classes: Sequence[str]) -> ToolCall:
    try:
        return gold_call(text, classes)
    except Exception:  # noqa: BLE001 - a call no backend defines runs as BFCL's NameError
        return ToolCall(text.split("(", 1)[0].strip(), {})


def describe(case: AstCase | MultiTurnCase) -> str:
    """A one-line account of a case, for reports of disagreements."""
    body = case.calls if isinstance(case, AstCase) else case.turns
    return f"{case.task.id} [{case.label}] {json.dumps(body, ensure_ascii=False)[:300]}"
