"""Meeting minutes: a committee's meetings over a year, with discussion, decisions and actions.

Meeting dates are given in document order by :meth:`Minutes.finalize`.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from llmgym.envs.longdoc.writers.cast import long_date, money, people
from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    AGENDA_TOPICS,
    CITIES,
    COMMITTEES,
    COMPANY_FORMS,
    COMPANY_STEMS,
    CURRENCIES,
    DEPARTMENTS,
    MONTHS,
    PROGRAMMES,
    ROLES,
)

DISCUSSION = Phrases(
    "{person} introduced {topic} and summarised the paper circulated on {weekday}.",
    "Members asked whether {topic} could be delivered within the {dept} budget; {person2} said a revised estimate of {money} would follow.",
    "The {role} reported that {count} of the {count2} milestones for {topic} were on track.",
    "Concerns were raised about the dependency on the {city} office, and {person2} agreed to assess the risk.",
    "The committee noted that feedback from {count} staff surveys supported {topic}.",
    "{person} explained that the supplier in {city} had requested a {pct} price increase.",
    "It was agreed that {topic} would return to the committee once the {dept} review was complete.",
    "The chair thanked {person} for the update on {topic} and asked for a summary of lessons learned.",
    "A question was raised about the timing of {topic}; the {role} confirmed it would not slip beyond {month}.",
    "{person2} presented benchmarking data from {count} peer organisations.",
)
ATTENDANCE = Phrases(
    "Present: {person}, {person2}, {person3} and {person4}; apologies were received from {person5}, who was in {city}.",
    "In attendance: the {role} and {person3} (minutes). The meeting was quorate.",
    "The minutes of the previous meeting were approved, subject to a correction to item {count} proposed by {person}.",
)


class Minutes(Writer):
    """The minutes of one committee's meetings over a year."""

    kind = "meeting_minutes"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        pick = picker(rng)
        self.company = f"{pick(COMPANY_STEMS)} {pick(COMPANY_FORMS)}"
        self.committee = pick(COMMITTEES)
        self.year = rng.randint(2017, 2024)
        self.symbol = pick(CURRENCIES)[0]
        self.people = people(rng, 14)
        self.chair = self.people[0]

    def header(self) -> str:
        return f"{self.company}\n{self.committee}\nMinutes of meetings, {self.year}\nChair: {self.chair}"

    def cast(self, rng: random.Random) -> dict[str, str]:
        """A meeting's five named participants, fixed for its minutes."""
        five = rng.sample(self.people, 5)
        return {
            "person": five[0],
            "person2": five[1],
            "person3": five[2],
            "person4": five[3],
            "person5": five[4],
        }

    def base_slots(self, rng: random.Random) -> dict[str, Any]:
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        slots: dict[str, Any] = {
            "topic": choice(AGENDA_TOPICS),
            "dept": choice(DEPARTMENTS),
            "role": choice(ROLES),
            "city": choice(CITIES),
            "money": lambda: money(self.symbol, int(40 + rnd() * 3000)),
            "count": lambda: str(2 + int(rnd() * 12)),
            "count2": lambda: str(14 + int(rnd() * 10)),
            "pct": lambda: f"{2 + int(rnd() * 14)}%",
            "month": choice(MONTHS),
            "weekday": lambda: pick(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")),
        }
        return slots

    def decision(self, rng: random.Random) -> str:
        """A routine decision that never approves spending on a programme (filler)."""
        pick = picker(rng)
        programme = pick(PROGRAMMES)
        verb = pick(
            (
                "noted the progress report on",
                "asked for a revised plan for",
                "requested a risk assessment of",
            )
        )
        if self.avoid(("programme", programme)):
            return f"The committee {verb} {pick(AGENDA_TOPICS)}; {pick(self.people)} will report back in {pick(MONTHS)}."
        return f"The committee {verb} the {programme} programme; {pick(self.people)} will report back in {pick(MONTHS)}."

    def body(self, rng: random.Random, budget: Budget) -> Section:
        slots = self.slots(rng, **self.cast(rng))
        pick = picker(rng)
        blocks = [ATTENDANCE.paragraph(rng, slots, 2, budget)]
        for item in range(1, 2 + int(rng.random() * 4)):
            if budget.left <= 0:
                break
            blocks.append(
                f"Item {item}. "
                + DISCUSSION.paragraph(rng, slots, 2 + int(rng.random() * 3), budget)
                + " "
                + self.decision(rng)
            )
        actions = "\n".join(
            f"- ACTION: {pick(self.people)} to {pick(('circulate', 'update', 'review', 'cost', 'confirm'))} "
            f"{pick(AGENDA_TOPICS)} by the next meeting."
            for _ in range(1 + int(rng.random() * 3))
        )
        blocks.append(actions)
        budget.spend(len(actions) + 120)
        return Section(
            "Meeting of 00 September 2000", blocks, [True] * (len(blocks) - 1) + [False], record={}
        )

    def finalize(self, sections: list[Section]) -> None:
        rng = random.Random(self.seed + 3)
        meetings = [s for s in sections if s.record is not None]
        day = dt.date(self.year, 1, 8)
        step = max(1, 350 // max(1, len(meetings)))
        for s in meetings:
            assert s.record is not None
            day += dt.timedelta(days=max(1, int(step * (0.5 + rng.random()))))
            s.record["date"] = day
            s.title = f"Meeting of {long_date(day)}"
