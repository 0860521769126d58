"""Per-family and per-domain KL and entropy in the live monitor: hostile names and values first,
an injected family KL drift that fires a family-scoped ``kl_above`` for that family alone, then
real GRPO runs (tiny model) whose per-family token-weighted means reproduce the run-wide ``kl``
and ``entropy`` (reference KL, the update's KL over several passes, two processes), and the
dashboard drawing them."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents_common import assert_identity, launch_two_processes, write_length_spec

import llmgym
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.monitoring import FamilyTally
from llmgym.agents.runlog import read_metrics
from llmgym.evaluation.dashboard import dashboard_html
from llmgym.evaluation.monitor import MAX_FAMILIES, AlertRule, Episode, Monitor, TokenSums
from llmgym.evaluation.monitor import read_alerts as read_alert_file

HERE = Path(__file__).resolve().parent
ENV = "agents-test/Families-v0"
TASKS = [
    {
        "id": f"t{i}",
        "prompt": f"Write a long line ({i}).",
        "answer": "0",
        "domain": ("left", "right")[i % 2],
        "family": ("alpha", "beta", "gamma")[i % 3],
    }
    for i in range(36)
]
"""Six (domain, family) pairs, one dense reward (so groups carry signal)."""


@pytest.fixture(autouse=True)
def families_env() -> Iterator[str]:
    import gymnasium as gym

    llmgym.register_task_env(
        ENV, tasks=TASKS, verifier="agents_testing_verifiers:length_reward", domain="length"
    )
    try:
        yield ENV
    finally:
        del gym.registry[ENV]


def ep(domain: str = "d", family: str = "f") -> Episode:
    return Episode(domain, family, 0.0, 1.0, True, 10)


# --- the monitor: hostile input first --------------------------------------------------------


def test_hostile_family_names_in_token_sums_cannot_forge_keys() -> None:
    tokens = {("math/../x", "<b>f</b>" + "z" * 300): TokenSums(10.0, 1.0, 20.0)}
    metrics, _ = Monitor().observe(1, [], {}, tokens)
    keys = [k for k in metrics if k.startswith("family/")]
    assert keys and all(k.count("/") == 3 and "<" not in k and len(k) < 160 for k in keys)
    assert metrics["overall/kl"] == 0.1 and metrics["overall/entropy"] == 2.0


def test_token_sums_of_unbounded_families_fold_into_other() -> None:
    m = Monitor()
    m.observe(1, [ep(family=f"f{i}") for i in range(MAX_FAMILIES)])
    tokens = {("d", f"new{i}"): TokenSums(1.0, 0.5, 1.0) for i in range(50)}
    metrics, _ = m.observe(2, [], {}, tokens)
    assert metrics["family/d/_other/trained_tokens"] == 50.0
    assert metrics["family/d/_other/kl"] == pytest.approx(0.5)
    assert not any("new" in k for k in metrics)


@pytest.mark.parametrize("tokens", [0.0, -5.0, math.nan, math.inf, True])
def test_families_without_real_trained_tokens_report_nothing(tokens: Any) -> None:
    metrics, _ = Monitor().observe(1, [], {}, {("d", "f"): TokenSums(tokens, 1.0, 1.0)})
    assert not any(k.endswith(("kl", "entropy", "trained_tokens")) for k in metrics)


def test_a_run_without_kl_reports_entropy_only() -> None:
    metrics, _ = Monitor().observe(1, [], {}, {("d", "f"): TokenSums(4.0, None, 8.0)})
    assert metrics["family/d/f/entropy"] == 2.0 and "family/d/f/kl" not in metrics


def test_an_infinite_kl_fires_instead_of_hiding() -> None:
    """A blown-up KL (infinite or NaN) is above any bound, run-wide or in a family."""
    run_wide = Monitor([AlertRule("kl_above", bound=0.5, window=3)])
    assert [a.key for a in run_wide.observe(1, [], {"kl": math.inf})[1]] == ["kl"]
    family = Monitor([AlertRule("kl_above", bound=0.5, window=3, scope="family")])
    (alert,) = family.observe(1, [], {}, {("d", "f"): TokenSums(3.0, math.inf, 1.0)})[1]
    assert alert.key == "family/d/f"
    (alert,) = family.observe(2, [], {}, {("d", "g"): TokenSums(3.0, math.nan, 1.0)})[1]
    assert alert.key == "family/d/g" and alert.value == math.inf


def test_an_injected_kl_drift_in_one_family_fires_for_that_family_alone() -> None:
    rules = [
        AlertRule("kl_above", bound=0.2, window=2, scope="family", action="checkpoint"),
        AlertRule("kl_above", bound=0.2, window=2, scope="domain"),
        AlertRule("kl_above", bound=0.2, window=2),  # run-wide: the drift is diluted
    ]
    m = Monitor(rules)
    fired = []
    for step in range(1, 16):
        drift = 0.6 if 6 <= step < 10 else 0.05  # one family leaves the reference
        tokens = {
            ("code", "sort"): TokenSums(20.0, 20.0 * drift, 30.0),
            ("code", "graph"): TokenSums(100.0, 5.0, 150.0),
            ("math", "add"): TokenSums(100.0, 5.0, 150.0),
        }
        metrics, alerts = m.observe(step, [], {"kl": metrics_kl(tokens)}, tokens)
        assert metrics["overall/kl"] == pytest.approx(metrics_kl(tokens))
        fired += [(step, a.rule, a.key, a.action) for a in alerts]
    # (0.05 + 0.6) / 2 > 0.2 at step 6; the domain mixes 20 drifting tokens with 100 quiet ones.
    assert fired == [(6, "kl_above", "family/code/sort", "checkpoint")]


def metrics_kl(tokens: Mapping[tuple[str, str], TokenSums]) -> float:
    return sum(s.kl or 0.0 for s in tokens.values()) / sum(s.tokens for s in tokens.values())


def test_the_tally_adds_rows_by_family_and_drops_kept_out_rows() -> None:
    import torch

    tally = FamilyTally([("d", "b"), ("d", "a"), ("d", "b"), ("e", "c")], names=[("z", "z")])
    tally.keep([0, 1, 3])  # row 2 (a truncated completion) is not trained
    tally.begin(3, "cpu")
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    entropy = torch.full((3, 3), 2.0)
    tally.add([0, 1, 2], mask, entropy, kl_rows=torch.tensor([0.2, 0.1, 0.3]))
    tally.add([0], torch.zeros(1, 3), entropy[:1], torch.zeros(1))  # a padding pass
    reduced = tally.by_family()
    tally.finish(reduced, passes=1, kl=True)
    assert tally.sums == {
        ("d", "a"): TokenSums(1.0, pytest.approx(0.1), 2.0),
        ("d", "b"): TokenSums(2.0, pytest.approx(0.2), 4.0),
        ("e", "c"): TokenSums(3.0, pytest.approx(0.3), 6.0),
    }  # ("z", "z") was drawn but trained nothing: not reported
    assert FamilyTally([]).by_family(torch.ones(2, 3)).numel() == 0  # nothing named


# --- real GRPO runs --------------------------------------------------------------------------


def _train(tiny_dir: str, out: Path, steps: int = 3, **kw: Any) -> list[dict[str, Any]]:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": ENV,
        "output_dir": str(out),
        "total_steps": steps,
        "prompts_per_step": 4,
        "group_size": 3,
        "max_new_tokens": 6,
        "learning_rate": 1e-2,
        "progress": False,
        "tensorboard": False,
    }
    trainer = GRPOTrainer(GRPOConfig(**{**base, **kw}))
    try:
        trainer.train()
    finally:
        trainer.close()
    return read_metrics(out)


@pytest.mark.timeout(300)
def test_reference_kl_and_entropy_per_family_reproduce_the_run_wide_figures(
    tiny_dir: str, tmp_path: Path
) -> None:
    alerts = [{"rule": "kl_above", "bound": 0.0, "window": 1, "scope": "family"}]
    records = _train(tiny_dir, tmp_path, beta=0.1, alerts=alerts)
    assert records[-1]["kl"] > 0  # the policy moved away from the reference
    for r in records:
        for metric in ("kl", "entropy"):
            assert_identity(r, metric, 1)
            assert_identity(r, metric, 2)
    # The rule looks at every family that drifted (any KL is above 0), at the step it did.
    fired = read_alert_file(tmp_path)
    assert fired and all(a["rule"] == "kl_above" for a in fired)
    for a in fired:
        record = records[a["step"] - 1]
        assert a["key"].startswith("family/") and record[f"{a['key']}/kl"] == pytest.approx(
            a["value"]
        )
    # The dashboard shows them: a KL column filled per family, and per-domain KL curves.
    html = dashboard_html(tmp_path, refresh_s=None)
    assert "<th>KL</th><th>entropy</th>" in html and 'aria-label="kl"' in html
    family = next(k for k in records[-1] if k.startswith("family/") and k.endswith("/kl"))
    assert f"{records[-1][family]:.5f}" in html


@pytest.mark.timeout(300)
def test_the_update_kl_over_several_passes_is_split_by_family_too(
    tiny_dir: str, tmp_path: Path
) -> None:
    records = _train(
        tiny_dir, tmp_path, measure_update_kl=True, num_iterations=2, mini_batches=2,
        micro_batch_size=2,
    )  # fmt: skip
    for r in records:
        assert r["kl"] > 0
        for metric in ("kl", "entropy"):
            assert_identity(r, metric, 2)


@pytest.mark.timeout(300)
def test_without_a_kl_measure_no_family_kl_is_made_up(tiny_dir: str, tmp_path: Path) -> None:
    (record,) = _train(tiny_dir, tmp_path, steps=1, measure_update_kl=False)
    assert "kl" not in record and not any(k.endswith("/kl") for k in record)
    assert_identity(record, "entropy", 2)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_processes_reduce_the_family_sums_like_the_totals(
    tiny_dir: str, tmp_path: Path
) -> None:
    spec = write_length_spec(tmp_path, "agents-test/FamiliesSpec-v0", TASKS)
    config = tmp_path / "grpo.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "algo": "grpo",
                "model": tiny_dir,
                "env_id": "agents-test/FamiliesSpec-v0",
                "output_dir": str(tmp_path / "run"),
                "total_steps": 2,
                # 3 groups of 4 over 2 processes: group 1's episodes are on both.
                "prompts_per_step": 3,
                "group_size": 4,
                "max_new_tokens": 6,
                "learning_rate": 1e-2,
                "beta": 0.1,
                "torch_threads": 1,
                "tensorboard": False,
                "progress": False,
            }
        )
    )
    proc = launch_two_processes("llmgym.agents.grpo", config, spec)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(tmp_path / "run")
    assert [r["charts/processes"] for r in records] == [2.0, 2.0]
    for r in records:  # the main process logs sums of both processes' rows
        for metric in ("kl", "entropy"):
            assert_identity(r, metric, 2)
