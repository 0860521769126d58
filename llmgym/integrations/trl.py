"""TRL integration: train on any llmgym env with ``trl.GRPOTrainer``.

- :func:`prompt_dataset` builds a ``datasets.Dataset`` of conversational prompts for an env id
  (columns ``prompt``, ``task_id``, ``env_id``, ``seed``), one task per row;
- :func:`reward_function` returns a TRL reward function that replays each row's task by its
  ``task_id`` and grades the completion with the env's own verifier;
- :func:`environment_factory` returns a TRL ``environment_factory`` for multi-turn envs with
  tools: each of the env's tools becomes a method TRL's tool loop calls, the call is stepped
  through the env, and :func:`reward_function` finishes the episode with the model's final
  message (pass ``environments`` through: TRL does).

Single-turn::

    from trl import GRPOConfig, GRPOTrainer
    from llmgym.integrations.trl import prompt_dataset, reward_function

    env_id, kw = "llm/Math-v0", {"family": "arith.add_small", "difficulty": 0.0}
    trainer = GRPOTrainer(model=..., reward_funcs=reward_function(env_id, kw),
                          train_dataset=prompt_dataset(env_id, 512, env_kwargs=kw), args=GRPOConfig(...))

Multi-turn with tools: also pass ``environment_factory=environment_factory(env_id, kw)``.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

from llmgym import error

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _make_env(env_id: str, env_kwargs: dict[str, Any] | None) -> Any:
    import llmgym

    return llmgym.make(env_id, disable_env_checker=True, **dict(env_kwargs or {}))


def prompt_dataset(
    env_id: str,
    n: int | None = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    environment: str | None = None,
    each_task_once: bool = True,
) -> Any:
    """A ``datasets.Dataset`` of ``n`` tasks of ``env_id``: one conversational prompt per row.

    Rows hold ``prompt`` (the env's messages at reset, system prompt included), ``task_id``,
    ``env_id`` and ``seed``; with ``environment``, also an ``environment`` column (TRL's
    multi-environment mode). ``each_task_once`` (default): no task appears twice (a dataset env
    gives a permutation of its tasks, all of them when ``n`` is None; a procedural env distinct
    task ids); otherwise rows are ``reset(seed=seed + i)``, which may repeat tasks.
    """
    try:
        from datasets import Dataset
    except ImportError:
        raise error.DependencyNotInstalled(
            "The TRL integration needs datasets; pip install 'llmgym[agents]'"
        ) from None
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise error.Error(f"Expects n >= 1 rows (or None: every task), got {n!r}")
    env = _make_env(env_id, env_kwargs)
    rows: dict[str, list[Any]] = {"prompt": [], "task_id": [], "env_id": [], "seed": []}
    try:
        base = env.unwrapped
        if each_task_once:
            tasks = base.source.iter_tasks(
                n, seed=seed, unique=True, family=base.family, difficulty=base.difficulty
            )
            resets: list[tuple[dict[str, Any] | None, int]] = [
                ({"task_id": t.id}, seed + i) for i, t in enumerate(tasks)
            ]
        elif n is None:
            raise error.Error("n=None (every task) needs each_task_once=True")
        else:
            resets = [(None, s) for s in range(seed, seed + n)]
        for options, s in resets:
            _, info = env.reset(seed=s, options=options)
            rows["prompt"].append(
                [{"role": m["role"], "content": m.get("content") or ""} for m in info["messages"]]
            )
            rows["task_id"].append(str(info["task_id"]))
            rows["env_id"].append(env_id)
            rows["seed"].append(s)
    finally:
        env.close()
    if environment is not None:
        rows["environment"] = [environment] * len(rows["prompt"])
    return Dataset.from_dict(rows)


def _completion_text(completion: Any) -> str:
    """The final assistant text of a TRL completion (a string or a list of messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):  # content parts
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return ""
    return str(completion)


class _EnvPool:
    """Thread-safe pool of env instances (TRL may call reward functions from several threads)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None):
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def take(self) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        return _make_env(self.env_id, self.env_kwargs)

    def give(self, env: Any) -> None:
        with self._lock:
            self._free.append(env)


def reward_function(
    env_id: str, env_kwargs: dict[str, Any] | None = None, *, success: bool = False
) -> Callable[..., list[float]]:
    """A TRL reward function: each completion graded by ``env_id``'s env on its row's ``task_id``.

    With ``environments`` (TRL passes them when an :func:`environment_factory` is in use), each
    episode is finished with the completion's final message and its total reward is returned.
    ``success=True`` returns 1.0/0.0 for ``info["is_success"]`` instead (a metric to log).
    """
    pool = _EnvPool(env_id, env_kwargs)

    def llmgym_reward(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task_id: Sequence[str] | None = None,
        environments: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if environments is not None:
            out = []
            for adapter, completion in zip(environments, completions, strict=True):
                if isinstance(adapter, LLMGymToolEnv):
                    adapter._finish(_completion_text(completion))
                    out.append(float(adapter.is_success) if success else adapter.total_reward)
                else:
                    out.append(0.0)
            return out
        if task_id is None:
            raise error.Error(
                "The llmgym reward function needs the dataset's 'task_id' column; build the dataset "
                "with llmgym.integrations.trl.prompt_dataset"
            )
        out = []
        env = pool.take()
        try:
            for tid, completion in zip(task_id, completions, strict=True):
                env.reset(options={"task_id": tid})
                _, reward, _, _, info = env.step(_completion_text(completion))
                out.append(float(bool(info.get("is_success"))) if success else float(reward))
        finally:
            pool.give(env)
        return out

    name = env_id.replace("/", "_").replace("-", "_")
    llmgym_reward.__name__ = f"{'success' if success else 'reward'}_{name}"
    return llmgym_reward


# --- multi-turn: TRL's environment_factory ----------------------------------------------------------


class LLMGymToolEnv:
    """An llmgym episode seen through TRL's environment protocol: ``reset(**row)``, tool methods.

    Subclasses made by :func:`environment_factory` add one method per tool of the env.
    """

    env_id: str = ""
    env_kwargs: dict[str, Any] = {}  # noqa: RUF012

    def __init__(self) -> None:
        self.env = _make_env(self.env_id, self.env_kwargs)
        self.total_reward = 0.0
        self.is_success = False
        self.done = True

    def reset(self, **row: Any) -> str | None:
        """Start the row's task (``task_id`` column, else ``seed``); returns None (the prompt is in the row)."""
        options = {"task_id": row["task_id"]} if row.get("task_id") else None
        self.env.reset(seed=row.get("seed"), options=options)
        self.total_reward, self.is_success, self.done = 0.0, False, False
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.done:
            return "The episode has ended; no more tool calls are accepted."
        action = {
            "content": "",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
        before = len(self.env.unwrapped.episode.messages) + 1 if self.env.unwrapped.episode else 0
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total_reward += float(reward)
        self.is_success = bool(info.get("is_success"))
        self.done = bool(terminated or truncated)
        added = info.get("messages", [])[before:]
        texts = [str(m.get("content") or "") for m in added]
        return "\n".join(t for t in texts if t) or str(obs)

    def _finish(self, final_text: str) -> None:
        """Step the model's final message (its answer) if the episode is still running."""
        if self.done:
            return
        _, reward, terminated, truncated, info = self.env.step(final_text)
        self.total_reward += float(reward)
        self.is_success = bool(info.get("is_success"))
        self.done = True


def _tool_method(spec: dict[str, Any]) -> Callable[..., str]:
    """A method with the signature and Google-style docstring TRL reads a tool schema from."""
    fn = spec.get("function", spec)
    name = fn.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise error.Error(
            f"Tool name {name!r} is not a Python identifier; TRL needs one per method"
        )
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    # No return annotation: the schema TRL renders is then the env's own spec, key for key.
    annotations: dict[str, Any] = {}
    doc_args = []
    for arg, schema in props.items():
        json_type = schema.get("type") if isinstance(schema, dict) else None
        kind = _JSON_TYPES.get(json_type, str) if isinstance(json_type, str) else str
        annotations[arg] = kind if arg in required else kind | None
        sig_params.append(
            inspect.Parameter(
                arg,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=annotations[arg],
                default=inspect.Parameter.empty if arg in required else None,
            )
        )
        desc = (schema.get("description") if isinstance(schema, dict) else None) or arg
        doc_args.append(f"    {arg}: {' '.join(str(desc).split())}")

    def method(self: LLMGymToolEnv, **kwargs: Any):  # type: ignore[no-untyped-def]
        return self._call(name, {k: v for k, v in kwargs.items() if v is not None})

    method.__name__ = name
    method.__qualname__ = f"LLMGymToolEnv.{name}"
    method.__signature__ = inspect.Signature(sig_params)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    description = " ".join(str(fn.get("description") or name).split())
    method.__doc__ = f"{description}\n\nArgs:\n" + "\n".join(doc_args) if doc_args else description
    return method


def environment_factory(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> Callable[[], LLMGymToolEnv]:
    """A TRL ``environment_factory`` for ``env_id``: a fresh :class:`LLMGymToolEnv` per call.

    The methods are the env's tools (``tools``, default: those of the env's first task, seed 0);
    restrict the env (``family=...``) so that every task offers the same tools, or build one
    factory per family for TRL's multi-environment mode (a dict of factories and an
    ``environment`` column from :func:`prompt_dataset`).
    """
    if tools is None:
        env = _make_env(env_id, env_kwargs)
        try:
            _, info = env.reset(seed=0)
            tools = list(info.get("tools") or [])
        finally:
            env.close()
    if not tools:
        raise error.Error(
            f"{env_id} offers no tools; TRL's environment_factory is for tool-using envs. Use "
            "reward_function() with prompt_dataset() for single-turn envs."
        )
    namespace: dict[str, Any] = {"env_id": env_id, "env_kwargs": dict(env_kwargs or {})}
    for spec in tools:
        method = _tool_method(spec)
        if method.__name__ in ("reset", "get_reward") or method.__name__.startswith("_"):
            raise error.Error(
                f"Tool name {method.__name__!r} clashes with the TRL environment protocol"
            )
        namespace[method.__name__] = method
    cls = type(f"LLMGym_{env_id.split('/')[-1].replace('-', '_')}", (LLMGymToolEnv,), namespace)

    def factory() -> LLMGymToolEnv:
        instance: LLMGymToolEnv = cls()
        return instance

    return factory


def tool_names(factory: Callable[[], LLMGymToolEnv]) -> list[str]:
    """The tool methods a factory's environments expose (what TRL will offer the model)."""
    env = factory()
    try:
        return sorted(
            n
            for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")
        )
    finally:
        env.env.close()


__all__ = [
    "LLMGymToolEnv",
    "environment_factory",
    "prompt_dataset",
    "reward_function",
    "tool_names",
]
