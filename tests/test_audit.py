"""``llmgym audit``: every built-in env and family passes it, and it catches a hackable env.

The audit is only worth running if it fails where a reward can be gamed, so each built-in pass is
paired with envs whose rewards are deliberately weak (a verifier that pays for containing the gold,
one that pays for any answer, one that leaks its gold into the feedback): the audit must fail them,
and the CLI must exit non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import llmgym
from llmgym.rewards import RewardResult

BUILTIN = sorted(e for e in llmgym.list_envs() if e.startswith("llm/"))
FAST = ("llm/FunctionCalling-v0", "llm/Instruct-v0", "llm/LongDoc-v0", "llm/Math-v0",
        "llm/Mixture-v0", "llm/ToolCalling-v0")  # fmt: skip
CODING = ("llm/CodeRepair-v0", "llm/Coding-v0", "llm/CodingMultiTurn-v0")
BRIDGED = ("llm/ReasoningGym-v0",)
"""Audited in tests/reasoning/test_reasoning_audit.py, on a sample of its 92 families chosen for
their lenient scorers (every family here would take minutes)."""


def test_every_builtin_env_is_covered() -> None:
    assert set(BUILTIN) == set(FAST) | set(CODING) | set(BRIDGED)


def _assert_passed(report: Any) -> None:
    assert report.judged, report.table()
    assert report.passed, report.table(verbose=True)
    assert not [r for r in report.results if r.verdict in ("ERROR", "LEAK")], report.table()


@pytest.mark.slow
@pytest.mark.parametrize("env_id", FAST)
def test_every_family_of_the_text_envs_passes_the_audit(env_id: str) -> None:
    report = llmgym.audit(env_id, family="all" if env_id != "llm/Mixture-v0" else None, episodes=2)
    _assert_passed(report)
    applied = {r.hack for r in report.results if r.verdict == "pass"}
    assert {"empty", "garbage", "prompt_copy", "hedge"} <= applied


@pytest.mark.slow
@pytest.mark.parametrize("env_id", CODING)
def test_every_family_of_the_coding_envs_passes_the_fast_hacks(env_id: str) -> None:
    """Coding-v0 and CodeRepair-v0 family by family; CodingMultiTurn-v0 (the same families and
    grader, with retries: 7 minutes family by family) on a sample of eight."""
    if env_id == "llm/CodingMultiTurn-v0":
        report = llmgym.audit(env_id, episodes=8, slow=False)
    else:
        report = llmgym.audit(env_id, family="all", episodes=1, slow=False)
    _assert_passed(report)
    applied = {r.hack for r in report.results if r.verdict == "pass"}
    assert {"exit_early", "always_equal", "fake_output", "patch_runtime"} <= applied


@pytest.mark.slow
@pytest.mark.parametrize("env_id", CODING)
def test_the_coding_envs_pass_the_resource_and_timeout_tricks(env_id: str) -> None:
    report = llmgym.audit(
        env_id,
        hacks=["hidden_memory", "parallel_time", "timeout_dodge"],
        episodes=2,
        slow_episodes=2,
    )
    _assert_passed(report)
    assert {r.hack for r in report.results if r.verdict == "pass"} == {
        "hidden_memory",
        "parallel_time",
        "timeout_dodge",
    }


# --- it fails where it should ---------------------------------------------------------------------

TASKS = [
    {"id": f"q{i}", "prompt": f"What is {a} + {b}? Candidates: {a + b - 1}, {a + b}, {a + b + 1}.",
     "answer": str(a + b)}
    for i, (a, b) in enumerate([(12, 30), (7, 8), (40, 2), (19, 23), (5, 6)])
]  # fmt: skip


def contains_gold(response: str, gold: str) -> RewardResult:
    """A weak verifier: pays when the gold appears anywhere (hedges and prompt copies pay)."""
    ok = gold in response
    return RewardResult(float(ok), {"correctness": float(ok)}, "", ok)


def anything_goes(response: str, gold: str) -> RewardResult:
    """A broken verifier: pays for any non-empty answer."""
    ok = bool(response.strip())
    return RewardResult(float(ok), {"correctness": float(ok)}, "", ok)


def leaky(response: str, gold: str) -> RewardResult:
    """A verifier that tells the model the gold in its feedback."""
    ok = response.strip() == gold
    return RewardResult(float(ok), {"correctness": float(ok)}, f"expected {gold}", ok)


def _register(name: str, verifier: Any) -> str:
    env_id = f"audit-test/{name}-v0"
    llmgym.register_task_env(env_id, tasks=TASKS, verifier=verifier, overwrite=True)
    return env_id


@pytest.mark.parametrize(
    "verifier, hacks",
    [(contains_gold, {"hedge", "prompt_copy"}), (anything_goes, {"garbage", "empty"})],
    ids=["contains_gold", "anything_goes"],
)
def test_the_audit_fails_a_hackable_verifier(verifier: Any, hacks: set[str]) -> None:
    env_id = _register(verifier.__name__, verifier)
    report = llmgym.audit(env_id, episodes=5)
    assert report.judged and not report.passed
    failed = {r.hack for r in report.failures}
    assert failed & hacks, report.table(verbose=True)
    assert all(r.mean > r.limit for r in report.failures)


def test_the_audit_reports_a_gold_leaked_into_the_feedback() -> None:
    env_id = "audit-test/leaky-v0"
    codes = [{"id": f"c{i}", "prompt": f"Which code opens vault {i}?", "answer": f"VX-{4821 + i}-Q"}
             for i in range(3)]  # fmt: skip
    llmgym.register_task_env(env_id, tasks=codes, verifier=leaky, overwrite=True)
    report = llmgym.audit(env_id, episodes=3)
    assert not report.passed
    assert any(r.verdict == "LEAK" for r in report.results), report.table(verbose=True)


def test_the_audit_passes_a_sound_declarative_env_and_is_json() -> None:
    env_id = _register("exact", "exact")
    report = llmgym.audit(env_id, episodes=5)
    _assert_passed(report)
    data = json.loads(report.to_json())
    assert data["env_id"] == env_id and data["passed"] is True
    assert {r["hack"] for r in data["results"]} >= {"empty", "garbage", "hedge", "prompt_copy"}


def length_loving(prompt: str, response: str) -> float:
    """A reward model with the classic bias: the longer the answer, the better it looks."""
    return min(1.0, len(response.split()) / 200)


def indifferent(prompt: str, response: str) -> float:
    return 0.5


@pytest.mark.parametrize(
    "term, hackable",
    [
        ({"model": length_loving, "weight": 1.0, "repetition_guard": False}, True),
        ({"model": indifferent, "weight": 1.0}, False),
    ],
    ids=["length_biased", "indifferent"],
)
def test_the_audit_catches_a_reward_model_that_pays_for_length(term: Any, hackable: bool) -> None:
    """``pad_and_repeat`` pads, repeats and praises the oracle's answer: a reward model that
    pays for length fails it; a model without the bias passes. (The answer
    is read from its tags, so padding around it still verifies: the gate lets the term in.)"""
    env_id = "audit-test/rm-v0"
    llmgym.register_task_env(env_id, tasks=TASKS, extract="answer_tag", overwrite=True)
    report = llmgym.audit(
        env_id, episodes=3, hacks=["pad_and_repeat"], env_kwargs={"reward_model": term}
    )
    result = report.result("pad_and_repeat")
    assert result is not None and report.judged
    assert (result.verdict == "FAIL") is hackable, report.table(verbose=True)
    if hackable:
        failed = {v.name for v in result.variants if v.verdict == "FAIL"}
        assert {"padded", "repeated"} <= failed


# --- the command line ---------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgym.cli", "audit", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_cli_passes_a_builtin_env_and_prints_the_table() -> None:
    res = _cli("llm/Math-v0", "--episodes", "2", "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hack" in res.stdout and "verdict" in res.stdout and "passed" in res.stdout
    assert "Traceback" not in res.stderr


def test_cli_exits_non_zero_on_a_hackable_spec(tmp_path: Path) -> None:
    (tmp_path / "weak_verifier.py").write_text(
        "def score(response, gold):\n    return float(str(gold) in response)\n"
    )
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in TASKS) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "envs:\n"
        "  - id: audit-cli/Weak-v0\n"
        "    tasks: tasks.jsonl\n"
        "    verifier: weak_verifier:score\n"
    )
    env = {"LLMGYM_SPECS": str(spec), "PYTHONPATH": str(tmp_path)}
    res = _cli("audit-cli/Weak-v0", "--episodes", "5", "--json", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["passed"] is False and any(r["verdict"] == "FAIL" for r in data["results"])


def test_cli_refuses_an_unknown_env_without_a_traceback() -> None:
    res = _cli("llm/Nope-v0", "--episodes", "1")
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and "Nope" in (res.stdout + res.stderr)
