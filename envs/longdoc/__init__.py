"""The long-document domain: ``llm/LongDoc-v0`` (full context, chunked reading, search/read tools).

``env.py`` holds the env, ``families/`` the task catalogue, ``writers/`` the documents they are
written into, ``reading.py`` the chunked and tool reading modes and ``datasets.py`` the LongBench
and HotpotQA loaders.
"""

from llmgym._moved import keep_former_paths
from llmgym.envs.longdoc.env import LongDocEnv

_WRITERS = "llmgym.envs.longdoc.writers"

keep_former_paths(
    __name__,
    {
        "cast": f"{_WRITERS}.cast",
        "codefile": f"{_WRITERS}.code_file",
        "contract": f"{_WRITERS}.contract",
        "document": f"{_WRITERS}.document",
        "incidents": f"{_WRITERS}.incident_log",
        "manual": f"{_WRITERS}.manual",
        "minutes": f"{_WRITERS}.minutes",
        "policy": f"{_WRITERS}.corporate_policy",
        "report": f"{_WRITERS}.annual_report",
        "tokens": f"{_WRITERS}.tokens",
        "vocab": f"{_WRITERS}.vocab",
    },
)

__all__ = ["LongDocEnv"]
