"""Compare two evaluation folders: side by side, the differences, and whether they are significant.

Per env and overall, success rate and mean reward of A and B and their difference (B - A)
with a 95% bootstrap interval and a two-sided p-value. When the runs share task ids (the
same suite or seeds), tasks are matched and the test is paired: a sign-flip permutation
test on per-task differences (each task's mean over its samples). Otherwise success
uses the two-proportion z-test and reward an unpaired permutation test. p-values are
Holm-adjusted across envs. Differences in provenance (llmgym version, git commit,
policy, settings, env kwargs and versions) are listed, since they change what a
difference means.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmgym import error
from llmgym.evaluation.metrics import (
    bootstrap_ci,
    holm,
    paired_permutation_test,
    permutation_test,
    two_proportion_test,
)
from llmgym.evaluation.rollouts import load_jsonl

_METRICS = (("success", "success rate"), ("reward", "mean reward"))


def _load(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = Path(path)
    results = path / "results.jsonl" if path.is_dir() else path
    if not results.is_file():
        raise error.Error(f"{path} is not an evaluation folder (no results.jsonl)")
    records = load_jsonl(results)
    prov: dict[str, Any] = {}
    for name in ("provenance.json",):
        try:
            prov = json.loads((results.parent / name).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            pass
    return records, prov


def _value(record: Mapping[str, Any], metric: str) -> float:
    if metric == "success":
        return 1.0 if record.get("success") else 0.0
    return float(record.get("reward") or 0.0)


def _per_task(records: Sequence[Mapping[str, Any]], metric: str) -> dict[tuple[str, str], float]:
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        acc[(str(r.get("env")), str(r.get("task_id")))].append(_value(r, metric))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def _diff_ci(a: Sequence[float], b: Sequence[float], seed: int, n: int = 2000) -> list[float]:
    """Bootstrap interval of mean(b) - mean(a) for independent samples."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    da = x[rng.integers(0, x.size, (n, x.size))].mean(axis=1)
    db = y[rng.integers(0, y.size, (n, y.size))].mean(axis=1)
    lo, hi = np.quantile(db - da, [0.025, 0.975])
    return [float(lo), float(hi)]


def _compare_group(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], *, seed: int, n_resamples: int
) -> dict[str, Any]:
    row: dict[str, Any] = {"episodes_a": len(a), "episodes_b": len(b)}
    if not a or not b:
        row["method"] = "missing in one run"
        for metric, _ in _METRICS:
            mean_a = float(np.mean([_value(r, metric) for r in a])) if a else None
            mean_b = float(np.mean([_value(r, metric) for r in b])) if b else None
            row[metric] = {"a": mean_a, "b": mean_b, "diff": None, "ci": None, "p": math.nan}
        return row
    matched = sorted(set(_per_task(a, "success")) & set(_per_task(b, "success")))
    row["matched_tasks"] = len(matched)
    paired = len(matched) >= 2
    row["method"] = (
        f"paired over {len(matched)} matched tasks (sign-flip permutation)"
        if paired
        else "unpaired (two-proportion z-test; permutation test for reward)"
    )
    for metric, _ in _METRICS:
        va = [_value(r, metric) for r in a]
        vb = [_value(r, metric) for r in b]
        out: dict[str, Any] = {"a": float(np.mean(va)), "b": float(np.mean(vb))}
        out["diff"] = out["b"] - out["a"]
        if paired:
            ta, tb = _per_task(a, metric), _per_task(b, metric)
            d = np.array([tb[t] - ta[t] for t in matched])
            lo, hi = bootstrap_ci(d, seed=seed)
            out["matched_diff"] = float(d.mean())
            out["ci"] = [lo, hi]
            out["p"] = paired_permutation_test(d, n_resamples=n_resamples, seed=seed)
        else:
            out["ci"] = _diff_ci(va, vb, seed)
            if metric == "success":
                out["p"] = two_proportion_test(int(sum(va)), len(va), int(sum(vb)), len(vb))
            else:
                out["p"] = permutation_test(va, vb, n_resamples=n_resamples, seed=seed)
        row[metric] = out
    return row


def _provenance_diff(pa: Mapping[str, Any], pb: Mapping[str, Any]) -> list[dict[str, Any]]:
    def pick(p: Mapping[str, Any]) -> dict[str, Any]:
        git = p.get("git") or {}
        out = {
            "llmgym_version": p.get("llmgym_version"),
            "git_commit": git.get("commit"),
            "git_dirty": git.get("dirty"),
            "policy": p.get("policy"),
            "settings": p.get("settings"),
            "suite": (p.get("suite") or {}).get("sha256") if p.get("suite") else None,
            "overrides": p.get("overrides") or {},
            "samples": p.get("samples"),
        }
        for e in p.get("envs") or []:
            out[f"env {e.get('name')}"] = {
                k: e.get(k)
                for k in (
                    "id",
                    "kwargs",
                    "seed",
                    "episodes",
                    "version",
                    "entry_point",
                    "module_sha256",
                )
            }
        return out

    a, b = pick(pa), pick(pb)
    return [
        {"field": k, "a": a.get(k), "b": b.get(k)}
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def compare_runs(
    a: str | Path, b: str | Path, *, alpha: float = 0.05, seed: int = 0, n_resamples: int = 10_000
) -> dict[str, Any]:
    """The comparison of evaluation folders ``a`` and ``b`` (differences are B - A)."""
    if not 0 < alpha < 1:
        raise error.Error(f"alpha must lie in (0, 1), actual: {alpha!r}")
    ra, pa = _load(a)
    rb, pb = _load(b)
    by_a: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_b: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ra:
        by_a[str(r.get("env"))].append(r)
    for r in rb:
        by_b[str(r.get("env"))].append(r)
    envs = sorted(set(by_a) | set(by_b))
    rows = {
        env: _compare_group(by_a[env], by_b[env], seed=seed, n_resamples=n_resamples)
        for env in envs
    }
    for metric, _ in _METRICS:
        adjusted = holm([rows[e][metric]["p"] for e in envs])
        for env, p in zip(envs, adjusted, strict=True):
            rows[env][metric]["p_holm"] = p
            rows[env][metric]["significant"] = bool(not math.isnan(p) and p < alpha)
    common = [e for e in envs if by_a[e] and by_b[e]]
    # Overall compares what both runs evaluated: the envs in common, never one run's env
    # against the other's.
    overall = _compare_group(
        [r for e in common for r in by_a[e]],
        [r for e in common for r in by_b[e]],
        seed=seed,
        n_resamples=n_resamples,
    )
    overall["envs"] = common
    if not common:
        overall["method"] = "no env in common: nothing to compare"
    for metric, _ in _METRICS:
        p = overall[metric]["p"]
        overall[metric]["significant"] = bool(not math.isnan(p) and p < alpha)
    warnings = []
    if not common:
        warnings.append("the runs have no env in common: there is no overall comparison")
    prov_diff = _provenance_diff(pa, pb)
    for d in prov_diff:
        if (
            d["field"].startswith("env ")
            and d["a"]
            and d["b"]
            and d["a"].get("kwargs") != d["b"].get("kwargs")
        ):
            warnings.append(f"{d['field'][4:]}: env kwargs differ, so tasks are not the same env")
    if pa.get("overrides") or pb.get("overrides"):
        warnings.append("a run overrides its suite's pins; results are not the suite's")
    only = [e for e in envs if not by_a[e] or not by_b[e]]
    if only:
        warnings.append(f"env(s) in one run only: {only}")
    return {
        "a": str(a),
        "b": str(b),
        "alpha": alpha,
        "policy_a": pa.get("policy"),
        "policy_b": pb.get("policy"),
        "comparable": bool(common),
        "overall": overall,
        "by_env": rows,
        "provenance_diff": prov_diff,
        "warnings": warnings,
    }


def _cell(m: Mapping[str, Any]) -> str:
    if m.get("diff") is None:
        return "-"
    ci = m.get("ci") or [math.nan, math.nan]
    star = " *" if m.get("significant") else ""
    return f"{m['diff']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] p={m.get('p_holm', m['p']):.3g}{star}"


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def comparison_text(c: Mapping[str, Any]) -> str:
    """A markdown table of a :func:`compare_runs` result."""
    lines = [
        f"A: {c['a']} ({c.get('policy_a')})",
        f"B: {c['b']} ({c.get('policy_b')})",
        "",
        "| env | success A | success B | B - A [95% CI] p | reward A | reward B | B - A [95% CI] p | test |",
        "|---|---:|---:|---|---:|---:|---|---|",
    ]
    for env, row in [*c["by_env"].items(), ("**overall**", c["overall"])]:
        s, r = row["success"], row["reward"]
        lines.append(
            f"| {env} | {_num(s['a'])} | {_num(s['b'])} | {_cell(s)} | {_num(r['a'])} | "
            f"{_num(r['b'])} | {_cell(r)} | {row['method']} |"
        )
    lines.append(f"\n* significant at alpha={c['alpha']} (per-env p-values Holm-adjusted)")
    for d in c["provenance_diff"]:
        lines.append(
            f"differs: {d['field']}: A={json.dumps(d['a'], default=repr)} B={json.dumps(d['b'], default=repr)}"
        )
    for w in c["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def comparison_html(c: Mapping[str, Any]) -> str:
    """A self-contained HTML page of a :func:`compare_runs` result."""
    from llmgym.evaluation import report as rp

    envs = list(c["by_env"])
    sections = []
    if c["warnings"]:
        sections.append("".join(f'<p class="note">{rp.esc(w)}</p>' for w in c["warnings"]))
    if rp.have_matplotlib() and envs:

        def draw(fig: Any) -> None:
            axes = fig.subplots(1, 2)
            for ax, (metric, label) in zip(axes, _METRICS, strict=True):
                y = np.arange(len(envs))
                for offset, side, color in ((-0.2, "a", "#4c72b0"), (0.2, "b", "#dd8452")):
                    vals = [c["by_env"][e][metric][side] or 0.0 for e in envs]
                    ax.barh(y + offset, vals, height=0.4, color=color, label=side.upper())
                ax.set_yticks(y, [e[-35:] for e in envs], fontsize=8)
                ax.invert_yaxis()
                ax.set_xlabel(label)
                ax.legend(fontsize=8)
                ax.grid(axis="x", alpha=0.3)

        sections.append(
            rp.figure(
                draw,
                width=11,
                height=1.2 + 0.45 * len(envs),
                alt="A vs B per env",
                caption="Success rate and mean reward per env: A (blue) and B (orange).",
            )
        )
    rows = []
    for env, row in [*c["by_env"].items(), ("overall", c["overall"])]:
        cells: list[Any] = [env]
        for metric, _ in _METRICS:
            m = row[metric]
            text = _cell(m)
            cls = (
                "sig"
                if m.get("significant") and (m.get("diff") or 0) > 0
                else "neg"
                if m.get("significant")
                else ""
            )
            cells += [
                _num(m["a"]),
                _num(m["b"]),
                rp.Raw(f'<span class="{cls}">{rp.esc(text)}</span>'),
            ]
        cells.append(row["method"])
        rows.append(cells)
    sections.append(
        "<h2>Side by side</h2>"
        + rp.table(
            [
                "env",
                "success A",
                "success B",
                "B - A [95% CI] p",
                "reward A",
                "reward B",
                "B - A [95% CI] p",
                "test",
            ],
            rows,
        )
        + f"<p>Bold: significant at alpha = {c['alpha']} after Holm adjustment across envs.</p>"
    )
    if c["provenance_diff"]:
        sections.append(
            "<h2>Provenance differences</h2>"
            + rp.table(
                ["field", "A", "B"],
                [
                    [d["field"], json.dumps(d["a"], default=repr), json.dumps(d["b"], default=repr)]
                    for d in c["provenance_diff"]
                ],
                99,
            )
        )
    return rp.page("llmgym comparison", f"A: {c['a']} · B: {c['b']}", sections)
