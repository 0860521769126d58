"""Coding: programs run in the sandbox against tests (``llm/Coding-v0``), execute-verify-correct
over several turns (``llm/CodingMultiTurn-v0``) and constrained code repair
(``llm/CodeRepair-v0``).

The wing: ``env.py`` (CodingEnv, CodingMultiTurnEnv) and ``repair.py`` (CodeRepairEnv), the env
classes; ``families/``, the task catalogue (one theme per module, plain lists); ``judge/``, the
annex that grades a program (the program shipped into the sandbox, the runs, direct mode,
verdicts); ``problem.py``, the task format and the builders the families use; ``extract.py``
and ``patch.py``, reading code and diffs out of an answer; ``datasets.py``, the HumanEval, MBPP,
APPS, CodeContests and LiveCodeBench loaders.
"""

from llmgym._moved import keep_former_paths
from llmgym.envs.coding.env import CodingEnv, CodingMultiTurnEnv
from llmgym.envs.coding.repair import CodeRepairEnv

_FAMILIES = "llmgym.envs.coding.families"

keep_former_paths(
    __name__,
    {
        **{
            theme: f"{_FAMILIES}.{theme}"
            for theme in (
                "arrays",
                "bits",
                "dp",
                "geometry",
                "graphs",
                "modules",
                "parsing",
                "simulation",
                "stacks",
                "stdio",
                "strings",
            )  # fmt: skip
        },
        "repair_tasks": f"{_FAMILIES}.code_repair",
        "runner": "llmgym.envs.coding.judge.program",
        "verify": "llmgym.envs.coding.judge.verifier",
    },
)

__all__ = ["CodeRepairEnv", "CodingEnv", "CodingMultiTurnEnv"]
