"""The operations of ``llmgym serve``, one method each, shared by HTTP, WebSocket and batch.

A :class:`Service` checks a request's fields, applies the limits (kwargs allowed, memory,
steps/s, action size), runs the env call on its own thread pool (``workers`` threads: the
event loop never waits on an env) through the :class:`~llmgym.serve.sessions.SessionPool`,
records the metrics, and returns the reply document, or raises the error whose status and
document the transports send. It knows no transport: :mod:`llmgym.serve.app` maps it to HTTP
routes, :mod:`llmgym.serve.ws` to WebSocket ops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import gymnasium as gym

from llmgym import error
from llmgym.core import LLMEnv
from llmgym.serve import wire
from llmgym.serve.envargs import KwargPolicy
from llmgym.serve.limits import RateLimited, RateLimiter, check_memory
from llmgym.serve.logs import Trace
from llmgym.serve.metrics import ServeMetrics
from llmgym.serve.sessions import ServeError, Session, SessionPool
from llmgym.serve.threads import EnvThreads

if TYPE_CHECKING:
    from llmgym.serve.app import ServeConfig

log = logging.getLogger(__name__)

T = TypeVar("T")
Doc = dict[str, Any]


class ConnectionGone(ServeError):
    """The WebSocket that asked for a session closed before the session was made."""

    status = 410


class Owned:
    """The sessions one WebSocket connection created; they close when it closes.

    Thread-safe: a session made on a worker thread after the connection closed is refused
    here (:meth:`add` returns False) and closed by its maker, so none is left behind.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self._open = True

    def add(self, session_id: str) -> bool:
        with self._lock:
            if self._open:
                self._ids.add(session_id)
            return self._open

    def discard(self, session_id: str) -> None:
        with self._lock:
            self._ids.discard(session_id)

    def close(self) -> list[str]:
        """Mark the connection closed; returns the sessions to close."""
        with self._lock:
            self._open = False
            ids, self._ids = list(self._ids), set()
        return ids


def spaces_of(env: gym.Env[Any, Any]) -> Doc:
    """The spaces, reward ranges and render modes of an env, as JSON."""

    def space(s: Any) -> Doc:
        return {
            "type": type(s).__name__,
            "min_length": getattr(s, "min_length", None),
            "max_length": getattr(s, "max_length", None),
        }

    base = env.unwrapped
    return {
        "observation_space": space(env.observation_space),
        "action_space": space(env.action_space),
        "reward_range": list(getattr(base, "reward_range", (0.0, 1.0))),
        "outcome_reward_range": list(getattr(base, "outcome_reward_range", (0.0, 1.0))),
        "metadata": {"render_modes": list(env.metadata.get("render_modes", []))},
        "render_mode": env.render_mode,
        "domain": getattr(base, "domain", None),
    }


def _llm(session: Session) -> LLMEnv:
    base = session.env.unwrapped
    if not isinstance(base, LLMEnv):
        raise error.Error(f"{session.env_id} is not an llmgym env: it has no snapshots or oracle")
    return base


class SessionTooLarge(wire.PayloadTooLarge):
    """A step that would take a session's conversation past ``max_session_chars``."""


def conversation_chars(info: Any) -> int | None:
    """Characters of the conversation an env reports in ``info["messages"]`` (None: it
    reports none). Text content counts its length; anything else its JSON."""
    messages = info.get("messages") if isinstance(info, dict) else None
    if not isinstance(messages, list):
        return None
    total = 0
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str) and len(m) <= 2:  # {"role", "content"}: no JSON needed
            total += len(content)
        else:
            total += wire.action_size(m)
    return total


def _session_id(doc: Doc) -> str:
    sid = wire.field_of(doc, "session_id", (str,))
    if sid is None:
        raise wire.BadRequest("Expects 'session_id' (a string)")
    return str(sid)


class Service:
    """The served envs of one app: its config, pool, limits, metrics and env threads."""

    def __init__(
        self, config: ServeConfig, env_ids: list[str], pool: SessionPool, metrics: ServeMetrics
    ):
        self.config = config
        self.env_ids = env_ids
        self.pool = pool
        self.metrics = metrics
        self.limiter = RateLimiter(config.max_steps_per_s, config.session_steps_per_s)
        self.kwargs = KwargPolicy(env_ids, config.allow_kwargs, config.kwarg_max)
        self.threads = EnvThreads(config.workers)

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on one of the env threads."""
        return await self.threads.run(fn)

    def shutdown(self) -> None:
        """Close every session, then stop the env threads (the server is stopping).

        Waits ``close_timeout_s`` at most for each stuck env call, then as long again for the
        env threads: a call that never returns leaves its thread behind (logged), not a hang.
        """
        self.pool.close_all()
        if not self.threads.shutdown(self.config.close_timeout_s):
            log.warning(
                "env calls still run %.1f s after shutdown began; leaving their threads",
                self.config.close_timeout_s,
            )

    def _on_session(self, owner: str, doc: Doc, trace: Trace, fn: Callable[[Session], T]) -> T:
        sid = _session_id(doc)
        trace.session_id = sid

        def traced(session: Session) -> T:
            trace.env_id = session.env_id
            return fn(session)

        return self.pool.call(sid, owner, traced)

    # --- the ops: each takes the owner, the request's JSON object and the trace to fill ----

    async def create(self, owner: str, doc: Doc, trace: Trace, owned: Owned | None = None) -> Doc:
        env_id = wire.field_of(doc, "env_id", (str,))
        if env_id is None:
            raise wire.BadRequest("Expects 'env_id' (a string) to create a session")
        trace.env_id = env_id
        if env_id not in self.env_ids:
            hint = error.did_you_mean(env_id, self.env_ids)
            raise error.UnknownEnv(
                f"This server does not serve {env_id!r}{hint} (it serves: {', '.join(self.env_ids)})"
            )
        kwargs = wire.field_of(doc, "kwargs", (dict,), {})
        self.kwargs.check(env_id, kwargs)
        check_memory(self.config.max_rss_mb)

        def work() -> Doc:
            session = self.pool.create(env_id, kwargs, owner)
            if owned is not None and not owned.add(session.id):
                self.pool.close(session.id, owner)
                raise ConnectionGone("The connection closed while its session was being made")
            trace.session_id = session.id
            return {"session_id": session.id, "env_id": env_id, **spaces_of(session.env)}

        return await self.run(work)

    async def reset(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        seed = wire.field_of(doc, "seed", (int,))
        options = wire.field_of(doc, "options", (dict,))

        def fn(s: Session) -> Doc:
            start = time.perf_counter()
            obs, info = s.env.reset(seed=seed, options=options)
            self.metrics.observe_reset(s.env_id, time.perf_counter() - start)
            held = conversation_chars(info)
            s.held_chars = wire.action_size(obs) if held is None else held
            return {"observation": obs, "info": info}

        return await self.run(lambda: self._on_session(owner, doc, trace, fn))

    def _check_action(self, doc: Doc) -> tuple[Any, int]:
        """The step's action and its size in characters (refused past ``max_action_chars``)."""
        if "action" not in doc:
            raise wire.BadRequest("Expects 'action' (text or an OpenAI-style message) to step")
        action = doc["action"]
        size = wire.action_size(action)
        if size > self.config.max_action_chars:
            raise wire.PayloadTooLarge(
                f"The action is over the server's limit of {self.config.max_action_chars} "
                "characters"
            )
        return action, size

    def _check_held(self, s: Session, size: int) -> None:
        """Refuse a step that would take the session's conversation past its budget."""
        limit = self.config.max_session_chars
        if limit is not None and s.held_chars + size > limit:
            raise SessionTooLarge(
                f"Session {s.id} holds {s.held_chars} characters of conversation; a step of "
                f"{size} more would pass the server's per-session limit of {limit} (reset the "
                "session, or close it)"
            )

    def _take_global_token(self) -> None:
        try:
            self.limiter.take_global()
        except RateLimited:
            self.metrics.count_rate_limited("server")
            raise

    async def step(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        action, size = self._check_action(doc)
        self._take_global_token()

        def fn(s: Session) -> Doc:
            try:
                self._check_held(s, size)
                self.limiter.take_session(s.id)
            except (RateLimited, SessionTooLarge) as exc:
                self.limiter.give_back_global()
                if isinstance(exc, RateLimited):
                    self.metrics.count_rate_limited("session")
                raise
            start = time.perf_counter()
            obs, reward, terminated, truncated, info = s.env.step(action)
            seconds = time.perf_counter() - start
            s.steps += 1
            held = conversation_chars(info)
            s.held_chars = s.held_chars + size + wire.action_size(obs) if held is None else held
            reward = wire.finite(float(reward))
            ended = bool(terminated or truncated)
            self.metrics.observe_step(s.env_id, seconds, reward, ended, info)
            return {
                "observation": obs,
                "reward": reward,
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": info,
            }

        try:
            return await self.run(lambda: self._on_session(owner, doc, trace, fn))
        except ServeError as exc:
            if not isinstance(exc, (RateLimited, SessionTooLarge)):  # an unknown session
                self.limiter.give_back_global()
            raise

    async def step_batch(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        """Steps of several sessions at once; each reply or error in its place."""
        steps = wire.field_of(doc, "steps", (list,))
        if steps is None:
            raise wire.BadRequest("Expects 'steps': a list of {'session_id', 'action'}")
        if len(steps) > self.pool.max_sessions:
            raise wire.BadRequest(
                f"A batch names at most {self.pool.max_sessions} sessions (one step each)"
            )
        seen: set[str] = set()
        for item in steps:
            if not isinstance(item, dict):
                raise wire.BadRequest("Expects each item of 'steps' as {'session_id', 'action'}")
            sid = _session_id(item)
            if sid in seen:
                raise wire.BadRequest(
                    f"Session {sid!r} is named twice in one batch; its steps must be ordered: "
                    "send the second in a later batch"
                )
            seen.add(sid)

        async def one(item: Doc) -> Doc:
            try:
                return await self.step(owner, item, Trace())
            except Exception as exc:
                status, err = wire.failure(exc)
                return {**err, "status": status}

        return {"results": list(await asyncio.gather(*(one(item) for item in steps)))}

    async def get_state(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        return await self.run(
            lambda: self._on_session(owner, doc, trace, lambda s: {"state": _llm(s).get_state()})
        )

    async def set_state(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        state = wire.field_of(doc, "state", (dict,))
        if state is None:
            raise wire.BadRequest("Expects 'state' (a snapshot from get_state)")

        def fn(s: Session) -> Doc:
            _llm(s).set_state(wire.revive_bytes(state))
            s.held_chars = wire.action_size(state)  # until the next step counts its messages
            return {}

        return await self.run(lambda: self._on_session(owner, doc, trace, fn))

    async def oracle(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        def fn(s: Session) -> Doc:
            base = _llm(s)
            episode = base.episode
            if episode is None:
                raise error.ResetNeeded("Call reset before asking for the oracle")
            try:
                action = None if episode.done else base.oracle_action()
            except error.ResetNeeded:
                action = None
            return {
                "action": action,
                "secrets": base.secrets(episode.task),
                "task_reward_range": list(base.task_reward_range(episode.task)),
            }

        return await self.run(lambda: self._on_session(owner, doc, trace, fn))

    async def render(self, owner: str, doc: Doc, trace: Trace) -> Doc:
        return await self.run(
            lambda: self._on_session(owner, doc, trace, lambda s: {"render": s.env.render()})
        )

    async def close(self, owner: str, doc: Doc, trace: Trace, owned: Owned | None = None) -> Doc:
        sid = _session_id(doc)
        trace.session_id = sid

        def work() -> Doc:
            session = self.pool.get(sid, owner)
            trace.env_id = session.env_id
            self.pool.close(sid, owner)
            return {"closed": True}

        reply = await self.run(work)
        self.limiter.forget(sid)
        if owned is not None:
            owned.discard(sid)
        return reply

    async def close_owned(self, owner: str, owned: Owned) -> None:
        """Close the sessions of a connection that closed (each after its call in flight)."""

        def close(sid: str) -> None:
            try:
                self.pool.close(sid, owner)
            except ServeError:
                pass  # expired or closed meanwhile
            self.limiter.forget(sid)

        await asyncio.gather(*(self.run(partial(close, sid)) for sid in owned.close()))
