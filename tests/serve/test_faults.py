"""Slow and broken clients: slowloris is cut off at the deadline, and an abrupt disconnect leaves
no session, thread, process, file descriptor or database behind."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import struct
import threading
import time
import urllib.parse
from functools import partial
from typing import Any

import gymnasium as gym
import pytest
from websockets.sync.client import connect

from llmgym.serve import ServeConfig, Server
from llmgym.serve.sessions import SessionPool

from .conftest import http, register_declarative, ws_url

DEADLINE_S = 3.0


def _open(server: Server) -> socket.socket:
    parts = urllib.parse.urlsplit(server.url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def _slow_clients(server: Server, n: int) -> list[tuple[socket.socket, bytes]]:
    """``n`` connections that start a request and then trickle it a byte at a time: headers
    that never end, a body that never ends, and one that never says anything."""
    clients = []
    for k in range(n):
        sock = _open(server)
        if k % 4 == 3:  # headers complete, then a body of 100,000 bytes trickled
            head = b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"
            clients.append((sock, b" "))
        elif k == 0:
            head = b""
            clients.append((sock, b""))
        else:
            head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "
            clients.append((sock, b"a"))
        sock.sendall(head)
        sock.setblocking(False)
    return clients


def _trickle(clients: list[tuple[socket.socket, bytes]], closed_at: dict[int, float]) -> None:
    """Send each open connection one more byte every 0.2 s; note when the server closes it."""
    stop = time.monotonic() + DEADLINE_S + 20
    while len(closed_at) < len(clients) and time.monotonic() < stop:
        for k, (sock, byte) in enumerate(clients):
            if k in closed_at:
                continue
            try:
                data = sock.recv(4096)
                if data == b"" or data.startswith(b"HTTP/1.1 408"):
                    closed_at[k] = time.monotonic()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                closed_at[k] = time.monotonic()
                continue
            try:
                if byte:
                    sock.send(byte)
            except OSError:
                closed_at[k] = time.monotonic()
        time.sleep(0.2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("http_impl", "slow"), [("auto", 40), ("h11", 8)])
def test_slowloris_is_cut_off_and_does_not_starve_others(
    start_server: Any, http_impl: str, slow: int
) -> None:
    srv = start_server(
        ServeConfig(env_ids=["llm/Math-v0"], request_timeout_s=DEADLINE_S), http=http_impl
    )
    _, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": "llm/Math-v0"})  # imports the env
    http(srv, "DELETE", f"/v1/sessions/{doc['session_id']}")
    began = time.monotonic()
    clients = _slow_clients(srv, slow)
    closed_at: dict[int, float] = {}
    trickler = threading.Thread(target=_trickle, args=(clients, closed_at))
    trickler.start()
    try:
        served = []
        for _ in range(3):  # a normal client, while every slow one is open
            status, _, doc = http(srv, "POST", "/v1/sessions", {"env_id": "llm/Math-v0"})
            assert status == 201
            sid = doc["session_id"]
            assert http(srv, "POST", f"/v1/sessions/{sid}/reset", {"seed": 0})[0] == 200
            assert http(srv, "POST", f"/v1/sessions/{sid}/step", {"action": "1"})[0] == 200
            assert http(srv, "DELETE", f"/v1/sessions/{sid}")[0] == 200
            served.append(time.monotonic())
    finally:
        trickler.join()
        for sock, _ in clients:
            sock.close()
    assert len(closed_at) == slow, f"{slow - len(closed_at)} slow connections still open"
    first_cut = min(closed_at.values())
    assert max(served) < first_cut, "the normal client waited for the slow ones"
    assert first_cut - began >= DEADLINE_S * 0.8  # cut by the deadline, not at once
    assert max(closed_at.values()) - began <= DEADLINE_S + 5.0
    assert len(srv.app.pool) == 0  # the trickled create never made a session


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass  # gone meanwhile
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _drop(ws: Any) -> None:
    """Cut a WebSocket's TCP connection with a reset: no close frame, no FIN."""
    sock = ws.socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _until(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _ask(ws: Any, doc: dict) -> dict:
    ws.send(json.dumps(doc))
    return json.loads(ws.recv(timeout=60))


@pytest.mark.timeout(180)
def test_abrupt_disconnects_leave_nothing_behind() -> None:
    warm = gym.make("llm/Coding-v0")  # the process-wide sandbox starts once, before counting
    warm.reset(seed=0)
    warm.step(warm.unwrapped.oracle_action())
    warm.close()
    threads, children = threading.active_count(), _descendants(os.getpid())
    srv = Server(ServeConfig(env_ids=["llm/ToolCalling-v0", "llm/Coding-v0"], workers=4)).start()
    fds = _fds()  # uvloop keeps a pipe for the process once a loop ran: counted from here
    try:
        pool = srv.app.pool
        with connect(ws_url(srv)) as ws:
            made = _ask(ws, {"id": 1, "op": "create", "env_id": "llm/ToolCalling-v0"})
            tool_sid = made["result"]["session_id"]
            _ask(ws, {"id": 2, "op": "reset", "session_id": tool_sid, "seed": 0})
            db = pool.get(tool_sid, "anonymous").env.unwrapped.episode.extra["db"]
            made = _ask(ws, {"id": 3, "op": "create", "env_id": "llm/Coding-v0"})
            code_sid = made["result"]["session_id"]
            _ask(ws, {"id": 4, "op": "reset", "session_id": code_sid, "seed": 0})
            spin = "```python\nwhile True:\n    pass\n```"
            ws.send(json.dumps({"id": 5, "op": "step", "session_id": code_sid, "action": spin}))
            running = pool.get(code_sid, "anonymous").lock
            _until(running.locked, 30)  # the step is in the sandbox
            _drop(ws)
        # a create cut mid-body, and a create whose client is gone before the reply
        half = _open(srv)
        half.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{")
        half.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        half.close()
        with connect(ws_url(srv)) as ws:
            ws.send(json.dumps({"id": 6, "op": "create", "env_id": "llm/ToolCalling-v0"}))
            _drop(ws)
        _until(lambda: len(pool) == 0)
        with pytest.raises(sqlite3.ProgrammingError):
            db.execute("SELECT 1")  # the episode's database was closed with its session
        # the sandboxed run is gone (the sandbox replaces the warm cells it used: count them)
        _until(lambda: len(_descendants(os.getpid())) <= len(children))
    finally:
        srv.stop()
    _until(lambda: threading.active_count() <= threads and _fds() <= fds, 30)


# --- envs that fail on close, hang in a call, or take a while to make ------------------------


class _PlainEnv(gym.Env):
    """A one-step text env, the base of the faulty ones below."""

    observation_space = gym.spaces.Text(100)
    action_space = gym.spaces.Text(100)

    def __init__(self) -> None:
        self.closed = False

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "go", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "done", 0.0, True, False, {}

    def close(self) -> None:
        self.closed = True


class _BadCloseEnv(_PlainEnv):
    def close(self) -> None:
        super().close()
        raise RuntimeError("close failed on purpose")


class _StuckEnv(_PlainEnv):
    """Its step waits for :data:`_RELEASE` (a call stuck in the env)."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        _RELEASE.wait(60)
        return super().step(action)


class _SlowMakeEnv(_PlainEnv):
    def __init__(self) -> None:
        time.sleep(1.0)
        super().__init__()


_RELEASE = threading.Event()
BAD_CLOSE, STUCK, SLOW_MAKE = "servetest/BadClose-v0", "servetest/Stuck-v0", "servetest/SlowMake-v0"
for _id, _cls in ((BAD_CLOSE, _BadCloseEnv), (STUCK, _StuckEnv), (SLOW_MAKE, _SlowMakeEnv)):
    gym.register(_id, entry_point=_cls, disable_env_checker=True)


def _make(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    return gym.make(env_id, disable_env_checker=True, **kwargs)


def test_closing_goes_on_past_envs_whose_close_raises(caplog: pytest.LogCaptureFixture) -> None:
    register_declarative()
    pool = SessionPool(_make, idle_timeout_s=0.01)
    made = [pool.create(e, {}, "a") for e in (BAD_CLOSE, "servetest/Capitals-v0", BAD_CLOSE)]
    plain = pool.create("servetest/Capitals-v0", {}, "a")
    assert pool.expire_idle(now=time.monotonic() + 1) == 4
    assert len(pool) == 0 and pool.expired == 4 and all(s.closed for s in made)
    assert all(s.env.unwrapped.closed for s in made if s.env_id == BAD_CLOSE)
    assert sum("close failed on purpose" in r.exc_text for r in caplog.records if r.exc_text) == 2
    assert plain.env_closed
    again = [pool.create(BAD_CLOSE, {}, "a") for _ in range(3)]
    pool.close_all()
    assert len(pool) == 0 and all(s.env.unwrapped.closed for s in again)


@pytest.mark.timeout(60)
def test_the_idle_reaper_outlives_envs_whose_close_raises(start_server: Any) -> None:
    srv = start_server(
        ServeConfig(env_ids=[BAD_CLOSE, "servetest/Capitals-v0"], idle_timeout_s=0.2)
    )
    for env_id in (BAD_CLOSE, BAD_CLOSE, "servetest/Capitals-v0"):
        assert http(srv, "POST", "/v1/sessions", {"env_id": env_id})[0] == 201
    _until(lambda: len(srv.app.pool) == 0, 10)
    assert http(srv, "POST", "/v1/sessions", {"env_id": "servetest/Capitals-v0"})[0] == 201
    _until(lambda: len(srv.app.pool) == 0, 10)  # the reaper still runs
    assert srv.app.pool.expired == 4


@pytest.mark.timeout(60)
def test_closing_a_session_stuck_in_a_call_does_not_hang() -> None:
    from llmgym.serve.app import create_app

    _RELEASE.clear()
    app = create_app(ServeConfig(env_ids=[STUCK], close_timeout_s=0.3))
    service, pool = app.service, app.pool
    session = pool.create(STUCK, {}, "a")
    session.env.reset(seed=0)
    loop = asyncio.new_event_loop()  # the server's loop, here in a thread of its own
    looping = threading.Thread(target=loop.run_forever, daemon=True)
    looping.start()
    step = partial(pool.call, session.id, "a", lambda s: s.env.step("x"))
    stuck = asyncio.run_coroutine_threadsafe(service.run(step), loop)  # on an env thread
    _until(session.lock.locked, 10)
    try:
        start = time.monotonic()
        service.shutdown()  # close_all, then the env threads: each waits 0.3 s at most
        assert time.monotonic() - start < 3.0
        assert session.closed and len(pool) == 0 and not session.env.unwrapped.closed
    finally:
        _RELEASE.set()
    try:
        assert stuck.result(30)[0] == "done"  # the call in flight finishes...
        assert session.env.unwrapped.closed  # ...and closes the env as it returns
    finally:
        loop.call_soon_threadsafe(loop.stop)
        looping.join(10)
        loop.close()


@pytest.mark.timeout(60)
def test_a_create_whose_client_left_is_closed_at_once(start_server: Any) -> None:
    srv = start_server(ServeConfig(env_ids=[SLOW_MAKE], idle_timeout_s=None))
    sock = _open(srv)
    body = json.dumps({"env_id": SLOW_MAKE}).encode()
    sock.sendall(
        b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    _until(lambda: srv.app.pool._reserved == 1, 10)  # the env is being made
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    _until(lambda: srv.app.pool.created == 1, 10)
    _until(lambda: len(srv.app.pool) == 0, 5)
