"""llmgym.remote: envs served by ``llmgym serve``, used from another process or machine.

- ``make(url, env_id, **kwargs)`` opens a session and returns a :class:`RemoteEnv`, a
  ``gymnasium.Env[str, str]`` that passes ``check_env`` (blocking; standard library only).
- :class:`AsyncClient` runs thousands of episodes at once from one asyncio event loop, over
  HTTP/1.1 or the server's WebSocket, with connection reuse, timeouts, retries of what may be
  sent again, and back-pressure (needs ``httpx``/``websockets``: ``pip install 'llmgym[serve]'``).

Errors come back as the same ``llmgym.error`` classes the env raised on the server; what only a
remote call can meet is a :class:`RemoteError` (:class:`ServerUnreachable`, :class:`ReplyLost`,
:class:`ServerBusy`). Not here: the server (:mod:`llmgym.serve`).

>>> env = llmgym.remote.make("http://127.0.0.1:8000", "llm/Math-v0")  # doctest: +SKIP
>>> obs, info = env.reset(seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

from llmgym.remote.aio import AsyncClient, AsyncRemoteEnv
from llmgym.remote.protocol import (
    TOKEN_ENV,
    RemoteError,
    ReplyLost,
    ServerBusy,
    ServerUnreachable,
)
from llmgym.remote.sync import Connection, RemoteEnv, make

__all__ = [
    "TOKEN_ENV",
    "AsyncClient",
    "AsyncRemoteEnv",
    "Connection",
    "RemoteEnv",
    "RemoteError",
    "ReplyLost",
    "ServerBusy",
    "ServerUnreachable",
    "make",
]
