"""The long-document domain: ``llm/LongDoc-v0`` (full context, chunked reading, search/read tools)."""

from llmgym.envs.longdoc.env import LongDocEnv

__all__ = ["LongDocEnv"]
