"""reasoning-gym's graphs datasets (graphs and relations), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("course_schedule", "course schedule exercises"),
    LibraryFamily("family_relationships", "name a relation in a generated family tree"),
    LibraryFamily("largest_island", "largest island exercises"),
    LibraryFamily("path_star", "find the path to a target in a path-star graph"),
    LibraryFamily(
        "quantum_lock", "reach a target number with button presses that depend on a light's state"
    ),
    LibraryFamily("shortest_path", "shortest path exercises"),
]
