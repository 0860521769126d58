"""Contracts: a master services agreement with clauses, schedules of sites and an execution block."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from llmgym.envs.longdoc.writers.cast import long_date, money, people
from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    CITIES,
    COMPANY_FORMS,
    COMPANY_STEMS,
    CONTRACT_TOPICS,
    CURRENCIES,
    DEFINED_TERMS,
    INDUSTRIES,
    OBLIGATIONS,
    ROLES,
    SITE_PLACES,
    SITE_TYPES,
)

CLAUSE = Phrases(
    "The Supplier shall {obligation} in connection with the {topic_l} arrangements.",
    "Subject to clause {ref}, the Customer may require the Supplier to {obligation} within {days} Business Days of a written request.",
    "Any {term} relating to the {site} shall be agreed in writing between the {role} of each party.",
    "The Supplier's aggregate liability under this clause shall not exceed {money} in any Contract Year.",
    "Where the Supplier fails to {obligation}, the Customer shall be entitled to Service Credits of {pct} of the monthly Charges.",
    "Nothing in this clause limits the Customer's rights under clause {ref} or the {term} provisions.",
    "Each party shall give the other not less than {days} days' notice before any change to the {topic_l} arrangements at the {site}.",
    "The Supplier shall ensure that its subcontractors in {city} {obligation}.",
    "Disputes about the {term} shall first be referred to the {role} of each party, who shall meet within {days} days.",
    "The Customer shall pay undisputed invoices relating to the {site} within {days} days of receipt.",
    "The obligations in this clause relating to the {term2} survive termination for {years} years, save as set out in clause {ref}.",
    "The Supplier shall provide evidence that it continues to {obligation} on each anniversary of the Commencement Date, the first being due by {date}.",
    "Any amount payable under this clause is exclusive of VAT and shall be invoiced quarterly in arrears, subject to a cap of {money}.",
    "If the {term} is not agreed within {days} days, either party may refer the matter to an expert appointed by the President of the chamber of commerce in {city}.",
    "The Customer's {role} may waive the requirements of paragraph ({letter}) for the {site} by notice in writing.",
)
DEFINITION = Phrases(
    '"{term}" has the meaning given in clause {ref} and includes any {term2} at the {site}.',
    '"{term}" means the {term2} set out in Schedule {schedule}, as varied from time to time in accordance with clause {ref}.',
    '"{term}" means any period of {days} consecutive days during which the {term2} is unavailable.',
)
RECITALS = Phrases(
    "The Customer operates {count} sites and wishes to appoint a single supplier for {product}.",
    "Following a competitive tender that closed on {date}, the Customer selected the Supplier.",
    "The parties wish to record the terms on which the Supplier will provide the Services from its base in {city}.",
)


class Contract(Writer):
    """A master services agreement between a customer and a supplier."""

    kind = "contract"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        pick = picker(rng)
        stems = rng.sample(COMPANY_STEMS, 2)
        self.customer = f"{stems[0]} {pick(COMPANY_FORMS)}"
        self.supplier = (
            f"{stems[1]} {pick(('Services', 'Solutions', 'Facilities', 'Partners'))} Ltd"
        )
        self.symbol = pick(CURRENCIES)[0]
        self.date = dt.date(rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28))
        self.products = INDUSTRIES[pick(sorted(INDUSTRIES))]["products"]
        self.sites = [f"{p} {pick(SITE_TYPES)}" for p in rng.sample(SITE_PLACES, 10)]
        self.people = people(rng, 8)
        self._schedule = 0

    def begin(self) -> None:
        self._schedule = 0

    def header(self) -> str:
        return (
            f"MASTER SERVICES AGREEMENT\n\nThis Agreement is dated {long_date(self.date)} and made between "
            f'{self.customer} (the "Customer") and {self.supplier} (the "Supplier").'
        )

    def base_slots(self, rng: random.Random) -> dict[str, Any]:
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        sites = [s for s in self.sites if not self.avoid(("site", s))]
        slots: dict[str, Any] = {
            "obligation": choice(OBLIGATIONS),
            "term": choice(DEFINED_TERMS),
            "term2": lambda: pick(DEFINED_TERMS).lower(),
            "site": choice(sites),
            "role": choice(ROLES),
            "city": choice(CITIES),
            "ref": lambda: f"{2 + int(rnd() * 40)}.{1 + int(rnd() * 9)}",
            "days": lambda: str(pick((5, 10, 14, 20, 28, 30, 45, 60, 90))),
            "years": lambda: str(1 + int(rnd() * 7)),
            "pct": lambda: f"{0.5 + rnd() * 9.5:.1f}%",
            "money": lambda: money(self.symbol, int(50 + rnd() * 20_000)),
            "letter": lambda: pick("abcdefgh"),
            "schedule": lambda: str(1 + int(rnd() * 9)),
            "count": lambda: str(4 + int(rnd() * 80)),
            "product": choice(self.products),
            "date": lambda: long_date(self.date - dt.timedelta(days=int(20 + rnd() * 200))),
            "topic_l": lambda: pick(CONTRACT_TOPICS).lower(),
        }
        return slots

    def front(self) -> list[Section]:
        rng = random.Random(self.seed + 1)
        big = Budget(10**9)
        slots = self.slots(rng)
        return [
            Section("Background", [RECITALS.paragraph(rng, slots, 3, big)]),
            Section(
                "Definitions and Interpretation",
                [
                    DEFINITION.paragraph(rng, slots, 3, big),
                    DEFINITION.paragraph(rng, slots, 3, big),
                ],
            ),
        ]

    def clause(self, rng: random.Random, topic: str, budget: Budget) -> Section:
        slots = self.slots(rng, topic_l=topic.lower())
        blocks: list[str] = []
        for letter in "abcdef"[: 2 + int(rng.random() * 4)]:
            if budget.left <= 0 and blocks:
                break
            blocks.append(
                f"({letter}) " + CLAUSE.paragraph(rng, slots, 1 + int(rng.random() * 3), budget)
            )
        return Section(topic, blocks)

    def body(self, rng: random.Random, budget: Budget) -> Section:
        pick = picker(rng)
        if rng.random() < 0.15:
            self._schedule += 1
            site = pick([s for s in self.sites if not self.avoid(("site", s))])
            rows = "\n".join(
                f"| {pick(('Cleaning', 'Security', 'Maintenance', 'Catering', 'Reception', 'Waste'))} | "
                f"{pick(('24/7', 'Mon-Fri 07:00-19:00', 'Mon-Sat 06:00-22:00', 'on call'))} | "
                f"{money(self.symbol, int(20 + rng.random() * 900))} per month |"
                for _ in range(3 + int(rng.random() * 4))
            )
            table = f"| Service | Hours | Charge |\n|---|---|---|\n{rows}"
            budget.spend(len(table) + 60)
            return Section(f"Schedule {self._schedule}: services at the {site}", [table], [False])
        topic = pick(CONTRACT_TOPICS)
        section = self.clause(rng, topic, budget)
        budget.spend(len(topic) + 8)
        return section

    def back(self) -> list[Section]:
        signatories = self.people[:2]
        return [
            Section(
                "Execution",
                [
                    f"Signed for and on behalf of {self.customer} by {signatories[0]}, authorised signatory.\n"
                    f"Signed for and on behalf of {self.supplier} by {signatories[1]}, director."
                ],
                [False],
            )
        ]
