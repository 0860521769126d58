"""reasoning-gym's probability datasets (probability), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("coin_flip", "probability of k heads in n coin flips"),
]
