"""Annual reports: chair's statement, regional and segment reviews, risks, notes and tables."""

from __future__ import annotations

import random
from typing import Any

from llmgym.envs.longdoc.writers.cast import money, people
from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    CITIES,
    COMMITTEES,
    COMPANY_FORMS,
    COMPANY_STEMS,
    CURRENCIES,
    DRIVERS,
    HEADWINDS,
    INDUSTRIES,
    INITIATIVES,
    MONTHS,
    NOTE_TOPICS,
    REGIONS,
    RISKS,
    ROLES,
)

REVIEW = Phrases(
    "In {region}, revenue from {segment} rose {pct} to {money}, helped by {driver}.",
    "Operating profit in {region} was {money}, a margin of {pct}, despite {headwind}.",
    "The team in {city} completed {initiative}, which is expected to lift {kpi} next year.",
    "Demand for {product} remained firm in {region}, while pricing pressure from {headwind} eased in the second half.",
    "We opened {count} new sites in {region} during {year}, bringing the regional total to {count2}.",
    "{person}, who leads our {segment} business in {region}, highlighted {driver} as the main source of growth.",
    "Headcount in {region} ended the year at {count3}, reflecting {initiative} and selective hiring in {city}.",
    "Capital expenditure in {region} amounted to {money}, mostly on {asset}.",
    "Customer wins in {city} included a multi-year agreement for {product} worth {money} over its term.",
    "{kpi_cap} in {region} improved by {pts} percentage points, the best result since {year_past}.",
    "The order book for {segment} in {region} stood at {money} at the year end, up {pct} on the prior year.",
    "Exposure to {headwind} in {region}, estimated at {money}, is being addressed through {initiative}.",
    "In the fourth quarter, volumes in {region} were {pct} higher than a year earlier, led by {product}.",
    "Our {city} operations achieved a safety record of {count} days without a lost-time injury.",
    "Management in {region} expects the benefit of {driver} to continue, although the risk from {headwind} has not gone away.",
    "We exited two sub-scale contracts in {city}, which reduced revenue by {money} but improved the margin mix.",
)
RISK = Phrases(
    "The Board regards {risk} as a principal risk because a failure could affect {count} of our {asset}.",
    "During {year}, the risk owner, {person}, reported {count} events to the {committee}.",
    "Mitigations include {initiative} and {count} control tests a year overseen by the {role}.",
    "Our assessment of {risk} is unchanged from {year_past}; residual exposure is estimated at {money}.",
    "Key indicators for {risk} are reviewed monthly, and {count} thresholds were breached in the year.",
    "The trend for {risk} is increasing, reflecting {headwind} in {count} markets.",
    "An external review in {city} confirmed that controls over {risk} operate effectively.",
    "Insurance cover of {money} is held against losses arising from {risk}.",
)
NOTE = Phrases(
    "The carrying amount at {year_end} was {money} (prior year: {money2}).",
    "Amounts are measured at amortised cost; the effect of {headwind} was {money} in {year}.",
    "A sensitivity of {pts} percentage points in the discount rate would change the balance by {money}.",
    "Judgements in this area relate principally to the {segment} segment and the timing of {product} contracts.",
    "Transfers into level 3 of the fair value hierarchy during {year} amounted to {money}.",
    "The {role} reviews the assumptions annually; the most significant relates to {driver}.",
    "Of the total, {money} falls due within one year and {money2} after more than five years.",
    "An impairment charge of {money} was recognised in {region} following a review of {asset}.",
    "Comparative figures for {year_past} have been re-presented to reflect the sale of a business in {city}.",
    "The Group applied the practical expedient for contracts with an original duration of under {count} months.",
)
GOVERNANCE = Phrases(
    "The {committee} met {count} times during {year}; attendance was {pct}.",
    "{person} chaired the {committee} and reported to the Board after each meeting.",
    "The {committee} reviewed {initiative} and approved a budget of {money} for its next phase.",
    "Members received training on {risk} delivered by an external adviser from {city}.",
    "The {committee} evaluated its own effectiveness and agreed {count} actions for the coming year.",
    "The {role} attended meetings by invitation and presented updates on {kpi}.",
)
CHAIR = Phrases(
    "{year} was a year of steady progress for {company}, with revenue reaching {money}.",
    "On behalf of the Board I thank our {count3} colleagues for their commitment.",
    "The Board proposes a final dividend of {cents} cents per share, an increase of {pct}.",
    "We continued to invest in {segment}, where we benefited from {driver} in {month_name}.",
    "Our strategy remains focused on {product}, disciplined capital allocation and {initiative}.",
    "I would like to welcome {person}, who joined the Board in {month_name} as an independent director.",
)
TABLE_METRICS = (
    "Revenue",
    "Operating profit",
    "Capital expenditure",
    "Order intake",
    "Free cash flow",
    "Gross margin",
    "Headcount",
    "Energy use",
)


class AnnualReport(Writer):
    """A listed company's annual report for one financial year."""

    kind = "annual_report"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        pick = picker(rng)
        self.industry = pick(sorted(INDUSTRIES))
        ind: dict[str, Any] = INDUSTRIES[self.industry]
        stem = pick(COMPANY_STEMS)
        self.company = f"{stem} {pick(ind['suffix'])} {pick(COMPANY_FORMS)}"
        self.year = rng.randint(2016, 2024)
        self.symbol = pick(CURRENCIES)[0]
        self.segments = rng.sample(ind["segments"], 5)
        self.regions = rng.sample(REGIONS, 9)
        self.products, self.assets, self.kpis = ind["products"], ind["assets"], ind["kpi"]
        self.people = people(rng, 24)
        self.chair, self.ceo, self.cfo = self.people[:3]
        self._note = 0

    def begin(self) -> None:
        self._note = 0

    def header(self) -> str:
        return f"{self.company}\nAnnual Report and Accounts {self.year}\nFor the year ended 31 December {self.year}"

    def base_slots(self, rng: random.Random) -> dict[str, Any]:
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        slots: dict[str, Any] = {
            "region": choice(self.regions),
            "segment": choice(self.segments),
            "product": choice(self.products),
            "asset": choice(self.assets),
            "kpi": choice(self.kpis),
            "kpi_cap": lambda: pick(self.kpis).capitalize(),
            "driver": choice(DRIVERS),
            "headwind": choice(HEADWINDS),
            "initiative": choice(INITIATIVES),
            "risk": lambda: pick(RISKS).lower(),
            "committee": choice(COMMITTEES),
            "role": choice(ROLES),
            "city": choice(CITIES),
            "person": choice(self.people),
            "company": lambda: self.company,
            "pct": lambda: f"{1 + rnd() * 17:.1f}%",
            "pts": lambda: f"{0.2 + rnd() * 4:.1f}",
            "money": lambda: money(self.symbol, int(800 + rnd() * 90_000)),
            "money2": lambda: money(self.symbol, int(500 + rnd() * 60_000)),
            "count": lambda: str(int(2 + rnd() * 40)),
            "count2": lambda: str(int(45 + rnd() * 300)),
            "count3": lambda: f"{int(1200 + rnd() * 40_000):,}",
            "cents": lambda: f"{2 + rnd() * 30:.1f}",
            "year": lambda: str(self.year),
            "year_past": lambda: str(self.year - 2 - int(rnd() * 6)),
            "year_end": lambda: f"31 December {self.year}",
            "month_name": choice(MONTHS),
        }
        return slots

    def front(self) -> list[Section]:
        rng = random.Random(self.seed + 1)
        slots = self.slots(rng)
        big = Budget(10**9)
        return [
            Section(
                "Chair's statement",
                [CHAIR.paragraph(rng, slots, 4, big), CHAIR.paragraph(rng, slots, 3, big)],
            ),
            Section(
                "Highlights of the year",
                [
                    "\n".join(
                        f"- {m}: {money(self.symbol, rng.randint(2000, 400_000))} ({'+' if rng.random() < 0.7 else '-'}{rng.uniform(1, 15):.1f}%)"
                        for m in ("Revenue", "Operating profit", "Free cash flow", "Net debt")
                    ),
                    REVIEW.paragraph(rng, slots, 3, big),
                ],
                [False, True],
            ),
        ]

    def body(self, rng: random.Random, budget: Budget) -> Section:
        pick = picker(rng)
        roll = rng.random()
        if roll < 0.34:
            region = pick(self.regions)
            slots = self.slots(rng, region=region)
            title = f"Regional review: {region}"
            phrases = REVIEW
        elif roll < 0.5:
            segment = pick(self.segments)
            slots = self.slots(rng, segment=segment)
            title = f"{segment}: operating review"
            phrases = REVIEW
        elif roll < 0.64:
            risk = pick(RISKS)
            slots = self.slots(rng, risk=risk.lower())
            title = f"Principal risk: {risk}"
            phrases = RISK
        elif roll < 0.8:
            self._note += 1
            topic = pick(NOTE_TOPICS)
            slots = self.slots(rng)
            title = f"Note {self._note}: {topic}"
            phrases = NOTE
        elif roll < 0.9:
            committee = pick(COMMITTEES)
            slots = self.slots(rng, committee=committee)
            title = f"Report of the {committee}"
            phrases = GOVERNANCE
        else:
            return self.table_section(rng, budget)
        blocks = [phrases.paragraph(rng, slots, 3 + int(rng.random() * 3), budget)]
        for _ in range(int(rng.random() * 3)):
            if budget.left <= 0:
                break
            blocks.append(phrases.paragraph(rng, slots, 3 + int(rng.random() * 3), budget))
        budget.spend(len(title) + 8)
        return Section(title, blocks)

    def table(
        self, rng: random.Random, metric: str, year: int, rows: list[str]
    ) -> tuple[str, dict[tuple[str, str], int]]:
        """A quarterly table (values in thousands) and its cells keyed by (row, column)."""
        cells: dict[tuple[str, str], int] = {}
        lines = [
            f"| {metric} ({self.symbol}000) | Q1 | Q2 | Q3 | Q4 | FY {year} |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows:
            quarters = [rng.randint(800, 60_000) for _ in range(4)]
            for q, v in zip(("Q1", "Q2", "Q3", "Q4"), quarters, strict=True):
                cells[(row, q)] = v
            cells[(row, f"FY {year}")] = sum(quarters)
            lines.append(
                f"| {row} | " + " | ".join(f"{v:,}" for v in quarters) + f" | {sum(quarters):,} |"
            )
        return "\n".join(lines), cells

    def table_section(self, rng: random.Random, budget: Budget) -> Section:
        pick = picker(rng)
        metric = pick(TABLE_METRICS)
        year = self.year - int(rng.random() * 3)
        if self.avoid(("table", metric)):
            metric = "Order intake" if metric != "Order intake" else "Energy use"
        table, _ = self.table(rng, metric, year, list(self.segments))
        slots = self.slots(rng)
        comment = REVIEW.paragraph(rng, slots, 2, budget)
        budget.spend(len(table) + 40)
        return Section(f"{metric} by segment and quarter, {year}", [table, comment], [False, True])
