"""Long-document datasets: LongBench and HotpotQA style JSONL, or tasks in llmgym's schema.

LongBench records (``input``, ``context``, ``answers``, ``length``, ``dataset``,
``all_classes``, ``_id``) are graded by the kind of their ``dataset``: token F1 for QA,
summaries and code (F1 over words, not ROUGE or edit similarity), a number for
``passage_count``, exact match for retrieval and for classification (the other classes are
distractors). HotpotQA records (``_id``, ``question``, ``answer``, ``context`` as
``[title, sentences]`` pairs, ``supporting_facts`` as ``[title, sentence index]``) become
documents with one section per paragraph, so citations are checked against the supporting
sentences. Difficulty comes from the length: 0 at 1k tokens, 1 at 128k (log scale).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.envs.longdoc.reading import chunk_bounds, with_chunks
from llmgym.envs.longdoc.writers.tokens import CHARS_PER_TOKEN
from llmgym.tasks import DatasetSource, Task, TaskSource, read_jsonl

FORMATS = ("longbench", "hotpotqa")
FORMAT_NOTE = (
    "Answer format: put only the answer inside <answer></answer>. If the document does not state "
    "the answer, answer <answer>not stated</answer>."
)
CITE_NOTE = " Then give the ids of the supporting sections inside <cite></cite>, for example <cite>S2, S5</cite>."
_QA = {
    "narrativeqa",
    "qasper",
    "multifieldqa_en",
    "multifieldqa_zh",
    "hotpotqa",
    "2wikimqa",
    "musique",
    "dureader",
    "triviaqa",
}
_SUMMARY = {"gov_report", "qmsum", "multi_news", "vcsum", "samsum"}
_CODE = {"lcc", "repobench-p"}
SECTION_CHARS = 4000
"""LongBench contexts have no sections; tool mode and chunking cut them into parts this long."""


def difficulty_for(tokens: float) -> float:
    """0 at 1k tokens, 1 at 128k, log scale, rounded to 2 decimals.

    >>> difficulty_for(1024), difficulty_for(11585), difficulty_for(10**6)
    (0.0, 0.5, 1.0)
    """
    if tokens <= 1024:
        return 0.0
    return round(min(1.0, math.log(tokens / 1024) / math.log(128)), 2)


def _text(record: Mapping[str, Any], key: str, i: int) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise error.InvalidTask(
            f"record {i}: expects {key!r} to be a string, actual: {type(value).__name__}"
        )
    return value


def longbench_task(record: Mapping[str, Any], i: int) -> Task:
    """A task from one LongBench record.

    >>> t = longbench_task({"input": "Who?", "context": "Ada wrote it.", "answers": ["Ada"], "dataset": "hotpotqa"}, 0)
    >>> t.answer["type"], t.answer["gold"], t.family
    ('f1', ['Ada'], 'longbench/hotpotqa')
    """
    question = _text(record, "input", i)
    context = _text(record, "context", i)
    answers = record.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise error.InvalidTask(f"record {i}: expects 'answers' to be a non-empty list of strings")
    name = str(record.get("dataset") or "longbench")
    classes = record.get("all_classes") or []
    spec: dict[str, Any]
    if name == "passage_count":
        spec = {"type": "number", "gold": answers[0], "max_words": 15}
    elif name.startswith("passage_retrieval"):
        spec = {"type": "exact", "gold": answers[0], "aliases": answers[1:], "max_words": 15}
    elif classes:
        spec = {
            "type": "exact",
            "gold": answers[0],
            "aliases": answers[1:],
            "distractors": [c for c in classes if c not in answers],
            "max_words": 20,
        }
    elif name in _SUMMARY:
        spec = {"type": "f1", "gold": answers, "max_words": 600, "success_at": 0.3}
    elif name in _CODE:
        spec = {"type": "f1", "gold": answers, "max_words": 120, "success_at": 0.5}
    else:
        spec = {"type": "f1", "gold": answers, "max_words": 80, "success_at": 0.8}
    length = record.get("length")
    tokens = (
        float(length) * 1.3 if isinstance(length, (int, float)) else len(context) / CHARS_PER_TOKEN
    )
    bounds = chunk_bounds(context, SECTION_CHARS)
    return Task(
        id=str(record.get("_id") or f"longbench-{i}"),
        prompt=f"Question: {question}\n\n{FORMAT_NOTE}",
        answer=spec,
        domain="longdoc",
        family=f"longbench/{name}",
        difficulty=difficulty_for(tokens),
        metadata={
            "question": question,
            "document": context,
            "sections": [[f"S{k + 1}", f"part {k + 1}", s, e] for k, (s, e) in enumerate(bounds)],
            "kind": name,
            "tokens": round(tokens),
            "oracle": f"<answer>{answers[0]}</answer>",
            "facts": [[context.find(a), [a]] for a in answers[:1] if len(a) >= 3 and a in context],
        },
    )


def hotpotqa_task(record: Mapping[str, Any], i: int) -> Task:
    """A task from one HotpotQA record (distractor setting).

    >>> r = {"_id": "q1", "question": "Where was Ada born?", "answer": "London",
    ...      "context": [["Ada", ["Ada was born in London.", " She wrote notes."]], ["Bob", ["Bob cooks."]]],
    ...      "supporting_facts": [["Ada", 0]]}
    >>> t = hotpotqa_task(r, 0)
    >>> t.answer["support"], t.metadata["oracle"]
    ([{'section': 'S1', 'text': 'Ada was born in London.'}], '<answer>London</answer> <cite>S1</cite>')
    """
    question = _text(record, "question", i)
    answer = _text(record, "answer", i)
    context = record.get("context")
    if not isinstance(context, list) or not context:
        raise error.InvalidTask(
            f"record {i}: expects 'context' as a list of [title, [sentences]] pairs"
        )
    pieces, sections, sentences, pos = [], [], {}, 0
    for k, pair in enumerate(context):
        if not (
            isinstance(pair, (list, tuple))
            and len(pair) == 2
            and isinstance(pair[0], str)
            and isinstance(pair[1], list)
        ):
            raise error.InvalidTask(f"record {i}: context[{k}] is not a [title, [sentences]] pair")
        title, sents = pair[0], [str(s) for s in pair[1]]
        sid = f"S{k + 1}"
        chunk = f"[{sid}] {title}\n\n" + "".join(sents).strip()
        sections.append([sid, title, pos, pos + len(chunk)])
        sentences[title] = (sid, [s.strip() for s in sents])
        pieces.append(chunk)
        pos += len(chunk) + 2
    document = "\n\n".join(pieces)
    support = []
    for fact in record.get("supporting_facts") or []:
        if isinstance(fact, (list, tuple)) and len(fact) == 2 and fact[0] in sentences:
            sid, sents = sentences[fact[0]]
            if isinstance(fact[1], int) and 0 <= fact[1] < len(sents):
                support.append({"section": sid, "text": sents[fact[1]]})
    yes_no = answer.strip().lower() in ("yes", "no")
    spec: dict[str, Any] = {
        "type": "exact" if yes_no else "f1",
        "gold": answer,
        "support": support,
        "max_words": 30,
    }
    if yes_no:
        spec["distractors"] = ["no" if answer.strip().lower() == "yes" else "yes"]
    cites = list(dict.fromkeys(f["section"] for f in support))
    cite = f" <cite>{', '.join(cites)}</cite>" if cites else ""
    level = {"easy": 0.2, "medium": 0.5, "hard": 0.8}.get(str(record.get("level")), 0.5)
    offsets = [document.find(f["text"]) for f in support]
    return Task(
        id=str(record.get("_id") or f"hotpotqa-{i}"),
        prompt=f"Question: {question}\n\n{FORMAT_NOTE}{CITE_NOTE if support else ''}",
        answer=spec,
        domain="longdoc",
        family=f"hotpotqa/{record.get('type') or 'qa'}",
        difficulty=level,
        metadata={
            "question": question,
            "document": document,
            "sections": sections,
            "kind": "hotpotqa",
            "tokens": round(len(document) / CHARS_PER_TOKEN),
            "oracle": f"<answer>{answer}</answer>{cite}",
            "facts": [
                [off, [answer]]
                for off, f in zip(offsets, support, strict=True)
                if off >= 0 and answer in f["text"]
            ],
        },
    )


CONVERTERS = {"longbench": longbench_task, "hotpotqa": hotpotqa_task}


def load_dataset(
    tasks: str | Path | TaskSource | Iterable[Task | Mapping[str, Any]],
    dataset_format: str | None = None,
    *,
    chunk_chars: int | None = None,
) -> TaskSource:
    """A task source from a JSONL path or records, in ``dataset_format`` (``"longbench"``,
    ``"hotpotqa"``) or llmgym's own schema (None); with ``chunk_chars``, tasks get chunk subtasks.
    """
    if dataset_format is not None and dataset_format not in FORMATS:
        raise error.Error(
            f"Expects dataset_format in {FORMATS} or None, actual: {dataset_format!r}"
        )
    if isinstance(tasks, TaskSource):
        if chunk_chars is None or not isinstance(tasks, DatasetSource):
            return tasks
        items: list[Any] = list(tasks)
    elif isinstance(tasks, (str, Path)):
        items = list(read_jsonl(tasks))
    else:
        items = list(tasks)
    converter = CONVERTERS.get(dataset_format or "")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Task):
            task = item
        elif not isinstance(item, Mapping):
            raise error.InvalidTask(
                f"record {i}: expects a JSON object, actual type: {type(item).__name__}"
            )
        elif converter is not None:
            task = converter(item, i)
        else:
            data = {"domain": "longdoc", **item}
            data.setdefault("id", f"longdoc-{i}")
            task = Task.from_dict(data)
        if not isinstance(task.metadata.get("document"), str):
            raise error.InvalidTask(
                f"task {task.id!r}: a long-document task needs metadata['document'] (a string)"
            )
        if "sections" not in task.metadata:
            doc = task.metadata["document"]
            bounds = chunk_bounds(doc, SECTION_CHARS)
            meta = {
                **task.metadata,
                "sections": [
                    [f"S{k + 1}", f"part {k + 1}", s, e] for k, (s, e) in enumerate(bounds)
                ],
            }
            task = Task.from_dict({**task.to_dict(), "metadata": meta})
        out.append(with_chunks(task, chunk_chars) if chunk_chars else task)
    return DatasetSource(out, domain="longdoc")
