"""The coding task catalogue, as plain lists: the families of ``llm/Coding-v0`` and of
``llm/CodeRepair-v0``.

One theme per module (``strings.py``, ``arrays.py``... ``stdio.py`` for stdin/stdout programs,
``modules.py`` for multi-function modules, ``code_repair.py`` for modules to fix); each holds its
generators, their reference solutions and a ``FAMILIES`` list. Nothing here registers itself:
the envs take their families from these lists. How a task is built from a reference solution
(tests, limits, prompt) is :mod:`llmgym.envs.coding.problem`; how it is graded,
:mod:`llmgym.envs.coding.judge`.
"""

from __future__ import annotations

from llmgym.envs.coding.families import (
    arrays,
    bits,
    code_repair,
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

REPAIR_FAMILIES: list[Family] = [*code_repair.REPAIR_FAMILIES]
"""Every family of ``llm/CodeRepair-v0``: a module with a bug to fix under constraints."""


def family_languages(family: Family) -> tuple[str, ...]:
    """The languages a family's tasks can be answered in (Python for function-level tasks)."""
    return stdio.LANGUAGES_BY_FAMILY.get(family.name, ("python",))


def families_for(language: str) -> list[Family]:
    """The families whose tasks can be answered in ``language``."""
    return [f for f in FAMILIES if language in family_languages(f)]
