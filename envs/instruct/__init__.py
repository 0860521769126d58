"""The instruction-following domain: ``llm/Instruct-v0`` (IFEval-style verifiable instructions).

``env.py`` holds the env, ``families/`` the task catalogue, ``compose/`` the machinery that
writes a task and its compliant response, and ``datasets.py`` the IFEval and JSONL loaders. The
checkers and the reward are in :mod:`llmgym.rewards.instruct`.
"""

from llmgym.envs.instruct.env import InstructEnv

__all__ = ["InstructEnv"]
