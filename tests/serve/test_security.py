"""The service's promises, each attacked: tokens, ownership, size limits, bad input, leaks."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from typing import Any

import gymnasium as gym
import pytest
from websockets.sync.client import connect

import llmgym
from llmgym import error, remote
from llmgym.serve import ServeConfig, Server
from llmgym.serve.cli import allowed_kwargs, config_from, kwarg_maxima
from llmgym.serve.envargs import KwargPolicy
from llmgym.serve.limits import TokenBucket
from llmgym.serve.server import check_bind

from .conftest import DECLARATIVE_ID, TOKENS, http, ws_url

ALICE, BOB = TOKENS


def _raw(server: Server, method: str, path: str, body: bytes | None, token: str | None = ALICE):
    status, _, doc = http(server, method, path, body, token)
    return status, doc


def test_unauthenticated_calls_are_refused(secure_server: Server) -> None:
    for token in (None, "wrong-token"):
        status, doc = _raw(secure_server, "GET", "/metadata", None, token)
        assert status == 401 and doc["error"]["type"] == "Unauthorized"
        status, _ = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id":"llm/Math-v0"}', token)
        assert status == 401
    assert _raw(secure_server, "GET", "/health", None, None)[0] == 200


def test_another_clients_token_cannot_touch_a_session(secure_server: Server) -> None:
    env = remote.make(secure_server.url, "llm/Math-v0", token=ALICE)
    try:
        env.reset(seed=0)
        path = f"/v1/sessions/{env.session_id}"
        for method, suffix, body in (
            ("POST", "/step", b'{"action": "1"}'),
            ("GET", "/state", None),
            ("GET", "/oracle", None),
            ("DELETE", "", None),
        ):
            status, doc = _raw(secure_server, method, path + suffix, body, BOB)
            assert status == 404 and doc["error"]["type"] == "UnknownSession", (method, suffix)
        env.step("1")  # still Alice's, and untouched
    finally:
        env.close()


def test_bad_requests_get_clear_4xx(secure_server: Server) -> None:
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b"{not json")
    assert status == 400 and "not valid JSON" in doc["error"]["message"]
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b"[" * 60_000)
    assert status == 400 and "not valid JSON" in doc["error"]["message"]
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b"[1, 2]")
    assert status == 400 and "JSON object" in doc["error"]["message"]
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id": "llm/Nope-v0"}')
    assert status == 404 and doc["error"]["type"] == "UnknownEnv"
    status, doc = _raw(secure_server, "POST", "/v1/sessions/nope/step", b'{"action": "1"}')
    assert status == 404 and doc["error"]["type"] == "UnknownSession"
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b'{"env_id": 3}')
    assert status == 400


def test_oversized_bodies_and_actions_are_refused(secure_server: Server) -> None:
    status, doc = _raw(secure_server, "POST", "/v1/sessions", b" " * (128 * 1024))
    assert status == 413 and doc["error"]["type"] == "PayloadTooLarge"
    env = remote.make(secure_server.url, "llm/Math-v0", token=ALICE)
    try:
        env.reset(seed=0)
        with pytest.raises(remote.RemoteError, match="limit of 10000 characters"):
            env.step("9" * 20_000)
        env.step("1")  # the session lives on
    finally:
        env.close()


@pytest.mark.timeout(120)
def test_a_session_cannot_hold_more_conversation_than_its_budget(start_server: Any) -> None:
    """Each turn keeps the action (and the env's reply) in the episode's messages: a client
    stepping big actions turn after turn is refused once the next step would pass the budget,
    and the session lives on (a reset empties it)."""
    multi = "servetest/CapitalsMulti-v0"
    llmgym.register_task_env(multi, tasks=[{"id": "fr", "prompt": "Capital?", "answer": "Paris"}],
                             max_turns=50, overwrite=True)  # fmt: skip
    try:
        srv = start_server(ServeConfig(env_ids=[multi], max_session_chars=20_000))
        env = remote.make(srv.url, multi)
        try:
            env.reset(seed=0)
            for _ in range(3):
                assert env.step("x" * 5_000)[2] is False  # wrong: feedback, another turn
            with pytest.raises(remote.RemoteError, match="per-session limit of 20000") as err:
                env.step("x" * 5_000)
            assert err.value.status == 413
            session = next(iter(srv.app.pool._sessions.values()))
            assert 15_000 < session.held_chars <= 20_000 and session.steps == 3
            env.step("y")  # a small step still fits
            env.reset(seed=0)
            assert session.held_chars < 100
            assert env.step("Paris")[1] == 1.0
        finally:
            env.close()
        status, _, doc = http(srv, "GET", "/metadata")
        assert status == 200 and doc["limits"]["max_session_chars"] == 20_000
        with pytest.raises(error.Error, match="max_session_chars"):
            ServeConfig(max_session_chars=0)
    finally:
        gym.registry.pop(multi, None)


def test_session_limit_then_idle_sessions_expire_and_close_their_env(
    secure_server: Server,
) -> None:
    pool = secure_server.app.pool
    envs = []
    deadline = time.monotonic() + 60
    while len(envs) < 4:  # the module's other tests may hold a slot for a moment
        try:
            envs.append(remote.make(secure_server.url, "llm/ToolCalling-v0", token=ALICE))
        except remote.RemoteError as exc:
            assert exc.status == 503 and time.monotonic() < deadline
    with pytest.raises(remote.RemoteError, match="limit of 4 sessions"):
        remote.make(secure_server.url, "llm/Math-v0", token=BOB)
    for env in envs:
        env.reset(seed=0)
    closed: list[str] = []
    for session in list(pool._sessions.values()):
        real_close = session.env.close

        def spy(real_close=real_close, sid=session.id) -> None:
            closed.append(sid)
            real_close()

        session.env.close = spy  # type: ignore[method-assign]
    deadline = time.monotonic() + 60
    while len(pool) and time.monotonic() < deadline:  # idle timeout 1 s, reaped by the server
        time.sleep(0.05)
    assert len(pool) == 0
    assert len(closed) == 4  # every expired session closed its env (its SQLite database)
    with pytest.raises(error.Error, match="No session"):
        envs[0].step("hello")
    assert pool.expired >= 4


def test_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(error.Error, match="needs client authentication"):
        check_bind("0.0.0.0", [])
    check_bind("0.0.0.0", ["t"])
    check_bind("127.0.0.1", [])
    check_bind("::1", [])


# --- env kwargs: what a client may pass to an env's constructor -----------------------------


def test_kwargs_that_reach_the_host_are_refused(server: Server) -> None:
    for env_id, kwargs, words in (
        ("llm/Math-v0", {"tasks": "/etc/passwd"}, "reads host files"),
        ("llm/Math-v0", {"reward_model": "/root/model"}, "--allow-kwarg llm/Math-v0:reward_model"),
        # every env takes reward_model= and judge= (the core's extra reward terms)
        ("llm/ToolCalling-v0", {"reward_model": {"model": "/root/m"}}, "reads host files"),
        ("llm/ToolCalling-v0", {"judge": {"url": "http://169.254.169.254/v1"}}, "post prompts"),
        (DECLARATIVE_ID, {"judge": {"url": "http://10.0.0.1:8000/v1"}}, "to any URL"),
        (DECLARATIVE_ID, {"verifier": "os:system"}, "runs host code"),
        (DECLARATIVE_ID, {"prompt_template": "{prompt.__class__.__init__.__globals__}"}, "format"),
        (DECLARATIVE_ID, {"extract": "regex:(a+)+$"}, "backtrack"),
        ("llm/ToolCalling-v0", {"bogus": 1}, "it takes:"),
        ("llm/Math-v0", {"max_episode_steps": 1}, "it takes:"),  # gym.make's, not the env's
        ("llm/Math-v0", {"family": [[[[["deep"]]]]]}, "plain JSON"),
    ):
        status, _, doc = http(server, "POST", "/v1/sessions", {"env_id": env_id, "kwargs": kwargs})
        assert status == 400 and doc["error"]["type"] == "KwargRefused", (kwargs, doc)
        assert words in doc["error"]["message"], (kwargs, doc)
    assert len(server.app.pool) == 0


def test_safe_kwargs_pass_and_the_operator_can_allow_more(start_server: Any) -> None:
    family = llmgym.list_families("llm/Math-v0")[0]
    srv = start_server(
        ServeConfig(
            env_ids=["llm/Math-v0", DECLARATIVE_ID],
            allow_kwargs={DECLARATIVE_ID: ["prompt_template"]},
        )
    )
    env = remote.make(srv.url, "llm/Math-v0", family=family, max_turns=2)
    try:
        assert env.reset(seed=0)[1]["family"] == family
    finally:
        env.close()
    template = {"prompt_template": "Q: {prompt}"}
    status, _, doc = http(
        srv, "POST", "/v1/sessions", {"env_id": DECLARATIVE_ID, "kwargs": template}
    )
    assert status == 201
    http(srv, "DELETE", f"/v1/sessions/{doc['session_id']}")
    with pytest.raises(error.Error, match="does not serve"):
        KwargPolicy(["llm/Math-v0"], {"llm/Coding-v0": ["tasks"]})
    everywhere = KwargPolicy(["llm/Math-v0", DECLARATIVE_ID], {"*": ["tasks"]})
    assert all("tasks" in everywhere.allowed(e) for e in ("llm/Math-v0", DECLARATIVE_ID))
    assert "sandbox" not in everywhere.allowed("llm/Math-v0")
    assert allowed_kwargs(["llm/Math-v0:tasks", "*:sandbox"]) == {
        "llm/Math-v0": ["tasks"],
        "*": ["sandbox"],
    }
    with pytest.raises(error.Error, match="ENV_ID:NAME"):
        allowed_kwargs(["tasks"])


@pytest.mark.parametrize(
    ("env_id", "kwargs", "bound"),
    [
        ("llm/Math-v0", {"timeout_s": 1e9}, "timeout_s=N"),
        ("llm/Math-v0", {"max_turns": 10**12}, "max_turns=N"),
        ("llm/Math-v0", {"max_observation_length": 1 << 40}, "max_observation_length=N"),
        ("llm/Math-v0", {"format_weight": -1e300}, "format_weight=N"),  # any other number
        ("llm/Math-v0", {"families": [["x", 10**400]]}, "families=N"),  # nested, huge int
        (DECLARATIVE_ID, {"max_turns": 10**6}, "max_turns=N"),
    ],
)
def test_kwargs_that_size_work_are_bounded(
    server: Server, env_id: str, kwargs: dict[str, Any], bound: str
) -> None:
    before = len(server.app.pool)
    status, _, doc = http(server, "POST", "/v1/sessions", {"env_id": env_id, "kwargs": kwargs})
    assert status == 400 and doc["error"]["type"] == "KwargRefused", doc
    assert f"--kwarg-max {env_id}:{bound}" in doc["error"]["message"], doc
    assert "bound of" in doc["error"]["message"]
    assert len(server.app.pool) == before


def test_the_built_in_sizing_kwargs_have_bounds_and_the_operator_raises_them() -> None:
    policy = KwargPolicy(["llm/LongDoc-v0", "llm/Coding-v0"])
    for env_id, kwargs in (
        ("llm/LongDoc-v0", {"length_range": [1e12, 1e12]}),
        ("llm/LongDoc-v0", {"context_budget": 10**9}),
        ("llm/LongDoc-v0", {"chunk_tokens": 10**9}),
        ("llm/Coding-v0", {"task_cache": 1e9}),
        ("llm/Coding-v0", {"max_code_chars": 10**9}),
    ):
        with pytest.raises(error.Error, match="bound of"):
            policy.check(env_id, kwargs)
    policy.check("llm/LongDoc-v0", {"length_range": [1024, 131072], "max_turns": 8})
    policy.check("llm/Coding-v0", {"task_cache": 64, "max_turns": None})
    raised = KwargPolicy(
        ["llm/LongDoc-v0", "llm/Coding-v0"],
        kwarg_max={"llm/LongDoc-v0": {"length_range": 1e6}, "*": {"max_turns": 5000}},
    )
    raised.check("llm/LongDoc-v0", {"length_range": [1e6, 1e6], "max_turns": 5000})
    with pytest.raises(error.Error, match="bound of"):
        raised.check("llm/Coding-v0", {"task_cache": 1e9, "max_turns": 5000})
    with pytest.raises(error.Error, match="does not serve"):
        KwargPolicy(["llm/Math-v0"], kwarg_max={"llm/Coding-v0": {"task_cache": 1}})
    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(error.Error, match="kwarg_max"):
            KwargPolicy(["llm/Math-v0"], kwarg_max={"*": {"max_turns": bad}})
    assert kwarg_maxima(["llm/LongDoc-v0:length_range=1e6", "*:max_turns=50"]) == {
        "llm/LongDoc-v0": {"length_range": 1e6},
        "*": {"max_turns": 50.0},
    }
    for flag in ("length_range=5", "*:max_turns", "*:max_turns=inf", "*:max_turns=-1", "*:x=a"):
        with pytest.raises(error.Error, match="ENV_ID:NAME=VALUE"):
            kwarg_maxima([flag])


# --- rates, memory, connections ----------------------------------------------------------------


def _step(server: Server, sid: str, token: str | None = None) -> tuple[int, dict, Any]:
    return http(server, "POST", f"/v1/sessions/{sid}/step", {"action": "1"}, token)


def _new(server: Server, env_id: str = "llm/Math-v0") -> str:
    status, _, doc = http(server, "POST", "/v1/sessions", {"env_id": env_id})
    assert status == 201, doc
    http(server, "POST", f"/v1/sessions/{doc['session_id']}/reset", {"seed": 0})
    return str(doc["session_id"])


def test_steps_over_the_server_rate_get_429_with_retry_after(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=[DECLARATIVE_ID], max_steps_per_s=0.2))
    first, second = _new(srv, DECLARATIVE_ID), _new(srv, DECLARATIVE_ID)
    assert _step(srv, first)[0] == 200  # the one token of the bucket
    status, headers, doc = _step(srv, second)
    assert status == 429 and doc["error"]["type"] == "RateLimited"
    assert int(headers["retry-after"]) >= 1 and doc["error"]["retry_after_s"] > 0
    assert "--max-steps-per-s" in doc["error"]["message"]
    assert _step(srv, "no-such-session")[0] == 429  # refused before any lookup


def test_steps_over_a_sessions_rate_get_429_and_other_sessions_go_on(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=[DECLARATIVE_ID], session_steps_per_s=0.2))
    busy, other = _new(srv, DECLARATIVE_ID), _new(srv, DECLARATIVE_ID)
    assert _step(srv, busy)[0] == 200
    http(srv, "POST", f"/v1/sessions/{busy}/reset", {"seed": 1})  # resets are not rate-limited
    status, headers, doc = _step(srv, busy)
    assert status == 429 and "--session-steps-per-s" in doc["error"]["message"]
    assert "retry-after" in headers
    assert _step(srv, other)[0] == 200
    with connect(ws_url(srv)) as ws:
        ws.send(json.dumps({"id": 1, "op": "step", "session_id": busy, "action": "1"}))
        reply = json.loads(ws.recv(timeout=60))
    assert reply["status"] == 429 and reply["error"]["retry_after_s"] > 0


def test_new_sessions_are_refused_over_the_memory_ceiling(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=["llm/Math-v0"], max_rss_mb=1))
    status, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
    assert status == 503 and doc["error"]["type"] == "OutOfMemory"
    assert "--max-rss-mb" in doc["error"]["message"] and len(srv.app.pool) == 0


def test_connections_past_the_cap_get_503(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=["llm/Math-v0"], max_connections=3))
    parts = urllib.parse.urlsplit(srv.url)
    idle = [socket.create_connection((parts.hostname, parts.port), timeout=30) for _ in range(2)]
    try:
        connections = srv.server.server_state.connections
        deadline = time.monotonic() + 30
        while len(connections) < 2:  # the server has accepted them
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert http(srv, "GET", "/metadata")[0] == 503
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 30
    while http(srv, "GET", "/health")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_web_pages_of_other_sites_are_refused_without_tokens(start_server: Any) -> None:
    srv = start_server(
        ServeConfig(env_ids=["llm/Math-v0"], allowed_origins=["https://lab.example"])
    )
    body = {"env_id": "llm/Math-v0"}
    status, _, doc = http(
        srv, "POST", "/v1/sessions", body, headers={"Origin": "http://evil.example"}
    )
    assert status == 403 and doc["error"]["type"] == "Forbidden"
    # DNS rebinding: the page's own origin, but not a loopback host
    rebound = {"Origin": "http://evil.example:80", "Host": "evil.example:80"}
    assert http(srv, "POST", "/v1/sessions", body, headers=rebound)[0] == 403
    assert len(srv.app.pool) == 0
    for origin in (srv.url, "https://lab.example"):
        status, _, doc = http(srv, "POST", "/v1/sessions", body, headers={"Origin": origin})
        assert status == 201
        http(srv, "DELETE", f"/v1/sessions/{doc['session_id']}")


def test_the_command_line_flags_set_the_limits() -> None:
    from llmgym.cli import build_parser

    args = build_parser().parse_args(
        [
            "serve",
            "llm/Math-v0",
            "--workers",
            "3",
            "--max-steps-per-s",
            "50",
            "--session-steps-per-s",
            "5",
            "--max-rss-mb",
            "4096",
            "--allow-kwarg",
            "llm/Math-v0:tasks",
            "--allow-origin",
            "https://lab.example",
            "--max-connections",
            "100",
            "--request-timeout",
            "7",
            "--kwarg-max",
            "llm/Math-v0:timeout_s=120",
            "--close-timeout",
            "3",
            "--log-json",
        ]
    )
    config = config_from(args)
    assert (config.workers, config.max_steps_per_s, config.session_steps_per_s) == (3, 50, 5)
    assert (config.max_rss_mb, config.max_connections, config.request_timeout_s) == (4096, 100, 7)
    assert config.allow_kwargs == {"llm/Math-v0": ["tasks"]}
    assert config.kwarg_max == {"llm/Math-v0": {"timeout_s": 120.0}}
    assert config.close_timeout_s == 3
    assert config.allowed_origins == ["https://lab.example"] and args.log_json
    defaults = config_from(build_parser().parse_args(["serve"]))
    assert defaults.max_steps_per_s is None and defaults.max_rss_mb is None
    assert defaults.allow_kwargs == {} and defaults.workers == 32
    assert defaults.kwarg_max == {} and defaults.close_timeout_s == 10


def test_token_buckets_refill_at_their_rate() -> None:
    bucket = TokenBucket(2.0)  # two a second, two saved up at most
    start = bucket.stamp
    assert bucket.take(start) == 0.0 and bucket.take(start) == 0.0
    assert bucket.take(start) == pytest.approx(0.5)
    assert bucket.take(start + 0.5) == 0.0
    assert bucket.take(start - 5.0) == pytest.approx(0.5)  # a clock read earlier refills nothing
    assert bucket.full(start + 10.0) and bucket.tokens == 2.0
