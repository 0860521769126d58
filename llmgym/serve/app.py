"""The HTTP application of ``llmgym serve``: sessions over JSON, plus OpenEnv's routes.

Routes (every body and reply a JSON object; errors ``{"error": {"type", "message"}}``):

- ``GET /health``, ``GET /metadata`` (env ids, families, spaces, reward ranges, version)
- ``POST /v1/sessions`` ``{"env_id", "kwargs"}`` -> ``{"session_id", "env_id", "spaces"...}``
- ``POST /v1/sessions/{id}/reset`` ``{"seed", "options"}`` -> ``{"observation", "info"}``
- ``POST /v1/sessions/{id}/step`` ``{"action"}`` (text or an OpenAI-style message) ->
  ``{"observation", "reward", "terminated", "truncated", "info"}``
- ``GET``/``PUT /v1/sessions/{id}/state`` (``get_state``/``set_state`` snapshots, for search),
  ``GET /v1/sessions/{id}/oracle`` (the gold action and the secrets: contract checks),
  ``GET /v1/sessions/{id}/render``, ``DELETE /v1/sessions/{id}``
- ``/openenv/<env id>/...``: OpenEnv's own server (``openenv-core``) around each env, so that
  OpenEnv's client connects unchanged (its WebSocket ``/ws`` holds one session per connection).

Security: with ``tokens`` set, every request (WebSocket included) needs
``Authorization: Bearer <token>``; a session answers only to the token that created it.
Bodies over ``max_body_bytes`` and actions over ``max_action_chars`` are refused (413).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from llmgym import error
from llmgym.core import LLMEnv
from llmgym.serve import wire
from llmgym.serve.sessions import ServeError, Session, SessionPool, owner_of

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class ServeConfig:
    """What one server serves and its limits."""

    env_ids: list[str] = field(default_factory=list)
    """The env ids clients may create (empty: every registered ``llm/`` env)."""
    tokens: list[str] = field(default_factory=list)
    """Client tokens; empty means no authentication (allowed on loopback only, by the CLI)."""
    max_sessions: int = 256
    """Live sessions at once, all clients together."""
    idle_timeout_s: float | None = 600.0
    """A session untouched this long is closed, and its env with it (None: never)."""
    max_body_bytes: int = 8 << 20
    """Largest request body."""
    max_action_chars: int = 1 << 20
    """Largest action (text, or the JSON of a message dict)."""
    openenv: bool = False
    """Also mount OpenEnv's server for each env at ``/openenv/<env id>`` (needs openenv-core)."""

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise error.Error(f"Expects max_sessions >= 1, actual: {self.max_sessions}")
        if self.max_body_bytes < 1024 or self.max_action_chars < 1:
            raise error.Error("Expects max_body_bytes >= 1024 and max_action_chars >= 1")


def served_env_ids(requested: Iterable[str]) -> list[str]:
    """The requested env ids checked against the registry (all ``llm/`` envs when empty)."""
    import llmgym

    registered = llmgym.list_envs()
    ids = list(requested) or registered
    for env_id in ids:
        if env_id not in gym.registry:
            close = difflib.get_close_matches(env_id, registered, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise error.UnknownEnv(f"No registered env {env_id!r}{hint}")
    return ids


def _make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def _spaces(env: gym.Env[Any, Any]) -> dict[str, Any]:
    def space(s: Any) -> dict[str, Any]:
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


# --- security: a pure ASGI layer, so that it guards WebSockets and mounted apps too ----------


def guard(app: ASGIApp, config: ServeConfig) -> ASGIApp:
    """Check the bearer token and cap the body size before ``app`` sees a request."""
    tokens = [t.encode() for t in config.tokens]

    def token_of(scope: Scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return value[7:].decode("latin-1").strip()
        return None

    async def reply(send: Send, status: int, exc: ServeError) -> None:
        body = wire.dumps(wire.error_doc(exc))
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        token = token_of(scope)
        if tokens and not (token and any(hmac.compare_digest(token.encode(), t) for t in tokens)):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
                return
            if scope.get("path") != "/health":
                await reply(
                    send,
                    401,
                    wire.Unauthorized(
                        "This server needs a token: send 'Authorization: Bearer <token>'"
                    ),
                )
                return
        scope.setdefault("state", {})["llmgym_owner"] = owner_of(token if tokens else None)
        if scope["type"] == "http":
            for name, value in scope.get("headers", []):
                if (
                    name == b"content-length"
                    and value.isdigit()
                    and int(value) > config.max_body_bytes
                ):
                    await reply(send, 413, _too_large(config))
                    return
            received = 0

            async def counted() -> Message:
                nonlocal received
                message = await receive()
                received += len(message.get("body", b""))
                if received > config.max_body_bytes:
                    raise _too_large(config)
                return message

            try:
                await app(scope, counted, send)
            except wire.PayloadTooLarge as exc:
                await reply(send, 413, exc)
            return
        await app(scope, receive, send)

    return guarded


def _too_large(config: ServeConfig) -> wire.PayloadTooLarge:
    return wire.PayloadTooLarge(
        f"The request body is over the server's limit of {config.max_body_bytes} bytes"
    )


# --- the application ----------------------------------------------------------------------


def create_app(config: ServeConfig | None = None) -> GuardedApp:
    """The ASGI application serving ``config.env_ids`` (FastAPI inside, guarded by tokens)."""
    import llmgym

    config = config or ServeConfig()
    env_ids = served_env_ids(config.env_ids)
    pool = SessionPool(
        _make_env, max_sessions=config.max_sessions, idle_timeout_s=config.idle_timeout_s
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap(pool)) if config.idle_timeout_s else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
            await run_in_threadpool(pool.close_all)

    app = FastAPI(title="llmgym serve", version=llmgym.__version__, lifespan=lifespan)
    app.state.pool = pool
    app.state.config = config
    metadata_cache: dict[str, Any] = {}

    def ok(doc: Any, status: int = 200) -> Response:
        return Response(wire.dumps(doc), status_code=status, media_type="application/json")

    async def handle(work: Callable[[], Any], status: int = 200) -> Response:
        try:
            return ok(await run_in_threadpool(work), status)
        except wire.PayloadTooLarge:
            raise
        except Exception as exc:
            code = wire.status_of(exc)
            if code == 500:
                exc = error.Error(f"{type(exc).__name__}: {exc}")
            return ok(wire.error_doc(exc), code)

    @app.exception_handler(ServeError)
    async def refused(_request: Request, exc: ServeError) -> Response:
        return ok(wire.error_doc(exc), exc.status)

    def owner(request: Request) -> str:
        return str(request.scope.get("state", {}).get("llmgym_owner", "anonymous"))

    async def body(request: Request, what: str) -> dict[str, Any]:
        return wire.loads_object(await request.body(), what)

    @app.get("/health")
    async def health() -> Response:
        return ok({"status": "healthy", "sessions": len(pool)})

    @app.get("/metadata")
    async def metadata() -> Response:
        def build() -> dict[str, Any]:
            if not metadata_cache:
                envs = {}
                for env_id in env_ids:
                    env = _make_env(env_id, {})
                    try:
                        envs[env_id] = {
                            **_spaces(env),
                            "families": llmgym.list_families(env_id),
                        }
                    finally:
                        env.close()
                metadata_cache.update(
                    name="llmgym",
                    version=llmgym.__version__,
                    env_ids=env_ids,
                    envs=envs,
                    openenv=[f"/openenv/{e}" for e in env_ids] if config.openenv else [],
                    limits={
                        "max_sessions": config.max_sessions,
                        "idle_timeout_s": config.idle_timeout_s,
                        "max_body_bytes": config.max_body_bytes,
                        "max_action_chars": config.max_action_chars,
                    },
                )
            return metadata_cache

        return await handle(build)

    @app.post("/v1/sessions")
    async def create(request: Request) -> Response:
        doc = await body(request, "POST /v1/sessions")

        def work() -> dict[str, Any]:
            env_id = wire.field_of(doc, "env_id", (str,))
            if env_id is None:
                raise wire.BadRequest("Expects 'env_id' in the body of POST /v1/sessions")
            if env_id not in env_ids:
                close = difflib.get_close_matches(env_id, env_ids, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise error.UnknownEnv(
                    f"This server does not serve {env_id!r}{hint} (it serves: {', '.join(env_ids)})"
                )
            kwargs = wire.field_of(doc, "kwargs", (dict,), {})
            session = pool.create(env_id, kwargs, owner(request))
            return {"session_id": session.id, "env_id": env_id, **_spaces(session.env)}

        return await handle(work, 201)

    def on_session(request: Request, fn: Callable[[Session], Any]) -> Callable[[], Any]:
        sid = request.path_params["sid"]
        return lambda: pool.call(sid, owner(request), fn)

    @app.post("/v1/sessions/{sid}/reset")
    async def reset(request: Request) -> Response:
        doc = await body(request, "reset")
        seed = wire.field_of(doc, "seed", (int,))
        options = wire.field_of(doc, "options", (dict,))

        def fn(s: Session) -> dict[str, Any]:
            obs, info = s.env.reset(seed=seed, options=options)
            return {"observation": obs, "info": info}

        return await handle(on_session(request, fn))

    @app.post("/v1/sessions/{sid}/step")
    async def step(request: Request) -> Response:
        doc = await body(request, "step")
        if "action" not in doc:
            return ok(wire.error_doc(wire.BadRequest("Expects 'action' in the body of step")), 400)
        action = doc["action"]
        if wire.action_size(action) > config.max_action_chars:
            exc = wire.PayloadTooLarge(
                f"The action is over the server's limit of {config.max_action_chars} characters"
            )
            return ok(wire.error_doc(exc), 413)

        def fn(s: Session) -> dict[str, Any]:
            obs, reward, terminated, truncated, info = s.env.step(action)
            s.steps += 1
            return {
                "observation": obs,
                "reward": wire.finite(float(reward)),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": info,
            }

        return await handle(on_session(request, fn))

    @app.get("/v1/sessions/{sid}/state")
    async def get_state(request: Request) -> Response:
        return await handle(on_session(request, lambda s: {"state": _llm(s).get_state()}))

    @app.put("/v1/sessions/{sid}/state")
    async def set_state(request: Request) -> Response:
        doc = await body(request, "set_state")
        state = wire.field_of(doc, "state", (dict,))
        if state is None:
            return ok(wire.error_doc(wire.BadRequest("Expects 'state' in the body")), 400)

        def fn(s: Session) -> dict[str, Any]:
            _llm(s).set_state(wire.revive_bytes(state))
            return {}

        return await handle(on_session(request, fn))

    @app.get("/v1/sessions/{sid}/oracle")
    async def oracle(request: Request) -> Response:
        def fn(s: Session) -> dict[str, Any]:
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

        return await handle(on_session(request, fn))

    @app.get("/v1/sessions/{sid}/render")
    async def render(request: Request) -> Response:
        return await handle(on_session(request, lambda s: {"render": s.env.render()}))

    @app.delete("/v1/sessions/{sid}")
    async def close(request: Request) -> Response:
        sid = request.path_params["sid"]

        def work() -> dict[str, Any]:
            pool.close(sid, owner(request))
            return {"closed": True}

        return await handle(work)

    if config.openenv:
        from llmgym.serve.openenv_bridge import mount_openenv

        mount_openenv(app, env_ids, max_sessions=config.max_sessions)

    return GuardedApp(guard(app, config), app)


class GuardedApp:
    """The served ASGI app: the token and size guard in front of the FastAPI app (``.fastapi``)."""

    def __init__(self, guarded: ASGIApp, fastapi: FastAPI):
        self._guarded = guarded
        self.fastapi = fastapi

    @property
    def pool(self) -> SessionPool:
        pool: SessionPool = self.fastapi.state.pool
        return pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._guarded(scope, receive, send)


async def _reap(pool: SessionPool) -> None:
    assert pool.idle_timeout_s is not None
    period = max(0.05, min(pool.idle_timeout_s / 4, 5.0))
    while True:
        await asyncio.sleep(period)
        await run_in_threadpool(pool.expire_idle)
