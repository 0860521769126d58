"""Building one Instruct-v0 task from a family: the plan, the instructions, the compliant
response, and the task that carries them (the answer spec ``rewards/instruct`` grades).

A family names a kind of work (write, answer, summarize, rewrite, format), the instructions
it is about, and which others may join them; ``difficulty`` adds up to four more instructions
and makes the content longer. The compliant response is checked against every instruction
here, so a family that could write a task its own oracle fails raises at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmgym.envs.instruct.compose import material as m
from llmgym.envs.instruct.compose.constraints import compatible, measure, prepare
from llmgym.envs.instruct.compose.draft import write
from llmgym.envs.instruct.compose.plan import Plan, describe, literal_free
from llmgym.rewards.instruct import CHECKS, assess
from llmgym.tasks import Subtask, Task, draft

VERIFIER = "llmgym.rewards.instruct:grade_instructions"
"""The verifier a subtask names (a "module:function" path of the verifier table's kind)."""

EXTRAS = (
    "keywords:existence", "keywords:frequency", "keywords:forbidden_words",
    "keywords:letter_frequency", "length_constraints:number_words",
    "length_constraints:number_sentences", "detectable_content:number_placeholders",
    "detectable_content:postscript", "detectable_format:number_highlighted_sections",
    "detectable_format:title", "startend:end_checker", "startend:start_checker",
    "punctuation:no_comma", "startend:quotation", "change_case:english_lowercase",
    "change_case:capital_word_frequency", "length_constraints:number_paragraphs",
    "detectable_format:number_bullet_lists", "detectable_format:multiple_sections",
)  # fmt: skip
"""Instructions that may join any family's own (conflicts permitting)."""


@dataclass(frozen=True)
class InstructFamily:
    """A family: ``kind`` of work, its own ``instructions``, the ``extras`` that may join."""

    name: str
    kind: str
    instructions: tuple[str, ...]
    description: str
    extras: tuple[str, ...] = EXTRAS

    def __post_init__(self) -> None:
        unknown = [i for i in (*self.instructions, *self.extras) if i not in CHECKS]
        if unknown or self.kind not in KINDS:
            raise ValueError(f"family {self.name!r}: unknown kind or instructions {unknown}")


def _write(rng: random.Random, difficulty: float) -> Plan:
    subject = rng.choice(m.SUBJECTS)
    request = rng.choice(m.WRITING_REQUESTS).format(
        subject=subject.name, recipient=rng.choice(m.RECIPIENTS)
    )
    n = 4 + round(6 * difficulty)
    body = m.sentences(rng, subject, n)
    return Plan(rng, difficulty, "write", subject, request, [body[: n // 2], body[n // 2 :]],
                terms=list(subject.terms), min_terms=2)  # fmt: skip


def _answer(rng: random.Random, difficulty: float) -> Plan:
    plan = _write(rng, difficulty)
    plan.kind = "answer"
    plan.request = rng.choice(m.QUESTIONS).format(subject=plan.subject.name)
    plan.body[0].insert(
        0, rng.choice(("My answer is yes.", "My answer is no.", "My answer is maybe."))
    )
    return plan


def _facts(rng: random.Random, subject: m.Subject, n: int) -> list[str]:
    names = rng.sample(m.FACT_NAMES, 2)
    out = []
    for i in range(n):
        out.append(rng.choice(m.FACT_SENTENCES).format(
            name=names[i % 2], subject=subject.name, year=rng.randint(1990, 2024),
            count=rng.randint(12, 480), term=rng.choice(subject.terms)))  # fmt: skip
    return [s[0].upper() + s[1:] for s in out]


def _summarize(rng: random.Random, difficulty: float) -> Plan:
    subject = rng.choice(m.SUBJECTS)
    facts = _facts(rng, subject, 3 + round(2 * difficulty))
    filler = m.sentences(rng, subject, 5 + round(6 * difficulty))
    passage = filler[:2] + facts + filler[2:]
    keep = facts + filler[:1]
    names = sorted({n for n in m.FACT_NAMES if any(n in s for s in keep)})
    request = f"Summarize the passage below about {subject.name} for {rng.choice(m.RECIPIENTS)}."
    return Plan(rng, difficulty, "summarize", subject, request, [keep], passage=" ".join(passage),
                terms=names, min_terms=len(names))  # fmt: skip


def _rewrite(rng: random.Random, difficulty: float) -> Plan:
    subject = rng.choice(m.SUBJECTS)
    body = m.sentences(rng, subject, 4 + round(4 * difficulty))
    body = [s.replace(" the ", ", the ", 1) if i % 2 else s for i, s in enumerate(body)]
    request = "Rewrite the passage below so that it follows the instructions after it."
    return Plan(rng, difficulty, "rewrite", subject, request, [body], passage=" ".join(body),
                terms=list(subject.terms), min_terms=3)  # fmt: skip


def _format(rng: random.Random, difficulty: float) -> Plan:
    plan = _write(rng, difficulty)
    plan.kind = "format"
    notes = m.sentences(rng, plan.subject, 3 + round(3 * difficulty))
    plan.request = f"Turn the notes below about {plan.subject.name} into a short answer for {rng.choice(m.RECIPIENTS)}."
    plan.passage = "\n".join(notes)
    plan.bullets = notes
    plan.body = [m.sentences(rng, plan.subject, 2)]
    return plan


KINDS: dict[str, Callable[[random.Random, float], Plan]] = {
    "write": _write, "answer": _answer, "summarize": _summarize, "rewrite": _rewrite, "format": _format,
}  # fmt: skip


def _schema_record(plan: Plan) -> None:
    """A record of the subject and the JSON Schema it must satisfy (types, ranges, an enum,
    an array with a minimum length, no other keys)."""
    rng = plan.rng
    leader = rng.choice(m.FACT_NAMES)
    year = rng.randint(1990, 2024)
    status = rng.choice(("open", "planned", "closed"))
    terms = rng.sample(list(plan.subject.terms), 3)
    plan.passage = (f"{plan.subject.name.capitalize()} is led by {leader}. It started in {year} and is "
                    f"{status} today. People talk most about the {terms[0]} the {terms[1]} and the {terms[2]}.")  # fmt: skip
    plan.record = {"name": plan.subject.name, "leader": leader, "year": year, "status": status,
                   "highlights": terms}  # fmt: skip
    plan.terms, plan.min_terms = [leader], 1
    plan.kwargs["detectable_format:json_schema"] = {"schema": {
        "type": "object", "additionalProperties": False,
        "required": ["name", "leader", "year", "status", "highlights"],
        "properties": {
            "name": {"type": "string", "minLength": 1}, "leader": {"type": "string", "minLength": 1},
            "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
            "status": {"enum": ["open", "planned", "closed"]},
            "highlights": {"type": "array", "items": {"type": "string"}, "minItems": 3},
        },
    }}  # fmt: skip
    plan.request = f"Extract the facts of the passage below about {plan.subject.name} as JSON."


def _choose(family: InstructFamily, rng: random.Random, difficulty: float) -> list[str]:
    chosen = list(family.instructions)
    extras = [e for e in family.extras if e not in chosen]
    rng.shuffle(extras)
    wanted = round(4 * difficulty * rng.uniform(0.5, 1.0))
    for e in extras:
        if wanted <= 0:
            break
        if compatible(chosen, e):
            chosen.append(e)
            wanted -= 1
    return chosen


def compose(family: InstructFamily, rng: random.Random, difficulty: float) -> Task:
    """One task of ``family``: the prompt, the answer spec and the compliant response."""
    plan = KINDS[family.kind](rng, difficulty)
    chosen = _choose(family, rng, difficulty)
    if "detectable_format:json_schema" in chosen:
        _schema_record(plan)
    for instruction_id in chosen:
        plan.kwargs[instruction_id] = plan.kwargs.get(instruction_id) or prepare(
            plan, instruction_id
        )
    response = write(plan)
    for instruction_id in chosen:
        plan.kwargs[instruction_id] = measure(
            plan, instruction_id, plan.kwargs[instruction_id], response
        )
    statements = [describe(i, plan.kwargs[i]) for i in chosen]
    prompt = "\n\n".join(p for p in (plan.request, plan.passage, " ".join(statements)) if p)
    # the request may be restated by a good answer; the instructions may not
    echo = literal_free(" ".join(statements), list(plan.kwargs.values()))
    answer: dict[str, Any] = {
        "instructions": [{"id": i, "kwargs": plan.kwargs[i]} for i in chosen],
        "echo": echo,
        "terms": plan.terms,
        "min_terms": plan.min_terms,
        "min_words": 8,
    }
    if "combination:repeat_prompt" in plan.kwargs:
        answer["repeat"] = plan.request
    verdict = assess(response, answer)
    if verdict.score < 1.0:
        failed = [r.id for r in verdict.results if not r.strict]
        raise AssertionError(
            f"{family.name}: the composed response fails {failed or verdict.gate_reason}"
        )
    return draft(
        prompt,
        answer,
        subtasks=subtasks_of(answer, statements),
        metadata={"oracle": response, "request": plan.request, "kind": plan.kind},
    )


def subtasks_of(answer: dict[str, Any], statements: list[str]) -> tuple[Subtask, ...]:
    """One subtask per instruction (``subtask_mode="joint"``): its statement, and as gold the
    task's answer spec reduced to that instruction."""
    out = []
    for i, (item, statement) in enumerate(zip(answer["instructions"], statements, strict=True)):
        gold = dict(answer, instructions=[item])
        out.append(Subtask(f"c{i}", statement, gold, verifier=VERIFIER))
    return tuple(out)
