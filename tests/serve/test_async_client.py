"""The asyncio client: the same episodes as in-process, retried only where sending again is safe.

Against the real server (HTTP and WebSocket): episodes equal in-process, the env's own errors,
snapshots, batches, and every session closed by ``aclose``. Against servers on loopback written
here to misbehave: a proxy in front of the real server that loses a reply after the server ran
the call (step is not sent again, get_state is), a port that refuses connections at first
(create is retried: it never arrived), a server that never answers (a timeout that says so),
one that counts requests in flight (back-pressure), one that says 429/503 with Retry-After,
and replies of every wrong shape (a RemoteError, never a KeyError from deep inside).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gymnasium as gym
import httpx
import pytest
import websockets

from llmgym import error
from llmgym.remote import AsyncClient, RemoteError, ReplyLost, ServerUnreachable
from llmgym.serve import Server

from .conftest import DECLARATIVE_ID

TRANSPORTS = ["http", "ws"]


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


def plan_of(env_id: str, seed: int, policy: str) -> tuple[list[Any], list[tuple]]:
    """The actions of one episode in-process and what each step gave (obs, reward, done...)."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    actions, steps = [], [(obs, info["task_id"])]
    for _ in range(20):
        action = env.unwrapped.oracle_action() if policy == "oracle" else "I am not sure."
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        steps.append((obs, float(reward), terminated, truncated, info["is_success"]))
        if terminated or truncated:
            break
    env.close()
    return actions, steps


def wait_empty(server: Server) -> None:
    """Wait until the server holds no session (a WebSocket's close as the server sees it go)."""
    deadline = time.monotonic() + 30
    while len(server.app.pool) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(server.app.pool) == 0


async def play(env: Any, seed: int, actions: list[Any]) -> list[tuple]:
    obs, info = await env.reset(seed=seed)
    out = [(obs, info["task_id"])]
    for action in actions:
        obs, reward, terminated, truncated, info = await env.step(action)
        out.append((obs, reward, terminated, truncated, info["is_success"]))
    return out


# --- against the real server ----------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_concurrent_episodes_equal_in_process(server: Server, transport: str) -> None:
    jobs = [
        (env_id, seed, policy)
        for env_id in ("llm/Math-v0", "llm/ToolCalling-v0", DECLARATIVE_ID)
        for seed in (0, 1, 2, 3)
        for policy in ("oracle", "wrong")
    ]
    plans = {job: plan_of(*job) for job in jobs}

    async def main() -> list[list[tuple]]:
        async with AsyncClient(server.url, transport=transport, max_connections=8) as client:
            envs = await asyncio.gather(*(client.make(job[0]) for job in jobs))
            return await asyncio.gather(
                *(play(env, job[1], plans[job][0]) for env, job in zip(envs, jobs, strict=True))
            )

    results = run(main())
    assert results == [plans[job][1] for job in jobs]
    wait_empty(server)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_errors_come_back_as_the_envs_own(server: Server, transport: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, transport=transport) as client:
            env = await client.make("llm/Math-v0")
            with pytest.raises(error.ResetNeeded):
                await env.step("42")
            await env.reset(seed=0)
            with pytest.raises(gym.error.InvalidAction):
                await env.step(None)
            with pytest.raises(error.InvalidState):
                await env.set_state({"format": 99})
            with pytest.raises(error.UnknownEnv, match="did you mean 'llm/Math-v0'"):
                await client.make("llm/Maths-v0")
            await env.close()
            with pytest.raises(error.Error, match="is closed"):
                await env.reset(seed=0)

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_snapshots_round_trip(server: Server, transport: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, transport=transport) as client:
            env = await client.make("llm/ToolCalling-v0")
            await env.reset(seed=3)
            state = await env.get_state()
            first = await env.step({"content": "checking", "tool_calls": []})
            await env.set_state(state)
            second = await env.step({"content": "checking", "tool_calls": []})
            assert first[:4] == second[:4]
            assert (await env.get_state())["turn"] == 1

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_step_batch_keeps_order_and_reports_each_failure_in_place(
    server: Server, transport: str
) -> None:
    seeds = [10, 11, 12, 13]
    plans = [plan_of("llm/Math-v0", seed, "oracle") for seed in seeds]

    async def main() -> None:
        async with AsyncClient(server.url, transport=transport, max_connections=2) as client:
            envs = await asyncio.gather(*(client.make("llm/Math-v0") for _ in seeds))
            for env, seed in zip(envs[1:], seeds[1:], strict=True):
                await env.reset(seed=seed)
            steps = [(env, plan[0][0]) for env, plan in zip(envs, plans, strict=True)]
            results = await client.step_batch(steps, return_exceptions=True)
            assert isinstance(results[0], error.ResetNeeded)  # never reset: its own failure
            for result, plan in zip(results[1:], plans[1:], strict=True):
                assert not isinstance(result, Exception)
                assert (result[0], result[1], result[2], result[3]) == plan[1][1][:4]
            with pytest.raises(error.ResetNeeded):
                await client.step_batch(steps[:1])
            with pytest.raises(error.Error, match="at most once"):
                await client.step_batch([steps[1], steps[1]])

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_aclose_closes_every_session_it_opened(server: Server, transport: str) -> None:
    wait_empty(server)

    async def main() -> None:
        async with AsyncClient(server.url, transport=transport, max_connections=3) as client:
            envs = await asyncio.gather(*(client.make("llm/Math-v0") for _ in range(12)))
            await envs[0].close()
            assert len(server.app.pool) == 11 and len(client.envs) == 11
        assert all(env.closed for env in envs)

    run(main())
    wait_empty(server)


def test_a_refused_token_says_so(secure_server: Server) -> None:
    async def main(transport: str) -> None:
        async with AsyncClient(secure_server.url, transport=transport, token="wrong") as client:
            await client.make("llm/Math-v0")

    with pytest.raises(RemoteError, match="HTTP 401"):
        run(main("http"))
    with pytest.raises(RemoteError, match="HTTP 403.*token"):
        run(main("ws"))


# --- misbehaving servers on loopback ----------------------------------------------------------

Answer = Callable[[str, str, bytes], Awaitable[bytes | None]]
"""Bytes to write back; ending in CLOSE: written, then the connection closed; None: dropped."""

CLOSE = b"<close>"


def reply(status: int, doc: Any, headers: dict[str, str] | None = None) -> bytes:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


CREATED = {
    "session_id": "s1",
    "observation_space": {"min_length": 0, "max_length": None},
    "action_space": {"min_length": 0, "max_length": None},
    "reward_range": [0, 1],
    "outcome_reward_range": [0, 1],
    "metadata": {"render_modes": []},
}
STEPPED = {"observation": "", "reward": 1.0, "terminated": True, "truncated": False, "info": {}}


class LoopbackHttp:
    """An HTTP/1.1 server written out by hand: each request goes to ``answer(method, path,
    body)``, whose bytes are written back (None: the connection is dropped there). It counts
    the requests by route and the most in flight at once."""

    def __init__(self, answer: Answer, sock: socket.socket | None = None):
        self.answer = answer
        self.sock = sock
        self.seen: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def __aenter__(self) -> LoopbackHttp:
        if self.sock is not None:
            self.server = await asyncio.start_server(self._serve, sock=self.sock)
        else:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    def count(self, route: str) -> int:
        return sum(1 for seen in self.seen if seen.endswith(route))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path, _ = head[0].split(" ")
                length = next(
                    (int(h.split(":")[1]) for h in head if h.lower().startswith("content-length")),
                    0,
                )
                body = await reader.readexactly(length)
                self.seen.append(f"{method} {path}")
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
                try:
                    out = await self.answer(method, path, body)
                finally:
                    self.in_flight -= 1
                if out is None:
                    return
                writer.write(out.removesuffix(CLOSE))
                await writer.drain()
                if out.endswith(CLOSE):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.mark.timeout(120)
def test_a_lost_reply_sends_step_and_reset_once_but_get_state_again(server: Server) -> None:
    """The proxy passes each call to the real server and, the first time for each route, drops
    the connection instead of returning the reply: the call ran, its reply is lost."""
    dropped: set[str] = set()

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url) as upstream:

            async def answer(method: str, path: str, body: bytes) -> bytes | None:
                response = await upstream.request(method, path, content=body)
                route = f"{method} {path.rsplit('/', 1)[-1]}"
                if route in ("POST reset", "POST step", "GET state") and route not in dropped:
                    dropped.add(route)
                    return None
                return reply(response.status_code, response.content)

            async with LoopbackHttp(answer) as proxy, AsyncClient(proxy.url) as client:
                env = await client.make("llm/Math-v0")
                with pytest.raises(ReplyLost, match="may have run"):
                    await env.reset(seed=0)
                actions, _ = plan_of("llm/Math-v0", 0, "oracle")
                with pytest.raises(ReplyLost, match="may have run"):
                    await env.step(actions[0])
                state = await env.get_state()  # the first reply is lost, the second arrives
                assert (proxy.count("reset"), proxy.count("step"), proxy.count("state")) == (
                    1,
                    1,
                    2,
                )
                assert state["turn"] == 1 and state["done"]  # the server ran reset and step once

    run(main())


def test_a_call_that_never_reached_the_server_is_sent_again_even_create() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    port = sock.getsockname()[1]

    async def answer(method: str, path: str, body: bytes) -> bytes:
        return reply(201, CREATED)

    async def main() -> None:
        client = AsyncClient(f"http://127.0.0.1:{port}", retries=8, backoff_s=0.05)
        making = asyncio.ensure_future(client.make("llm/Math-v0"))
        await asyncio.sleep(0.3)
        assert not making.done()
        sock.listen()
        async with LoopbackHttp(answer, sock) as fake:
            env = await making
            assert env.session_id == "s1" and fake.count("/v1/sessions") == 1
            await client.aclose()

    run(main())
    with pytest.raises(ServerUnreachable, match="cannot reach"):
        run(AsyncClient(f"http://127.0.0.1:{port}", retries=1).make("llm/Math-v0"))


@pytest.mark.timeout(60)
def test_a_server_that_never_answers_times_out_with_a_clear_error() -> None:
    async def answer(method: str, path: str, body: bytes) -> bytes:
        if method == "POST" and path == "/v1/sessions":
            return reply(201, CREATED)
        await asyncio.sleep(3600)
        return b""

    async def main() -> None:
        async with LoopbackHttp(answer) as fake:
            client = AsyncClient(fake.url, timeout_s=0.3, retries=2, backoff_s=0.01)
            env = await client.make("llm/Math-v0")
            assert client.envs == [env]
            start = time.monotonic()
            with pytest.raises(ReplyLost, match=r"step .* timed out after 0.3 s"):
                await env.step("42")
            assert time.monotonic() - start < 2 and fake.count("/step") == 1
            with pytest.raises(ReplyLost, match="timed out"):
                await env.get_state()
            assert fake.count("/state") == 3  # idempotent: tried 1 + retries times
            await client.aclose()  # its close times out too, within the same bounds

    run(main())


@pytest.mark.parametrize("max_connections, max_in_flight, expected", [(16, 5, 5), (3, 64, 3)])
def test_back_pressure_caps_the_requests_in_flight_at_the_server(
    max_connections: int, max_in_flight: int, expected: int
) -> None:
    async def answer(method: str, path: str, body: bytes) -> bytes:
        if path == "/v1/sessions":
            return reply(201, CREATED)
        await asyncio.sleep(0.02)
        return reply(200, STEPPED)

    async def main() -> None:
        async with LoopbackHttp(answer) as fake:
            client = AsyncClient(
                fake.url, max_connections=max_connections, max_in_flight=max_in_flight
            )
            envs = [await client.make("llm/Math-v0") for _ in range(20)]
            results = await asyncio.gather(*(env.step(str(i)) for i in range(3) for env in envs))
            assert len(results) == 60 and fake.count("/step") == 60  # nothing dropped
            assert fake.most_in_flight == expected
            await client.aclose()

    run(main())


def test_429_and_503_with_retry_after_are_waited_out_and_sent_again() -> None:
    answers = {
        "step": [reply(429, {"error": {"type": "RateLimited", "message": "slow down"}}, {"Retry-After": "1"})],
        "reset": [reply(503, {"error": {"type": "Busy", "message": "x", "retry_after_s": 0.2}}, {"Retry-After": "1"})],
    }  # fmt: skip

    async def answer(method: str, path: str, body: bytes) -> bytes:
        route = path.rsplit("/", 1)[-1]
        if route == "sessions":
            return reply(201, CREATED)
        if answers.get(route):
            return answers[route].pop(0)
        if route == "state":  # 503 without Retry-After: the server is full, not busy
            return reply(503, {"error": {"type": "TooManySessions", "message": "full"}})
        return reply(200, STEPPED if route == "step" else {"observation": "", "info": {}})

    async def main() -> None:
        async with LoopbackHttp(answer) as fake:
            client = AsyncClient(fake.url, backoff_s=0.01)
            env = await client.make("llm/Math-v0")
            start = time.monotonic()
            assert (await env.step("42"))[1] == 1.0
            assert time.monotonic() - start >= 1.0  # the header's whole second
            start = time.monotonic()
            await env.reset(seed=0)
            assert 0.2 <= time.monotonic() - start < 0.9  # the body's precise wait
            with pytest.raises(RemoteError, match="full .*HTTP 503"):
                await env.get_state()
            assert (fake.count("/step"), fake.count("/reset"), fake.count("/state")) == (2, 2, 1)
            await client.aclose()

    run(main())


HOSTILE = {
    "not JSON": reply(200, b"<html>hello</html>"),
    "a JSON list": reply(200, [1, 2]),
    "no reward": reply(200, {k: v for k, v in STEPPED.items() if k != "reward"}),
    "a text reward": reply(200, {**STEPPED, "reward": "1.0"}),
    "a NaN reward": reply(200, json.dumps({**STEPPED, "reward": float("nan")}).encode()),
    "a text terminated": reply(200, {**STEPPED, "terminated": "yes"}),
    "a list info": reply(200, {**STEPPED, "info": []}),
    "a 500 page": reply(500, b"<h1>Internal Server Error</h1>"),
    "an error naming SystemExit": reply(400, {"error": {"type": "SystemExit", "message": "x"}}),
    "an error that is a string": reply(400, {"error": "bad"}),
    "a reply over the size limit": reply(200, {**STEPPED, "observation": "x" * 5000}),
    "a body cut short": b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"observation"' + CLOSE,
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_malformed_reply_raises_remote_error_never_a_crash(case: str) -> None:
    async def answer(method: str, path: str, body: bytes) -> bytes:
        return reply(201, CREATED) if path == "/v1/sessions" else HOSTILE[case]

    async def main() -> None:
        async with LoopbackHttp(answer) as fake:
            client = AsyncClient(fake.url, max_reply_bytes=4096, retries=0)
            env = await client.make("llm/Math-v0")
            with pytest.raises(RemoteError):
                await env.step("42")
            await client.aclose()

    run(main())


@pytest.mark.parametrize(
    "created",
    [{**CREATED, "session_id": ""}, {**CREATED, "reward_range": [0]}, {"session_id": "s"}, []],
)
def test_a_malformed_create_reply_raises_remote_error(created: Any) -> None:
    async def answer(method: str, path: str, body: bytes) -> bytes:
        return reply(201, created)

    async def main() -> None:
        async with LoopbackHttp(answer) as fake, AsyncClient(fake.url) as client:
            with pytest.raises(RemoteError, match="reply"):
                await client.make("llm/Math-v0")

    run(main())


# --- a misbehaving WebSocket server -----------------------------------------------------------


@pytest.mark.timeout(60)
def test_websocket_frames_of_the_wrong_shape_and_a_dropped_connection() -> None:
    """Replies out of order and to unknown ids are matched by id; a bad reply fails its call
    only; a frame that is not JSON, or the connection closing, fails every call in flight."""

    async def respond(ws: Any, doc: dict[str, Any]) -> None:
        rid, op, action = doc["id"], doc["op"], doc.get("action")
        if op == "create":
            await ws.send(json.dumps({"id": rid, "ok": True, "result": CREATED}))
        elif action == "slow":
            await asyncio.sleep(0.2)
            await ws.send(
                json.dumps({"id": 9999, "ok": True, "result": {**STEPPED, "reward": 0.5}})
            )
            await ws.send(
                json.dumps({"id": rid, "ok": True, "result": {**STEPPED, "reward": 0.25}})
            )
        elif action == "list":
            await ws.send(json.dumps({"id": rid, "ok": True, "result": [1]}))
        elif action == "garbage":
            await ws.send("not json")
        elif action == "hang":
            await asyncio.sleep(0.1)
            await ws.close()
        elif action != "never":
            await ws.send(json.dumps({"id": rid, "ok": True, "result": STEPPED}))

    async def handler(ws: Any) -> None:
        tasks = set()
        async for frame in ws:  # each request answered on its own: replies out of order
            task = asyncio.ensure_future(respond(ws, json.loads(frame)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def main() -> None:
        async with websockets.serve(handler, "127.0.0.1", 0) as fake:
            port = fake.sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}"
            async with AsyncClient(url, transport="ws", max_connections=1) as client:
                env = await client.make("llm/Math-v0")
                slow, fast = await asyncio.gather(env.step("slow"), env.step("fast"))
                assert (slow[1], fast[1]) == (0.25, 1.0)  # fast answered first; 9999 ignored
                with pytest.raises(RemoteError, match="Malformed WebSocket reply"):
                    await env.step("list")
                with pytest.raises(ReplyLost, match="malformed frame"):
                    await env.step("garbage")
                with pytest.raises(RemoteError, match="closed its sessions"):
                    await env.get_state()
                env2 = await client.make("llm/Math-v0")  # a new connection for a new session
                assert env2.link is not env.link and (await env2.step("fast"))[1] == 1.0
                with pytest.raises(ReplyLost, match="in flight"):
                    await asyncio.gather(env2.step("hang"), env2.step("never"))

    run(main())
