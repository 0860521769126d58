"""The LongDoc task families: needles, multi-hop chains, aggregation, comparison, timelines,
policy conditions, tables, contradictions, code questions and summaries.

Each family is ``generate(ctx) -> Task``: it picks a writer, plants what its question needs
(the answer and look-alike distractors) at depths, assembles the document and asks. The
primary fact sits at ``ctx.depth`` (a point of :data:`DEPTH_GRID` chosen from the task
index); the other plants are spread with ``ctx.rng``. Difficulty sets the document length
(log scale between the env's bounds) and each family's own knobs: distractors, hops, items.

Every task's answer is an answer spec for :func:`llmgym.rewards.longdoc.grade_answer`; its
``distractors`` are values that appear in the document but answer a different question.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmgym.envs.longdoc.cast import code, long_date, money, near_miss, people
from llmgym.envs.longdoc.codefile import CodeFile
from llmgym.envs.longdoc.contract import Contract
from llmgym.envs.longdoc.document import Budget, Document, Plant, Section, Writer, assemble
from llmgym.envs.longdoc.incidents import IncidentLog
from llmgym.envs.longdoc.manual import Manual
from llmgym.envs.longdoc.minutes import Minutes
from llmgym.envs.longdoc.policy import Policy
from llmgym.envs.longdoc.report import AnnualReport
from llmgym.envs.longdoc.tokens import TokenCounter
from llmgym.envs.longdoc.vocab import (
    CODE_NOUNS,
    CODE_PARAMS,
    COMPONENTS,
    GRADES,
    PROGRAMMES,
    PROJECT_NAMES,
    REGIONS,
    ROOT_CAUSES,
    SITE_PLACES,
    SITE_TYPES,
)
from llmgym.rewards.longdoc import NOT_STATED
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


def _prose_writer(ctx: Ctx) -> Writer:
    return ctx.rng.choice(PROSE_WRITERS)(ctx.seed())


# --- needles ----------------------------------------------------------------------------------

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


def _keys(rng: random.Random, n: int, near: int = 0) -> list[str]:
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
    keys = _keys(rng, 1 + n_distract, near=n_distract)
    values = _values(rng, len(keys))
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(len(keys)), keys, values, strict=True)
    ]
    doc = ctx.assemble(_prose_writer(ctx), plants)
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
    keys = _keys(rng, n, near=min(3, n - 1))
    values = _values(rng, n)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(n), keys, values, strict=True)
    ]
    doc = ctx.assemble(_prose_writer(ctx), plants)
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
    keys = _keys(rng, 1 + n_other, near=n_other)
    values = _values(rng, m + n_other)
    thing = RELATIONS[rel][0].format(key=keys[0])
    texts = [f"One of the values recorded for {thing} is {v}." for v in values[:m]]
    texts += [_needle(rng, rel, k, v) for k, v in zip(keys[1:], values[m:], strict=True)]
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(_prose_writer(ctx), plants)
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
    keys = _keys(rng, q + n_other, near=2)
    values = _values(rng, q + n_other)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(len(keys)), keys, values, strict=True)
    ]
    doc = ctx.assemble(_prose_writer(ctx), plants)
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
    keys = _keys(rng, n + 1, near=n)
    values = _values(rng, n)
    plants = [
        Plant(d, sentence=_needle(rng, rel, k, v))
        for d, k, v in zip(ctx.depths(n), keys[1:], values, strict=True)
    ]
    doc = ctx.assemble(_prose_writer(ctx), plants)
    question = f"What is {RELATIONS[rel][0].format(key=keys[0])}?"
    spec = {
        "type": "exact",
        "gold": NOT_STATED[0],
        "aliases": list(NOT_STATED[1:]),
        "distractors": values,
        "max_words": 20,
    }
    return make_task(ctx, doc, question, spec, support=[], oracle=NOT_STATED[0], primary=plants[0])


# --- multi-hop ---------------------------------------------------------------------------------


def multihop_chain(ctx: Ctx) -> Task:
    rng = ctx.rng
    hops = ctx.level(2, 4)
    chains = 1 + ctx.level(1, 3)
    projects = rng.sample(PROJECT_NAMES, chains)
    sites = _keys(rng, chains)
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
    doc = ctx.assemble(_prose_writer(ctx), plants)
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


# --- aggregation, comparison, timelines ------------------------------------------------------


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
    writer = _prose_writer(ctx)
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


# --- policies, tables, contradictions, contracts ------------------------------------------------


def conditional_policy(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Policy(ctx.seed())
    topic = rng.choice(writer.topics)
    writer.avoid = lambda key: key == ("topic", topic)
    cuts = sorted(rng.sample(range(1, 7), 2))
    brackets = [
        (GRADES[0], GRADES[cuts[0] - 1]),
        (GRADES[cuts[0]], GRADES[cuts[1] - 1]),
        (GRADES[cuts[1]], GRADES[-1]),
    ]
    limits = rng.sample(range(60, 900, 5), 3)
    city_rate = rng.choice([x for x in range(100, 1200, 5) if x not in limits])
    city = rng.choice(("Geneva", "Oslo", "Zurich", "Copenhagen", "Reykjavik"))
    raised = rng.randrange(3)
    s = writer.symbol
    texts = [
        f"The limit for {topic} is {s}{limits[i]} for employees in grades {a} to {b}."
        for i, (a, b) in enumerate(brackets)
    ]
    texts.append(
        f"For {topic} in {city}, employees in grades {brackets[raised][0]} to {brackets[raised][1]} may claim up to {s}{city_rate} instead of the usual limit."
    )
    plants = [Plant(d, sentence=t) for d, t in zip(ctx.depths(len(texts)), texts, strict=True)]
    doc = ctx.assemble(writer, plants)
    b = rng.randrange(3)
    grade = rng.choice(GRADES[GRADES.index(brackets[b][0]) : GRADES.index(brackets[b][1]) + 1])
    in_city = rng.random() < (0.5 if b == raised else 0.3)
    where = city if in_city else rng.choice(("Lyon", "Leeds", "Porto", "Ghent"))
    gold = city_rate if in_city and b == raised else limits[b]
    support = [plants[b]] + ([plants[3]] if in_city and b == raised else [])
    question = f"An employee in grade {grade} is claiming {topic} for a trip to {where}. Under this policy, what is the most they may claim? Give the amount in {s}."
    others = [str(x) for x in [*limits, city_rate] if x != gold]
    spec = {"type": "number", "gold": gold, "distractors": others, "max_words": 15}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=support,
        oracle=f"{s}{gold}",
        keep=[(p, [f"{s}{x}"]) for p, x in zip(plants, [*limits, city_rate], strict=True)],
    )


def table_lookup(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = AnnualReport(ctx.seed())
    metric = rng.choice(("Revenue", "Operating profit", "Order intake", "Capital expenditure"))
    writer.avoid = lambda key: key == ("table", metric)
    rows = list(writer.segments)
    table, cells = writer.table(rng, metric, writer.year, rows)
    prior, prior_cells = writer.table(rng, metric, writer.year - 1, rows)
    main = Section(f"{metric} by segment and quarter, {writer.year}", [table], [False])
    decoy = Section(f"{metric} by segment and quarter, {writer.year - 1}", [prior], [False])
    depths = ctx.depths(2)
    plants = [Plant(depths[0], section=main), Plant(depths[1], section=decoy)]
    doc = ctx.assemble(writer, plants)
    row, col = rng.choice(rows), rng.choice(("Q1", "Q2", "Q3", "Q4"))
    gold = cells[(row, col)]
    near = [cells[(row, q)] for q in ("Q1", "Q2", "Q3", "Q4") if q != col] + [
        cells[(r, col)] for r in rows if r != row
    ]
    near.append(prior_cells[(row, col)])
    question = f"In the table of {metric.lower()} by segment and quarter for {writer.year}, what figure is given for {row} in {col}? Give the number as printed (in thousands)."
    spec = {
        "type": "number",
        "gold": gold,
        "distractors": [str(v) for v in near if v != gold],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=f"{gold:,}",
        keep=[(plants[0], [f"{gold:,}"])],
    )


def contradiction(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = _prose_writer(ctx)
    key = _keys(rng, 1)[0]
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


# --- incidents, minutes, manuals ---------------------------------------------------------------


def _incidents(ctx: Ctx) -> tuple[IncidentLog, list[Plant], list[dict[str, Any]]]:
    rng = ctx.rng
    writer = IncidentLog(ctx.seed())
    n = 1 + ctx.level(1, 4)
    causes = rng.sample(ROOT_CAUSES, n)
    services = rng.sample(writer.services, n)
    severities = [rng.randint(1, 4) for _ in range(n)]
    minutes = rng.sample(range(7, 300), n)
    writer.avoid = lambda rec: rec["cause"] in causes
    budget = Budget(10**9)
    recs = [
        writer.record(rng, cause=c, service=s, severity=v, minutes=m)
        for c, s, v, m in zip(causes, services, severities, minutes, strict=True)
    ]
    for r in recs[1:]:
        r["severity"] = rng.choice([x for x in (1, 2, 3, 4) if x != recs[0]["severity"]])
    plants = [
        Plant(d, section=writer.incident(rng, r, budget))
        for d, r in zip(ctx.depths(n), recs, strict=True)
    ]
    return writer, plants, recs


def incident_root_cause(ctx: Ctx) -> Task:
    writer, plants, recs = _incidents(ctx)
    doc = ctx.assemble(writer, plants)
    question = f"According to the incident register, what was the root cause of {recs[0]['id']}?"
    spec = {
        "type": "f1",
        "gold": recs[0]["cause"],
        "distractors": [r["cause"] for r in recs[1:]],
        "max_words": 40,
        "success_at": 0.8,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=recs[0]["cause"],
        keep=[(plants[0], [recs[0]["cause"]])],
    )


def section_summary(ctx: Ctx) -> Task:
    writer, plants, recs = _incidents(ctx)
    doc = ctx.assemble(writer, plants)

    def facts(r: dict[str, Any]) -> list[list[str]]:
        return [
            [r["service"]],
            [f"SEV-{r['severity']}", f"severity {r['severity']}"],
            [f"{r['minutes']} minutes"],
            [r["cause"]],
        ]

    gold = recs[0]
    question = f"Summarise incident {gold['id']} in at most 60 words: the service affected, the severity, how long it lasted and its root cause."
    distract = [f for r in recs[1:] for f in facts(r)]
    spec = {
        "type": "keyfacts",
        "gold": facts(gold),
        "distractors": distract,
        "max_words": 60,
        "success_at": 1.0,
    }
    oracle = f"{gold['id']} hit {gold['service']} at SEV-{gold['severity']} for {gold['minutes']} minutes; the root cause was {gold['cause']}."
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=oracle,
        keep=[(plants[0], [gold["service"], f"{gold['minutes']} minutes"])],
    )


def minutes_action_owner(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Minutes(ctx.seed())
    task = rng.choice(
        (
            "renegotiate the cleaning contract",
            "draft the travel policy update",
            "prepare the energy audit brief",
            "review the insurance schedule",
            "cost the warehouse lighting upgrade",
        )
    )
    n = ctx.level(2, 4)
    owners = rng.sample(writer.people[1:], n)
    plants = []
    for d, owner in zip(ctx.depths(n), owners, strict=True):
        meeting = writer.body(rng, Budget(600))
        meeting.blocks[-2] += f" It was agreed that {owner} would {task} before the next meeting."
        plants.append(Plant(d, section=meeting))
    doc = ctx.assemble(writer, plants)
    gold_meeting = plants[0].section
    assert gold_meeting is not None and gold_meeting.record is not None
    question = (
        f"At the meeting of {long_date(gold_meeting.record['date'])}, who was asked to {task}?"
    )
    spec = {"type": "exact", "gold": owners[0], "distractors": owners[1:], "max_words": 15}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=owners[0],
        keep=[(plants[0], [owners[0]])],
    )


def manual_spec_lookup(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = Manual(ctx.seed())
    component = rng.choice(COMPONENTS)
    n = ctx.level(2, 5)
    models = rng.sample(writer.models, n)
    torques = rng.sample(range(10, 180, 5), n)
    writer.avoid = lambda key: key[0] == "procedure" and key[1] == component
    plants = []
    for d, model, t in zip(ctx.depths(n), models, torques, strict=True):
        steps = writer.steps(rng, component, model, torque=t)
        sec = Section(
            f"Procedure {rng.randint(100, 999)}: replacing the {component} ({model})",
            [steps],
            [False],
        )
        plants.append(Plant(d, section=sec))
    doc = ctx.assemble(writer, plants)
    question = f"What torque, in Nm, does the manual specify for the fixings when replacing the {component} on the {models[0]}?"
    spec = {
        "type": "number",
        "gold": torques[0],
        "distractors": [str(t) for t in torques[1:]],
        "max_words": 15,
    }
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=f"{torques[0]} Nm",
        keep=[(plants[0], [f"{torques[0]} Nm"])],
    )


# --- code ----------------------------------------------------------------------------------------


def _code_names(rng: random.Random, writer: CodeFile, n: int, noun: str) -> list[str]:
    names = []
    for _ in range(n):
        name = writer.new_name(rng, noun)
        writer.reserved.add(name)
        names.append(name)
    return names


def code_lookup(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    param, ptype, defaults = rng.choice([p for p in CODE_PARAMS if len(p[2]) >= 3])
    n = min(ctx.level(2, 4), len(defaults))
    values = rng.sample(defaults, n)
    noun = rng.choice(CODE_NOUNS)
    names = _code_names(rng, writer, n, noun)
    blocks = [
        writer.function(rng, name, [(param, ptype, v)], [], noun)
        for name, v in zip(names, values, strict=True)
    ]
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(n), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = (
        f"In the function `{names[0]}`, what is the default value of the parameter `{param}`?"
    )
    spec = {"type": "exact", "gold": values[0], "distractors": values[1:], "max_words": 10}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=values[0],
        keep=[(plants[0], [names[0], values[0]])],
    )


def code_callers(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    noun = rng.choice(CODE_NOUNS)
    k = ctx.level(2, 5)
    target, similar, *callers = _code_names(rng, writer, 2 + k + 2, noun)
    decoys = callers[k:]
    callers = callers[:k]
    writer.avoid = lambda key: key in (("call", target), ("call", similar))
    blocks = [
        writer.function(rng, target, writer.random_params(rng), [], noun),
        writer.function(rng, similar, [], [], noun),
    ]
    blocks += [writer.function(rng, c, writer.random_params(rng), [target], noun) for c in callers]
    blocks += [writer.function(rng, d, [], [similar], noun) for d in decoys]
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(len(blocks)), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = f"Which functions in this module call `{target}` directly? List every one."
    spec = {"type": "set", "gold": callers, "distractors": [decoys], "max_words": 10 * k}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[2 : 2 + k],
        oracle=callers,
        keep=[(p, [c]) for p, c in zip(plants[2:], callers, strict=False)],
        primary=plants[2],
    )


def code_trace(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    noun = rng.choice(CODE_NOUNS)
    const = (
        f"{noun.upper()}_{rng.choice(('BATCH_LIMIT', 'GRACE_DAYS', 'MAX_RETRIES', 'PAGE_SIZE'))}"
    )
    legacy = f"{const}_{rng.choice(('LEGACY', 'V1', 'DRAFT'))}"
    value, old = rng.sample((8, 12, 16, 25, 30, 45, 64, 90, 128, 256, 500, 512, 1000), 2)
    getter, old_getter = _code_names(rng, writer, 2, noun)
    blocks = [
        writer.constants([(const, value)]),
        writer.function(rng, getter, [], [], noun, body=[f"    return {const}"]),
        writer.constants([(legacy, old)]),
        writer.function(rng, old_getter, [], [], noun, body=[f"    return {legacy}"]),
    ]
    hops = ctx.level(1, 2)
    if hops == 2:  # one more indirection: the getter returns a helper's result
        (mid,) = _code_names(rng, writer, 1, noun)
        blocks[1] = writer.function(rng, getter, [], [], noun, body=[f"    return {mid}()"])
        blocks.append(writer.function(rng, mid, [], [], noun, body=[f"    return {const}"]))
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(len(blocks)), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = f"What value does calling `{getter}(...)` return? (Follow the names it uses to their definitions.)"
    spec = {"type": "number", "gold": value, "distractors": [str(old)], "max_words": 10}
    support = [plants[0], plants[1]] + ([plants[4]] if hops == 2 else [])
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=support,
        oracle=str(value),
        keep=[(plants[0], [str(value)])],
        primary=plants[1],
    )


FAMILIES: dict[str, tuple[Callable[[Ctx], Task], str]] = {
    "needle_single": (needle_single, "one fact among look-alike near-miss facts"),
    "needle_multikey": (needle_multikey, "one key's value among many keys of the same kind"),
    "needle_multivalue": (needle_multivalue, "every value one key has (match-all)"),
    "needle_multiquery": (needle_multiquery, "the values of several keys, in order"),
    "unanswerable": (unanswerable, "a key the document never gives (answer 'not stated')"),
    "multihop_chain": (multihop_chain, "a chain of 2-4 facts across sections"),
    "cross_reference": (cross_reference, "a clause that points to a rate card"),
    "aggregation_count": (aggregation_count, "count matching incidents across the register"),
    "aggregation_sum": (aggregation_sum, "sum approvals spread over meetings"),
    "comparison": (comparison, "which region scored highest in a year"),
    "timeline_order": (timeline_order, "order milestones by their dates"),
    "conditional_policy": (conditional_policy, "apply grade brackets and a city exception"),
    "table_lookup": (table_lookup, "a cell of a quarterly table, beside last year's"),
    "contradiction": (contradiction, "the section that contradicts the others"),
    "contract_amendment": (contract_amendment, "the value after the latest amendment"),
    "incident_root_cause": (incident_root_cause, "an incident's root cause (token F1)"),
    "section_summary": (section_summary, "summarise an incident, graded on key facts"),
    "minutes_action_owner": (minutes_action_owner, "who got an action at a dated meeting"),
    "manual_spec_lookup": (manual_spec_lookup, "a torque value for one model"),
    "code_lookup": (code_lookup, "a parameter default of one function"),
    "code_callers": (code_callers, "every direct caller of a function"),
    "code_trace": (code_trace, "follow a getter to the constant it returns"),
}
