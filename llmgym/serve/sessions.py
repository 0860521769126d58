"""Sessions of ``llmgym serve``: one env per session, owned by the token that created it.

A :class:`SessionPool` holds the live envs, caps how many there are, serialises the calls on
each one (an env is not thread-safe; different sessions run in parallel), and closes an env
whenever its session ends: closed by its client, idle past the timeout, or the server stopping.
It knows nothing of HTTP; :mod:`llmgym.serve.app` maps its errors to status codes.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llmgym import error

log = logging.getLogger(__name__)


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
    held_chars: int = 0
    """Characters of conversation the session's episode holds (its messages, as the last reply
    showed them): what ``max_session_chars`` limits."""
    closed: bool = False
    close_pending: bool = False
    """Closed while a call was stuck past the pool's ``close_timeout_s``: whoever holds
    ``lock`` next (the call returning, or :meth:`SessionPool._discard`) closes the env."""
    env_closed: bool = False


class SessionPool:
    """The live sessions of one server.

    ``make(env_id, kwargs)`` builds an env; it runs outside the pool's lock, so a slow
    constructor does not hold up other clients. Every method is safe from any thread.

    Subclasses may place envs elsewhere (Ray actors): :meth:`make_env` receives the session
    id drawn by :meth:`new_session_id` before the env is built; ``created_per_env`` and
    ``expired_per_env`` (what ``/metrics`` reports) are kept by :meth:`create` and
    :meth:`expire_idle`, so an override that does not call them keeps them itself.
    """

    envs_elsewhere = False
    """Whether the envs live in other processes that count their own metrics
    (:meth:`env_metric_samples`); see :class:`~llmgym.serve.metrics.ServeMetrics`."""

    def env_metric_samples(self) -> list[Any]:
        """The env metrics of each process holding envs (a pool with ``envs_elsewhere``)."""
        raise NotImplementedError("this pool's envs live here: its app counts their metrics")

    def __init__(
        self,
        make: Callable[[str, dict[str, Any]], gym.Env[Any, Any]],
        *,
        max_sessions: int = 256,
        idle_timeout_s: float | None = 600.0,
        close_timeout_s: float = 10.0,
    ):
        if max_sessions < 1:
            raise ValueError(f"Expects max_sessions >= 1, actual: {max_sessions}")
        self._make = make
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.close_timeout_s = close_timeout_s
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
                if session.close_pending:  # closed while this call ran past the deadline
                    self._close_env_logged(session)

    def close(self, session_id: str, owner: str) -> None:
        session = self.get(session_id, owner)
        self._discard(session)

    def _discard(self, session: Session) -> None:
        """End ``session``: nothing new starts on it; its env is closed once no call runs.

        Waits ``close_timeout_s`` at most for a call in flight; past it the env is left for the
        call to close when it returns (a call that never returns leaves it, with a log line),
        so that closing never hangs. ``env.close()``'s exception propagates.
        """
        with self._lock:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]
        session.closed = True  # a call that takes the lock after this refuses to run
        if session.lock.acquire(timeout=self.close_timeout_s):
            try:
                self._close_env(session)
            finally:
                session.lock.release()
            return
        session.close_pending = True
        # the call may have returned between the timeout and the flag, not seeing it
        if session.lock.acquire(blocking=False):
            try:
                self._close_env(session)
            finally:
                session.lock.release()
            return
        log.warning(
            "session %s (%s): a call still runs after %.1f s; its env closes when it returns",
            session.id,
            session.env_id,
            self.close_timeout_s,
        )

    @staticmethod
    def _close_env(session: Session) -> None:
        """Close the env once (the caller holds ``session.lock``)."""
        if not session.env_closed:
            session.env_closed = True
            session.env.close()

    def _close_env_logged(self, session: Session) -> None:
        try:
            self._close_env(session)
        except Exception:
            log.exception("session %s (%s): env.close() failed", session.id, session.env_id)

    def _discard_logged(self, session: Session) -> None:
        """:meth:`_discard`, logging a failing ``env.close()`` instead of raising it."""
        try:
            self._discard(session)
        except Exception:
            log.exception("session %s (%s): env.close() failed", session.id, session.env_id)

    def expire_idle(self, now: float | None = None) -> int:
        """Close the sessions idle longer than ``idle_timeout_s``; returns how many.

        Every stale session is closed (and counted: it is gone from the pool) even when some
        envs' ``close()`` raise; those are logged.
        """
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
            self._discard_logged(session)
        with self._lock:
            self.expired += len(stale)
            self.expired_per_env.update(s.env_id for s in stale)
        return len(stale)

    def close_all(self) -> None:
        """Close every session, even when some envs' ``close()`` raise (logged)."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            self._discard_logged(session)

    def counts(self) -> dict[str, int]:
        with self._lock:
            per_env: dict[str, int] = {}
            for s in self._sessions.values():
                per_env[s.env_id] = per_env.get(s.env_id, 0) + 1
            return {"active": len(self._sessions), **{f"env:{k}": v for k, v in per_env.items()}}
