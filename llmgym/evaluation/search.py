"""``llmgym eval --search``: search success beside pass@k at the same policy calls and tokens.

After the plain episodes of a run, each search spec (``best_of_n:8``, ``beam:4x4``, ``mcts:64``;
:func:`llmgym.search.parse_spec`) is run once per task, from the task's first episode's reset seed.
``search.jsonl`` holds one line per (task, spec); the summary's ``"search"`` holds per env and
spec the success, mean calls, tokens and wall time, the success-vs-calls curve (a task counts as
solved at budget ``b`` when its search found a successful episode within its first ``b`` calls),
pass@k from the plain episodes at the calls that k episodes cost (k x mean turns), and one search
tree per spec for the report's viewer.

What it is not: resumable (the searches run again when a run is resumed) nor parallel (one env,
one search at a time). Policy calls are sampled messages, as in :mod:`llmgym.search.tree`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from llmgym.evaluation.html import Raw, esc, figure, fmt, have_matplotlib, table
from llmgym.evaluation.metrics import pass_at_k
from llmgym.evaluation.plan import EpisodePlan, make_env
from llmgym.evaluation.rollouts import write_atomic

MAX_VIEWER_NODES = 400
"""Nodes of a tree kept for the report's viewer (the most visited first)."""


def run_searches(
    config: Any, policy: Any, plan: Sequence[EpisodePlan], specs: Sequence[str], *, progress: bool
) -> list[dict[str, Any]]:
    """One search per (task, spec), from each task's first planned episode; writes search.jsonl."""
    from tqdm.auto import tqdm

    from llmgym.search import SearchError, search

    firsts = [p for p in plan if p.sample == 0]
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(firsts) * len(specs), desc="search", unit="search", disable=not progress)
    envs: dict[int, Any] = {}
    try:
        for p in firsts:
            entry = config.envs[p.entry]
            env = envs.get(p.entry) or envs.setdefault(p.entry, make_env(entry))
            for spec in specs:
                env.reset(seed=p.seed, options={"task_id": p.task_id})
                record: dict[str, Any] = {"env": entry.name, "task_id": p.task_id, "spec": spec}
                try:
                    result = search(env, policy, spec, seed=p.seed)
                    record.update(_outcome(result), status="ok", error=None)
                except SearchError as e:
                    record.update(_outcome(e.partial) if e.partial else {}, status="search_error")
                    record["error"] = str(e)[:2000]
                    record["success"] = False
                records.append(record)
                bar.update(1)
    finally:
        bar.close()
        for env in envs.values():
            env.close()
    lines = "".join(json.dumps({k: v for k, v in r.items() if k != "tree"}) + "\n" for r in records)
    write_atomic(config.out / "search.jsonl", lines.encode("utf-8"))
    return records


def _outcome(result: Any) -> dict[str, Any]:
    s = result.stats
    return {
        "success": result.success,
        "reward": result.reward,
        "calls": s["calls"],
        "tokens": s["tokens"],
        "first_success_call": s["first_success_call"],
        "nodes": s["nodes"],
        "wall_s": s["wall_s"],
        "tree": result.tree(),
    }


# --- summary ---------------------------------------------------------------------------------------


def _curve(searches: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """(calls, share of tasks solved within that many calls) at every budget where it changes."""
    top = max((int(r.get("calls") or 0) for r in searches), default=0)
    found = sorted(
        int(r["first_success_call"]) for r in searches if r.get("first_success_call") is not None
    )
    points, solved = [[0.0, 0.0]], 0
    for b in sorted(set(found) | {top}):
        solved = sum(1 for f in found if f <= b)
        points.append([float(b), solved / len(searches)])
    return points


def _pass_curve(episodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in episodes:
        by_task[str(r.get("task_id"))].append(r)
    n = min(len(v) for v in by_task.values())
    turns = sum(int(r.get("turns") or 0) for r in episodes) / len(episodes)
    tokens = sum(int(r.get("completion_tokens") or 0) for r in episodes) / len(episodes)
    points = []
    for k in range(1, n + 1):
        rate = sum(
            pass_at_k(n, sum(bool(r.get("success")) for r in v[:n]), k) for v in by_task.values()
        ) / len(by_task)
        points.append({"k": k, "calls": k * turns, "tokens": k * tokens, "pass_at_k": rate})
    return {"turns_per_episode": turns, "tokens_per_episode": tokens, "points": points}


def _viewer_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    nodes = list(tree["nodes"])
    if len(nodes) > MAX_VIEWER_NODES:
        keep = set(tree["best_path"]) | {
            n["id"] for n in sorted(nodes, key=lambda n: (-n["visits"], n["id"]))[:MAX_VIEWER_NODES]
        }
        nodes = [
            {**n, "children": [c for c in n["children"] if c in keep]}
            for n in nodes
            if n["id"] in keep
        ]
    return {**tree, "nodes": nodes}


def summarize_search(
    searches: Sequence[Mapping[str, Any]], episodes: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The summary's ``"search"`` section (see the module docstring)."""
    out: dict[str, Any] = {"by_env": {}, "trees": {}}
    envs = sorted({str(r["env"]) for r in searches})
    for env in envs:
        mine = [r for r in episodes if r.get("env") == env]
        block: dict[str, Any] = {"pass_at_k": _pass_curve(mine) if mine else None, "methods": {}}
        for spec in sorted({str(r["spec"]) for r in searches if r["env"] == env}):
            rs = [r for r in searches if r["env"] == env and r["spec"] == spec]
            calls = sum(int(r.get("calls") or 0) for r in rs) / len(rs)
            block["methods"][spec] = {
                "tasks": len(rs),
                "success_rate": sum(bool(r.get("success")) for r in rs) / len(rs),
                "mean_calls": calls,
                "mean_tokens": sum(int(r.get("tokens") or 0) for r in rs) / len(rs),
                "wall_s_per_episode": sum(float(r.get("wall_s") or 0) for r in rs) / len(rs),
                "errors": sum(1 for r in rs if r.get("status") != "ok"),
                "curve": _curve(rs),
                "pass_at_equal_calls": _pass_at_calls(block["pass_at_k"], calls),
            }
            tree = next((r.get("tree") for r in rs if r.get("tree")), None)
            if tree is not None and spec not in out["trees"]:
                out["trees"][spec] = {"env": env, "task_id": rs[0]["task_id"], **_viewer_tree(tree)}
        out["by_env"][env] = block
    return out


def _pass_at_calls(curve: Mapping[str, Any] | None, calls: float) -> dict[str, Any] | None:
    """pass@k for the largest k whose k episodes cost no more calls than ``calls``."""
    if not curve:
        return None
    within = [p for p in curve["points"] if p["calls"] <= calls + 1e-9]
    if not within:
        return None
    best = within[-1]
    return {
        **best,
        # the search spent more than all the plain samples of a task cost: pass@k falls short
        "samples_short": best["k"] == curve["points"][-1]["k"]
        and best["calls"] + curve["turns_per_episode"] <= calls + 1e-9,
    }


# --- report ----------------------------------------------------------------------------------------


def search_section(search: Mapping[str, Any]) -> str:
    """The report's search section: a table, success-vs-calls curves and a tree viewer."""
    rows = []
    for env, block in search.get("by_env", {}).items():
        for spec, m in block["methods"].items():
            eq = m.get("pass_at_equal_calls") or {}
            rows.append(
                [
                    env,
                    spec,
                    fmt(m["success_rate"]),
                    fmt(m["mean_calls"], 1),
                    fmt(m["mean_tokens"], 1),
                    fmt(eq.get("pass_at_k")),
                    f"pass@{eq['k']} ({fmt(eq['calls'], 1)} calls)"
                    + (" (more --samples needed)" if eq["samples_short"] else "")
                    if eq
                    else "-",
                    fmt(m["wall_s_per_episode"]),
                    m["errors"],
                ]
            )
    parts = [
        '<h2 id="search">Search</h2><p>Success of each search at the policy calls it spent, beside '
        "pass@k of the plain episodes at the same number of calls (k episodes cost k x their mean "
        "turns).</p>",
        table(
            [
                "env",
                "search",
                "success",
                "calls",
                "tokens",
                "pass@k at equal calls",
                "k",
                "wall s / episode",
                "errors",
            ],
            rows,
            2,
        ),
    ]
    if have_matplotlib() and rows:
        parts.append(_curves_figure(search))
    for spec, tree in search.get("trees", {}).items():
        parts.append(
            f"<h3>Tree of {esc(spec)}: {esc(tree['env'])} · task {esc(tree['task_id'])}</h3>"
            + tree_viewer(tree)
        )
    return "".join(parts)


def _curves_figure(search: Mapping[str, Any]) -> str:
    envs = list(search["by_env"].items())

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, len(envs), squeeze=False)[0]
        for ax, (env, block) in zip(axes, envs, strict=True):
            right = max(m["curve"][-1][0] for m in block["methods"].values())
            for spec, m in block["methods"].items():
                points = [*m["curve"], [right, m["curve"][-1][1]]]  # flat to the widest budget
                xs, ys = zip(*points, strict=True)
                ax.step(xs, ys, where="post", label=spec)
            if block.get("pass_at_k"):
                pts = block["pass_at_k"]["points"]
                ax.plot(
                    [p["calls"] for p in pts],
                    [p["pass_at_k"] for p in pts],
                    "k--o",
                    label="pass@k (plain episodes)",
                    markersize=3,
                )
            ax.set_title(env, fontsize=9)
            ax.set_xlabel("policy calls")
            ax.set_ylabel("success")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=7)

    return figure(
        draw,
        width=min(4.2 * len(envs), 12.6),
        height=3.2,
        caption="Share of tasks solved within a number of policy calls, per search, "
        "and pass@k of independent episodes at k x mean turns calls",
        alt="search success against policy calls",
    )


def tree_viewer(tree: Mapping[str, Any]) -> Raw:
    """The tree as nested ``<details>`` (no script): each node's message, reward, return,
    visits; the best path open and marked, children by visits."""
    nodes = {n["id"]: n for n in tree["nodes"]}
    best = set(tree.get("best_path") or [])

    def label(n: Mapping[str, Any]) -> str:
        action = n.get("action")
        text = "(start)" if action is None else str(action).replace("\n", " ")[:120]
        mark = " ✓" if n.get("success") else (" ■" if n.get("terminal") else "")
        style = ' class="sig"' if n["id"] in best else ""
        return (
            f"<span{style}>#{n['id']} {esc(text)}</span> · reward {fmt(n.get('reward'))} · "
            f"return {fmt(n.get('return'))} · visits {n.get('visits')}{mark}"
        )

    def render(nid: int, depth: int) -> str:
        n = nodes[nid]
        kids = sorted(
            (c for c in n.get("children", []) if c in nodes),
            key=lambda c: (-nodes[c].get("visits", 0), c),
        )
        if not kids or depth > 60:
            return f'<div style="margin-left:14px">{label(n)}</div>'
        inner = "".join(render(c, depth + 1) for c in kids)
        opened = " open" if nid in best else ""
        return (
            f'<details{opened} style="margin-left:14px"><summary>{label(n)}</summary>'
            f"{inner}</details>"
        )

    legend = (
        '<p class="note">Best path in green; ✓ a successful end, ■ another end. '
        f"{len(tree['nodes'])} nodes shown.</p>"
    )
    return Raw(legend + render(int(tree.get("root", 0)), 0))
