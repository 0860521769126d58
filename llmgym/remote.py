"""llmgym.remote: an env served by ``llmgym serve``, used as a local ``gymnasium.Env[str, str]``.

``make(url, env_id, **kwargs)`` opens a session on the server and returns a :class:`RemoteEnv`:
``reset``, ``step`` (text or an OpenAI-style message dict), ``get_state``/``set_state``,
``oracle_action`` and ``render`` run on the server, and errors come back as the same
``llmgym.error`` classes the env raised there. It passes Gymnasium's ``check_env`` and
llmgym's (the oracle sweep over a procedural catalogue aside: the task source stays on the
server). Only the standard library is needed: one kept-alive HTTP connection per env, a timeout
on every call, and idempotent calls (everything but ``reset`` and ``step``) retried once on a
dropped connection.

>>> env = llmgym.remote.make("http://127.0.0.1:8000", "llm/Math-v0")  # doctest: +SKIP
>>> obs, info = env.reset(seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from llmgym import error
from llmgym.core import Episode, LLMEnv
from llmgym.spaces import Text
from llmgym.tasks import Task

TOKEN_ENV = "LLMGYM_SERVE_TOKEN"
"""The client token when ``token`` is not given (the first one, if comma-separated)."""

_IDLE_RECONNECT_S = 30.0
"""A kept-alive connection idle this long is reopened before use (the server may have dropped it)."""


class RemoteError(error.Error):
    """The server refused a request or failed; the message is the server's."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


def _error_class(name: str) -> type[Exception]:
    for module in (error, gym.error):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls
    return RemoteError


class Connection:
    """One kept-alive HTTP connection to a server, JSON in and out."""

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 300.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise error.Error(f"Expects an http(s)://host:port URL, actual: {url!r}")
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        if token is None:
            token = (os.environ.get(TOKEN_ENV, "").split(",")[0]).strip() or None
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None and time.monotonic() - self._last_used > _IDLE_RECONNECT_S:
            self.close()
        if self._conn is None:
            cls = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
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
            try:
                conn.request(method, self.prefix + path, body=payload, headers=self.headers)
                response = conn.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt == 0 and idempotent and not isinstance(exc, TimeoutError):
                    continue
                raise RemoteError(f"{method} {self.url}{path} failed: {exc!r}") from exc
            self._last_used = time.monotonic()
            if response.getheader("connection", "").lower() == "close":
                self.close()
            return self._decode(response.status, data, f"{method} {path}")
        raise AssertionError("unreachable")

    @staticmethod
    def _decode(status: int, data: bytes, what: str) -> dict[str, Any]:
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            doc = {
                "error": {"type": "RemoteError", "message": data[:300].decode("utf-8", "replace")}
            }
        if status >= 400 or not isinstance(doc, dict):
            err = doc.get("error") if isinstance(doc, dict) else None
            if not isinstance(err, dict):
                err = {"type": "RemoteError", "message": str(doc)[:300]}
            cls = _error_class(str(err.get("type")))
            message = f"{err.get('message')} (server: {what}, HTTP {status})"
            if cls is RemoteError:
                raise RemoteError(message, status)
            raise cls(message)
        return doc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _space(doc: Mapping[str, Any]) -> Text:
    return Text(doc.get("max_length"), min_length=int(doc.get("min_length") or 0))


class RemoteEnv(LLMEnv):
    """An env living in a ``llmgym serve`` session; the same API as the env in-process."""

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        token: str | None = None,
        timeout_s: float = 300.0,
        **kwargs: Any,
    ):
        # LLMEnv.__init__ is not called: the task source and the grading live on the server.
        self.conn = Connection(url, token=token, timeout_s=timeout_s)
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.source = None  # type: ignore[assignment]
        doc = self.conn.request(
            "POST", "/v1/sessions", {"env_id": env_id, "kwargs": kwargs}, idempotent=False
        )
        self.session_id = str(doc["session_id"])
        self._path = f"/v1/sessions/{urllib.parse.quote(self.session_id, safe='')}"
        self.observation_space = _space(doc["observation_space"])
        self.action_space = _space(doc["action_space"])
        self.reward_range = tuple(doc["reward_range"])  # type: ignore[assignment]
        self.outcome_reward_range = tuple(doc["outcome_reward_range"])  # type: ignore[assignment]
        self.metadata = {"render_modes": list(doc["metadata"]["render_modes"]), "render_fps": 1}
        self.render_mode = doc.get("render_mode")
        self.domain = doc.get("domain") or "generic"  # type: ignore[misc]
        self._episode = None
        self._episode_stale = False
        self._oracle: dict[str, Any] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RemoteEnv {self.env_id} at {self.conn.url} session {self.session_id[:8]}>"

    # --- Gymnasium API ------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)  # seeds the local np_random, as the env does there
        if options is not None and isinstance(options.get("task"), Task):
            options = {**options, "task": options["task"].to_dict()}
        doc = self._call("POST", "/reset", {"seed": seed, "options": options}, idempotent=False)
        self._touched()
        return doc["observation"], doc["info"]

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        doc = self._call("POST", "/step", {"action": action}, idempotent=False)
        self._touched()
        return (
            doc["observation"],
            float(doc["reward"]),
            bool(doc["terminated"]),
            bool(doc["truncated"]),
            doc["info"],
        )

    def render(self) -> str | None:  # type: ignore[override]
        if self.render_mode != "ansi":
            return None
        render = self._call("GET", "/render")["render"]
        return None if render is None else str(render)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call("DELETE", "")
        except (RemoteError, error.Error):
            pass  # the server may be gone already; its idle timeout closes the session then
        finally:
            self.conn.close()

    # --- snapshots, the oracle, the episode mirror ---------------------------------------------

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("GET", "/state")["state"]
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise error.InvalidState("Expects a snapshot returned by get_state()")
        self._call("PUT", "/state", {"state": dict(state)})
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
            task = Task.from_dict(state["task"])
            self._episode = Episode(
                task=task,
                messages=state["messages"],
                max_turns=int(state["max_turns"]),
                mode=state["mode"],
                subtask_index=int(state["subtask_index"]),
                subtask_rewards=dict(state["subtask_rewards"]),
                turn=int(state["turn"]),
                done=bool(state["done"]),
            )
            self._episode_stale = False
        return self._episode

    def _oracle_doc(self) -> dict[str, Any]:
        if self._oracle is None:
            self._oracle = self._call("GET", "/oracle")
        return self._oracle

    def _touched(self) -> None:
        self._episode_stale = True
        self._oracle = None

    def _call(
        self, method: str, suffix: str, body: Any = None, *, idempotent: bool | None = None
    ) -> dict[str, Any]:
        if self._closed and method != "DELETE":
            raise error.Error(f"{self!r} is closed")
        return self.conn.request(method, self._path + suffix, body, idempotent=idempotent)


def make(url: str, env_id: str, *, token: str | None = None, **kwargs: Any) -> RemoteEnv:
    """A session of ``env_id`` (built with ``kwargs``) on the ``llmgym serve`` at ``url``."""
    return RemoteEnv(url, env_id, token=token, **kwargs)
