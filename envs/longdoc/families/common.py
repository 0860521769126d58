"""What every LongDoc family uses: the generator's context, the task builder and the depth grid.

A family is ``generate(ctx) -> Task``: it picks a writer, plants what its question needs (the
answer and look-alike distractors) at depths, assembles the document and asks. The primary fact
sits at ``ctx.depth`` (a point of :data:`DEPTH_GRID` chosen from the task index); the other
plants are spread with ``ctx.rng``. Difficulty sets the document length (log scale between the
env's bounds) and each family's own knobs: distractors, hops, items. The families themselves
live in the theme modules beside this one; the writers they plant into live in
:mod:`llmgym.envs.longdoc.writers`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmgym.envs.longdoc.writers.annual_report import AnnualReport
from llmgym.envs.longdoc.writers.contract import Contract
from llmgym.envs.longdoc.writers.corporate_policy import Policy
from llmgym.envs.longdoc.writers.document import Document, Plant, Writer, assemble
from llmgym.envs.longdoc.writers.incident_log import IncidentLog
from llmgym.envs.longdoc.writers.manual import Manual
from llmgym.envs.longdoc.writers.minutes import Minutes
from llmgym.envs.longdoc.writers.tokens import TokenCounter
from llmgym.envs.longdoc.writers.vocab import SITE_PLACES, SITE_TYPES
from llmgym.tasks import Task, draft

DEPTH_GRID = tuple(round(k / 10, 1) for k in range(11))
"""Needle depths: item ``index`` of a family puts its primary fact at ``DEPTH_GRID[index % 11]``."""

PROSE_WRITERS: tuple[type[Writer], ...] = (
    AnnualReport,
    Contract,
    Policy,
    IncidentLog,
    Minutes,
    Manual,
)

FORMAT = (
    "Answer format: put only the answer inside <answer></answer>{extra}. If the document does not "
    "state the answer, answer <answer>not stated</answer>. Then give the ids of the sections that "
    "support your answer inside <cite></cite>, for example <cite>S3, S12</cite> (you may quote the "
    "supporting sentences there in double quotes instead)."
)
LIST_NOTE = ", separating the items with semicolons"


@dataclass
class Ctx:
    """What a family generator works with; ``rng`` is the only source of randomness."""

    rng: random.Random
    difficulty: float
    depth: float
    tokens: int
    counter: TokenCounter

    def level(self, lo: int, hi: int) -> int:
        """A family knob from ``lo`` (difficulty 0) to ``hi`` (difficulty 1)."""
        return lo + round(self.difficulty * (hi - lo))

    def depths(self, n: int) -> list[float]:
        """``n`` depths: the primary one first, then others spread over the document."""
        out = [self.depth]
        for _ in range(n - 1):
            out.append(round(self.rng.random(), 3))
        return out

    def seed(self) -> int:
        return self.rng.getrandbits(48)

    def assemble(self, writer: Writer, plants: Sequence[Plant]) -> Document:
        return assemble(writer, plants, self.tokens, self.counter)


def make_task(
    ctx: Ctx,
    doc: Document,
    question: str,
    spec: dict[str, Any],
    *,
    support: Sequence[Plant],
    oracle: str | Sequence[str],
    keep: Sequence[tuple[Plant, Sequence[str]]] = (),
    primary: Plant | None = None,
) -> Task:
    """The task: question and format as the prompt, the document and its facts as metadata."""
    spec["support"] = [{"section": p.sid, "text": p.text} for p in support]
    extra = LIST_NOTE if spec["type"] in ("set", "list") else ""
    if spec["type"] == "keyfacts":
        extra = f" (at most {spec['max_words']} words)"
    answer = "; ".join(oracle) if not isinstance(oracle, str) else oracle
    sids = list(dict.fromkeys(p.sid for p in support))
    cite = f" <cite>{', '.join(sids)}</cite>" if sids else ""
    first = primary or (support[0] if support else None)
    return draft(
        f"Question: {question}\n\n" + FORMAT.format(extra=extra),
        spec,
        metadata={
            "question": question,
            "document": doc.text,
            "sections": [list(s) for s in doc.sections],
            "kind": doc.kind,
            "tokens": doc.tokens,
            "token_counter": doc.counter,
            "depth": round(first.offset / max(1, len(doc.text)), 4) if first else None,
            "oracle": f"<answer>{answer}</answer>{cite}",
            "facts": [[p.offset, list(k)] for p, k in keep],
        },
    )


@dataclass(frozen=True)
class LongDocFamily:
    """One catalogue entry: a family's name, its generator and a line saying what it asks."""

    name: str
    generate: Callable[[Ctx], Task]
    description: str


def prose_writer(ctx: Ctx) -> Writer:
    """A writer of one of the prose kinds (not code), drawn from ``ctx.rng``."""
    return ctx.rng.choice(PROSE_WRITERS)(ctx.seed())


def site_keys(rng: random.Random, n: int, near: int = 0) -> list[str]:
    """``n`` distinct site names; the first ``near`` after the first share its place or type."""
    places = rng.sample(SITE_PLACES, n)
    types = [rng.choice(SITE_TYPES) for _ in range(n)]
    keys = []
    for i in range(n):
        if 0 < i <= near:
            if i % 2:
                types[i] = rng.choice([t for t in SITE_TYPES if t != types[0]])
                places[i] = places[0]
            else:
                types[i] = types[0]
        key = f"{places[i]} {types[i]}"
        while key in keys:
            key = f"{rng.choice(SITE_PLACES)} {rng.choice(SITE_TYPES)}"
        keys.append(key)
    return keys
