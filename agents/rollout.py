"""Token-exact rollouts: episodes recorded as the exact token ids the model saw and sampled.

Multi-turn episodes are never re-tokenized. The first prompt is the chat template applied to
the env's messages; each turn appends the *sampled* completion ids as they are (mask 1), then
only the text the environment added (its tool results or next user message, plus the next
generation prompt), rendered as the chat template's delta and tokenized alone (mask 0). The
model is therefore trained on exactly the sequence it generated from, and the env's tokens
never enter the loss. This needs a prefix-preserving chat template (rendering one more message
only appends text); a template that is not raises :class:`llmgym.error.Error`.

Envs are stepped in lock-step: every active episode's next completion is sampled in one batch
(:func:`llmgym.agents.modeling.sample_completions`, which prefills a GRPO group's shared prompt
once), and a prompt is rendered once for all the episodes whose conversations are equal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from llmgym import error
from llmgym.agents.hf import parse_tool_calls, render_prompt, stop_ids_of
from llmgym.agents.modeling import sample_completions
from llmgym.core import clean_text


@dataclass
class Trajectory:
    """One episode as tokens, with the rewards of its turns."""

    task_id: str
    domain: str
    family: str
    difficulty: float
    token_ids: list[int] = field(default_factory=list)
    """The whole conversation as the model saw it: prompt, completions, env turns."""
    loss_mask: list[int] = field(default_factory=list)
    """1 where the policy sampled the token, 0 for prompt and environment tokens."""
    logprobs: list[float] = field(default_factory=list)
    """Sampling logprob of each token (0 where ``loss_mask`` is 0)."""
    prompt_length: int = 0
    """Number of tokens of the first prompt."""
    turn_rewards: list[float] = field(default_factory=list)
    """Reward of each env step."""
    turn_ends: list[int] = field(default_factory=list)
    """Index in ``token_ids`` of the last sampled token of each turn (where PPO credits the reward)."""
    is_success: bool = False
    truncated: bool = False
    """The episode ended without terminating (max turns or the context limit)."""
    completion_truncated: bool = False
    """Some completion was cut at ``max_new_tokens`` before its stop token."""
    prompt_truncated: bool = False
    """The first prompt did not fit the context and was cut (:func:`llmgym.agents.hf.fit_prompt`)."""
    exec_statuses: list[str] = field(default_factory=list)
    """Sandbox statuses reported in ``info["exec"]`` by code-running envs."""
    env_error: str | None = None
    """Set when the environment itself raised (the episode then ends with the lowest reward)."""
    texts: list[str] = field(default_factory=list)
    """Decoded completions, one per turn (for logs and debugging)."""

    @property
    def reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def num_turns(self) -> int:
        return len(self.turn_rewards)

    @property
    def completion_tokens(self) -> int:
        return int(sum(self.loss_mask))

    def summary(self) -> EpisodeSummary:
        """The few numbers the other processes need (gathered for advantages and metrics)."""
        return EpisodeSummary(
            task_id=self.task_id,
            domain=self.domain,
            reward=self.reward,
            is_success=self.is_success,
            completion_tokens=self.completion_tokens,
            num_turns=self.num_turns,
            completion_truncated=self.completion_truncated,
            truncated=self.truncated,
            prompt_truncated=self.prompt_truncated,
            env_error=self.env_error,
            exec_statuses=list(self.exec_statuses),
        )


@dataclass
class EpisodeSummary:
    """A trajectory without its tokens: what :func:`rollout_metrics` and group advantages need."""

    task_id: str
    domain: str
    reward: float
    is_success: bool
    completion_tokens: int
    num_turns: int
    completion_truncated: bool
    truncated: bool
    env_error: str | None
    exec_statuses: list[str]
    prompt_truncated: bool = False


@dataclass
class _Live:
    env: Any
    traj: Trajectory
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    done: bool = False


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> Any:
    """``gym.make(env_id, **env_kwargs)`` with llmgym's registrations loaded."""
    import llmgym

    return llmgym.make(env_id, disable_env_checker=True, **dict(env_kwargs or {}))


def collect(
    envs: Sequence[Any],
    model: Any,
    tokenizer: Any,
    *,
    seeds: Sequence[int | None],
    options: Sequence[dict[str, Any] | None],
    max_new_tokens: int,
    max_total_tokens: int = 4096,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: Any = None,
    env_workers: int = 1,
    timings: dict[str, float] | None = None,
    context_overflow: str = "truncate",
    engine: Any = None,
) -> list[Trajectory]:
    """Run one episode in each env (reset with ``seeds[i]`` and ``options[i]``) to its end.

    Completions come from ``engine`` (:mod:`llmgym.agents.engines`) when given, else from
    ``model`` itself.

    A first prompt with no room for ``max_new_tokens`` within ``max_total_tokens`` is cut by
    :func:`llmgym.agents.hf.fit_prompt` (``context_overflow="truncate"``) or raises
    :class:`llmgym.error.Error` (``"error"``) before anything is sampled."""
    if not len(envs) == len(seeds) == len(options):
        raise error.Error("collect() needs one seed and one options entry per env")
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    stop_ids = stop_ids_of(tokenizer, model)
    end_id = stop_ids[0] if tokenizer.eos_token_id is None else int(tokenizer.eos_token_id)
    timings = timings if timings is not None else {}
    pool = ThreadPoolExecutor(env_workers) if env_workers > 1 else None

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return list(pool.map(fn, items)) if pool is not None else [fn(x) for x in items]

    t0 = time.perf_counter()
    rendered: dict[str, list[int]] = {}  # a group's episodes share their first prompt
    live = run(
        lambda i: _start(envs[i], seeds[i], options[i], tokenizer, rendered), range(len(envs))
    )
    for ep in live:  # room for a whole turn and the end token closing a cut completion
        _fit_first_prompt(ep.traj, max_total_tokens - max_new_tokens - 1, context_overflow)
    timings["env_s"] = timings.get("env_s", 0.0) + time.perf_counter() - t0
    try:
        while True:
            active = [ep for ep in live if not ep.done]
            if not active:
                break
            t0 = time.perf_counter()
            out = (engine.sample if engine is not None else partial(sample_completions, model))(
                [ep.traj.token_ids for ep in active],
                max_new_tokens=max_new_tokens,
                stop_ids=stop_ids,
                pad_id=pad_id,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                generator=generator,
            )
            timings["generate_s"] = timings.get("generate_s", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()

            def advance(j: int) -> None:
                _advance(
                    active[j],  # noqa: B023 (run() finishes before the loop moves on)
                    out.token_ids[j],  # noqa: B023
                    out.logprobs[j],  # noqa: B023
                    out.finished[j],  # noqa: B023
                    tokenizer,
                    end_id,
                    max_new_tokens,
                    max_total_tokens,
                )

            run(advance, range(len(active)))
            timings["env_s"] = timings.get("env_s", 0.0) + time.perf_counter() - t0
    finally:
        if pool is not None:
            pool.shutdown()
    return [ep.traj for ep in live]


def _start(
    env: Any,
    seed: int | None,
    options: dict[str, Any] | None,
    tokenizer: Any,
    rendered: dict[str, list[int]],
) -> _Live:
    obs, info = env.reset(seed=seed, options=options)
    messages = list(info["messages"])
    tools = list(info.get("tools") or [])
    key = json.dumps([messages, tools], sort_keys=True, default=repr)
    if key not in rendered:
        rendered[key] = render_prompt(tokenizer, messages, tools)
    ids = list(rendered[key])  # a copy: the trajectory grows it
    traj = Trajectory(
        task_id=str(info["task_id"]),
        domain=str(info.get("domain", "generic")),
        family=str(info.get("family", "default")),
        difficulty=float(info.get("difficulty", 0.0)),
        token_ids=ids,
        loss_mask=[0] * len(ids),
        logprobs=[0.0] * len(ids),
        prompt_length=len(ids),
    )
    return _Live(env=env, traj=traj, messages=messages, tools=tools)


def _fit_first_prompt(traj: Trajectory, room: int, overflow: str) -> None:
    """Apply the context rule (:mod:`llmgym.agents.context`) to an episode's first prompt."""
    from llmgym.agents.hf import fit_prompt

    n = traj.prompt_length
    if n <= room:
        return
    if overflow == "error" or room < 1:
        raise error.Error(
            f"Task {traj.task_id}: its prompt has {n} tokens and leaves no room for "
            f"max_new_tokens within the episode budget ({room} tokens for the prompt); raise "
            "max_total_tokens (up to the model's context), lower max_new_tokens, or set "
            "context_overflow: truncate"
        )
    traj.token_ids = fit_prompt(traj.token_ids, room)
    traj.loss_mask, traj.logprobs = [0] * room, [0.0] * room
    traj.prompt_length, traj.prompt_truncated = room, True


def _advance(
    ep: _Live,
    completion: list[int],
    logprobs: list[float],
    finished: bool,
    tokenizer: Any,
    end_id: int,
    max_new_tokens: int,
    max_total_tokens: int,
) -> None:
    traj = ep.traj
    traj.token_ids.extend(completion)
    traj.loss_mask.extend([1] * len(completion))
    traj.logprobs.extend(logprobs)
    turn_end = len(traj.token_ids) - 1
    body = completion[:-1] if finished else completion
    text = clean_text(tokenizer.decode(body, skip_special_tokens=False))
    traj.texts.append(text)
    if not finished:
        traj.completion_truncated = True
        traj.token_ids.append(end_id)  # close the turn so the next one is well-formed; not trained
        traj.loss_mask.append(0)
        traj.logprobs.append(0.0)
    action = parse_tool_calls(text) if ep.tools else text
    try:
        _, reward, terminated, truncated, info = ep.env.step(action)
    except Exception as e:  # an env bug ends this episode only; it is reported, not trained on
        traj.env_error = f"{type(e).__name__}: {e}"
        traj.turn_rewards.append(float(ep.env.unwrapped.reward_range[0]))
        traj.turn_ends.append(turn_end)
        ep.done = True
        return
    traj.turn_rewards.append(float(reward))
    traj.turn_ends.append(turn_end)
    traj.is_success = bool(info.get("is_success", False))
    traj.exec_statuses.extend(_exec_statuses(info.get("exec")))
    if terminated or truncated:
        traj.truncated = bool(truncated and not terminated)
        ep.done = True
        return
    new_messages = list(info["messages"])
    delta = _delta_ids(tokenizer, new_messages, len(ep.messages) + 1, ep.tools)
    ep.messages = new_messages
    traj.token_ids.extend(delta)
    traj.loss_mask.extend([0] * len(delta))
    traj.logprobs.extend([0.0] * len(delta))
    if len(traj.token_ids) + max_new_tokens + 1 > max_total_tokens:
        traj.truncated = True  # the next turn (and its closing token) would not fit the context
        ep.done = True


def _delta_ids(
    tokenizer: Any, messages: list[dict[str, Any]], upto: int, tools: list[Any]
) -> list[int]:
    """Tokens the env added after message ``upto - 1`` (the assistant's), plus the generation prompt."""

    def render(msgs: list[dict[str, Any]], gen: bool) -> str:
        text: str = tokenizer.apply_chat_template(
            msgs, tools=tools or None, add_generation_prompt=gen, tokenize=False
        )
        return text

    before = render(messages[:upto], False)
    after = render(messages, True)
    if not after.startswith(before):
        raise error.Error(
            "The chat template is not prefix-preserving (rendering one more message changed the earlier "
            "text), so multi-turn episodes cannot be recorded token-exactly. Use a template that only "
            "appends, e.g. llmgym.agents.tiny.CHAT_TEMPLATE, or one without history rewriting."
        )
    return list(tokenizer(clean_text(after[len(before) :]), add_special_tokens=False).input_ids)


def _exec_statuses(exec_info: Any) -> list[str]:
    if isinstance(exec_info, dict) and isinstance(exec_info.get("status"), str):
        return [exec_info["status"]]
    if isinstance(exec_info, list):
        return [
            e["status"]
            for e in exec_info
            if isinstance(e, dict) and isinstance(e.get("status"), str)
        ]
    return []


# --- summaries ---------------------------------------------------------------------------------

_SANDBOX_RATES = {
    "sandbox/timeout_rate": ("timeout",),
    "sandbox/oom_rate": ("memory_limit",),
    "sandbox/crash_rate": ("runtime_error",),
    "sandbox/error_rate": ("sandbox_error",),
}


def rollout_metrics(trajs: Sequence[Trajectory | EpisodeSummary]) -> dict[str, float]:
    """Reward, success, length and sandbox-anomaly metrics of a batch (overall and per domain)."""
    if not trajs:
        return {}
    n = len(trajs)
    out: dict[str, float] = {
        "rewards/mean": sum(t.reward for t in trajs) / n,
        "rewards/success_rate": sum(t.is_success for t in trajs) / n,
        "charts/completion_length": sum(t.completion_tokens for t in trajs) / n,
        "charts/turns": sum(t.num_turns for t in trajs) / n,
        "charts/completion_truncated_frac": sum(t.completion_truncated for t in trajs) / n,
        "charts/episode_truncated_frac": sum(t.truncated for t in trajs) / n,
        "charts/env_error_frac": sum(t.env_error is not None for t in trajs) / n,
    }
    if any(t.prompt_truncated for t in trajs):
        out["charts/prompt_truncated_frac"] = sum(t.prompt_truncated for t in trajs) / n
    from llmgym.evaluation.monitor import clean_name

    # a domain name comes from task data: only its cleaned form reaches a metric key or tag
    domains = [clean_name(t.domain) for t in trajs]
    for domain in sorted(set(domains)):
        group = [t for t, d in zip(trajs, domains, strict=True) if d == domain]
        out[f"rewards/{domain}"] = sum(t.reward for t in group) / len(group)
        out[f"success/{domain}"] = sum(t.is_success for t in group) / len(group)
    statuses = [s for t in trajs for s in t.exec_statuses]
    if statuses:
        for key, names in _SANDBOX_RATES.items():
            out[key] = sum(s in names for s in statuses) / len(statuses)
        for domain in sorted({d for t, d in zip(trajs, domains, strict=True) if t.exec_statuses}):
            ds = [
                s
                for t, d in zip(trajs, domains, strict=True)
                if d == domain
                for s in t.exec_statuses
            ]
            for key, names in _SANDBOX_RATES.items():
                out[key.replace("sandbox/", f"sandbox/{domain}/")] = sum(
                    s in names for s in ds
                ) / len(ds)
    return out


@dataclass
class EvalResult:
    """Greedy (or sampled) evaluation of a model on held-out seeds."""

    success_rate: float
    mean_reward: float
    episodes: int
    per_domain: dict[str, float]
    trajectories: list[Trajectory]


def evaluate(
    model: Any,
    tokenizer: Any,
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    seeds: Sequence[int],
    max_new_tokens: int = 64,
    max_total_tokens: int = 4096,
    temperature: float = 0.0,
    batch_size: int = 64,
    generator: Any = None,
) -> EvalResult:
    """Success rate and mean reward over one episode per seed (greedy decoding by default)."""
    envs = [make_env(env_id, env_kwargs) for _ in range(min(batch_size, len(seeds)) or 1)]
    trajs: list[Trajectory] = []
    try:
        for start in range(0, len(seeds), batch_size):
            chunk = list(seeds[start : start + batch_size])
            trajs += collect(
                envs[: len(chunk)],
                model,
                tokenizer,
                seeds=chunk,
                options=[None] * len(chunk),
                max_new_tokens=max_new_tokens,
                max_total_tokens=max_total_tokens,
                temperature=temperature,
                generator=generator,
            )
    finally:
        for env in envs:
            env.close()
    n = max(len(trajs), 1)
    per_domain = {
        d: sum(t.is_success for t in trajs if t.domain == d)
        / sum(1 for t in trajs if t.domain == d)
        for d in sorted({t.domain for t in trajs})
    }
    return EvalResult(
        success_rate=sum(t.is_success for t in trajs) / n,
        mean_reward=sum(t.reward for t in trajs) / n,
        episodes=len(trajs),
        per_domain=per_domain,
        trajectories=trajs,
    )


# --- choosing tasks ------------------------------------------------------------------------------


@dataclass
class TaskRef:
    """One task chosen for a step: replayed by every episode of its group via ``task_id``."""

    task_id: str
    seed: int
    domain: str
    family: str
    difficulty: float
    arm: str | None = None
    """The scheduler arm (family) it was drawn for, if a scheduler chose it."""
    question: str | None = None
    """Its question's key for the scheduler's ``question_rest`` (prompt hash), if scheduled."""

    def options(self) -> dict[str, Any]:
        return {"task_id": self.task_id}


def draw_tasks(
    probe_env: Any, n: int, rng: Any, scheduler: Any = None, *, advance: bool = True
) -> list[TaskRef]:
    """``n`` tasks from the env's own distribution, or from ``scheduler``'s ``(family, difficulty)``.

    Draws only from ``rng`` and deterministic resets, so every process draws the same list. A
    question the scheduler rests (``question_rest``) is drawn again, up to its ``redraws``.
    ``advance=False``: more tasks for the same step (a refill round of dynamic sampling).
    """
    from llmgym.agents.scheduler import question_key

    picks = (
        scheduler.choose(n, rng, advance=advance) if scheduler is not None else [(None, None)] * n
    )
    redraws = scheduler.config.redraws if scheduler is not None else 0
    refs = []
    for arm, difficulty in picks:
        options = None if arm is None else {"family": arm, "difficulty": difficulty}
        for attempt in range(redraws + 1):
            seed = int(rng.integers(0, 2**31 - 1))
            prompt, info = probe_env.reset(seed=seed, options=options)
            question = None if arm is None else question_key(arm, prompt)
            if question is None or attempt == redraws or not scheduler.resting(question):
                break
            scheduler.skipped()
        refs.append(
            TaskRef(
                task_id=str(info["task_id"]),
                seed=seed,
                domain=str(info.get("domain", "generic")),
                family=str(info.get("family", "default")),
                difficulty=float(info.get("difficulty", 0.0)),
                arm=arm,
                question=question,
            )
        )
    return refs


def task_families(env: Any) -> list[str]:
    """The families an env draws from (the scheduler's arms)."""
    source = getattr(env.unwrapped, "source", None)
    if source is None:
        raise error.Error(f"{type(env.unwrapped).__name__} has no task source to schedule over")
    return list(source.families())
