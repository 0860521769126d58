"""The README's main job, scaled down: the same code path, fewer steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmgym.agents import demo


def test_demo_data_helpers() -> None:
    docs = demo.pretraining_corpus(8, seed=0)
    assert (
        len(docs) == 8
        and any("<|user|>" in d for d in docs)
        and all("\\boxed{" not in d.split("\n")[-1] for d in docs)
    )
    assert (
        demo.worked_solution("What is 4 + 7?\n\nPut ...", "11")
        == "4 + 7 = 11, so the answer is \\boxed{11}."
    )
    assert demo.worked_solution("Compute 3.", "3") == "The answer is \\boxed{3}."
    records = demo.sft_records(3)
    assert [m["role"] for m in records[0]["messages"]] == ["user", "assistant"]


@pytest.mark.slow
def test_quick_demo_improves_on_sft(tmp_path: Path) -> None:
    cfg = demo.DemoConfig(output_dir=str(tmp_path), **demo.QUICK)
    results = demo.run(cfg, log=lambda *a: None)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["grpo"]["success"] == results["grpo"]["success"]
    # Over the quick horizon GRPO reliably adds at least 15 points (the full demo: 30+).
    assert results["grpo"]["success"] >= results["sft"]["success"] + 0.15, results
    assert (tmp_path / "reward_curve.png").stat().st_size > 1000
    assert (tmp_path / "grpo" / "metrics.jsonl").is_file()
    # It ends with the standard evaluation of both models, their comparison, the training report.
    assert set(results["reports"]) == {"sft", "grpo", "compare", "training"}
    for stage in ("sft", "grpo"):
        summary = json.loads((tmp_path / "eval" / stage / "summary.json").read_text())
        assert summary["overall"]["success_rate"] == pytest.approx(results[stage]["success"])
    for name, path in results["reports"].items():
        html = Path(path).read_text(encoding="utf-8")
        assert html.lstrip().lower().startswith("<!doctype html")
        assert name == "training" or "llm/Math-v0" in html


def test_demo_arguments_attach_to_any_parser() -> None:
    import argparse

    args = demo.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--quick", "--output-dir", "x", "--ppo"]
    )
    assert args.quick and args.ppo and args.output_dir == "x" and args.seed == 0
