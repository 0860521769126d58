"""The WebSocket route of ``llmgym serve`` (``/v1/ws``): every op of the HTTP API, many in flight.

Each text frame is one JSON object ``{"id", "op", ...fields}``; ``op`` is ``create``,
``reset``, ``step``, ``get_state``, ``set_state``, ``close`` or ``step_batch`` and the fields
are the HTTP bodies' (plus ``session_id``). Each reply is ``{"id", "ok": true, "result"}`` or
``{"id", "ok": false, "error": {"type", "message"}, "status"}``, ``status`` being what HTTP
would answer. Requests run concurrently and replies come as they finish (match them by
``id``); the calls on one session run one at a time, in the order they arrived. A malformed
frame (bad JSON, an unknown op, a missing field) gets an error reply and the connection lives
on; a binary frame (close 1003) or a frame over ``max_body_bytes`` (close 1009) ends it. At most
``max_ws_inflight`` requests of a connection run at once; past that the server stops reading
(TCP back-pressure). The sessions a connection created close with it, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from llmgym.serve import wire
from llmgym.serve.logs import Trace, record
from llmgym.serve.ops import Doc, Owned, Service

SESSION_OPS = ("reset", "step", "get_state", "set_state", "close")
OPS = ("create", *SESSION_OPS, "step_batch")


class _Refused(Exception):
    """A frame answered with an error, and the id to answer it under (None: none readable)."""

    def __init__(self, rid: Any, exc: Exception):
        super().__init__(str(exc))
        self.rid = rid
        self.exc = exc


def _parse(text: str) -> tuple[Any, str, Doc]:
    """The id, op and fields of a frame; raises :class:`_Refused` when it is malformed."""
    try:
        doc = wire.loads(text, "The frame")
    except wire.BadRequest as e:
        raise _Refused(None, e) from None
    if not isinstance(doc, dict):
        raise _Refused(None, wire.BadRequest("Expects each frame to be a JSON object"))
    rid = doc.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        raise _Refused(None, wire.BadRequest("Expects 'id' (an int or a string) in each frame"))
    op = doc.get("op")
    if op not in OPS:
        raise _Refused(rid, wire.BadRequest(f"Unknown op {op!r}; expects one of {', '.join(OPS)}"))
    return rid, op, doc


def _sessions_of(op: str, doc: Doc) -> list[str]:
    """The sessions a request touches, for ordering (a malformed one is refused by its op)."""
    if op in SESSION_OPS:
        sid = doc.get("session_id")
        return [sid] if isinstance(sid, str) else []
    if op == "step_batch" and isinstance(doc.get("steps"), list):
        return [
            i["session_id"]
            for i in doc["steps"]
            if isinstance(i, dict) and isinstance(i.get("session_id"), str)
        ]
    return []


def _over(text: str, limit: int) -> bool:
    """Whether a frame's UTF-8 is over ``limit`` bytes (encoded only when it might be)."""
    return len(text) > limit or (len(text) * 4 > limit and len(text.encode()) > limit)


class _Connection:
    """One WebSocket's state: the chains that order each session's calls, its sessions, sends."""

    def __init__(self, websocket: WebSocket, service: Service, owner: str):
        self.websocket = websocket
        self.service = service
        self.owner = owner
        self.owned = Owned()
        self.tails: dict[str, asyncio.Future[None]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.inflight = asyncio.Semaphore(service.config.max_ws_inflight)
        self.send_lock = asyncio.Lock()

    async def send(self, doc: Doc) -> None:
        text = wire.dumps(doc).decode()
        async with self.send_lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await self.websocket.send_text(text)  # the peer may be gone: nothing to tell

    def start(self, rid: Any, op: str, doc: Doc) -> None:
        """Queue a request behind the earlier calls on its sessions, and run it."""
        loop = asyncio.get_running_loop()
        sessions = _sessions_of(op, doc)
        before = [self.tails[s] for s in sessions if s in self.tails]
        done: asyncio.Future[None] = loop.create_future()
        for sid in sessions:
            self.tails[sid] = done
        task = loop.create_task(self._run(rid, op, doc, before, done, sessions))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(
        self,
        rid: Any,
        op: str,
        doc: Doc,
        before: list[asyncio.Future[None]],
        done: asyncio.Future[None],
        sessions: list[str],
    ) -> None:
        start = time.perf_counter()
        trace = Trace()
        status = 200
        try:
            for earlier in before:
                await asyncio.shield(earlier)
            try:
                result = await self._call(op, doc, trace)
                reply: Doc = {"id": rid, "ok": True, "result": result}
            except Exception as exc:
                status, err = wire.failure(exc)
                reply = {"id": rid, "ok": False, **err, "status": status}
            await self.send(reply)
            record(
                self.service.metrics,
                f"ws:{op}",
                status,
                time.perf_counter() - start,
                trace,
                transport="ws",
                owner=self.owner,
            )
        finally:
            if not done.done():
                done.set_result(None)
            for sid in sessions:
                if self.tails.get(sid) is done:
                    del self.tails[sid]
            self.inflight.release()

    def _call(self, op: str, doc: Doc, trace: Trace) -> Awaitable[Doc]:
        service = self.service
        if op == "create":
            return service.create(self.owner, doc, trace, self.owned)
        if op == "close":
            return service.close(self.owner, doc, trace, self.owned)
        method: Callable[[str, Doc, Trace], Awaitable[Doc]] = getattr(service, op)
        return method(self.owner, doc, trace)

    async def refuse(self, refused: _Refused) -> None:
        status, err = wire.failure(refused.exc)
        await self.send({"id": refused.rid, "ok": False, **err, "status": status})
        record(
            self.service.metrics,
            "ws:invalid",
            status,
            0.0,
            Trace(),
            transport="ws",
            owner=self.owner,
        )

    async def end(self) -> None:
        """Cancel this connection's requests (a call already on an env thread finishes there),
        then close its sessions, each once its call in flight is done."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.service.close_owned(self.owner, self.owned)


async def serve_websocket(websocket: WebSocket, service: Service, owner: str) -> None:
    """Serve one WebSocket connection until it closes (see the module's docstring)."""
    await websocket.accept()
    conn = _Connection(websocket, service, owner)
    service.metrics.ws_open.inc()
    limit = service.config.max_body_bytes
    try:
        while True:
            await conn.inflight.acquire()
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            if text is None:
                await websocket.close(1003, "llmgym serve takes text frames of JSON")
                break
            if _over(text, limit):
                await websocket.close(1009, f"a frame is over the limit of {limit} bytes")
                break
            try:
                rid, op, doc = _parse(text)
            except _Refused as refused:
                conn.inflight.release()
                await conn.refuse(refused)
                continue
            conn.start(rid, op, doc)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the peer went away mid-send: the same as a disconnect
    finally:
        service.metrics.ws_open.dec()
        await conn.end()
