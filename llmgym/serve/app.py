"""The application of ``llmgym serve``: sessions over HTTP and WebSocket, plus OpenEnv's routes.

Routes (every body and reply a JSON object; errors ``{"error": {"type", "message"}}``):

- ``GET /health``, ``GET /metadata`` (env ids, families, spaces, reward ranges, version, limits)
- ``POST /v1/sessions`` ``{"env_id", "kwargs"}`` -> ``{"session_id", "env_id", "spaces"...}``
- ``POST /v1/sessions/{id}/reset`` ``{"seed", "options"}`` -> ``{"observation", "info"}``
- ``POST /v1/sessions/{id}/step`` ``{"action"}`` (text or an OpenAI-style message) ->
  ``{"observation", "reward", "terminated", "truncated", "info"}``
- ``POST /v1/step_batch`` ``{"steps": [{"session_id", "action"}...]}`` -> ``{"results": [...]}``
  (each a step reply or ``{"error", "status"}``, in order; a session named twice: 400)
- ``GET``/``PUT /v1/sessions/{id}/state`` (``get_state``/``set_state`` snapshots, for search),
  ``GET /v1/sessions/{id}/oracle`` (the gold action and the secrets: contract checks),
  ``GET /v1/sessions/{id}/render``, ``DELETE /v1/sessions/{id}``
- ``GET /v1/ws``: the same ops over one WebSocket, many in flight (:mod:`llmgym.serve.ws`)
- ``GET /metrics``: Prometheus text (:mod:`llmgym.serve.metrics`)
- ``/openenv/<env id>/...``: OpenEnv's own server (``openenv-core``) around each env, so that
  OpenEnv's client connects unchanged (its WebSocket ``/ws`` holds one session per connection).

Security: with ``tokens`` set, every request but ``/health`` (WebSockets included) needs
``Authorization: Bearer <token>``; a session answers only to the token that created it. Without
tokens (loopback only), a request a browser sends from another site (an ``Origin`` header that
is neither allowed nor this loopback server itself) is refused, so that a web page cannot drive
the envs. Bodies over ``max_body_bytes``, actions over ``max_action_chars`` and steps that
would take a session's conversation past ``max_session_chars`` are refused (413); env kwargs,
memory and steps/s are limited by :mod:`llmgym.serve.envargs` and
:mod:`llmgym.serve.limits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from llmgym import error
from llmgym.serve import wire
from llmgym.serve.limits import retry_after_header
from llmgym.serve.logs import TRACE_KEY, ASGIApp, Message, Receive, Scope, Send, Trace, observe
from llmgym.serve.metrics import CONTENT_TYPE, ServeMetrics
from llmgym.serve.ops import Doc, Service, spaces_of
from llmgym.serve.sessions import ServeError, SessionPool, owner_of
from llmgym.serve.ws import serve_websocket

log = logging.getLogger(__name__)


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
    """Largest request body, and largest WebSocket frame."""
    max_action_chars: int = 1 << 20
    """Largest action (text, or the JSON of a message dict)."""
    max_session_chars: int | None = 8 << 20
    """Characters of conversation one session may hold (its episode's messages, observations
    included): a step that would go past it is refused (413) until the session resets; with
    ``max_sessions`` it bounds what clients can make the server hold (None: no limit)."""
    openenv: bool = False
    """Also mount OpenEnv's server for each env at ``/openenv/<env id>`` (needs openenv-core)."""
    workers: int = 32
    """Threads that run env calls (create, reset, step...): how many env calls run at once;
    more wait their turn (the event loop itself never runs an env)."""
    max_steps_per_s: float | None = None
    """Steps per second, all sessions together (None: no limit); over it, 429 + Retry-After."""
    session_steps_per_s: float | None = None
    """Steps per second of each session (None: no limit); over it, 429 + Retry-After."""
    max_rss_mb: float | None = None
    """Refuse new sessions (503) while the server's resident memory is over this (None: never)."""
    allow_kwargs: dict[str, list[str]] = field(default_factory=dict)
    """Env kwargs allowed per env id (``"*"``: every env) on top of the safe default (what the
    constructor takes, less :data:`llmgym.serve.envargs.HOST_KWARGS`)."""
    allowed_origins: list[str] = field(default_factory=list)
    """Browser origins (``https://host:port``) allowed to call a server without tokens."""
    max_connections: int = 1024
    """Open connections at once (HTTP and WebSocket; uvicorn answers 503 past it)."""
    request_timeout_s: float = 30.0
    """A request's headers and body must arrive within this (slow clients are cut off)."""
    max_ws_inflight: int = 256
    """Requests of one WebSocket running at once; past it the server stops reading from it."""
    close_timeout_s: float = 10.0
    """Closing a session (and stopping the server) waits this long at most for an env call in
    flight; past it the env is closed when the call returns, and shutdown does not wait."""
    kwarg_max: dict[str, dict[str, float]] = field(default_factory=dict)
    """Upper bounds on numeric env kwargs per env id (``"*"``: every env), over the defaults
    of :data:`llmgym.serve.envargs.KWARG_MAX` (``--kwarg-max ENV_ID:NAME=VALUE``)."""

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise error.Error(f"Expects max_sessions >= 1, actual: {self.max_sessions}")
        if self.max_body_bytes < 1024 or self.max_action_chars < 1:
            raise error.Error("Expects max_body_bytes >= 1024 and max_action_chars >= 1")
        if self.max_session_chars is not None and self.max_session_chars < 1:
            raise error.Error(
                f"Expects max_session_chars >= 1 or None, actual: {self.max_session_chars}"
            )
        for name in ("workers", "max_connections", "max_ws_inflight"):
            if getattr(self, name) < 1:
                raise error.Error(f"Expects {name} >= 1, actual: {getattr(self, name)}")
        for name in ("max_steps_per_s", "session_steps_per_s", "max_rss_mb"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise error.Error(f"Expects {name} > 0 or None (no limit), actual: {value}")
        for name in ("request_timeout_s", "close_timeout_s"):
            if getattr(self, name) <= 0:
                raise error.Error(f"Expects {name} > 0, actual: {getattr(self, name)}")


def served_env_ids(requested: Iterable[str]) -> list[str]:
    """The requested env ids checked against the registry (all ``llm/`` envs when empty)."""
    import llmgym

    registered = llmgym.list_envs()
    ids = list(requested) or registered
    for env_id in ids:
        if env_id not in gym.registry:
            hint = error.did_you_mean(env_id, registered)
            raise error.UnknownEnv(f"No registered env {env_id!r}{hint}")
    return ids


def served_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    """How a session's env is built (the client's kwargs already checked), wherever it lives."""
    return gym.make(env_id, disable_env_checker=True, **kwargs)


# --- security: a pure ASGI layer, so that it guards WebSockets and mounted apps too ----------


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _token_of(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin_allowed(origin: str | None, host: str | None, allowed: list[str]) -> bool:
    """Whether a request from ``origin`` may reach a server without tokens.

    Programs send no ``Origin``; browsers always do. A page of this very loopback server (its
    ``Host`` a loopback address, which a DNS-rebinding page cannot claim) may; others only if
    the operator allowed them.
    """
    if origin is None or origin in allowed:
        return True
    parts = urlsplit(origin)
    return (
        parts.netloc == (host or "") and parts.hostname is not None and is_loopback(parts.hostname)
    )


async def _reply(send: Send, status: int, exc: ServeError) -> None:
    body = wire.dumps(wire.error_doc(exc))
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def guard(app: ASGIApp, config: ServeConfig) -> ASGIApp:
    """Check the token (or the origin) and cap the body size before ``app`` sees a request."""
    tokens = [t.encode() for t in config.tokens]

    async def refuse(scope: Scope, send: Send, status: int, exc: ServeError) -> None:
        if scope["type"] == "websocket":  # before accept: uvicorn answers the handshake 403
            await send({"type": "websocket.close", "code": 1008, "reason": str(exc)[:120]})
        else:
            await _reply(send, status, exc)

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        token = _token_of(scope)
        authorized = token and any(hmac.compare_digest(token.encode(), t) for t in tokens)
        if tokens and not authorized and scope.get("path") != "/health":
            message = "This server needs a token: send 'Authorization: Bearer <token>'"
            await refuse(scope, send, 401, wire.Unauthorized(message))
            return
        origin = _header(scope, b"origin")
        if not tokens and not origin_allowed(
            origin, _header(scope, b"host"), config.allowed_origins
        ):
            exc = wire.Forbidden(
                f"Requests from the web page {origin!r} are refused (this server has no token); "
                "start it with --allow-origin ORIGIN to allow that page"
            )
            await refuse(scope, send, 403, exc)
            return
        scope.setdefault("state", {})["llmgym_owner"] = owner_of(token if tokens else None)
        if scope["type"] == "http":
            await _capped(app, config, scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


async def _capped(
    app: ASGIApp, config: ServeConfig, scope: Scope, receive: Receive, send: Send
) -> None:
    """Run ``app`` on a request whose body may not pass ``max_body_bytes``."""
    length = _header(scope, b"content-length")
    if length is not None and length.isdigit() and int(length) > config.max_body_bytes:
        await _reply(send, 413, _too_large(config))
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
        await _reply(send, 413, exc)


def _too_large(config: ServeConfig) -> wire.PayloadTooLarge:
    return wire.PayloadTooLarge(
        f"The request body is over the server's limit of {config.max_body_bytes} bytes"
    )


# --- the application ----------------------------------------------------------------------


def create_app(config: ServeConfig | None = None, *, pool: SessionPool | None = None) -> GuardedApp:
    """The ASGI application serving ``config.env_ids`` (FastAPI inside, guarded by tokens).

    ``pool``: the session pool to use (a subclass that places envs elsewhere, as
    ``llmgym.ray`` does); by default one of ``config.max_sessions`` sessions, each idle
    ``config.idle_timeout_s`` at most, whose envs are ``gym.make(env_id, **kwargs)``.
    """
    import llmgym

    config = config or ServeConfig()
    env_ids = served_env_ids(config.env_ids)
    if pool is None:
        pool = SessionPool(
            served_env,
            max_sessions=config.max_sessions,
            idle_timeout_s=config.idle_timeout_s,
            close_timeout_s=config.close_timeout_s,
        )
    metrics = ServeMetrics(pool)
    service = Service(config, env_ids, pool, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap(service)) if pool.idle_timeout_s else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
            await asyncio.to_thread(service.shutdown)

    app = FastAPI(title="llmgym serve", version=llmgym.__version__, lifespan=lifespan)
    app.state.service = service
    metadata_cache: dict[str, Any] = {}

    def ok(doc: Any, status: int = 200) -> Response:
        return Response(wire.dumps(doc), status_code=status, media_type="application/json")

    def failed(exc: Exception) -> Response:
        status, doc = wire.failure(exc)
        response = ok(doc, status)
        retry_after = getattr(exc, "retry_after_s", None)
        if isinstance(retry_after, float):
            response.headers["Retry-After"] = retry_after_header(retry_after)
        return response

    @app.exception_handler(ServeError)
    async def refused(_request: Request, exc: ServeError) -> Response:
        return failed(exc)

    def owner(request: Request) -> str:
        return str(request.scope.get("state", {}).get("llmgym_owner", "anonymous"))

    def trace_of(request: Request) -> Trace:
        trace = request.scope.get("state", {}).get(TRACE_KEY)
        return trace if isinstance(trace, Trace) else Trace()

    async def body(request: Request, what: str) -> Doc:
        try:
            raw = await request.body()
        except ClientDisconnect:
            raise wire.BadRequest("The client went away before its body arrived") from None
        return wire.loads_object(raw, what)

    async def answer(
        request: Request,
        op: Callable[[str, Doc, Trace], Awaitable[Doc]],
        doc: Doc,
        status: int = 200,
    ) -> Response:
        if "sid" in request.path_params:
            doc = {**doc, "session_id": request.path_params["sid"]}
        try:
            return ok(await op(owner(request), doc, trace_of(request)), status)
        except wire.PayloadTooLarge:
            raise
        except Exception as exc:
            return failed(exc)

    @app.get("/health")
    async def health() -> Response:
        # off the event loop: a pool of remote hosts (Ray) may take a moment to count
        return ok({"status": "healthy", "sessions": await run_in_threadpool(len, pool)})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE)

    @app.get("/metadata")
    async def metadata() -> Response:
        def build() -> Doc:
            if not metadata_cache:
                metadata_cache.update(_metadata(config, env_ids))
            return metadata_cache

        try:
            return ok(await service.run(build))
        except Exception as exc:
            return failed(exc)

    @app.post("/v1/sessions")
    async def create(request: Request) -> Response:
        made: list[str] = []

        async def create_noted(who: str, doc: Doc, trace: Trace) -> Doc:
            reply = await service.create(who, doc, trace)
            made.append(reply["session_id"])
            return reply

        response = await answer(request, create_noted, await body(request, "create"), 201)
        if made and await request.is_disconnected():
            # nobody will ever learn this session's id: close it now, not at the idle timeout
            await service.run(lambda: pool.close(made[0], owner(request)))
        return response

    @app.post("/v1/sessions/{sid}/reset")
    async def reset(request: Request) -> Response:
        return await answer(request, service.reset, await body(request, "reset"))

    @app.post("/v1/sessions/{sid}/step")
    async def step(request: Request) -> Response:
        return await answer(request, service.step, await body(request, "step"))

    @app.post("/v1/step_batch")
    async def step_batch(request: Request) -> Response:
        return await answer(request, service.step_batch, await body(request, "step_batch"))

    @app.get("/v1/sessions/{sid}/state")
    async def get_state(request: Request) -> Response:
        return await answer(request, service.get_state, {})

    @app.put("/v1/sessions/{sid}/state")
    async def set_state(request: Request) -> Response:
        return await answer(request, service.set_state, await body(request, "set_state"))

    @app.get("/v1/sessions/{sid}/oracle")
    async def oracle(request: Request) -> Response:
        return await answer(request, service.oracle, {})

    @app.get("/v1/sessions/{sid}/render")
    async def render(request: Request) -> Response:
        return await answer(request, service.render, {})

    @app.delete("/v1/sessions/{sid}")
    async def close(request: Request) -> Response:
        return await answer(request, service.close, {})

    @app.websocket("/v1/ws")
    async def ws(websocket: WebSocket) -> None:
        await serve_websocket(websocket, service, str(websocket.scope["state"]["llmgym_owner"]))

    if config.openenv:
        from llmgym.serve.openenv_bridge import mount_openenv

        mount_openenv(app, env_ids, max_sessions=config.max_sessions)

    return GuardedApp(observe(guard(app, config), metrics), app)


def _metadata(config: ServeConfig, env_ids: list[str]) -> Doc:
    import llmgym

    envs = {}
    for env_id in env_ids:
        env = served_env(env_id, {})
        try:
            envs[env_id] = {**spaces_of(env), "families": llmgym.list_families(env_id)}
        finally:
            env.close()
    return {
        "name": "llmgym",
        "version": llmgym.__version__,
        "env_ids": env_ids,
        "envs": envs,
        "openenv": [f"/openenv/{e}" for e in env_ids] if config.openenv else [],
        "limits": {
            "max_sessions": config.max_sessions,
            "idle_timeout_s": config.idle_timeout_s,
            "max_body_bytes": config.max_body_bytes,
            "max_action_chars": config.max_action_chars,
            "max_session_chars": config.max_session_chars,
            "max_steps_per_s": config.max_steps_per_s,
            "session_steps_per_s": config.session_steps_per_s,
            "max_ws_inflight": config.max_ws_inflight,
        },
    }


class GuardedApp:
    """The served ASGI app: access records and the token and size guard in front of FastAPI."""

    def __init__(self, wrapped: ASGIApp, fastapi: FastAPI):
        self._wrapped = wrapped
        self.fastapi = fastapi

    @property
    def service(self) -> Service:
        service: Service = self.fastapi.state.service
        return service

    @property
    def pool(self) -> SessionPool:
        return self.service.pool

    @property
    def metrics(self) -> ServeMetrics:
        return self.service.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._wrapped(scope, receive, send)


async def _reap(service: Service) -> None:
    timeout = service.pool.idle_timeout_s
    assert timeout is not None
    period = max(0.05, min(timeout / 4, 5.0))
    while True:
        await asyncio.sleep(period)
        try:
            await service.run(service.pool.expire_idle)
        except Exception:  # one bad pass must not end expiry for the server's lifetime
            log.exception("expiring idle sessions failed; trying again in %.1f s", period)
