"""Aggregation families: count, sum, compare and order facts spread over the whole document."""

from __future__ import annotations

import datetime as dt
from typing import Any

from llmgym.envs.longdoc.families.common import Ctx, LongDocFamily, make_task, prose_writer
from llmgym.envs.longdoc.writers.annual_report import AnnualReport
from llmgym.envs.longdoc.writers.cast import long_date, money
from llmgym.envs.longdoc.writers.document import Budget, Document, Plant
from llmgym.envs.longdoc.writers.incident_log import IncidentLog
from llmgym.envs.longdoc.writers.minutes import Minutes
from llmgym.envs.longdoc.writers.vocab import PROGRAMMES
from llmgym.tasks import Task


def aggregation_count(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = IncidentLog(ctx.seed())
    service = rng.choice(writer.services)
    severity = rng.choice((1, 2))
    k = ctx.level(2, 8)
    writer.avoid = lambda rec: rec["service"] == service and rec["severity"] == severity
    budget = Budget(10**9)
    hits = [
        writer.incident(rng, writer.record(rng, service=service, severity=severity), budget)
        for _ in range(k)
    ]
    other_sev = [
        writer.incident(rng, writer.record(rng, service=service, severity=3), budget)
        for _ in range(ctx.level(1, 3))
    ]
    plants = [
        Plant(d, section=s)
        for d, s in zip(ctx.depths(k + len(other_sev)), hits + other_sev, strict=True)
    ]
    doc = ctx.assemble(writer, plants)
    all_service = sum(1 for r in _all_records(doc) if r["service"] == service)
    question = f"How many SEV-{severity} incidents on {service} does the register record?"
    wrong = {str(all_service), str(k + 1), str(k - 1)} - {str(k)}
    spec = {"type": "number", "gold": k, "distractors": sorted(wrong), "max_words": 15}
    keep = [(p, [p.section.record["id"]]) for p in plants[:k] if p.section and p.section.record]
    return make_task(ctx, doc, question, spec, support=plants[:k], oracle=str(k), keep=keep)


def _all_records(doc: Document) -> list[dict[str, Any]]:
    """Service and severity of every incident in the rendered register."""
    out = []
    for _, _, start, end in doc.sections:
        text = doc.text[start:end]
        if "| Service: " in text and "Severity: SEV-" in text:
            service = text.split("| Service: ", 1)[1].split(" |", 1)[0]
            out.append(
                {"service": service, "severity": int(text.split("Severity: SEV-", 1)[1][:1])}
            )
    return out


def aggregation_sum(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Minutes(ctx.seed())
    programme = rng.choice(PROGRAMMES)
    other = rng.choice([p for p in PROGRAMMES if p != programme])
    writer.avoid = lambda key: key in (("programme", programme), ("programme", other))
    k = ctx.level(2, 6)
    amounts = [rng.randint(12, 950) * 1000 for _ in range(k)]
    phases = rng.sample(
        ("design", "pilot", "procurement", "rollout", "training", "contingency", "integration"), k
    )
    texts = [
        f"The committee approved {money(writer.symbol, a // 1000)} for the {phase} phase of the {programme} programme."
        for a, phase in zip(amounts, phases, strict=True)
    ]
    deferred = rng.randint(20, 900) * 1000
    decoy_amount = rng.randint(20, 900) * 1000
    texts.append(
        f"A further request of {money(writer.symbol, deferred // 1000)} for the {programme} programme was deferred to a later meeting."
    )
    texts.append(
        f"The committee approved {money(writer.symbol, decoy_amount // 1000)} for the {other} programme."
    )
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(writer, plants)
    total = sum(amounts)
    question = f"What is the total amount the committee approved for the {programme} programme across all meetings? Give the amount in {writer.symbol} as a number."
    spec = {
        "type": "number",
        "gold": total,
        "distractors": [str(total + deferred), str(total + decoy_amount)],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:k],
        oracle=f"{writer.symbol}{total:,}",
        keep=[
            (p, [money(writer.symbol, a // 1000)]) for p, a in zip(plants, amounts, strict=False)
        ],
    )


def comparison(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = AnnualReport(ctx.seed())
    n = ctx.level(2, 4)
    regions = rng.sample(writer.regions, n)
    metric = rng.choice(
        ("net promoter score", "employee engagement score", "customer satisfaction index")
    )
    scores = rng.sample(range(31, 89), n)
    prior = rng.sample(range(31, 89), n)
    while prior.index(max(prior)) == scores.index(max(scores)):
        prior = rng.sample(range(31, 89), n)
    year = writer.year
    texts = [
        f"In {year}, the {metric} in {r} was {s}." for r, s in zip(regions, scores, strict=True)
    ]
    texts += [
        f"In {year - 1}, the {metric} in {r} had been {s}."
        for r, s in zip(regions, prior, strict=True)
    ]
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(writer, plants)
    best = regions[scores.index(max(scores))]
    question = f"Which of these regions had the highest {metric} in {year}: {', '.join(regions)}?"
    spec = {
        "type": "exact",
        "gold": best,
        "distractors": [r for r in regions if r != best],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:n],
        oracle=best,
        keep=[(p, [r, str(s)]) for p, r, s in zip(plants, regions, scores, strict=False)],
    )


MILESTONES = (
    "budget approval",
    "supplier selection",
    "design sign-off",
    "pilot launch",
    "staff training",
    "go-live",
    "post-implementation review",
    "contract signature",
)


def timeline_order(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = prose_writer(ctx)
    k = ctx.level(3, 6)
    programme, other = rng.sample(PROGRAMMES, 2)
    events = rng.sample(MILESTONES, k)
    start = dt.date(rng.randint(2016, 2023), rng.randint(1, 12), rng.randint(1, 28))
    days = sorted(rng.sample(range(0, 700), k))
    dates = {e: start + dt.timedelta(days=d) for e, d in zip(events, days, strict=True)}
    texts = [
        f"The {e} for the {programme} programme took place on {long_date(dates[e])}."
        for e in events
    ]
    decoy = events[::-1]
    texts += [
        f"The {e} for the {other} programme took place on {long_date(start + dt.timedelta(days=d))}."
        for e, d in zip(decoy, days, strict=True)
    ]
    plants = [Plant(0.0, sentence=t) for t in texts]
    placement = rng.sample(range(k), k) + list(range(k, len(texts)))  # document order != date order
    for d, i in zip(ctx.depths(len(texts)), placement, strict=True):
        plants[i].depth = d
    doc = ctx.assemble(writer, plants)
    shown = events[:]
    rng.shuffle(shown)
    question = f"Put these milestones of the {programme} programme in chronological order, earliest first: {'; '.join(shown)}."
    spec = {"type": "list", "gold": events, "distractors": [decoy], "max_words": 8 * k}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:k],
        oracle=events,
        keep=[(p, [e, long_date(dates[e])]) for p, e in zip(plants, events, strict=False)],
    )


FAMILIES = [
    LongDocFamily(
        "aggregation_count", aggregation_count, "count matching incidents across the register"
    ),
    LongDocFamily("aggregation_sum", aggregation_sum, "sum approvals spread over meetings"),
    LongDocFamily("comparison", comparison, "which region scored highest in a year"),
    LongDocFamily("timeline_order", timeline_order, "order milestones by their dates"),
]
