"""Access records of ``llmgym serve``: one per request, counted in the metrics and logged.

Every HTTP request and every WebSocket op is counted in ``llmgym_serve_requests_total`` and,
when the ``llmgym.serve.access`` logger is enabled for INFO (``llmgym serve --log-json`` does
it with :func:`enable_json_logs`), logged as one JSON line: route, status, latency, session id,
env id, transport, and the client's owner name (a hash of its token). A record never holds the
token, a body, an action or an observation. The default is no access log at all: the hot path
then costs one counter.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict, dataclass
from typing import IO, Any

from llmgym.serve.metrics import ServeMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ACCESS = logging.getLogger("llmgym.serve.access")
TRACE_KEY = "llmgym_trace"
"""Where a request's :class:`Trace` lives in the ASGI scope's ``state``."""


@dataclass
class Trace:
    """What the handler of one request learned that its access record names."""

    session_id: str | None = None
    env_id: str | None = None


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def enable_json_logs(stream: IO[str] | None = None) -> logging.Handler:
    """Send ``llmgym.serve`` records at INFO and above to ``stream`` (stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("llmgym.serve")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def record(
    metrics: ServeMetrics,
    route: str,
    status: int,
    seconds: float,
    trace: Trace,
    *,
    transport: str,
    owner: str,
) -> None:
    """Count one answered request, and log it when the access log is on."""
    metrics.count_request(route, status)
    if ACCESS.isEnabledFor(logging.INFO):
        fields = {
            "route": route,
            "status": status,
            "latency_ms": round(seconds * 1000, 3),
            "transport": transport,
            "owner": owner,
            **asdict(trace),
        }
        ACCESS.info("request", extra={"fields": fields})


def route_of(scope: Scope) -> str:
    """The route template that served a request (a bounded label), or ``unrouted``."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else "unrouted"


def _status(message: Message, status: int | None) -> int | None:
    """The status a sent ASGI message answers with (a WebSocket: 101 accepted, 403 refused)."""
    kind = message["type"]
    if kind in ("http.response.start", "websocket.http.response.start"):
        return int(message["status"])
    if kind == "websocket.accept":
        return 101
    if kind == "websocket.close" and status is None:  # closed before the handshake: refused
        return 403
    return status


def observe(app: ASGIApp, metrics: ServeMetrics) -> ASGIApp:
    """Wrap ``app`` so that each HTTP request and each WebSocket connection leaves an access
    record when it ends (a WebSocket's ops leave their own, from :mod:`llmgym.serve.ws`)."""

    async def observed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None
        trace = Trace()
        scope.setdefault("state", {})[TRACE_KEY] = trace

        async def send_status(message: Message) -> None:
            nonlocal status
            status = _status(message, status)
            await send(message)

        try:
            await app(scope, receive, send_status)
        finally:
            if trace.session_id is None:
                trace.session_id = scope.get("path_params", {}).get("sid")
            owner = str(scope["state"].get("llmgym_owner", "anonymous"))
            transport = "ws" if scope["type"] == "websocket" else "http"
            seconds = time.perf_counter() - start
            # no status: the app died before it answered, which the client sees as a 500
            route = route_of(scope)
            record(metrics, route, status or 500, seconds, trace, transport=transport, owner=owner)

    return observed
