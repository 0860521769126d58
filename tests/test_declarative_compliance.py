"""The example enterprise spec (configs/enterprise/spec.yaml) loaded and run, attacked first: a
dangerous call behind passing tests, suppressed lint, a leaked card number, a reply that only
lists the step names; then the contract check, a TOML spec, and bad specs failing at load."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.declarative import load_spec

SPEC = Path(__file__).resolve().parents[1] / "configs" / "enterprise" / "spec.yaml"
CODE, REFUNDS = "acme/CodeStandards-v0", "acme/Refunds-v0"


@pytest.fixture(scope="module")
def ids():
    registered = load_spec(SPEC, overwrite=True)
    yield registered
    for env_id in registered:
        gym.registry.pop(env_id, None)


def play(env_id: str, task_id: str, answer: str) -> tuple[float, dict]:
    env = gym.make(env_id)
    env.reset(options={"task_id": task_id})
    _, reward, _, _, info = env.step(answer)
    env.close()
    return float(reward), info


def oracle(env_id: str, task_id: str) -> str:
    env = gym.make(env_id)
    env.reset(options={"task_id": task_id})
    return str(env.unwrapped.oracle_action())


# --- attacks ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_dangerous_call_behind_passing_tests_zeroes_the_reward(ids):
    sneaky = oracle(CODE, "median").replace(
        "    ordered = sorted(values)", '    ordered = sorted(eval("values"))'
    )
    reward, info = play(CODE, "median", sneaky)
    assert reward == 0.0 and info["reward_components"]["effectiveness"] == 1.0
    assert "safety" in info["feedback"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_suppressing_the_linter_does_not_raise_compliance(ids):
    sloppy = "```python\ndef median(values):\n    v=sorted(values)\n    return v[len(v)//2]\n```"
    _, plain = play(CODE, "median", sloppy)
    _, hidden = play(CODE, "median", sloppy.replace("```python\n", "```python\n# ruff: noqa\n"))
    assert (
        hidden["reward_components"]["compliance"] <= plain["reward_components"]["compliance"] < 0.5
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_style_and_safety_pay_nothing_for_code_that_does_not_work(ids):
    stub = '```python\ndef median(values: list[float]) -> float:\n    """Return 0."""\n    return 0.0\n```'
    reward, info = play(CODE, "median", stub)
    assert info["reward_components"]["compliance"] == 0.0 and reward < 0.5
    assert play(CODE, "median", "")[0] == 0.0


def test_leaking_a_card_number_zeroes_a_perfect_reply(ids):
    good = oracle(REFUNDS, "r1")
    reward, _ = play(REFUNDS, "r1", good)
    assert reward == pytest.approx(1.5)
    leaked = good.replace("original payment method", "card 4111 1111 1111 1111")
    reward, info = play(REFUNDS, "r1", leaked)
    assert reward == 0.0 and "4111" not in info["feedback"] and "credit_card" in info["feedback"]


def test_listing_the_step_names_earns_no_effectiveness(ids):
    names = "Verify identity, check eligibility, issue refund, confirm.\nRef: RF-104233"
    reward, info = play(REFUNDS, "r1", names)
    assert info["reward_components"]["effectiveness"] == 0.0 and not info["is_success"]
    assert reward <= 0.5


def test_the_reward_matrix_is_reported_per_component(ids):
    reply = oracle(REFUNDS, "r2").replace("Ref: RF-104871", "Thanks!")
    reward, info = play(REFUNDS, "r2", reply)
    assert info["reward_components"] == {"effectiveness": 1.0, "compliance": 0.0, "safety": 0.25}
    assert reward == pytest.approx(1.25) and not info["is_success"]


# --- the contract, other formats, bad specs -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_both_example_envs_pass_the_contract_check(ids):
    assert ids == [CODE, REFUNDS]
    for env_id in ids:
        llmgym.check_env(gym.make(env_id).unwrapped, exhaustive=True)


def test_a_toml_spec_with_format_and_safety_verifiers(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(
        '{"id": "a", "prompt": "Return the user as JSON.", "metadata": {"reference": "{\\"id\\": 1}"}}\n'
    )
    (tmp_path / "spec.toml").write_text(
        'id = "acme/Json-v0"\ntasks = "tasks.jsonl"\nanswer_required = false\n'
        '[[verifier]]\nverifier = "format_json"\nname = "compliance"\n'
        'options = {schema = {type = "object", required = ["id"]}}\n'
        '[[verifier]]\nverifier = "safety"\nname = "safety"\ngate = true\n'
    )
    try:
        (env_id,) = load_spec(tmp_path / "spec.toml", overwrite=True)
        assert play(env_id, "a", '{"id": 1}')[0] == 2.0
        assert play(env_id, "a", '{"id": 1, "email": "a@b.example"}')[0] == 0.0
        assert play(env_id, "a", "not json")[0] == 1.0
    finally:
        gym.registry.pop("acme/Json-v0", None)


@pytest.mark.parametrize(
    "verifier,match",
    [
        ('{verifier: format_regex, options: {pattern: "(unclosed"}}', "compile"),
        ("{verifier: process_steps, options: {steps: []}}", "steps"),
        ("{verifier: safety, options: {pii: [dna]}}", "PII"),
        ('{verifier: ruff, options: {select: ["NOPE1"]}}', "ruff"),
        ("{verifier: safety, gate: maybe}", "gate"),
        ("{verifier: safety, requires: saftey}", "requires"),
    ],
)
def test_a_bad_compliance_spec_fails_at_load_saying_what(tmp_path, verifier, match):
    (tmp_path / "t.jsonl").write_text('{"id": "a", "prompt": "p"}\n')
    (tmp_path / "spec.yaml").write_text(
        f"id: acme/Bad-v0\ntasks: t.jsonl\nanswer_required: false\nverifier: [{verifier}]\n"
    )
    with pytest.raises(error.InvalidSpec, match=match):
        load_spec(tmp_path / "spec.yaml", overwrite=True)
    assert "acme/Bad-v0" not in gym.registry
