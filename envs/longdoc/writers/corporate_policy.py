"""Corporate policies: purpose and scope, rules by topic with grades, limits and approvers."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from llmgym.envs.longdoc.writers.cast import long_date, people
from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    APPROVERS,
    CITIES,
    COMPANY_FORMS,
    COMPANY_STEMS,
    CURRENCIES,
    DEPARTMENTS,
    GRADES,
    MONTHS,
    POLICY_AREAS,
    ROLES,
)

RULE = Phrases(
    "Employees in grades {g1} to {g2} must obtain approval from their {approver} before committing to {topic} costs above {money}.",
    "Requests for {topic} must be submitted at least {days} working days in advance through the {dept} portal.",
    "Where {topic} is arranged for a visit to {city}, the {approver} may approve an exception of up to {pct} above the standard limit.",
    "Claims for {topic} that are submitted more than {days} days after the event will be referred to the {role}.",
    "The {dept} team reviews a sample of {count} {topic} records each quarter and reports exceptions to the {role}.",
    "Contractors engaged for more than {months} months follow the {topic} rules for grade {g1} employees.",
    "Repeated breaches of the {topic} rules ({count} or more in a year) are handled under the disciplinary procedure and reported to the {approver}.",
    "The standard limit for {topic} is {money} per occasion unless the {approver} agrees otherwise in writing.",
    "Receipts for {topic} must be retained for {years} years and uploaded within {days} days.",
    "Staff working from the {city} office should contact the local {dept} coordinator, {person}, about {topic}.",
    "An annual attestation covering {topic} is completed by every manager in grade {g2} or above by the end of {month}.",
    "The {role} may suspend the {topic} arrangements for up to {days} days where there is a business need.",
)
ASPECTS = (
    "eligibility",
    "limits",
    "approvals",
    "exceptions",
    "records",
    "claims",
    "responsibilities",
    "booking",
    "reimbursement",
    "audits",
    "escalation",
    "local variations",
    "monitoring",
    "training",
)
PURPOSE = Phrases(
    "This policy applies to all employees, contractors and agency workers of {company} in {count} countries.",
    "It sets out how {topic} is managed and who may approve exceptions.",
    "The policy is owned by the {role} and is reviewed every {months} months.",
    "Questions about this policy should be sent to {person} in the {dept} team.",
)


class Policy(Writer):
    """A company policy handbook for one area (travel, security, procurement...)."""

    kind = "policy"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        pick = picker(rng)
        self.company = f"{pick(COMPANY_STEMS)} {pick(COMPANY_FORMS)}"
        self.area, self.topics = pick(POLICY_AREAS)
        self.symbol = pick(CURRENCIES)[0]
        self.owner = pick(ROLES)
        self.version = f"{rng.randint(2, 9)}.{rng.randint(0, 9)}"
        self.effective = dt.date(rng.randint(2016, 2024), rng.randint(1, 12), 1)
        self.people = people(rng, 12)
        self._n = 0

    def begin(self) -> None:
        self._n = 0

    def header(self) -> str:
        return (
            f"{self.company}\n{self.area} Policy\nVersion {self.version}, effective "
            f"{long_date(self.effective)}. Policy owner: {self.owner}."
        )

    def grades(self, rng: random.Random) -> dict[str, str]:
        """A section's grade bracket, fixed for its rules."""
        i = int(rng.random() * 6)
        return {"g1": GRADES[i], "g2": GRADES[i + 1 + int(rng.random() * (7 - i))]}

    def base_slots(self, rng: random.Random) -> dict[str, Any]:
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        topics = [t for t in self.topics if not self.avoid(("topic", t))]
        slots: dict[str, Any] = {
            "g1": lambda: GRADES[0],
            "g2": lambda: GRADES[-1],
            "approver": choice(APPROVERS),
            "topic": choice(topics),
            "money": lambda: f"{self.symbol}{int(20 + rnd() * 4980):,}",
            "days": lambda: str(pick((3, 5, 7, 10, 14, 20, 30, 60, 90))),
            "months": lambda: str(pick((3, 6, 9, 12, 18, 24))),
            "years": lambda: str(pick((2, 3, 5, 6, 7, 10))),
            "pct": lambda: f"{pick((5, 10, 15, 20, 25))}%",
            "count": lambda: str(5 + int(rnd() * 60)),
            "city": choice(CITIES),
            "dept": choice(DEPARTMENTS),
            "role": choice(ROLES),
            "person": choice(self.people),
            "company": lambda: self.company,
            "month": choice(MONTHS),
        }
        return slots

    def front(self) -> list[Section]:
        rng = random.Random(self.seed + 1)
        slots = self.slots(rng, topic=self.area.lower(), **self.grades(rng))
        return [Section("Purpose and scope", [PURPOSE.paragraph(rng, slots, 4, Budget(10**9))])]

    def body(self, rng: random.Random, budget: Budget) -> Section:
        topic = picker(rng)([t for t in self.topics if not self.avoid(("topic", t))])
        self._n += 1
        slots = self.slots(rng, topic=topic, **self.grades(rng))
        blocks = [
            f"{self._n}.{k} " + RULE.paragraph(rng, slots, 2 + int(rng.random() * 2), budget)
            for k in range(1, 2 + int(rng.random() * 3))
        ]
        title = f"{topic[0].upper()}{topic[1:]}: {picker(rng)(ASPECTS)}"
        budget.spend(len(title) + 8)
        return Section(title, blocks)

    def back(self) -> list[Section]:
        rng = random.Random(self.seed + 2)
        rows = "\n".join(
            f"| {self.version[0]}.{i} | {long_date(self.effective - dt.timedelta(days=400 * (4 - i)))} | {rng.choice(self.people)} |"
            for i in range(4)
        )
        return [
            Section(
                "Document history",
                [f"| Version | Date | Approved by |\n|---|---|---|\n{rows}"],
                [False],
            )
        ]
