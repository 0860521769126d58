"""Self-contained HTML reports: an evaluation's results (here), a training run's curves
(:mod:`llmgym.evaluation.training_report`), a comparison (:mod:`llmgym.evaluation.compare`);
the building blocks are :mod:`llmgym.evaluation.html`, re-exported here.

Each page is one file a person can open anywhere: inline CSS, figures drawn with
matplotlib (no pyplot, no global state) and embedded as base64 PNG, no scripts, no
external assets. Without matplotlib (``pip install 'llmgym[eval]'``) the page keeps its
tables and says that figures need it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.evaluation.html import (
    NO_MATPLOTLIB,
    Raw,
    _grid,
    cards,
    esc,
    figure,
    fmt,
    fmt_ci,
    have_matplotlib,
    page,
    table,
)
from llmgym.evaluation.rollouts import load_jsonl, write_atomic
from llmgym.evaluation.training_report import (
    group_keys,
    hyperparameters_section,
    read_run_config,
    training_report_html,
    training_series,
    write_training_report,
)

# --- evaluation report ---------------------------------------------------------------------------


def _ci_err(
    stats: Sequence[Mapping[str, Any]], value: str, ci: str
) -> tuple[list[float], list[list[float]]]:
    vals: list[float] = []
    err: list[list[float]] = [[], []]
    for s in stats:
        v = s.get(value)
        v = 0.0 if v is None else float(v)
        c = s.get(ci) or [v, v]
        vals.append(v)
        err[0].append(max(0.0, v - float(c[0])))
        err[1].append(max(0.0, float(c[1]) - v))
    return vals, err


def _difficulty_x(label: str) -> float:
    """Where a difficulty label sits on a [0, 1] axis: its value, or a bin's middle.

    >>> _difficulty_x("0.25"), _difficulty_x("0.2-0.4")
    (0.25, 0.30000000000000004)
    """
    low, sep, high = label.partition("-")
    try:
        return (float(low) + float(high)) / 2 if sep else float(low)
    except ValueError:
        return 0.0


def _eval_figures(summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[str]:
    by_env = summary.get("by_env", {})
    envs = list(by_env)
    figs: list[str] = []
    if not envs:
        return figs
    stats = [by_env[e] for e in envs]

    def bars(fig: Any) -> None:
        a, b = fig.subplots(1, 2)
        for ax, (key, ci, label) in zip(
            (a, b),
            (
                ("success_rate", "success_ci", "success rate"),
                ("mean_reward", "reward_ci", "mean reward"),
            ),
            strict=True,
        ):
            vals, err = _ci_err(stats, key, ci)
            ax.barh(range(len(envs)), vals, xerr=err, color="#4c72b0", capsize=3)
            ax.set_yticks(range(len(envs)), [e[-40:] for e in envs], fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(label)
            if key == "success_rate":
                ax.set_xlim(0, 1)
            ax.grid(axis="x", alpha=0.3)

    figs.append(
        figure(
            bars,
            width=11,
            height=1.2 + 0.35 * len(envs),
            alt="success and reward per env",
            caption="Success rate and mean reward per env, with 95% bootstrap intervals over tasks.",
        )
    )

    by_diff = summary.get("by_difficulty", {})
    if any(len(v) > 1 for v in by_diff.values()):

        def difficulty(fig: Any) -> None:
            ax = fig.subplots()
            for env, groups in by_diff.items():
                labels = sorted(groups, key=_difficulty_x)
                vals, err = _ci_err([groups[g] for g in labels], "success_rate", "success_ci")
                xs = [_difficulty_x(g) for g in labels]
                ax.errorbar(xs, vals, yerr=err, marker="o", capsize=3, label=env)
            ax.set_xlim(-0.03, 1.03)
            ax.set_xlabel("difficulty (a binned range is drawn at its middle)")
            ax.set_ylabel("success rate")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)

        figs.append(
            figure(
                difficulty,
                width=8,
                height=4,
                alt="success by difficulty",
                caption="Success rate by difficulty (each env's own scale), 95% intervals.",
            )
        )

    if any(len(s.get("pass_at_k") or {}) > 1 for s in stats):

        def passk(fig: Any) -> None:
            ax = fig.subplots()
            for env, s in zip(envs, stats, strict=True):
                table_ = s.get("pass_at_k") or {}
                ks = sorted(int(k) for k in table_)
                vals = [table_[str(k)]["value"] for k in ks]
                lo = [table_[str(k)]["ci"][0] for k in ks]
                hi = [table_[str(k)]["ci"][1] for k in ks]
                line = ax.plot(ks, vals, marker="o", label=env)[0]
                ax.fill_between(ks, lo, hi, alpha=0.15, color=line.get_color())
            ax.set_xscale("log", base=2)
            every_k = sorted({int(k) for s in stats for k in (s.get("pass_at_k") or {})})
            ax.set_xticks(every_k, [str(k) for k in every_k])
            ax.minorticks_off()
            ax.set_xlabel("k")
            ax.set_ylabel("pass@k")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)

        figs.append(
            figure(
                passk,
                width=8,
                height=4,
                alt="pass@k",
                caption="pass@k (unbiased estimator), shaded: 95% bootstrap interval over tasks.",
            )
        )

    rewards: dict[str, list[float]] = defaultdict(list)
    for r in records:
        rewards[str(r.get("env"))].append(float(r.get("reward") or 0.0))

    def histograms(fig: Any) -> None:
        rows, cols = _grid(len(envs))
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, env in zip(axes, envs, strict=False):
            ax.hist(rewards.get(env, []), bins=20, color="#55a868")
            ax.set_title(env, fontsize=9)
            ax.set_xlabel("episode reward", fontsize=8)
        for ax in axes[len(envs) :]:
            ax.set_visible(False)

    rows, _ = _grid(len(envs))
    figs.append(
        figure(
            histograms,
            width=11,
            height=2.6 * rows,
            alt="reward distributions",
            caption="Distribution of episode rewards per env.",
        )
    )

    fams = summary.get("by_family", {})
    if len(fams) > 1:
        names = sorted(fams, key=lambda f: fams[f].get("success_rate") or 0.0)[:60]

        def families(fig: Any) -> None:
            ax = fig.subplots()
            vals, err = _ci_err([fams[f] for f in names], "success_rate", "success_ci")
            ax.barh(range(len(names)), vals, xerr=err, color="#8172b3", capsize=2)
            ax.set_yticks(range(len(names)), [n[-45:] for n in names], fontsize=7)
            ax.set_xlim(0, 1)
            ax.set_xlabel("success rate")
            ax.grid(axis="x", alpha=0.3)

        figs.append(
            figure(
                families,
                width=9,
                height=1.0 + 0.22 * len(names),
                alt="success by family",
                caption="Success rate per task family (hardest first; at most 60 shown).",
            )
        )

    sandbox = [(e, s["exec"]) for e, s in zip(envs, stats, strict=True) if s.get("exec")]
    if sandbox:

        def anomalies(fig: Any) -> None:
            ax = fig.subplots()
            kinds = ("timeout_rate", "memory_rate", "crash_rate", "output_limit_rate")
            width = 0.8 / len(kinds)
            for j, kind in enumerate(kinds):
                ax.bar(
                    [i + j * width for i in range(len(sandbox))],
                    [x[kind] for _, x in sandbox],
                    width=width,
                    label=kind.removesuffix("_rate"),
                )
            ax.set_xticks(
                [i + 0.4 - width / 2 for i in range(len(sandbox))],
                [e for e, _ in sandbox],
                fontsize=8,
            )
            ax.set_ylabel("share of executions")
            ax.legend(fontsize=8)
            ax.grid(axis="y", alpha=0.3)

        figs.append(
            figure(
                anomalies,
                width=8,
                height=3.5,
                alt="sandbox anomalies",
                caption="Sandbox anomalies per execution: timeouts, memory kills, crashes, output limits.",
            )
        )

    tokens = any((s.get("completion_tokens_mean") or 0) > 0 for s in stats)
    multi = any((s.get("turns_mean") or 0) > 1 for s in stats)
    if tokens or multi:

        def costs(fig: Any) -> None:
            keys = [("turns_mean", "turns / episode")] if multi else []
            if tokens:
                keys += [
                    ("prompt_tokens_mean", "prompt tokens / episode"),
                    ("completion_tokens_mean", "completion tokens / episode"),
                ]
            axes = fig.subplots(1, len(keys), squeeze=False).ravel()
            for ax, (key, label) in zip(axes, keys, strict=True):
                ax.barh(range(len(envs)), [s.get(key) or 0 for s in stats], color="#c44e52")
                ax.set_yticks(range(len(envs)), [e[-30:] for e in envs], fontsize=8)
                ax.invert_yaxis()
                ax.set_xlabel(label)

        figs.append(
            figure(
                costs,
                width=11,
                height=1.2 + 0.35 * len(envs),
                alt="turns and tokens",
                caption="Turns and tokens per episode.",
            )
        )
    return figs


def _stats_rows(groups: Mapping[str, Mapping[str, Any]], ks: Sequence[str]) -> list[list[Any]]:
    rows = []
    for name, s in groups.items():
        p = s.get("pass_at_k") or {}
        rows.append(
            [
                name,
                s["episodes"],
                s["tasks"],
                fmt_ci(s.get("success_rate"), s.get("success_ci")),
                fmt_ci(s.get("mean_reward"), s.get("reward_ci")),
                *[fmt_ci(p[k]["value"], p[k]["ci"]) if k in p else "-" for k in ks],
                fmt(s.get("turns_mean"), 2),
                fmt(s.get("completion_tokens_mean"), 1),
                fmt(s.get("error_rate")),
            ]
        )
    return rows


def _stats_table(groups: Mapping[str, Mapping[str, Any]], first: str) -> str:
    ks = sorted({k for s in groups.values() for k in (s.get("pass_at_k") or {})}, key=int)
    headers = [
        first,
        "episodes",
        "tasks",
        "success [95% CI]",
        "mean reward [95% CI]",
        *[f"pass@{k}" for k in ks],
        "turns",
        "completion tokens",
        "error rate",
    ]
    return table(headers, _stats_rows(groups, ks))


def _transcript(record: Mapping[str, Any], limit: int = 4000) -> str:
    parts = []
    for m in record.get("messages") or []:
        content = str(m.get("content") or "")
        if len(content) > limit:
            content = content[:limit] + f"... [{len(content) - limit} more characters]"
        calls = m.get("tool_calls")
        if calls:
            content += "\n-> " + json.dumps(calls, ensure_ascii=False, default=repr)[:limit]
        parts.append(f"[{m.get('role')}] {content}")
    return "\n\n".join(parts)


_STATUS_WORDS = {
    "policy_error": "the policy raised or returned an invalid reply",
    "env_error": "the environment or its infrastructure failed",
}
_SANDBOX_FAILURES = ("sandbox_error", "protocol_error")
"""Execution statuses where the sandbox or its harness failed, not the program."""


def error_counts(
    summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """How many episodes ended in an error, by status, and how many sandbox executions
    failed in the sandbox itself (``sandbox_error``, ``protocol_error``).

    Counted from the records; from the summary's status counts when there are none.

    >>> error_counts({}, [{"status": "ok"}, {"status": "policy_error"},
    ...                   {"status": "ok", "exec": [{"status": "sandbox_error"}]}])
    {'episodes': 3, 'errored': 1, 'by_status': {'policy_error': 1}, 'sandbox_failures': {'sandbox_error': 1}}
    """
    by_status: dict[str, int] = defaultdict(int)
    sandbox: dict[str, int] = defaultdict(int)
    if records:
        for r in records:
            status = str(r.get("status", "ok"))
            if status != "ok":
                by_status[status] += 1
            facts = r.get("exec") or []
            for fact in [facts] if isinstance(facts, Mapping) else facts:
                if isinstance(fact, Mapping) and fact.get("status") in _SANDBOX_FAILURES:
                    sandbox[str(fact["status"])] += 1
        episodes = len(records)
    else:
        overall = summary.get("overall") or {}
        for status, n in (overall.get("status") or {}).items():
            if status != "ok" and n:
                by_status[str(status)] += int(n)
        episodes = int(overall.get("episodes") or 0)
    out: dict[str, Any] = {
        "episodes": episodes,
        "errored": sum(by_status.values()),
        "by_status": dict(sorted(by_status.items(), key=lambda kv: -kv[1])),
        "sandbox_failures": dict(sorted(sandbox.items())),
    }
    judged = summary.get("errors") or {}  # the runner's verdict against max_error_rate
    if "exceeded" in judged:
        out["exceeded"] = bool(judged["exceeded"])
        out["max_rate"] = judged.get("max_rate")
    return out


def _error_alert(counts: Mapping[str, Any]) -> str:
    """The warning at the top of an evaluation page whose results hold errors ('' if none)."""
    errored, sandbox = counts["errored"], counts["sandbox_failures"]
    if not errored and not sandbox:
        return ""
    items = [
        f"<li><b>{n}</b> {esc(status)}: {esc(_STATUS_WORDS.get(status, 'error'))}</li>"
        for status, n in counts["by_status"].items()
    ]
    items += [
        f"<li><b>{n}</b> sandbox executions ended in {esc(status)} (the sandbox or its "
        "harness failed, not the program)</li>"
        for status, n in sandbox.items()
    ]
    share = f"{errored / counts['episodes']:.1%}" if counts["episodes"] else "-"
    head = (
        f"{errored} of {counts['episodes']} episodes ({share}) ended in an error"
        if errored
        else "Every episode finished, but sandbox executions failed"
    )
    verdict = ""
    if counts.get("exceeded"):
        allowed = counts.get("max_rate")
        limit = f"{float(allowed):.0%}" if isinstance(allowed, (int, float)) else "the limit"
        verdict = (
            f"<b>This run failed:</b> more than {esc(limit)} (max_error_rate) of its episodes "
            "errored, so it describes an outage, not the policy; run it again with the same "
            "--out to retry them. "
        )
    return (
        f'<div class="alert" role="alert" id="errors-warning"><b>Warning: {esc(head)}.</b> '
        + verdict
        + "Errored episodes count as failures in every metric below, so these numbers "
        "understate the policy if the errors are infrastructure failures. "
        '<a href="#errors">Details</a><ul>' + "".join(items) + "</ul></div>"
    )


def eval_report_html(summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    """The report page of an evaluation from its summary and per-episode records.

    When episodes ended in a policy or env error, or the sandbox failed, a warning with the
    counts opens the page."""
    prov = summary.get("provenance") or {}
    overall = summary.get("overall") or {}
    title = f"llmgym evaluation: {prov.get('policy', '?')}"
    subtitle = (
        f"suite {summary.get('suite') or '(env ids)'} · llmgym {prov.get('llmgym_version', '?')} · "
        f"{prov.get('started_at', '?')} → {prov.get('finished_at') or 'unfinished'}"
    )
    counts = error_counts(summary, records)
    alert = _error_alert(counts)
    sections = [alert] if alert else []
    sections += [
        cards(
            [
                ("success rate", fmt(overall.get("success_rate"))),
                ("mean reward", fmt(overall.get("mean_reward"))),
                ("episodes", fmt(overall.get("episodes"))),
                ("tasks", fmt(overall.get("tasks"))),
                ("episodes with errors", str(counts["errored"])),
            ]
        )
    ]
    if len(records) < int(summary.get("planned") or len(records)):
        sections.append(
            f'<p class="note">Partial results: {len(records)} of {summary.get("planned")} planned episodes.</p>'
        )
    if have_matplotlib():
        sections.append("<h2>Figures</h2>" + "".join(_eval_figures(summary, records)))
    else:
        sections.append(f'<p class="note">{esc(NO_MATPLOTLIB)}</p>')
    sections.append("<h2>Per environment</h2>" + _stats_table(summary.get("by_env", {}), "env"))
    sections.append("<h2>Per domain</h2>" + _stats_table(summary.get("by_domain", {}), "domain"))
    sections.append(
        "<h2>Per family</h2>" + _stats_table(summary.get("by_family", {}), "domain/family")
    )
    diff = summary.get("by_difficulty", {})
    if diff:
        sections.append("<h2>Per difficulty</h2>")
        for env, groups in diff.items():
            sections.append(f"<h3>{esc(env)}</h3>" + _stats_table(groups, "difficulty"))
    comp_rows = [
        [env, name, fmt(v)]
        for env, s in summary.get("by_env", {}).items()
        for name, v in (s.get("components") or {}).items()
    ]
    if comp_rows:
        sections.append(
            "<h2>Reward components (mean per episode)</h2>"
            + table(["env", "component", "mean"], comp_rows, 2)
        )
    sandbox_rows = [
        [
            env,
            s["exec"]["executions"],
            fmt(s["exec"]["timeout_rate"]),
            fmt(s["exec"]["memory_rate"]),
            fmt(s["exec"]["crash_rate"]),
            fmt(s["exec"]["output_limit_rate"]),
            fmt(s["exec"]["episode_anomaly_rate"]),
            ", ".join(f"{k}: {v:.3f}" for k, v in s["exec"]["status_rates"].items()),
        ]
        for env, s in summary.get("by_env", {}).items()
        if s.get("exec")
    ]
    if sandbox_rows:
        sections.append(
            "<h2>Sandbox</h2>"
            + table(
                [
                    "env",
                    "executions",
                    "timeouts",
                    "memory kills",
                    "crashes",
                    "output limit",
                    "episodes with an anomaly",
                    "statuses",
                ],
                sandbox_rows,
            )
        )
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if r.get("status", "ok") != "ok":
            errors[(str(r.get("status")), str(r.get("error"))[:300])] += 1
    if errors:
        counted = sorted(errors.items(), key=lambda item: -item[1])[:20]
        rows = [[status, message, n] for (status, message), n in counted]
        sections.append(
            '<h2 id="errors">Policy and env errors</h2>'
            + table(["status", "error", "episodes"], rows, 2)
        )
    elif counts["sandbox_failures"]:
        sections.append('<h2 id="errors">Sandbox failures</h2><p>See the Sandbox table.</p>')
    examples = []
    shown: dict[str, int] = defaultdict(int)
    for r in records:
        env = str(r.get("env"))
        if not r.get("success") and shown[env] < 3:
            shown[env] += 1
            examples.append(
                f"<details><summary>{esc(env)} · {esc(r.get('task_id'))} · reward {fmt(r.get('reward'))}"
                f" · {esc(r.get('status'))}</summary><pre>{esc(_transcript(r))}</pre></details>"
            )
    if examples:
        sections.append("<h2>Failed episodes (first 3 per env)</h2>" + "".join(examples))
    if summary.get("search"):
        from llmgym.evaluation.search import search_section

        sections.append(search_section(summary["search"]))
    sections.append(_provenance_section(summary))
    return page(title, subtitle, sections)


def _provenance_section(summary: Mapping[str, Any]) -> str:
    prov = dict(summary.get("provenance") or {})
    git = prov.get("git") or {}
    rows: list[list[Any]] = [
        ["llmgym", prov.get("llmgym_version")],
        ["git commit", f"{git.get('commit', '-')}{' (dirty)' if git.get('dirty') else ''}"],
        ["policy", prov.get("policy")],
        ["sampling settings", json.dumps(prov.get("settings") or {})],
        ["suite", json.dumps(prov.get("suite"))],
        ["overrides of the suite", json.dumps(prov.get("overrides") or {})],
        ["samples per task", prov.get("samples")],
        ["statistics seed", prov.get("seed")],
        ["started", prov.get("started_at")],
        ["finished", prov.get("finished_at")],
        ["sessions", len(prov.get("sessions") or [])],
        ["machine", json.dumps(prov.get("machine") or {})],
        ["packages", json.dumps(prov.get("packages") or {})],
        ["command", " ".join(map(str, prov.get("argv") or []))],
    ]
    env_rows = [
        [
            e.get("name"),
            e.get("id"),
            e.get("version"),
            json.dumps(e.get("kwargs")),
            e.get("seed"),
            e.get("episodes"),
            e.get("tasks"),
            e.get("entry_point"),
        ]
        for e in prov.get("envs") or []
    ]
    return (
        "<h2>Provenance</h2>"
        + table(["what", "value"], rows, 99)
        + table(
            ["name", "env id", "version", "kwargs", "seed", "episodes", "tasks", "entry point"],
            env_rows,
            99,
        )
    )


def write_eval_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` for an evaluation folder (``summary.json`` + ``results.jsonl``).

    Without a ``summary.json`` (an unfinished run) the summary is computed from the results.
    """
    from llmgym.evaluation.metrics import summarize

    run_dir = Path(run_dir)
    records = load_jsonl(run_dir / "results.jsonl")
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        if not records:
            raise error.Error(f"{run_dir} holds no evaluation results (results.jsonl)") from None
        prov = {}
        try:
            prov = json.loads((run_dir / "provenance.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            pass
        ks = prov.get("k") or [1]
        summary = {"provenance": prov, "k": ks, "planned": None, **summarize(records, ks=ks)}
    path = Path(out) if out is not None else run_dir / "report.html"
    write_atomic(path, eval_report_html(summary, records).encode("utf-8", "replace"))
    return path


def write_report(path: str | Path, out: str | Path | None = None) -> Path:
    """A report of whatever ``path`` holds: an evaluation (``results.jsonl``) or a training
    run (``metrics.jsonl``). A folder holding both gets the evaluation report in
    ``report.html`` and the training report in ``training_report.html``."""
    path = Path(path)
    if path.is_file():
        if path.name == "results.jsonl":
            return write_eval_report(path.parent, out)
        return write_training_report(path, out)
    has_eval = (path / "results.jsonl").is_file()
    has_train = (path / "metrics.jsonl").is_file()
    if has_eval and has_train:
        write_training_report(path, path / "training_report.html")
        return write_eval_report(path, out)
    if has_eval:
        return write_eval_report(path, out)
    if has_train:
        return write_training_report(path, out)
    raise error.Error(
        f"{path} holds neither an evaluation (results.jsonl) nor a training run (metrics.jsonl)"
    )


__all__ = [
    "NO_MATPLOTLIB",
    "Raw",
    "cards",
    "esc",
    "figure",
    "fmt",
    "fmt_ci",
    "group_keys",
    "have_matplotlib",
    "hyperparameters_section",
    "page",
    "read_run_config",
    "table",
    "training_report_html",
    "training_series",
    "write_training_report",
    "error_counts",
    "eval_report_html",
    "write_eval_report",
    "write_report",
]
