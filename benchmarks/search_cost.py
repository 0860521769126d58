"""What search costs: wall time per searched episode of each method beside best-of-N at the same
policy-call budget, with the batching of issue 20 off ("before") and on ("after").

- before: ``env_workers=1`` (env steps one at a time in the search's env) and MCTS ``batch=1``
  (one simulation, so mostly one sampled message, per policy call): the search as it was.
- after: the defaults (a policy call's new children stepped together on up to 8 env clones; MCTS
  making 8 selections per round, their expansions in one policy call and their rollouts one
  call per turn).

Two settings: ``chain``, Math-v0 in ``subtask_mode="sequential"`` on tasks of three single-digit
sums asked one per turn, with the demo's tiny model after SFT (``llmgym.agents.demo.prepare``,
or ``--model``) at temperature 0.7 and 32 new tokens; ``coding``, CodingMultiTurn-v0 (four turns,
each attempt run in the sandbox against the tests) with a seeded policy that plays the reference
solution with probability 0.1 and a wrong program otherwise. Budgets split (the shape
``benchmarks/search.py`` used before it let beam spend its budget): best-of-N plays budget / turns episodes, beam keeps budget / (4 x turns)
nodes expanded up to 4 ways, MCTS spends the budget. Each cell is the mean over ``--tasks``
tasks; ``gen`` is the number of ``generate`` calls (policy round trips) per episode.

Run: python benchmarks/search_cost.py [--model DIR] [--tasks 3] [--budgets 32,128] [--out runs/search-cost]
Writes search_cost.json to --out and prints the table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import llmgym  # noqa: F401  (registers the envs)
from llmgym.policies import Policy, Request, Response
from llmgym.search import SearchResult, beam_search, best_of_n, mcts
from llmgym.tasks import Subtask, Task

VARIANTS = ("before", "after")
METHODS = ("best_of_n", "beam", "mcts")


def sums_chain(index: int, steps: int = 3) -> Task:
    """``steps`` single-digit additions, one per turn, each graded as it is answered."""
    rng = random.Random(f"search-cost:{index}")
    pairs = [(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(steps)]
    questions = tuple(
        Subtask(
            id=f"q{i}",
            prompt=f"What is {a} + {b}? Put your final answer in \\boxed{{}}.",
            answer=str(a + b),
            verifier="math",
            metadata={"form": "number"},
        )
        for i, (a, b) in enumerate(pairs)
    )
    return Task(
        id=f"search-cost:{index}",
        prompt="Answer each question.",
        answer=questions[-1].answer,
        domain="math",
        family="bench.sums_chain",
        subtasks=questions,
        metadata={"form": "number"},
    )


class SometimesRight(Policy):
    """The reference solution with probability ``p``, else one of three wrong programs."""

    spec = "sometimes-right"

    def __init__(self, p: float = 0.1, seed: int = 0):
        self.settings = {"p": p}
        self.p = p
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.rng = random.Random(f"sometimes-right:{seed}")

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            if self.rng.random() < self.p:
                out.append(Response(req.env.unwrapped.oracle_action()))
                continue
            body = self.rng.choice(("return None", "return -1", "raise KeyError(0)"))
            out.append(Response(f"```python\ndef solve(*args):\n    {body}\n```"))
        return out


def method_fns(turns: int, budget: int, before: bool) -> dict[str, Callable[..., SearchResult]]:
    """Each method at ``budget``, searching from an env with a seeded policy."""
    width = max(1, budget // (4 * turns))
    expand = min(4, max(2, budget // turns))
    common: dict[str, Any] = {"budget": budget, "env_workers": 1} if before else {"budget": budget}
    one_by_one: dict[str, Any] = {"batch": 1} if before else {}
    return {
        "best_of_n": lambda env, pol, seed: best_of_n(
            env, pol, n=max(1, budget // turns), seed=seed, **common
        ),
        "beam": lambda env, pol, seed: beam_search(
            env, pol, width=width, expand=expand, seed=seed, **common
        ),
        "mcts": lambda env, pol, seed: mcts(
            env, pol, calls=budget, seed=seed, **common, **one_by_one
        ),
    }


def run_setting(
    name: str, env: Any, policy: Policy, resets: list[dict[str, Any]], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    """Every cell of one setting. Each task is searched by every variant and method in turn, so
    a change in the machine's load falls on all cells alike."""
    rows = []
    env.reset(seed=0, options=resets[0])
    turns = env.unwrapped.episode.max_turns
    for budget in budgets:
        runs: dict[tuple[str, str], list[SearchResult]] = {}
        walls: dict[tuple[str, str], list[float]] = {}
        for i, reset in enumerate(resets):
            for variant in VARIANTS:
                for method, fn in method_fns(turns, budget, variant == "before").items():
                    env.reset(seed=i, options=reset)
                    start = time.perf_counter()
                    runs.setdefault((variant, method), []).append(fn(env, policy, i))
                    walls.setdefault((variant, method), []).append(time.perf_counter() - start)
        for (variant, method), results in runs.items():
            rows.append(
                {
                    "setting": name,
                    "budget": budget,
                    "variant": variant,
                    "method": method,
                    "wall_s": statistics.mean(walls[(variant, method)]),
                    "calls": statistics.mean(r.stats["calls"] for r in results),
                    "generate_calls": statistics.mean(r.stats["generate_calls"] for r in results),
                    "env_steps": statistics.mean(r.stats["env_steps"] for r in results),
                    "success": sum(r.success for r in results) / len(results),
                }
            )
            row = rows[-1]
            print(
                f"{name:7} budget {budget:4} {variant:6} {method:9} wall {row['wall_s']:7.2f} s "
                f"calls {row['calls']:6.1f} gen {row['generate_calls']:6.1f} "
                f"steps {row['env_steps']:6.1f} success {row['success']:.2f}",
                flush=True,
            )
    return rows


def tiny_policy(model_dir: Path) -> Policy:
    """The tiny model sampling on one CPU thread: on a shared machine, torch's intra-op threads
    wait on each other in every matmul (a 32-call search took 49 s with 2 threads at load 8,
    0.6 s with one), which would time the machine's load and not the search."""
    import torch

    from llmgym.agents.hf import HFPolicy
    from llmgym.agents.tiny import load

    torch.set_num_threads(1)

    model, tokenizer = load(model_dir)
    return HFPolicy(
        model, tokenizer, spec=f"hf:{model_dir}", temperature=0.7, max_new_tokens=32, batch_size=64
    )


def demo_model(out: Path) -> Path:
    from llmgym.agents.demo import DemoConfig, prepare

    print("building the demo's SFT model (a few minutes on CPU)", flush=True)
    prepare(DemoConfig(output_dir=str(out / "demo"), report=False), log=print)
    return out / "demo" / "sft" / "final"


def table(rows: list[dict[str, Any]]) -> str:
    """Seconds per episode (generate calls), each method / best-of-N, and after / before."""
    cell = {(r["setting"], r["budget"], r["variant"], r["method"]): r for r in rows}
    lines = [
        "| setting | budget | method | before: s (gen) | after: s (gen) | after / before "
        "| / best-of-N before | / best-of-N after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for setting, budget in sorted({(r["setting"], r["budget"]) for r in rows}):
        for method in METHODS:
            b, a = (cell[(setting, budget, v, method)] for v in VARIANTS)
            bon_b, bon_a = (cell[(setting, budget, v, "best_of_n")] for v in VARIANTS)
            lines.append(
                f"| {setting} | {budget} | {method} | {b['wall_s']:.2f} ({b['generate_calls']:.0f}) "
                f"| {a['wall_s']:.2f} ({a['generate_calls']:.0f}) | {a['wall_s'] / b['wall_s']:.2f} "
                f"| {b['wall_s'] / bon_b['wall_s']:.1f} | {a['wall_s'] / bon_a['wall_s']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="the demo's SFT model directory (built when not given)")
    parser.add_argument("--tasks", type=int, default=3, help="tasks per cell")
    parser.add_argument("--budgets", default="32,128")
    parser.add_argument("--settings", default="chain,coding")
    parser.add_argument("--out", default="runs/search-cost")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    settings = args.settings.split(",")
    rows: list[dict[str, Any]] = []
    if "chain" in settings:
        policy = tiny_policy(Path(args.model) if args.model else demo_model(out))
        env = gym.make("llm/Math-v0", subtask_mode="sequential", disable_env_checker=True)
        resets = [{"task": sums_chain(i)} for i in range(args.tasks)]
        rows += run_setting("chain", env, policy, resets, budgets)
        env.close()
    if "coding" in settings:
        env = gym.make("llm/CodingMultiTurn-v0", disable_env_checker=True)
        rows += run_setting("coding", env, SometimesRight(), [{}] * args.tasks, budgets)
        env.close()
    (out / "search_cost.json").write_text(json.dumps(rows, indent=1))
    print("\n" + table(rows))
    print(f"\nwrote {out / 'search_cost.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
