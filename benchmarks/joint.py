"""Joint training without forgetting: sequential vs uniform mixture vs the task scheduler.

The demo's tiny Llama (159k parameters), after a shared pre-training and SFT on four families
(built once per seed, cached under the run directory), is trained with GRPO on
``llm/Mixture-v0`` over the same four families, three ways, each with the same number of
episodes:

1. ``sequential``: every prompt from one family, the families in turn (clock, then addition,
   multiplication, division), a quarter of the steps each;
2. ``uniform``: the mixture's own draw, every family with the same weight;
3. ``scheduler``: :class:`llmgym.agents.scheduler.TaskScheduler` (learning-progress weights,
   pausing converged families, re-probing them).

The families (difficulty 0 each; see ``llmgym.agents.joint``): ``clock::clock.later``
(domain ``clock``: the hour a 12-hour clock shows 1 to 9 hours later, a declarative env), and
``llm/Math-v0``'s ``arith.add_small`` (single-digit sums), ``arith.mul`` (single-digit
products) and ``arith.div`` (divisions by 2..9 with quotients up to 12).

Every family is evaluated greedily every ``eval_every`` steps on up to ``eval_episodes`` distinct
questions (every family has at most 108, and the full config evaluates all of them: exact
figures, no sampling noise in best - final; the questions are the ones training draws from, as
in the demo, on episodes seeded apart from training's). The run writes
``joint.json`` (per seed and arm: the curves, final and best success per family, forgetting =
best - final, episodes per family, the scheduler's decisions per step; the seed means and the
targets' verdicts) and ``joint_curves.png`` to ``--output-dir`` (and the figure to ``--figure``).
What it does not do: tune anything per arm (the arms share every setting but the task choice).

Run: python benchmarks/joint.py [--config benchmarks/configs/joint_full.yaml] [--quick] [--seeds 2]
     [--workers 2] [--output-dir runs/joint] [--figure docs/joint_curves.png] [--base-only]
Each arm as an ``llmgym train`` run: ``configs/joint/`` (``--base-only`` builds their model).
A rerun with the same output directory and config reuses every finished base model and arm.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from llmgym import error
from llmgym.agents.joint import ARMS, KINDS, ArmConfig, BaseConfig, build_base, run_seed

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class JointConfig:
    """The benchmark's sizes (``benchmarks/configs/joint_full.yaml``, ``benchmarks/configs/joint_quick.yaml``)."""

    seeds: int = 3
    steps: int = 160
    """GRPO steps per arm (each ``prompts_per_step x group_size`` episodes)."""
    eval_every: int = 20
    eval_episodes: int = 128
    """Distinct questions per family per evaluation (128 covers every family's all)."""
    prompts_per_step: int = 16
    group_size: int = 8
    learning_rate: float = 2e-4
    base: dict[str, Any] = field(default_factory=dict)
    """``BaseConfig`` fields (the shared pre-training and SFT)."""
    scheduler: dict[str, Any] = field(default_factory=dict)
    """``SchedulerConfig`` fields of the scheduler arm."""

    @classmethod
    def load(cls, path: str | Path) -> JointConfig:
        data = yaml.safe_load(Path(path).read_text()) or {}
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            raise error.Error(f"{path}: expects a mapping of {sorted(names)}")
        cfg = cls(**data)
        if cfg.steps % len(ARMS) or cfg.eval_every < 1 or (cfg.steps // len(ARMS)) % cfg.eval_every:
            raise error.Error(
                f"{path}: steps must split into {len(ARMS)} phases of whole eval_every periods"
            )
        return cfg


# --- figures from the curves ----------------------------------------------------------------------


def arm_figures(run: dict[str, Any]) -> dict[str, Any]:
    """Final, best, forgetting (best - final) per family, and the mean final success."""
    curves = {a: [e["success"][a] for e in run["evals"]] for a in ARMS}
    final = {a: c[-1] for a, c in curves.items()}
    best = {a: max(c) for a, c in curves.items()}
    return {
        "final": final,
        "best": best,
        "forgetting": {a: best[a] - final[a] for a in ARMS},
        "mean_final": float(np.mean(list(final.values()))),
        "episodes": run["episodes"],
    }


def phase_success(run: dict[str, Any], steps: int) -> list[dict[str, float]]:
    """Held-out success per family at the end of each quarter (the sequential arm's phases)."""
    ends = {steps * (k + 1) // len(ARMS) for k in range(len(ARMS))}
    return [e["success"] for e in run["evals"] if e["step"] in ends]


def mean_curve(runs: Sequence[dict[str, Any]]) -> tuple[list[int], dict[str, list[float]]]:
    """Episodes and the seed-mean success per family at each evaluation."""
    episodes = [
        int(np.mean([r["evals"][i]["episodes"] for r in runs]))
        for i in range(len(runs[0]["evals"]))
    ]
    success = {
        a: [
            float(np.mean([r["evals"][i]["success"][a] for r in runs]))
            for i in range(len(episodes))
        ]
        for a in ARMS
    }
    return episodes, success


def episodes_to_reach(episodes: Sequence[int], mean: Sequence[float], target: float) -> int | None:
    """The first evaluation's episodes at which the mean success is at least ``target``."""
    for n, value in zip(episodes, mean, strict=True):
        if value >= target - 1e-9:
            return n
    return None


def verdicts(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, on the seed means."""
    means = results["mean"]
    seq, uni, sch = (means[k] for k in KINDS)
    episodes, success = results["curves"]["uniform"]
    total = episodes[-1]
    s_eps, s_success = results["curves"]["scheduler"]
    s_mean = [float(np.mean([s_success[a][i] for a in ARMS])) for i in range(len(s_eps))]
    reach = episodes_to_reach(s_eps, s_mean, uni["mean_final"])
    early = ARMS[: len(ARMS) - 1]
    return {
        "sequential_forgets_early_families": {
            a: seq["forgetting"][a] for a in early if seq["forgetting"][a] > 0.02
        },
        "scheduler_vs_uniform_points": {a: 100 * (sch["final"][a] - uni["final"][a]) for a in ARMS},
        "scheduler_no_family_below_uniform_by_2_points": all(
            sch["final"][a] >= uni["final"][a] - 0.02 for a in ARMS
        ),
        "scheduler_forgetting_at_most_2_points": all(sch["forgetting"][a] <= 0.02 for a in ARMS),
        "scheduler_episodes_to_uniform_final_mean": reach,
        "episodes_per_arm": total,
        "scheduler_saves_25_percent": reach is not None and reach <= 0.75 * total,
    }


def summarize(runs: dict[str, list[dict[str, Any]]], cfg: JointConfig) -> dict[str, Any]:
    """Per-seed figures, seed means and the targets' verdicts."""
    out: dict[str, Any] = {"config": asdict(cfg), "arms": list(ARMS), "per_seed": {}, "mean": {}}
    out["curves"] = {}
    for kind in KINDS:
        figs = [arm_figures(r) for r in runs[kind]]
        out["per_seed"][kind] = [
            {**f, "phases": phase_success(r, cfg.steps), "seconds": r["seconds"]}
            for f, r in zip(figs, runs[kind], strict=True)
        ]
        out["mean"][kind] = {
            key: {a: float(np.mean([f[key][a] for f in figs])) for a in ARMS}
            for key in ("final", "best", "forgetting", "episodes")
        }
        out["mean"][kind]["mean_final"] = float(np.mean([f["mean_final"] for f in figs]))
        out["curves"][kind] = mean_curve(runs[kind])
    out["decisions"] = [r["decisions"] for r in runs["scheduler"]]
    out["evals"] = {kind: [r["evals"] for r in runs[kind]] for kind in KINDS}
    out["targets"] = verdicts(out)
    return out


def plot(results: dict[str, Any], path: Path) -> Path:
    """Held-out success per family (seed means) for each arm, the mean, and the scheduler's weights."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"sequential": "tab:orange", "uniform": "tab:blue", "scheduler": "tab:green"}
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4), dpi=110)
    panels = [*ARMS, "mean"]
    for ax, name in zip(axes.flat, panels, strict=False):
        for kind in KINDS:
            episodes, success = results["curves"][kind]
            ys = (
                [float(np.mean([success[a][i] for a in ARMS])) for i in range(len(episodes))]
                if name == "mean"
                else success[name]
            )
            ax.plot(episodes, ys, "o-", markersize=3, color=colors[kind], label=kind)
        ax.set_title(name if name == "mean" else name.split("::")[1], fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.set_xlabel("training episodes", fontsize=8)
    axes.flat[0].set_ylabel("held-out success (greedy)")
    axes.flat[0].legend(fontsize=8)
    ax = axes.flat[len(panels)]
    decisions = results["decisions"][0]
    steps = [d["step"] for d in decisions]
    for arm in ARMS:
        ax.plot(steps, [d[arm]["weight"] for d in decisions], label=arm.split("::")[1])
    ax.set_title("scheduler: sampling weight (seed 0)", fontsize=10)
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def table(results: dict[str, Any]) -> str:
    """A Markdown table: final success, forgetting and episodes per family for each arm."""
    short = [a.split("::")[1] for a in ARMS]
    lines = [
        "| arm | "
        + " | ".join(f"{s} final / forgot / episodes" for s in short)
        + " | mean final |",
        "|---|" + "---:|" * (len(ARMS) + 1),
    ]
    for kind in KINDS:
        m = results["mean"][kind]
        cells = [
            f"{100 * m['final'][a]:.1f}% / {100 * m['forgetting'][a]:.1f} / {m['episodes'][a]:,.0f}"
            for a in ARMS
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {100 * m['mean_final']:.1f}% |")
    return "\n".join(lines)


# --- the run ------------------------------------------------------------------------------------------


def run(
    cfg: JointConfig, out: Path, *, figure: Path | None = None, workers: int = 1
) -> dict[str, Any]:
    """Every seed's base model and three arms (``workers`` seeds at once, each in a process of
    its own); writes ``joint.json`` and the figure."""
    t0 = time.perf_counter()
    jobs = []
    for seed in range(cfg.seeds):
        arms = [
            ArmConfig(
                kind=kind,
                steps=cfg.steps,
                eval_every=cfg.eval_every,
                eval_episodes=cfg.eval_episodes,
                prompts_per_step=cfg.prompts_per_step,
                group_size=cfg.group_size,
                learning_rate=cfg.learning_rate,
                seed=seed,
                scheduler=cfg.scheduler if kind == "scheduler" else {},
            )
            for kind in KINDS
        ]
        jobs.append((BaseConfig(**{**cfg.base, "seed": seed}), arms, out / f"seed{seed}"))
    if workers > 1:
        context = multiprocessing.get_context("spawn")  # torch in children, none in the parent
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            per_seed = list(pool.map(run_seed, *zip(*jobs, strict=True)))
    else:
        per_seed = [run_seed(*job) for job in jobs]
    runs = {kind: [seed_runs[kind] for seed_runs in per_seed] for kind in KINDS}
    results = summarize(runs, cfg)
    results["seconds"] = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out / "joint.json").write_text(json.dumps(results, indent=1))
    plot(results, out / "joint_curves.png")
    if figure is not None:
        plot(results, figure)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config",
        default=None,
        help="a JointConfig YAML (default: benchmarks/configs/joint_full.yaml)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="benchmarks/configs/joint_quick.yaml (what CI runs)"
    )
    parser.add_argument("--seeds", type=int, default=None, help="override the config's seed count")
    parser.add_argument("--workers", type=int, default=1, help="seeds run at once (processes)")
    parser.add_argument("--output-dir", default=None, help="default: runs/joint (runs/joint-quick)")
    parser.add_argument(
        "--figure", default=None, help="also draw the curves here (e.g. docs/joint_curves.png)"
    )
    parser.add_argument(
        "--base-only",
        action="store_true",
        help="only build seed 0's base model (<output-dir>/seed0/base/sft/final: the model of "
        "configs/joint/*.yaml)",
    )
    args = parser.parse_args(argv)
    name = "joint_quick.yaml" if args.quick else "joint_full.yaml"
    cfg = JointConfig.load(args.config or ROOT / "benchmarks" / "configs" / name)
    if args.seeds is not None:
        cfg.seeds = args.seeds
    out = Path(args.output_dir or ("runs/joint-quick" if args.quick else "runs/joint"))
    if args.base_only:
        print(build_base(BaseConfig(**{**cfg.base, "seed": 0}), out / "seed0" / "base"))
        return 0
    results = run(cfg, out, figure=Path(args.figure) if args.figure else None, workers=args.workers)
    print(table(results))
    print(json.dumps(results["targets"], indent=1))
    print(f"{cfg.seeds} seed(s), {results['seconds'] / 60:.1f} min; {out / 'joint.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
