"""reasoning-gym's logic datasets (logic puzzles), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("aiw", "Alice-in-Wonderland family counting questions"),
    LibraryFamily("circuit_logic", "evaluate a digital logic circuit drawn in ASCII"),
    # its scorer reads (name, role) pairs and skips other words: "A is a knight ... or 4" would pay
    LibraryFamily(
        "knights_knaves", "knights and knaves problems", vocabulary=("is", "a", "an", "and")
    ),
    LibraryFamily("self_reference", "self-referential truth-count puzzles"),
    LibraryFamily("syllogism", "syllogism reasoning tasks"),
    # levels 5-6 of 6 take up to a minute an item
    LibraryFamily("zebra_puzzles", "zebra (Einstein) logic grid puzzles", levels=(0.0, 0.5)),
]
