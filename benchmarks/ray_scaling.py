"""Math-v0 oracle episodes through llmgym.ray's EnvPool on 1 and on 2 Ray worker nodes, beside the
same episodes in-process, and what 1,000 CPU workers would cost from the measured CPU.

Each configuration is a fresh :class:`llmgym.ray.LoopbackCluster` on this machine (a head with no
CPUs, N worker nodes of one CPU each, all on loopback) and an EnvPool of N actors, one per node.
Rows, each an episode = reset + the oracle's action + step, its reward checked:

- ``in-process``: ``gym.make`` here, one env, one thread (the floor of the env's own CPU);
- ``ray N node(s), in actors``: ``run_episodes("oracle", seeds)``, whole episodes played inside
  the actors (a batch of episodes per Ray call);
- ``ray N node(s), policy here``: ``run_episodes(policy, seeds)`` with the policy in this
  process: every reset and step is a Ray call carrying the snapshot back (the RL-trainer case).

CPU: this process and everything it starts (raylets, GCS, actors) in a cpuacct cgroup
(``_cpumeter``; root only, else only the wall clock is shown). ``CPU ms/episode`` is the whole
cluster's CPU per episode, Ray's own included. The projection assumes the actors' share scales
with workers (episodes independent, no shared state), drivers added as needed (one driver
process pushes a few thousand calls/s), and a price per vCPU-hour given by ``--price``.
On a shared 2-core machine the 2-node row competes with the driver and Ray's daemons for the
same two cores: read its ratio as a floor.

Run: python benchmarks/ray_scaling.py [--episodes 3000] [--price 0.0446]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym  # noqa: E402
from _cpumeter import CpuMeter  # noqa: E402

import llmgym  # noqa: E402,F401
from llmgym.ray import EnvPool, LoopbackCluster  # noqa: E402
from llmgym.ray.actors import oracle, play_episode  # noqa: E402


def measure(meter: CpuMeter, fn: Any, episodes: int) -> dict[str, Any]:
    cpu0, t0 = meter.seconds(), time.perf_counter()
    results = fn()
    wall = time.perf_counter() - t0
    cpu1 = meter.seconds()
    assert len(results) == episodes and all(r.success for r in results), "a wrong reward"
    row: dict[str, Any] = {"episodes_per_s": episodes / wall, "wall_s": wall}
    if cpu0 is not None and cpu1 is not None:
        row["cpu_ms_per_episode"] = 1000 * (cpu1 - cpu0) / episodes
    return row


def in_process(meter: CpuMeter, episodes: int) -> dict[str, Any]:
    env = gym.make("llm/Math-v0", disable_env_checker=True)
    play = lambda: [play_episode(env, s, None, oracle) for s in range(episodes)]  # noqa: E731
    play()  # warm: imports, sympy caches
    return measure(meter, play, episodes)


def on_ray(meter: CpuMeter, nodes: int, episodes: int) -> list[dict[str, Any]]:
    rows = []
    with (
        LoopbackCluster([{"num_cpus": 1}] * nodes),
        EnvPool("llm/Math-v0", min_actors=nodes, max_actors=nodes) as pool,
    ):
        seeds = list(range(episodes))
        pool.run_episodes("oracle", seeds[: 20 * nodes])  # warm every actor
        row = measure(meter, lambda: pool.run_episodes("oracle", seeds), episodes)
        rows.append({"row": f"ray {nodes} node(s), in actors", **row})
        answers: dict[str, Any] = {}  # the gold answers, known here so that the policy runs here

        def policy(observation: str, info: dict[str, Any]) -> Any:
            return answers[info["task_id"]]

        gold_env = gym.make("llm/Math-v0", disable_env_checker=True)
        few = seeds[: max(200, episodes // 10)]
        for s in few:
            _, info = gold_env.reset(seed=s)
            answers[info["task_id"]] = gold_env.unwrapped.oracle_action()
        row = measure(meter, lambda: pool.run_episodes(policy, few), len(few))
        rows.append({"row": f"ray {nodes} node(s), policy here", **row})
    return rows


def projection(cpu_ms: float, price: float, workers: int = 1000) -> dict[str, float]:
    """Throughput and cost at ``workers`` CPUs if each spends ``cpu_ms`` per episode."""
    per_s = workers * 1000 / cpu_ms
    return {
        "workers": workers,
        "episodes_per_s": per_s,
        "usd_per_hour": workers * price,
        "usd_per_million_episodes": cpu_ms / 1000 * 1e6 / 3600 * price,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--price", type=float, default=0.0446, help="USD per vCPU-hour")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    meter = CpuMeter()
    try:
        rows = [{"row": "in-process", **in_process(meter, args.episodes)}]
        for nodes in (1, 2):
            rows += on_ray(meter, nodes, args.episodes)
    finally:
        meter.close()
    base = rows[0]["episodes_per_s"]
    print("| row | episodes/s | vs in-process | CPU ms/episode |")
    print("|---|---:|---:|---:|")
    for r in rows:
        cpu = r.get("cpu_ms_per_episode")
        cpu_text = f"{cpu:.2f}" if cpu is not None else "n/a"
        print(
            f"| {r['row']} | {r['episodes_per_s']:.0f} | {r['episodes_per_s'] / base:.2f}x | {cpu_text} |"
        )
    one = next(r for r in rows if r["row"] == "ray 1 node(s), in actors")
    two = next(r for r in rows if r["row"] == "ray 2 node(s), in actors")
    print(f"\n2 nodes / 1 node (in actors): {two['episodes_per_s'] / one['episodes_per_s']:.2f}x")
    out: dict[str, Any] = {"rows": rows}
    for r in (rows[0], two, rows[-1]):
        if "cpu_ms_per_episode" in r:
            p = projection(r["cpu_ms_per_episode"], args.price)
            out.setdefault("projection", {})[r["row"]] = p
            print(
                f"1,000 CPU workers at {r['cpu_ms_per_episode']:.2f} CPU ms/episode ({r['row']}): "
                f"{p['episodes_per_s']:,.0f} episodes/s, ${p['usd_per_hour']:.2f}/hour, "
                f"${p['usd_per_million_episodes']:.3f} per million episodes "
                f"(at ${args.price}/vCPU-hour)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
