"""The live dashboard: an evaluation followed as its results arrive (TensorBoard, monitor.jsonl,
an anomaly alert), a training run's page with its alert marked, rendered in headless chromium,
hostile names escaped, and ``llmgym report RUN --watch``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from monitor_envs import PHASE_ENV

from llmgym import error
from llmgym.cli import main as cli_main
from llmgym.evaluation import evaluate
from llmgym.evaluation.dashboard import ResultsFollower, dashboard_html, watch, write_dashboard
from llmgym.evaluation.monitor import AlertRule, read_alerts

MARKS = """({alerts: document.querySelectorAll('#alerts.alert').length,
  marks: document.querySelectorAll('svg line.alert-mark').length,
  charts: document.querySelectorAll('svg.chart').length,
  alerted: Array.from(document.querySelectorAll('tr.alerted td:first-child')).map(t => t.textContent),
  refresh: (document.querySelector('meta[http-equiv=refresh]') || {}).content || null,
  scripts: document.scripts.length})"""


def _answer(messages: Any, tools: Any) -> str:
    return "anything"


@pytest.fixture
def eval_run(tmp_path: Path) -> Path:
    """A real evaluation whose sandbox starts timing out after 24 episodes."""
    out = tmp_path / "eval"
    evaluate(
        [PHASE_ENV], _answer, out=out, episodes=48, progress=False, env_kwargs={"burst_after": 24},
        concurrency=1, report=False,
    )  # fmt: skip
    return out


def _write_lines(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as f:
        f.write(b"".join(lines))


@pytest.mark.timeout(120)
def test_an_evaluation_is_followed_as_its_results_arrive(eval_run: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    lines = (eval_run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (live / "results.jsonl").write_bytes(b"")
    rule = AlertRule("anomaly_above", bound=0.5, episodes=8, action="stop")
    follower = ResultsFollower(live, [rule], every=8)
    _write_lines(live / "results.jsonl", [*lines[:20], lines[20][:15]])  # a torn line waits
    assert follower.poll() == 20 and read_alerts(live) == []
    _write_lines(live / "results.jsonl", [lines[20][15:], *lines[21:], b"{not json\n", b"[1]\n"])
    assert follower.poll() == 28
    follower.close()
    (alert,) = read_alerts(live)  # the watcher only logs: a stop needs the run's own monitor
    assert alert["rule"] == "anomaly_above" and alert["step"] == 4
    monitor = [json.loads(line) for line in (live / "monitor.jsonl").read_text().splitlines()]
    assert [m["step"] for m in monitor] == [1, 2, 3, 4, 5, 6]
    assert monitor[0]["domain/phase/anomaly"] == 0.0 and monitor[-1]["overall/anomaly"] == 1.0
    assert any((live / "tb").glob("events.out.tfevents.*"))
    html = dashboard_html(live)
    assert 'id="alerts"' in html and "anomaly_above" in html
    # KL is a training metric, and an evaluation keeps no log-probs: no column, and a note.
    assert "<th>KL</th>" not in html and "no reference model" in html


@pytest.mark.timeout(60)
def test_watch_ends_with_a_finished_evaluation(eval_run: Path) -> None:
    (eval_run / "summary.json").touch()  # written after the last result: the run is over
    path = watch(
        eval_run,
        interval_s=0.05,
        rules=[AlertRule("anomaly_above", bound=0.5, episodes=8)],
        every=8,
    )
    text = path.read_text()
    assert 'http-equiv="refresh"' not in text and "finished" in text  # a still page at the end
    assert len(read_alerts(eval_run)) == 1


def _training_run(root: Path) -> Path:
    """A training run's files as the trainer writes them, with hostile family names."""
    run = root / "train"
    run.mkdir()
    rows = []
    for step in range(1, 31):
        late = step >= 20
        rows.append(
            {
                "step": step,
                "time": 0.0,
                "kl": 0.01 * step,
                "entropy": 2.0 - step / 30,
                "overall/reward": 0.2 if late else 0.8,
                "overall/success": 0.2 if late else 0.8,
                "overall/length": 12.0,
                "overall/anomaly": 0.0,
                "domain/math/success": 0.8,
                "domain/code/success": 0.2 if late else 0.7,
                "family/code/<i>x/success": 0.1 if late else 0.7,
                "family/code/<i>x/episodes": 16.0,
                "family/math/add/success": 0.8,
                "family/math/add/episodes": 16.0,
                "family/math/add/kl": 0.012345678,
                "family/math/add/entropy": 1.5,
                "domain/math/kl": 0.012345678,
            }
        )
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3')
    alert = {
        "step": 22, "rule": "forgetting", "key": "family/code/<i>x@0.00", "value": 0.1,
        "threshold": 0.7, "action": "checkpoint", "message": "<img src=x onerror=alert(1)> fell",
    }  # fmt: skip
    (run / "alerts.jsonl").write_text(json.dumps(alert) + "\nnot json\n")
    return run


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.filterwarnings("ignore:.*not a JSON object")
def test_the_dashboard_renders_in_a_browser_with_the_alert_marked(
    browser: Any, tmp_path: Path
) -> None:
    run = _training_run(tmp_path)
    path = write_dashboard(run, refresh_s=3600)
    text = path.read_text()
    assert "<script" not in text and "<img" not in text and "&lt;img src=x" in text
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", text)
    result = browser(path, MARKS)
    assert result["errors"] == [] and result["resources"] == []
    seen = result["extra"]
    assert seen["alerts"] == 1 and seen["scripts"] == 0 and seen["refresh"] == "3600"
    assert seen["charts"] >= 10 and seen["marks"] >= 6  # the alert's line on each curve
    assert seen["alerted"] == ["\u26a0 code/<i>x"]  # the family's row, its name as text
    assert '<td class="n">0.01235</td><td class="n">1.500</td>' in text  # its KL, entropy


@pytest.mark.filterwarnings("ignore:.*not a JSON object")
def test_report_watch_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    run = _training_run(tmp_path)
    (run / "final").mkdir()
    (run / "final" / "config.json").write_text("{}")  # saved after the last metrics: finished
    assert cli_main(["report", str(run), "--watch", "--interval", "0.1"]) == 0
    assert capsys.readouterr().out.strip().endswith("dashboard.html")
    assert cli_main(["report", str(run), "--alerts", "x.yaml"]) != 0  # --alerts needs --watch
    assert cli_main(["report", str(run), "--watch", "--interval", "nan"]) == 2
    with pytest.raises(error.Error, match="neither a training run"):
        dashboard_html(tmp_path / "nothing")
