"""Search at equal policy-call budgets: best-of-N, beam search and MCTS, side by side.

Settings, each at budgets of 8, 32 and 128 policy calls (sampled messages) per episode:

- ``add-chain``: the demo's tiny model after SFT, before GRPO (``llmgym.agents.demo.prepare``),
  then :data:`CHAIN_SFT_STEPS` more SFT steps on :data:`CHAIN_SFT_CONVERSATIONS` worked
  conversations in this setting's multi-turn layout (built here unless ``--model`` names it;
  ``--demo`` reuses a demo SFT model), sampled at ``--temperature`` (1.0, as GRPO samples), on
  Math-v0 in ``subtask_mode="sequential"``: three single-digit additions asked one per turn,
  each in the demo's own wording (``What is a + b?``, a blank line, ``Put your final answer in
  \\boxed{}.``), each graded as it is answered (a process reward) and the last one as the
  outcome. *Solved* means every step right (the full return); the env's own ``is_success`` is
  only the last step's.
  Without the extra SFT the demo model answers a step right in 1-2 samples of 100 in this layout
  (30 of 100 on the demo's own one-question prompt at temperature 0.7): the task's preamble, the
  ``Question k of 3:`` prefix and the feedback turns are text it never saw.
- ``order-ops`` (only with ``--settings``): the catalogue's ``arith.order_ops`` at difficulty 0
  in sequential mode, beyond this 160k-parameter model, which only ever saw single-digit sums.
- ``coding``: CodingMultiTurn-v0 with the oracle-mixed policy: the task's reference solution
  with probability ``--oracle-p``, else a wrong program, from a seeded generator.

Each method gets the same budget per episode: best-of-N plays budget / turns episodes; beam keeps
``width`` nodes (1, 2 and 4 at budgets 8, 32 and 128), each expanded ``expand`` ways so that the
rounds spend the budget (:func:`beam_shape`); MCTS spends the budget, with the library's
defaults (``mcts``) and without rollouts (``mcts_process``: a leaf's value is the process
reward so far; this variant was chosen on tasks 1000-1039, which the benchmark never runs).
Rates are over ``--tasks`` tasks per setting (the same tasks for every method) with their standard error;
each method's gain over best-of-N is the mean of the per-task differences, with the standard
error of that paired mean. ``calls`` is the mean actually spent, ``wall`` the mean seconds per
searched episode. Writes ``search_bench.json`` and ``search_budget_curve.png`` to ``--out``;
``--report A.json B.json`` merges runs (e.g. budgets run in two processes) into one table and
figure. ``--quick`` runs both settings with the oracle-mixed policy on a few tasks (no model).
Run: python benchmarks/search.py [--tasks 40] [--model DIR | --demo DIR] [--out runs/search-bench]
"""

from __future__ import annotations

import argparse
import json
import math
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
METHODS = ("best_of_n", "beam", "mcts", "mcts_process")
"""``mcts`` runs the library's defaults (a leaf valued by a rollout to the end); ``mcts_process``
values a leaf by the rewards on its path only (``rollouts=False``): the process reward ranks it."""
INSTRUCTION = "Put your final answer in \\boxed{}."
CHAIN_SFT_CONVERSATIONS = 256
"""Worked add-chain conversations of the extra SFT (tasks from index 10,000: never searched)."""
CHAIN_SFT_STEPS = 150
"""Extra SFT steps (16 conversations each) in the multi-turn layout."""
SETTINGS = ("add-chain", "order-ops", "coding")


def add_chain_task(index: int, steps: int = 3) -> Task:
    """Three single-digit additions, one per turn (sequential subtasks); the last is the outcome."""
    rng = random.Random(f"add-chain:{index}")
    pairs = [(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(steps)]
    subtasks = [
        Subtask(
            id=f"s{i + 1}",
            prompt=f"What is {a} + {b}?\n\n{INSTRUCTION}",  # the demo's wording, word for word
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


def beam_shape(turns: int, budget: int) -> tuple[int, int]:
    """Beam width and expansion that spend about the budget: the root is expanded once and up to
    ``width`` nodes in each later round, ``expand`` samples each (wider as the budget grows)."""
    width = 1 if budget < 32 else 2 if budget < 128 else 4
    return width, max(1, budget // (1 + width * (turns - 1)))


def methods(turns: int, budget: int) -> dict[str, Callable[..., Any]]:
    width, expand = beam_shape(turns, budget)
    return {
        "best_of_n": lambda env, pol, seed: best_of_n(
            env, pol, n=max(1, budget // turns), budget=budget, seed=seed
        ),
        "beam": lambda env, pol, seed: beam_search(
            env, pol, width=width, expand=expand, budget=budget, seed=seed
        ),
        "mcts": lambda env, pol, seed: mcts(env, pol, calls=budget, seed=seed),
        "mcts_process": lambda env, pol, seed: mcts(
            env, pol, calls=budget, rollouts=False, seed=seed
        ),
    }


def solved(result: Any) -> bool:
    """Every step right: the outcome, and every subtask's reward 1 in sequential mode."""
    if not result.success:
        return False
    state = result.best.state
    rewards = state.get("subtask_rewards") or {}
    return all(v >= 1.0 for v in rewards.values())


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean of ``values`` (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values) / math.sqrt(len(values))


def run_setting(
    name: str, env: Any, policy: Policy, resets: list[dict[str, Any]], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    """One row per (budget, method): solved share, its standard error and the per-task wins."""
    rows = []
    env.reset(seed=0, options=resets[0])
    turns = env.unwrapped.episode.max_turns
    for budget in budgets:
        for method, fn in methods(turns, budget).items():
            wins, calls, walls, ends = [], [], [], 0
            for i, options in enumerate(resets):
                env.reset(seed=i, options=options)
                t0 = time.perf_counter()
                result = fn(env, policy, i)
                walls.append(time.perf_counter() - t0)
                calls.append(result.stats["calls"])
                wins.append(int(solved(result)))
                ends += result.success
            rows.append(
                {
                    "setting": name,
                    "budget": budget,
                    "method": method,
                    "solved": statistics.mean(wins),
                    "se": standard_error(wins),
                    "per_task": wins,
                    "env_success": ends / len(resets),
                    "calls": statistics.mean(calls),
                    "wall_s": statistics.mean(walls),
                }
            )
            r = rows[-1]
            print(
                f"{name:10} budget {budget:4} {method:10} solved {r['solved']:.3f} "
                f"+- {r['se']:.3f} (env success {r['env_success']:.3f}) calls {r['calls']:6.1f} "
                f"wall {r['wall_s']:.3f} s",
                flush=True,
            )
    return rows


def gain_over_best_of_n(rows: Sequence[dict[str, Any]], row: dict[str, Any]) -> tuple[float, float]:
    """``row``'s solved share minus best-of-N's on the same tasks and budget, and the standard
    error of that paired difference."""
    (base,) = [
        r
        for r in rows
        if r["setting"] == row["setting"]
        and r["budget"] == row["budget"]
        and r["method"] == "best_of_n"
    ]
    diffs = [a - b for a, b in zip(row["per_task"], base["per_task"], strict=True)]
    return statistics.mean(diffs), standard_error(diffs)


def tiny_policy(model_dir: Path, temperature: float = 1.0) -> Policy:
    import torch

    from llmgym.agents.hf import HFPolicy
    from llmgym.agents.tiny import load

    torch.set_num_threads(1)  # the model is tiny: more threads only contend on a shared CPU
    model, tokenizer = load(model_dir)
    return HFPolicy(
        model,
        tokenizer,
        spec=f"hf:{model_dir}",
        temperature=temperature,
        max_new_tokens=32,
        batch_size=64,
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


def build_model(out: Path, demo: Path | None = None) -> Path:
    """The demo's pretraining and SFT (``prepare``, unless ``demo`` is its SFT model already),
    then the extra SFT on worked add-chain conversations in sequential mode's layout."""
    from llmgym.agents.demo import DemoConfig, prepare
    from llmgym.agents.sft import SFTConfig, SFTTrainer, write_jsonl

    if demo is None:
        print("building the demo's SFT model (pretraining + SFT, a few minutes on CPU)", flush=True)
        prepare(DemoConfig(output_dir=str(out / "demo"), report=False), log=print)
        demo = out / "demo" / "sft" / "final"
    data = write_jsonl(out / "add_chain_sft.jsonl", chain_demonstrations(CHAIN_SFT_CONVERSATIONS))
    cfg = SFTConfig(
        model=str(demo),
        data=str(data),
        output_dir=str(out / "add_chain_sft"),
        total_steps=CHAIN_SFT_STEPS,
        batch_size=16,
        learning_rate=1e-3,
        progress=False,
        torch_threads=1,
        tensorboard=False,
    )
    SFTTrainer(cfg).train()
    return out / "add_chain_sft" / "final"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Solved share against budget per setting, one line per method, standard errors as bars."""
    from matplotlib.figure import Figure

    budgets = {s: {r["budget"] for r in rows if r["setting"] == s} for s in SETTINGS}
    settings = [s for s in SETTINGS if budgets[s]]
    fig = Figure(figsize=(4.5 * len(settings), 3.4), layout="constrained")
    for ax, setting in zip(fig.subplots(1, len(settings), squeeze=False)[0], settings, strict=True):
        for method in METHODS:
            mine = sorted(
                (r for r in rows if r["setting"] == setting and r["method"] == method),
                key=lambda r: r["budget"],
            )
            ax.errorbar(
                [r["budget"] for r in mine],
                [r["solved"] for r in mine],
                yerr=[r["se"] for r in mine],
                fmt="o-",
                capsize=3,
                label=method,
            )
        ax.set_xscale("log", base=2)
        ax.set_title(setting)
        ax.set_xlabel("policy-call budget per episode")
        ax.set_ylabel("solved")
        ax.set_ylim(-0.02, 1.02)
        ax.legend()
    fig.savefig(path, dpi=100)


def table(rows: list[dict[str, Any]]) -> str:
    """README rows: per cell the solved share +- its standard error, calls spent, and for beam
    and MCTS the paired gain over best-of-N in points."""
    lines = [
        "| setting | budget | tasks | best-of-N | beam | MCTS | MCTS, no rollouts |",
        "|---|---|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        for budget in sorted({r["budget"] for r in rows if r["setting"] == setting}):
            cells = {
                r["method"]: r for r in rows if r["setting"] == setting and r["budget"] == budget
            }
            texts = []
            for method in METHODS:
                r = cells[method]
                text = f"{r['solved']:.2f} ± {r['se']:.2f} "
                text += f"({r['calls']:.0f} calls, {r['wall_s']:.1f} s)"
                if method != "best_of_n":
                    gain, se = gain_over_best_of_n(rows, r)
                    text += f"; {100 * gain:+.0f} ± {100 * se:.0f} pts"
                texts.append(text)
            n = len(cells["best_of_n"]["per_task"])
            lines.append(f"| {setting} | {budget} | {n} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def report(rows: list[dict[str, Any]], out: Path) -> None:
    """Write the JSON and the figure, print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_bench.json").write_text(json.dumps(rows, indent=1))
    plot(rows, out / "search_budget_curve.png")
    print("\n" + table(rows))
    print(f"\nwrote {out / 'search_bench.json'} and {out / 'search_budget_curve.png'}")


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every setting of ``args.settings`` at every budget."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budgets = [int(b) for b in args.budgets.split(",")]
    settings = args.settings.split(",")
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise SystemExit(f"--settings expects some of {SETTINGS}, got {sorted(unknown)}")
    policy: Policy
    if args.quick:  # no model: the oracle-mixed policy on both settings
        policy = OracleMixed(0.5)
    elif {"add-chain", "order-ops"} & set(settings):
        model = Path(args.model) if args.model else build_model(out, args.demo and Path(args.demo))
        policy = tiny_policy(model, args.temperature)
    rows: list[dict[str, Any]] = []
    for setting in settings:
        if setting == "coding":
            env = gym.make("llm/CodingMultiTurn-v0", disable_env_checker=True)
            resets: list[dict[str, Any]] = [{} for _ in range(args.tasks)]
            rows += run_setting(setting, env, OracleMixed(args.oracle_p), resets, budgets)
        elif setting == "add-chain":
            env = gym.make("llm/Math-v0", subtask_mode="sequential", disable_env_checker=True)
            resets = [{"task": add_chain_task(i)} for i in range(args.tasks)]
            rows += run_setting(setting, env, policy, resets, budgets)
        else:
            env = gym.make(
                "llm/Math-v0",
                family="arith.order_ops",
                difficulty=0.0,
                subtask_mode="sequential",
                disable_env_checker=True,
            )
            rows += run_setting(setting, env, policy, [{} for _ in range(args.tasks)], budgets)
        env.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=40, help="tasks per setting")
    parser.add_argument("--model", help="the add-chain SFT model directory (built when not given)")
    parser.add_argument("--demo", help="the demo's SFT model to build the add-chain model from")
    parser.add_argument("--temperature", type=float, default=1.0, help="the tiny model's sampling")
    parser.add_argument(
        "--oracle-p", type=float, default=0.1, help="oracle share of the coding policy"
    )
    parser.add_argument("--out", default="runs/search-bench")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--settings", default="add-chain,coding", help=f"some of {SETTINGS}")
    parser.add_argument("--quick", action="store_true", help="4 tasks, budgets 8 and 32, no model")
    parser.add_argument("--report", nargs="+", help="merge these search_bench.json files instead")
    args = parser.parse_args(argv)
    if args.report:
        rows = [row for path in args.report for row in json.loads(Path(path).read_text())]
    else:
        if args.quick:
            args.tasks, args.budgets = min(args.tasks, 4), "8,32"
        rows = run(args)
    report(rows, Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
