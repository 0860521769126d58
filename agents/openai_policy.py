"""Policies served behind any OpenAI-compatible chat-completions API (vLLM, SGLang, llama.cpp, Ollama...).

Standard library only (``urllib``): requests run on a thread pool (``concurrency``), each with a
timeout; connection errors, timeouts, HTTP 429 and 5xx and malformed responses are retried with
exponential backoff and jitter (honouring ``Retry-After``); a request that still fails becomes a
:class:`~llmgym.agents.policies.Response` with ``error`` set, never an exception, so one bad
request does not end an evaluation or a training run.

>>> OpenAIPolicy.from_spec("my-model@http://127.0.0.1:8000/v1").url
'http://127.0.0.1:8000/v1/chat/completions'
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llmgym import error
from llmgym.agents.policies import Policy, Request, Response

DEFAULT_URL = "https://api.openai.com/v1"
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIPolicy(Policy):
    """Chat completions from an OpenAI-compatible server.

    Settings: ``temperature``, ``top_p``, ``max_new_tokens`` (sent as ``max_tokens``), ``seed``,
    ``concurrency`` (parallel requests), ``timeout_s`` (per request), ``max_retries``,
    ``backoff_s`` (first retry delay, doubled each time, capped by ``max_backoff_s``),
    ``api_key`` (default: the ``OPENAI_API_KEY`` environment variable, if set), ``extra_body``
    (merged into every request, e.g. ``{"top_k": 20}`` for vLLM).
    """

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_URL,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 1024,
        seed: int | None = None,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ):
        if not model:
            raise error.Error("Expects a model name: 'openai:<model>@<url>'")
        if not base_url.startswith(("http://", "https://")):
            raise error.Error(
                f"Expects an http(s) base URL such as http://127.0.0.1:8000/v1, got {base_url!r}"
            )
        if concurrency < 1 or timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise error.Error(
                "Expects concurrency >= 1, timeout_s > 0, max_retries >= 0, backoff_s >= 0"
            )
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.spec = f"openai:{model}@{base_url}"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.concurrency, self.timeout_s, self.max_retries = concurrency, timeout_s, max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.settings = {
            "temperature": temperature,
            "top_p": top_p,
            "max_new_tokens": max_new_tokens,
            "seed": seed,
            "concurrency": concurrency,
            "timeout_s": timeout_s,
            "max_retries": max_retries,
            "backoff_s": backoff_s,
            "max_backoff_s": max_backoff_s,
        }
        self.extra_body = dict(extra_body or {})
        self._jitter = random.Random(seed if seed is not None else 0)
        self._jitter_lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._stats_lock = threading.Lock()

    @classmethod
    def from_spec(cls, rest: str, **settings: Any) -> OpenAIPolicy:
        """``openai:<model>@<base url>``; without ``@<url>``, ``OPENAI_BASE_URL`` or the OpenAI API."""
        model, sep, url = rest.partition("@")
        if not sep:
            url = os.environ.get("OPENAI_BASE_URL", DEFAULT_URL)
        return cls(model, url, **settings)

    # --- the API -------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        workers = min(self.concurrency, len(requests))
        if workers == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(self._one, requests))

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body sent for one request."""
        s = self.settings
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(m) for m in request.messages],
            "temperature": s["temperature"],
            "top_p": s["top_p"],
            "max_tokens": s["max_new_tokens"],
        }
        if s["seed"] is not None:
            body["seed"] = s["seed"]
        if request.tools:
            body["tools"] = list(request.tools)
        body.update(self.extra_body)
        return body

    # --- one request with retries ---------------------------------------------------------------------

    def _one(self, request: Request) -> Response:
        try:
            payload = json.dumps(self.body(request), ensure_ascii=False).encode("utf-8", "replace")
        except (TypeError, ValueError) as e:
            return Response("", error=f"request is not JSON-serializable: {e}")
        last = ""
        for attempt in range(self.max_retries + 1):
            self._count("requests")
            try:
                return self._post(payload)
            except _Retryable as e:
                last = str(e)
                if attempt == self.max_retries:
                    break
                self._count("retries")
                time.sleep(self._delay(attempt, e.retry_after))
            except _Fatal as e:
                self._count("failures")
                return Response("", error=str(e))
        self._count("failures")
        return Response("", error=f"failed after {self.max_retries + 1} attempts: {last}")

    def _post(self, payload: bytes) -> Response:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = _safe_read(e)
            message = f"HTTP {e.code} from {self.url}: {detail[:300]}"
            if e.code in _RETRYABLE_STATUS:
                raise _Retryable(message, _retry_after(e.headers.get("Retry-After"))) from None
            raise _Fatal(message) from None
        except TimeoutError as e:
            raise _Retryable(f"timed out after {self.timeout_s} s: {e}") from None
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise _Retryable(f"timed out after {self.timeout_s} s") from None
            raise _Retryable(f"connection error: {reason}") from None
        return _parse(raw)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        with self._jitter_lock:
            jitter = self._jitter.uniform(0.5, 1.5)
        return min(self.backoff_s * (2**attempt) * jitter, self.max_backoff_s)

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1


class _Fatal(Exception):
    pass


def _parse(raw: bytes) -> Response:
    """A Response from a chat-completions body; malformed bodies are retryable."""
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise _Retryable(f"malformed response ({type(e).__name__}): {raw[:200]!r}") from None
    if not isinstance(message, dict):
        raise _Retryable(f"malformed response: message is {type(message).__name__}")
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    action: str | dict[str, Any] = content
    calls = message.get("tool_calls")
    reasoning = message.get("reasoning_content")
    if (isinstance(calls, list) and calls) or isinstance(reasoning, str):
        action = {"content": content}
        if isinstance(calls, list) and calls:
            action["tool_calls"] = calls
        if isinstance(reasoning, str):
            action["reasoning_content"] = reasoning
    return Response(
        action,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
    )


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """The message as the API expects it: tool-call arguments as JSON strings."""
    out = dict(message)
    calls = out.get("tool_calls")
    if calls:
        wired = []
        for call in calls:
            call = dict(call)
            fn = dict(call.get("function") or {})
            if not isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.dumps(fn.get("arguments", {}), ensure_ascii=False)
            call["function"] = fn
            wired.append(call)
        out["tool_calls"] = wired
    return out


def _safe_read(e: urllib.error.HTTPError) -> str:
    try:
        return e.read().decode("utf-8", "replace")
    except Exception:
        return ""


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
