"""POST /v1/step_batch: one step of each of several sessions, each reply in its place."""

from __future__ import annotations

import json

import gymnasium as gym

from llmgym.serve import Server, wire

from .conftest import DECLARATIVE_ID, TOKENS, http

ALICE, BOB = TOKENS


def _session(server: Server, env_id: str, seed: int | None, token: str | None = None) -> str:
    status, _, doc = http(server, "POST", "/v1/sessions", {"env_id": env_id}, token)
    assert status == 201, doc
    sid = doc["session_id"]
    if seed is not None:
        http(server, "POST", f"/v1/sessions/{sid}/reset", {"seed": seed}, token)
    return str(sid)


def test_a_batch_equals_the_same_steps_in_process(server: Server) -> None:
    plan = [
        ("llm/Math-v0", 0, "12"),
        (DECLARATIVE_ID, 1, "Tokyo"),
        ("llm/ToolCalling-v0", 2, "Hm."),
    ]
    sids = [_session(server, env_id, seed) for env_id, seed, _ in plan]
    steps = [{"session_id": s, "action": a} for s, (_, _, a) in zip(sids, plan, strict=True)]
    status, _, doc = http(server, "POST", "/v1/step_batch", {"steps": steps})
    assert status == 200
    for (env_id, seed, action), got in zip(plan, doc["results"], strict=True):
        env = gym.make(env_id)
        env.reset(seed=seed)
        obs, reward, terminated, truncated, info = env.step(action)
        want = {
            "observation": obs,
            "reward": float(reward),
            "terminated": terminated,
            "truncated": truncated,
            "info": info,
        }
        assert got == json.loads(wire.dumps(want))
        env.close()
    for sid in sids:
        http(server, "DELETE", f"/v1/sessions/{sid}")


def test_one_sessions_failure_does_not_fail_the_others(secure_server: Server) -> None:
    ok = _session(secure_server, "llm/Math-v0", 0, ALICE)
    not_reset = _session(secure_server, "llm/Math-v0", None, ALICE)
    bobs = _session(secure_server, "llm/Math-v0", 0, BOB)
    steps = [
        {"session_id": ok, "action": "1"},
        {"session_id": not_reset, "action": "1"},
        {"session_id": bobs, "action": "1"},
        {"session_id": "no-such-session", "action": "9" * 20_000},
    ]
    status, _, doc = http(secure_server, "POST", "/v1/step_batch", {"steps": steps}, ALICE)
    assert status == 200
    results = doc["results"]
    assert [r.get("status") for r in results] == [None, 409, 404, 413]
    assert results[0]["terminated"] is True
    assert results[1]["error"]["type"] == "ResetNeeded"
    assert results[2]["error"]["type"] == "UnknownSession"  # Bob's session is not Alice's
    assert results[3]["error"]["type"] == "PayloadTooLarge"
    for sid, token in ((ok, ALICE), (not_reset, ALICE), (bobs, BOB)):
        http(secure_server, "DELETE", f"/v1/sessions/{sid}", token=token)


def test_malformed_batches_are_refused_whole(server: Server) -> None:
    sid = _session(server, "llm/Math-v0", 0)
    twice = {"steps": [{"session_id": sid, "action": "1"}, {"session_id": sid, "action": "2"}]}
    for body, words in (
        (twice, "named twice"),
        ({}, "'steps'"),
        ({"steps": {"session_id": sid}}, "list"),
        ({"steps": ["x"]}, "each item"),
        ({"steps": [{"action": "1"}]}, "'session_id'"),
        ({"steps": [{"session_id": sid}]}, "'action'"),
        ({"steps": [{"session_id": "s"}] * 100}, "at most 64"),
        (b"{nope", "not valid JSON"),
    ):
        status, _, doc = http(server, "POST", "/v1/step_batch", body)
        if words == "'action'":  # a missing action fails that step only
            assert status == 200 and doc["results"][0]["status"] == 400
            continue
        assert status == 400 and words in doc["error"]["message"], (body, doc)
    status, _, doc = http(server, "POST", f"/v1/sessions/{sid}/step", {"action": "1"})
    assert status == 200  # no malformed batch touched the session
    status, _, doc = http(server, "POST", "/v1/step_batch", {"steps": []})
    assert (status, doc) == (200, {"results": []})
    http(server, "DELETE", f"/v1/sessions/{sid}")
