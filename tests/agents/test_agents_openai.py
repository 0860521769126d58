"""The OpenAI-compatible policy against a real HTTP server on loopback: 500s, timeouts, bad JSON."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import llmgym
from llmgym.agents import Request, load_policy
from llmgym.agents.openai_policy import OpenAIPolicy


class Server:
    """A chat-completions server whose next replies are scripted per request body's last message."""

    def __init__(self) -> None:
        self.script: dict[str, list[Any]] = {}
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                    key = body["messages"][-1]["content"]
                    plan = server.script.get(key, ["ok"])
                    step = plan.pop(0) if len(plan) > 1 else plan[0]
                try:
                    self._reply(step, body)
                finally:
                    with server.lock:
                        server.active -= 1

            def _reply(self, step: Any, body: dict[str, Any]) -> None:
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(step[1])
                    step = "ok"
                if isinstance(step, int):
                    self.send_response(step)
                    if step == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted"}')
                    return
                if step == "badjson":
                    payload = b'{"choices": [{"message": '
                elif step == "nochoices":
                    payload = b'{"object": "chat.completion"}'
                elif step == "tool":
                    msg = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                            }
                        ],
                    }
                    payload = json.dumps(
                        {
                            "choices": [{"message": msg}],
                            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                        }
                    ).encode()
                else:
                    text = f"echo: {body['messages'][-1]['content']}"
                    payload = json.dumps(
                        {
                            "choices": [{"message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                        }
                    ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def _policy(server: Server, **kw: Any) -> OpenAIPolicy:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("timeout_s", 2.0)
    policy = load_policy(f"openai:tiny-model@{server.url}", **kw)
    assert isinstance(policy, OpenAIPolicy)
    return policy


def _req(text: str, **kw: Any) -> Request:
    return Request([{"role": "user", "content": text}], **kw)


def test_plain_reply_and_request_body(server: Server) -> None:
    policy = _policy(
        server,
        temperature=0.7,
        max_new_tokens=33,
        seed=4,
        api_key="sk-test",
        extra_body={"top_k": 20},
    )
    (r,) = policy.generate([_req("hi")])
    assert (
        r.action == "echo: hi"
        and r.error is None
        and (r.prompt_tokens, r.completion_tokens) == (5, 2)
    )
    body = server.bodies[0]
    assert body["model"] == "tiny-model" and body["temperature"] == 0.7 and body["max_tokens"] == 33
    assert body["seed"] == 4 and body["top_k"] == 20 and "tools" not in body
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


def test_retries_5xx_and_429_then_succeeds(server: Server) -> None:
    server.script["flaky"] = [500, 503, 429, "ok"]
    policy = _policy(server, max_retries=4)
    (r,) = policy.generate([_req("flaky")])
    assert r.action == "echo: flaky" and policy.stats["retries"] == 3


def test_gives_up_after_max_retries_with_an_error_response(server: Server) -> None:
    server.script["down"] = [502]
    policy = _policy(server, max_retries=2)
    (r,) = policy.generate([_req("down")])
    assert (
        r.action == ""
        and "failed after 3 attempts" in (r.error or "")
        and "HTTP 502" in (r.error or "")
    )


def test_client_errors_are_not_retried(server: Server) -> None:
    server.script["bad"] = [400]
    policy = _policy(server, max_retries=5)
    (r,) = policy.generate([_req("bad")])
    assert "HTTP 400" in (r.error or "") and len(server.bodies) == 1


def test_timeout_is_retried(server: Server) -> None:
    server.script["slow"] = [("sleep", 1.0), "ok"]
    policy = _policy(server, timeout_s=0.3, max_retries=2)
    t0 = time.monotonic()
    (r,) = policy.generate([_req("slow")])
    assert r.action == "echo: slow" and policy.stats["retries"] == 1
    assert time.monotonic() - t0 < 5


def test_malformed_json_and_missing_choices_are_retried_then_reported(server: Server) -> None:
    server.script["garbled"] = ["badjson", "nochoices", "ok"]
    policy = _policy(server, max_retries=3)
    (r,) = policy.generate([_req("garbled")])
    assert r.action == "echo: garbled"
    server.script["always"] = ["badjson"]
    (r2,) = _policy(server, max_retries=1).generate([_req("always")])
    assert "malformed response" in (r2.error or "")


def test_tool_calls_become_an_action_dict_and_arguments_are_wired_as_json(server: Server) -> None:
    server.script["use a tool"] = ["tool"]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    history = [
        {"role": "user", "content": "first"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
            ],
        },
        {"role": "tool", "content": "1", "tool_call_id": "x"},
        {"role": "user", "content": "use a tool"},
    ]
    (r,) = _policy(server).generate([Request(history, tools)])
    assert isinstance(r.action, dict) and r.action["tool_calls"][0]["function"]["name"] == "add"
    body = server.bodies[0]
    assert (
        body["tools"] == tools
        and body["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    )
    env = llmgym.make("agents-test/ToolAdd-v0")
    env.reset(seed=0)
    env.step(r.action)  # the env accepts the API's tool-call shape


def test_concurrency_and_order(server: Server) -> None:
    for i in range(8):
        server.script[f"q{i}"] = [("sleep", 0.2), "ok"]
    policy = _policy(server, concurrency=4)
    out = policy.generate([_req(f"q{i}") for i in range(8)])
    assert [r.action for r in out] == [f"echo: q{i}" for i in range(8)]
    assert server.max_active >= 3


def test_connection_refused_is_an_error_response() -> None:
    policy = OpenAIPolicy("m", "http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.0, timeout_s=0.5)
    (r,) = policy.generate([_req("x")])
    assert r.action == "" and "connection error" in (r.error or "")
    assert policy.generate([]) == []


def test_bad_settings_and_specs() -> None:
    with pytest.raises(llmgym.error.Error, match="base URL"):
        OpenAIPolicy("m", "localhost:8000")
    with pytest.raises(llmgym.error.Error, match="concurrency"):
        OpenAIPolicy("m", "http://x/v1", concurrency=0)
    with pytest.raises(llmgym.error.Error, match="model name"):
        load_policy("openai:@http://127.0.0.1:1/v1")


def test_unserializable_request_fails_alone(server: Server) -> None:
    out = _policy(server).generate([Request([{"role": "user", "content": object()}]), _req("fine")])
    assert "JSON-serializable" in (out[0].error or "") and out[1].action == "echo: fine"
