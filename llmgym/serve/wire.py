"""The JSON of ``llmgym serve``: encoding env output, decoding requests, errors as documents.

Requests and replies are JSON objects. An error reply is ``{"error": {"type", "message"}}``
with a 4xx/5xx status; ``type`` names the ``llmgym.error`` (or Gymnasium) class, so
:mod:`llmgym.remote` raises the same exception the env raised in-process.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from typing import Any

import numpy as np

from llmgym import error
from llmgym.serve.sessions import ServeError


class BadRequest(ServeError):
    """Malformed JSON, a field of the wrong type, or a request over a size limit."""

    status = 400


class PayloadTooLarge(ServeError):
    status = 413


class Unauthorized(ServeError):
    status = 401


class Forbidden(ServeError):
    status = 403


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, (bytes, bytearray)):
        return {BYTES_KEY: base64.b64encode(obj).decode()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return repr(obj)


BYTES_KEY = "$bytes"
"""Bytes travel as ``{"$bytes": base64}`` (a snapshot's SQLite database), and come back as bytes."""


def revive_bytes(obj: Any) -> Any:
    """``obj`` with every ``{"$bytes": ...}`` turned back into bytes (for ``set_state``)."""
    if isinstance(obj, dict):
        if len(obj) == 1 and BYTES_KEY in obj and isinstance(obj[BYTES_KEY], str):
            try:
                return base64.b64decode(obj[BYTES_KEY], validate=True)
            except ValueError:
                raise BadRequest("A '$bytes' value is not valid base64") from None
        return {k: revive_bytes(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [revive_bytes(v) for v in obj]
    return obj


def dumps(obj: Any) -> bytes:
    """Compact JSON; numpy scalars, sets and dataclasses become plain JSON."""
    return json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":")).encode()


def loads(text: str | bytes, what: str) -> Any:
    """JSON, or ``BadRequest`` naming ``what`` (nesting deeper than Python's recursion limit
    included: the decoder recurses)."""
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BadRequest(f"{what} is not valid JSON: {e}") from None


def loads_object(body: bytes, what: str) -> dict[str, Any]:
    """The JSON object of a request body (an empty body is ``{}``)."""
    if not body.strip():
        return {}
    doc = loads(body, f"The body of {what}")
    if not isinstance(doc, dict):
        raise BadRequest(
            f"Expects a JSON object as the body of {what}, actual: {type(doc).__name__}"
        )
    return doc


def field_of(doc: dict[str, Any], name: str, kinds: tuple[type, ...], default: Any = None) -> Any:
    value = doc.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        names = " or ".join(k.__name__ for k in kinds)
        raise BadRequest(f"Expects {name!r} to be {names}, actual: {type(value).__name__}")
    return value


def action_size(action: Any) -> int:
    """Characters of an action: its text, or its JSON for a message dict."""
    if isinstance(action, str):
        return len(action)
    return len(json.dumps(action, default=repr))


def error_doc(exc: BaseException) -> dict[str, Any]:
    """``{"error": {"type", "message"}}``, plus ``retry_after_s`` for a rate-limit refusal."""
    doc: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    retry_after = getattr(exc, "retry_after_s", None)
    if isinstance(retry_after, float):
        doc["retry_after_s"] = round(retry_after, 3)
    return {"error": doc}


def failure(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and error document of an exception raised while serving a request."""
    status = status_of(exc)
    if status == 500:  # a bug or an env's own crash: say what it was, under llmgym's error type
        exc = error.Error(f"{type(exc).__name__}: {exc}")
    return status, error_doc(exc)


def status_of(exc: BaseException) -> int:
    """The HTTP status of an exception raised while serving a request."""
    if isinstance(exc, ServeError):
        return exc.status
    if isinstance(exc, (error.UnknownEnv,)):
        return 404
    if isinstance(exc, (error.ResetNeeded, error.InvalidState)):
        return 409
    if isinstance(exc, error.Error) or type(exc).__module__.startswith("gymnasium"):
        return 422
    return 500


def finite(reward: float) -> float:
    if not math.isfinite(reward):
        raise error.Error(f"The env produced a non-finite reward {reward!r}")
    return reward
