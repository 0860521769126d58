"""BFCL-style datasets: question files (one JSON object a line: ``id``, ``question``, ``function``) and
possible-answer files (``id``, ``ground_truth``), as in the Berkeley Function Calling Leaderboard's
simple, multiple, parallel and parallel_multiple categories."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.tasks import Task, read_jsonl

CATEGORY_DIFFICULTY = {"simple": 0.2, "multiple": 0.4, "parallel": 0.6, "parallel_multiple": 0.8}
_BFCL_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
    "list": "array",
}


def category_of(record_id: str) -> str:
    """The BFCL category named by an id such as ``"parallel_multiple_12"``.

    >>> category_of("parallel_multiple_12"), category_of("simple_0")
    ('parallel_multiple', 'simple')
    """
    head, _, tail = record_id.rpartition("_")
    return head if head and tail.isdigit() else record_id


def openai_schema(schema: Any) -> Any:
    """A BFCL parameter schema in JSON-schema words (``dict`` -> ``object``, ``float`` -> ``number``...)."""
    if isinstance(schema, list):
        return [openai_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = _BFCL_TYPES.get(value, value)
            if value == "any":
                continue
        elif key in ("properties",) and isinstance(value, Mapping):
            out[key] = {k: openai_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = openai_schema(value)
        else:
            out[key] = value
    if out.get("type") == "any":
        del out["type"]
    return out


def _prompt(question: Any) -> str:
    if isinstance(question, str):
        return question
    turns = question
    if isinstance(turns, list) and turns and isinstance(turns[0], list):
        turns = turns[0]  # single-turn categories hold one turn of messages
    if not isinstance(turns, list):
        raise ValueError("question must be a string or a list of messages")
    parts = [str(m.get("content", "")) for m in turns if isinstance(m, Mapping)]
    if not parts:
        raise ValueError("question has no messages")
    return "\n\n".join(parts)


def _records(source: str | Path | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise error.InvalidTask(f"No such BFCL file: {path}")
        text = path.read_text(encoding="utf-8").strip()
        if text.startswith("["):  # a JSON array instead of JSON lines
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise error.InvalidTask(f"{path}: not valid JSON: {e.msg}") from None
            return list(data)
        return list(read_jsonl(path))
    return list(source)


def _answers_beside(questions: Path) -> Path | None:
    candidate = questions.parent / "possible_answer" / questions.name
    return candidate if candidate.is_file() else None


def load_bfcl(
    questions: str | Path | Iterable[Mapping[str, Any]],
    answers: str | Path | Iterable[Mapping[str, Any]] | None = None,
) -> list[Task]:
    """Tasks from a BFCL question file and its possible answers.

    ``answers`` defaults to ``possible_answer/<same file name>`` next to the questions (BFCL's
    layout), or to ``ground_truth`` fields inside the question records. Each task's
    ``answer`` is ``{"ground_truth": [...]}``; ``metadata["functions"]`` holds the function
    docs converted to JSON-schema words.
    """
    records = _records(questions)
    if answers is None and isinstance(questions, (str, Path)):
        answers = _answers_beside(Path(questions))
    truth: dict[str, Any] = {}
    for i, rec in enumerate(_records(answers) if answers is not None else records):
        if isinstance(rec, Mapping) and "ground_truth" in rec:
            truth[str(rec.get("id", i))] = rec["ground_truth"]
    tasks = []
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise error.InvalidTask(f"BFCL record {i} is not a JSON object")
        rid = str(rec.get("id", f"bfcl_{i}"))
        if rid not in truth:
            raise error.InvalidTask(f"BFCL record {rid!r} has no possible answer (ground_truth)")
        gold = truth[rid]
        if isinstance(gold, Mapping):
            gold = [gold]
        if not (
            isinstance(gold, list) and all(isinstance(g, Mapping) and len(g) == 1 for g in gold)
        ):
            raise error.InvalidTask(
                f"BFCL record {rid!r}: ground_truth must be [{{function: {{param: [values]}}}}]"
            )
        functions = rec.get("function", [])
        functions = [functions] if isinstance(functions, Mapping) else functions
        if not isinstance(functions, list) or not all(
            isinstance(f, Mapping) and "name" in f for f in functions
        ):
            raise error.InvalidTask(
                f"BFCL record {rid!r}: 'function' must be a list of function docs"
            )
        try:
            prompt = _prompt(rec.get("question"))
        except ValueError as e:
            raise error.InvalidTask(f"BFCL record {rid!r}: {e}") from None
        category = category_of(rid)
        tasks.append(
            Task(
                id=rid,
                prompt=prompt,
                answer={"ground_truth": list(gold)},
                domain="tools",
                family=category,
                difficulty=CATEGORY_DIFFICULTY.get(category, 0.5),
                metadata={
                    "functions": [
                        {
                            **dict(f),
                            "parameters": openai_schema(
                                f.get("parameters", {"type": "object", "properties": {}})
                            ),
                        }
                        for f in functions
                    ],
                    "category": category,
                },
            )
        )
    if not tasks:
        raise error.InvalidTask("The BFCL file holds no records")
    return tasks
