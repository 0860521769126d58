"""reasoning-gym's induction datasets (inducing rules from examples), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("acre", "abstract causal reasoning: which objects turn the blicket detector on"),
    LibraryFamily("list_functions", "induce a list function from input-output examples"),
]
