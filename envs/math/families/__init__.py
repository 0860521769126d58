"""The task catalogue of Math-v0: one theme per module, gathered here in one plain list.

Each theme module ends with its ``SPECS``, a list of :func:`llmgym.envs.math.build.family`
entries (name, generator, what it asks, the final form of its answers). A new family is one
generator and one entry there; a new theme is one module and one line below. How tasks are
written (formatting, :func:`~llmgym.envs.math.build.build`) is :mod:`llmgym.envs.math.build`.
"""

from __future__ import annotations

from llmgym.envs.math.build import FamilySpec
from llmgym.envs.math.families import algebra, arithmetic, calculus, discrete, geometry, word
from llmgym.tasks import Family

SPECS: tuple[FamilySpec, ...] = (
    *arithmetic.SPECS,
    *algebra.SPECS,
    *discrete.SPECS,
    *geometry.SPECS,
    *calculus.SPECS,
    *word.SPECS,
)
FAMILIES: tuple[Family, ...] = tuple(spec.family for spec in SPECS)
"""Every family, in a stable order (arithmetic first)."""

GOLD_MAY_APPEAR: frozenset[str] = frozenset(s.family.name for s in SPECS if s.gold_may_appear)
"""Families whose answer is legitimately one of the given numbers (a median, a gcd, a set)."""

assert len({f.name for f in FAMILIES}) == len(FAMILIES), "family names must be unique"
