"""Technical manuals: safety notes, specifications, maintenance procedures and fault codes."""

from __future__ import annotations

import random
from typing import Any

from llmgym.envs.longdoc.writers.document import Budget, Phrases, Section, Writer, chooser, picker
from llmgym.envs.longdoc.writers.vocab import (
    COMPONENTS,
    ERROR_CONDITIONS,
    PRODUCT_LINES,
    TOOLS_LIST,
)

NOTE = Phrases(
    "Before working on the {component}, isolate the unit and lock off the supply at the {component2}.",
    "On {model} units built before serial {serial}, the {component} is fitted on the left-hand side.",
    "Inspect the {component} for wear every {hours} operating hours or {months} months, whichever comes first.",
    "If the {component} on a {model} shows signs of corrosion, replace it with part {part} rather than cleaning it in place.",
    "Use only {tool} when adjusting the {component}; improvised tools void the warranty.",
    "Record the reading from the {component} in the maintenance log together with the ambient temperature of {temp} degrees Celsius.",
    "After refitting the {component}, run the unit for {minutes} minutes and check for leaks around the {component2}.",
    "The {component} on the {model} shares a mounting bracket with the {component2}, so support both during removal.",
    "Operators should not reset fault {fault} more than {count} times in one shift without contacting service.",
    "A replacement {component} is supplied as part number {part}.",
)
FAULT = Phrases(
    "Fault {fault} indicates {condition}; check the {component} first.",
    "If fault {fault} persists after {count} restarts, measure the supply at the {component2} with {tool}.",
    "On the {model}, fault {fault} can also be raised when the {component} is disconnected.",
    "Clear fault {fault} from the service menu after the cause has been corrected.",
)


class Manual(Writer):
    """An installation, operation and maintenance manual for one product line."""

    kind = "technical_manual"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        self.brand, self.product = rng.choice(PRODUCT_LINES)
        base = rng.randint(2, 9) * 100
        self.models = [f"{self.brand} {base + 10 * k}" for k in range(1, 6)]
        self.document_code = f"OM-{rng.randint(1000, 9999)}"
        self.revision = rng.choice("BCDEFG")
        self._n = 0

    def begin(self) -> None:
        self._n = 0

    def header(self) -> str:
        return (
            f"{self.brand} {self.product} series\nInstallation, operation and maintenance manual\n"
            f"Document {self.document_code}, revision {self.revision}. Covers models {', '.join(self.models)}."
        )

    def base_slots(self, rng: random.Random) -> dict[str, Any]:
        pick, rnd, choice = picker(rng), rng.random, chooser(rng)
        slots: dict[str, Any] = {
            "component": choice(COMPONENTS),
            "component2": choice(COMPONENTS),
            "model": choice(self.models),
            "serial": lambda: f"{int(10_000 + rnd() * 89_999)}",
            "hours": lambda: str(pick((250, 500, 1000, 2000, 4000, 8000))),
            "months": lambda: str(pick((3, 6, 12, 24))),
            "tool": choice(TOOLS_LIST),
            "temp": lambda: str(int(5 + rnd() * 35)),
            "minutes": lambda: str(pick((5, 10, 15, 30))),
            "count": lambda: str(pick((2, 3, 5))),
            "fault": lambda: f"E{int(10 + rnd() * 89)}",
            "condition": choice(ERROR_CONDITIONS),
            "part": lambda: (
                f"{self.brand[:2].upper()}-{int(1000 + rnd() * 8999)}-{int(10 + rnd() * 89)}"
            ),
        }
        return slots

    def front(self) -> list[Section]:
        rng = random.Random(self.seed + 1)
        rows = "\n".join(
            f"| {m} | {rng.randint(4, 90)} kW | {rng.randint(180, 2400)} kg | {rng.choice(('400 V 3~', '230 V 1~', '690 V 3~'))} |"
            for m in self.models
        )
        return [
            Section(
                "Safety information",
                [NOTE.paragraph(rng, self.slots(rng), 3, Budget(10**9))],
            ),
            Section(
                "Specifications",
                [f"| Model | Rated power | Mass | Supply |\n|---|---|---|---|\n{rows}"],
                [False],
            ),
        ]

    def steps(
        self, rng: random.Random, component: str, model: str, torque: int | None = None
    ) -> str:
        pick = picker(rng)
        torque = torque if torque is not None else 8 + int(rng.random() * 30) * 5
        lines = [
            f"1. Isolate the {model} at the {pick(COMPONENTS)} and wait {pick((5, 10, 15))} minutes for stored energy to dissipate.",
            f"2. Remove the {pick(COMPONENTS)} to gain access to the {component}.",
            f"3. Fit the new {component} and tighten the fixings to {torque} Nm using {pick(TOOLS_LIST)}.",
            f"4. Refit the {pick(COMPONENTS)} and run the {model} for {pick((5, 10, 15))} minutes, checking the {component} for leaks.",
        ]
        return "\n".join(lines)

    def body(self, rng: random.Random, budget: Budget) -> Section:
        pick = picker(rng)
        self._n += 1
        if rng.random() < 0.25:
            fault = f"E{10 + int(rng.random() * 89)}"
            condition = pick(ERROR_CONDITIONS)
            slots = self.slots(rng, fault=fault, condition=condition)
            text = FAULT.paragraph(rng, slots, 3, budget)
            budget.spend(40)
            return Section(f"Troubleshooting {fault}: {condition}", [text])
        component, model = pick(COMPONENTS), pick(self.models)
        while self.avoid(("procedure", component, model)):
            component, model = pick(COMPONENTS), pick(self.models)
        slots = self.slots(rng, component=component, model=model)
        steps = self.steps(rng, component, model)
        note = NOTE.paragraph(rng, slots, 2 + int(rng.random() * 3), budget)
        budget.spend(len(steps) + 60)
        return Section(
            f"Procedure {self._n:03d}: replacing the {component} ({model})",
            [note, steps],
            [True, False],
        )
