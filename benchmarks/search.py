"""Search at equal policy-call budgets: best-of-N, beam search and MCTS, side by side.

Two settings, each at budgets of 8, 32 and 128 policy calls (sampled messages) per episode:

- ``add-chain``: the demo's tiny model after SFT, before GRPO (``llmgym.agents.demo.prepare``),
  with 40 more SFT steps on 64 worked conversations in this setting's multi-turn layout (built
  here unless ``--model`` names it), sampled at temperature 0.7, on Math-v0 in
  ``subtask_mode="sequential"``: a task of three single-digit additions asked one per turn in the
  wording the model was trained on (``What is a + b? Put your final answer in \\boxed{}.``), each
  graded as it is answered (a process reward) and the last one as the outcome. *Solved* means
  every step right (the full return); the env's own ``is_success`` is only the last step's. The
  catalogue's multi-step families (``arith.order_ops`` at difficulty 0, also run here at the
  second budget) are beyond this 160k-parameter model, which only ever saw single-digit sums.
- ``coding``: CodingMultiTurn-v0 with the oracle-mixed policy: the task's reference solution
  with probability ``--oracle-p``, else a wrong program, from a seeded generator.

Each method gets the same budget per episode: best-of-N plays budget / turns episodes; beam keeps
``width`` nodes expanded 4 ways (width = budget / (4 x turns)); MCTS spends the budget. Rates are
over ``--tasks`` tasks per setting; ``calls`` is the mean actually spent; ``wall`` the mean
seconds per searched episode. Writes ``search_bench.json`` and ``search_budget_curve.png`` to
``--out``.
Run: python benchmarks/search.py [--tasks 20] [--model runs/search-bench/add_chain_sft/final] [--out runs/search-bench]
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
from llmgym.search import beam_search, best_of_n, mcts
from llmgym.tasks import Subtask, Task

BUDGETS = (8, 32, 128)
INSTRUCTION = "Put your final answer in \\boxed{}."


def add_chain_task(index: int, steps: int = 3) -> Task:
    """Three single-digit additions, one per turn (sequential subtasks); the last is the outcome."""
    rng = random.Random(f"add-chain:{index}")
    pairs = [(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(steps)]
    subtasks = [
        Subtask(
            id=f"s{i + 1}",
            prompt=f"What is {a} + {b}? {INSTRUCTION}",
            answer=str(a + b),
            verifier="math",
            metadata={"form": "number"},
        )
        for i, (a, b) in enumerate(pairs)
    ]
    return Task(
        id=f"add-chain:{index}",
        prompt="Answer each question.",
        answer=str(sum(pairs[-1])),
        domain="math",
        family="bench.add_chain",
        subtasks=tuple(subtasks),
        metadata={"form": "number"},
    )


class OracleMixed(Policy):
    """The env's reference answer with probability ``p``, a wrong program otherwise."""

    spec = "oracle-mixed"

    def __init__(self, p: float, seed: int = 0):
        self.settings = {"p": p}
        self.p = p
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        self.rng = random.Random(f"oracle-mixed:{seed}")

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            if self.rng.random() < self.p:
                out.append(Response(req.env.unwrapped.oracle_action()))
            else:
                wrong = self.rng.choice(("return None", "return 0", "raise ValueError('no')"))
                out.append(Response(f"```python\ndef solve(*args):\n    {wrong}\n```"))
        return out


def methods(turns: int, budget: int) -> dict[str, Callable[..., Any]]:
    width = max(1, budget // (4 * turns))
    return {
        "best_of_n": lambda env, pol, seed: best_of_n(
            env, pol, n=max(1, budget // turns), budget=budget, seed=seed
        ),
        "beam": lambda env, pol, seed: beam_search(
            env, pol, width=width, expand=min(4, max(2, budget // turns)), budget=budget, seed=seed
        ),
        "mcts": lambda env, pol, seed: mcts(env, pol, calls=budget, seed=seed),
    }


def solved(result: Any) -> bool:
    """Every step right: the outcome, and every subtask's reward 1 in sequential mode."""
    if not result.success:
        return False
    state = result.best.state
    rewards = state.get("subtask_rewards") or {}
    return all(v >= 1.0 for v in rewards.values())


def run_setting(
    name: str, env: Any, policy: Policy, resets: list[dict[str, Any]], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    rows = []
    env.reset(seed=0, options=resets[0])
    turns = env.unwrapped.episode.max_turns
    for budget in budgets:
        for method, fn in methods(turns, budget).items():
            wins, calls, walls, ends = 0, [], [], 0
            for i, options in enumerate(resets):
                env.reset(seed=i, options=options)
                t0 = time.perf_counter()
                result = fn(env, policy, i)
                walls.append(time.perf_counter() - t0)
                calls.append(result.stats["calls"])
                wins += solved(result)
                ends += result.success
            rows.append(
                {
                    "setting": name,
                    "budget": budget,
                    "method": method,
                    "solved": wins / len(resets),
                    "env_success": ends / len(resets),
                    "calls": statistics.mean(calls),
                    "wall_s": statistics.mean(walls),
                }
            )
            r = rows[-1]
            print(
                f"{name:10} budget {budget:4} {method:10} solved {r['solved']:.3f} "
                f"(env success {r['env_success']:.3f}) calls {r['calls']:6.1f} "
                f"wall {r['wall_s']:.3f} s",
                flush=True,
            )
    return rows


def tiny_policy(model_dir: Path) -> Policy:
    from llmgym.agents.hf import HFPolicy
    from llmgym.agents.tiny import load

    model, tokenizer = load(model_dir)
    return HFPolicy(
        model, tokenizer, spec=f"hf:{model_dir}", temperature=0.7, max_new_tokens=32, batch_size=64
    )


def chain_demonstrations(n: int) -> list[dict[str, Any]]:
    """Worked add-chain conversations (the demo's answer style) on tasks the benchmark never
    searches (indices from 10,000)."""
    env = gym.make("llm/Math-v0", subtask_mode="sequential", disable_env_checker=True)
    records = []
    for i in range(10_000, 10_000 + n):
        _, info = env.reset(options={"task": add_chain_task(i)})
        ended = False
        while not ended:
            episode = env.unwrapped.episode  # type: ignore[attr-defined]
            sub = episode.subtasks[episode.subtask_index]
            a, b = sub.prompt.split("?")[0].removeprefix("What is ").split(" + ")
            answer = f"{a} + {b} = {sub.answer}, so the answer is \\boxed{{{sub.answer}}}."
            _, _, terminated, truncated, info = env.step(answer)
            ended = terminated or truncated
        records.append({"messages": info["messages"]})
    env.close()
    return records


def build_model(out: Path) -> Path:
    """The demo's pretraining and SFT (``prepare``), then 40 SFT steps on 64 worked add-chain
    conversations so the model has seen the multi-turn layout of sequential mode."""
    from llmgym.agents.demo import DemoConfig, prepare
    from llmgym.agents.sft import SFTConfig, SFTTrainer, write_jsonl

    print("building the demo's SFT model (pretraining + SFT, a few minutes on CPU)", flush=True)
    prepare(DemoConfig(output_dir=str(out / "demo"), report=False), log=print)
    data = write_jsonl(out / "add_chain_sft.jsonl", chain_demonstrations(64))
    cfg = SFTConfig(
        model=str(out / "demo" / "sft" / "final"),
        data=str(data),
        output_dir=str(out / "add_chain_sft"),
        total_steps=40,
        batch_size=16,
        learning_rate=1e-3,
        progress=False,
        torch_threads=1,
        tensorboard=False,
    )
    SFTTrainer(cfg).train()
    return out / "add_chain_sft" / "final"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    from matplotlib.figure import Figure

    settings = sorted({r["setting"] for r in rows})
    fig = Figure(figsize=(4.5 * len(settings), 3.4), layout="constrained")
    for ax, setting in zip(fig.subplots(1, len(settings), squeeze=False)[0], settings, strict=True):
        for method in ("best_of_n", "beam", "mcts"):
            mine = [r for r in rows if r["setting"] == setting and r["method"] == method]
            ax.plot([r["budget"] for r in mine], [r["solved"] for r in mine], "o-", label=method)
        ax.set_xscale("log", base=2)
        ax.set_title(setting)
        ax.set_xlabel("policy-call budget per episode")
        ax.set_ylabel("solved")
        ax.set_ylim(-0.02, 1.02)
        ax.legend()
    fig.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20, help="tasks per setting")
    parser.add_argument("--model", help="the add-chain SFT model directory (built when not given)")
    parser.add_argument(
        "--oracle-p", type=float, default=0.1, help="oracle share of the coding policy"
    )
    parser.add_argument("--out", default="runs/search-bench")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    model_dir = Path(args.model) if args.model else build_model(out)
    policy = tiny_policy(model_dir)
    rows: list[dict[str, Any]] = []

    env = gym.make("llm/Math-v0", subtask_mode="sequential", disable_env_checker=True)
    rows += run_setting(
        "add-chain", env, policy, [{"task": add_chain_task(i)} for i in range(args.tasks)], budgets
    )
    env.close()
    env = gym.make(
        "llm/Math-v0",
        family="arith.order_ops",
        difficulty=0.0,
        subtask_mode="sequential",
        disable_env_checker=True,
    )
    rows += run_setting("order-ops", env, policy, [{} for _ in range(args.tasks)], budgets[1:2])
    env.close()
    env = gym.make("llm/CodingMultiTurn-v0", disable_env_checker=True)
    rows += run_setting(
        "coding", env, OracleMixed(args.oracle_p), [{} for _ in range(args.tasks)], budgets
    )
    env.close()

    (out / "search_bench.json").write_text(json.dumps(rows, indent=1))
    plot([r for r in rows if r["setting"] != "order-ops"], out / "search_budget_curve.png")
    print("\n| setting | budget | best-of-N | beam | MCTS |\n|---|---|---|---|---|")
    for setting in ("add-chain", "order-ops", "coding"):
        for budget in sorted({r["budget"] for r in rows if r["setting"] == setting}):
            cells = {
                r["method"]: r for r in rows if r["setting"] == setting and r["budget"] == budget
            }
            print(
                f"| {setting} | {budget} | "
                + " | ".join(
                    f"{cells[m]['solved']:.2f} ({cells[m]['calls']:.0f} calls, {cells[m]['wall_s']:.2f} s)"
                    for m in ("best_of_n", "beam", "mcts")
                )
                + " |"
            )
    print(f"\nwrote {out / 'search_bench.json'} and {out / 'search_budget_curve.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
