"""reasoning-gym's arc datasets (ARC-style grid induction), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("arc_1d", "one-dimensional ARC puzzles: infer the transformation from examples"),
    LibraryFamily("arc_agi", "ARC-AGI grid puzzles: infer the transformation from examples"),
    LibraryFamily("rearc", "re-generated ARC grid puzzles: infer the transformation from examples"),
]
