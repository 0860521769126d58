"""Expert iteration: search finds successful episodes, SFT trains the policy on them, repeat.

Each iteration loads the current model as a sampling policy (``HFPolicy``), runs a search
(``llmgym.search``: ``best_of_n:N``, ``beam:WxK`` or ``mcts:CALLS``) from ``tasks_per_iteration``
fresh tasks of the env, keeps the best trajectory of every search that succeeded, and fine-tunes
the model on those conversations with :class:`llmgym.agents.sft.SFTTrainer` (loss on the assistant
turns only). The next iteration searches with the fine-tuned model.

Where it departs from the papers it follows (Expert Iteration, Anthony et al. 2017; STaR and
ReST-EM for language models): the expert is a search against the env's verified rewards
(process and outcome), not a separate planner distilled into a network; only successful
trajectories are kept (ReST-EM's binary filter, no reward weighting); each iteration fine-tunes
the previous iteration's model (STaR restarts from the base model); there is no value head.
``policy_samples`` counts every sampled message the searches spent, the cost to compare with
GRPO's ``prompts x group size x turns``.

What it is not: multi-process (one process searches and trains), nor a GRPO variant (see
:mod:`llmgym.agents.tree_grpo`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgym.agents.config import TrainConfig, require


@dataclass
class ExpertIterationConfig(TrainConfig):
    """Search-then-SFT rounds (and the model, env, seed and SFT fields of :class:`TrainConfig`:
    ``total_steps`` and ``learning_rate`` are each round's SFT steps and peak learning rate)."""

    output_dir: str = "runs/expert-iteration"
    """Each round's data and SFT run go to ``iter<i>/``; ``results.json`` at the end."""
    total_steps: int = 40
    """SFT steps per round."""
    learning_rate: float = 5e-4
    """SFT peak learning rate."""
    torch_threads: int = 1
    """CPU threads for torch (0: torch's default)."""
    search: str = "mcts:16"
    """The search spec run from each task (``llmgym.search.parse_spec``)."""
    iterations: int = 3
    """Search-then-SFT rounds."""
    tasks_per_iteration: int = 64
    """Tasks searched per round (fresh seeds each round)."""
    batch_size: int = 16
    """SFT examples per step."""
    temperature: float = 1.0
    """Sampling temperature of the search's policy."""
    max_new_tokens: int = 32
    """Longest sampled message."""

    def __post_init__(self) -> None:
        super().__post_init__()
        from llmgym.search import parse_spec

        parse_spec(self.search)  # a bad spec says what it expects
        for name in ("iterations", "tasks_per_iteration", "batch_size", "max_new_tokens"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1")
        require(self.temperature > 0, "temperature must be > 0: a greedy search finds one path")


def search_demonstrations(
    env: Any, policy: Any, spec: str, seeds: range
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The best trajectory of each successful search from ``reset(seed=s)``, as SFT records,
    and what the searches cost."""
    from llmgym.search import search

    records: list[dict[str, Any]] = []
    calls = solved = 0
    for seed in seeds:
        _, info = env.reset(seed=seed)
        result = search(env, policy, spec, seed=seed)
        calls += result.stats["calls"]
        if result.success:
            solved += 1
            records.append({"messages": result.messages, "tools": info.get("tools") or []})
    return records, {"searched": len(seeds), "solved": solved, "policy_samples": calls}


def run(cfg: ExpertIterationConfig, *, log: Any = print) -> dict[str, Any]:
    """Every round; returns (and writes to ``results.json``) each round's figures."""
    import gymnasium as gym

    from llmgym.agents.hf import HFPolicy
    from llmgym.agents.modeling import set_torch_threads
    from llmgym.agents.sft import SFTConfig, SFTTrainer, write_jsonl
    from llmgym.agents.tiny import load

    set_torch_threads(cfg.torch_threads)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    current = cfg.model
    rounds = []
    env = gym.make(cfg.env_id, disable_env_checker=True, **cfg.env_kwargs)
    try:
        for it in range(cfg.iterations):
            t0 = time.perf_counter()
            model, tokenizer = load(current)
            policy = HFPolicy(
                model,
                tokenizer,
                spec=f"hf:{current}",
                temperature=cfg.temperature,
                max_new_tokens=cfg.max_new_tokens,
                seed=cfg.seed + it,
            )
            first = cfg.seed + it * cfg.tasks_per_iteration
            records, stats = search_demonstrations(
                env, policy, cfg.search, range(first, first + cfg.tasks_per_iteration)
            )
            policy.close()
            folder = out / f"iter{it}"
            if records:
                data = write_jsonl(folder / "demonstrations.jsonl", records)
                sft = SFTConfig(
                    model=str(current),
                    data=str(data),
                    output_dir=str(folder / "sft"),
                    total_steps=cfg.total_steps,
                    batch_size=cfg.batch_size,
                    learning_rate=cfg.learning_rate,
                    seed=cfg.seed + it,
                    progress=False,
                    torch_threads=cfg.torch_threads,
                    tensorboard=False,
                )
                stats["sft_loss"] = SFTTrainer(sft).train()["losses/sft"]
                current = str(folder / "sft" / "final")
            stats.update(
                iteration=it,
                examples=len(records),
                model=str(current),
                seconds=time.perf_counter() - t0,
            )
            rounds.append(stats)
            log(
                f"[expert iteration {it + 1}/{cfg.iterations}] solved {stats['solved']}/"
                f"{stats['searched']} with {stats['policy_samples']} policy samples; "
                f"{len(records)} demonstrations"
            )
    finally:
        env.close()
    results = {
        "config": cfg.to_dict(),
        "rounds": rounds,
        "final_model": str(current),
        "policy_samples": sum(r["policy_samples"] for r in rounds),
    }
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return results
