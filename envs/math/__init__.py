"""The math domain: ``llm/Math-v0`` (procedural families and math datasets, exact answers).

``env.py`` holds the env, ``families/`` the task catalogue (one theme per module),
``build.py`` how a task is written, ``datasets.py`` the GSM8K / MATH / JSONL readers; grading
is :mod:`llmgym.rewards.math`.
"""

from llmgym._moved import keep_former_paths
from llmgym.envs.math.env import MathEnv

# The themed family modules became the families/ package, and the machinery they share is
# named for what it does; the former paths still import.
keep_former_paths(
    __name__,
    {
        "common": "llmgym.envs.math.build",
        "fam_algebra": "llmgym.envs.math.families.algebra",
        "fam_arithmetic": "llmgym.envs.math.families.arithmetic",
        "fam_calculus": "llmgym.envs.math.families.calculus",
        "fam_discrete": "llmgym.envs.math.families.discrete",
        "fam_geometry": "llmgym.envs.math.families.geometry",
        "fam_word": "llmgym.envs.math.families.word",
    },
)

__all__ = ["MathEnv"]
