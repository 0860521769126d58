"""The evaluation runner: episodes, batching, hostile policies and envs, outputs, resume, suites."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from eval_envs import ADD_ID, ADD_TASKS, FLAKY_ID, GUESS_ID, add_policy, bisect_policy

import llmgym
from llmgym import error
from llmgym.agents.policies import Policy, Request, Response
from llmgym.evaluation import EnvEntry, evaluate, load_suite
from llmgym.evaluation.rollouts import load_jsonl
from llmgym.evaluation.suites import parse_suite

TIMING = ("wall_time_s", "policy_time_s")


def _strip(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def _run(out: Path, envs: Any = ADD_ID, policy: Any = "oracle", **kwargs: Any) -> Any:
    kwargs.setdefault("report", False)
    kwargs.setdefault("progress", False)
    return evaluate(envs, policy, out=out, **kwargs)


# --- what a run writes ------------------------------------------------------------------------


def test_oracle_run_writes_results_summary_and_provenance(out: Path) -> None:
    result = _run(out, samples=2, k=[1, 2])
    assert result.summary["overall"]["success_rate"] == 1.0
    assert result.summary["overall"]["episodes"] == 2 * len(ADD_TASKS)  # a dataset env: all tasks
    lines = load_jsonl(out / "results.jsonl")
    assert [r["key"] for r in lines] == [r["key"] for r in result.records]
    assert len({r["key"] for r in lines}) == len(lines)
    first = lines[0]
    for field in (
        "task_id",
        "messages",
        "reward",
        "components",
        "success",
        "status",
        "seed",
        "task",
    ):
        assert field in first
    assert first["messages"][0] == {"role": "user", "content": ADD_TASKS[0]["prompt"]}
    assert first["messages"][-1]["role"] == "assistant"
    assert first["components"] == {"correctness": 1.0}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["by_env"][ADD_ID]["pass_at_k"]["2"]["value"] == 1.0
    assert set(summary["by_family"]) == {"arith/small", "arith/large"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["llmgym_version"] == llmgym.__version__
    assert prov["policy"] == "oracle" and prov["samples"] == 2
    assert prov["envs"][0]["id"] == ADD_ID and prov["envs"][0]["version"] == 0
    assert prov["envs"][0]["entry_point"].endswith("DeclarativeEnv")
    assert prov["started_at"] and prov["finished_at"] and prov["machine"]["cpu_count"]
    assert "git" in prov and "packages" in prov


def test_results_are_reproducible_across_runs(tmp_path: Path) -> None:
    a = _run(
        tmp_path / "a", [GUESS_ID, ADD_ID], bisect_or_add, episodes=6, samples=2, concurrency=5
    )
    b = _run(
        tmp_path / "b",
        [GUESS_ID, ADD_ID],
        bisect_or_add,
        episodes=6,
        samples=2,
        concurrency=1,
        env_workers=0,
    )
    assert _strip(a.records) == _strip(b.records)


def bisect_or_add(messages: Sequence[dict[str, Any]], tools: Any) -> str:
    return (
        bisect_policy(messages, tools)
        if "Guess" in messages[0]["content"]
        else add_policy(messages, tools)
    )


def test_multi_turn_episodes_run_to_the_end_and_report_exec_facts(out: Path) -> None:
    result = _run(out, GUESS_ID, bisect_policy, episodes=10, seed=3)
    by_env = result.summary["by_env"][GUESS_ID]
    assert by_env["success_rate"] == 1.0  # bisection finds 1..64 within 7 guesses
    assert by_env["turns_mean"] > 1.5
    for r in result.records:
        assert r["turns"] == sum(m["role"] == "assistant" for m in r["messages"])
        assert len(r["exec"]) == r["turns"]
        assert r["terminated"] and not r["truncated"]
    assert by_env["exec"]["timeout_rate"] == 0.0

    def stubborn(messages: Any, tools: Any) -> str:
        return "-1" if len(messages) % 4 == 1 else "nope"

    result = _run(out.parent / "stubborn", GUESS_ID, stubborn, episodes=3)
    for r in result.records:
        assert r["truncated"] and not r["success"] and r["turns"] == 7
    ex = result.summary["overall"]["exec"]
    assert ex["executions"] == 21
    assert ex["timeout_rate"] == pytest.approx(
        sum(1 for r in result.records for f in r["exec"] if f["status"] == "timeout") / 21
    )
    assert 0 < ex["timeout_rate"] < 1
    assert ex["episode_anomaly_rate"] == 1.0


def test_tasks_are_distinct_and_follow_the_seed(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", GUESS_ID, "oracle", episodes=15, seed=1)
    b = _run(tmp_path / "b", GUESS_ID, "oracle", episodes=15, seed=2)
    ids_a = [r["task_id"] for r in a.records]
    assert len(set(ids_a)) == 15
    assert ids_a != [r["task_id"] for r in b.records]
    env = llmgym.make(GUESS_ID)
    assert ids_a[0] == env.reset(seed=1)[1]["task_id"]  # task i is reset(seed=seed + i)'s


_SAMPLE_COUNTER: dict[str, int] = {}


def alternate_by_sample(messages: Sequence[dict[str, Any]], tools: Any) -> str:
    """Solves task i on its first (i % 4) calls: c = i % 4 of n = 4 samples, in any order."""
    prompt = messages[-1]["content"]
    seen = _SAMPLE_COUNTER.get(prompt, 0)
    _SAMPLE_COUNTER[prompt] = seen + 1
    a, b = prompt.removeprefix("What is ").rstrip("?").split(" + ")
    return str(int(a) + int(b)) if seen < int(a) % 4 else "wrong"


def test_samples_per_task_feed_pass_at_k(out: Path) -> None:
    from llmgym.evaluation import pass_at_k

    _SAMPLE_COUNTER.clear()
    result = _run(out, ADD_ID, alternate_by_sample, samples=4, k=[1, 2, 4])
    table = result.summary["overall"]["pass_at_k"]
    for k in (1, 2, 4):
        expected = sum(pass_at_k(4, i % 4, k) for i in range(12)) / 12
        assert table[str(k)]["value"] == pytest.approx(expected)
    assert table["4"]["value"] == pytest.approx(9 / 12)  # every task with c >= 1
    assert table["1"]["value"] == result.summary["overall"]["success_rate"]


# --- hostile policies and envs -------------------------------------------------------------------


def _hostile(messages: Sequence[dict[str, Any]], tools: Any) -> Any:
    i = int(messages[-1]["content"].split()[2])
    return [
        lambda: 1 / 0,  # raises
        lambda: 42,  # wrong type
        lambda: {"content": 3},  # a dict of the wrong shape
        lambda: {"tool_calls": "not a list"},
        lambda: {"role": "user", "content": "hi"},
        lambda: "\ud800\x00" * 1000,  # lone surrogates and NUL
        lambda: "9" * 10_000_000,  # 10 MB
        lambda: None,
        lambda: ["a", "list"],
        lambda: {"content": "x", "unknown": 1},
        lambda: str(i + i % 4),  # right
        lambda: str(i + i % 4),  # right
    ][i]()


def test_a_hostile_callable_is_recorded_as_failures_never_a_crash(out: Path) -> None:
    result = _run(out, ADD_ID, _hostile, report=True)
    records = {r["task_id"]: r for r in result.records}
    assert len(records) == 12
    for i in (0, 1, 2, 3, 4, 7, 8, 9):
        r = records[f"add-{i}"]
        assert r["status"] == "policy_error" and r["error"], r
        assert not r["success"] and r["reward"] == 0.0
        assert r["messages"][-1] == {
            "role": "assistant",
            "content": "",
        }  # graded as an empty answer
    assert "ZeroDivisionError" in records["add-0"]["error"]
    assert "invalid action" in records["add-2"]["error"]
    for i in (5, 6):
        assert records[f"add-{i}"]["status"] == "ok" and not records[f"add-{i}"]["success"]
    assert records["add-6"]["completion_chars"] == 10_000_000
    assert records["add-10"]["success"] and records["add-11"]["success"]
    assert result.summary["overall"]["status"] == {"ok": 4, "policy_error": 8}
    assert (out / "report.html").stat().st_size > 1000


class BrokenBatchPolicy(Policy):
    """generate() fails in a different way on each call."""

    spec = "test:broken"

    def __init__(self) -> None:
        self.settings = {}
        self.calls = 0

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.calls += 1
        kind = self.calls % 5
        if kind == 1:
            raise MemoryError("CUDA out of memory")
        if kind == 2:
            return [Response("1")]  # wrong length (unless a batch of 1)
        if kind == 3:
            return ["not a response"] * len(requests)  # type: ignore[list-item]
        if kind == 4:
            return [Response(None, prompt_tokens="x", completion_tokens=-3)] * len(requests)  # type: ignore[arg-type]
        return [Response("", error="server said no")] * len(requests)


def test_a_broken_batched_policy_fails_episodes_not_the_run(out: Path) -> None:
    result = _run(out, ADD_ID, BrokenBatchPolicy(), concurrency=3)
    assert len(result.records) == 12
    for r in result.records:
        assert r["status"] in ("policy_error", "ok")
        assert not (r["status"] == "policy_error" and r["success"])
        assert r["prompt_tokens"] == 0
    assert result.summary["overall"]["status"].get("policy_error", 0) >= 9


def test_env_errors_are_recorded_and_the_run_goes_on(out: Path) -> None:
    result = _run(out, FLAKY_ID, lambda m, t: m[-1]["content"].removeprefix("say "))
    by_task = {r["task_id"]: r for r in result.records}
    for tid in ("f0", "f3"):
        assert by_task[tid]["status"] == "env_error"
        assert "verifier exploded" in by_task[tid]["error"]
        assert not by_task[tid]["success"]
    assert all(by_task[t]["success"] for t in ("f1", "f2", "f4", "f5"))
    assert result.summary["overall"]["error_rate"] == pytest.approx(2 / 6)


# --- batching and async ------------------------------------------------------------------------


class RecordingBatchPolicy(Policy):
    spec = "test:batch"

    def __init__(self) -> None:
        self.settings = {}
        self.sizes: list[int] = []

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        self.sizes.append(len(requests))
        return [
            Response(bisect_policy(r.messages, r.tools), prompt_tokens=5, completion_tokens=2)
            for r in requests
        ]


def test_batched_policies_get_every_waiting_episode_at_once(out: Path) -> None:
    policy = RecordingBatchPolicy()
    result = _run(out, GUESS_ID, policy, episodes=20, concurrency=8)
    assert result.summary["overall"]["success_rate"] == 1.0
    assert max(policy.sizes) == 8 and all(s <= 8 for s in policy.sizes)
    assert sum(policy.sizes) == sum(r["turns"] for r in result.records)
    assert len(policy.sizes) < sum(policy.sizes) / 3  # batches, not one call per turn
    assert json.loads((out / "provenance.json").read_text())["sessions"][-1]["mode"] == "batch"
    r = result.records[0]
    assert r["prompt_tokens"] == 5 * r["turns"] and r["completion_tokens"] == 2 * r["turns"]


class AsyncPolicy(Policy):
    spec = "test:async"

    def __init__(self) -> None:
        self.settings = {}
        self.in_flight = 0
        self.peak = 0

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        raise AssertionError("an async policy is driven through agenerate")

    async def agenerate(self, requests: Sequence[Request]) -> list[Response]:
        assert len(requests) == 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.005)
        self.in_flight -= 1
        if "13" in requests[0].messages[-1]["content"]:
            raise ConnectionError("server went away")
        return [Response(bisect_policy(requests[0].messages, None))]


def test_async_policies_run_episodes_concurrently(out: Path) -> None:
    policy = AsyncPolicy()
    result = _run(out, GUESS_ID, policy, episodes=12, concurrency=6)
    assert 1 < policy.peak <= 6
    assert all(r["status"] in ("ok", "policy_error") for r in result.records)
    assert sum(r["success"] for r in result.records) >= 6
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["mode"] == "auto" and prov["sessions"][-1]["mode"] == "async"


# --- resume ----------------------------------------------------------------------------------


def test_resume_after_a_torn_line_gives_the_uninterrupted_results(tmp_path: Path) -> None:
    full = _run(tmp_path / "full", [GUESS_ID, ADD_ID], bisect_or_add, episodes=5, samples=2)
    part = tmp_path / "part"
    _run(part, [GUESS_ID, ADD_ID], bisect_or_add, episodes=5, samples=2)
    lines = (part / "results.jsonl").read_bytes().splitlines(keepends=True)
    # keep 7 finished episodes, out of order, plus half of the next line
    kept = lines[3:10] + [lines[11][: len(lines[11]) // 2]]
    (part / "results.jsonl").write_bytes(b"".join(kept))
    (part / "summary.json").unlink()
    calls = {"n": 0}

    def counting(messages: Any, tools: Any) -> str:
        calls["n"] += 1
        return bisect_or_add(messages, tools)

    counting.__qualname__ = bisect_or_add.__qualname__  # same policy identity as the first run
    counting.__module__ = bisect_or_add.__module__
    resumed = _run(part, [GUESS_ID, ADD_ID], counting, episodes=5, samples=2)
    assert _strip(resumed.records) == _strip(full.records)
    assert _strip(load_jsonl(part / "results.jsonl")) == _strip(full.records)
    turns_redone = sum(r["turns"] for r in full.records) - sum(
        json.loads(line)["turns"] for line in lines[3:10]
    )
    assert calls["n"] == turns_redone  # only the missing episodes ran again
    prov = json.loads((part / "provenance.json").read_text())
    assert len(prov["sessions"]) == 2


def test_a_folder_holding_another_run_is_not_mixed_up(out: Path) -> None:
    _run(out, ADD_ID, "oracle")
    with pytest.raises(error.Error, match="different evaluation"):
        _run(out, ADD_ID, add_policy)
    with pytest.raises(error.Error, match="different evaluation"):
        _run(out, ADD_ID, "oracle", samples=2)
    result = _run(out, ADD_ID, add_policy, overwrite=True)
    assert result.summary["overall"]["success_rate"] == 0.5
    foreign = out.parent / "foreign"
    foreign.mkdir()
    (foreign / "results.jsonl").write_text("{}\n")
    with pytest.raises(error.Error, match="no llmgym eval run.json"):
        _run(foreign, ADD_ID)


# --- configuration errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"samples": 2, "k": [3]}, "needs at least 3 samples"),
        ({"samples": 0}, "samples must be an int"),
        ({"concurrency": 0}, "concurrency"),
        ({"mode": "turbo"}, "mode must be one of"),
        ({"episodes": 0}, "episodes must be an int"),
        ({"seed": -1}, "seed must be"),
        ({"rollouts_format": "csv"}, "rollouts_format"),
        ({"envs": []}, "Nothing to evaluate"),
        ({"envs": None}, "Nothing to evaluate"),
        ({"envs": "nope/Missing-v0"}, "not registered"),
        ({"envs": [ADD_ID, ADD_ID]}, "appears twice"),
        ({"envs": [{"id": ADD_ID, "bogus": 1}]}, "Bad env entry"),
        ({"envs": [42]}, "Expects env ids"),
        ({"envs": ADD_ID, "suite": "core-v0"}, "not both"),
        ({"suite": "core-v99"}, "No suite"),
        ({"policy": "nonsense-spec"}, "Unknown policy spec"),
    ],
)
def test_bad_configurations_fail_with_clear_errors(
    out: Path, kwargs: dict[str, Any], match: str
) -> None:
    envs = kwargs.pop("envs", ADD_ID)
    policy = kwargs.pop("policy", "oracle")
    with pytest.raises(error.Error, match=match):
        _run(out, envs, policy, **kwargs)


def test_entries_with_names_and_kwargs(out: Path) -> None:
    entries = [
        EnvEntry(GUESS_ID, {"max_turns": 2}, seed=0, episodes=4, name="guess-short"),
        {"id": GUESS_ID, "kwargs": {"max_turns": 7}, "episodes": 4, "name": "guess-long"},
    ]
    result = _run(out, entries, bisect_policy)
    short, long = result.summary["by_env"]["guess-short"], result.summary["by_env"]["guess-long"]
    assert long["success_rate"] == 1.0
    assert short["success_rate"] < 1.0 and short["turns_mean"] <= 2


# --- suites -----------------------------------------------------------------------------------


def test_core_suite_is_valid_and_pins_the_four_domains() -> None:
    suite = load_suite("core-v0")
    assert suite.name == "core-v0" and len(suite.sha256) == 64
    ids = [e.id for e in suite.envs]
    assert ids == ["llm/Math-v0", "llm/Coding-v0", "llm/ToolCalling-v0", "llm/LongDoc-v0"]
    for e in suite.envs:
        assert isinstance(e.episodes, int) and e.episodes >= 1 and isinstance(e.kwargs, dict)
    assert len({e.seed for e in suite.envs}) == 4


def test_the_released_core_suite_never_changes() -> None:
    """A released suite is frozen: a new one gets a new name (core-v1), never an edit."""
    released = "7a71fdefaf62b2ee0523cf2412ba905656965691e3ca6ed748dae4138ff68cb6"
    assert load_suite("core-v0").sha256 == released


def test_a_suite_pinning_unregistered_envs_says_which(out: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "name": "mine-v0",
                "envs": [
                    {"id": ADD_ID, "seed": 0, "episodes": 2},
                    {"id": "acme/Nowhere-v3", "seed": 0, "episodes": 2},
                ],
            }
        )
    )
    with pytest.raises(error.Error, match=r"not registered: \['acme/Nowhere-v3'\]"):
        _run(out, None, "oracle", suite=str(path))


def test_a_suite_file_runs_and_overrides_are_recorded(out: Path, tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: mine-v0\nsamples: 2\nk: [1, 2]\nenvs:\n"
        f"  - {{id: {GUESS_ID}, seed: 5, episodes: 3, kwargs: {{max_turns: 7}}}}\n"
        f"  - {{id: {ADD_ID}, seed: 0, episodes: 4}}\n"
    )
    result = _run(out, None, bisect_or_add, suite=path)
    assert result.summary["suite"] == "mine-v0"
    assert result.summary["overall"]["episodes"] == 2 * (3 + 4)
    assert set(result.summary["overall"]["pass_at_k"]) == {"1", "2"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["suite"]["name"] == "mine-v0" and prov["overrides"] == {}
    again = _run(out.parent / "o2", None, bisect_or_add, suite=path, episodes=2)
    assert json.loads((out.parent / "o2" / "provenance.json").read_text())["overrides"] == {
        "episodes": 2
    }
    assert again.summary["overall"]["episodes"] == 2 * 4


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], "top level"),
        ({"envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1}]}, "'name'"),
        ({"name": "x", "envs": []}, "non-empty list"),
        ({"name": "x", "envs": [{"id": "a/B-v0", "seed": 0}]}, "pins 'episodes'"),
        ({"name": "x", "envs": [{"id": "a/B-v0", "episodes": 1}]}, "pins 'seed'"),
        ({"name": "x", "envs": [{"id": "a/B-v0", "seed": 0, "episodes": -1}]}, "episodes must be"),
        ({"name": "x", "envs": [{"id": "a/B-v0", "seed": "0", "episodes": 1}]}, "seed must be"),
        (
            {"name": "x", "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1, "colour": 1}]},
            "unknown key",
        ),
        ({"name": "x", "envs": ["a/B-v0"]}, "each entry is an object"),
        ({"name": "x", "k": [0], "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1}]}, "'k'"),
        (
            {"name": "x", "samples": 0, "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1}]},
            "'samples'",
        ),
        (
            {"name": "x", "extra": 1, "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1}]},
            "unknown key",
        ),
        (
            {"name": "x", "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1, "kwargs": []}]},
            "kwargs must be",
        ),
        (
            {"name": "x", "envs": [{"id": "a/B-v0", "seed": 0, "episodes": 1}] * 2},
            "appears twice",
        ),
    ],
)
def test_malformed_suites_are_rejected_with_the_reason(data: Any, match: str) -> None:
    with pytest.raises(error.Error, match=match):
        parse_suite(data)


def test_unparsable_suite_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(error.Error, match="cannot parse"):
        load_suite(path)


# --- every registered env ----------------------------------------------------------------------


@pytest.mark.parametrize("env_id", llmgym.list_envs())
def test_the_oracle_succeeds_on_every_registered_env(tmp_path: Path, env_id: str) -> None:
    result = _run(tmp_path / "o", env_id, "oracle", episodes=2)
    for r in result.records:
        assert r["status"] == "ok", r["error"]
        assert r["success"], (r["task_id"], r["feedback"])
        assert math.isfinite(r["reward"])
