"""The procedural families of the coding envs, gathered from the theme modules."""

from __future__ import annotations

from llmgym.envs.coding import (
    arrays,
    bits,
    dp,
    geometry,
    graphs,
    modules,
    parsing,
    simulation,
    stacks,
    stdio,
    strings,
)
from llmgym.tasks import Family

FAMILIES: list[Family] = [
    *strings.FAMILIES,
    *arrays.FAMILIES,
    *stacks.FAMILIES,
    *dp.FAMILIES,
    *graphs.FAMILIES,
    *geometry.FAMILIES,
    *parsing.FAMILIES,
    *bits.FAMILIES,
    *simulation.FAMILIES,
    *stdio.FAMILIES,
    *modules.FAMILIES,
]
"""Every family of ``llm/Coding-v0``: function-level tasks, stdin/stdout tasks and modules."""


def family_languages(family: Family) -> tuple[str, ...]:
    """The languages a family's tasks can be answered in (Python for function-level tasks)."""
    return stdio.LANGUAGES_BY_FAMILY.get(family.name, ("python",))


def families_for(language: str) -> list[Family]:
    """The families whose tasks can be answered in ``language``."""
    return [f for f in FAMILIES if language in family_languages(f)]
