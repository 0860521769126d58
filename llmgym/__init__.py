"""llmgym: Gymnasium environments and verified rewards for post-training LLMs with RL.

>>> import gymnasium as gym, llmgym
>>> llmgym.register_task_env("demo/Capitals-v0", tasks=[{"id": "fr", "prompt": "Capital of France?",
...     "answer": "Paris"}], verifier="exact", overwrite=True)
'demo/Capitals-v0'
>>> env = gym.make("demo/Capitals-v0")
>>> observation, info = env.reset(seed=0)
>>> env.step("Paris")[1]
1.0
"""

from __future__ import annotations

from importlib import metadata as _metadata

from llmgym import error
from llmgym.checks import EnvContractTests, check_env, check_oracles
from llmgym.core import Episode, LLMEnv, Turn
from llmgym.declarative import load_spec, register_task_env
from llmgym.plugins import load_plugins
from llmgym.registry import list_envs, list_families, make, register
from llmgym.spaces import Text
from llmgym.tasks import DatasetSource, Family, ProceduralSource, Subtask, Task, TaskSource

try:
    __version__ = _metadata.version("llmgym")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

import llmgym.envs  # noqa: E402,F401  (registers the built-in envs under llm/)

load_plugins()


def __getattr__(name: str) -> object:
    # llmgym.evaluate lives in the evaluation layer, imported only when asked for.
    if name == "evaluate":
        from llmgym.evaluation import evaluate

        return evaluate
    # llmgym.audit: the package llmgym/audit/, which is callable (llmgym.audit(env) runs it).
    if name == "audit":
        import importlib

        return importlib.import_module("llmgym.audit")
    raise AttributeError(f"module 'llmgym' has no attribute {name!r}")


__all__ = [
    "DatasetSource",
    "EnvContractTests",
    "Episode",
    "Family",
    "LLMEnv",
    "ProceduralSource",
    "Subtask",
    "Task",
    "TaskSource",
    "Text",
    "Turn",
    "__version__",
    "audit",
    "check_env",
    "check_oracles",
    "error",
    "evaluate",
    "list_envs",
    "list_families",
    "load_plugins",
    "load_spec",
    "make",
    "register",
    "register_task_env",
]
