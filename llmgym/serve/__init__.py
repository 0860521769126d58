"""``llmgym serve``: registered envs as an HTTP service with sessions, and OpenEnv's protocol.

>>> from llmgym.serve import Server, ServeConfig  # doctest: +SKIP
>>> with Server(ServeConfig(env_ids=["llm/Math-v0"])) as srv:  # doctest: +SKIP
...     env = llmgym.remote.make(srv.url, "llm/Math-v0")

Needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client; openenv-core for OpenEnv's
routes): without it, importing this package raises ``DependencyNotInstalled``. The blocking client,
:mod:`llmgym.remote`, needs only the standard library; its asyncio client needs httpx (and
websockets for ``transport="ws"``).
"""

from __future__ import annotations

try:
    from llmgym.serve.app import ServeConfig, create_app
    from llmgym.serve.server import Server
except ModuleNotFoundError as e:
    if e.name not in ("fastapi", "starlette", "uvicorn", "prometheus_client", "h11"):
        raise
    from llmgym.error import DependencyNotInstalled

    raise DependencyNotInstalled(f"llmgym serve needs {e.name}: pip install 'llmgym[serve]'") from e

__all__ = ["ServeConfig", "Server", "create_app"]
