"""Tool calling: multi-turn tool use on SQLite-backed enterprise back ends (``llm/ToolCalling-v0``)
and function calling graded as BFCL grades it (``llm/FunctionCalling-v0``).

The wing: ``env.py`` (ToolCallingEnv) and ``function_calling.py`` (FunctionCallingEnv), the env
classes; ``families/``, the task catalogue (back ends and the families written on them, plain
lists); ``scenario.py``, what a back end and a task plan are made of; ``bfcl/``, the annex that
reads BFCL's data and runs its checks (Java/JavaScript arguments, multi-turn backends, BFCL's own
checkers as the peer, conformance cases).

Importing any module of the wing runs this file first, and it hands the catalogue's back ends to
the scenario machinery: every tool is known whichever module was imported first.
"""

from llmgym._moved import keep_former_paths
from llmgym.envs.tools import scenario
from llmgym.envs.tools.env import ToolCallingEnv
from llmgym.envs.tools.families import MODULES
from llmgym.envs.tools.function_calling import FunctionCallingEnv

scenario.install(MODULES)

keep_former_paths(
    __name__,
    {
        "banking": "llmgym.envs.tools.families.banking",
        "calc": "llmgym.envs.tools.families.calc",
        "crm": "llmgym.envs.tools.families.crm",
        "expenses": "llmgym.envs.tools.families.expenses",
        "files": "llmgym.envs.tools.families.files",
        "hr": "llmgym.envs.tools.families.hr",
        "kb": "llmgym.envs.tools.families.kb",
        "library": "llmgym.envs.tools.families.library",
        "orders": "llmgym.envs.tools.families.orders",
        "scheduling": "llmgym.envs.tools.families.scheduling",
        "tickets": "llmgym.envs.tools.families.tickets",
        "travel": "llmgym.envs.tools.families.travel",
        "warehouse": "llmgym.envs.tools.families.warehouse",
        "workflows": "llmgym.envs.tools.families.workflows",
        "single": "llmgym.envs.tools.function_calling",
        "bfcl_lang": "llmgym.envs.tools.bfcl.languages",
        "bfcl_multi": "llmgym.envs.tools.bfcl.multi_turn",
        "bfcl_peer": "llmgym.envs.tools.bfcl.peer",
        "bfcl_conformance": "llmgym.envs.tools.bfcl.conformance",
    },
)

__all__ = ["FunctionCallingEnv", "ToolCallingEnv"]
