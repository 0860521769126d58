"""Alert rules on a running evaluation: a reward collapse stops it (resumable), a quiet run
fires nothing, bad rules fail before any episode, and the command line exits 1 on a stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from monitor_envs import PHASE_ENV

import llmgym
from llmgym import error
from llmgym.cli import main
from llmgym.evaluation.monitor import MonitorStop

COLLAPSE = [{"rule": "reward_collapse", "drop": 0.5, "action": "stop", "episodes": 32}]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _eval(out: Path, collapse_after: int, **kw: Any) -> Any:
    return llmgym.evaluate(
        {"id": PHASE_ENV, "kwargs": {"collapse_after": collapse_after}, "episodes": 160},
        "oracle",
        out=out,
        concurrency=1,
        report=False,
        progress=False,
        **kw,
    )


@pytest.mark.timeout(120)
def test_a_reward_collapse_stops_the_evaluation_and_it_resumes(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    with pytest.raises(MonitorStop, match="stopped by alert"):
        _eval(out, collapse_after=64, alerts=COLLAPSE)
    played = _lines(out / "results.jsonl")
    assert 64 < len(played) < 160  # stopped soon after the collapse, not at the end
    (alert,) = [a for a in _lines(out / "alerts.jsonl") if a["rule"] == "reward_collapse"]
    assert alert["action"] == "stop"
    assert (out / "monitor.jsonl").is_file()
    result = _eval(out, collapse_after=64)  # the same run, resumed without the rules
    assert result.summary["overall"]["episodes"] == 160
    assert result.summary["provenance"]["sessions"][-1]["episodes_run"] == 160 - len(played)


@pytest.mark.timeout(120)
def test_a_quiet_evaluation_fires_nothing(tmp_path: Path) -> None:
    result = _eval(tmp_path / "eval", collapse_after=-1, alerts=COLLAPSE)
    assert result.summary["overall"]["episodes"] == 160
    alerts = tmp_path / "eval" / "alerts.jsonl"
    assert not alerts.exists() or _lines(alerts) == []


def test_bad_rules_fail_before_any_episode(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    with pytest.raises(error.Error, match="rule"):
        _eval(out, collapse_after=-1, alerts=[{"rule": "reward_colapse", "drop": 0.5}])
    assert not (out / "results.jsonl").exists()


@pytest.mark.timeout(120)
def test_the_command_line_exits_1_on_a_stop_alert(tmp_path: Path, capsys: Any) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "alerts:\n  - {rule: reward_collapse, drop: 0.5, action: stop, episodes: 32}\n"
    )
    out = tmp_path / "eval"
    env_kwargs = json.dumps({"collapse_after": 64})
    argv = ["eval", PHASE_ENV, "--policy", "oracle", "--episodes", "160", "--concurrency", "1"]
    argv += ["--env-kwargs", env_kwargs, "--out", str(out), "--alerts", str(rules)]
    argv += ["--no-report", "--no-progress"]
    assert main(argv) == 1
    said = capsys.readouterr().out
    assert "stopped by alert" in said and f"--out {out}" in said
