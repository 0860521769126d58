"""Coding: programs run in the sandbox against tests (``llm/Coding-v0``), execute-verify-correct
over several turns (``llm/CodingMultiTurn-v0``) and constrained code repair
(``llm/CodeRepair-v0``)."""

from llmgym.envs.coding.env import CodingEnv, CodingMultiTurnEnv
from llmgym.envs.coding.repair import CodeRepairEnv

__all__ = ["CodeRepairEnv", "CodingEnv", "CodingMultiTurnEnv"]
