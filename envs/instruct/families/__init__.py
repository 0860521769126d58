"""The Instruct-v0 task catalogue: every family of ``llm/Instruct-v0``, one theme per module.

A family is an :class:`~llmgym.envs.instruct.compose.task.InstructFamily`: a kind of work, the
instructions it is about and those that may join them; ``compose/`` writes the task and its
compliant response. To add a family, add a line to the theme module it belongs to;
``tests/test_gold.py`` and ``tests/instruct/`` then cover it. Nothing registers itself.
"""

from __future__ import annotations

from llmgym.envs.instruct.compose.task import InstructFamily
from llmgym.envs.instruct.families import forms, mixed, work, writing

FAMILIES: list[InstructFamily] = [
    *writing.FAMILIES,
    *forms.FAMILIES,
    *work.FAMILIES,
    *mixed.FAMILIES,
]
"""Every family of ``llm/Instruct-v0``, plain writing first."""

__all__ = ["FAMILIES", "InstructFamily"]
