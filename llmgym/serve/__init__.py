"""``llmgym serve``: registered envs as an HTTP service with sessions, and OpenEnv's protocol.

>>> from llmgym.serve import Server, ServeConfig  # doctest: +SKIP
>>> with Server(ServeConfig(env_ids=["llm/Math-v0"])) as srv:  # doctest: +SKIP
...     env = llmgym.remote.make(srv.url, "llm/Math-v0")

Needs the ``serve`` extra (FastAPI, uvicorn; openenv-core for OpenEnv's routes). The client,
:mod:`llmgym.remote`, needs only the standard library.
"""

from __future__ import annotations

from llmgym.serve.app import ServeConfig, create_app
from llmgym.serve.server import Server

__all__ = ["ServeConfig", "Server", "create_app"]
