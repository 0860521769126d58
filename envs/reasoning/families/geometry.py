"""reasoning-gym's geometry datasets (geometry), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("advanced_geometry", "coordinate geometry: angles, orthocentres, incircles"),
    LibraryFamily("simple_geometry", "find a polygon's missing angle"),
]
