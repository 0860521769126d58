"""Sessions of ``llmgym serve``: one env per session, owned by the token that created it.

A :class:`SessionPool` holds the live envs, caps how many there are, serialises the calls on
each one (an env is not thread-safe; different sessions run in parallel), and closes an env
whenever its session ends: closed by its client, idle past the timeout, or the server stopping.
It knows nothing of HTTP; :mod:`llmgym.serve.app` maps its errors to status codes.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llmgym import error


class ServeError(error.Error):
    """A request the server refuses; ``status`` is the HTTP status it answers with."""

    status = 400


class UnknownSession(ServeError):
    """No such session, or not one of this client's (the same answer, so ids do not leak)."""

    status = 404


class TooManySessions(ServeError):
    """The server holds ``max_sessions`` sessions already."""

    status = 503


def owner_of(token: str | None) -> str:
    """The owner name of a client token (a hash: tokens are never kept or logged)."""
    if not token:
        return "anonymous"
    return hashlib.sha256(token.encode()).hexdigest()[:16]


@dataclass
class Session:
    """One client's env and its bookkeeping."""

    id: str
    env_id: str
    owner: str
    env: gym.Env[Any, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0
    closed: bool = False


class SessionPool:
    """The live sessions of one server.

    ``make(env_id, kwargs)`` builds an env; it runs outside the pool's lock, so a slow
    constructor does not hold up other clients. Every method is safe from any thread.

    Subclasses may place envs elsewhere (Ray actors): :meth:`make_env` receives the session
    id drawn by :meth:`new_session_id` before the env is built; ``created_per_env`` and
    ``expired_per_env`` (what ``/metrics`` reports) are kept by :meth:`create` and
    :meth:`expire_idle`, so an override that does not call them keeps them itself.
    """

    def __init__(
        self,
        make: Callable[[str, dict[str, Any]], gym.Env[Any, Any]],
        *,
        max_sessions: int = 256,
        idle_timeout_s: float | None = 600.0,
    ):
        if max_sessions < 1:
            raise ValueError(f"Expects max_sessions >= 1, actual: {max_sessions}")
        self._make = make
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._sessions: dict[str, Session] = {}
        self._reserved = 0
        self._lock = threading.Lock()
        self.created = 0
        self.expired = 0
        self.created_per_env: Counter[str] = Counter()
        self.expired_per_env: Counter[str] = Counter()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def new_session_id(self) -> str:
        """A fresh, unguessable session id (a session's id is all a client names it by)."""
        return secrets.token_urlsafe(18)

    def make_env(self, env_id: str, kwargs: dict[str, Any], session_id: str) -> gym.Env[Any, Any]:
        """The env of a new session (``session_id`` is for overrides that place it elsewhere)."""
        return self._make(env_id, kwargs)

    def create(self, env_id: str, kwargs: dict[str, Any], owner: str) -> Session:
        with self._lock:
            if len(self._sessions) + self._reserved >= self.max_sessions:
                raise TooManySessions(
                    f"The server holds its limit of {self.max_sessions} sessions; close one "
                    "(DELETE /v1/sessions/ID) or start the server with a higher --max-sessions"
                )
            self._reserved += 1
        session_id = self.new_session_id()
        try:
            env = self.make_env(env_id, kwargs, session_id)
        finally:
            with self._lock:
                self._reserved -= 1
        session = Session(id=session_id, env_id=env_id, owner=owner, env=env)
        with self._lock:
            self._sessions[session.id] = session
            self.created += 1
            self.created_per_env[env_id] += 1
        return session

    def get(self, session_id: str, owner: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None or session.owner != owner or session.closed:
            raise UnknownSession(
                f"No session {session_id!r} for this client (closed, expired, or another "
                "client's); create one with POST /v1/sessions"
            )
        return session

    def call(self, session_id: str, owner: str, fn: Callable[[Session], Any]) -> Any:
        """Run ``fn(session)`` with the session's lock held (one call at a time per env)."""
        session = self.get(session_id, owner)
        with session.lock:
            if session.closed:
                raise UnknownSession(f"Session {session_id!r} was closed")
            session.last_used = time.monotonic()
            try:
                return fn(session)
            finally:
                session.last_used = time.monotonic()

    def close(self, session_id: str, owner: str) -> None:
        session = self.get(session_id, owner)
        self._discard(session)

    def _discard(self, session: Session) -> None:
        with self._lock:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]
        with session.lock:  # waits for a call in flight; nothing new starts (closed is set)
            if not session.closed:
                session.closed = True
                session.env.close()

    def expire_idle(self, now: float | None = None) -> int:
        """Close the sessions idle longer than ``idle_timeout_s``; returns how many."""
        if self.idle_timeout_s is None:
            return 0
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [
                s
                for s in self._sessions.values()
                if now - s.last_used > self.idle_timeout_s and not s.lock.locked()
            ]
        for session in stale:
            self._discard(session)
        with self._lock:
            self.expired += len(stale)
            self.expired_per_env.update(s.env_id for s in stale)
        return len(stale)

    def close_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            self._discard(session)

    def counts(self) -> dict[str, int]:
        with self._lock:
            per_env: dict[str, int] = {}
            for s in self._sessions.values():
                per_env[s.env_id] = per_env.get(s.env_id, 0) + 1
            return {"active": len(self._sessions), **{f"env:{k}": v for k, v in per_env.items()}}
