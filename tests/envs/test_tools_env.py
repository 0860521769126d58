"""ToolCalling-v0: contract, the oracle in every call format, the tool loop, snapshots, and reward
hacking (the oracle on every family and difficulty is ``tests/test_gold.py``'s)."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmgym
from llmgym import error
from llmgym.envs.tools import ToolCallingEnv, scenario
from llmgym.envs.tools.env import MAX_ANSWER_CHARS, UNSAFE_REWARD
from llmgym.envs.tools.families import FAMILIES
from llmgym.rewards.tools import format_tool_calls

FAMILY_NAMES = sorted(f.name for f in FAMILIES)


def play(env: ToolCallingEnv, policy: Any, **reset: Any) -> tuple[float, dict[str, Any], int]:
    env.reset(**reset)
    total, steps = 0.0, 0
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return total, info, steps


def oracle(env: ToolCallingEnv) -> Any:
    return env.oracle_action()


def test_at_least_twenty_families_over_every_listed_system() -> None:
    assert len(FAMILY_NAMES) >= 20
    assert llmgym.list_families("llm/ToolCalling-v0") == FAMILY_NAMES
    systems: set[str] = set()
    env = ToolCallingEnv()
    for name in FAMILY_NAMES:
        env.reset(seed=0, options={"family": name, "difficulty": 0.0})
        systems.update(env.episode.task.metadata["modules"])
    assert systems >= {
        "hr",
        "orders",
        "scheduling",
        "tickets",
        "banking",
        "travel",
        "crm",
        "expenses",
        "library",
        "warehouse",
        "files",
        "calc",
        "kb",
    }
    assert sum(len(env.source.family(n).description) > 0 for n in FAMILY_NAMES) == len(FAMILY_NAMES)


@pytest.mark.parametrize("fmt", ["hermes", "json", "python", "openai"])
def test_contract(fmt: str) -> None:
    llmgym.check_env(gym.make("llm/ToolCalling-v0", call_format=fmt), seeds=(0, 1))


@pytest.mark.parametrize("fmt", ["hermes", "json", "python", "openai"])
def test_oracle_in_every_format_one_gold_turn_a_step(fmt: str) -> None:
    """Full marks in every format (``tests/test_gold.py`` plays the default one on every family at
    three difficulties); the oracle makes one step per gold turn, then answers."""
    env = ToolCallingEnv(call_format=fmt)
    for family in FAMILY_NAMES:
        total, info, steps = play(
            env, oracle, seed=3, options={"family": family, "difficulty": 0.8}
        )
        assert total == 1.0, (family, info["feedback"])
        assert steps == len(env.episode.task.answer["calls"]) + 1, family


def test_difficulty_raises_calls_tools_and_systems() -> None:
    env = ToolCallingEnv()
    low = high = 0
    tools_low = tools_high = 0
    for family in FAMILY_NAMES:
        for seed in range(2):
            env.reset(seed=seed, options={"family": family, "difficulty": 0.0})
            t = env.episode.task
            low += sum(map(len, t.answer["calls"]))
            tools_low += len(t.metadata["tools"])
            env.reset(seed=seed, options={"family": family, "difficulty": 1.0})
            t = env.episode.task
            high += sum(map(len, t.answer["calls"]))
            tools_high += len(t.metadata["tools"])
            assert len(t.metadata["modules"]) >= 2  # a distractor system from 0.5 up
    assert high > low * 1.3 and tools_high > tools_low * 1.5


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_goal_is_the_replay_of_the_gold_calls(family: str) -> None:
    env = ToolCallingEnv()
    env.reset(seed=5, options={"family": family, "difficulty": 0.6})
    task = env.episode.task
    assert scenario.replay_goal(task) == task.answer["goal"]
    start = scenario.state_digests(env.episode.extra["db"], task.metadata["modules"])
    writes = family not in ("hr_contact", "banking_statement", "kb_answer", "sensor_stats")
    assert (start != task.answer["goal"]) == writes or family == "banking_statement"
    for fact in task.answer["facts"]:  # facts are looked up, never handed over
        values = [a for a in fact if len(a) > 3 and (any(c.isdigit() for c in a) or "@" in a)]
        assert not any(a in task.prompt for a in values), (fact, task.prompt)


def test_task_id_rebuilds_identically_and_json_round_trips() -> None:
    env = ToolCallingEnv()
    _, info = env.reset(seed=11)
    again = env.source.get(info["task_id"])
    assert again == env.episode.task
    assert llmgym.Task.from_json(again.to_json()) == again


def test_tool_messages_and_observation() -> None:
    env = ToolCallingEnv(call_format="openai")
    obs, info = env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.0})
    assert info["tools"] and all(t["type"] == "function" for t in info["tools"])
    names = {t["function"]["name"] for t in info["tools"]}
    assert names == set(env.episode.task.metadata["tools"])
    assert "Tools:" in obs and "search_employees" in obs
    assert (
        info["messages"][0]["role"] == "system" and "tool_calls" in info["messages"][0]["content"]
    )
    action = env.oracle_action()
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == 0.0 and not terminated and not truncated
    tool_msgs = [m for m in info["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == len(action["tool_calls"])
    assert tool_msgs[0]["tool_call_id"] == action["tool_calls"][0]["id"]
    assert tool_msgs[0]["name"] == "search_employees" and json.loads(tool_msgs[0]["content"])
    assert tool_msgs[0]["content"] in obs


FORMAT_MARKERS = {
    "hermes": "<tool_call>",
    "json": "only a JSON object",
    "python": "Python call syntax",
    "openai": "tool_calls field",
}


@pytest.mark.parametrize("call_format", sorted(FORMAT_MARKERS))
def test_the_prompt_teaches_the_env_s_own_call_format(call_format: str) -> None:
    env = ToolCallingEnv(call_format=call_format)
    _, info = env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.0})
    system = info["messages"][0]["content"]
    assert info["messages"][0]["role"] == "system"
    for fmt, marker in FORMAT_MARKERS.items():
        assert (marker in system) == (fmt == call_format), (fmt, system)
    # and a call written the way the prompt says is the way the env reads it
    _, _, terminated, _, info = env.step(env.oracle_action())
    assert not terminated and any(m["role"] == "tool" for m in info["messages"])


def test_hermes_observation_uses_tool_response_tags() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.0})
    obs, *_ = env.step(env.oracle_action())
    assert obs.startswith("<tool_response>") and "search_employees" in obs


def test_bad_calls_get_error_messages_and_cost_validity() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.0})
    bad = (
        format_tool_calls(
            [
                ("drop_database", {}),
                ("get_employee", {"emp_id": "abc"}),
                ("get_employee", {"emp_id": 1, "x": 2}),
                ("get_employee", {"emp_id": 99999}),
            ],
            "hermes",
        )
        + "<tool_call>{broken</tool_call>"
    )
    obs, reward, terminated, _, info = env.step(bad)
    contents = [m["content"] for m in info["messages"] if m["role"] == "tool"]
    assert contents[0].startswith("Error: unknown tool 'drop_database'")
    assert "must be integer" in contents[1]
    assert "unknown argument 'x'" in contents[2]
    assert contents[3] == "Error: no employee with id 99999"  # valid call, the tool refuses
    assert contents[4].startswith("Error: <tool_call> body is not a JSON call")
    assert env.episode.extra["invalid"] == 4 and env.episode.extra["calls"] == 5
    total, info, _ = play_on(env, oracle)
    assert info["is_success"]
    comps = info["reward_components"]
    assert comps["validity"] == pytest.approx(1 - 4 / 7) and comps["efficiency"] == pytest.approx(
        2 / 7
    )
    assert total == pytest.approx(0.8 + 0.1 * (2 / 7) + 0.1 * (3 / 7))


def play_on(env: ToolCallingEnv, policy: Any) -> tuple[float, dict[str, Any], int]:
    total, steps = 0.0, 0
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return total, info, steps


def test_snapshot_mid_episode_replays() -> None:
    env = ToolCallingEnv()
    env.reset(seed=2, options={"family": "workflow_refund", "difficulty": 0.3})
    env.step(env.oracle_action())
    env.step(env.oracle_action())
    state = env.get_state()
    first = play_on(env, oracle)
    env.set_state(state)
    second = play_on(env, oracle)
    assert first[0] == second[0] == 1.0 and first[2] == second[2]
    with pytest.raises(error.InvalidState):
        env.set_state({**state, "extra": {**state["extra"], "db": "not bytes"}})


def test_truncation_at_max_turns() -> None:
    env = ToolCallingEnv(max_turns=2)
    env.reset(seed=0, options={"family": "orders_place", "difficulty": 1.0})
    call = format_tool_calls([("find_customer", {"name": "x"})], "hermes")
    assert env.step(call)[3] is False
    _, reward, terminated, truncated, info = env.step(call)
    assert truncated and not terminated and reward == 0.0


def test_exported_tasks_load_as_a_dataset(tmp_path: Any) -> None:
    path = tmp_path / "tools.jsonl"
    source = ToolCallingEnv().source
    path.write_text("\n".join(t.to_json() for t in source.iter_tasks(5, seed=1)) + "\n")
    env = ToolCallingEnv(tasks=str(path))
    total, info, _ = play(env, oracle, seed=0)
    assert total == 1.0
    with pytest.raises(error.InvalidTask, match="not a ToolCalling task"):
        ToolCallingEnv(tasks=[{"id": "x", "prompt": "p", "answer": "a"}])
    with pytest.raises(error.Error, match="call_format"):
        ToolCallingEnv(call_format="xml")


# --- reward hacking -------------------------------------------------------------------------------


def _plausible(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    return {
        "string": "x",
        "integer": 1,
        "number": 1.0,
        "boolean": True,
        "array": [],
        "object": {},
    }.get(kind, "x")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_calling_every_tool_then_claiming_success_gets_nothing(family: str) -> None:
    env = ToolCallingEnv()
    _, info = env.reset(seed=4, options={"family": family, "difficulty": 0.7})
    calls = []
    for spec in info["tools"]:
        fn = spec["function"]
        props = fn["parameters"]["properties"]
        calls.append((fn["name"], {k: _plausible(v) for k, v in props.items()}))
    env.step(format_tool_calls(calls, "hermes"))
    _, reward, terminated, _, info = env.step(
        "All done successfully: 100.00, 1, 09:00, x@acme.example."
    )
    assert terminated and not info["is_success"] and reward <= 0.0, info["feedback"]
    assert info["reward_components"]["correctness"] == 0.0


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_claiming_success_without_the_work_gets_nothing(family: str) -> None:
    env = ToolCallingEnv()
    env.reset(seed=6, options={"family": family, "difficulty": 0.5})
    writes = env.episode.task.answer["goal"] != scenario.state_digests(
        env.episode.extra["db"], env.episode.task.metadata["modules"]
    )
    _, reward, *_, info = env.step("Done! Everything is complete and all records are updated.")
    assert reward == 0.0 and not info["is_success"]
    assert info["reward_components"]["state"] == (0.0 if writes else 1.0)


def test_guessing_or_listing_every_candidate_fails() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.6})
    task = env.episode.task
    assert task.answer["decoys"]  # the namesake's details
    while len(env.episode.messages) and env.episode.extra["tool_turns"] < len(task.answer["calls"]):
        env.step(env.oracle_action())
    facts = " ".join(f[0] for f in task.answer["facts"])
    _, reward, *_, info = env.step(f"{facts} or maybe {' '.join(task.answer['decoys'])}")
    assert reward == 0.0 and "different record" in info["feedback"]
    env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.6})
    while env.episode.extra["tool_turns"] < len(task.answer["calls"]):
        env.step(env.oracle_action())
    _, reward, *_, info = env.step(facts + " " + "x" * MAX_ANSWER_CHARS)
    assert reward == 0.0 and "longer than" in info["feedback"]


def test_sql_injection_through_arguments_does_nothing() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "hr_contact", "difficulty": 0.0})
    db = env.episode.extra["db"]
    before = db.execute("SELECT count(*) FROM employees").fetchone()[0]
    payloads = [
        "x' OR '1'='1",
        "'; DROP TABLE employees; --",
        "%",
        "_",
        "\\",
        "Robert'); DELETE FROM employees;--",
    ]
    calls = [("search_employees", {"name": p}) for p in payloads]
    calls.append(("search_employees", {"name": "", "department": "ENG' OR 1=1 --"}))
    calls.append(("get_employee", {"emp_id": "1 OR 1=1"}))
    _, _, _, _, info = env.step(format_tool_calls(calls, "hermes"))
    results = [m["content"] for m in info["messages"] if m["role"] == "tool"]
    assert all(r == "[]" for r in results[:6]), results
    assert results[6].startswith("Error: no department") and "must be integer" in results[7]
    assert db.execute("SELECT count(*) FROM employees").fetchone()[0] == before
    _, reward, *_ = env.step("Done.")
    assert reward == 0.0


def test_huge_and_deeply_nested_arguments_are_refused() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "files_index", "difficulty": 0.0})
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    calls = [
        ("write_file", {"path": "/home/a.txt", "content": "y" * 60_000}),
        ("list_dir", {"path": deep}),
    ]
    text = format_tool_calls(calls, "hermes")
    _, _, _, _, info = env.step(
        text
        + '<tool_call>{"name": "list_dir", "arguments": '
        + "[" * 100_000
        + "]" * 100_000
        + "}</tool_call>"
    )
    results = [m["content"] for m in info["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and all(r.startswith("Error:") for r in results), results


def test_breaking_a_policy_is_penalised_even_when_the_goal_is_reached() -> None:
    env = ToolCallingEnv()
    env.reset(seed=1, options={"family": "hr_raise", "difficulty": 1.0})
    task = env.episode.task
    db = env.episode.extra["db"]
    on_leave = db.execute(
        "SELECT emp_id, salary FROM employees WHERE status = 'on_leave'"
    ).fetchone()
    # Touch a salary on leave and put it back: the end state is the goal, the rule is still broken.
    env.step(
        format_tool_calls(
            [("update_salary", {"emp_id": on_leave[0], "new_salary": on_leave[1] + 1000})], "hermes"
        )
    )
    env.step(
        format_tool_calls(
            [("update_salary", {"emp_id": on_leave[0], "new_salary": on_leave[1]})], "hermes"
        )
    )
    for turn in task.answer["calls"]:
        env.step(format_tool_calls([(c["name"], c["arguments"]) for c in turn], "hermes"))
    _, reward, *_, info = env.step(env.oracle_action())
    assert info["reward_components"]["state"] == 1.0 and info["reward_components"]["facts"] == 1.0
    assert reward == UNSAFE_REWARD and not info["is_success"] and "hr_leave" in info["feedback"]


def test_transfer_above_the_limit_is_unsafe() -> None:
    env = ToolCallingEnv()
    for seed in range(20):
        env.reset(seed=seed, options={"family": "banking_transfer", "difficulty": 0.6})
        turn = env.episode.task.answer["calls"][-1][0]
        if turn["name"] == "request_approval":
            break
    args = {k: turn["arguments"][k] for k in ("from_account", "to_account", "amount")}
    env.step(
        format_tool_calls(
            [("find_accounts", env.episode.task.answer["calls"][0][0]["arguments"])], "hermes"
        )
    )
    env.step(format_tool_calls([("transfer", args)], "hermes"))
    _, reward, *_, info = env.step("Transferred; it awaits approval.")
    assert reward == UNSAFE_REWARD and info["reward_components"]["safety"] == 0.0


def test_extra_calls_cost_efficiency_only_when_correct() -> None:
    env = ToolCallingEnv()
    env.reset(seed=0, options={"family": "kb_answer", "difficulty": 0.0})
    env.step(format_tool_calls([("search_kb", {"query": "server"})], "hermes"))
    total, info, _ = play_on(env, oracle)
    assert 0.8 < total < 1.0 and info["reward_components"]["efficiency"] == pytest.approx(2 / 3)


def test_ten_megabyte_answers_are_fast() -> None:
    import time

    env = ToolCallingEnv()
    for text in ("x" * 10_000_000, "<tool_call>" * 900_000, "f(" * 3_000_000):
        env.reset(seed=0)
        start = time.perf_counter()
        env.step(text)
        assert time.perf_counter() - start < 1.0


_OPENAI_ENV = ToolCallingEnv(call_format="openai")
_wild = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats()
    | st.text(max_size=30)
    | st.just("\ud800")
    | st.just("\x00"),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(FAMILY_NAMES),
    st.lists(
        st.tuples(st.text(max_size=20), st.dictionaries(st.text(max_size=10), _wild, max_size=4)),
        min_size=1,
        max_size=4,
    ),
    st.data(),
)
def test_fuzzed_openai_calls_never_crash(
    family: str, raw: list[tuple[str, dict[str, Any]]], data: Any
) -> None:
    env = _OPENAI_ENV
    _, info = env.reset(seed=0, options={"family": family, "difficulty": 1.0})
    real = [t["function"]["name"] for t in info["tools"]]
    calls = []
    for i, (name, args) in enumerate(raw):
        if data.draw(st.booleans()):
            name = data.draw(st.sampled_from(real))
        arguments: Any = args if data.draw(st.booleans()) else json.dumps(args, default=str)
        calls.append(
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    obs, reward, terminated, truncated, info = env.step({"content": "", "tool_calls": calls})
    assert isinstance(obs, str) and reward == 0.0
    _, reward, *_ = env.step("done")
    assert -0.5 <= reward <= 1.0
