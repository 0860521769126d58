"""PPO feeds the live monitor as GRPO does: malformed ``alerts:`` and hostile family names
first, then real tiny PPO runs whose per-family and per-domain KL and entropy (per token,
token-weighted) reproduce the run-wide ``kl`` and ``entropy``, an injected reward collapse that
stops the run with a checkpoint that resumes, an injected anomaly burst that saves one, and two
processes that reduce the family sums with the totals and stop at the same step."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents_common import assert_identity, launch_two_processes, write_length_spec

import llmgym
from llmgym.agents.config import ConfigError
from llmgym.agents.ppo import PPOConfig, PPOTrainer
from llmgym.agents.runlog import read_metrics
from llmgym.evaluation.dashboard import dashboard_html
from llmgym.evaluation.monitor import read_alerts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "monitor"))
from monitor_envs import GRADED, PHASE_ENV, PhaseEnv  # noqa: E402 - the monitor tests' env

ENV = "agents-test/PPOFamilies-v0"
HOSTILE_FAMILY = "../<img src=x onerror=alert(1)>/" + "z" * 300
TASKS = [
    {
        "id": f"t{i}",
        "prompt": f"Write a long line ({i}).",
        "answer": "0",
        "domain": ("left", "right/../../etc")[i % 2],
        "family": ("alpha", "beta", HOSTILE_FAMILY)[i % 3],
    }
    for i in range(36)
]
"""Six (domain, family) pairs, two of them named by a hostile dataset, one dense reward."""

RULES = [
    {"rule": "reward_collapse", "drop": 0.5, "episodes": 16, "action": "stop"},
    {"rule": "anomaly_above", "bound": 0.5, "episodes": 8, "action": "checkpoint"},
]


@pytest.fixture(autouse=True)
def test_envs() -> Iterator[None]:
    """The families env and the phase env, for one test (registry-wide tests must not see them)."""
    import gymnasium as gym

    GRADED["episodes"] = 0
    llmgym.register_task_env(
        ENV, tasks=TASKS, verifier="agents_testing_verifiers:length_reward", domain="length"
    )
    llmgym.register(PHASE_ENV, PhaseEnv)
    try:
        yield
    finally:
        del gym.registry[ENV], gym.registry[PHASE_ENV]


def _cfg(tiny_dir: str, out: Path, **kw: Any) -> PPOConfig:
    base: dict[str, Any] = {
        "model": tiny_dir,
        "env_id": PHASE_ENV,
        "output_dir": str(out),
        "total_steps": 8,
        "episodes_per_step": 8,
        "mini_batches": 2,
        "ppo_epochs": 1,
        "max_new_tokens": 4,
        "kl_coef": 0.0,
        "progress": False,
        "tensorboard": False,
        "alerts": RULES,
    }
    return PPOConfig(**{**base, **kw})


def _train(cfg: PPOConfig) -> PPOTrainer:
    trainer = PPOTrainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer


# --- the config: malformed rules are refused before anything loads ------------------------------


@pytest.mark.parametrize(
    ("alerts", "says"),
    [
        ([{"rule": "reward_collapse", "action": "stop"}], "needs drop"),
        ([{"rule": "kl_above", "drop": 0.5}], "takes bound, not drop"),
        ([{"rule": "kl_above", "bound": True}], "needs bound"),
        ([{"rule": "anomaly_above", "bound": 3}], r"in \[0, 1\]"),
        ([{"rule": "nan_above", "bound": 1}], "must be one of"),
        ([{"rule": "kl_above", "bound": 0.1, "action": "rm -rf"}], "action must be one of"),
        ([{"rule": "kl_above", "bound": 0.1, "shell": "x"}], r"no field\(s\) \['shell'\]"),
        ([{"rule": "forgetting", "points": 5, "scope": "all"}], "scope must be one of"),
        ("reward_collapse", "must be a list of rules"),
        ({"rule": "kl_above", "bound": 0.1}, "must be a list of rules"),
        (["kl_above"], "is a mapping"),
    ],
)
def test_malformed_alerts_are_a_config_error(tiny_dir: str, alerts: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=f"alerts: .*{says}"):
        _cfg(tiny_dir, Path("unused"), alerts=alerts)


def test_alerts_come_from_the_yaml_config_as_in_grpo(tiny_dir: str, tmp_path: Path) -> None:
    config = tmp_path / "ppo.yaml"
    config.write_text(f"model: {tiny_dir}\nalerts:\n  - {{rule: kl_above, bound: 0.2}}\n")
    assert PPOConfig.load(config).alerts == [{"rule": "kl_above", "bound": 0.2}]
    config.write_text("alerts:\n  - {rule: kl_above, bound: -1}\n")
    with pytest.raises(ConfigError, match="alerts: .*needs bound"):
        PPOConfig.load(config)


# --- the per-family identity, in real runs ---------------------------------------------------------


@pytest.mark.timeout(300)
def test_reference_kl_per_token_and_entropy_per_family_reproduce_the_run_wide_figures(
    tiny_dir: str, tmp_path: Path
) -> None:
    alerts = [{"rule": "kl_above", "bound": 0.0, "window": 1, "scope": "family"}]
    cfg = _cfg(
        tiny_dir, tmp_path, env_id=ENV, total_steps=2, episodes_per_step=12, ppo_epochs=2,
        kl_coef=0.1, learning_rate=1e-2, max_new_tokens=6, alerts=alerts,
    )  # fmt: skip
    _train(cfg)
    records = read_metrics(tmp_path)
    assert records[-1]["kl"] > 0  # the policy moved away from the reference
    for r in records:
        for metric in ("kl", "entropy"):
            assert_identity(r, metric, 1)
            assert_identity(r, metric, 2)
        # One KL, two units: per token (logged, judged) and per episode (the controller's).
        total = r["charts/episode_kl"] * r["overall/episodes"]
        assert r["kl"] * r["charts/trained_tokens"] == pytest.approx(total, rel=1e-5)
        # Names the dataset chose reach the keys only cleaned: no path, no markup, bounded.
        scoped = [k for k in r if k.startswith(("overall/", "domain/", "family/"))]
        assert all(k.count("/") == {"o": 1, "d": 2, "f": 3}[k[0]] for k in scoped)
        assert all("<" not in k and len(k) < 160 and ".." not in k.split("/") for k in scoped)
    fired = read_alerts(tmp_path)  # every family that drifted, at the step it did
    assert fired and {a["rule"] for a in fired} == {"kl_above"}
    for a in fired:
        assert records[a["step"] - 1][f"{a['key']}/kl"] == pytest.approx(a["value"])
    html = dashboard_html(tmp_path, refresh_s=None)  # the dashboard draws PPO's runs alike
    assert "<th>KL</th><th>entropy</th>" in html and 'aria-label="kl"' in html
    assert "<img" not in html


@pytest.mark.timeout(300)
def test_without_a_reference_the_update_kl_over_several_epochs_is_split_by_family(
    tiny_dir: str, tmp_path: Path
) -> None:
    cfg = _cfg(
        tiny_dir, tmp_path, env_id=ENV, total_steps=1, episodes_per_step=12, ppo_epochs=3,
        learning_rate=1e-2, max_new_tokens=6, alerts=[],
    )  # fmt: skip
    trainer = _train(cfg)
    assert trainer.ref is None
    (record,) = read_metrics(tmp_path)
    assert record["kl"] == record["charts/approx_kl"] > 0 and "charts/episode_kl" not in record
    for metric in ("kl", "entropy"):
        assert_identity(record, metric, 2)


# --- alerts act on the run ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_an_injected_collapse_stops_the_run_with_a_checkpoint_that_resumes(
    tiny_dir: str, tmp_path: Path
) -> None:
    # Each step grades 8 episodes: rewards fall to 0 from step 4 on.
    trainer = _train(_cfg(tiny_dir, tmp_path, env_kwargs={"collapse_after": 24}))
    (alert,) = read_alerts(tmp_path)
    assert alert["rule"] == "reward_collapse" and alert["action"] == "stop"
    assert alert["key"] == "overall" and alert["value"] < 0.5
    stopped = trainer.step
    assert stopped == alert["step"] < 8  # stopped early, where the alert fired
    assert (tmp_path / "checkpoints" / f"step-{stopped:07d}").is_dir()
    assert (tmp_path / "final").is_dir()
    records = read_metrics(tmp_path)
    assert records[-1]["step"] == stopped and records[-1]["alerts/fired"] == 1
    saved = trainer.monitor.state_dict()

    resumed = PPOTrainer(_cfg(tiny_dir, tmp_path, total_steps=stopped + 1, resume=True))
    try:
        assert resumed.step == stopped and resumed.monitor.state_dict() == saved
        resumed.train()  # the collapse is still active: it does not fire again
    finally:
        resumed.close()
    assert resumed.step == stopped + 1 and len(read_alerts(tmp_path)) == 1
    assert [r["step"] for r in read_metrics(tmp_path)] == list(range(1, stopped + 2))


@pytest.mark.timeout(300)
def test_an_injected_anomaly_burst_saves_a_checkpoint(tiny_dir: str, tmp_path: Path) -> None:
    trainer = _train(
        _cfg(tiny_dir, tmp_path, total_steps=6, keep_checkpoints=6, env_kwargs={"burst_after": 24})
    )
    (alert,) = read_alerts(tmp_path)  # fired once, while the burst lasts
    assert alert["rule"] == "anomaly_above" and alert["key"] == "overall"
    assert alert["action"] == "checkpoint" and alert["value"] > 0.5
    assert trainer.step == 6  # checkpoint, not stop
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert saved == [f"step-{alert['step']:07d}", "step-0000006"]
    state = json.loads((tmp_path / "checkpoints" / saved[0] / "trainer_state.json").read_text())
    assert state["step"] == alert["step"]
    last = read_metrics(tmp_path)[-1]
    assert last["domain/phase/anomaly"] == 1.0 and "family/phase/steady/anomaly" in last


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_processes_reduce_the_family_sums_and_stop_together(
    tiny_dir: str, tmp_path: Path
) -> None:
    spec = write_length_spec(tmp_path, "agents-test/PPOFamiliesSpec-v0", TASKS)
    config = tmp_path / "ppo.yaml"
    base = _cfg(
        tiny_dir, tmp_path / "run", env_id="agents-test/PPOFamiliesSpec-v0", total_steps=4,
        episodes_per_step=12, ppo_epochs=2, kl_coef=0.1, learning_rate=1e-2, max_new_tokens=6,
        torch_threads=1, alerts=[{"rule": "kl_above", "bound": 0.0, "window": 1, "action": "stop"}],
    )  # fmt: skip
    config.write_text(yaml.safe_dump({"algo": "ppo", **base.to_dict()}))
    proc = launch_two_processes("llmgym.agents.ppo", config, spec)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(tmp_path / "run")
    # Step 1 samples from the reference itself (KL 0); the policy has moved by step 2: both
    # processes see the same reduced KL, stop there and save (a hang would time out).
    (alert,) = read_alerts(tmp_path / "run")
    assert alert["step"] == 2 and [r["step"] for r in records] == [1, 2]
    assert (tmp_path / "run" / "checkpoints" / "step-0000002").is_dir()
    for r in records:
        assert r["charts/processes"] == 2.0 and r["overall/episodes"] == 12
        for metric in ("kl", "entropy"):
            assert_identity(r, metric, 2)
