"""verl integration: ``compute_score`` with verl's custom reward signature, and dataset rows for it.

In a verl config::

    custom_reward_function:
      path: <site-packages>/llmgym/integrations/verl.py
      name: compute_score

Each dataset row's ``data_source`` is the llmgym env id and ``reward_model.ground_truth`` the task
id (llmgym tasks are rebuilt from their ids); :func:`dataset_rows` writes such rows.
``extra_info["env_kwargs"]`` carries ``gym.make`` keyword arguments. The response is graded as the
episode's first (and, for single-turn envs, only) assistant message.

>>> import llmgym
>>> row = dataset_rows("llm/Math-v0", 1, env_kwargs={"family": "arith.add_small", "difficulty": 0.0})[0]
>>> gold = row["reward_model"]["ground_truth"]
>>> compute_score(row["data_source"], "\\\\boxed{0}", gold, row["extra_info"])["score"]
0.0
"""

from __future__ import annotations

import json
import threading
from typing import Any

_LOCAL = threading.local()


def _env(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """One env per (thread, env id, kwargs): verl calls compute_score from worker threads/processes."""
    import llmgym

    key = (env_id, json.dumps(env_kwargs, sort_keys=True, default=str))
    cache: dict[tuple[str, str], Any] = getattr(_LOCAL, "envs", None) or {}
    _LOCAL.envs = cache
    if key not in cache:
        cache[key] = llmgym.make(env_id, disable_env_checker=True, **env_kwargs)
    return cache[key]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """verl's reward: the env's reward for ``solution_str`` on task ``ground_truth`` of env ``data_source``.

    Returns ``{"score": reward, "acc": 1.0 if is_success else 0.0, <reward components>...}``
    (verl takes ``score`` as the reward and logs the other keys). A malformed row scores 0 with
    the reason in ``"error"``; it never raises on model output.
    """
    extra = extra_info if isinstance(extra_info, dict) else {}
    try:
        env_kwargs = extra.get("env_kwargs") or {}
        if isinstance(env_kwargs, str):  # dataset_rows stores it as JSON text (parquet-friendly)
            env_kwargs = json.loads(env_kwargs)
        env = _env(str(data_source), dict(env_kwargs))
        env.reset(seed=extra.get("seed"), options={"task_id": str(ground_truth)})
        text = solution_str if isinstance(solution_str, str) else str(solution_str)
        _, reward, _, _, info = env.step(text)
    except Exception as e:  # a bad row must not stop a verl run
        return {"score": 0.0, "acc": 0.0, "error": f"{type(e).__name__}: {e}"}
    out: dict[str, Any] = {"score": float(reward), "acc": float(bool(info.get("is_success")))}
    for name, value in (info.get("reward_components") or {}).items():
        out[f"component/{name}"] = float(value)
    return out


def dataset_rows(
    env_id: str,
    n: int,
    *,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    split: str = "train",
) -> list[dict[str, Any]]:
    """``n`` rows in verl's RL dataset schema (save with ``datasets.Dataset.from_list(rows).to_parquet``)."""
    import llmgym

    env = llmgym.make(env_id, disable_env_checker=True, **dict(env_kwargs or {}))
    rows = []
    try:
        for i, s in enumerate(range(seed, seed + n)):
            _, info = env.reset(seed=s)
            rows.append(
                {
                    "data_source": env_id,
                    "prompt": [
                        {"role": m["role"], "content": m.get("content") or ""}
                        for m in info["messages"]
                    ],
                    "ability": str(info.get("domain", "generic")),
                    "reward_model": {"style": "rule", "ground_truth": str(info["task_id"])},
                    "extra_info": {
                        "split": split,
                        "index": i,
                        "seed": s,
                        "env_kwargs": json.dumps(dict(env_kwargs or {}), sort_keys=True),
                    },
                }
            )
    finally:
        env.close()
    return rows


__all__ = ["compute_score", "dataset_rows"]
