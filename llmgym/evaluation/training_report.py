"""The training report: a run's curves (from its metrics log), grouped and smoothed, with the
run's configuration above them, as one self-contained HTML page."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.evaluation.html import (
    NO_MATPLOTLIB,
    _grid,
    cards,
    esc,
    figure,
    fmt,
    have_matplotlib,
    page,
    table,
)
from llmgym.evaluation.rollouts import load_jsonl, write_atomic

# --- training report ---------------------------------------------------------------------------

_STEP_KEYS = ("step", "global_step", "iteration", "update")
_SKIP_KEYS = frozenset({"time", "timestamp", "wall_time"})
"""Clock readings logged beside the metrics: an axis, not a curve."""
_GROUP_ORDER = (
    "rewards",
    "reward",
    "success",
    "eval",
    "misc",
    "kl",
    "entropy",
    "losses",
    "charts",
    "sandbox",
    "perf",
    "throughput",
    "time",
    "scheduler",
)


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def training_series(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[str, dict[str, tuple[list[float], list[float]]]]:
    """The step axis name and ``{key: (steps, values)}`` of every numeric key in ``rows``.

    The step is the first of ``step``, ``global_step``, ``iteration``, ``update`` that the
    rows have, else the row number. Non-numeric, boolean and non-finite values are skipped,
    and so are clock readings (``time``, ``timestamp``).

    >>> axis, s = training_series([{"step": 1, "kl": 0.1, "note": "x"}, {"step": 2, "kl": 0.2}])
    >>> axis, s
    ('step', {'kl': ([1.0, 2.0], [0.1, 0.2])})
    """
    axis = next((k for k in _STEP_KEYS if any(_numeric(r.get(k)) is not None for r in rows)), "row")
    series: dict[str, tuple[list[float], list[float]]] = {}
    for i, row in enumerate(rows):
        x = _numeric(row.get(axis)) if axis != "row" else float(i)
        if x is None:
            x = float(i)
        for key, value in row.items():
            if key == axis or key in _SKIP_KEYS:
                continue
            y = _numeric(value)
            if y is None:
                continue
            xs, ys = series.setdefault(str(key), ([], []))
            xs.append(x)
            ys.append(y)
    return axis, series


def group_keys(keys: Iterable[str]) -> dict[str, list[str]]:
    """Keys grouped by their prefix before ``/`` (``misc`` for none); known groups first.

    >>> group_keys(["losses/pg", "kl", "rewards/math", "charts/sps"])
    {'rewards': ['rewards/math'], 'misc': ['kl'], 'losses': ['losses/pg'], 'charts': ['charts/sps']}
    """
    groups: dict[str, list[str]] = defaultdict(list)
    for key in sorted(keys):
        prefix, sep, _ = key.partition("/")
        groups[prefix if sep else "misc"].append(key)

    def rank(name: str) -> tuple[int, str]:
        return (_GROUP_ORDER.index(name) if name in _GROUP_ORDER else len(_GROUP_ORDER), name)

    return {g: groups[g] for g in sorted(groups, key=rank)}


def _ema(values: Sequence[float], weight: float = 0.9) -> list[float]:
    out, acc = [], values[0]
    for v in values:
        acc = weight * acc + (1 - weight) * v
        out.append(acc)
    return out


_CONFIG_FILES = ("config.yaml", "config.yml", "config.json")
"""Where a training run keeps its config (llmgym's trainers write ``config.yaml``)."""
_HEADLINE_KEYS = ("algo", "model", "env_id", "data", "learning_rate", "total_steps")


def _config_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, default=repr)


def hyperparameters_section(config: Mapping[str, Any], source: str) -> str:
    """A table of a run's config: the headline fields first, then the rest in file order."""
    keys = [k for k in _HEADLINE_KEYS if k in config]
    keys += [k for k in config if k not in keys]
    rows = [[str(k), _config_value(config[k])] for k in keys]
    return (
        '<h2 id="hyperparameters">Hyperparameters</h2>'
        f'<p class="sub">{len(rows)} settings, from {esc(source)}</p>'
        + table(["setting", "value"], rows, 99)
    )


def read_run_config(run_dir: str | Path) -> tuple[dict[str, Any], str | None]:
    """A training run's config and the file it came from (``({}, None)`` when there is none)."""
    import yaml

    for name in _CONFIG_FILES:
        path = Path(run_dir) / name
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        try:
            data = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError):
            continue
        if isinstance(data, Mapping):
            return dict(data), name
    return {}, None


def training_report_html(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
    meta: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    config_source: str = "the run's config",
) -> str:
    """The page of a training run: its hyper-parameters (``config``), then every numeric
    key's curve, grouped by prefix; ``meta`` (other run files) at the end."""
    axis, series = training_series(rows)
    groups = group_keys(series)
    head = [
        (k, _config_value(config[k])[-40:]) for k in ("algo", "model") if config and k in config
    ]
    sections = [
        cards(
            [
                *head,
                ("logged rows", str(len(rows))),
                ("metrics", str(len(series))),
                (
                    f"last {axis}",
                    fmt(max((x for xs, _ in series.values() for x in xs), default=None), 0),
                ),
            ]
        )
    ]
    if config:
        sections.append(hyperparameters_section(config, config_source))
    else:
        sections.append(
            '<p class="note">No config.yaml in the run folder: the hyperparameters are '
            "unknown (llmgym's trainers write one when they start).</p>"
        )
    if not series:
        sections.append('<p class="note">No numeric metrics found in metrics.jsonl.</p>')
    plots = have_matplotlib()
    if not plots and series:
        sections.append(f'<p class="note">{esc(NO_MATPLOTLIB)}</p>')
    for group, keys in groups.items():
        sections.append(f"<h2>{esc(group)}</h2>")
        if plots:

            def draw(fig: Any, keys: Sequence[str] = keys) -> None:
                rows_, cols = _grid(len(keys))
                axes = fig.subplots(rows_, cols, squeeze=False).ravel()
                for ax, key in zip(axes, keys, strict=False):
                    xs, ys = series[key]
                    if len(ys) > 20:
                        ax.plot(xs, ys, color="#4c72b0", alpha=0.3, linewidth=1)
                        ax.plot(xs, _ema(ys), color="#4c72b0", linewidth=1.6)
                    else:
                        ax.plot(xs, ys, color="#4c72b0", marker="o", markersize=3)
                    ax.set_title(key, fontsize=9)
                    ax.set_xlabel(axis, fontsize=8)
                    ax.tick_params(labelsize=7)
                    ax.grid(alpha=0.3)
                for ax in axes[len(keys) :]:
                    ax.set_visible(False)

            n_rows, _ = _grid(len(keys))
            sections.append(
                figure(
                    draw,
                    width=11,
                    height=2.6 * n_rows,
                    alt=f"{group} curves",
                    caption=f"{group}: raw values (faint) and an exponential moving average when there are many points.",
                )
            )
        sections.append(
            table(
                ["metric", "points", "first", "last", "min", "max"],
                [
                    [
                        k,
                        len(series[k][1]),
                        fmt(series[k][1][0], 4),
                        fmt(series[k][1][-1], 4),
                        fmt(min(series[k][1]), 4),
                        fmt(max(series[k][1]), 4),
                    ]
                    for k in keys
                ],
            )
        )
    if meta:
        sections.append(
            "<h2>Run files</h2><pre>" + esc(json.dumps(meta, indent=1, default=repr)) + "</pre>"
        )
    algo = f"{config['algo']} · " if config and config.get("algo") else ""
    return page(title, f"{algo}{len(rows)} rows of metrics.jsonl", sections)


def write_training_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` of a training run from ``RUN_DIR/metrics.jsonl``.

    A torn last line (a run still writing, or killed) is ignored. The run's config
    (``config.yaml``, which llmgym's trainers write, else ``config.json``) is shown as a
    table of hyper-parameters at the top; ``provenance.json``, when present, at the end.
    """
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.jsonl" if run_dir.is_dir() else run_dir
    if not metrics.is_file():
        raise error.Error(f"No metrics.jsonl in {run_dir}: a training run logs its metrics there")
    rows = load_jsonl(metrics)
    config, source = read_run_config(metrics.parent)
    meta: dict[str, Any] = {}
    try:
        meta["provenance.json"] = json.loads(
            (metrics.parent / "provenance.json").read_text(encoding="utf-8")
        )
    except (OSError, json.JSONDecodeError):
        pass
    html_text = training_report_html(
        rows,
        title=f"llmgym training run: {metrics.parent.name}",
        meta=meta,
        config=config,
        config_source=source or "the run's config",
    )
    path = Path(out) if out is not None else metrics.parent / "report.html"
    write_atomic(path, html_text.encode("utf-8", "replace"))
    return path
