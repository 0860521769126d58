"""The data closed loop: rollout files (JSONL, Parquet), reverification and drift, SFT export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from eval_envs import ADD_ID, GUESS_ID, add_policy, bisect_policy

import llmgym
from llmgym import error
from llmgym.evaluation import evaluate
from llmgym.evaluation.cli import main
from llmgym.evaluation.rollouts import (
    JsonlAppender,
    dumps_line,
    export_sft,
    load_jsonl,
    read_rollouts,
    reverify,
    write_rollouts,
)

DRIFT_ID = "evaltest/Drift-v0"
DRIFT_TASKS = [
    {"id": f"d{i}", "prompt": f"Write {i} as a decimal.", "answer": str(i)} for i in range(6)
]


def _eval(out: Path, envs: Any, policy: Any, **kwargs: Any) -> Any:
    return evaluate(envs, policy, out=out, report=False, progress=False, **kwargs)


# --- files -------------------------------------------------------------------------------------


def test_dumps_line_survives_hostile_content() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    record = {
        "nan": float("nan"),
        "inf": [float("inf")],
        "s": "\ud800\x00é",
        "o": Odd(),
        "n": {"x": -0.0},
    }
    line = dumps_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = json.loads(line)
    assert back["nan"] is None and back["inf"] == [None] and back["o"] == "<odd>"
    assert back["s"] == "\ud800\x00é"


def test_load_jsonl_repairs_a_torn_tail_and_drops_junk(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with JsonlAppender(path) as w:
        for i in range(3):
            w.write({"key": f"k{i}", "i": i})
    with path.open("ab") as f:
        f.write(b'not json\n{"key": "k1", "i": 99}\n[1, 2]\n{"key": "k3", "i"')
    with pytest.warns(UserWarning, match="not a JSON object"):
        records = load_jsonl(path, key="key", repair=True)
    assert records == [{"key": f"k{i}", "i": i} for i in range(3)]  # duplicate key k1 dropped
    assert load_jsonl(path) == records  # the file itself was repaired
    assert path.read_bytes().endswith(b"\n")
    assert load_jsonl(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_rollouts_round_trip(tmp_path: Path, suffix: str) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    records = [
        {"key": "a", "reward": 1, "success": True, "messages": [{"role": "user", "content": "hi"}],
         "components": {"c": 0.5}, "exec": None, "difficulty": 0.25, "task": {"id": "x", "answer": [1, "2"]}},
        {"key": "b", "reward": 0.5, "success": False, "messages": [], "components": {},
         "exec": [{"status": "timeout"}], "difficulty": None, "extra": "only here"},
    ]  # fmt: skip
    path = write_rollouts(records, tmp_path / f"rollouts{suffix}")
    back = read_rollouts(path)
    for want, got in zip(records, back, strict=True):
        for k, v in want.items():
            assert got[k] == v, k
    assert back[0]["reward"] == 1.0 and back[1]["extra"] == "only here"
    assert read_rollouts(tmp_path) == back  # found by name in the folder


def test_read_rollouts_finds_shards_and_says_when_there_are_none(tmp_path: Path) -> None:
    (tmp_path / "rollouts").mkdir()
    write_rollouts([{"key": "1"}], tmp_path / "rollouts-000.jsonl")
    write_rollouts([{"key": "2"}], tmp_path / "rollouts" / "part-1.jsonl")
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')  # a training log is not a rollout
    assert sorted(r["key"] for r in read_rollouts(tmp_path)) == ["1", "2"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(error.Error, match="holds no rollouts"):
        read_rollouts(empty)
    with pytest.raises(error.Error, match="No such rollout"):
        read_rollouts(tmp_path / "nope")


def test_parquet_rollouts_from_an_eval_run(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    _eval(tmp_path / "run", ADD_ID, add_policy, rollouts_format="parquet")
    parquet = read_rollouts(tmp_path / "run" / "rollouts.parquet")
    jsonl = read_rollouts(tmp_path / "run" / "results.jsonl")
    assert parquet == jsonl


# --- reverify -------------------------------------------------------------------------------------


def test_reverify_finds_no_drift_when_nothing_changed(tmp_path: Path) -> None:
    _eval(tmp_path / "a", [ADD_ID, GUESS_ID], _mixed, episodes=6, samples=2)
    rep = reverify(tmp_path / "a", progress=False)
    d = rep.to_dict()
    assert not rep.drift, rep.to_text()
    assert d["overall"]["checked"] == 24 and d["overall"]["changed"] == 0
    assert d["overall"]["transcript_diverged"] == 0
    assert d["by_env"][ADD_ID]["mean_reward_before"] == d["by_env"][ADD_ID]["mean_reward_after"]
    assert "no drift" in rep.to_text()


def _mixed(messages: Any, tools: Any) -> str:
    return (
        bisect_policy(messages, tools)
        if "Guess" in messages[0]["content"]
        else add_policy(messages, tools)
    )


def test_reverify_reports_drift_when_a_verifier_changes(tmp_path: Path) -> None:
    llmgym.register_task_env(DRIFT_ID, tasks=DRIFT_TASKS, verifier="exact", overwrite=True)
    _eval(tmp_path / "a", DRIFT_ID, lambda m, t: m[-1]["content"].split()[1] + ".0")  # "3.0" for 3
    assert reverify(tmp_path / "a", progress=False).drift is False
    llmgym.register_task_env(DRIFT_ID, tasks=DRIFT_TASKS, verifier="numeric", overwrite=True)
    try:
        rep = reverify(tmp_path / "a", progress=False)
        d = rep.to_dict()
        assert rep.drift
        assert d["overall"]["changed"] == 6 and d["overall"]["became_success"] == 6
        assert (
            d["overall"]["mean_reward_before"] == 0.0 and d["overall"]["mean_reward_after"] == 1.0
        )
        assert len(d["changed_examples"]) == 6
        assert "drift found" in rep.to_text()
        assert (
            main(
                [
                    "reverify",
                    str(tmp_path / "a"),
                    "--no-progress",
                    "--json",
                    str(tmp_path / "d.json"),
                ]
            )
            == 1
        )
        assert json.loads((tmp_path / "d.json").read_text())["overall"]["changed"] == 6
        llmgym.register_task_env(DRIFT_ID, tasks=DRIFT_TASKS, verifier="exact", overwrite=True)
        assert main(["reverify", str(tmp_path / "a"), "--no-progress"]) == 0
    finally:
        gym.registry.pop(DRIFT_ID, None)


def test_reverify_rebuilds_unstored_tasks_and_checks_their_hash(tmp_path: Path) -> None:
    result = _eval(tmp_path / "a", GUESS_ID, bisect_policy, episodes=3)
    records = [dict(r, task=None) for r in result.records]
    assert not reverify(records, progress=False).drift  # rebuilt from the task id
    records[0]["task_hash"] = "0" * 16
    rep = reverify(records, progress=False)
    assert rep.drift and "differs from the stored one" in (rep.replays[0].error or "")


def test_reverify_skips_or_reports_what_it_cannot_replay(tmp_path: Path) -> None:
    result = _eval(tmp_path / "a", ADD_ID, "oracle", episodes=2)
    good = result.records[0]
    records: list[Any] = [
        {"no": "env"},
        dict(good, status="env_error"),
        dict(good, env_id="gone/Missing-v0"),
        dict(good, messages=[{"role": "assistant", "content": {"bad": "shape"}}]),
        "not even a dict",
        good,
    ]
    rep = reverify(records, progress=False)
    assert rep.skipped == {"malformed": 2, "env_error": 1}
    errors = [r.error for r in rep.replays if r.error]
    assert len(errors) == 2 and any("cannot make gone/Missing-v0" in e for e in errors)
    assert rep.drift  # a replay that fails is drift, not silence
    assert len(rep.checked) == 1


# --- export -------------------------------------------------------------------------------------


def test_export_keeps_high_reward_rollouts_as_chat_sft_data(tmp_path: Path) -> None:
    result = _eval(tmp_path / "a", [ADD_ID, GUESS_ID], _guess_or_flaky_add, episodes=6, samples=2)
    errored = {r["task_id"] for r in result.records if r["status"] == "policy_error"}
    assert errored  # some tasks only ever fail with a policy error
    out = tmp_path / "sft.jsonl"
    n = export_sft(tmp_path / "a", out)
    rows = load_jsonl(out)
    assert n == len(rows) > 0
    for row in rows:
        assert row["metadata"]["success"] is True
        assert row["messages"][-1]["role"] == "assistant"
        assert row["messages"][0]["role"] == "user"
    guess = [r for r in rows if r["metadata"]["env"] == GUESS_ID]
    assert guess and all(len(r["messages"]) >= 2 for r in guess)
    # every successful sample of a deterministic policy is the same transcript: written once
    assert len(rows) == len({json.dumps(r["messages"]) for r in rows})
    assert len(rows) == len({(r["metadata"]["env"], r["metadata"]["task_id"]) for r in rows})

    n_all = export_sft(tmp_path / "a", tmp_path / "all.jsonl", success_only=False)
    assert n_all > n
    assert all(r["metadata"].get("key") for r in load_jsonl(tmp_path / "all.jsonl"))
    n_min = export_sft(tmp_path / "a", tmp_path / "min.jsonl", success_only=False, min_reward=0.5)
    assert n_min == n
    assert export_sft(tmp_path / "a", tmp_path / "none.jsonl", min_reward=2.0) == 0
    best = export_sft(
        tmp_path / "a", tmp_path / "best.jsonl", success_only=False, best_per_task=True
    )
    assert best == 12 - len(errored)  # one per task (6 add + 6 guess) that ran without error


def _guess_or_flaky_add(messages: Any, tools: Any) -> str:
    if "Guess" in messages[0]["content"]:
        return bisect_policy(messages, tools)
    if "+ 2?" in messages[-1]["content"]:
        raise RuntimeError("policy error: never exported")
    return add_policy(messages, tools)


def test_export_skips_policy_errors_and_writes_parquet(tmp_path: Path) -> None:
    result = _eval(tmp_path / "a", ADD_ID, lambda m, t: 1 / 0)
    assert all(r["status"] == "policy_error" for r in result.records)
    assert export_sft(tmp_path / "a", tmp_path / "x.jsonl", success_only=False) == 0
    pytest.importorskip("pyarrow")
    _eval(tmp_path / "b", ADD_ID, "oracle")
    assert export_sft(tmp_path / "b", tmp_path / "x.parquet") == 12
    assert len(read_rollouts(tmp_path / "x.parquet")) == 12


def test_export_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _eval(tmp_path / "a", ADD_ID, add_policy)
    assert main(["export-rollouts", str(tmp_path / "a"), "-o", str(tmp_path / "s.jsonl")]) == 0
    assert "wrote 6 examples" in capsys.readouterr().out
    assert (
        main(["export-rollouts", str(tmp_path / "missing"), "-o", str(tmp_path / "s.jsonl")]) == 2
    )
