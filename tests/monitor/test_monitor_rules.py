"""The monitor's metrics and alert rules: hostile names and values first, then a quiet run that
fires nothing, an injected collapse, an anomaly burst, forgetting, KL, and checkpointed state."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from llmgym import error
from llmgym.evaluation.monitor import (
    MAX_FAMILIES,
    AlertRule,
    Episode,
    Monitor,
    load_rules,
    parse_rules,
)


def ep(family: str = "f", *, reward: float = 1.0, success: bool = True, difficulty: float = 0.0,
       anomalous: bool = False, domain: str = "d") -> Episode:  # fmt: skip
    return Episode(domain, family, difficulty, reward, success, 10, True, anomalous)


# --- hostile input -------------------------------------------------------------------------------


def test_hostile_names_cannot_forge_keys_or_markup() -> None:
    record = {
        "domain": "math/../family/x",
        "family": "<script>alert(1)</script>" + "z" * 500,
        "reward": float("nan"),
        "success": "yes",  # a truthy string is not a success
        "completion_tokens": True,
        "difficulty": "hard",
        "exec": [{"status": "ok"}, "garbage", {"status": 7}],
    }
    e = Episode.from_record(record)
    assert e.reward == 0.0 and e.success is False and e.length == 0 and e.difficulty == 0.0
    metrics, _ = Monitor().observe(1, [e])
    family_keys = [k for k in metrics if k.startswith("family/")]
    assert family_keys and all(k.count("/") == 3 for k in family_keys)  # no forged scope
    assert all("<" not in k and len(k) < 160 for k in metrics)


def test_a_family_per_episode_cannot_grow_the_keys_without_bound() -> None:
    m = Monitor([AlertRule("forgetting", points=10)])
    for step in range(3):
        m.observe(step, [ep(f"fam{step}-{i}") for i in range(MAX_FAMILIES)])
    metrics, _ = m.observe(9, [ep(f"new{i}") for i in range(50)])
    assert {k for k in metrics if k.startswith("family/")} == {
        f"family/d/_other/{s}" for s in ("reward", "success", "length", "episodes", "anomaly")
    }
    assert len(json.dumps(m.state_dict())) < 5_000_000


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        ({"rule": "explode"}, "must be one of"),
        ({"rule": "kl_above"}, "needs bound"),
        ({"rule": "kl_above", "bound": 0.1, "points": 3}, "takes bound, not points"),
        ({"rule": "forgetting", "points": -1}, "needs points"),
        ({"rule": "forgetting", "points": True}, "needs points"),
        ({"rule": "anomaly_above", "bound": 2}, r"in \[0, 1\]"),
        ({"rule": "kl_above", "bound": 0.1, "action": "reboot"}, "action must be"),
        ({"rule": "kl_above", "bound": 0.1, "window": True}, "window must be"),
        ({"rule": "forgetting", "points": 5, "episodes": 0}, "episodes must be"),
        ({"rule": "kl_above", "bound": 0.1, "scope": "galaxy"}, "scope must be"),
        ({"rule": "kl_above", "bound": 0.1, "colour": "red"}, "no field"),
        ({"bound": 0.1}, "needs 'rule'"),
        ("kl_above", "is a mapping"),
    ],
)
def test_malformed_rules_are_rejected_with_a_fix(rule: object, match: str) -> None:
    with pytest.raises(error.Error, match=match):
        parse_rules([rule])


def test_rules_must_be_a_list(tmp_path: object) -> None:
    with pytest.raises(error.Error, match="list of rules"):
        parse_rules({"rule": "kl_above", "bound": 1})
    path = tmp_path / "alerts.yaml"  # type: ignore[operator]
    path.write_text("alerts:\n  - {rule: forgetting, points: 5, action: stop}\n")
    (rule,) = load_rules(path)
    assert (rule.rule, rule.points, rule.action, rule.scope) == ("forgetting", 5, "stop", "family")


# --- the rules --------------------------------------------------------------------------------------

RULES = [
    AlertRule("reward_collapse", drop=0.3, episodes=96, action="stop"),
    AlertRule("anomaly_above", bound=0.25, episodes=64, action="checkpoint"),
    AlertRule("forgetting", points=15),
    AlertRule("kl_above", bound=0.5, window=2),
]


def noisy_step(rng: random.Random, n: int = 32, *, p: float = 0.8) -> list[Episode]:
    return [
        ep(
            rng.choice(["a", "b"]),
            success=(ok := rng.random() < p),
            reward=float(ok),
            anomalous=rng.random() < 0.05,
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("seed", range(5))
def test_a_quiet_run_fires_nothing(seed: int) -> None:
    rng = random.Random(seed)
    m = Monitor(RULES)
    for step in range(1, 301):
        _, alerts = m.observe(step, noisy_step(rng), {"kl": 0.05 + 0.02 * rng.random()})
        assert alerts == [], alerts


def test_an_injected_collapse_fires_once_and_rearms_after_recovery() -> None:
    rng = random.Random(1)
    m = Monitor(RULES)
    fired = []
    for step in range(1, 41):
        p = 0.0 if 15 <= step < 25 else 0.8  # the policy collapses for ten steps
        _, alerts = m.observe(step, noisy_step(rng, p=p), {"kl": 0.05})
        fired += [(step, a.rule, a.key, a.action) for a in alerts if a.rule == "reward_collapse"]
    assert fired[0][1:] == ("reward_collapse", "overall", "stop") and 15 <= fired[0][0] <= 17
    assert len(fired) == 1  # edge-triggered: not once per step while it lasts
    for step in range(41, 80):  # collapse again after recovery: it fires again
        _, alerts = m.observe(step, noisy_step(rng, p=0.8 if step < 60 else 0.0), {"kl": 0.05})
        fired += [(step, a.rule) for a in alerts if a.rule == "reward_collapse"]
    assert len(fired) == 2 and fired[1][0] >= 60


def test_an_injected_anomaly_burst_fires_its_alert() -> None:
    rng = random.Random(2)
    m = Monitor(RULES)
    fired = []
    for step in range(1, 30):
        episodes = noisy_step(rng)
        if 10 <= step < 13:  # the sandbox starts killing runs: timeouts and memory kills
            episodes = [replace(e, anomalous=rng.random() < 0.6) for e in episodes]
        _, alerts = m.observe(step, episodes, {"kl": 0.05})
        fired += [(step, a) for a in alerts]
    assert [(s, a.rule, a.action) for s, a in fired] == [(10, "anomaly_above", "checkpoint")]
    assert fired[0][1].value > 0.25 and "sandbox anomalies" in fired[0][1].message


def test_anomalies_are_counted_from_real_exec_facts() -> None:
    records = [
        {"domain": "coding", "family": "f", "exec": [{"status": "passed"}]},
        {"domain": "coding", "family": "f", "exec": {"status": "timeout"}},
        {"domain": "coding", "family": "f", "exec": [{"status": "runtime_error", "signal": 11}]},
        {"domain": "coding", "family": "f", "exec": [{"status": "runtime_error"}]},  # a raise
        {"domain": "coding", "family": "f", "exec": [{"status": "sandbox_error"}]},
        {"domain": "math", "family": "g"},  # ran no code: not in the rate
    ]
    metrics, _ = Monitor().observe(1, [Episode.from_record(r) for r in records])
    assert metrics["domain/coding/anomaly"] == pytest.approx(3 / 5)
    assert metrics["overall/anomaly"] == pytest.approx(3 / 5)
    assert "domain/math/anomaly" not in metrics and metrics["domain/math/episodes"] == 1


def test_forgetting_fires_per_family_but_not_when_the_curriculum_raises_difficulty() -> None:
    rule = AlertRule("forgetting", points=15, episodes=16)
    m = Monitor([rule])
    fired = []
    for step in range(1, 21):
        harder = step >= 8  # family b moves to difficulty 0.5, where it starts over
        b = [ep("b", difficulty=0.5 if harder else 0.0, success=not harder or step > 14)] * 8
        a = [ep("a", success=step < 12)] * 8  # family a forgets at step 12
        _, alerts = m.observe(step, a + b)
        fired += [(step, x.key) for x in alerts]
    assert fired == [(12, "family/d/a@0.00")]


def test_kl_above_its_bound() -> None:
    m = Monitor([AlertRule("kl_above", bound=0.5, window=2)])
    kls = [0.1, 0.2, 0.9, 0.9, 0.9, 0.1, 0.1]
    fired = [s for s, kl in enumerate(kls) if m.observe(s, [], {"kl": kl})[1]]
    assert fired == [2]  # (0.2 + 0.9) / 2 > 0.5
    assert m.observe(98, [], {})[1] == []  # no KL logged: nothing to judge
    assert m.observe(99, [], {"kl": "n/a"})[1] == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_diverged_kl_fires(bad: float) -> None:
    m = Monitor([AlertRule("kl_above", bound=0.5, window=1)])
    assert m.observe(1, [], {"kl": 0.1})[1] == []
    (alert,) = m.observe(2, [], {"kl": bad})[1]
    assert alert.rule == "kl_above" and alert.key == "kl" and "inf" in alert.message


def test_state_round_trips_so_a_resumed_monitor_fires_as_an_uninterrupted_one() -> None:
    def run(split: int | None) -> list[tuple[int, str, str]]:
        rng = random.Random(3)
        m = Monitor(RULES)
        out = []
        for step in range(1, 40):
            if step == split:
                state = json.loads(json.dumps(m.state_dict()))  # through a checkpoint file
                m = Monitor(RULES)
                m.load_state_dict(state)
            p = 0.1 if 20 <= step < 26 else 0.8
            _, alerts = m.observe(step, noisy_step(rng, p=p), {"kl": 0.9 if step == 30 else 0.1})
            out += [(step, a.rule, a.key) for a in alerts]
        return out

    straight = run(None)
    assert straight and run(22) == straight and run(5) == straight
    other = Monitor([AlertRule("kl_above", bound=1.0)])
    with pytest.raises(error.Error, match="alert rules differ"):
        other.load_state_dict(Monitor(RULES).state_dict())
