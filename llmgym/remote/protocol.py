"""What both clients of ``llmgym serve`` share: its errors, its routes, and checked replies.

A reply is trusted no further than its shape: every field a client reads is checked here, and a
reply of the wrong shape (a hostile or broken server, a proxy's error page) raises
:class:`RemoteError` saying what was wrong, never a ``KeyError`` deep in a caller. An error reply
``{"error": {"type", "message"}}`` raises the same ``llmgym.error`` (or Gymnasium) class the env
raised on the server. Not here: sending anything (``sync`` and ``aio`` do that).
"""

from __future__ import annotations

import email.utils
import importlib
import json
import math
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import gymnasium as gym

from llmgym import error
from llmgym.spaces import Text
from llmgym.tasks import Task

TOKEN_ENV = "LLMGYM_SERVE_TOKEN"
"""The client token when ``token`` is not given (the first one, if comma-separated)."""


class RemoteError(error.Error):
    """The server refused a request or failed, or no valid reply came; the message says which."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class ServerUnreachable(RemoteError):
    """The request never reached the server (connection refused, connect timeout): nothing ran,
    so any call may be sent again."""


class ReplyLost(RemoteError):
    """The request may have reached the server but no reply came (the connection dropped, or
    the call timed out): the call may or may not have run there."""


class ServerBusy(RemoteError):
    """The server answered 429 (or 503 with ``Retry-After``): it refused the call without running
    it; ``retry_after_s`` is how long it asked the client to wait (None: it did not say)."""

    def __init__(self, message: str, status: int, retry_after_s: float | None):
        super().__init__(message, status)
        self.retry_after_s = retry_after_s


def token_or_env(token: str | None) -> str | None:
    """``token``, else the first token of ``$LLMGYM_SERVE_TOKEN``, else None."""
    if token is None:
        token = os.environ.get(TOKEN_ENV, "").split(",")[0].strip() or None
    return token


def dependency(name: str) -> ModuleType:
    """Import an optional dependency of the asyncio client, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise error.DependencyNotInstalled(
            f"llmgym.remote.AsyncClient needs {name}: pip install 'llmgym[serve]'"
        ) from None


def check_url(url: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error.Error(f"Expects an http(s)://host:port URL, actual: {url!r}")
    return parts


# --- the routes: one op, one HTTP request (the WebSocket protocol sends the op by name) --------

IDEMPOTENT_OPS = frozenset({"get_state", "set_state", "close", "oracle", "render"})
"""Ops that may be sent twice with the same effect as once; reset, step, create and step_batch
change the server's state each time they run."""


def session_path(session_id: str) -> str:
    return f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}"


def http_request(op: str, fields: Mapping[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """(method, path, body) of ``op`` over HTTP; ``fields`` are the op's fields of the protocol."""
    if op == "create":
        return "POST", "/v1/sessions", {"env_id": fields["env_id"], "kwargs": fields["kwargs"]}
    if op == "step_batch":
        return "POST", "/v1/step_batch", {"steps": fields["steps"]}
    path = session_path(str(fields["session_id"]))
    routes: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "reset": ("POST", "/reset", {"seed": fields.get("seed"), "options": fields.get("options")}),
        "step": ("POST", "/step", {"action": fields.get("action")}),
        "get_state": ("GET", "/state", None),
        "set_state": ("PUT", "/state", {"state": fields.get("state")}),
        "oracle": ("GET", "/oracle", None),
        "render": ("GET", "/render", None),
        "close": ("DELETE", "", None),
    }
    method, suffix, body = routes[op]
    return method, path + suffix, body


def reset_fields(seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of a reset; a ``Task`` in ``options`` travels as its dict."""
    if options is not None and isinstance(options.get("task"), Task):
        options = {**options, "task": options["task"].to_dict()}
    return {"seed": seed, "options": None if options is None else dict(options)}


# --- replies -------------------------------------------------------------------------------


def error_class(name: object) -> type[Exception]:
    """The ``llmgym.error`` or ``gymnasium.error`` class named ``name``, else RemoteError."""
    if isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
        for module in (error, gym.error):
            cls = getattr(module, name, None)
            if isinstance(cls, type) and issubclass(cls, Exception):
                return cls
    return RemoteError


def error_from(status: int, doc: object, what: str) -> Exception:
    """The exception an error reply stands for (``doc``: its JSON, or None if it had none)."""
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict):
        err = {"type": "RemoteError", "message": str(doc)[:300]}
    cls = error_class(err.get("type"))
    message = f"{str(err.get('message'))[:2000]} (server: {what}, HTTP {status})"
    if cls is RemoteError:
        return RemoteError(message, status)
    try:
        return cls(message)
    except Exception:  # a class whose constructor wants more than a message
        return RemoteError(message, status)


def parse_body(status: int, data: bytes, what: str) -> dict[str, Any]:
    """The JSON object of a reply, or the error it stands for raised."""
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        text = data[:300].decode("utf-8", "replace")
        doc = {"error": {"type": "RemoteError", "message": f"a reply that is not JSON: {text!r}"}}
    if status >= 400:
        raise error_from(status, doc, what)
    if not isinstance(doc, dict):
        raise RemoteError(
            f"Malformed reply to {what}: expects a JSON object, actual: {type(doc).__name__} "
            "(is the URL an llmgym server?)",
            status,
        )
    return doc


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds of a ``Retry-After`` header (delta-seconds or an HTTP date), None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def error_retry_after_s(doc: object) -> float | None:
    """The ``retry_after_s`` an error reply carries (a rate-limit refusal), None if none."""
    err = doc.get("error") if isinstance(doc, dict) else None
    wait = err.get("retry_after_s") if isinstance(err, dict) else None
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait):
        return None
    return max(0.0, float(wait))


def _field(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = doc.get(name) if isinstance(doc, Mapping) else None
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise RemoteError(
            f"Malformed reply to {what}: expects {name!r} of type {_names(kind)}, actual: "
            f"{type(value).__name__} (is the URL an llmgym server?)"
        )
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def _pair(doc: Mapping[str, Any], name: str, what: str) -> tuple[float, float]:
    value = _field(doc, name, list, what)
    if len(value) != 2 or not all(isinstance(v, (int, float)) for v in value):
        raise RemoteError(f"Malformed reply to {what}: expects {name!r} = [low, high]")
    return (float(value[0]), float(value[1]))


def _space(doc: Mapping[str, Any], name: str, what: str) -> Text:
    space = _field(doc, name, dict, what)
    try:
        return Text(space.get("max_length"), min_length=int(space.get("min_length") or 0))
    except (TypeError, ValueError, error.Error) as exc:
        raise RemoteError(f"Malformed reply to {what}: {name!r}: {exc}") from None


@dataclass(frozen=True)
class SessionInfo:
    """The reply to create: the session's id and its env's spaces and ranges."""

    session_id: str
    observation_space: Text
    action_space: Text
    reward_range: tuple[float, float]
    outcome_reward_range: tuple[float, float]
    render_modes: list[str]
    render_mode: str | None
    domain: str

    @classmethod
    def from_reply(cls, doc: Mapping[str, Any]) -> SessionInfo:
        what = "create"
        session_id = _field(doc, "session_id", str, what)
        if not session_id:
            raise RemoteError("Malformed reply to create: an empty 'session_id'")
        metadata = _field(doc, "metadata", dict, what)
        modes = _field(metadata, "render_modes", list, what)
        render_mode = doc.get("render_mode")
        domain = doc.get("domain")
        return cls(
            session_id=session_id,
            observation_space=_space(doc, "observation_space", what),
            action_space=_space(doc, "action_space", what),
            reward_range=_pair(doc, "reward_range", what),
            outcome_reward_range=_pair(doc, "outcome_reward_range", what),
            render_modes=[str(m) for m in modes],
            render_mode=render_mode if isinstance(render_mode, str) else None,
            domain=domain if isinstance(domain, str) and domain else "generic",
        )


def reset_result(doc: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return _field(doc, "observation", str, "reset"), _field(doc, "info", dict, "reset")


def step_result(doc: Mapping[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
    reward = float(_field(doc, "reward", (int, float), "step"))
    if not math.isfinite(reward):
        raise RemoteError(f"Malformed reply to step: a non-finite reward {reward!r}")
    return (
        _field(doc, "observation", str, "step"),
        reward,
        _field(doc, "terminated", bool, "step"),
        _field(doc, "truncated", bool, "step"),
        _field(doc, "info", dict, "step"),
    )


def state_result(doc: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = _field(doc, "state", dict, "get_state")
    return state


StepResult = tuple[str, float, bool, bool, dict[str, Any]]


def batch_results(doc: Mapping[str, Any], count: int) -> list[StepResult | Exception]:
    """Each step's result of a step_batch reply, or the exception its error stands for."""
    results = _field(doc, "results", list, "step_batch")
    if len(results) != count:
        raise RemoteError(
            f"Malformed reply to step_batch: {len(results)} results for {count} steps"
        )
    out: list[StepResult | Exception] = []
    for item in results:
        if isinstance(item, dict) and "error" in item:
            status = item.get("status")
            code = status if isinstance(status, int) and not isinstance(status, bool) else 500
            out.append(error_from(code, item, "step_batch"))
        else:
            out.append(step_result(item if isinstance(item, dict) else {}))
    return out
