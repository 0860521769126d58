"""uvicorn's HTTP protocols with a deadline for each whole request: a cure for slowloris.

uvicorn closes a keep-alive connection that stays idle, but its timer stops at the first byte
of a request, and a new connection that never speaks has none: a client trickling its headers
or its body a byte at a time holds a connection (and a slot under ``limit_concurrency``) for
ever. Here a request's headers and body must all arrive within ``request_timeout_s`` of its
first byte (of the connection, for the first request); past it the connection is answered
``408`` when nothing else is being written to it, and closed. The app's own time is not
counted: the clock stops when the request has arrived. WebSocket connections leave these
protocols at the upgrade (the handshake is timed; the frames are the WebSocket's business:
its size cap and pings).
This module does not time out a client that is slow to *read* a response (flow control holds
that one writer, not a thread).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

TIMEOUT_REPLY = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 36\r\nconnection: close\r\n\r\nThe request did not arrive in time.\n"
)


class _Deadline:
    """The deadline; mixed in front of a uvicorn HTTP protocol, which says when a request
    is still arriving (:meth:`_receiving`)."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def __init__(self, *args: Any, request_timeout_s: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._timeout_s = request_timeout_s
        self._timer: asyncio.TimerHandle | None = None

    def _receiving(self) -> bool:
        raise NotImplementedError

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self._timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        transport = self.transport
        if transport.is_closing() or transport.get_protocol() is not self:
            return
        if not self._receiving():
            return
        if self.cycle is None or self.cycle.response_complete:  # no reply being written
            transport.write(TIMEOUT_REPLY)
        transport.close()

    def _check(self) -> None:
        if self._receiving():
            self._arm()
        else:
            self._disarm()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self.transport.get_protocol() is self:  # not upgraded to a WebSocket
            self._check()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._disarm()
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]


class H11DeadlineProtocol(_Deadline, H11Protocol):
    """uvicorn's h11 protocol with the request deadline."""

    def _receiving(self) -> bool:
        # IDLE: the request line and headers are not all here; SEND_BODY: the body is not.
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)


def _httptools_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class HttpToolsDeadlineProtocol(_Deadline, HttpToolsProtocol):  # type: ignore[misc]
        """uvicorn's httptools protocol with the request deadline."""

        _arrived = False
        """Whether the request now on the connection has arrived whole."""

        def on_message_begin(self) -> None:
            self._arrived = False
            super().on_message_begin()

        def on_message_complete(self) -> None:
            self._arrived = True
            super().on_message_complete()

        def _receiving(self) -> bool:
            return not self._arrived

    return HttpToolsDeadlineProtocol


HttpToolsDeadlineProtocol = _httptools_protocol()


def deadline_protocol(request_timeout_s: float, http: str = "auto") -> Any:
    """The protocol factory for ``uvicorn.Config(http=...)``: httptools when installed (as
    uvicorn's ``auto`` picks), else h11, either with the deadline."""
    if http not in ("auto", "httptools", "h11"):
        raise ValueError(f"Expects http in ('auto', 'httptools', 'h11'), actual: {http!r}")
    cls: Any = H11DeadlineProtocol
    if http != "h11" and HttpToolsDeadlineProtocol is not None:
        cls = HttpToolsDeadlineProtocol
    elif http == "httptools":
        raise ValueError("http='httptools' needs httptools: pip install httptools")
    return partial(cls, request_timeout_s=request_timeout_s)
