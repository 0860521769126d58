"""Lookup families that apply structure: a policy's grade brackets and exception, a table's cell."""

from __future__ import annotations

from llmgym.envs.longdoc.families.common import Ctx, LongDocFamily, make_task
from llmgym.envs.longdoc.writers.annual_report import AnnualReport
from llmgym.envs.longdoc.writers.corporate_policy import Policy
from llmgym.envs.longdoc.writers.document import Plant, Section
from llmgym.envs.longdoc.writers.vocab import GRADES
from llmgym.tasks import Task


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


FAMILIES = [
    LongDocFamily(
        "conditional_policy", conditional_policy, "apply grade brackets and a city exception"
    ),
    LongDocFamily("table_lookup", table_lookup, "a cell of a quarterly table, beside last year's"),
]
