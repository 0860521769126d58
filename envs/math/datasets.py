"""Math datasets as llmgym tasks: GSM8K (``#### answer``), MATH (``\\boxed{}`` in the solution,
level and type), and generic JSONL (llmgym's task schema or question/answer records).

GSM8K's calculator annotations (``<<48/2=24>>``) become the task's intermediate results
(``metadata["steps"]``) for the step checker; the reference solution, cleaned of them, is
``metadata["solution"]`` (what the oracle answers).

Each task's ``metadata["form"]`` is the final form its answer must have (see
:data:`llmgym.rewards.math.FORMS`): ``"number"`` for GSM8K, ``"auto"`` (the form the gold itself
is written in) for MATH and generic records, which may name their own with a ``form`` field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.envs.math.build import ANSWER_INSTRUCTION
from llmgym.rewards.math.form import FORMS
from llmgym.tasks import DatasetSource, Task, TaskSource

FORMATS = ("gsm8k", "math", "jsonl")
_ANNOTATION = re.compile(r"<<([^<>=]*)=([^<>]*)>>")
_LEVEL = re.compile(r"(\d+)")
_TASK_FIELDS = {"id", "prompt", "answer", "domain", "family", "difficulty", "subtasks", "metadata"}


def with_instruction(question: str) -> str:
    """The question plus the boxed-answer instruction (unless it already asks for a box)."""
    question = question.strip()
    if "\\boxed" in question:
        return question
    return f"{question}\n\n{ANSWER_INSTRUCTION}"


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces), if any.

    >>> last_boxed(r"so $x = \\boxed{\\frac{1}{2}}$ and \\boxed{3}"), last_boxed("none")
    ('3', None)
    """
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def _str_field(record: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = record.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def gsm8k_task(record: Mapping[str, Any], index: int) -> Task:
    """A GSM8K record ``{"question", "answer": "... #### 72"}`` as a task.

    >>> t = gsm8k_task({"question": "Q?", "answer": "4*3 = <<4*3=12>>12 eggs\\n#### 12"}, 0)
    >>> t.answer, t.metadata["steps"], t.metadata["solution"].splitlines()[0], t.metadata["form"]
    ('12', ['12'], '4*3 = 12 eggs', 'number')
    """
    question = _str_field(record, "question")
    solution = _str_field(record, "answer")
    if question is None or solution is None or "####" not in solution:
        raise error.InvalidTask(
            f"GSM8K record {index}: expects 'question' and an 'answer' ending in '#### <answer>'"
        )
    work, _, final = solution.rpartition("####")
    answer = final.strip().replace(",", "").replace("$", "").strip()
    steps = [value.strip().replace(",", "") for _, value in _ANNOTATION.findall(work)]
    clean = _ANNOTATION.sub("", work).strip()
    lines = [ln for ln in clean.splitlines() if ln.strip()]
    return Task(
        id=str(record.get("id", f"gsm8k-{index}")),
        prompt=with_instruction(question),
        answer=answer,
        domain="math",
        family="gsm8k",
        difficulty=min(1.0, max(0, len(lines) - 1) / 7),
        metadata={
            "solution": f"{clean}\nThe answer is $\\boxed{{{answer}}}$.",
            "steps": steps,
            "form": "number",
        },
    )


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "other"


def math_task(record: Mapping[str, Any], index: int) -> Task:
    """A MATH record ``{"problem", "solution", "level", "type"}`` (or MATH-500's ``answer``,
    ``subject``, integer ``level``) as a task; the family is ``math.<type>``, the difficulty
    ``(level - 1) / 4``.

    >>> t = math_task({"problem": "1+1?", "solution": "It is $\\\\boxed{2}$.", "level": "Level 2",
    ...                "type": "Prealgebra"}, 0)
    >>> t.answer, t.family, t.difficulty, t.metadata["form"]
    ('2', 'math.prealgebra', 0.25, 'auto')
    """
    problem = _str_field(record, "problem", "question")
    solution = _str_field(record, "solution") or ""
    answer = record.get("answer")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        answer = last_boxed(solution)
    if problem is None or answer is None:
        raise error.InvalidTask(
            f"MATH record {index}: expects 'problem' and a solution with \\boxed{{}} (or 'answer')"
        )
    level = record.get("level")
    match = _LEVEL.search(str(level)) if level is not None else None
    difficulty = min(1.0, max(0.0, (int(match.group(1)) - 1) / 4)) if match else 0.5
    subject = _str_field(record, "type", "subject") or "other"
    reference = solution if last_boxed(solution) is not None else f"$\\boxed{{{answer}}}$"
    return Task(
        id=str(record.get("id") or record.get("unique_id") or f"math-{index}"),
        prompt=with_instruction(problem),
        answer=str(answer).strip(),
        domain="math",
        family=f"math.{_slug(subject)}",
        difficulty=difficulty,
        metadata={
            "solution": reference,
            "level": level,
            "subject": subject,
            "form": _form_field(record, index),
        },
    )


def jsonl_task(record: Mapping[str, Any], index: int) -> Task:
    """A record in llmgym's task schema, GSM8K's, MATH's, or ``{"question"|"problem"|"prompt",
    "answer"}`` (with optional ``id``, ``difficulty``, ``family``, ``solution``, ``form``).

    >>> jsonl_task({"question": "2+3?", "answer": 5}, 7).prompt.splitlines()[0]
    '2+3?'
    """
    if not isinstance(record, Mapping):
        raise error.InvalidTask(f"record {index} is not a JSON object")
    if "prompt" in record and "id" in record and set(record) <= _TASK_FIELDS:
        data = dict(record)
        data.setdefault("domain", "math")
        return Task.from_dict(data)
    answer = record.get("answer")
    if isinstance(answer, str) and "####" in answer and "question" in record:
        return gsm8k_task(record, index)
    if "problem" in record and ("solution" in record or "answer" in record):
        return math_task(record, index)
    question = _str_field(record, "question", "prompt", "problem")
    if answer is None and isinstance(record.get("solution"), str):
        answer = last_boxed(record["solution"])
    if question is None or answer is None:
        raise error.InvalidTask(
            f"record {index}: expects llmgym's task schema or a 'question' with an 'answer'"
        )
    metadata: dict[str, Any] = {"form": _form_field(record, index)}
    if isinstance(record.get("solution"), str):
        metadata["solution"] = record["solution"]
    return Task(
        id=str(record.get("id", f"jsonl-{index}")),
        prompt=with_instruction(question),
        answer=answer if isinstance(answer, (int, float, list)) else str(answer),
        domain="math",
        family=str(record.get("family", "jsonl")),
        difficulty=float(record.get("difficulty", 0.5)),
        metadata=metadata,
    )


def _form_field(record: Mapping[str, Any], index: int) -> str:
    """A record's own ``form`` (checked), else ``"auto"``."""
    form = record.get("form", "auto")
    if form not in FORMS:
        raise error.InvalidTask(
            f"record {index}: expects form in {sorted(FORMS)}, actual: {form!r}"
        )
    return str(form)


_CONVERTERS = {"gsm8k": gsm8k_task, "math": math_task, "jsonl": jsonl_task}


def load_tasks(tasks: Any, dataset_format: str | None = None) -> TaskSource:
    """A task source from a JSONL path, a list of records or Tasks, a Hugging Face
    ``datasets.Dataset``, or a TaskSource (returned as is). ``dataset_format``: ``"gsm8k"``,
    ``"math"`` or ``"jsonl"`` (default: each record's schema is recognised).
    """
    if isinstance(tasks, TaskSource):
        return tasks
    fmt = dataset_format or "jsonl"
    if fmt not in _CONVERTERS:
        raise error.Error(
            f"Expects dataset_format in {FORMATS} or None, actual: {dataset_format!r}"
        )
    converter = _CONVERTERS[fmt]
    if isinstance(tasks, (str, Path)):
        return DatasetSource.from_jsonl(tasks, converter=converter, domain="math")
    if type(tasks).__module__.startswith("datasets"):
        return DatasetSource.from_hf(tasks, converter=converter, domain="math", name=fmt)
    if isinstance(tasks, Mapping) or not isinstance(tasks, Iterable):
        raise error.Error(
            "Expects tasks as a JSONL path, a list of records or Tasks, a datasets.Dataset or "
            f"a TaskSource; actual type: {type(tasks).__name__}"
        )
    items = list(tasks)
    if items and all(isinstance(t, Task) for t in items):
        return DatasetSource(items, domain="math")
    return DatasetSource.from_records(items, converter=converter, domain="math", name=fmt)
