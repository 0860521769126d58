"""GET /metrics (Prometheus text, one registry per app) and the JSON access log."""

from __future__ import annotations

import io
import json
import logging
import time
from typing import Any

import gymnasium as gym
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect

from llmgym.serve import ServeConfig, Server
from llmgym.serve.logs import enable_json_logs

from .conftest import DECLARATIVE_ID, TOKENS, auth, http, ws_url

ALICE = TOKENS[0]


def _scrape(server: Server, token: str | None = None) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics`` as ``{(name, sorted labels): value}``."""
    status, headers, text = http(server, "GET", "/metrics", token=token)
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_sessions_steps_rewards_and_requests(start_server: Any) -> None:
    srv = start_server(
        ServeConfig(
            env_ids=["llm/Math-v0", DECLARATIVE_ID], idle_timeout_s=1.5, session_steps_per_s=0.1
        )
    )
    other = start_server(ServeConfig(env_ids=["llm/Math-v0"]))  # a second app in this process
    local = gym.make(DECLARATIVE_ID)
    rewards, successes = [], 0
    sids = []
    for seed, answer in ((0, "Paris"), (1, "Tokyo"), (2, "Lima"), (3, "nope")):
        _, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": DECLARATIVE_ID})
        sid = doc["session_id"]
        sids.append(sid)
        http(srv, "POST", f"/v1/sessions/{sid}/reset", {"seed": seed})
        status, _, step = http(srv, "POST", f"/v1/sessions/{sid}/step", {"action": answer})
        assert status == 200
        local.reset(seed=seed)
        want = local.step(answer)
        assert step["reward"] == want[1]
        rewards.append(want[1])
        successes += bool(want[4]["is_success"])
    assert http(srv, "POST", f"/v1/sessions/{sids[0]}/step", {"action": "x"})[0] == 429
    http(srv, "DELETE", f"/v1/sessions/{sids[1]}")
    samples = _scrape(srv)
    env = {"env_id": DECLARATIVE_ID}
    assert _value(samples, "llmgym_serve_steps_total", **env) == 4
    assert _value(samples, "llmgym_serve_reward_sum", **env) == pytest.approx(sum(rewards))
    assert _value(samples, "llmgym_serve_step_reward_count", **env) == 4
    assert _value(samples, "llmgym_serve_step_reward_bucket", le="0.0", **env) == 4 - successes
    assert _value(samples, "llmgym_serve_success_total", **env) == successes
    assert _value(samples, "llmgym_serve_episodes_ended_total", **env) == 4
    assert _value(samples, "llmgym_serve_step_seconds_count", **env) == 4
    assert _value(samples, "llmgym_serve_reset_seconds_count", **env) == 4
    assert _value(samples, "llmgym_serve_sessions_created_total", **env) == 4
    assert _value(samples, "llmgym_serve_sessions_live", **env) == 3
    assert _value(samples, "llmgym_serve_rate_limited_total", scope="session") == 1
    step_route = "/v1/sessions/{sid}/step"
    assert _value(samples, "llmgym_serve_requests_total", route=step_route, status="200") == 4
    assert _value(samples, "llmgym_serve_requests_total", route=step_route, status="429") == 1
    assert _value(samples, "llmgym_serve_requests_total", route="/v1/sessions", status="201") == 4
    # the other app's registry saw none of it
    assert _value(_scrape(other), "llmgym_serve_steps_total", **env) == 0
    # idle sessions expire, and are counted as such
    deadline = time.monotonic() + 60
    while len(srv.app.pool) and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = _scrape(srv)
    assert _value(samples, "llmgym_serve_sessions_expired_total", **env) == 3
    assert _value(samples, "llmgym_serve_sessions_live", **env) == 0
    local.close()


def test_websocket_ops_are_counted_by_op(server: Server) -> None:
    before = _scrape(server)
    with connect(ws_url(server)) as ws:
        ws.send(json.dumps({"id": 1, "op": "create", "env_id": "llm/Math-v0"}))
        json.loads(ws.recv(timeout=60))
        ws.send(json.dumps({"id": 2, "op": "step", "session_id": "nope", "action": "1"}))
        json.loads(ws.recv(timeout=60))
        ws.send("{junk")
        json.loads(ws.recv(timeout=60))

    def delta(**labels: str) -> float:
        return _value(after, "llmgym_serve_requests_total", **labels) - _value(
            before, "llmgym_serve_requests_total", **labels
        )

    deadline = time.monotonic() + 30
    after = _scrape(server)
    while not delta(route="/v1/ws", status="101") and time.monotonic() < deadline:
        time.sleep(0.05)  # the connection's record is written when the server sees it close
        after = _scrape(server)
    assert delta(route="/v1/ws", status="101") == 1

    assert delta(route="ws:create", status="200") == 1
    assert delta(route="ws:step", status="404") == 1
    assert delta(route="ws:invalid", status="400") == 1


def test_metrics_need_the_token(secure_server: Server) -> None:
    assert http(secure_server, "GET", "/metrics")[0] == 401
    assert "llmgym_serve_requests_total" in http(secure_server, "GET", "/metrics", token=ALICE)[2]


@pytest.mark.timeout(120)
def test_sandbox_anomalies_are_counted_per_env(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=["llm/Coding-v0"]))
    _, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": "llm/Coding-v0"})
    sid = doc["session_id"]
    http(srv, "POST", f"/v1/sessions/{sid}/reset", {"seed": 0})
    spin = "```python\nwhile True:\n    pass\n```"
    status, _, step = http(srv, "POST", f"/v1/sessions/{sid}/step", {"action": spin})
    assert status == 200 and step["info"]["exec"]["status"] == "timeout"
    samples = _scrape(srv)
    env = "llm/Coding-v0"
    assert _value(samples, "llmgym_serve_sandbox_runs_total", env_id=env) == 1
    assert _value(samples, "llmgym_serve_sandbox_anomalies_total", env_id=env, kind="timeout") == 1
    assert _value(samples, "llmgym_serve_sandbox_anomalies_total", env_id=env, kind="crash") == 0


def test_json_access_log_names_the_request_never_the_token_or_action(
    secure_server: Server,
) -> None:
    stream = io.StringIO()
    handler = enable_json_logs(stream)
    logger = logging.getLogger("llmgym.serve")
    secret_action = "the-secret-answer-1234"
    try:
        _, _, doc = http(secure_server, "POST", "/v1/sessions", {"env_id": "llm/Math-v0"}, ALICE)
        sid = doc["session_id"]
        http(secure_server, "POST", f"/v1/sessions/{sid}/reset", {"seed": 0}, ALICE)
        http(secure_server, "POST", f"/v1/sessions/{sid}/step", {"action": secret_action}, ALICE)
        http(secure_server, "GET", "/metadata", token="wrong-token")
        with connect(ws_url(secure_server), additional_headers=auth(ALICE)) as ws:
            ws.send(json.dumps({"id": 1, "op": "close", "session_id": sid}))
            json.loads(ws.recv(timeout=60))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
    text = stream.getvalue()
    assert ALICE not in text and secret_action not in text
    records = [json.loads(line) for line in text.splitlines()]
    by_route = {(r["route"], r["status"]): r for r in records}
    step = by_route[("/v1/sessions/{sid}/step", 200)]
    assert step["session_id"] == sid and step["env_id"] == "llm/Math-v0"
    assert step["transport"] == "http" and step["latency_ms"] >= 0 and step["msg"] == "request"
    assert by_route[("/v1/sessions", 201)]["session_id"] == sid
    assert ("unrouted", 401) in by_route
    closed = by_route[("ws:close", 200)]
    assert closed["transport"] == "ws" and closed["env_id"] == "llm/Math-v0"


def test_env_metrics_of_several_processes_merge_into_one_family_each() -> None:
    """What a replica under --ray reports: each host's env metrics added up, one sample per
    label set, histogram buckets included; ``_created`` keeps the earliest."""
    from prometheus_client import CollectorRegistry, generate_latest

    from llmgym.serve.metrics import ServeMetrics, merge_samples
    from llmgym.serve.sessions import SessionPool

    hosts = [ServeMetrics(SessionPool(lambda *_: None, max_sessions=1)) for _ in range(3)]
    for i, m in enumerate(hosts):
        for _ in range(i + 1):  # 1, 2 and 3 steps
            m.observe_step("a/A-v0", 0.003, 1.0, True, {"is_success": True})
        m.observe_step("b/B-v0", 0.2, -1.0, False, {})
    merged = {f.name: f for f in merge_samples([m.env_samples() for m in hosts])}

    def value(family: str, sample: str, **labels: str) -> float:
        (x,) = [s for s in merged[family].samples if s.name == sample and s.labels == labels]
        return float(x.value)

    assert value("llmgym_serve_steps", "llmgym_serve_steps_total", env_id="a/A-v0") == 6
    assert value("llmgym_serve_steps", "llmgym_serve_steps_total", env_id="b/B-v0") == 3
    assert value("llmgym_serve_success", "llmgym_serve_success_total", env_id="a/A-v0") == 6
    buckets = "llmgym_serve_step_seconds_bucket"
    assert value("llmgym_serve_step_seconds", buckets, env_id="a/A-v0", le="0.005") == 6
    assert value("llmgym_serve_step_seconds", buckets, env_id="b/B-v0", le="0.005") == 0
    assert value("llmgym_serve_step_seconds", buckets, env_id="b/B-v0", le="+Inf") == 3
    created = [
        v
        for m in hosts
        for _, _, _, samples in m.env_samples()
        for name, labels, v in samples
        if name == "llmgym_serve_steps_created" and labels == {"env_id": "a/A-v0"}
    ]
    assert len(created) == 3
    first = value("llmgym_serve_steps", "llmgym_serve_steps_created", env_id="a/A-v0")
    assert first == min(created)

    class Merged:
        def collect(self):  # type: ignore[no-untyped-def]
            return merge_samples([m.env_samples() for m in hosts])

    registry = CollectorRegistry()
    registry.register(Merged())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()  # renders as valid exposition text
    assert text.count("# TYPE llmgym_serve_steps_total counter") == 1, text
    assert 'llmgym_serve_steps_total{env_id="a/A-v0"} 6.0' in text
