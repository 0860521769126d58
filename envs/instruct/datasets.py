"""Instruct-v0 tasks from JSONL: IFEval's ``input_data.jsonl`` schema (``key``, ``prompt``,
``instruction_id_list``, ``kwargs``) or llmgym's own task schema (an ``answer`` with
``instructions``). Records are checked when loaded: an unknown instruction id or a malformed
argument names its record. Dataset prompts carry no subject terms and no instruction text to
guard against echoes (their prompts often hold the text to work on), so their gate is the
response's own words only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.envs.instruct.compose.plan import describe
from llmgym.envs.instruct.compose.task import subtasks_of
from llmgym.rewards.instruct import instructions_of
from llmgym.tasks import DatasetSource, Task, TaskSource, read_jsonl

FORMATS = ("ifeval", "jsonl")


def from_ifeval(record: Mapping[str, Any], index: int) -> Task:
    """A task from one IFEval record."""
    ids = record.get("instruction_id_list")
    kwargs = record.get("kwargs") or [{} for _ in ids or []]
    prompt = record.get("prompt")
    if (
        not isinstance(prompt, str)
        or not isinstance(ids, list)
        or not ids
        or len(kwargs) != len(ids)
    ):
        raise error.InvalidTask(
            "an IFEval record needs a str 'prompt' and equally long 'instruction_id_list' and 'kwargs'"
        )
    answer: dict[str, Any] = {
        "instructions": [{"id": i, "kwargs": k} for i, k in zip(ids, kwargs, strict=True)],
        "echo": [],
        "min_words": 8,
    }
    pairs = instructions_of(answer)  # validates
    answer["instructions"] = [{"id": i, "kwargs": k} for i, k in pairs]
    repeat = next(
        (k["prompt_to_repeat"] for i, k in pairs if i == "combination:repeat_prompt"), None
    )
    if repeat:
        answer["repeat"] = repeat
    statements = [describe(i, k) for i, k in pairs]
    return Task(
        id=f"ifeval-{record.get('key', index)}",
        prompt=prompt,
        answer=answer,
        domain="instruct",
        family="ifeval",
        subtasks=subtasks_of(answer, statements),
    )


def _from_llmgym(record: Mapping[str, Any], index: int) -> Task:
    data = dict(record)
    data.setdefault("id", f"instruct-{index}")
    data.setdefault("domain", "instruct")
    task = Task.from_dict(data)
    if not isinstance(task.answer, Mapping):
        raise error.InvalidTask(f"task {task.id!r}: the answer must be a spec with 'instructions'")
    instructions_of(task.answer)
    return task


def load_dataset(
    tasks: str | Path | Iterable[Mapping[str, Any] | Task], dataset_format: str | None
) -> TaskSource:
    """A source of the records in ``tasks`` (a JSONL path or records); ``dataset_format`` is
    ``"ifeval"`` or ``"jsonl"`` (llmgym's schema), or None to tell by each record's keys."""
    if dataset_format is not None and dataset_format not in FORMATS:
        raise error.Error(
            f"Expects dataset_format in {FORMATS} or None, actual: {dataset_format!r}"
        )
    records = read_jsonl(tasks) if isinstance(tasks, (str, Path)) else tasks

    def convert(record: Mapping[str, Any], index: int) -> Task:
        ifeval = dataset_format == "ifeval" or (
            dataset_format is None and "instruction_id_list" in record
        )
        return from_ifeval(record, index) if ifeval else _from_llmgym(record, index)

    name = Path(tasks).stem if isinstance(tasks, (str, Path)) else "instruct"
    return DatasetSource.from_records(records, converter=convert, domain="instruct", name=name)
