"""reasoning-gym's code datasets (reading programs), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("bf", "predict the output of a Brainf*ck program"),
    LibraryFamily("codeio", "predict a program's output (or input) from its code"),
]
