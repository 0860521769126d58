"""The bridged-library domain: ``llm/ReasoningGym-v0`` (reasoning-gym's datasets as families).

``env.py`` holds the env, ``families/`` the catalogue (one line per bridged dataset, by the
library's categories), and ``bridge/`` the machinery that brings a task library in: the
adapter, the source, the out-of-process scorer and the answer protocol. ``bridge/__init__.py``
describes the pattern, the way any other task library comes in. Importing this package does not
import reasoning-gym; making the env does.
"""

from llmgym.envs.reasoning.env import ReasoningGymEnv

__all__ = ["ReasoningGymEnv"]
