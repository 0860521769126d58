"""reasoning-gym's cognition datasets (perception and pattern puzzles), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("color_cube_rotation", "track the face colours of a rotated cube"),
    LibraryFamily("figlet_font", "read a word drawn in a FIGlet font"),
    LibraryFamily("modulo_grid", "complete a grid pattern defined by modular arithmetic"),
    LibraryFamily("needle_haystack", "find one fact among many generated sentences"),
    LibraryFamily(
        "number_sequence", "number sequence completion tasks with dynamic pattern generation"
    ),
    LibraryFamily("rectangle_count", "count the rectangles drawn in ASCII art"),
]
