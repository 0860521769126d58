"""Revision families: a value the document states more than once (the odd one out, the latest amendment)."""

from __future__ import annotations

import datetime as dt

from llmgym.envs.longdoc.families.common import (
    Ctx,
    LongDocFamily,
    make_task,
    prose_writer,
    site_keys,
)
from llmgym.envs.longdoc.writers.cast import long_date
from llmgym.envs.longdoc.writers.contract import Contract
from llmgym.envs.longdoc.writers.document import Plant, Section
from llmgym.tasks import Task


def contradiction(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = prose_writer(ctx)
    key = site_keys(rng, 1)[0]
    what = rng.choice(
        (
            "notice period for ending the lease of the",
            "retention period for CCTV footage at the",
            "inspection interval for the fire doors at the",
        )
    )
    consistent, odd = rng.sample((14, 21, 30, 45, 60, 90, 120, 180), 2)
    n = ctx.level(2, 5)
    texts = [f"The {what} {key} is {odd} days."]
    texts += [
        rng.choice(
            (
                "As noted elsewhere, the {w} {k} is {v} days.",
                "The {w} {k} is {v} days.",
                "For the avoidance of doubt, the {w} {k} remains {v} days.",
            )
        ).format(w=what, k=key, v=consistent)
        for _ in range(n)
    ]
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(writer, plants)
    if len({p.sid for p in plants}) < len(plants):  # two statements share a section: spread them
        for i, p in enumerate(plants):
            p.depth = (ctx.depth + i / len(plants)) % 1.0
        doc = ctx.assemble(writer, plants)
    question = (
        f"The document states the {what} {key} in several places, but one section gives a value that "
        "conflicts with the others. Which section is it, and how many days does it give? Answer as: section id; days."
    )
    spec = {
        "type": "list",
        "gold": [plants[0].sid, str(odd)],
        "distractors": [[p.sid, str(consistent)] for p in plants[1:]],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=[plants[0].sid, str(odd)],
        keep=[(p, [f"{v} days"]) for p, v in zip(plants[:2], (odd, consistent), strict=False)],
    )


def contract_amendment(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Contract(ctx.seed())
    site, other = rng.sample(writer.sites, 2)
    writer.avoid = lambda key: key in (("site", site), ("site", other))
    n = ctx.level(1, 3)
    values = rng.sample((30, 45, 60, 90, 120, 180, 270), n + 2)
    base = f"Either party may terminate the services at the {site} on {values[0]} days' written notice."
    depth0 = min(ctx.depth, 0.5)
    plants = [Plant(depth0, sentence=base)]
    day = writer.date
    for i in range(1, n + 1):
        day += dt.timedelta(days=rng.randint(60, 400))
        sec = Section(
            f"Amendment No. {i}",
            [
                f"With effect from {long_date(day)}, the notice period for terminating the services at the {site} is changed to {values[i]} days. All other terms remain in force."
            ],
        )
        plants.append(Plant(depth0 + (1 - depth0) * i / (n + 1), section=sec))
    decoy = f"The notice period for terminating the services at the {other} is {values[-1]} days."
    plants.append(Plant(rng.random(), sentence=decoy))
    doc = ctx.assemble(writer, plants)
    gold = values[n]
    question = f"Taking every amendment into account, how many days' notice is needed to terminate the services at the {site}?"
    spec = {
        "type": "number",
        "gold": gold,
        "distractors": [str(v) for v in values if v != gold],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=[plants[n]],
        oracle=f"{gold} days",
        keep=[(plants[n], [f"{gold} days"])],
        primary=plants[0],
    )


FAMILIES = [
    LongDocFamily("contradiction", contradiction, "the section that contradicts the others"),
    LongDocFamily("contract_amendment", contract_amendment, "the value after the latest amendment"),
]
