"""The WebSocket route: many requests in flight, each reply the same as the episode in-process."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import gymnasium as gym
import pytest
from websockets.asyncio.client import connect as aconnect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from llmgym.serve import ServeConfig, Server, wire

from .conftest import DECLARATIVE_ID, ENV_IDS, TOKENS, auth, http, ws_url

ALICE, BOB = TOKENS
SESSIONS = [(ENV_IDS[k % 3], 100 + k) for k in range(8)]
REQUESTS = 1000
WRONG = {
    "llm/Math-v0": "The answer is 7.",
    "llm/ToolCalling-v0": "I cannot help with that.",
    DECLARATIVE_ID: "Berlin",
}


def _json(doc: Any) -> Any:
    return json.loads(wire.dumps(doc))


def _expected_ops(env_id: str, seed: int, n: int, rng: random.Random) -> list[tuple[dict, Any]]:
    """``n`` ops on one session, each with the reply the same op gives in-process.

    A reply is the result document, or ``("error", type, status)``. Steps are the oracle's
    action or a wrong one; resets draw new seeds; a step after the episode ended is refused.
    """
    env = gym.make(env_id)
    base = env.unwrapped
    ops: list[tuple[dict, Any]] = []

    def run(op: dict, fn: Any) -> None:
        try:
            ops.append((op, _json(fn())))
        except Exception as exc:
            status, doc = wire.failure(exc)
            ops.append((op, ("error", doc["error"]["type"], status)))

    def reset(s: int) -> dict:
        obs, info = env.reset(seed=s)
        return {"observation": obs, "info": info}

    def step(action: str) -> dict:
        obs, reward, terminated, truncated, info = env.step(action)
        return {
            "observation": obs,
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": info,
        }

    run({"op": "reset", "seed": seed}, lambda: reset(seed))
    while len(ops) < n:
        roll = rng.random()
        if roll < 0.12:
            s = rng.randrange(10_000)
            run({"op": "reset", "seed": s}, lambda s=s: reset(s))
        elif roll < 0.2:
            run({"op": "get_state"}, lambda: {"state": base.get_state()})
        else:
            episode = base.episode
            oracle = not episode.done and rng.random() < 0.5
            action = base.oracle_action() if oracle else WRONG[env_id]
            run({"op": "step", "action": action}, lambda a=action: step(a))
    env.close()
    return ops


def _check(reply: dict, want: Any) -> None:
    if isinstance(want, tuple):
        assert reply["ok"] is False, reply
        assert (reply["error"]["type"], reply["status"]) == want[1:], reply
    else:
        assert reply["ok"] is True, reply
        assert reply["result"] == want


@pytest.mark.timeout(300)
def test_1000_requests_interleaved_over_8_sessions_equal_in_process(server: Server) -> None:
    rng = random.Random(18)
    per_session = [_expected_ops(e, s, REQUESTS // len(SESSIONS), rng) for e, s in SESSIONS]
    order = [k for k, ops in enumerate(per_session) for _ in ops]
    rng.shuffle(order)  # a random interleaving; each session's own ops keep their order

    async def play() -> tuple[dict[Any, dict], dict[Any, Any]]:
        async with aconnect(ws_url(server), max_size=None) as ws:
            for k, (env_id, _) in enumerate(SESSIONS):
                await ws.send(json.dumps({"id": f"c{k}", "op": "create", "env_id": env_id}))
            created = [json.loads(await ws.recv()) for _ in SESSIONS]
            sids = {r["id"]: r["result"]["session_id"] for r in created}
            expected: dict[Any, Any] = {}
            frames = []
            cursor = [0] * len(SESSIONS)
            for i, k in enumerate(order):
                op, want = per_session[k][cursor[k]]
                cursor[k] += 1
                rid: Any = i if i % 2 else f"r{i}"  # ids may be ints or strings
                expected[rid] = want
                frames.append(json.dumps({"id": rid, **op, "session_id": sids[f"c{k}"]}))

            async def send_all() -> None:
                for frame in frames:
                    await ws.send(frame)

            sender = asyncio.create_task(send_all())
            replies = {}
            while len(replies) < len(frames):
                reply = json.loads(await ws.recv())
                assert reply["id"] not in replies, "a reply came twice"
                replies[reply["id"]] = reply
            await sender
            return replies, expected

    replies, expected = asyncio.run(play())
    assert replies.keys() == expected.keys()
    for rid, want in expected.items():
        _check(replies[rid], want)
    assert any(isinstance(w, tuple) for w in expected.values())  # refusals were exercised too
    _wait_for(lambda: len(server.app.pool) == 0)  # the connection's sessions closed with it


def _wait_for(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _ask(ws: Any, doc: Any) -> dict:
    ws.send(doc if isinstance(doc, str) else json.dumps(doc))
    return json.loads(ws.recv(timeout=60))


def test_malformed_frames_get_error_replies_and_the_connection_lives(server: Server) -> None:
    with connect(ws_url(server)) as ws:
        for frame, rid, status, words in (
            ("{not json", None, 400, "not valid JSON"),
            ("[" * 100_000, None, 400, "not valid JSON"),  # deeper than the decoder recurses
            ("[1, 2]", None, 400, "JSON object"),
            (json.dumps({"op": "create", "env_id": "llm/Math-v0"}), None, 400, "'id'"),
            (json.dumps({"id": True, "op": "create"}), None, 400, "'id'"),
            (json.dumps({"id": 1, "op": "launch"}), 1, 400, "Unknown op"),
            (json.dumps({"id": 2}), 2, 400, "Unknown op"),
            (json.dumps({"id": 3, "op": "create"}), 3, 400, "'env_id'"),
            (json.dumps({"id": 4, "op": "create", "env_id": "llm/Nope-v0"}), 4, 404, "serve"),
            (json.dumps({"id": 5, "op": "step", "action": "1"}), 5, 400, "'session_id'"),
            (json.dumps({"id": 6, "op": "step", "session_id": 7, "action": "1"}), 6, 400, "str"),
            (json.dumps({"id": 7, "op": "step", "session_id": "nope", "action": "1"}), 7, 404, ""),
            (json.dumps({"id": 8, "op": "step_batch", "steps": "x"}), 8, 400, "list"),
            (
                json.dumps({"id": 9, "op": "create", "env_id": "llm/Math-v0", "kwargs": [1]}),
                9,
                400,
                "",
            ),
        ):
            reply = _ask(ws, frame)
            assert reply["id"] == rid and reply["ok"] is False, (frame, reply)
            assert reply["status"] == status and words in reply["error"]["message"], (frame, reply)
        made = _ask(ws, {"id": "ok", "op": "create", "env_id": "llm/Math-v0"})
        sid = made["result"]["session_id"]
        no_action = _ask(ws, {"id": 10, "op": "step", "session_id": sid})
        assert no_action["status"] == 400 and "'action'" in no_action["error"]["message"]
        early = _ask(ws, {"id": 11, "op": "step", "session_id": sid, "action": "1"})
        assert (early["status"], early["error"]["type"]) == (409, "ResetNeeded")
        assert _ask(ws, {"id": 12, "op": "reset", "session_id": sid, "seed": 0})["ok"]
        assert _ask(ws, {"id": 13, "op": "close", "session_id": sid})["result"] == {"closed": True}


def test_state_and_batch_ops_over_the_websocket(server: Server) -> None:
    local = gym.make("llm/ToolCalling-v0")
    with connect(ws_url(server), max_size=None) as ws:
        sids = [
            _ask(ws, {"id": k, "op": "create", "env_id": "llm/ToolCalling-v0"})["result"][
                "session_id"
            ]
            for k in range(2)
        ]
        for k, sid in enumerate(sids):
            _ask(ws, {"id": k, "op": "reset", "session_id": sid, "seed": 3})
        state = _ask(ws, {"id": "s", "op": "get_state", "session_id": sids[0]})["result"]["state"]
        action = "Let me check."
        batch = _ask(
            ws,
            {
                "id": "b",
                "op": "step_batch",
                "steps": [{"session_id": s, "action": action} for s in sids],
            },
        )["result"]["results"]
        assert batch[0] == batch[1]
        local.reset(seed=3)
        obs, reward, terminated, truncated, _ = local.step(action)
        assert (batch[0]["observation"], batch[0]["reward"]) == (obs, reward)
        assert _ask(ws, {"id": "p", "op": "set_state", "session_id": sids[0], "state": state})["ok"]
        again = _ask(ws, {"id": "a", "op": "step", "session_id": sids[0], "action": action})
        assert again["result"]["observation"] == obs
    local.close()


def test_another_tokens_session_is_unknown_over_the_websocket(secure_server: Server) -> None:
    with connect(ws_url(secure_server), additional_headers=auth(ALICE)) as alice:
        made = _ask(alice, {"id": 1, "op": "create", "env_id": "llm/Math-v0"})
        sid = made["result"]["session_id"]
        _ask(alice, {"id": 2, "op": "reset", "session_id": sid, "seed": 0})
        with connect(ws_url(secure_server), additional_headers=auth(BOB)) as bob:
            for op in ({"op": "step", "action": "1"}, {"op": "get_state"}, {"op": "close"}):
                reply = _ask(bob, {"id": 3, **op, "session_id": sid})
                assert reply["status"] == 404 and reply["error"]["type"] == "UnknownSession"
            batch = _ask(
                bob, {"id": 4, "op": "step_batch", "steps": [{"session_id": sid, "action": "1"}]}
            )
            assert batch["result"]["results"][0]["status"] == 404
        status, _, _ = http(secure_server, "POST", f"/v1/sessions/{sid}/step", {"action": "1"}, BOB)
        assert status == 404
        assert _ask(alice, {"id": 5, "op": "step", "session_id": sid, "action": "1"})["ok"]


def test_handshake_needs_the_token_and_no_foreign_origin(
    secure_server: Server, server: Server
) -> None:
    for headers in ({}, auth("wrong-token")):
        with pytest.raises(InvalidStatus) as caught:
            connect(ws_url(secure_server), additional_headers=headers)
        assert caught.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        connect(ws_url(server), origin="http://evil.example")  # type: ignore[arg-type]
    with connect(ws_url(server), origin=server.url) as ws:  # type: ignore[arg-type]
        assert _ask(ws, {"id": 1, "op": "create", "env_id": "llm/Math-v0"})["ok"]


def test_binary_and_oversized_frames_end_the_connection(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=["llm/Math-v0"], max_body_bytes=4096))
    with connect(ws_url(srv)) as ws:
        _ask(ws, {"id": 1, "op": "create", "env_id": "llm/Math-v0"})
        ws.send(b"\x00binary")
        with pytest.raises(ConnectionClosed) as caught:
            ws.recv(timeout=30)
        assert caught.value.rcvd is not None and caught.value.rcvd.code == 1003
    with connect(ws_url(srv), max_size=None) as ws:
        _ask(ws, {"id": 1, "op": "create", "env_id": "llm/Math-v0"})
        ws.send(json.dumps({"id": 2, "op": "step", "session_id": "x", "action": "9" * 8000}))
        with pytest.raises(ConnectionClosed) as caught:
            ws.recv(timeout=30)
        assert caught.value.rcvd is not None and caught.value.rcvd.code == 1009
    _wait_for(lambda: len(srv.app.pool) == 0)  # both connections' sessions closed
    with connect(ws_url(srv)) as ws:  # the server serves on
        made = _ask(ws, {"id": 1, "op": "create", "env_id": "llm/Math-v0"})
        sid = made["result"]["session_id"]
        _ask(ws, {"id": 2, "op": "reset", "session_id": sid, "seed": 0})
        big = _ask(ws, {"id": 3, "op": "step", "session_id": sid, "action": "9" * 3000})
        assert big["ok"]  # under the frame cap and the action cap: served


def test_calls_on_one_session_run_in_arrival_order(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=[DECLARATIVE_ID], workers=8))
    local = gym.make(DECLARATIVE_ID)
    with connect(ws_url(srv)) as ws:
        sid = _ask(ws, {"id": 0, "op": "create", "env_id": DECLARATIVE_ID})["result"]["session_id"]
        frames, want = [], {}
        for i in range(60):  # reset, step, reset, step...: any reordering breaks an episode
            if i % 2 == 0:
                frames.append({"id": i, "op": "reset", "session_id": sid, "seed": i})
                want[i] = _json({"observation": local.reset(seed=i)[0]})["observation"]
            else:
                frames.append({"id": i, "op": "step", "session_id": sid, "action": "Paris"})
                want[i] = float(local.step("Paris")[1])
        for frame in frames:
            ws.send(json.dumps(frame))
        replies = [json.loads(ws.recv(timeout=60)) for _ in frames]
    got = {
        r["id"]: r["result"]["observation"] if r["id"] % 2 == 0 else r["result"]["reward"]
        for r in replies
    }
    assert got == want
    local.close()
