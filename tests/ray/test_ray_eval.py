"""``llmgym eval --ray ADDRESS`` on a local cluster: the same records, summary and resumption as
the same evaluation run locally."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from llmgym.evaluation.cli import main
from llmgym.ray import LoopbackCluster

TIMING = ("wall_time_s", "policy_time_s")
TASKS = [{"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(5)]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A declarative env known to this process only: its spec must travel to the actors."""
    folder = tmp_path_factory.mktemp("spec")
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    (folder / "spec.yaml").write_text(
        "id: raytest/Double-v0\ntasks: tasks.jsonl\nverifier: exact\nmax_turns: 2\n"
    )
    return folder / "spec.yaml"


def run_eval(spec: Path, out: Path, *extra: str) -> None:
    argv = [
        "--spec", str(spec), "eval", "llm/Math-v0", "llm/ToolCalling-v0", "raytest/Double-v0",
        "--episodes", "3", "--samples", "2", "--concurrency", "4",
        "--no-report", "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip
    assert main(argv) == 0


def records(out: Path) -> list[dict[str, Any]]:
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def summary(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary without its provenance (times, hosts), and the provenance."""
    doc = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return doc, doc.pop("provenance")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_eval_on_ray_equals_local_and_resumes_the_same(
    cluster: LoopbackCluster, spec: Path, tmp_path: Path
) -> None:
    run_eval(spec, tmp_path / "local")
    run_eval(spec, tmp_path / "ray", "--ray", cluster.address)
    want = records(tmp_path / "local")
    assert len(want) == 18 and all(r["status"] == "ok" for r in want)
    assert any(r["turns"] > 1 for r in want)  # multi-turn episodes went through the actors
    assert records(tmp_path / "ray") == want  # same records, same order
    local_summary, _ = summary(tmp_path / "local")
    ray_summary, provenance = summary(tmp_path / "ray")
    assert ray_summary == local_summary
    assert provenance["sessions"][-1]["ray"] == cluster.address

    # a run killed after 7 episodes (and mid-write of the 8th) resumes on Ray: the 11 left
    # are played, the 7 kept, and the results are the local run's
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "local", resumed)
    lines = (resumed / "results.jsonl").read_bytes().splitlines(keepends=True)
    (resumed / "results.jsonl").write_bytes(b"".join(lines[:7]) + lines[7][:40])
    (resumed / "summary.json").unlink()
    run_eval(spec, resumed, "--ray", cluster.address)
    assert records(resumed) == want
    resumed_summary, provenance = summary(resumed)
    assert resumed_summary == local_summary
    assert provenance["sessions"][-1]["episodes_run"] == 11
    assert len(provenance["sessions"]) == 2
