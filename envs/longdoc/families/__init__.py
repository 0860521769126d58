"""The LongDoc task catalogue: every family of ``llm/LongDoc-v0``, one theme per module.

Each theme module lists its families in ``FAMILIES``; this list gathers them in a fixed order.
A family is ``generate(ctx) -> Task`` (see :mod:`llmgym.envs.longdoc.families.common`); every
task's answer is an answer spec for :func:`llmgym.rewards.longdoc.grade_answer`, whose
``distractors`` are values that appear in the document but answer a different question.

To add a family, write its generator in the theme module it belongs to and add a
``LongDocFamily(name, generator, description)`` line to that module's ``FAMILIES``;
``tests/test_gold.py`` and ``tests/test_audit.py`` then cover it. Nothing registers itself: this
list is the catalogue. The writers that families plant into are :mod:`llmgym.envs.longdoc.writers`.
"""

from __future__ import annotations

from llmgym.envs.longdoc.families import (
    aggregation,
    code,
    lookups,
    multihop,
    needles,
    records,
    revisions,
)
from llmgym.envs.longdoc.families.common import DEPTH_GRID, Ctx, LongDocFamily

FAMILIES: list[LongDocFamily] = [
    *needles.FAMILIES,
    *multihop.FAMILIES,
    *aggregation.FAMILIES,
    *lookups.FAMILIES,
    *revisions.FAMILIES,
    *records.FAMILIES,
    *code.FAMILIES,
]
"""Every family of ``llm/LongDoc-v0``, needles first."""

__all__ = ["DEPTH_GRID", "FAMILIES", "Ctx", "LongDocFamily"]
