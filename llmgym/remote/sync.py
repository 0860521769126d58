"""The blocking client of ``llmgym serve``: a served env as a local ``gymnasium.Env[str, str]``.

:class:`RemoteEnv` opens a session on the server; ``reset``, ``step`` (text or an OpenAI-style
message dict), ``get_state``/``set_state``, ``oracle_action`` and ``render`` run there, and errors
come back as the same ``llmgym.error`` classes the env raised there. It passes Gymnasium's
``check_env`` and llmgym's (the oracle sweep over a procedural catalogue aside: the task source
stays on the server). Only the standard library: one kept-alive HTTP connection per env, a
timeout on every call, and idempotent calls (everything but create, ``reset`` and ``step``)
retried once on a dropped connection. Not here: many episodes at once from one thread (that is
:mod:`llmgym.remote.aio`).
"""

from __future__ import annotations

import http.client
import json
import select
import ssl
import time
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from llmgym import error
from llmgym.core import Episode, LLMEnv, episode_of
from llmgym.remote.protocol import (
    IDEMPOTENT_OPS,
    RemoteError,
    ReplyLost,
    ServerUnreachable,
    SessionInfo,
    check_url,
    http_request,
    parse_body,
    reset_fields,
    reset_result,
    state_result,
    step_result,
    token_or_env,
)
from llmgym.tasks import Task

_IDLE_RECONNECT_S = 2.0
"""A kept-alive connection idle this long is reopened before use: the server may be closing it
(uvicorn does after 5 s) just as a request goes out, and a step cannot be sent again."""


class Connection:
    """One kept-alive HTTP connection to a server, JSON in and out."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 300.0,
        ssl_context: ssl.SSLContext | None = None,
    ):
        parts = check_url(url)
        self.ssl_context = ssl_context
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = str(parts.hostname)
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        token = token_or_env(token)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and (
            time.monotonic() - self._last_used > _IDLE_RECONNECT_S or _closed_by_peer(self._conn)
        ):
            self.close()
        if self._conn is None:
            if self.scheme == "https":  # the given context: a private CA, a client certificate
                self._conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout_s, context=self.ssl_context
                )
            else:
                self._conn = http.client.HTTPConnection(
                    self.host, self.port, timeout=self.timeout_s
                )
        return self._conn

    def request(
        self, method: str, path: str, body: Any = None, *, idempotent: bool | None = None
    ) -> dict[str, Any]:
        """Send one request; return the reply's JSON object or raise the server's error."""
        if idempotent is None:
            idempotent = method in ("GET", "PUT", "DELETE")
        payload = None if body is None else json.dumps(body).encode()
        for attempt in (0, 1):
            conn = self._connection()
            sent = False
            try:
                if conn.sock is None:
                    conn.connect()
                sent = True
                conn.request(method, self.prefix + path, body=payload, headers=self.headers)
                response = conn.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt == 0 and (not sent or idempotent) and not isinstance(exc, TimeoutError):
                    continue
                raise _failure(method, self.url + path, exc, sent, self.timeout_s) from exc
            self._last_used = time.monotonic()
            if response.getheader("connection", "").lower() == "close":
                self.close()
            return parse_body(response.status, data, f"{method} {path}")
        raise AssertionError("unreachable")

    def call(self, op: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Send one op of the protocol (see :func:`llmgym.remote.protocol.http_request`)."""
        method, path, body = http_request(op, fields)
        return self.request(method, path, body, idempotent=op in IDEMPOTENT_OPS)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether the server closed a kept-alive connection (uvicorn does after 5 s idle): between
    requests nothing is due from it, so a readable socket means end of file."""
    if conn.sock is None:
        return False
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([conn.sock], [], [], 0)[0])
    poller = select.poll()
    poller.register(conn.sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


def _failure(
    method: str, url: str, exc: BaseException, sent: bool, timeout_s: float
) -> RemoteError:
    if not sent:
        return ServerUnreachable(f"{method} {url}: cannot reach the server: {exc!r}")
    if isinstance(exc, TimeoutError):
        return ReplyLost(
            f"{method} {url} timed out after {timeout_s} s; the call may have run on the server"
        )
    return ReplyLost(f"{method} {url} failed: {exc!r}; the call may have run on the server")


class RemoteEnv(LLMEnv):
    """An env living in a ``llmgym serve`` session; the same API as the env in-process."""

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        token: str | None = None,
        timeout_s: float = 300.0,
        ssl_context: ssl.SSLContext | None = None,
        **kwargs: Any,
    ):
        # LLMEnv.__init__ is not called: the task source and the grading live on the server.
        self.conn = Connection(url, token=token, timeout_s=timeout_s, ssl_context=ssl_context)
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.source = None  # type: ignore[assignment]
        self._closed = False
        info = SessionInfo.from_reply(
            self.conn.call("create", {"env_id": env_id, "kwargs": kwargs})
        )
        self.session_id = info.session_id
        self.observation_space = info.observation_space
        self.action_space = info.action_space
        self.reward_range = info.reward_range  # type: ignore[assignment]
        self.outcome_reward_range = info.outcome_reward_range  # type: ignore[assignment]
        self.metadata = {"render_modes": info.render_modes, "render_fps": 1}
        self.render_mode = info.render_mode
        self.domain = info.domain  # type: ignore[misc]
        self._episode: Episode | None = None
        self._episode_stale = False
        self._oracle: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<RemoteEnv {self.env_id} at {self.conn.url} session {self.session_id[:8]}>"

    # --- Gymnasium API ------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)  # seeds the local np_random, as the env does there
        doc = self._call("reset", reset_fields(seed, options))
        self._touched()
        return reset_result(doc)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        doc = self._call("step", {"action": action})
        self._touched()
        return step_result(doc)

    def render(self) -> str | None:  # type: ignore[override]
        if self.render_mode != "ansi":
            return None
        render = self._call("render")["render"]
        return None if render is None else str(render)

    def close(self) -> None:
        if self._closed or not hasattr(self, "session_id"):
            return
        self._closed = True
        try:
            self.conn.call("close", {"session_id": self.session_id})
        except error.Error:
            pass  # the server may be gone already; its idle timeout closes the session then
        finally:
            self.conn.close()

    # --- snapshots, the oracle, the episode mirror ---------------------------------------------

    def get_state(self) -> dict[str, Any]:
        return state_result(self._call("get_state"))

    def set_state(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise error.InvalidState("Expects a snapshot returned by get_state()")
        self._call("set_state", {"state": dict(state)})
        self._touched()

    def oracle_action(self) -> Any:
        action = self._oracle_doc()["action"]
        if action is None:
            raise error.ResetNeeded("The episode has ended; call env.reset() to start another")
        return action

    def secrets(self, task: Task) -> list[str]:
        return list(self._oracle_doc()["secrets"])

    def task_reward_range(self, task: Task) -> tuple[float, float]:
        lo, hi = self._oracle_doc()["task_reward_range"]
        return (float(lo), float(hi))

    @property
    def episode(self) -> Episode | None:
        """The server's episode, mirrored from a snapshot (fetched when first asked for)."""
        if self._episode_stale:
            try:
                state = self.get_state()
            except error.ResetNeeded:
                return None
            while "task" not in state and isinstance(state.get("state"), Mapping):
                state = state["state"]  # a wrapping env's snapshot (Mixture-v0: its member's)
            self._episode = episode_of(state)
            self._episode_stale = False
        return self._episode

    def _oracle_doc(self) -> dict[str, Any]:
        if self._oracle is None:
            self._oracle = self._call("oracle")
        return self._oracle

    def _touched(self) -> None:
        self._episode_stale = True
        self._oracle = None

    def _call(self, op: str, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if self._closed:
            raise error.Error(f"{self!r} is closed")
        return self.conn.call(op, {**(fields or {}), "session_id": self.session_id})


def make(url: str, env_id: str, *, token: str | None = None, **kwargs: Any) -> RemoteEnv:
    """A session of ``env_id`` (built with ``kwargs``) on the ``llmgym serve`` at ``url``."""
    return RemoteEnv(url, env_id, token=token, **kwargs)
