"""``llmgym serve`` on Ray Serve, on a local cluster: two replicas, sessions in named host actors
that either replica serves, the owner check on every replica, and a host that dies."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym
import pytest

pytest.importorskip("fastapi")

import llmgym  # noqa: E402
import llmgym.remote  # noqa: E402
from llmgym.ray import LoopbackCluster  # noqa: E402
from llmgym.ray.serving import (  # noqa: E402
    NAMESPACE,
    REPLICA_HEADER,
    RayServe,
    RaySessionPool,
    SessionHost,
    _running_proxy,
    _url,
    serve_on_ray,
)
from llmgym.serve import ServeConfig  # noqa: E402
from llmgym.serve.sessions import TooManySessions, UnknownSession  # noqa: E402

ray = pytest.importorskip("ray")
# Ray Serve's own pydantic models warn on import; not this code's to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.serve")

CAPITALS_ID = "raytest/ServedCapitals-v0"
ALICE, BOB = "alice-token", "bob-token"
MAX_SESSIONS = 6


@pytest.fixture(scope="module")
def served(cluster: LoopbackCluster) -> Iterator[RayServe]:
    llmgym.register_task_env(
        CAPITALS_ID,
        tasks=[{"id": "fr", "prompt": "Capital of France?", "answer": "Paris"}],
        max_turns=3,
        overwrite=True,
    )
    config = ServeConfig(
        env_ids=["llm/Math-v0", CAPITALS_ID], tokens=[ALICE, BOB], max_sessions=MAX_SESSIONS
    )
    deployment = serve_on_ray(
        config, replicas=2, port=0, cpus_per_replica=0.5, cpus_per_host=0.5, start_timeout_s=120
    )
    try:
        yield deployment
    finally:
        deployment.stop()
        gym.registry.pop(CAPITALS_ID, None)


class Client:
    """Raw HTTP to the proxy, to see which replica answered each request."""

    def __init__(self, url: str, token: str | None):
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers=self.headers)
        response = self.conn.getresponse()
        doc = json.loads(response.read() or b"{}")
        return response.status, doc, str(response.getheader(REPLICA_HEADER))


@pytest.mark.timeout(120)
def test_remote_env_through_ray_serve_plays_as_in_process(served: RayServe) -> None:
    local = gym.make("llm/Math-v0", disable_env_checker=True)
    env = llmgym.remote.make(served.url, "llm/Math-v0", token=ALICE)
    try:
        assert env.reset(seed=3) == local.reset(seed=3)
        state = env.get_state()
        assert state == local.unwrapped.get_state()
        gold = local.unwrapped.oracle_action()
        assert env.oracle_action() == gold
        assert env.step(gold)[1:4] == local.step(gold)[1:4] == (1.0, True, False)
        env.set_state(state)  # back to before the step, in whichever replica answers
        assert env.step("not the answer")[1] == 0.0
    finally:
        env.close()
    declared = llmgym.remote.make(served.url, CAPITALS_ID, token=ALICE)  # spec from this process
    try:
        declared.reset(seed=0)
        assert declared.step("Lyon")[1:4] == (0.0, False, False)
        assert declared.step("Paris")[1:4] == (1.0, True, False)
    finally:
        declared.close()


@pytest.mark.timeout(120)
def test_one_session_stepped_through_both_replicas(served: RayServe) -> None:
    alice = Client(served.url, ALICE)
    status, doc, _ = alice("POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
    assert status == 201, doc
    sid = doc["session_id"]
    local = gym.make("llm/Math-v0", disable_env_checker=True)
    steps_by: dict[str, int] = {}
    for seed in range(40):  # requests are not sticky: both replicas get some
        status, doc, _ = alice("POST", f"/v1/sessions/{sid}/reset", {"seed": seed})
        assert status == 200 and doc["observation"] == local.reset(seed=seed)[0]
        gold = local.unwrapped.oracle_action()
        status, doc, replica = alice("POST", f"/v1/sessions/{sid}/step", {"action": gold})
        assert status == 200 and doc["reward"] == 1.0 and doc["terminated"], doc
        steps_by[replica] = steps_by.get(replica, 0) + 1
        if len(steps_by) == 2 and min(steps_by.values()) >= 2:
            break
    assert len(steps_by) == 2, f"one replica served every step: {steps_by}"
    assert alice("DELETE", f"/v1/sessions/{sid}")[0] == 200
    assert alice("POST", f"/v1/sessions/{sid}/reset", {"seed": 0})[0] == 404


def _scraped(served: RayServe, family: str, env_id: str) -> tuple[float, set[str]]:
    """A sample of /metrics (any replica answers), and the replicas seen answering so far."""
    parts = urlsplit(served.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {ALICE}"})
    response = conn.getresponse()
    text = response.read().decode()
    replica = str(response.getheader(REPLICA_HEADER))
    conn.close()
    want = f'{family}{{env_id="{env_id}"}} '
    values = [float(line[len(want) :]) for line in text.splitlines() if line.startswith(want)]
    assert len(values) <= 1, text  # one merged sample, not one per host
    return (values[0] if values else 0.0), {replica}


@pytest.mark.timeout(120)
def test_metrics_count_every_host_whichever_replica_answers(served: RayServe) -> None:
    """Env metrics are counted where the envs run (the session hosts) and merged when
    scraped, so every replica reports the deployment's totals, not its own share."""
    before, _ = _scraped(served, "llmgym_serve_steps_total", CAPITALS_ID)
    alice = Client(served.url, ALICE)
    by_host: dict[str, str] = {}
    for _ in range(MAX_SESSIONS - 2):  # a session on each of the two hosts
        status, doc, _ = alice("POST", "/v1/sessions", {"env_id": CAPITALS_ID})
        assert status == 201, doc
        host = doc["session_id"].split(".")[0]
        if host in by_host:
            assert alice("DELETE", f"/v1/sessions/{doc['session_id']}")[0] == 200
        by_host[host] = by_host.get(host, doc["session_id"])
        if len(by_host) == 2:
            break
    assert len(by_host) == 2, by_host
    sids = list(by_host.values())
    steps = 0
    for sid in sids:
        for action in ("Rome", "Paris"):  # a wrong turn, then the right answer
            assert alice("POST", f"/v1/sessions/{sid}/reset", {"seed": 0})[0] == 200
            status, doc, _ = alice("POST", f"/v1/sessions/{sid}/step", {"action": action})
            assert status == 200, doc
            steps += 1
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while True:  # hosts answer a scrape within a second, else count as they last did
        total, replica = _scraped(served, "llmgym_serve_steps_total", CAPITALS_ID)
        seen |= replica
        if total - before == steps and len(seen) == 2:
            break
        assert total - before <= steps, (total, before, steps)
        assert time.monotonic() < deadline, (total, before, steps, seen)
        time.sleep(0.2)
    successes, _ = _scraped(served, "llmgym_serve_success_total", CAPITALS_ID)
    assert successes >= 2
    for sid in sids:
        assert alice("DELETE", f"/v1/sessions/{sid}")[0] == 200


@pytest.mark.timeout(120)
def test_many_websockets_at_once_are_all_served(served: RayServe) -> None:
    """A WebSocket holds one Ray Serve request for its whole life: each replica must take as
    many at once as a standalone server takes connections (Ray's default is 5 a replica, and
    the 11th client of two replicas would wait for ever)."""
    from websockets.sync.client import connect

    url = "ws" + served.url[len("http") :] + "/v1/ws"
    sockets = []
    try:
        for _ in range(16):  # all open at once
            sockets.append(
                connect(
                    url, additional_headers={"Authorization": f"Bearer {ALICE}"}, open_timeout=30
                )
            )
        for i, ws in enumerate(sockets):
            ws.send(json.dumps({"id": i, "op": "reset", "session_id": "nope"}))
        for i, ws in enumerate(sockets):
            reply = json.loads(ws.recv(timeout=30))
            assert reply["id"] == i and reply["status"] == 404, reply
    finally:
        for ws in sockets:
            ws.close()


@pytest.mark.timeout(120)
def test_another_token_cannot_reach_a_session_on_any_replica(served: RayServe) -> None:
    alice, bob, anyone = (
        Client(served.url, ALICE),
        Client(served.url, BOB),
        Client(served.url, None),
    )
    status, doc, _ = alice("POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
    sid = doc["session_id"]
    assert alice("POST", f"/v1/sessions/{sid}/reset", {"seed": 1})[0] == 200
    refused_by = set()
    for _ in range(30):
        for method, path, body in [
            ("POST", f"/v1/sessions/{sid}/step", {"action": "1"}),
            ("GET", f"/v1/sessions/{sid}/state", None),
            ("DELETE", f"/v1/sessions/{sid}", None),
        ]:
            status, doc, replica = bob(method, path, body)
            assert status == 404 and doc["error"]["type"] == "UnknownSession", doc
            refused_by.add(replica)
        if len(refused_by) == 2:
            break
    assert len(refused_by) == 2
    assert anyone("GET", f"/v1/sessions/{sid}/state")[0] == 401
    status, doc, _ = alice("GET", f"/v1/sessions/{sid}/state")
    assert status == 200 and doc["state"]["turn"] == 0  # bob's step never happened
    assert alice("DELETE", f"/v1/sessions/{sid}")[0] == 200


def _pools(served: RayServe) -> tuple[RaySessionPool, RaySessionPool]:
    hosts = [ray.get_actor(name, namespace=NAMESPACE) for name in served.host_names]
    return tuple(  # type: ignore[return-value]
        RaySessionPool(hosts, max_sessions=MAX_SESSIONS, idle_timeout_s=None, timeout_s=60)
        for _ in range(2)
    )


@pytest.mark.timeout(120)
def test_replica_pools_share_sessions_and_the_session_limit(served: RayServe) -> None:
    a, b = _pools(served)
    owner = "owner-hash"
    session = a.create("llm/Math-v0", {}, owner)
    assert b.call(session.id, owner, lambda s: s.env.reset(seed=5))[1]["task_id"]
    assert a.call(session.id, owner, lambda s: s.env.get_state())["turn"] == 0
    with pytest.raises(UnknownSession):
        b.get(session.id, "someone-else")
    more = [(a if i % 2 else b).create("llm/Math-v0", {}, owner) for i in range(MAX_SESSIONS - 1)]
    assert len(a) == len(b) == MAX_SESSIONS
    with pytest.raises(TooManySessions):
        b.create("llm/Math-v0", {}, owner)
    for s in [session, *more]:
        (b if s.id < "h1" else a).close(s.id, owner)
    assert len(a) == 0
    with pytest.raises(UnknownSession):
        a.call(session.id, owner, lambda s: s.env.step("1"))


@pytest.mark.timeout(180)
def test_a_dead_host_loses_its_sessions_and_comes_back(served: RayServe) -> None:
    alice = Client(served.url, ALICE)
    sessions: list[str] = []
    while {s.split(".")[0] for s in sessions} != {"h0", "h1"}:  # one on each host, at least
        status, doc, _ = alice("POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
        assert status == 201, f"the hosts got {sessions} and then: {doc}"
        sessions.append(doc["session_id"])
    ray.kill(ray.get_actor(served.host_names[0], namespace=NAMESPACE), no_restart=False)
    for sid in sessions:
        status, doc, _ = alice("POST", f"/v1/sessions/{sid}/reset", {"seed": 0})
        if sid.startswith("h0."):  # lost with its host
            assert status == 404 and doc["error"]["type"] == "UnknownSession", doc
        else:
            assert status == 200, doc
    alive = [s for s in sessions if s.startswith("h1.")]
    try:
        # The restarted host takes sessions again. While it restarts (slowly on a loaded
        # machine) creations land on the other host: each is closed at once, so the server's
        # session limit never fills, and the wait is bounded.
        deadline = time.monotonic() + 120
        while True:
            status, doc, _ = alice("POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
            assert status == 201, doc
            sid = doc["session_id"]
            if sid.startswith("h0."):
                alive.append(sid)
                break
            assert alice("DELETE", f"/v1/sessions/{sid}")[0] == 200
            assert time.monotonic() < deadline, "the restarted host took no session in 120 s"
            time.sleep(0.2)
    finally:
        for sid in alive:
            assert alice("DELETE", f"/v1/sessions/{sid}")[0] == 200


@pytest.mark.timeout(120)
def test_a_second_deployment_of_the_same_name_is_refused_and_leaves_the_first(
    served: RayServe,
) -> None:
    config = ServeConfig(env_ids=["llm/Math-v0"], tokens=[ALICE], max_sessions=2)
    with pytest.raises(llmgym.error.Error, match="already runs an app named"):
        serve_on_ray(config, replicas=1, port=0, app_name=served.app_name, start_timeout_s=30)
    with pytest.raises(Exception, match="Prefix / is being used"):  # Serve's own refusal
        serve_on_ray(config, replicas=1, port=0, app_name="llmgym-other", start_timeout_s=30)
    for name in served.host_names:  # the first deployment's hosts and app are untouched
        ray.get_actor(name, namespace=NAMESPACE)
    alice = Client(served.url, ALICE)
    status, doc, _ = alice("POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
    assert status == 201, doc
    assert alice("DELETE", f"/v1/sessions/{doc['session_id']}")[0] == 200


def test_the_running_proxy_address_is_read_from_serve(served: RayServe) -> None:
    host, port = _running_proxy([])
    assert host == "127.0.0.1"
    assert _url(host, port) == served.url
    assert _url("0.0.0.0", port) == f"http://127.0.0.1:{port}"


@pytest.mark.timeout(120)
def test_a_session_id_is_chosen_by_the_replica_and_never_reused(served: RayServe) -> None:
    host = ray.get_actor(served.host_names[1], namespace=NAMESPACE)
    sid, owner = "h1.chosen-id", "owner-hash"
    assert ray.get(host.create.remote(sid, "llm/Math-v0", {}, owner))["observation_space"]
    try:
        for taken in [sid, "h0.on-another-host"]:
            with pytest.raises(ray.exceptions.RayTaskError, match="not free on host h1"):
                ray.get(host.create.remote(taken, "llm/Math-v0", {}, owner))
    finally:
        ray.get(host.close.remote(sid, owner))


@pytest.mark.timeout(120)
def test_create_fails_over_from_a_dead_host(served: RayServe) -> None:
    dead = ray.remote(SessionHost).options(num_cpus=0).remote(0, [], 2, None)
    ray.kill(dead, no_restart=True)
    live = ray.get_actor(served.host_names[1], namespace=NAMESPACE)
    pool = RaySessionPool([dead, live], max_sessions=4, idle_timeout_s=None, timeout_s=30)
    session = pool.create("llm/Math-v0", {}, "owner-hash")  # the dead host is tried first
    assert session.id.startswith("h1.")
    assert len(pool) == 1  # the dead host counts as holding nothing
    pool.close(session.id, "owner-hash")
    assert len(pool) == 0


@pytest.mark.timeout(60)
def test_counts_never_wait_long_for_a_busy_host(served: RayServe) -> None:
    class SlowCounts:  # defined here so that Ray ships it by value to the workers
        """A host whose counts come late (as behind 64 slow steps); for the wait only."""

        def __init__(self, active: int):
            self.active = active

        def counts(self) -> dict[str, int]:
            time.sleep(3)
            return {"active": self.active}

    slow = ray.remote(SlowCounts).options(num_cpus=0).remote(2)
    try:
        pool = RaySessionPool([slow], max_sessions=4, idle_timeout_s=None, counts_wait_s=0.2)
        start = time.monotonic()
        assert len(pool) == 0 and pool.counts() == {"active": 0}  # nothing known yet
        assert time.monotonic() - start < 1.5  # one wait, not two: the call in flight is reused
        deadline = time.monotonic() + 20
        while len(pool) != 2 and time.monotonic() < deadline:
            pass
        assert len(pool) == 2  # known once it answered
        start = time.monotonic()
        assert pool.counts() == {"active": 2}  # the last known while the next is in flight
        assert time.monotonic() - start < 1.0
    finally:
        ray.kill(slow)
