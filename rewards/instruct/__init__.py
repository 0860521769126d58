"""Verifiable instruction following (IFEval's instruction types and two more): the checkers,
strict and loose verdicts, IFEval's accuracies, and the reward of ``llm/Instruct-v0``.

>>> from llmgym.rewards.instruct import grade_instructions
>>> spec = {"instructions": [{"id": "change_case:english_lowercase"}], "min_words": 3}
>>> grade_instructions("green tea wants cooler water than black tea.", spec).score
1.0
"""

from llmgym.rewards.instruct.checks import CHECKS, RELATIONS, check, validate
from llmgym.rewards.instruct.grade import (
    Assessment,
    InstructionResult,
    assess,
    follows,
    grade_instructions,
    instructions_of,
    loose_variants,
    result_of,
)

__all__ = [
    "CHECKS",
    "RELATIONS",
    "Assessment",
    "InstructionResult",
    "assess",
    "check",
    "follows",
    "grade_instructions",
    "instructions_of",
    "loose_variants",
    "result_of",
    "validate",
]
