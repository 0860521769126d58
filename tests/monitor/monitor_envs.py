"""A test env whose run goes wrong on cue: rewards collapse, or the sandbox starts timing out,
after a given number of graded episodes (counted across every instance, as a trainer's envs
share one run). Imported by name (not through ``conftest``)."""

from __future__ import annotations

import random
from typing import Any

from llmgym.core import Episode, LLMEnv, Message, Turn
from llmgym.tasks import Family, ProceduralSource, Task, draft

PHASE_ENV = "monitor-test/Phase-v0"
GRADED = {"episodes": 0}
"""Episodes graded so far by every PhaseEnv (reset by the tests' fixture)."""


def _gen(rng: random.Random, difficulty: float) -> Task:
    return draft(f"Say anything ({rng.randint(0, 999)}).", "any")


class PhaseEnv(LLMEnv):
    """Single turn; any answer succeeds (reward 1) and its code run is ``ok``, until
    ``collapse_after`` graded episodes (then reward 0) or ``burst_after`` (then the run times
    out, as a sandbox under load would). -1: never."""

    domain = "phase"
    reward_range = (0.0, 1.0)

    def __init__(self, collapse_after: int = -1, burst_after: int = -1, **kwargs: Any):
        self.collapse_after, self.burst_after = collapse_after, burst_after
        families = [Family("steady", _gen), Family("other", _gen)]
        super().__init__(ProceduralSource(families, domain="phase"), **kwargs)

    def respond(self, episode: Episode, message: Message) -> Turn:
        n = GRADED["episodes"]
        GRADED["episodes"] += 1
        ok = not 0 <= self.collapse_after <= n
        status = "timeout" if 0 <= self.burst_after <= n else "ok"
        return Turn(
            float(ok),
            is_success=ok,
            feedback="ok" if ok else "no",
            info={"exec": {"status": status, "signal": 9 if status == "timeout" else None}},
        )

    def oracle_action(self) -> Any:
        return "anything"
