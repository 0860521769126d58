"""Needle families: one fact (or several) among look-alike facts, and a key the document never gives."""

from __future__ import annotations

import random

from llmgym.envs.longdoc.families.common import (
    Ctx,
    LongDocFamily,
    make_task,
    prose_writer,
    site_keys,
)
from llmgym.envs.longdoc.writers.cast import code, near_miss
from llmgym.envs.longdoc.writers.document import Plant
from llmgym.rewards.longdoc import NOT_STATED
from llmgym.tasks import Task

RELATIONS = (
    (
        "the access code for the {key}",
        (
            "For reference, the access code for the {key} is {value}.",
            "Visitors to the {key} should note that its access code is {value}.",
        ),
    ),
    (
        "the cost-centre code of the {key}",
        (
            "Costs incurred at the {key} are booked to cost centre {value}.",
            "The cost-centre code of the {key} is {value}.",
        ),
    ),
    (
        "the escrow reference for the {key}",
        (
            "The escrow reference for the {key} is recorded as {value}.",
            "Funds relating to the {key} are held in escrow under reference {value}.",
        ),
    ),
    (
        "the operating permit number of the {key}",
        (
            "The operating permit for the {key} carries the number {value}.",
            "The {key} operates under permit number {value}.",
        ),
    ),
)


def _needle(rng: random.Random, relation: int, key: str, value: str) -> str:
    return rng.choice(RELATIONS[relation][1]).format(key=key, value=value)


def _values(rng: random.Random, n: int) -> list[str]:
    prefix = rng.choice(("RF", "KX", "AC", "TR", "PN", "EQ"))
    first = code(rng, prefix)
    values = [first]
    while len(values) < n:
        v = near_miss(rng, first) if rng.random() < 0.5 else code(rng, prefix)
        if v not in values:
            values.append(v)
    return values


def needle_single(ctx: Ctx) -> Task:
    rng = ctx.rng
    n_distract = ctx.level(1, 5)
    rel = rng.randrange(len(RELATIONS))
    keys = site_keys(rng, 1 + n_distract, near=n_distract)
    values = _values(rng, len(keys))
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(len(keys)), keys, values, strict=True)
    ]
    doc = ctx.assemble(prose_writer(ctx), plants)
    question = f"What is {RELATIONS[rel][0].format(key=keys[0])}?"
    spec = {"type": "exact", "gold": values[0], "distractors": values[1:], "max_words": 20}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=values[0],
        keep=[(plants[0], [values[0]])],
    )


def needle_multikey(ctx: Ctx) -> Task:
    rng = ctx.rng
    n = ctx.level(3, 16)
    rel = rng.randrange(len(RELATIONS))
    keys = site_keys(rng, n, near=min(3, n - 1))
    values = _values(rng, n)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(n), keys, values, strict=True)
    ]
    doc = ctx.assemble(prose_writer(ctx), plants)
    question = (
        f"Several sites are listed with codes. What is {RELATIONS[rel][0].format(key=keys[0])}?"
    )
    spec = {"type": "exact", "gold": values[0], "distractors": values[1:], "max_words": 20}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=values[0],
        keep=[(plants[0], [values[0]])],
    )


def needle_multivalue(ctx: Ctx) -> Task:
    rng = ctx.rng
    m, n_other = ctx.level(2, 5), ctx.level(1, 5)
    rel = rng.randrange(len(RELATIONS))
    keys = site_keys(rng, 1 + n_other, near=n_other)
    values = _values(rng, m + n_other)
    thing = RELATIONS[rel][0].format(key=keys[0])
    texts = [f"One of the values recorded for {thing} is {v}." for v in values[:m]]
    texts += [_needle(rng, rel, k, v) for k, v in zip(keys[1:], values[m:], strict=True)]
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(prose_writer(ctx), plants)
    question = f"The document gives several values for {thing}. List all of them."
    spec = {
        "type": "set",
        "gold": values[:m],
        "distractors": [values[m:]] if n_other else [],
        "max_words": 12 * m,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:m],
        oracle=values[:m],
        keep=[(p, [v]) for p, v in zip(plants, values[:m], strict=False)],
    )


def needle_multiquery(ctx: Ctx) -> Task:
    rng = ctx.rng
    q, n_other = ctx.level(2, 4), ctx.level(1, 6)
    rel = rng.randrange(len(RELATIONS))
    keys = site_keys(rng, q + n_other, near=2)
    values = _values(rng, q + n_other)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(len(keys)), keys, values, strict=True)
    ]
    doc = ctx.assemble(prose_writer(ctx), plants)
    asked = "; ".join(keys[:q])
    question = f"Give {RELATIONS[rel][0].format(key='site')} for each of these sites, in this order: {asked}."
    swapped = values[:q][::-1]  # every value given, but to the wrong sites
    wrong = [swapped] + ([values[q : 2 * q]] if n_other >= q else [])
    spec = {"type": "list", "gold": values[:q], "distractors": wrong, "max_words": 12 * q}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:q],
        oracle=values[:q],
        keep=[(p, [v]) for p, v in zip(plants, values[:q], strict=False)],
    )


def unanswerable(ctx: Ctx) -> Task:
    rng = ctx.rng
    n = ctx.level(1, 5)
    rel = rng.randrange(len(RELATIONS))
    keys = site_keys(rng, n + 1, near=n)
    values = _values(rng, n)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(n), keys[1:], values, strict=True)
    ]
    doc = ctx.assemble(prose_writer(ctx), plants)
    question = f"What is {RELATIONS[rel][0].format(key=keys[0])}?"
    spec = {
        "type": "exact",
        "gold": NOT_STATED[0],
        "aliases": list(NOT_STATED[1:]),
        "distractors": values,
        "max_words": 20,
    }
    return make_task(ctx, doc, question, spec, support=[], oracle=NOT_STATED[0], primary=plants[0])


FAMILIES = [
    LongDocFamily("needle_single", needle_single, "one fact among look-alike near-miss facts"),
    LongDocFamily(
        "needle_multikey", needle_multikey, "one key's value among many keys of the same kind"
    ),
    LongDocFamily("needle_multivalue", needle_multivalue, "every value one key has (match-all)"),
    LongDocFamily("needle_multiquery", needle_multiquery, "the values of several keys, in order"),
    LongDocFamily(
        "unanswerable", unanswerable, "a key the document never gives (answer 'not stated')"
    ),
]
