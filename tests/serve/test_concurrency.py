"""Many clients at once: no episode lost, duplicated or mixed up with another's."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from websockets.sync.client import connect

import llmgym
from llmgym import remote
from llmgym.serve import ServeConfig, Server
from llmgym.serve.sessions import SessionPool

from .conftest import CAPITALS, DECLARATIVE_ID, http, ws_url

EPISODES = 200
CLIENTS = 16
PLAN = [
    (("llm/Math-v0", DECLARATIVE_ID)[i % 2], 1000 + i, "oracle" if i % 3 else "wrong")
    for i in range(EPISODES)
]


def _play(env: gym.Env, env_id: str, seed: int, policy: str) -> tuple:
    obs, info = env.reset(seed=seed)
    action = env.unwrapped.oracle_action() if policy == "oracle" else f"wrong {seed}"
    _, reward, terminated, truncated, step_info = env.step(action)
    return (env_id, seed, info["task_id"], obs, float(reward), terminated, step_info["is_success"])


def test_200_episodes_from_16_clients_match_in_process(server: Server) -> None:
    local = {env_id: gym.make(env_id) for env_id in {p[0] for p in PLAN}}
    expected = sorted(_play(local[e], e, s, p) for e, s, p in PLAN)
    for env in local.values():
        env.close()

    def client(k: int) -> list[tuple]:
        envs = {env_id: remote.make(server.url, env_id) for env_id in local}
        try:
            return [_play(envs[e], e, s, p) for e, s, p in PLAN[k::CLIENTS]]
        finally:
            for env in envs.values():
                env.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        results = [r for batch in pool.map(client, range(CLIENTS)) for r in batch]
    assert len(results) == EPISODES
    assert len({(r[0], r[1]) for r in results}) == EPISODES
    assert sorted(results) == expected
    assert len(server.app.pool) == 0  # every client closed its sessions


class _Gauge:
    """How many calls are inside at once, and the most there ever were."""

    now = 0
    most = 0
    lock = threading.Lock()


def _slow_verifier(response: str, gold: str) -> float:
    """A verifier that takes 0.3 s and notes how many run at once (gym.make copies the env's
    kwargs, so it is a plain function over a module-level gauge)."""
    with _Gauge.lock:
        _Gauge.now += 1
        _Gauge.most = max(_Gauge.most, _Gauge.now)
    time.sleep(0.3)
    with _Gauge.lock:
        _Gauge.now -= 1
    return float(response.strip() == gold)


@pytest.mark.parametrize("bound", ["workers", "max_ws_inflight"])
def test_workers_and_ws_inflight_bound_the_env_calls_running_at_once(
    start_server: Any, bound: str
) -> None:
    env_id = "servetest/Slow-v0"
    llmgym.register_task_env(env_id, tasks=CAPITALS, verifier=_slow_verifier, overwrite=True)
    srv = start_server(ServeConfig(env_ids=[env_id], **{"workers": 8, bound: 2}))
    sids = []
    for k in range(6):
        _, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": env_id})
        sids.append(doc["session_id"])
        http(srv, "POST", f"/v1/sessions/{doc['session_id']}/reset", {"seed": k})
    _Gauge.most = 0
    if bound == "workers":  # six steps in one batch, two threads: two at a time
        steps = [{"session_id": s, "action": "Lima"} for s in sids]
        status, _, doc = http(srv, "POST", "/v1/step_batch", {"steps": steps})
        assert status == 200 and all("reward" in r for r in doc["results"])
    else:  # six steps on one WebSocket that may have two in flight: the server reads two
        with connect(ws_url(srv)) as ws:
            for k, sid in enumerate(sids):
                ws.send(json.dumps({"id": k, "op": "step", "session_id": sid, "action": "Lima"}))
            replies = [json.loads(ws.recv(timeout=60)) for _ in sids]
        assert all(r["ok"] for r in replies)
    assert _Gauge.most == 2


class _NamedPool(SessionPool):
    """A pool that names its sessions and sees each id before the env is made (as Ray's does)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(lambda env_id, kw: gym.make(env_id, **kw), **kwargs)
        self.made: list[str] = []
        self.counter = 0

    def new_session_id(self) -> str:
        self.counter += 1
        return f"named-{self.counter}"

    def make_env(self, env_id: str, kwargs: dict[str, Any], session_id: str) -> gym.Env:
        self.made.append(session_id)
        return super().make_env(env_id, kwargs, session_id)


def test_an_injected_pool_serves_the_sessions(start_server: Any) -> None:
    pool = _NamedPool(max_sessions=2, idle_timeout_s=None)
    srv = start_server(ServeConfig(env_ids=[DECLARATIVE_ID]), pool=pool)
    assert srv.app.pool is pool
    env = remote.make(srv.url, DECLARATIVE_ID)
    try:
        assert env.session_id == "named-1" and pool.made == ["named-1"]
        env.reset(seed=0)
        assert env.step("Paris")[1] in (0.0, 1.0)
        with pytest.raises(remote.RemoteError, match="limit of 2 sessions"):  # the pool's limit
            [remote.make(srv.url, DECLARATIVE_ID) for _ in range(2)]
    finally:
        env.close()
