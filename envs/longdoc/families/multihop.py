"""Multi-hop families: a chain of facts across sections, and a clause that points to a rate card."""

from __future__ import annotations

from llmgym.envs.longdoc.families.common import (
    Ctx,
    LongDocFamily,
    make_task,
    prose_writer,
    site_keys,
)
from llmgym.envs.longdoc.writers.cast import people
from llmgym.envs.longdoc.writers.contract import Contract
from llmgym.envs.longdoc.writers.document import Plant, Section
from llmgym.envs.longdoc.writers.vocab import PROJECT_NAMES, REGIONS
from llmgym.tasks import Task


def multihop_chain(ctx: Ctx) -> Task:
    rng = ctx.rng
    hops = ctx.level(2, 4)
    chains = 1 + ctx.level(1, 3)
    projects = rng.sample(PROJECT_NAMES, chains)
    sites = site_keys(rng, chains)
    regions = rng.sample([r for r in REGIONS if r.startswith("the ")], chains)
    heads = people(rng, chains)
    exts = rng.sample(range(2000, 9999), chains)
    div = [f"{r[4:]} division" for r in regions]
    steps = [
        (lambda i: f"Project {projects[i]} is run from the {sites[i]}.", sites),
        (lambda i: f"The {sites[i]} reports to the {div[i]}.", div),
        (lambda i: f"The {div[i]} is headed by {heads[i]}.", heads),
        (
            lambda i: f"{heads[i]} can be reached on internal extension {exts[i]}.",
            [str(e) for e in exts],
        ),
    ]
    answers = steps[hops - 1][1]
    texts = [steps[h][0](i) for i in range(chains) for h in range(hops)]
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(prose_writer(ctx), plants)
    ask = {
        2: f"Which division does the site that runs Project {projects[0]} report to?",
        3: f"Who heads the division that the site running Project {projects[0]} reports to?",
        4: f"On which internal extension can the head of the division responsible for Project {projects[0]}'s site be reached?",
    }[hops]
    gold = answers[0]
    spec = {"type": "exact", "gold": gold, "distractors": answers[1:], "max_words": 20}
    chain = plants[:hops]
    keep = [(p, [steps[h][1][0]]) for h, p in enumerate(chain)]
    return make_task(ctx, doc, ask, spec, support=chain, oracle=gold, keep=keep)


def cross_reference(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Contract(ctx.seed())
    bands = ["A", "B", "C", "D", "E"][: ctx.level(3, 5)]
    rates = rng.sample(range(35, 240), len(bands))
    service = rng.choice(
        (
            "on-site engineering",
            "out-of-hours security",
            "specialist cleaning",
            "facilities helpdesk",
        )
    )
    sites = rng.sample(writer.sites, 3)
    writer.avoid = lambda key: key[0] == "site" and key[1] in sites
    site_band = rng.sample(bands, len(sites))
    table = "\n".join(
        f"| Band {b} | {writer.symbol}{r} per hour |" for b, r in zip(bands, rates, strict=True)
    )
    rate_section = Section("Rate card", [f"| Band | Hourly rate |\n|---|---|\n{table}"], [False])
    refs = [
        Plant(
            d,
            sentence=f"Charges for {service} at the {s} shall be calculated at the Band {b} rate in the Rate card.",
        )
        for d, s, b in zip(ctx.depths(len(sites)), sites, site_band, strict=True)
    ]
    card = Plant(rng.uniform(0.6, 1.0), section=rate_section)
    doc = ctx.assemble(writer, [*refs, card])
    gold = rates[bands.index(site_band[0])]
    question = f"What hourly rate applies to {service} at the {sites[0]}? Give the amount per hour."
    others = [str(r) for r in rates if r != gold]
    spec = {"type": "number", "gold": gold, "distractors": others, "max_words": 15}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=[refs[0], card],
        oracle=f"{writer.symbol}{gold}",
        keep=[(refs[0], [f"Band {site_band[0]}"]), (card, [str(gold)])],
    )


FAMILIES = [
    LongDocFamily("multihop_chain", multihop_chain, "a chain of 2-4 facts across sections"),
    LongDocFamily("cross_reference", cross_reference, "a clause that points to a rate card"),
]
