"""BFCL datasets: every category of the Berkeley Function Calling Leaderboard's data as llmgym tasks.

A question file (``BFCL_v4_<category>.json``: one JSON object a line with ``id``, ``question``
and ``function`` or ``involved_classes``) and its possible answers (``possible_answer/<same
name>``) become tasks of one family per category, the category read from the id as BFCL reads
it (``live_simple_3-2-1`` -> ``live_simple``). Each category is one of five kinds
(``task.metadata["kind"]``):

- ``ast``: simple, multiple, parallel, parallel_multiple, their ``live_`` versions,
  ``simple_java``/``simple_javascript`` (arguments are code strings, read as BFCL reads them:
  :mod:`llmgym.envs.tools.bfcl.languages`) and ``format_sensitivity`` (its ids file names tasks of
  the other categories); graded by AST match against the possible answers.
- ``irrelevance`` (irrelevance, live_irrelevance): no offered function fits; the right reply
  calls none.
- ``relevance`` (live_relevance): a function fits; the right reply calls one (BFCL checks
  that a call is made, not its arguments).
- ``multi_turn`` (multi_turn_base, _miss_func, _miss_param, _long_context): several user
  turns run against BFCL's stateful backends (:mod:`llmgym.envs.tools.bfcl.multi_turn`).
- ``agentic`` (memory, web_search): tool use, then a final answer that must state the answer.

The files come from a path, from records, or (a bare category name) from the installed
``bfcl-eval`` package (:mod:`llmgym.envs.tools.bfcl.peer`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.tasks import Task, read_jsonl

CATEGORY_DIFFICULTY = {
    "simple": 0.2,
    "simple_python": 0.2,
    "simple_java": 0.3,
    "simple_javascript": 0.3,
    "multiple": 0.4,
    "parallel": 0.6,
    "parallel_multiple": 0.8,
    "live_simple": 0.3,
    "live_multiple": 0.5,
    "live_parallel": 0.7,
    "live_parallel_multiple": 0.85,
    "irrelevance": 0.3,
    "live_irrelevance": 0.4,
    "live_relevance": 0.3,
    "format_sensitivity": 0.5,
    "multi_turn_base": 0.7,
    "multi_turn_miss_func": 0.85,
    "multi_turn_miss_param": 0.85,
    "multi_turn_long_context": 0.9,
    "memory": 0.9,
    "web_search": 0.95,
}
CATEGORIES = tuple(c for c in CATEGORY_DIFFICULTY if c != "simple")
"""The categories of the data shipped in bfcl-eval (``BFCL_v4_<category>.json``)."""

FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
"""Backend class -> its function docs in ``multi_turn_func_doc/`` (BFCL's mapping)."""
MEMORY_BACKEND = "MemoryAPI_kv"
"""The memory backend of the ``memory`` category (BFCL's ``memory_kv``: key-value, BM25 search)."""

AGENTIC_ANSWER_FORMAT = (
    "For your final answer to the user, you must respond in this format: {'answer': A short and "
    "precise answer to the question, 'context': A brief explanation of how you arrived at this "
    "answer or why it is correct}. If you do not know the answer, respond with {'answer': 'I do "
    "not know', 'context': 'I do not know'}. If you think the question cannot be properly "
    "answered, response with {'answer': 'I cannot answer this question', 'context': A short "
    "reason explaining why this question cannot be answered}.\n"
)
"""BFCL's ``ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT``, put before agentic questions."""

_GORILLA_TO_OPENAPI = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
    "int": "integer",
    "str": "string",
}
"""BFCL's ``GORILLA_TO_OPENAPI`` (``any`` is a string to BFCL), plus ``int`` and ``str``."""


def category_of(record_id: str) -> str:
    """The BFCL category named by an id, as BFCL's ``extract_test_category_from_id`` reads it.

    >>> category_of("parallel_multiple_12"), category_of("live_simple_3-2-1")
    ('parallel_multiple', 'live_simple')
    >>> category_of("memory_4-customer-4"), category_of("format_sensitivity_7:ret_fmt=json:simple_2")
    ('memory', 'format_sensitivity')
    """
    head, _, tail = record_id.split(":", 1)[0].rpartition("_")
    return head if head and tail[:1].isdigit() else record_id


def kind_of(category: str) -> str:
    """How a category is played and graded: ``ast``, ``irrelevance``, ``relevance``,
    ``multi_turn`` or ``agentic``.

    >>> [kind_of(c) for c in ("live_simple", "live_irrelevance", "live_relevance", "memory")]
    ['ast', 'irrelevance', 'relevance', 'agentic']
    """
    if "irrelevance" in category:
        return "irrelevance"
    if "relevance" in category:
        return "relevance"
    if category.startswith("multi_turn"):
        return "multi_turn"
    if category.startswith(("memory", "web_search")):
        return "agentic"
    return "ast"


def language_of(category: str) -> str:
    """``java``, ``javascript`` or ``python``: the language of a category's arguments."""
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


def openai_schema(schema: Any) -> Any:
    """A BFCL parameter schema in JSON-schema words, as BFCL shows it to function-calling
    models (``dict`` -> ``object``, ``float`` -> ``number``, ``any`` -> ``string``...).

    >>> openai_schema({"type": "dict", "properties": {"x": {"type": "float"}}})
    {'type': 'object', 'properties': {'x': {'type': 'number'}}}
    """
    if isinstance(schema, list):
        return [openai_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = _GORILLA_TO_OPENAPI.get(value, value)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {k: openai_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = openai_schema(value)
        else:
            out[key] = value
    return out


def function_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function doc with its parameter (and response) schemas in JSON-schema words."""
    out = dict(doc)
    out["parameters"] = openai_schema(doc.get("parameters", {"type": "object", "properties": {}}))
    if isinstance(doc.get("response"), Mapping):
        out["response"] = openai_schema(doc["response"])
    return out


# --- files ---------------------------------------------------------------------------------------


def data_file(category: str) -> Path:
    """The question file of a category in the installed ``bfcl-eval`` package."""
    from llmgym.envs.tools.bfcl.peer import data_dir

    path = data_dir() / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise error.InvalidTask(f"No BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    return path


def _path(source: str | Path) -> Path:
    path = Path(source)
    if path.is_file():
        return path
    if isinstance(source, str) and source in CATEGORY_DIFFICULTY and "/" not in source:
        return data_file(source)
    raise error.InvalidTask(f"No such BFCL file: {path}")


def _records(source: str | Path | Iterable[Mapping[str, Any]]) -> list[Any]:
    if not isinstance(source, (str, Path)):
        return list(source)
    path = _path(source)
    text = path.read_text(encoding="utf-8").strip()
    if text.startswith("[") or (text.startswith("{") and "\n" in text and not _jsonl(text)):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise error.InvalidTask(f"{path}: not valid JSON: {e.msg}") from None
        return list(data) if isinstance(data, list) else [data]
    return list(read_jsonl(path))


def _jsonl(text: str) -> bool:
    try:
        json.loads(text.split("\n", 1)[0])
        return True
    except json.JSONDecodeError:
        return False


@lru_cache(maxsize=64)
def _jsonl_file(path: Path) -> tuple[dict[str, Any], ...]:
    """A JSONL file's records, read once (function docs and conversations many tasks share;
    callers copy what they change)."""
    return tuple(read_jsonl(path))


def _answers_beside(questions: Path) -> Path | None:
    candidate = questions.parent / "possible_answer" / questions.name
    return candidate if candidate.is_file() else None


def _data_dirs(questions: Any) -> list[Path]:
    """Where to look for ``multi_turn_func_doc/`` and the other files beside the questions."""
    dirs = []
    if isinstance(questions, (str, Path)):
        dirs.append(_path(questions).parent)
    from llmgym.envs.tools.bfcl.peer import data_dir, installed

    if installed():
        dirs.append(data_dir())
    return dirs


def _beside(dirs: Sequence[Path], relative: str) -> Path:
    for d in dirs:
        if (d / relative).is_file():
            return d / relative
    raise error.InvalidTask(
        f"BFCL file {relative} not found beside the questions"
        + ("" if dirs else " (and bfcl-eval is not installed)")
    )


# --- tasks ---------------------------------------------------------------------------------------


def _messages(question: Any) -> list[list[dict[str, Any]]]:
    """The question as turns of messages (a string is one user message)."""
    if isinstance(question, str):
        return [[{"role": "user", "content": question}]]
    if isinstance(question, list) and question and all(isinstance(m, Mapping) for m in question):
        question = [question]
    if not (isinstance(question, list) and all(isinstance(t, list) for t in question)):
        raise ValueError("question must be a string or a list of turns of messages")
    turns = []
    for turn in question:
        if not all(isinstance(m, Mapping) for m in turn):
            raise ValueError("every message must be an object with role and content")
        turns.append(
            [
                {"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                for m in turn
            ]
        )
    return turns


def _text(turn: Sequence[Mapping[str, Any]]) -> str:
    parts = [str(m.get("content", "")) for m in turn]
    if not any(parts):
        raise ValueError("question has no messages")
    return "\n\n".join(p for p in parts if p)


def load_bfcl(
    questions: str | Path | Iterable[Mapping[str, Any]],
    answers: str | Path | Iterable[Mapping[str, Any]] | None = None,
) -> list[Task]:
    """Tasks from a BFCL question file and its possible answers.

    ``questions`` is a path, records, or a category name (``"live_simple"``) read from the
    installed bfcl-eval package. ``answers`` defaults to ``possible_answer/<same file name>``
    next to the questions (BFCL's layout), or to ``ground_truth`` fields inside the question
    records; the irrelevance and relevance categories have none. Each task's
    ``metadata["functions"]`` holds the function docs in JSON-schema words, ``["kind"]`` how it
    is played (see the module's docstring).
    """
    records = _records(questions)
    if len(records) == 1 and isinstance(records[0], Mapping) and "id" not in records[0]:
        return _format_sensitivity(records[0], _data_dirs(questions))
    if answers is None and isinstance(questions, (str, Path)):
        answers = _answers_beside(_path(questions))
    truth: dict[str, Any] = {}
    for i, rec in enumerate(_records(answers) if answers is not None else records):
        if isinstance(rec, Mapping) and "ground_truth" in rec:
            truth[str(rec.get("id", i))] = rec["ground_truth"]
    dirs = _data_dirs(questions)
    tasks = []
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise error.InvalidTask(f"BFCL record {i} is not a JSON object")
        rid = str(rec.get("id", f"bfcl_{i}"))
        try:
            tasks.append(_task(rid, rec, truth.get(rid), dirs))
        except (ValueError, KeyError, TypeError) as e:
            raise error.InvalidTask(f"BFCL record {rid!r}: {e}") from None
    if not tasks:
        raise error.InvalidTask("The BFCL file holds no records")
    return tasks


def _task(rid: str, rec: Mapping[str, Any], gold: Any, dirs: Sequence[Path]) -> Task:
    category = category_of(rid)
    kind = kind_of(category)
    turns = _messages(rec.get("question"))
    meta: dict[str, Any] = {"category": category, "kind": kind}
    if kind in ("multi_turn", "agentic"):
        return _stateful_task(rid, rec, gold, turns, meta, dirs)
    functions = rec.get("function", [])
    functions = [functions] if isinstance(functions, Mapping) else functions
    if not isinstance(functions, list) or not all(
        isinstance(f, Mapping) and "name" in f for f in functions
    ):
        raise ValueError("'function' must be a list of function docs")
    answer: dict[str, Any] = {"ground_truth": []}
    if kind == "ast":
        if gold is None:
            raise error.InvalidTask(f"BFCL record {rid!r} has no possible answer (ground_truth)")
        gold = [gold] if isinstance(gold, Mapping) else gold
        if not (
            isinstance(gold, list) and all(isinstance(g, Mapping) and len(g) == 1 for g in gold)
        ):
            raise error.InvalidTask(
                f"BFCL record {rid!r}: ground_truth must be [{{function: {{param: [values]}}}}]"
            )
        answer = {"ground_truth": _repair(list(gold), functions, category, meta)}
    elif kind == "relevance":
        if not functions:
            raise ValueError("a relevance task needs a function to call")
        answer["example"] = [example_call(functions[0])]
    language = language_of(category)
    shown = functions
    if language != "python":
        from llmgym.envs.tools.bfcl.languages import grading_functions

        meta["language"] = language
        meta["bfcl_functions"] = [dict(f) for f in functions]
        meta["grading_functions"] = grading_functions(functions, language)
        shown = [_with_language_hint(f, language) for f in functions]
    meta["functions"] = [function_doc(f) for f in shown]
    return Task(
        id=rid,
        prompt=_text(turns[0]),
        answer=answer,
        domain="tools",
        family=category,
        difficulty=CATEGORY_DIFFICULTY.get(category, 0.5),
        metadata=meta,
    )


def _bare_dict_values(option: Any) -> bool:
    dicts = [option] if isinstance(option, Mapping) else option if isinstance(option, list) else []
    return any(
        isinstance(d, Mapping) and any(not isinstance(v, list) for v in d.values()) for d in dicts
    )


def _wrap_dict_values(option: Any) -> Any:
    def wrap(d: Any) -> Any:
        if not isinstance(d, Mapping):
            return d
        return {k: v if isinstance(v, list) else [v] for k, v in d.items()}

    return [wrap(d) for d in option] if isinstance(option, list) else wrap(option)


def _listed(options: Any) -> list[Any]:
    return options if isinstance(options, list) else [options]


_ARRAY_WORDS = frozenset({"array", "tuple", "list", "Array", "ArrayList"})


def _repair(
    gold: list[Any], functions: Sequence[Mapping[str, Any]], category: str, meta: dict[str, Any]
) -> list[Any]:
    """The possible answers, with the two kinds of entry that BFCL's own checker can never
    accept read as their writers meant them (each noted in ``meta["repaired"]``):

    - a parameter with no acceptable value at all (``[]``) whose spec asks for an array: the
      empty list was meant (``[[]]``);
    - a Java list of ``any`` elements holding numbers or booleans: BFCL keeps each element's
      code text, so ``42`` and ``true`` are the strings ``"42"`` and ``"true"``;
    - a dict answer whose key holds one value instead of a list of acceptable values (BFCL
      would read a string's characters as the acceptable values): the value is wrapped;
    - a parameter the answer requires but the spec does not have: renamed to the one required
      parameter the answer lacks, if there is exactly one, else dropped (the spec is what the
      model is shown; BFCL rejects a call with the parameter and one without it).
    """
    specs = {f["name"]: f.get("parameters") or {} for f in functions}
    props = {name: spec.get("properties", {}) for name, spec in specs.items()}
    notes = []
    out = []
    for entry in gold:
        ((name, params),) = entry.items()
        fixed = dict(params)
        if name in specs:
            unknown = [
                k for k, o in params.items() if k not in props[name] and "" not in _listed(o)
            ]
            lacking = [k for k in specs[name].get("required", []) if k not in params]
            for key in unknown:
                options = fixed.pop(key)
                if len(unknown) == 1 and len(lacking) == 1:
                    fixed[lacking[0]] = options
                    notes.append(f"{name}.{key}: not in the spec; read as {lacking[0]!r}")
                else:
                    notes.append(f"{name}.{key}: not in the spec; dropped")
        for key, options in list(fixed.items()):
            if isinstance(options, list) and any(_bare_dict_values(o) for o in options):
                fixed[key] = options = [_wrap_dict_values(o) for o in options]
                notes.append(f"{name}.{key}: a dict answer's value read as a list of one value")
            schema = props.get(name, {}).get(key, {})
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            item = (schema.get("items") or {}).get("type") if isinstance(schema, Mapping) else None
            if options == [] and kind in _ARRAY_WORDS:
                fixed[key] = [[]]
                notes.append(f"{name}.{key}: no acceptable value; read as the empty list")
            elif (
                language_of(category) == "java"
                and kind in ("Array", "ArrayList")
                and item == "any"
                and isinstance(options, list)
                and any(
                    isinstance(o, list) and not all(isinstance(v, str) for v in o) for o in options
                )
            ):
                from llmgym.envs.tools.bfcl.languages import java_text

                fixed[key] = [
                    [v if isinstance(v, str) else java_text(v) for v in o]
                    if isinstance(o, list)
                    else o
                    for o in options
                ]
                notes.append(
                    f"{name}.{key}: list of Java `any` elements, compared as their code text"
                )
        out.append({name: fixed})
    if notes:
        meta["repaired"] = notes
    return out


def _with_language_hint(doc: Mapping[str, Any], language: str) -> dict[str, Any]:
    """The doc as BFCL shows Java/JavaScript functions: every parameter a string of code, its
    type in the description (BFCL's ``_func_doc_language_specific_pre_processing``)."""
    name = "Java 8 SDK" if language == "java" else "JavaScript"
    lang = "Java" if language == "java" else "JavaScript"
    out = dict(doc)
    out["description"] = (
        f"{doc.get('description', '')} Note that the provided function is in {name} syntax."
    )
    params = dict(doc.get("parameters", {}))
    props = {}
    for key, schema in dict(params.get("properties", {})).items():
        s = dict(schema)
        kind = s.get("type")
        note = (
            f" This parameter can be of any type of {lang} object in string representation."
            if kind == "any"
            else f" This is {lang} {kind} type parameter in string representation."
        )
        s["description"] = str(s.get("description", "")) + note
        if kind in ("ArrayList", "Array", "array") and isinstance(s.get("items"), Mapping):
            s["description"] += (
                f" The list elements are of type {s['items'].get('type')}; "
                "they are not in string representation."
            )
            del s["items"]
        if language == "javascript" and kind == "dict" and "properties" in s:
            s["description"] += (
                " The dictionary entries have the following schema; they are not in string "
                f"representation. {json.dumps(s['properties'])}"
            )
            del s["properties"]
        s["type"] = "string"
        props[key] = s
    params["properties"] = props
    out["parameters"] = params
    return out


def example_call(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A call of ``doc`` with a placeholder for each required parameter (its default or first
    enum value when the doc gives one): the reference reply of a relevance task, where BFCL
    asks only that a call be made.

    >>> example_call({"name": "f", "parameters": {"properties": {"n": {"type": "integer"}},
    ...                                           "required": ["n"]}})
    {'f': {'n': 1}}
    """
    params = doc.get("parameters", {})
    props = params.get("properties", {}) if isinstance(params, Mapping) else {}
    placeholder = {"integer": 1, "float": 1.0, "number": 1.0, "boolean": True, "array": [],
                   "tuple": [], "dict": {}, "object": {}}  # fmt: skip
    args = {}
    for key in params.get("required", []) if isinstance(params, Mapping) else []:
        schema = props.get(key, {})
        if "default" in schema:
            args[key] = schema["default"]
        elif isinstance(schema.get("enum"), list) and schema["enum"]:
            args[key] = schema["enum"][0]
        else:
            args[key] = placeholder.get(schema.get("type"), "example")
    return {str(doc["name"]): args}


def _stateful_task(
    rid: str,
    rec: Mapping[str, Any],
    gold: Any,
    turns: list[list[dict[str, Any]]],
    meta: dict[str, Any],
    dirs: Sequence[Path],
) -> Task:
    category, kind = meta["category"], meta["kind"]
    classes = [str(c) for c in rec.get("involved_classes", [])]
    if category == "memory":
        classes = [MEMORY_BACKEND if c == "MemoryAPI" else c for c in classes]
    if not classes:
        raise ValueError("involved_classes is empty")
    docs: list[dict[str, Any]] = []
    for name in classes:
        if name not in FUNC_DOC_FILES:
            raise ValueError(f"unknown backend {name!r}")
        docs.extend(_jsonl_file(_beside(dirs, f"multi_turn_func_doc/{FUNC_DOC_FILES[name]}")))
    held: dict[str, list[dict[str, Any]]] = {}
    for turn, names in dict(rec.get("missed_function", {})).items():
        held[str(turn)] = []
        for missed in names:  # BFCL's populate_test_cases_with_predefined_functions
            i = next((k for k, d in enumerate(docs) if d["name"] == missed), None)
            if i is not None:
                held[str(turn)].append(function_doc(docs.pop(i)))
    if gold is None:
        raise error.InvalidTask(f"BFCL record {rid!r} has no possible answer (ground_truth)")
    meta.update(
        functions=[function_doc(d) for d in docs],
        held_functions=held,
        involved_classes=classes,
        initial_config=dict(rec.get("initial_config", {})),
        turns=turns,
        long_context="long_context" in category,
    )
    if kind == "multi_turn":
        if not (isinstance(gold, list) and len(gold) == len(turns)):
            raise ValueError("ground_truth must hold one list of calls per turn")
        if not all(isinstance(t, list) and all(isinstance(c, str) for c in t) for t in gold):
            raise ValueError("ground_truth turns must be lists of call strings")
        answer: dict[str, Any] = {"ground_truth": [list(t) for t in gold]}
    else:
        if not (isinstance(gold, list) and gold and all(isinstance(a, str) for a in gold)):
            raise ValueError("ground_truth must be a list of acceptable answers")
        answer = {"ground_truth": list(gold)}
        turns[0].insert(0, {"role": "system", "content": AGENTIC_ANSWER_FORMAT})
        if category == "web_search":
            meta["initial_config"] = {"WebSearchAPI": {"show_snippet": True}}
        if category == "memory":
            # BFCL's memory entries come after the scenario's earlier conversations (its
            # "prereq" entries), each a session of its own: the memory is all that carries over.
            scenario = str(rec.get("scenario", ""))
            prereq = _jsonl_file(
                _beside(dirs, f"memory_prereq_conversation/memory_{scenario}.json")
            )
            meta["scenario"] = scenario
            meta["sessions"] = [_messages(p.get("question")) for p in prereq]
    first = meta["sessions"][0][0] if meta.get("sessions") else turns[0]
    return Task(
        id=rid,
        prompt=_text(first),
        answer=answer,
        domain="tools",
        family=category,
        difficulty=CATEGORY_DIFFICULTY.get(category, 0.5),
        metadata=meta,
    )


def _format_sensitivity(ids: Mapping[str, Any], dirs: Sequence[Path]) -> list[Task]:
    """The tasks named by BFCL's format-sensitivity ids file (``{category: [ids]}``), each as it
    is in its own category, in the ``format_sensitivity`` family: BFCL varies the prompt's format
    around them; llmgym's ``call_format`` argument is that axis here."""
    tasks = []
    for category, wanted in ids.items():
        if not isinstance(wanted, list):
            raise error.InvalidTask("a format-sensitivity file maps categories to lists of ids")
        source = _beside(dirs, f"BFCL_v4_{category}.json")
        by_id = {t.id: t for t in load_bfcl(source)}
        for rid in wanted:
            if rid not in by_id:
                raise error.InvalidTask(f"format sensitivity names {rid!r}, not in {source.name}")
            t = by_id[rid]
            tasks.append(
                Task(
                    id=f"format_sensitivity:{rid}",
                    prompt=t.prompt,
                    answer=t.answer,
                    domain=t.domain,
                    family="format_sensitivity",
                    difficulty=CATEGORY_DIFFICULTY["format_sensitivity"],
                    metadata={**t.metadata, "category": "format_sensitivity", "source": rid},
                )
            )
    if not tasks:
        raise error.InvalidTask("The format-sensitivity file names no tasks")
    return tasks
