"""Tool calling: multi-turn tool use on SQLite-backed enterprise scenarios (``llm/ToolCalling-v0``)
and single-shot function calling graded by AST match (``llm/FunctionCalling-v0``)."""

from llmgym.envs.tools.env import ToolCallingEnv

__all__ = ["ToolCallingEnv"]
