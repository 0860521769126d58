"""The WebSocket transport of :class:`llmgym.remote.AsyncClient` (``transport="ws"``).

It speaks the WebSocket protocol of ``llmgym serve`` at ``/v1/ws``: text frames, one JSON object
each; a request ``{"id", "op", ...fields}`` (the fields of the op's HTTP body), a reply ``{"id",
"ok": true, "result"}`` or ``{"id", "ok": false, "error": {"type", "message"}, "status"}``. Many
requests are in flight on one connection; a reader task matches each reply to its request by
id. A session lives on the connection that created it, and the server closes it when that
connection closes; so a call on a session whose connection is gone fails at once (nothing to
retry), and a connection that drops fails every call in flight on it with :class:`ReplyLost`.
Not here: retries, timeouts and back-pressure (the client does those for both transports).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
from collections.abc import Mapping
from typing import Any

from llmgym import error
from llmgym.remote.protocol import (
    RemoteError,
    ReplyLost,
    ServerBusy,
    ServerUnreachable,
    dependency,
    error_from,
    error_retry_after_s,
)


class WsLink:
    """One WebSocket connection to the server and the requests in flight on it."""

    def __init__(self, ws: Any, url: str):
        self.ws = ws
        self.url = url
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.closed_because: str | None = None
        self.connection_closed = dependency("websockets").exceptions.ConnectionClosed
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def closed(self) -> bool:
        return self.closed_because is not None

    async def send(self, op: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        if self.closed_because is not None:
            raise RemoteError(
                f"{op}: the WebSocket connection of this session to {self.url} "
                f"{self.closed_because}; the server closed its sessions with it"
            )
        rid = next(self.ids)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = reply
        try:
            frame = json.dumps({**fields, "id": rid, "op": op}, separators=(",", ":"))
            try:
                await self.ws.send(frame)
            except self.connection_closed as exc:
                self._lost(f"was closed ({exc})")
            return self._result(op, await reply)
        finally:
            self.pending.pop(rid, None)

    def _result(self, op: str, doc: dict[str, Any]) -> dict[str, Any]:
        ok = doc.get("ok")
        if ok is True and isinstance(doc.get("result"), dict):
            result: dict[str, Any] = doc["result"]
            return result
        status = doc.get("status")
        if ok is not False or not isinstance(status, int) or isinstance(status, bool):
            raise RemoteError(f"Malformed WebSocket reply to {op}: {str(doc)[:300]}")
        wait = error_retry_after_s(doc)
        if status == 429 or (status == 503 and wait is not None):
            raise ServerBusy(f"{op}: the server is busy (status {status})", status, wait)
        raise error_from(status, doc, f"ws {op}")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    doc = json.loads(frame)
                    rid = doc["id"]
                except (ValueError, TypeError, KeyError):
                    self._lost(f"sent a malformed frame ({str(frame)[:200]!r})")
                    await self.ws.close(1002, "malformed frame")
                    return
                reply = self.pending.get(rid) if isinstance(rid, int) else None
                if reply is not None and not reply.done():  # else a late reply to a timed-out call
                    reply.set_result(doc)
        except self.connection_closed as exc:
            self._lost(f"was closed ({exc})")
        finally:
            self._lost("was closed by the server")

    def _lost(self, because: str) -> None:
        """Mark the connection gone and fail every call in flight on it."""
        if self.closed_because is None:
            self.closed_because = because
        for reply in list(self.pending.values()):
            if not reply.done():
                reply.set_exception(
                    ReplyLost(
                        f"The WebSocket connection to {self.url} {self.closed_because} with the "
                        "call in flight: it may have run, and the server closes the sessions "
                        "opened on that connection"
                    )
                )

    async def close(self) -> None:
        self._lost("was closed by this client")
        await self.ws.close()
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)


class WsTransport:
    """Up to ``max_connections`` WebSocket connections, opened as sessions are created; new
    sessions go round-robin over them."""

    sessions_on_links = True

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
        self.websockets = dependency("websockets")
        self.ssl_context = ssl_context
        dependency("websockets.asyncio.client")
        self.url = ("wss" + url[5:] if url.startswith("https") else "ws" + url[4:]) + "/v1/ws"
        self.headers = headers
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        self.links: list[WsLink | None] = [None] * max_connections
        self._turn = itertools.count()
        self._opening = asyncio.Lock()

    async def open_link(self) -> WsLink:
        """The connection for a new session (opened now if it is not open)."""
        slot = next(self._turn) % len(self.links)
        async with self._opening:
            link = self.links[slot]
            if link is None or link.closed:
                link = self.links[slot] = WsLink(await self._connect(), self.url)
        return link

    async def _connect(self) -> Any:
        websockets = self.websockets
        try:
            return await websockets.asyncio.client.connect(
                self.url,
                additional_headers=self.headers,
                compression=None,  # replies are small and the link fast: deflate costs more
                max_size=self.max_reply_bytes,
                open_timeout=self.timeout_s,
                ping_timeout=max(20.0, self.timeout_s),
                proxy=None,  # like the HTTP transport: no proxy from the environment
                **({"ssl": self.ssl_context} if self.ssl_context is not None else {}),
            )
        except websockets.exceptions.InvalidStatus as exc:
            status = exc.response.status_code
            hint = {
                403: "a wrong or missing token?",
                404: "a server without /v1/ws: use transport='http'",
            }.get(status, "")
            raise RemoteError(
                f"The server refused the WebSocket {self.url} (HTTP {status}) {hint}", status
            ) from None
        except (OSError, TimeoutError, websockets.exceptions.InvalidHandshake) as exc:
            raise ServerUnreachable(
                f"Opening the WebSocket {self.url}: cannot reach the server: {exc!r}"
            ) from None

    async def send(self, op: str, fields: Mapping[str, Any], link: WsLink | None) -> dict[str, Any]:
        if link is None:
            raise error.Error(f"{op} over the WebSocket transport needs a session's connection")
        return await link.send(op, fields)

    async def close(self) -> None:
        links = [link for link in self.links if link is not None]
        self.links = [None] * len(self.links)
        await asyncio.gather(*(link.close() for link in links), return_exceptions=True)
