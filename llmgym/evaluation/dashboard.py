"""The live dashboard of a training or evaluation run: one self-refreshing HTML page.

``llmgym report RUN --watch`` rewrites ``RUN/dashboard.html`` every few seconds until the run
ends; the page reloads itself (``<meta http-equiv="refresh">``, no script, nothing external),
so opening it once in a browser follows the run. It shows the run-wide curves (reward,
success, KL, entropy, response length, sandbox anomaly rate) and per-domain curves as inline
SVG, a table of every family (last and best success, the drop from the best, reward, length,
anomalies, and in training its KL and entropy per trained token), and every alert: in a banner,
as a red line at its step on the curves, and on its family's row. KL is a training metric (an
evaluation has no reference model) and so is entropy here (an evaluation keeps no log-probs):
an evaluation's page shows neither, and says so.

Where the numbers come from: a training run's ``metrics.jsonl`` (the trainer's live monitor,
:mod:`llmgym.agents.monitoring`, writes the scoped keys); an evaluation folder's
``monitor.jsonl``, which the watcher itself writes from ``results.jsonl`` as episodes arrive
(:class:`~llmgym.evaluation.monitor.EvalMonitor`: TensorBoard under ``tb/`` and alert rules
too); and ``alerts.jsonl``. This module reads and draws; it judges nothing.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.evaluation.html import Raw, cards, esc, fmt, page, table
from llmgym.evaluation.monitor import (
    ALERTS_FILE,
    MONITOR_FILE,
    AlertRule,
    EvalMonitor,
    read_alerts,
)
from llmgym.evaluation.rollouts import load_jsonl, write_atomic

DASHBOARD_FILE = "dashboard.html"
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")
_CSS = (
    "<style>.charts{display:flex;flex-wrap:wrap;gap:10px}svg.chart{border:1px solid #d0d7de;"
    "border-radius:6px;background:#fff}tr.alerted td{background:#ffebe9}"
    ".ok{color:#1a7f37;font-weight:600}</style>"
)
_RUN_WIDE = (
    ("overall/reward", "reward"),
    ("overall/success", "success"),
    ("kl", "KL"),
    ("entropy", "entropy"),
    ("overall/length", "response length (tokens)"),
    ("overall/anomaly", "sandbox anomaly rate"),
)


_KL_NOTE = {
    "train": "KL and entropy are per trained token of the family's last update (KL against "
    "the reference model, or the update's own KL with measure_update_kl).",
    "eval": "KL and entropy are training metrics: an evaluation has no reference model and "
    "keeps no log-probs, so none is shown.",
}


# --- reading a run -----------------------------------------------------------------------------


def run_kind(run_dir: Path) -> str:
    """``train`` (metrics.jsonl) or ``eval`` (results.jsonl or monitor.jsonl)."""
    if (run_dir / "metrics.jsonl").is_file():
        return "train"
    if (run_dir / "results.jsonl").is_file() or (run_dir / MONITOR_FILE).is_file():
        return "eval"
    raise error.Error(
        f"{run_dir} holds neither a training run (metrics.jsonl) nor an evaluation "
        "(results.jsonl): point --watch at the run's output folder"
    )


def _records(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    name = "metrics.jsonl" if kind == "train" else MONITOR_FILE
    rows = [r for r in load_jsonl(run_dir / name) if _num(r.get("step")) is not None]
    return sorted(rows, key=lambda r: float(r["step"]))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        y = _num(r.get(key))
        if y is not None:
            xs.append(float(r["step"]))
            ys.append(y)
    return xs, ys


def finished(run_dir: Path, kind: str) -> bool:
    """Whether the run has ended: a trainer saved ``final/`` after its last metrics; an
    evaluation wrote its summary after its last result (a resumed run is running again)."""
    if kind == "train":
        end, data = run_dir / "final" / "config.json", run_dir / "metrics.jsonl"
    else:
        end, data = run_dir / "summary.json", run_dir / "results.jsonl"
    try:
        return end.stat().st_mtime >= data.stat().st_mtime
    except OSError:
        return False


# --- drawing -----------------------------------------------------------------------------------


def svg_chart(
    title: str,
    lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    marks: Sequence[float] = (),
    *,
    width: int = 360,
    height: int = 170,
) -> str:
    """A small line chart as inline SVG: one polyline per ``(label, xs, ys)``, a dashed red
    line at each step of ``marks`` (alerts), the y range and the last step as labels."""
    pad_l, pad_r, pad_t, pad_b = 56, 10, 22, 30
    points = [(x, y) for _, xs, ys in lines for x, y in zip(xs, ys, strict=False)]
    head = f'<text x="{pad_l}" y="15" font-size="12" font-weight="600">{esc(title)}</text>'
    if not points:
        return (
            f'<svg class="chart" width="{width}" height="{height}" role="img" '
            f'aria-label="{esc(title)}">{head}<text x="{pad_l}" y="{height // 2}" '
            'font-size="11" fill="#59636e">no data yet</text></svg>'
        )
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def sx(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * w

    def sy(y: float) -> float:
        return pad_t + (1 - (y - y0) / (y1 - y0)) * h

    parts = [
        f'<svg class="chart" width="{width}" height="{height}" role="img" aria-label="{esc(title)}">',
        head,
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="#d0d7de"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" font-size="10" text-anchor="end">{_tick(y1)}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + h}" font-size="10" text-anchor="end">{_tick(y0)}</text>',
        f'<text x="{pad_l}" y="{height - 12}" font-size="10">step {_tick(x0)}</text>',
        f'<text x="{pad_l + w}" y="{height - 12}" font-size="10" text-anchor="end">{_tick(x1)}</text>',
    ]
    for step in sorted(set(marks)):
        if x0 <= step <= x1:
            x = sx(step)
            parts.append(
                f'<line class="alert-mark" x1="{x:.1f}" y1="{pad_t}" x2="{x:.1f}" y2="{pad_t + h}" '
                'stroke="#cf222e" stroke-width="1.5" stroke-dasharray="4 3"><title>alert at step '
                f"{_tick(step)}</title></line>"
            )
    for i, (label, xs, ys) in enumerate(lines):
        color = _COLORS[i % len(_COLORS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys, strict=False))
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{coords}">'
            f"<title>{esc(label)}</title></polyline>"
        )
        if len(lines) > 1 and i < 8:
            parts.append(
                f'<text x="{pad_l + 4 + (i % 4) * (w // 4)}" y="{height - 1 - 10 * (i // 4 == 0)}" '
                f'font-size="9" fill="{color}">{esc(label[:18])}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _tick(value: float) -> str:
    return f"{value:.4g}"


def _alert_section(alerts: Sequence[Mapping[str, Any]]) -> str:
    if not alerts:
        return '<p id="alerts" class="ok">No alert has fired.</p>'
    items = "".join(
        f"<li>step {esc(a.get('step'))} · <b>{esc(a.get('rule'))}</b> ({esc(a.get('action'))}): "
        f"{esc(a.get('message'))}</li>"
        for a in alerts[-50:]
    )
    more = f"<p>{len(alerts) - 50} earlier alerts in {ALERTS_FILE}</p>" if len(alerts) > 50 else ""
    return (
        f'<div class="alert" id="alerts">{len(alerts)} alert(s) fired<ul>{items}</ul>{more}</div>'
    )


def _names(rows: Sequence[Mapping[str, Any]], prefix: str, depth: int) -> list[str]:
    """Scope names under ``prefix`` (``domain/``: ``d``; ``family/``: ``d/f``) in the rows."""
    names = set()
    for r in rows:
        for key in r:
            parts = key.split("/")
            if key.startswith(prefix) and len(parts) == depth + 2 and parts[-1] == "success":
                names.add("/".join(parts[1:-1]))
    return sorted(names)


def _family_rows(
    rows: Sequence[Mapping[str, Any]], alerts: Sequence[Mapping[str, Any]], window: int = 3
) -> list[list[Any]]:
    """One table row per family: episodes, last and best windowed success, drop, reward,
    length, anomaly rate, KL and entropy (last); families with an alert first, then by drop."""
    alerted = {str(a.get("key", "")).split("@")[0] for a in alerts}
    out = []
    for name in _names(rows, "family/", 2):
        key = f"family/{name}"
        _, succ = _series(rows, f"{key}/success")
        _, eps = _series(rows, f"{key}/episodes")
        weights = eps if len(eps) == len(succ) else [1.0] * len(succ)
        means = [
            sum(s * n for s, n in zip(succ[i - window : i], weights[i - window : i], strict=True))
            / max(sum(weights[i - window : i]), 1e-9)
            for i in range(min(window, len(succ)), len(succ) + 1)
        ]
        last, best = means[-1], max(means)
        _, reward = _series(rows, f"{key}/reward")
        _, length = _series(rows, f"{key}/length")
        _, anomaly = _series(rows, f"{key}/anomaly")
        _, kl = _series(rows, f"{key}/kl")
        _, entropy = _series(rows, f"{key}/entropy")
        flag = key in alerted
        out.append(
            [
                Raw(("&#9888; " if flag else "") + esc(name)),
                int(sum(eps)),
                fmt(last),
                fmt(best),
                fmt(100 * (best - last), 1),
                fmt(reward[-1] if reward else None),
                fmt(length[-1] if length else None, 1),
                fmt(anomaly[-1] if anomaly else None),
                fmt(kl[-1] if kl else None, 5),
                fmt(entropy[-1] if entropy else None),
                flag,
            ]
        )
    out.sort(key=lambda r: (not r[-1], -float(str(r[4]))))
    return out


def _family_table(rows: list[list[Any]], *, training: bool) -> str:
    headers = [
        "family",
        "episodes",
        "success (last)",
        "best",
        "drop (points)",
        "reward",
        "length",
        "anomaly",
        "KL",
        "entropy",
    ]
    width = len(headers) if training else len(headers) - 2  # no KL or entropy in evaluation
    body = table(headers[:width], [r[:width] for r in rows])
    # Mark the rows of alerted families (the table helper has no row classes).
    for r in rows:
        if r[-1]:
            body = body.replace(f"<tr><td>{r[0]}</td>", f'<tr class="alerted"><td>{r[0]}</td>', 1)
    return body


def dashboard_html(run_dir: str | Path, *, refresh_s: float | None = 5.0) -> str:
    """The dashboard page of a run folder (``refresh_s``: reload period; None: a still page)."""
    run_dir = Path(run_dir)
    kind = run_kind(run_dir)
    rows = _records(run_dir, kind)
    alerts = read_alerts(run_dir)
    marks = [float(a["step"]) for a in alerts]
    last = rows[-1] if rows else {}
    state = "finished" if finished(run_dir, kind) else "running"
    sections = [
        _CSS,
        cards(
            [
                ("state", state),
                ("last step", fmt(_num(last.get("step")), 0)),
                ("success", fmt(_num(last.get("overall/success")))),
                ("reward", fmt(_num(last.get("overall/reward")))),
                ("KL", fmt(_num(last.get("kl")), 6)),
                ("anomaly rate", fmt(_num(last.get("overall/anomaly")))),
                ("alerts", str(len(alerts))),
            ]
        ),
        _alert_section(alerts),
        "<h2>Run-wide</h2>",
    ]
    charts = [
        svg_chart(label, [(label, *_series(rows, key))], marks)
        for key, label in _RUN_WIDE
        if kind == "train" or not key.startswith(("kl", "entropy"))
    ]
    sections.append('<div class="charts">' + "".join(charts) + "</div>")
    domains = _names(rows, "domain/", 1)
    if domains:
        sections.append(f"<h2>Per domain ({len(domains)})</h2>")
        charts = [
            svg_chart(metric, [(d, *_series(rows, f"domain/{d}/{metric}")) for d in domains], marks)
            for metric in ("reward", "success", "length", "anomaly", "kl", "entropy")
            if kind == "train" or metric not in ("kl", "entropy")
        ]
        sections.append('<div class="charts">' + "".join(charts) + "</div>")
    families = _family_rows(rows, alerts)
    sections.append(f"<h2>Per family ({len(families)})</h2>")
    sections.append(
        '<p class="sub">Success is the mean of the last 3 observations of each family; drop is '
        "best minus last, in points. Rows marked &#9888; had an alert. "
        + _KL_NOTE[kind]
        + "</p>"
        + _family_table(families, training=kind == "train")
    )
    when = time.strftime("%H:%M:%S", time.localtime())
    every = f", reloads every {refresh_s:g} s" if refresh_s and state == "running" else ""
    html_text = page(
        f"llmgym dashboard: {run_dir.name}",
        f"{'training run' if kind == 'train' else 'evaluation'} · {state} · written {when}{every}",
        sections,
    )
    if refresh_s and state == "running":
        html_text = html_text.replace(
            "<head>", f'<head><meta http-equiv="refresh" content="{max(1, round(refresh_s))}">', 1
        )
    return html_text


def write_dashboard(
    run_dir: str | Path, out: str | Path | None = None, *, refresh_s: float | None = 5.0
) -> Path:
    """Write ``RUN/dashboard.html`` (or ``out``) atomically; returns its path."""
    path = Path(out) if out is not None else Path(run_dir) / DASHBOARD_FILE
    write_atomic(path, dashboard_html(run_dir, refresh_s=refresh_s).encode("utf-8", "replace"))
    return path


# --- following a run ---------------------------------------------------------------------------


class ResultsFollower:
    """Feeds an evaluation's ``results.jsonl`` to an :class:`EvalMonitor` as lines arrive.

    Starts from the top (``monitor.jsonl``, ``alerts.jsonl`` and the monitor's TensorBoard
    events are rebuilt), reads only whole lines past the last offset, and stops following
    when the file is replaced (the runner rewrites it in plan order when the run ends)."""

    def __init__(self, run_dir: Path, rules: Sequence[AlertRule], every: int = 16):
        self.path = run_dir / "results.jsonl"
        for name in (MONITOR_FILE, ALERTS_FILE):
            (run_dir / name).unlink(missing_ok=True)
        for old in (run_dir / "tb").glob("events.out.tfevents.*"):
            old.unlink()
        self.monitor = EvalMonitor(run_dir, rules, every=every)
        self.offset = 0
        self.inode: int | None = None
        self.seen: set[str] = set()
        self.done = False

    def poll(self) -> int:
        """Read what was appended; returns how many records were counted."""
        if self.done or not self.path.is_file():
            return 0
        stat = os.stat(self.path)
        if self.inode is None:
            self.inode = stat.st_ino
        replaced = stat.st_ino != self.inode or stat.st_size < self.offset
        with self.path.open("rb") as f:
            f.seek(0 if replaced else self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a torn last line waits for its end
        self.offset += end
        self.done = replaced  # the final rewrite: count what was not seen, then stop
        count = 0
        for line in data[:end].split(b"\n"):
            record = _json_object(line)
            key = str(record.get("key")) if record is not None else ""
            if record is None or (replaced and key in self.seen):
                continue
            self.seen.add(key)
            self.monitor.add(record)
            count += 1
        return count

    def close(self) -> None:
        self.monitor.close()


def _json_object(line: bytes) -> dict[str, Any] | None:
    import json

    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def watch(
    run_dir: str | Path,
    *,
    interval_s: float = 5.0,
    rules: Sequence[AlertRule] = (),
    every: int = 16,
    rounds: int | None = None,
    out: str | Path | None = None,
) -> Path:
    """Rewrite the dashboard every ``interval_s`` until the run ends (or ``rounds`` times).

    An evaluation folder is also monitored here (``rules``, windows of ``every`` episodes:
    ``monitor.jsonl``, ``alerts.jsonl``, TensorBoard); a training run is monitored by its
    trainer, so this only draws it.
    """
    run_dir = Path(run_dir)
    kind = run_kind(run_dir)
    follower = ResultsFollower(run_dir, rules, every) if kind == "eval" else None
    done_round = 0
    try:
        while True:
            ended = finished(run_dir, kind)  # read before the last poll: nothing is missed
            if follower is not None:
                follower.poll()
                if ended:
                    follower.close()
            path = write_dashboard(run_dir, out, refresh_s=interval_s)
            done_round += 1
            if ended or (rounds is not None and done_round >= rounds):
                return path
            time.sleep(interval_s)
    finally:
        if follower is not None:
            follower.close()
