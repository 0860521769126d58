"""Playing planned episodes against a policy, concurrently, one record per finished episode.

Batched policies (local models: ``Policy.generate``) get one batch holding every episode that is
waiting for a turn; async policies (HTTP servers: ``Policy.agenerate`` overridden) get one request
per episode as soon as it is ready. Env steps run in a thread pool, envs are pooled per entry. A
policy that raises, returns the wrong type or an invalid message is recorded as a failed episode
(``status="policy_error"``) after the env grades an empty message; an env that raises is recorded
as ``status="env_error"`` (and its env is not reused). Neither stops the run. With a Ray address
the envs are :class:`~llmgym.ray.RayEnv`\\ s of one :class:`~llmgym.ray.EnvPool` per entry (the
policy stays here; each env call runs in an actor on the cluster), and the records are the same.
What happens to the records (the results file, resuming) is ``runner.py``'s job.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence, Sized
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from llmgym.evaluation import provenance as prov
from llmgym.evaluation.config import EvalConfig
from llmgym.evaluation.plan import EpisodePlan, make_env
from llmgym.evaluation.rollouts import task_hash

MAX_STORED_TASK_CHARS = 256_000
"""A task larger than this (as JSON) is stored as its id and hash only; the transcript holds its prompt."""
_HARD_STEP_CAP = 10_000
"""Steps after which an episode of an env that never ends is recorded as an env error."""
_RAY_IDLE_S = 2.0
"""With ``ray``: seconds after which an idle env actor is stopped (its CPU freed)."""


def _int(value: Any) -> int:
    try:
        out = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return out if out >= 0 else 0


def _check_response(response: Any) -> tuple[Any, str | None, int, int]:
    """(action, error, prompt tokens, completion tokens) of whatever the policy returned."""
    from llmgym.policies import Response

    if not isinstance(response, Response):
        return "", f"policy returned {type(response).__name__}, not a Response", 0, 0
    tokens = _int(response.prompt_tokens), _int(response.completion_tokens)
    if response.error:
        return "", str(response.error), *tokens
    if not isinstance(response.action, (str, Mapping)):
        return (
            "",
            f"policy action is a {type(response.action).__name__}, not a str or dict",
            *tokens,
        )
    return response.action, None, *tokens


def _chars(action: Any) -> int:
    if isinstance(action, str):
        return len(action)
    if isinstance(action, Mapping):
        content = action.get("content")
        n = len(content) if isinstance(content, str) else 0
        calls = action.get("tool_calls")
        return n + (len(json.dumps(calls, default=repr)) if calls else 0)
    return 0


class EpisodePlayer:
    """Plays planned episodes concurrently and hands each finished record to ``on_record``."""

    def __init__(
        self,
        config: EvalConfig,
        policy: Any,
        todo: Sequence[EpisodePlan],
        on_record: Callable[[dict[str, Any]], None],
        *,
        ray: str | None = None,
    ):
        self.config = config
        self.ray = ray
        """The Ray cluster whose actors hold the envs (None: envs in this process)."""
        self._ray_pools: dict[int, Any] = {}
        self._ray_started = False
        self._ray_actors = 1
        """With ``ray``: each entry's pool's ``max_actors`` (set once connected)."""
        self.policy = policy
        self.pending = list(reversed(todo))
        self.on_record = on_record
        self.mode = config.mode
        if self.mode == "auto":
            from llmgym.policies import Policy

            overridden = type(policy).agenerate is not Policy.agenerate
            self.mode = "async" if overridden else "batch"
        self.max_batch = config.concurrency
        self._envs: dict[int, list[Any]] = defaultdict(list)
        self._queue: list[tuple[Any, asyncio.Future[Any]]] = []
        self._busy = False
        self._active = 0
        self._acquiring = 0
        """Episodes waiting for a Ray env actor: they do not hold back a batch."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failure: BaseException | None = None

    # env pool ----------------------------------------------------------------------------
    def _take_env(self, entry: int) -> Any:
        pool = self._envs[entry]
        return pool.pop() if pool else make_env(self.config.envs[entry])

    def _ray_pool(self, entry: int) -> Any:
        """The entry's pool of env actors: one per episode in flight, at most one per CPU of
        the cluster (made on first use, in the event loop's thread; the cluster's CPUs were
        counted off the loop when connecting). Idle actors stop after
        a few seconds, so that the next entry's actors get the CPUs (episodes run in plan
        order: an entry's last episodes overlap only the next entry's first ones)."""
        from llmgym.ray import EnvPool

        if entry not in self._ray_pools:
            e = self.config.envs[entry]
            self._ray_pools[entry] = EnvPool(
                e.id, e.kwargs, max_actors=self._ray_actors, idle_timeout_s=_RAY_IDLE_S
            )
        return self._ray_pools[entry]

    async def _take(self, entry: int) -> Any:
        if self.ray is None:
            return self._take_env(entry)
        pool = self._ray_pool(entry)
        self._acquiring += 1
        self._maybe_flush()
        try:  # waits for an actor to start or come free: off the loop, which gives envs back
            return await asyncio.to_thread(pool.acquire)
        finally:
            self._acquiring -= 1

    def _give_env(self, entry: int, env: Any, broken: bool) -> None:
        if self.ray is not None and broken:
            env.discard()  # its actor is stopped, not reused
        elif self.ray is not None:
            env.close()  # its actor goes back to the pool
        elif broken:
            try:
                env.close()
            except Exception:
                pass
        else:
            self._envs[entry].append(env)

    async def _env(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._env_pool is None:
            return fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._env_pool, lambda: fn(*args, **kwargs))

    # the policy ------------------------------------------------------------------------------
    async def _ask(self, request: Any) -> Any:
        from llmgym.policies import Response

        if self.mode == "async":
            try:
                out = await self.policy.agenerate([request])
            except Exception as e:
                return Response("", error=f"{type(e).__name__}: {e}")
            if not isinstance(out, Sequence) or len(out) != 1:
                return Response("", error=f"policy returned {type(out).__name__}, not 1 response")
            return out[0]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((request, fut))
        self._maybe_flush()
        return await fut

    def _maybe_flush(self) -> None:
        if self._busy or not self._queue:
            return
        if len(self._queue) >= min(self.max_batch, self._active - self._acquiring):
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            self._busy = True
            self._spawn(self._run_batch(batch))

    async def _run_batch(self, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        from llmgym.policies import Response

        requests = [r for r, _ in batch]
        loop = asyncio.get_running_loop()
        try:
            out = await loop.run_in_executor(self._policy_pool, self.policy.generate, requests)
            if not isinstance(out, Sequence) or len(out) != len(requests):
                got = len(out) if isinstance(out, Sized) else type(out).__name__
                out = [
                    Response(
                        "", error=f"policy returned {got} responses for {len(requests)} requests"
                    )
                ] * len(requests)
        except Exception as e:
            out = [Response("", error=f"{type(e).__name__}: {e}")] * len(requests)
        finally:
            self._busy = False
        for (_, fut), response in zip(batch, out, strict=True):
            if not fut.done():
                fut.set_result(response)
        self._maybe_flush()

    # episodes ---------------------------------------------------------------------------------
    async def _episode(self, plan: EpisodePlan) -> dict[str, Any]:
        from llmgym.policies import Request

        entry = self.config.envs[plan.entry]
        env = await self._take(plan.entry)
        start = time.perf_counter()
        policy_time = 0.0
        record: dict[str, Any] = {
            "key": plan.key,
            "env": entry.name,
            "env_id": entry.id,
            "env_kwargs": prov._jsonable(entry.kwargs),
            "task_id": plan.task_id,
            "task_index": plan.task_index,
            "sample": plan.sample,
            "seed": plan.seed,
        }
        rewards: list[float] = []
        components: dict[str, float] = defaultdict(float)
        facts: list[Any] = []
        status, problem, broken = "ok", None, False
        info: dict[str, Any] = {}
        terminated = truncated = False
        prompt_tokens = completion_tokens = chars = 0
        tools: list[Any] = []
        try:
            _, info = await self._env(env.reset, seed=plan.seed, options={"task_id": plan.task_id})
            record.update(
                domain=info.get("domain"),
                family=info.get("family"),
                difficulty=info.get("difficulty"),
            )
            episode = env.unwrapped.episode
            if episode is not None:
                task = episode.task.to_dict()
                text = json.dumps(task, default=repr)
                record["task_hash"] = task_hash(task)
                record["task"] = task if len(text) <= MAX_STORED_TASK_CHARS else None
            tools = info.get("tools") or []
            messages = info.get("messages") or []
            max_turns = _int(info.get("max_turns"))
            cap = min(_HARD_STEP_CAP, max_turns + 1) if max_turns else _HARD_STEP_CAP
            for _ in range(cap):
                t0 = time.perf_counter()
                response = await self._ask(Request(messages=messages, tools=tools, env=env))
                policy_time += time.perf_counter() - t0
                action, problem, p_tok, c_tok = _check_response(response)
                prompt_tokens += p_tok
                completion_tokens += c_tok
                chars += _chars(action)
                try:
                    step = await self._env(env.step, action)
                except gym.error.InvalidAction as e:
                    problem = f"invalid action: {e}"
                    step = await self._env(env.step, "")
                _, reward, terminated, truncated, info = step
                rewards.append(float(reward))
                for name, value in (info.get("reward_components") or {}).items():
                    components[name] += float(value)
                if info.get("exec") is not None:
                    facts.append(info["exec"])
                messages = info.get("messages") or messages
                if problem is not None:
                    status = "policy_error"
                    break
                if terminated or truncated:
                    break
            else:
                status, problem = "env_error", f"the episode did not end after {cap} steps"
                broken = True
        except Exception as e:
            status, problem, broken = "env_error", f"{type(e).__name__}: {e}", True
            messages = info.get("messages") or []
        finally:
            self._give_env(plan.entry, env, broken)
        total = float(sum(rewards))
        record.update(
            status=status,
            error=problem,
            reward=total if math.isfinite(total) else 0.0,
            step_rewards=rewards,
            success=status != "env_error" and bool(info.get("is_success")),
            components=dict(components),
            turns=len(rewards),
            terminated=bool(terminated),
            truncated=bool(truncated),
            feedback=info.get("feedback", ""),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            completion_chars=chars,
            messages=messages,
            tools=tools,
            wall_time_s=round(time.perf_counter() - start, 6),
            policy_time_s=round(policy_time, 6),
        )
        if facts:
            record["exec"] = facts
        return record

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
            self._finished.set()

    def _launch(self) -> None:
        while self.pending and self._active < self.config.concurrency and self._failure is None:
            plan = self.pending.pop()
            self._active += 1
            self._spawn(self._play(plan))

    async def _play(self, plan: EpisodePlan) -> None:
        try:
            record = await self._episode(plan)
            self.on_record(record)
        finally:
            self._active -= 1
            self._launch()
            self._maybe_flush()
            if self._active == 0 and not self.pending:
                self._finished.set()

    async def run(self) -> None:
        self._finished = asyncio.Event()
        workers = self.config.env_workers
        if self.ray is not None:
            from llmgym.ray.cluster import cluster_cpus, connect

            self._ray_started = connect(self.ray)
            cpus = await asyncio.to_thread(cluster_cpus)
            self._ray_actors = min(self.config.concurrency, cpus)
            # env calls wait on actors: one thread per actor that can be busy at once
            workers = max(workers, self._ray_actors)
        self._env_pool = ThreadPoolExecutor(workers, "llmgym-env") if workers else None
        self._policy_pool = ThreadPoolExecutor(1, "llmgym-policy")
        try:
            if not self.pending:
                return
            self._launch()
            await self._finished.wait()
            if self._failure is not None:
                raise self._failure
        finally:
            for task in list(self._tasks):
                task.cancel()
            if self._env_pool is not None:
                self._env_pool.shutdown(wait=False, cancel_futures=True)
            self._policy_pool.shutdown(wait=False, cancel_futures=True)
            for pool in self._envs.values():
                for env in pool:
                    try:
                        env.close()
                    except Exception:
                        pass
            self._close_ray()

    def _close_ray(self) -> None:
        for ray_pool in self._ray_pools.values():
            ray_pool.close()
        if self._ray_started:
            from llmgym.ray.cluster import ray_module

            ray_module().shutdown()
