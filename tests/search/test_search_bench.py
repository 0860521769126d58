"""The search benchmark (benchmarks/search.py) and the expert-iteration benchmark's figures
(benchmarks/expert_iteration.py): a quick run end to end, what counts as solved, the paired gain."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import pytest

from llmgym.policies import Policy, Request, Response

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{name}_bench", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"{name}_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _load("search")
exit_bench = _load("expert_iteration")


class LastStepOnly(Policy):
    """Wrong on every step but the last, right on the last: the env's ``is_success`` (the last
    step's) says yes, the chain is not solved."""

    spec = "last-step-only"

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            episode = req.env.unwrapped.episode
            last = episode.subtask_index == len(episode.subtasks) - 1
            out.append(Response(req.env.unwrapped.oracle_action() if last else "\\boxed{-1}"))
        return out


def _chain_env() -> gym.Env:
    return gym.make("llm/Math-v0", subtask_mode="sequential", disable_env_checker=True)


@pytest.mark.timeout(60)
def test_right_last_step_alone_is_not_solved() -> None:
    env = _chain_env()
    env.reset(seed=0, options={"task": bench.add_chain_task(0)})
    result = bench.best_of_n(env, LastStepOnly(), n=2, seed=0)
    env.close()
    assert result.success  # the env's outcome: the last answer is right
    assert not bench.solved(result)


@pytest.mark.timeout(60)
def test_add_chain_task_uses_the_demo_wording_and_is_reproducible() -> None:
    from llmgym.agents import demo

    task = bench.add_chain_task(7)
    assert task == bench.add_chain_task(7) and task != bench.add_chain_task(8)
    assert [s.id for s in task.subtasks] == ["s1", "s2", "s3"]
    for sub in task.subtasks:
        a, b = map(int, demo._QUESTION.search(sub.prompt).groups())  # type: ignore[union-attr]
        assert sub.prompt == f"What is {a} + {b}?\n\n{demo.INSTRUCTION}"
        assert sub.answer == str(a + b)


@pytest.mark.timeout(60)
def test_beam_shape_spends_the_budget_and_never_more() -> None:
    for turns in (1, 3, 4):
        for budget in (2, 8, 32, 128):
            width, expand = bench.beam_shape(turns, budget)
            spent = expand * (1 + width * (turns - 1))
            assert width >= 1 and expand >= 1
            assert spent <= budget or expand == 1


@pytest.mark.timeout(60)
def test_process_rewards_let_beam_beat_best_of_n_at_equal_calls() -> None:
    """Right with probability 1/2 per step: best-of-N needs a whole episode right, beam keeps
    a right step once found."""
    env = _chain_env()
    resets = [{"task": bench.add_chain_task(i)} for i in range(16)]
    rows = bench.run_setting("add-chain", env, bench.OracleMixed(0.5), resets, [32])
    env.close()
    by = {r["method"]: r for r in rows}
    assert all(r["calls"] <= 32 for r in rows)
    assert by["beam"]["solved"] > by["best_of_n"]["solved"] + 0.1
    gain, se = bench.gain_over_best_of_n(rows, by["beam"])
    assert gain == pytest.approx(by["beam"]["solved"] - by["best_of_n"]["solved"])
    assert se > 0


def test_gain_is_the_paired_difference_with_its_standard_error() -> None:
    rows = [
        {"setting": "add-chain", "budget": 8, "method": m, "per_task": t}
        for m, t in (("best_of_n", [0, 0, 1, 0]), ("beam", [1, 0, 1, 1]), ("mcts", [0, 0, 1, 0]))
    ]
    gain, se = bench.gain_over_best_of_n(rows, rows[1])
    assert gain == 0.5 and se == pytest.approx(0.2887, abs=1e-4)
    assert bench.gain_over_best_of_n(rows, rows[2]) == (0.0, 0.0)
    with pytest.raises(ValueError):  # tasks that do not line up are not compared
        bench.gain_over_best_of_n(rows, {**rows[1], "per_task": [1, 1]})


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_quick_run_writes_the_table_the_json_and_the_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "search_bench.json").read_text())
    cells = {(r["setting"], r["budget"], r["method"]) for r in rows}
    assert cells == {
        (s, b, m) for s in ("add-chain", "coding") for b in (8, 32) for m in bench.METHODS
    }
    for r in rows:
        assert r["calls"] <= r["budget"] and len(r["per_task"]) == 4
        assert 0 <= r["solved"] <= r["env_success"] <= 1
    assert (tmp_path / "search_budget_curve.png").stat().st_size > 1000
    table = capsys.readouterr().out
    assert "| add-chain | 32 | 4 |" in table and "pts" in table
    again = tmp_path / "merged"
    bench.main(["--report", str(tmp_path / "search_bench.json"), "--out", str(again)])
    assert json.loads((again / "search_bench.json").read_text()) == rows


def test_expert_iteration_samples_to_target_table_and_curve(tmp_path: Path) -> None:
    evals = [{"samples": 128, "success": 0.6}, {"samples": 256, "success": 0.96}]
    assert exit_bench.samples_to_target(evals, 0.95) == 256
    assert exit_bench.samples_to_target(evals, 0.97) is None
    results = {"grpo": [evals, evals], "expert_iteration": [evals[:1], evals]}
    table = exit_bench.table(results, 0.95)
    assert "| grpo | 256, 256 | 256 | 96.0%, 96.0% |" in table
    assert "| expert_iteration | not reached, 256 | - | 60.0%, 96.0% |" in table
    exit_bench.plot({**results, "base_success": 0.5}, 0.95, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 1000
