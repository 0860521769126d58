"""The asyncio client of ``llmgym serve``: thousands of episodes in flight from one event loop.

>>> async with AsyncClient("http://127.0.0.1:8000", max_in_flight=128) as client:  # doctest: +SKIP
...     env = await client.make("llm/Math-v0")
...     obs, info = await env.reset(seed=0)
...     obs, reward, terminated, truncated, info = await env.step("The answer is 4.")

What it promises, for every call:

- Connection reuse: HTTP/1.1 on one ``httpx.AsyncClient`` (its pool holds ``max_connections``
  kept-alive connections), or ``transport="ws"``: the WebSocket protocol of ``llmgym serve``
  (``/v1/ws``) on up to ``max_connections`` connections, sessions spread over them, many
  requests in flight on each.
- A timeout: each attempt ends within ``timeout_s`` or raises :class:`ReplyLost` saying so.
- Retries, with exponential backoff, only where sending again cannot run a call twice: any call
  that never reached the server (:class:`ServerUnreachable`) or that the server refused with
  429/503 and ``Retry-After`` (:class:`ServerBusy`: the wait it asks for is honoured); a call
  whose reply was lost only when it is idempotent (get_state, set_state, close). Create, reset,
  step and step_batch are never sent twice once they may have reached the server (a create
  whose reply was lost leaves a session that the server's idle timeout closes).
- Back-pressure: at most ``max_in_flight`` requests in flight (over HTTP/1.1 also at most one
  per connection); further callers wait their turn, nothing is dropped.
- Errors: the same ``llmgym.error`` classes as :class:`llmgym.remote.RemoteEnv`.
- ``aclose()`` (or leaving ``async with``) closes every session this client opened.

Not here: a ``gymnasium.Env`` (its API is synchronous: that is :mod:`llmgym.remote.sync`).
Needs ``httpx`` (and ``websockets`` for ``transport="ws"``): ``pip install 'llmgym[serve]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from llmgym import error
from llmgym.remote.protocol import (
    IDEMPOTENT_OPS,
    RemoteError,
    ReplyLost,
    ServerBusy,
    ServerUnreachable,
    SessionInfo,
    StepResult,
    batch_results,
    check_url,
    dependency,
    error_retry_after_s,
    http_request,
    parse_body,
    reset_fields,
    reset_result,
    retry_after_s,
    state_result,
    step_result,
    token_or_env,
)

T = TypeVar("T")

MAX_WAIT_S = 60.0
"""The longest single wait before a retry, whatever a ``Retry-After`` asks for."""


POOL_SIZE = 4
"""Connections per ``httpx.AsyncClient``: its pool spends time on every connection at each
request (a few connections per pool keep that cost flat), so ``max_connections`` are spread
over several clients, each session pinned to one."""


class HttpTransport:
    """The HTTP/1.1 routes of ``llmgym serve`` on pooled ``httpx.AsyncClient``s."""

    sessions_on_links = False

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        max_connections: int,
        timeout_s: float,
        max_reply_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
    ):
        httpx = dependency("httpx")
        self.httpx = httpx
        self.url = url
        self.max_reply_bytes = max_reply_bytes
        sizes = [POOL_SIZE] * (max_connections // POOL_SIZE)
        sizes += [max_connections % POOL_SIZE] if max_connections % POOL_SIZE else []
        self.pools = [
            httpx.AsyncClient(
                base_url=url,
                headers=headers,
                verify=ssl_context if ssl_context is not None else True,
                limits=httpx.Limits(
                    max_connections=size,
                    max_keepalive_connections=size,
                    # below uvicorn's 5 s keep-alive: a kept connection is not closed under a call
                    keepalive_expiry=2.0,
                ),
                timeout=httpx.Timeout(None, connect=timeout_s),  # the client bounds each attempt
                trust_env=False,  # like the sync client: no proxy from the environment
            )
            for size in sizes
        ]
        self._turn = itertools.count()

    async def open_link(self) -> Any:
        """The pool a new session will use (round-robin)."""
        return self.pools[next(self._turn) % len(self.pools)]

    async def send(self, op: str, fields: Mapping[str, Any], link: Any) -> dict[str, Any]:
        httpx = self.httpx
        client = link if link is not None else self.pools[0]
        method, path, body = http_request(op, fields)
        what = f"{method} {path}"
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"} if content is not None else None
        request = client.build_request(method, path, content=content, headers=headers)
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise ServerUnreachable(
                f"{what} at {self.url}: cannot reach the server: {exc!r}"
            ) from exc
        except httpx.TransportError as exc:
            raise ReplyLost(
                f"{what} at {self.url} failed: {exc!r}; the call may have run on the server"
            ) from exc
        try:
            data = await self._read(response, what)
        finally:
            await response.aclose()
        status = response.status_code
        if status in (429, 503):
            wait = retry_after_s(response.headers.get("retry-after"))
            if wait is not None or status == 429:
                with contextlib.suppress(ValueError):  # the body's wait is the more precise
                    precise = error_retry_after_s(json.loads(data))
                    wait = wait if precise is None else precise
                raise ServerBusy(f"{what}: the server is busy (HTTP {status})", status, wait)
        return parse_body(status, data, what)

    async def _read(self, response: Any, what: str) -> bytes:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_reply_bytes:
            raise RemoteError(f"{what}: a reply of {length} bytes, over {self.max_reply_bytes}")
        chunks, size = [], 0
        try:
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise RemoteError(f"{what}: a reply over {self.max_reply_bytes} bytes")
                chunks.append(chunk)
        except self.httpx.TransportError as exc:
            raise ReplyLost(
                f"{what} at {self.url}: the reply broke off ({exc!r}); the call may have run "
                "on the server"
            ) from exc
        return b"".join(chunks)

    async def close(self) -> None:
        await asyncio.gather(*(pool.aclose() for pool in self.pools))


class AsyncRemoteEnv:
    """A session of an env on the server, driven by coroutines of the same names and results
    as :class:`llmgym.remote.RemoteEnv`'s methods. Made by :meth:`AsyncClient.make`."""

    def __init__(
        self,
        client: AsyncClient,
        env_id: str,
        kwargs: dict[str, Any],
        info: SessionInfo,
        link: Any,
    ):
        self.client = client
        self.env_id = env_id
        self.kwargs = kwargs
        self.session_id = info.session_id
        self.observation_space = info.observation_space
        self.action_space = info.action_space
        self.reward_range = info.reward_range
        self.outcome_reward_range = info.outcome_reward_range
        self.metadata = {"render_modes": info.render_modes, "render_fps": 1}
        self.render_mode = info.render_mode
        self.domain = info.domain
        self.link = link
        """Where the session's calls go: its WebSocket connection, or its HTTP pool."""
        self.closed = False

    def __repr__(self) -> str:
        return f"<AsyncRemoteEnv {self.env_id} at {self.client.url} session {self.session_id[:8]}>"

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        return reset_result(await self._call("reset", reset_fields(seed, options)))

    async def step(self, action: Any) -> StepResult:
        return step_result(await self._call("step", {"action": action}))

    async def get_state(self) -> dict[str, Any]:
        return state_result(await self._call("get_state"))

    async def set_state(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise error.InvalidState("Expects a snapshot returned by get_state()")
        await self._call("set_state", {"state": dict(state)})

    async def close(self) -> None:
        """End the session on the server (a server already gone is no error: its sessions went
        with it, or its idle timeout closes them)."""
        if self.closed:
            return
        self.closed = True
        self.client.forget(self)
        try:
            await self.client.call("close", {"session_id": self.session_id}, self.link)
        except error.Error:
            pass

    async def __aenter__(self) -> AsyncRemoteEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def fields(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if self.closed:
            raise error.Error(f"{self!r} is closed")
        return {**(extra or {}), "session_id": self.session_id}

    async def _call(self, op: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.client.call(op, self.fields(extra), self.link)


class AsyncClient:
    """Sessions on one ``llmgym serve``, for many concurrent episodes (see the module docstring).

    Args:
        url: the server, ``http(s)://host:port``.
        token: the bearer token (default: the first of ``$LLMGYM_SERVE_TOKEN``).
        transport: ``"http"`` (default) or ``"ws"`` (the server's ``/v1/ws``).
        max_connections: connections to the server at most.
        max_in_flight: requests in flight at most; further calls wait.
        timeout_s: the most one attempt of one call may take.
        retries: further attempts of a call that may be sent again (see the module docstring).
        backoff_s: the first wait before a retry; it doubles each time (with jitter).
        max_reply_bytes: the largest reply accepted.
        ssl_context: for ``https``: the context to verify the server with (a private CA) and
            to present a client certificate from (mutual TLS); default: the system's CAs.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        transport: str = "http",
        max_connections: int = 64,
        max_in_flight: int = 256,
        timeout_s: float = 300.0,
        retries: int = 3,
        backoff_s: float = 0.05,
        max_reply_bytes: int = 256 << 20,
        ssl_context: ssl.SSLContext | None = None,
    ):
        check_url(url)
        if transport not in ("http", "ws"):
            raise error.Error(f"Expects transport 'http' or 'ws', actual: {transport!r}")
        if max_connections < 1 or max_in_flight < 1 or retries < 0:
            raise error.Error("Expects max_connections >= 1, max_in_flight >= 1, retries >= 0")
        if not timeout_s > 0 or backoff_s < 0:
            raise error.Error(f"Expects timeout_s > 0 and backoff_s >= 0, actual: {timeout_s}")
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = backoff_s
        token = token_or_env(token)
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        options = dict(
            max_connections=max_connections,
            timeout_s=timeout_s,
            max_reply_bytes=max_reply_bytes,
            ssl_context=ssl_context,
        )
        self.transport: Any
        if transport == "ws":
            from llmgym.remote.ws import WsTransport

            self.transport = WsTransport(self.url, headers, **options)  # type: ignore[arg-type]
        else:
            self.transport = HttpTransport(self.url, headers, **options)  # type: ignore[arg-type]
            max_in_flight = min(max_in_flight, max_connections)  # HTTP/1.1: one per connection
        self.max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        self._envs: set[AsyncRemoteEnv] = set()
        self._has_batch_route = True
        self._closed = False

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def make(self, env_id: str, **kwargs: Any) -> AsyncRemoteEnv:
        """A new session of ``env_id`` built with ``kwargs`` on the server."""
        if self._closed:
            raise error.Error(f"{self!r} is closed")
        fields = {"env_id": env_id, "kwargs": kwargs}

        async def create() -> tuple[Any, dict[str, Any]]:
            link = await self.transport.open_link()  # a new connection when the last one died
            return link, await self.transport.send("create", fields, link)

        link, doc = await self._retrying("create", create)
        env = AsyncRemoteEnv(self, env_id, dict(kwargs), SessionInfo.from_reply(doc), link)
        self._envs.add(env)
        return env

    async def step_batch(
        self, steps: Sequence[tuple[AsyncRemoteEnv, Any]], *, return_exceptions: bool = False
    ) -> list[StepResult | Exception]:
        """Step several sessions in one request (the server's batch route; without one, each
        step on its own, all at once). Results in order; a failed step is its exception in
        place with ``return_exceptions``, else the first one is raised (the others ran)."""
        seen: set[str] = set()
        for env, _ in steps:
            if env.client is not self or env.session_id in seen:
                raise error.Error(f"Expects each env of this client at most once, got {env!r}")
            seen.add(env.session_id)
        groups: dict[int, list[int]] = {}  # one request per WebSocket (a session lives on one)
        for i, (env, _) in enumerate(steps):
            key = id(env.link) if self.transport.sessions_on_links else 0
            groups.setdefault(key, []).append(i)
        results: list[StepResult | Exception] = [RemoteError("not run")] * len(steps)
        parts = await asyncio.gather(*(self._batch([steps[i] for i in g]) for g in groups.values()))
        for indices, part in zip(groups.values(), parts, strict=True):
            for i, result in zip(indices, part, strict=True):
                results[i] = result
        if not return_exceptions:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results

    async def _batch(self, steps: list[tuple[AsyncRemoteEnv, Any]]) -> list[StepResult | Exception]:
        if self._has_batch_route:
            fields = [env.fields({"action": action}) for env, action in steps]
            try:
                doc = await self.call("step_batch", {"steps": fields}, steps[0][0].link)
                return batch_results(doc, len(steps))
            except RemoteError as exc:
                if exc.status not in (404, 405) or self.transport.sessions_on_links:
                    raise
                self._has_batch_route = False  # an older server: nothing ran, step one by one
        out = await asyncio.gather(*(env.step(a) for env, a in steps), return_exceptions=True)
        for result in out:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancelled: not a step's failure
        return out  # type: ignore[return-value]

    async def call(self, op: str, fields: Mapping[str, Any], link: Any = None) -> dict[str, Any]:
        """Send one op of the protocol with the client's timeout, retries and back-pressure."""
        doc: dict[str, Any] = await self._retrying(
            op, lambda: self.transport.send(op, fields, link)
        )
        return doc

    async def _retrying(self, op: str, attempt_once: Callable[[], Awaitable[T]]) -> T:
        """``attempt_once()`` in a slot of ``max_in_flight`` within ``timeout_s``, again after a
        backoff while the failure allows it for ``op`` (see the module docstring)."""
        attempt = 0
        while True:
            try:
                async with self._slots:
                    return await asyncio.wait_for(attempt_once(), self.timeout_s)
            except TimeoutError:
                failure: RemoteError = ReplyLost(
                    f"{op} at {self.url} timed out after {self.timeout_s} s; the call may have "
                    "run on the server"
                )
                if op not in IDEMPOTENT_OPS:
                    raise failure from None
                wait = self._backoff(attempt)
            except ServerBusy as exc:
                failure = exc
                wait = self._backoff(attempt) if exc.retry_after_s is None else exc.retry_after_s
            except ServerUnreachable as exc:
                failure, wait = exc, self._backoff(attempt)
            except ReplyLost as exc:
                if op not in IDEMPOTENT_OPS:
                    raise
                failure, wait = exc, self._backoff(attempt)
            if attempt >= self.retries:
                raise failure
            attempt += 1
            await asyncio.sleep(min(wait, MAX_WAIT_S))

    def _backoff(self, attempt: int) -> float:
        return self.backoff_s * (2**attempt) * (0.5 + random.random())

    def forget(self, env: AsyncRemoteEnv) -> None:
        self._envs.discard(env)

    @property
    def envs(self) -> list[AsyncRemoteEnv]:
        """The sessions this client opened and has not closed."""
        return list(self._envs)

    async def aclose(self) -> None:
        """Close every session this client opened, then its connections."""
        if self._closed:
            return
        self._closed = True
        envs = list(self._envs)
        if self.transport.sessions_on_links:  # the server closes a WebSocket's sessions with it
            for env in envs:
                env.closed = True
            self._envs.clear()
        else:
            await asyncio.gather(*(env.close() for env in envs), return_exceptions=True)
        await self.transport.close()

    def __repr__(self) -> str:
        return f"<AsyncClient {self.url} ({len(self._envs)} sessions)>"
