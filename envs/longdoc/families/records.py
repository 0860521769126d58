"""Record families: incidents of a register, actions of minutes, procedures of a manual."""

from __future__ import annotations

from typing import Any

from llmgym.envs.longdoc.families.common import Ctx, LongDocFamily, make_task
from llmgym.envs.longdoc.writers.cast import long_date
from llmgym.envs.longdoc.writers.document import Budget, Plant, Section
from llmgym.envs.longdoc.writers.incident_log import IncidentLog
from llmgym.envs.longdoc.writers.manual import Manual
from llmgym.envs.longdoc.writers.minutes import Minutes
from llmgym.envs.longdoc.writers.vocab import COMPONENTS, ROOT_CAUSES
from llmgym.tasks import Task


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


FAMILIES = [
    LongDocFamily(
        "incident_root_cause", incident_root_cause, "an incident's root cause (token F1)"
    ),
    LongDocFamily("section_summary", section_summary, "summarise an incident, graded on key facts"),
    LongDocFamily(
        "minutes_action_owner", minutes_action_owner, "who got an action at a dated meeting"
    ),
    LongDocFamily("manual_spec_lookup", manual_spec_lookup, "a torque value for one model"),
]
