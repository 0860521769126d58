"""Incident logs: a chronological register of production incidents with causes and follow-ups.

Each incident is a section with a ``record`` (service, severity, root cause...). Ids and
dates are given in document order by :meth:`IncidentLog.finalize`, so incidents that a
family plants at a depth still read chronologically.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from llmgym.envs.longdoc.writers.cast import long_date, people
from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    COMPANY_STEMS,
    DETECTIONS,
    REMEDIATIONS,
    ROOT_CAUSES,
    SERVICES,
    SYMPTOMS,
    TEAMS,
)

SUMMARY = Phrases(
    "Customers saw {symptom} on {service} for {minutes} minutes; about {pct} of requests were affected.",
    "The incident was detected by {detection} and the {team} on-call engineer, {person}, took command.",
    "No data was lost, but {count} transactions had to be replayed once {service} recovered.",
    "Support received {count2} tickets during the incident and posted {count3} status page updates.",
    "Downstream, {service2} showed {symptom2} until its queues drained.",
    "The error budget for {service} dropped to {pct} of its monthly allowance as a result.",
)
REVIEW = Phrases(
    "The review of the {service} incident, led by {person}, found that {detail}.",
    "Responders lost {minutes} minutes because the runbook for {service} described an older topology.",
    "The team agreed that alerts for {service} should page earlier, at {pct} of the error budget.",
    "{person} noted that {detail} had also been seen in a near miss {count} weeks earlier.",
)
DETAILS = (
    "the canary stage did not cover the affected region",
    "dashboards aggregated errors over too long a window",
    "the rollback script required a manual approval step",
    "two teams held conflicting assumptions about ownership of the shared proxy",
    "a capacity test had been skipped during the last release",
    "the alert threshold had been raised during an earlier incident and never restored",
    "logs from the affected hosts were sampled at one percent",
    "the dependency map did not list the failing component",
)


class IncidentLog(Writer):
    """An engineering organisation's production incident register for one year."""

    kind = "incident_log"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        self.company = rng.choice(COMPANY_STEMS)
        self.year = rng.randint(2018, 2024)
        self.first_id = rng.randint(1000, 8000)
        self.people = people(rng, 20)
        self.services = rng.sample(SERVICES, 10)

    def header(self) -> str:
        return f"{self.company} Engineering\nProduction incident register, {self.year}\nMaintained by the Site Reliability team"

    def record(self, rng: random.Random, **fixed: Any) -> dict[str, Any]:
        pick = picker(rng)
        rec = {
            "service": pick(self.services),
            "severity": 1 + int(rng.random() ** 1.6 * 4),
            "symptom": pick(SYMPTOMS),
            "cause": pick(ROOT_CAUSES),
            "remedy": pick(REMEDIATIONS),
            "team": pick(TEAMS),
            "detection": pick(DETECTIONS),
            "minutes": 5 + int(rng.random() * 240),
            "owner": pick(self.people),
        }
        rec.update(fixed)
        return rec

    def incident(self, rng: random.Random, rec: dict[str, Any], budget: Budget) -> Section:
        """The section for one incident record (its id, date and title come in ``finalize``)."""
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        slots = {
            "symptom": lambda: rec["symptom"],
            "symptom2": choice(SYMPTOMS),
            "service": lambda: rec["service"],
            "service2": lambda: pick([s for s in self.services if s != rec["service"]]),
            "minutes": lambda: str(rec["minutes"]),
            "pct": lambda: f"{1 + rnd() * 60:.0f}%",
            "detection": lambda: rec["detection"],
            "team": lambda: rec["team"],
            "person": lambda: rec["owner"],
            "count": lambda: str(2 + int(rnd() * 30)),
            "count2": lambda: str(3 + int(rnd() * 400)),
            "count3": lambda: str(2 + int(rnd() * 8)),
            "detail": choice(DETAILS),
        }
        start = rng.randint(0, 23 * 60)
        steps = [
            (
                start,
                f"{rec['detection'][0].upper()}{rec['detection'][1:]} fired for {rec['service']}.",
            ),
            (start + 4 + int(rnd() * 10), f"{rec['owner']} acknowledged and opened a bridge."),
            (start + rec["minutes"] // 2, f"Responders {rec['remedy']}."),
            (start + rec["minutes"], "Service confirmed healthy; incident resolved."),
        ]
        timeline = "\n".join(f"- {m // 60 % 24:02d}:{m % 60:02d} {what}" for m, what in steps)
        blocks = [
            "Date: 00 September 2000 | Severity: SEV-0 | Service: "
            + rec["service"]
            + " | Duration: 000 minutes | Owner: "
            + rec["team"]
            + " team",  # rewritten in finalize
            SUMMARY.paragraph(rng, slots, 2 + int(rnd() * 3), budget),
            "Timeline (UTC):\n" + timeline,
            f"Root cause: {rec['cause']}, identified by {rec['owner']} after {4 + int(rnd() * 90)} minutes of investigation. "
            + REVIEW.paragraph(rng, slots, 1 + int(rnd() * 2), budget),
            f"Follow-up: the {rec['team']} team will add a regression test and review alerting for {rec['service']} within {pick((5, 10, 15, 20))} working days.",
        ]
        budget.spend(len(timeline) + 400)
        title = f"INC-0000: {rec['symptom']} on {rec['service']}"  # the id comes in finalize
        return Section(title, blocks, [False, True, False, True, True], record=rec)

    def body(self, rng: random.Random, budget: Budget) -> Section:
        rec = self.record(rng)
        while self.avoid(rec):
            rec = self.record(rng)
        return self.incident(rng, rec, budget)

    def finalize(self, sections: list[Section]) -> None:
        rng = random.Random(self.seed + 3)
        day = dt.date(self.year, 1, 2)
        number = self.first_id
        step = max(1, 360 // max(1, sum(1 for s in sections if s.record)))
        for s in sections:
            rec = s.record
            if rec is None:
                continue
            number += 1 + int(rng.random() * 3)
            day += dt.timedelta(days=int(rng.random() * step * 2))
            rec["id"], rec["date"] = f"INC-{number}", day
            s.title = f"{rec['id']}: {rec['symptom']} on {rec['service']}"
            s.blocks[0] = (
                f"Date: {long_date(day)} | Severity: SEV-{rec['severity']} | Service: {rec['service']} | "
                f"Duration: {rec['minutes']} minutes | Owner: {rec['team']} team"
            )
