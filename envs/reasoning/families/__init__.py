"""The ReasoningGym-v0 catalogue: every bridged reasoning-gym dataset, one theme per library category.

Each theme module lists its datasets as :class:`~llmgym.envs.reasoning.bridge.source.LibraryFamily`
lines (the family name is the dataset's name). The catalogue is written out, not read from the
library at import (importing it does not import reasoning-gym); ``tests/reasoning/`` holds it
equal to the installed library's datasets minus :data:`EXCLUDED`. Nothing registers itself.
"""

from __future__ import annotations

from llmgym.envs.reasoning.bridge.source import LibraryFamily
from llmgym.envs.reasoning.families import (
    algebra,
    algorithmic,
    arc,
    arithmetic,
    code,
    cognition,
    games,
    geometry,
    graphs,
    induction,
    logic,
    probability,
)

FAMILIES: list[LibraryFamily] = [
    *algebra.FAMILIES,
    *arithmetic.FAMILIES,
    *algorithmic.FAMILIES,
    *arc.FAMILIES,
    *code.FAMILIES,
    *cognition.FAMILIES,
    *games.FAMILIES,
    *geometry.FAMILIES,
    *graphs.FAMILIES,
    *induction.FAMILIES,
    *logic.FAMILIES,
    *probability.FAMILIES,
]
"""Every bridged dataset, by category."""

EXCLUDED: dict[str, str] = {
    "composite": "a weighted mix of other datasets, not a dataset of its own (llm/Mixture-v0 mixes families)",
    "boxnet": "no gold answer (any valid plan scores): no oracle to check the family with",
    "graph_color": "no gold answer (any valid colouring scores): no oracle to check the family with",
    "propositional_logic": "no gold answer (any valid conclusion scores): no oracle to check the family with",
    "rubiks_cube": "no gold answer (any solving sequence scores): no oracle to check the family with",
    "rush_hour": "no gold answer (any solving sequence scores): no oracle to check the family with",
    "game_of_life_halting": "its scorer gives full marks to any non-empty answer when the gold is True (bool('False') is True)",
    "knight_swap": "its curriculum's levels fail its own config check (min_nodes must be >= 6) at every level",
    "puzzle24": "its scorer pays any four in-range numbers that make 24, not the puzzle's numbers ('6*1*4*1' answers every item)",
    "intermediate_integration": "some golds are an unevaluated Integral(...), and its scorer would pay that form (a copy of the question)",
    "isomorphic_strings": "its items differ between processes (they depend on PYTHONHASHSEED)",
    "polynomial_multiplication": "its items differ between processes (they depend on PYTHONHASHSEED)",
    "ransom_note": "its items differ between processes (they depend on PYTHONHASHSEED)",
    "word_ladder": "its items differ between processes (they depend on PYTHONHASHSEED)",
}
"""The datasets of the pinned reasoning-gym that are not bridged, and why."""

__all__ = ["EXCLUDED", "FAMILIES", "LibraryFamily"]
