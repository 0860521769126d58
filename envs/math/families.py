"""The procedural families of Math-v0, gathered from the themed ``fam_*`` modules."""

from __future__ import annotations

from llmgym.envs.math import (
    fam_algebra,
    fam_arithmetic,
    fam_calculus,
    fam_discrete,
    fam_geometry,
    fam_word,
)
from llmgym.envs.math.common import FamilySpec
from llmgym.tasks import Family

SPECS: tuple[FamilySpec, ...] = tuple(
    spec
    for module in (fam_arithmetic, fam_algebra, fam_discrete, fam_geometry, fam_calculus, fam_word)
    for spec in module.reg.specs
)
FAMILIES: tuple[Family, ...] = tuple(spec.family for spec in SPECS)
"""Every family, in a stable order (arithmetic first)."""

GOLD_MAY_APPEAR: frozenset[str] = frozenset(s.family.name for s in SPECS if s.gold_may_appear)
"""Families whose answer is legitimately one of the given numbers (a median, a gcd, a set)."""

assert len({f.name for f in FAMILIES}) == len(FAMILIES), "family names must be unique"
