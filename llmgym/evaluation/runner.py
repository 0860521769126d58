"""The evaluation runner: plan episodes, play them against a policy, write results as they end.

A run lives in one output folder:

- ``run.json``: what is being evaluated (envs, kwargs, seeds, samples, policy, settings);
  a resumed run must match it.
- ``plan.json``: every episode's key, task id, sample index and reset seed, fixed once.
- ``results.jsonl``: one line per finished episode, appended with a single unbuffered write
  (fsync'd at most once a second), so an interrupted run (even by SIGKILL) loses at most the
  episodes in flight;
  running again resumes: finished keys are skipped, a torn last line is dropped, and the
  file is rewritten in plan order at the end.
- ``provenance.json``, ``summary.json`` and ``report.html`` when the run completes.

Episodes run concurrently. Batched policies (local models: ``Policy.generate``) get one
batch holding every episode that is waiting for a turn; async policies (HTTP servers:
``Policy.agenerate`` overridden) get one request per episode as soon as it is ready.
Env steps run in a thread pool. A policy that raises, returns the wrong type or an invalid
message is recorded as a failed episode (``status="policy_error"``) after the env grades
an empty message; an env that raises is recorded as ``status="env_error"``. Neither stops
the run; both are played again when the run resumes (``retry_errors``), and a run where more
than ``max_error_rate`` of the episodes errored is marked failed (``summary["errors"]``).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from llmgym import error
from llmgym.evaluation import provenance as prov
from llmgym.evaluation.rollouts import JsonlAppender, load_jsonl, task_hash, write_atomic
from llmgym.evaluation.suites import EnvEntry, Suite, check_unique_names, load_suite
from llmgym.tasks import stable_seed

RUN_FORMAT = 1
DEFAULT_EPISODES = 100
"""Tasks per env when neither the call nor a suite says (a dataset env defaults to all its tasks)."""
MAX_STORED_TASK_CHARS = 256_000
"""A task larger than this (as JSON) is stored as its id and hash only; the transcript holds its prompt."""
MODES = ("auto", "batch", "async")
_HARD_STEP_CAP = 10_000


ERROR_STATUSES = ("policy_error", "env_error")
"""Episode statuses that say nothing about the model: the policy (its server) or the env failed."""
DEFAULT_MAX_ERROR_RATE = 0.05


@dataclass
class EvalConfig:
    """What to evaluate and how; checked when built, with messages that say how to fix it."""

    envs: tuple[EnvEntry, ...]
    """The envs, each with its kwargs, seed and number of tasks."""
    policy: Any = "oracle"
    """A policy spec (``"oracle"``, ``"hf:<path>"``, ``"openai:<model>@<url>"``,
    ``"module:function"``), a callable ``fn(messages, tools)`` or a ``Policy``."""
    out: Path = Path("evals/run")
    """The output folder (created; an existing run there of the same config is resumed)."""
    samples: int = 1
    """Episodes per task (``n`` of pass@k)."""
    k: tuple[int, ...] = (1,)
    """The k of pass@k to report (those above ``samples`` are left out)."""
    seed: int = 0
    """Seed of the statistics (bootstrap); env entries carry their own task seeds."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Sampling settings passed to the policy (temperature, max_new_tokens, ...)."""
    concurrency: int = 16
    """Episodes in flight at once (the largest batch a batched policy gets)."""
    mode: str = "auto"
    """``"batch"`` (``Policy.generate`` on a batch), ``"async"`` (``Policy.agenerate`` per
    episode) or ``"auto"``: async when the policy overrides ``agenerate``."""
    env_workers: int = 8
    """Threads stepping envs (sandboxed code runs in parallel); 0 steps them inline."""
    suite: Suite | None = None
    """The suite the envs came from, if any (recorded in provenance)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """What the call changed from the suite's pins (recorded; compare warns about it)."""
    overwrite: bool = False
    """Start afresh in ``out`` even if it holds another run."""
    report: bool = True
    """Write ``report.html`` at the end."""
    rollouts_format: str = "jsonl"
    """``"jsonl"``, or ``"parquet"`` to also write ``rollouts.parquet`` (needs pyarrow)."""
    progress: bool = True
    """Show progress bars."""
    retry_errors: bool = True
    """On resume, play again the episodes recorded as ``policy_error`` or ``env_error`` (a
    model server that was down, an env that crashed): only real outcomes are kept."""
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    """The share of errored episodes above which the run counts as failed: the summary and
    the report say so and ``llmgym eval`` exits non-zero."""

    def __post_init__(self) -> None:
        self.envs = tuple(self.envs)
        if (
            isinstance(self.max_error_rate, bool)
            or not isinstance(self.max_error_rate, (int, float))
            or not 0.0 <= float(self.max_error_rate) <= 1.0
        ):
            raise error.Error(
                f"max_error_rate must be a number in [0, 1], actual: {self.max_error_rate!r}"
            )
        if not self.envs:
            raise error.Error("Nothing to evaluate: give env ids or a suite")
        check_unique_names(self.envs)
        self.out = Path(self.out)
        self.k = tuple(self.k)
        for name in ("samples", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise error.Error(f"{name} must be an int >= 1, actual: {value!r}")
        if (
            isinstance(self.env_workers, bool)
            or not isinstance(self.env_workers, int)
            or self.env_workers < 0
        ):
            raise error.Error(f"env_workers must be an int >= 0, actual: {self.env_workers!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise error.Error(f"seed must be an int >= 0, actual: {self.seed!r}")
        if not self.k or any(
            isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in self.k
        ):
            raise error.Error(f"k must be ints >= 1, actual: {self.k!r}")
        if max(self.k) > self.samples:
            raise error.Error(
                f"pass@{max(self.k)} needs at least {max(self.k)} samples per task; "
                f"pass samples={max(self.k)} or lower k (samples is {self.samples})"
            )
        if self.mode not in MODES:
            raise error.Error(f"mode must be one of {MODES}, actual: {self.mode!r}")
        if self.rollouts_format not in ("jsonl", "parquet"):
            raise error.Error(
                f"rollouts_format must be 'jsonl' or 'parquet', actual: {self.rollouts_format!r}"
            )
        if not isinstance(self.settings, Mapping):
            raise error.Error("settings must be a dict of sampling settings")
        self.settings = dict(self.settings)

    def policy_spec(self) -> str:
        p = self.policy
        if isinstance(p, str):
            return p
        spec = getattr(p, "spec", "")
        if spec:
            return str(spec)
        fn = getattr(p, "__qualname__", None) or type(p).__qualname__
        return f"{getattr(p, '__module__', '?')}:{fn}"

    def identity(self) -> dict[str, Any]:
        """What fixes the results: a resumed run must have the same identity."""
        return prov._jsonable(
            {
                "envs": [e.to_dict() for e in self.envs],
                "samples": self.samples,
                "policy": self.policy_spec(),
                "settings": self.settings,
                "suite": self.suite.provenance() if self.suite else None,
            }
        )


@dataclass(frozen=True)
class EpisodePlan:
    """One planned episode: which entry, which task, which sample, which reset seed."""

    key: str
    entry: int
    task_index: int
    task_id: str
    sample: int
    seed: int


@dataclass
class EvalResult:
    """A finished evaluation: where it is, its summary, and its per-episode records."""

    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def failed(self) -> bool:
        """Whether more episodes errored (policy or infrastructure) than ``max_error_rate``
        allows: the results then describe an outage, not the model."""
        return bool(self.summary.get("errors", {}).get("exceeded"))

    @property
    def results_path(self) -> Path:
        return self.out / "results.jsonl"

    @property
    def report_path(self) -> Path:
        return self.out / "report.html"

    @property
    def success_rate(self) -> float | None:
        return self.summary["overall"]["success_rate"]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        o = self.summary["overall"]
        return (
            f"EvalResult(out={str(self.out)!r}, episodes={o['episodes']}, "
            f"success_rate={o['success_rate']}, mean_reward={o['mean_reward']})"
        )


# --- planning --------------------------------------------------------------------------------


def _make_env(entry: EnvEntry) -> Any:
    from llmgym.core import LLMEnv

    if entry.id not in gym.registry:
        from llmgym.registry import list_envs

        raise error.Error(
            f"Env {entry.id!r} is not registered; registered llmgym envs: {list_envs()}"
        )
    env = gym.make(entry.id, disable_env_checker=True, **entry.kwargs)
    if not isinstance(env.unwrapped, LLMEnv):
        env.close()
        raise error.Error(f"{entry.id} is not an llmgym env (LLMEnv); it cannot be evaluated")
    return env


def plan_tasks(entry: EnvEntry, env: Any, *, progress: bool = False) -> list[str]:
    """The task ids of an entry: task ``i`` is the first new one from ``reset(seed=seed + i)``.

    A finite (dataset) source asked for ``episodes=None``, or for at least as many tasks
    as it has, gives every task in its order. Otherwise draws that repeat a task are
    skipped; a source with fewer distinct tasks gives fewer (with a warning).
    """
    from tqdm.auto import tqdm

    source = env.unwrapped.source
    episodes = entry.episodes
    if isinstance(source, Sized) and hasattr(source, "__iter__"):
        family = env.unwrapped.family
        every = [t.id for t in source if family is None or t.family == family]
        if episodes is None or episodes >= len(every):
            if episodes is not None and episodes > len(every):
                warnings.warn(
                    f"{entry.name}: the dataset has {len(every)} tasks; evaluating all of them "
                    f"instead of {episodes}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return every
    if episodes is None:
        episodes = DEFAULT_EPISODES
    ids: list[str] = []
    seen: set[str] = set()
    limit = 10 * episodes + 100
    draws = 0
    with tqdm(
        total=episodes, desc=f"plan {entry.name}", unit="task", disable=not progress, leave=False
    ) as bar:
        while len(ids) < episodes and draws < limit:
            _, info = env.reset(seed=entry.seed + draws)
            draws += 1
            tid = str(info["task_id"])
            if tid not in seen:
                seen.add(tid)
                ids.append(tid)
                bar.update(1)
    if len(ids) < episodes:
        warnings.warn(
            f"{entry.name}: only {len(ids)} distinct tasks in {draws} draws; evaluating those "
            f"instead of {episodes}",
            RuntimeWarning,
            stacklevel=3,
        )
    return ids


def episode_seed(entry: EnvEntry, task_id: str, sample: int) -> int:
    """The reset seed of one episode: stable across processes and machines."""
    return stable_seed("eval", entry.seed, entry.id, task_id, sample) % 2**32


def make_plan(config: EvalConfig) -> tuple[list[EpisodePlan], dict[str, int]]:
    """Every episode of the run, in order; and the number of tasks per entry."""
    plan: list[EpisodePlan] = []
    counts: dict[str, int] = {}
    for i, entry in enumerate(config.envs):
        env = _make_env(entry)
        try:
            ids = plan_tasks(entry, env, progress=config.progress)
        finally:
            env.close()
        counts[entry.name] = len(ids)
        for t, tid in enumerate(ids):
            for s in range(config.samples):
                plan.append(
                    EpisodePlan(
                        key=f"{entry.name}|{t}|{s}",
                        entry=i,
                        task_index=t,
                        task_id=tid,
                        sample=s,
                        seed=episode_seed(entry, tid, s),
                    )
                )
    return plan, counts


# --- playing episodes -------------------------------------------------------------------------


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


class _Runner:
    """Plays planned episodes concurrently and hands each finished record to ``on_record``."""

    def __init__(
        self,
        config: EvalConfig,
        policy: Any,
        todo: Sequence[EpisodePlan],
        on_record: Callable[[dict[str, Any]], None],
    ):
        self.config = config
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
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failure: BaseException | None = None

    # env pool ----------------------------------------------------------------------------
    def _take_env(self, entry: int) -> Any:
        pool = self._envs[entry]
        return pool.pop() if pool else _make_env(self.config.envs[entry])

    def _give_env(self, entry: int, env: Any, broken: bool) -> None:
        if broken:
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
        if len(self._queue) >= min(self.max_batch, self._active):
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
        env = self._take_env(plan.entry)
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


# --- the run folder -----------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _prepare_folder(config: EvalConfig) -> tuple[list[EpisodePlan], dict[str, int], bool]:
    """Create or resume the run folder; returns the plan, tasks per entry, and whether resumed."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    identity = config.identity()
    run = _read_json(out / "run.json")
    if run is not None and not config.overwrite:
        if run.get("identity") != identity:
            old, new = run.get("identity") or {}, identity
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise error.Error(
                f"{out} holds a run of a different evaluation (differs in {diff}); use another "
                "output folder, or overwrite=True (--overwrite) to discard it"
            )
        stored = _read_json(out / "plan.json")
        if stored is not None:
            plan = [EpisodePlan(**p) for p in stored["episodes"]]
            return plan, dict(stored["tasks"]), True
    if run is None and (out / "results.jsonl").exists() and not config.overwrite:
        raise error.Error(
            f"{out} holds a results.jsonl that no llmgym eval run.json describes; use another "
            "output folder, or overwrite=True (--overwrite) to replace it"
        )
    for name in (
        "results.jsonl",
        "summary.json",
        "report.html",
        "plan.json",
        "provenance.json",
        "rollouts.parquet",
    ):
        (out / name).unlink(missing_ok=True)
    plan, counts = make_plan(config)
    write_atomic(
        out / "plan.json", json.dumps({"tasks": counts, "episodes": [vars(p) for p in plan]})
    )
    write_atomic(
        out / "run.json", json.dumps({"format": RUN_FORMAT, "identity": identity}, indent=1)
    )
    return plan, counts, False


def _provenance(config: EvalConfig, counts: dict[str, int], previous: Any) -> dict[str, Any]:
    envs = []
    for e in config.envs:
        item = e.to_dict()
        item["tasks"] = counts.get(e.name)
        try:
            item.update(prov.env_version(e.id))
        except Exception:  # unregistered: make_plan already failed loudly
            pass
        envs.append(item)
    info = prov.collect(
        envs=envs,
        suite=config.suite.provenance() if config.suite else None,
        overrides=config.overrides,
        policy=config.policy_spec(),
        settings=config.settings,
        samples=config.samples,
        k=list(config.k),
        seed=config.seed,
        concurrency=config.concurrency,
        mode=config.mode,
    )
    now = prov.utc_now()
    sessions = list(previous.get("sessions", [])) if isinstance(previous, dict) else []
    sessions.append({"started_at": now, "hostname": info["machine"]["hostname"]})
    info["started_at"] = previous.get("started_at", now) if isinstance(previous, dict) else now
    info["sessions"] = sessions
    info["finished_at"] = None
    return info


def run_evaluation(config: EvalConfig) -> EvalResult:
    """Run (or resume) the evaluation described by ``config``; see the module docstring."""
    from tqdm.auto import tqdm

    from llmgym.evaluation.metrics import summarize
    from llmgym.policies import load_policy

    if config.suite is not None:
        config.suite.check_registered()
    plan, counts, _resumed = _prepare_folder(config)
    info = _provenance(config, counts, _read_json(config.out / "provenance.json"))
    write_atomic(config.out / "provenance.json", json.dumps(info, indent=1))

    results_path = config.out / "results.jsonl"
    keys = {p.key for p in plan}
    done = {
        r["key"]: r
        for r in load_jsonl(results_path, key="key", repair=True)
        if r.get("key") in keys and not (config.retry_errors and r.get("status") in ERROR_STATUSES)
    }
    todo = [p for p in plan if p.key not in done]

    policy = load_policy(config.policy, **config.settings) if todo else None
    owns_policy = policy is not None and policy is not config.policy
    bar = tqdm(
        total=len(plan), initial=len(done), desc="eval", unit="ep", disable=not config.progress
    )
    wins = sum(1 for r in done.values() if r.get("success"))

    with JsonlAppender(results_path) as writer:

        def on_record(record: dict[str, Any]) -> None:
            nonlocal wins
            writer.write(record)
            done[record["key"]] = record
            wins += bool(record.get("success"))
            bar.update(1)
            bar.set_postfix(success=f"{wins / len(done):.3f}", refresh=False)

        try:
            if todo:
                runner = _Runner(config, policy, todo, on_record)
                info["sessions"][-1]["mode"] = runner.mode
                asyncio.run(runner.run())
        finally:
            bar.close()
            if owns_policy and policy is not None:
                policy.close()

    records = [done[p.key] for p in plan]
    write_atomic(results_path, b"".join(_line(r) for r in records))
    info["finished_at"] = prov.utc_now()
    info["sessions"][-1]["finished_at"] = info["finished_at"]
    info["sessions"][-1]["episodes_run"] = len(todo)
    write_atomic(config.out / "provenance.json", json.dumps(info, indent=1))
    errored = Counter(str(r.get("status")) for r in records if r.get("status") in ERROR_STATUSES)
    rate = sum(errored.values()) / len(records) if records else 0.0
    summary = {
        "format": RUN_FORMAT,
        "suite": config.suite.name if config.suite else None,
        "k": list(config.k),
        "planned": len(plan),
        "tasks": counts,
        "provenance": info,
        "errors": {
            "episodes": sum(errored.values()),
            "by_status": dict(sorted(errored.items())),
            "rate": rate,
            "max_rate": float(config.max_error_rate),
            "exceeded": rate > float(config.max_error_rate),
        },
        **summarize(records, ks=config.k, seed=config.seed),
    }
    write_atomic(config.out / "summary.json", json.dumps(summary, indent=1, default=repr))
    if config.rollouts_format == "parquet":
        from llmgym.evaluation.rollouts import write_rollouts

        write_rollouts(records, config.out / "rollouts.parquet")
    if config.report:
        from llmgym.evaluation.report import write_eval_report

        write_eval_report(config.out)
    return EvalResult(out=config.out, summary=summary, records=records)


def _line(record: Mapping[str, Any]) -> bytes:
    from llmgym.evaluation.rollouts import dumps_line

    return dumps_line(record)


# --- the Python API -------------------------------------------------------------------------------


EnvSpec = str | EnvEntry | Mapping[str, Any]


def _entries(
    envs: EnvSpec | Sequence[EnvSpec] | None,
    suite: Suite | None,
    *,
    episodes: int | None,
    env_kwargs: Mapping[str, Any] | None,
    seed: int,
) -> tuple[tuple[EnvEntry, ...], dict[str, Any]]:
    overrides: dict[str, Any] = {}
    if suite is not None:
        if envs:
            raise error.Error("Give env ids or a suite, not both")
        entries = list(suite.envs)
        if episodes is not None:
            overrides["episodes"] = episodes
        if env_kwargs:
            overrides["env_kwargs"] = dict(env_kwargs)
        entries = [
            EnvEntry(
                id=e.id,
                kwargs={**e.kwargs, **(env_kwargs or {})},
                seed=e.seed,
                episodes=episodes if episodes is not None else e.episodes,
                name=e.name,
            )
            for e in entries
        ]
        return tuple(entries), overrides
    if envs is None:
        raise error.Error("Nothing to evaluate: give env ids (or entries) or a suite")
    items = [envs] if isinstance(envs, (str, EnvEntry, Mapping)) else list(envs)
    out = []
    for item in items:
        if isinstance(item, EnvEntry):
            out.append(item)
        elif isinstance(item, str):
            out.append(
                EnvEntry(id=item, kwargs=dict(env_kwargs or {}), seed=seed, episodes=episodes)
            )
        elif isinstance(item, Mapping):
            data = {"seed": seed, "episodes": episodes, **item}
            data["kwargs"] = {**(env_kwargs or {}), **(item.get("kwargs") or {})}
            try:
                out.append(EnvEntry(**data))
            except TypeError as e:
                raise error.Error(f"Bad env entry {dict(item)!r}: {e}") from None
        else:
            raise error.Error(
                f"Expects env ids, EnvEntry or dicts, actual type: {type(item).__name__}"
            )
    return tuple(out), overrides


def default_ks(samples: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, 100 up to ``samples``, and ``samples`` itself.

    >>> default_ks(1), default_ks(8)
    ((1,), (1, 2, 5, 8))
    """
    return tuple(sorted({1, samples} | {k for k in (2, 5, 10, 20, 50, 100) if k <= samples}))


def evaluate(
    envs: EnvSpec | Sequence[EnvSpec] | None = None,
    policy: Any = "oracle",
    *,
    suite: str | Path | Suite | None = None,
    episodes: int | None = None,
    samples: int | None = None,
    k: Sequence[int] | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    concurrency: int = 16,
    mode: str = "auto",
    env_workers: int = 8,
    out: str | Path | None = None,
    overwrite: bool = False,
    report: bool = True,
    rollouts_format: str = "jsonl",
    progress: bool = True,
    retry_errors: bool = True,
    max_error_rate: float | None = None,
) -> EvalResult:
    """Evaluate a policy on envs or a suite; write results, summary and report to ``out``.

    Episodes that end in ``policy_error`` or ``env_error`` (a server that is down) are played
    again when the run resumes (``retry_errors``); when more than ``max_error_rate`` of the
    episodes errored (default 0.05) the result is marked ``failed`` and the report says so.

    ``envs``: env ids, :class:`EnvEntry` objects or dicts ``{"id", "kwargs", "seed",
    "episodes", "name"}``; or ``suite``: a shipped suite name (``"core-v0"``) or a suite
    file. ``episodes`` is the number of distinct tasks per env (default: the suite's pin,
    else every task of a dataset env, else 100), ``samples`` the episodes per task (for
    pass@k), ``seed`` the task seed of env ids given by name. ``out`` defaults to
    ``evals/<UTC time>``; running again with the same ``out`` and arguments resumes.

    >>> import llmgym
    >>> llmgym.register_task_env("doc/Eval-v0", tasks=[{"id": "q", "prompt": "2+2?", "answer": "4"}],
    ...                          overwrite=True)
    'doc/Eval-v0'
    >>> import tempfile
    >>> result = evaluate("doc/Eval-v0", "oracle", out=tempfile.mkdtemp(), report=False, progress=False)
    >>> result.summary["overall"]["success_rate"], result.summary["overall"]["episodes"]
    (1.0, 1)
    """
    loaded = load_suite(suite) if isinstance(suite, (str, Path)) else suite
    entries, overrides = _entries(envs, loaded, episodes=episodes, env_kwargs=env_kwargs, seed=seed)
    n = samples if samples is not None else (loaded.samples if loaded else 1)
    if loaded is not None and samples is not None and samples != loaded.samples:
        overrides["samples"] = samples
    ks = (
        tuple(k)
        if k is not None
        else tuple(x for x in (loaded.k if loaded else ()) if x <= n) or default_ks(n)
    )
    if out is None:
        out = Path("evals") / prov.utc_now().replace(":", "")
    config = EvalConfig(
        envs=entries,
        policy=policy,
        out=Path(out),
        samples=n,
        k=ks,
        seed=seed,
        settings=dict(settings or {}),
        concurrency=concurrency,
        mode=mode,
        env_workers=env_workers,
        suite=loaded,
        overrides=overrides,
        overwrite=overwrite,
        report=report,
        rollouts_format=rollouts_format,
        progress=progress,
        retry_errors=retry_errors,
        max_error_rate=DEFAULT_MAX_ERROR_RATE if max_error_rate is None else max_error_rate,
    )
    return run_evaluation(config)
