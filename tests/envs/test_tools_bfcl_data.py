"""BFCL's shipped data, from the installed bfcl-eval package: every category loads as one family, the
oracle gets full marks on every task, irrelevance rewards abstaining, multi-turn episodes run on
BFCL's own backends, and hostile calls never crash."""

from __future__ import annotations

import decimal
import json
from functools import cache
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip(
    "bfcl_eval",
    reason="BFCL's data and backends come from the optional bfcl-eval package: "
    "pip install --no-deps bfcl-eval==2026.3.23",
)

import llmgym  # noqa: E402
from llmgym.envs.tools.bfcl import CATEGORIES, category_of, kind_of, load_bfcl, peer  # noqa: E402
from llmgym.envs.tools.bfcl.multi_turn import MAX_STEPS_PER_TURN  # noqa: E402
from llmgym.envs.tools.function_calling import CALL_PENALTY, FunctionCallingEnv  # noqa: E402
from llmgym.rewards.tools import ToolCall, ast_match, format_tool_calls  # noqa: E402
from llmgym.tasks import Task, read_jsonl  # noqa: E402

DATA = peer.data_dir()
FORMATS = ("hermes", "json", "python", "openai")


def _env(category: str, call_format: str = "python", **kwargs: Any) -> FunctionCallingEnv:
    env = gym.make(
        "llm/FunctionCalling-v0",
        tasks=category,
        dataset_format="bfcl",
        call_format=call_format,
        **kwargs,
    ).unwrapped
    assert isinstance(env, FunctionCallingEnv)
    return env


@cache
def _tasks(category: str) -> tuple[Task, ...]:
    return tuple(load_bfcl(category))


def _records(category: str) -> list[dict[str, Any]]:
    return list(read_jsonl(DATA / f"BFCL_v4_{category}.json"))


# --- loading ---------------------------------------------------------------------------------------


def test_every_shipped_file_is_a_known_category() -> None:
    shipped = {p.name[len("BFCL_v4_") : -len(".json")] for p in DATA.glob("BFCL_v4_*.json")}
    assert shipped == set(CATEGORIES)


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_loads_as_one_family(category: str) -> None:
    tasks = _tasks(category)
    assert {t.family for t in tasks} == {category}
    assert {t.metadata["kind"] for t in tasks} == {kind_of(category)}
    assert len({t.id for t in tasks}) == len(tasks)
    if category == "format_sensitivity":
        ids = json.loads((DATA / "BFCL_v4_format_sensitivity.json").read_text())
        assert len(tasks) == sum(len(v) for v in ids.values()) == 200
        assert {t.metadata["source"] for t in tasks} == {i for v in ids.values() for i in v}
    else:
        assert len(tasks) == len(_records(category))
    assert _env(category).source.families() == [category]


def test_task_counts_of_the_shipped_data() -> None:
    counts = {c: len(_tasks(c)) for c in CATEGORIES}
    assert counts == {
        "simple_python": 400,
        "simple_java": 100,
        "simple_javascript": 50,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "live_simple": 258,
        "live_multiple": 1053,
        "live_parallel": 16,
        "live_parallel_multiple": 24,
        "irrelevance": 240,
        "live_irrelevance": 884,
        "live_relevance": 16,
        "format_sensitivity": 200,
        "multi_turn_base": 200,
        "multi_turn_miss_func": 200,
        "multi_turn_miss_param": 200,
        "multi_turn_long_context": 200,
        "memory": 155,
        "web_search": 100,
    }


def test_category_of_reads_ids_as_bfcl_does() -> None:
    from bfcl_eval.utils import extract_test_category_from_id

    ids = [r["id"] for c in CATEGORIES if c != "format_sensitivity" for r in _records(c)]
    ids += ["format_sensitivity_3:ret_fmt=json&tool_call_tag=False:live_simple_2-1-0"]
    assert all(category_of(i) == extract_test_category_from_id(i) for i in ids)
    assert category_of("live_multiple_862-181-3") == "live_multiple"  # one family per category


def test_answers_bfcl_itself_cannot_accept_are_repaired_and_listed() -> None:
    repaired = {t.id: t.metadata.get("repaired") for c in CATEGORIES for t in _tasks(c)}
    repaired = {k: v for k, v in repaired.items() if v and not k.startswith("format_")}
    assert sorted(repaired) == [
        "live_multiple_862-181-3",
        "live_multiple_964-207-0",
        "live_simple_106-63-0",
        "live_simple_112-68-0",
        "simple_java_36",
        "simple_java_64",
        "simple_java_65",
    ]
    assert "dropped" in repaired["live_multiple_862-181-3"][0]
    assert "read as 'statement'" in repaired["live_multiple_964-207-0"][0]


# --- the oracle ------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", CATEGORIES)
def test_oracle_gets_full_marks_on_every_task(category: str) -> None:
    env = _env(category)
    assert llmgym.check_oracles(env, exhaustive=True) == []
    if kind_of(category) not in ("multi_turn", "agentic"):
        for task in list(env.source)[:50]:
            env.reset(options={"task_id": task.id})
            assert env.step(env.oracle_action())[1] == 1.0


@pytest.mark.parametrize("call_format", ["hermes", "json", "openai"])
@pytest.mark.parametrize(
    "category",
    ["simple_java", "simple_javascript", "live_parallel_multiple", "live_relevance",
     "multi_turn_miss_func", "multi_turn_long_context"],
)  # fmt: skip
def test_oracle_in_every_call_format(category: str, call_format: str) -> None:
    assert llmgym.check_oracles(_env(category, call_format), exhaustive=True) == []


@pytest.mark.parametrize("category", ["multi_turn_base", "live_multiple", "simple_java", "memory"])
def test_contract_on_bfcl_data(category: str) -> None:
    llmgym.check_env(_env(category, "hermes"), seeds=(0, 1), oracle_per_family=0)


# --- irrelevance and relevance -----------------------------------------------------------------------


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance"])
def test_irrelevance_rewards_abstaining_and_penalises_calling(category: str) -> None:
    env = _env(category, "hermes")
    for task in env.source:
        functions = task.metadata["functions"] or [{"name": "f", "parameters": {}}]
        fn = functions[0]
        args = {k: "x" for k in fn["parameters"].get("required", [])}
        for action, reward in (
            ("None of these functions can answer that.", 1.0),
            ("", 1.0),
            (format_tool_calls([ToolCall(fn["name"], args)], "hermes"), CALL_PENALTY),
            (format_tool_calls([ToolCall("made_up_function", {})], "hermes"), CALL_PENALTY),
            ("<tool_call>{not json</tool_call>", 1.0),  # no readable call: abstains, as in BFCL
        ):
            env.reset(options={"task_id": task.id})
            _, r, terminated, _, info = env.step(action)
            assert terminated and r == reward, (task.id, action, info["feedback"])
            assert info["is_success"] is (reward == 1.0)


def test_relevance_asks_for_a_call_of_an_offered_function() -> None:
    env = _env("live_relevance", "python")
    for task in env.source:
        fn = task.metadata["functions"][-1]
        env.reset(options={"task_id": task.id})
        assert env.step("I would rather not call anything.")[1] == 0.0
        env.reset(options={"task_id": task.id})
        assert env.step("made_up_function(x=1)")[1] == 0.0
        env.reset(options={"task_id": task.id})
        call = format_tool_calls([ToolCall(fn["name"], {})], "python")
        assert env.step(call)[1] == 1.0  # BFCL checks that a call is made, not its arguments


# --- type conflicts, Java and JavaScript ---------------------------------------------------------------


def test_type_conflicts_follow_bfcl() -> None:
    """Where the spec's type and the possible answer's disagree, a value of the answer's type is
    accepted and compared exactly (BFCL's "variable" rule)."""
    task = {t.id: t for t in _tasks("live_simple")}["live_simple_30-8-0"]
    gold, fns = task.answer["ground_truth"], task.metadata["functions"]
    name = "aws.lexv2_models.list_exports"
    base = {"botId": "my-bot-id", "botVersion": "v2"}
    assert ast_match(
        [{name: {**base, "filterName": None}}], gold, fns
    )  # spec: string; answer: null
    assert not ast_match([{name: {**base, "filterName": "None"}}], gold, fns)
    spec = [
        {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    ]
    variable = [{"f": {"n": ["count"]}}]  # the answer names a variable where the spec says integer
    assert ast_match([{"f": {"n": "count"}}], variable, spec)
    assert not ast_match([{"f": {"n": "COUNT"}}], variable, spec)  # exact, not standardised
    assert not ast_match([{"f": {"n": 3}}], variable, spec)


def test_java_and_javascript_arguments_are_code_strings() -> None:
    env = _env("simple_java", "json")
    env.reset(options={"task_id": "simple_java_25"})
    prompt_types = {p["type"] for f in env.episode.task.metadata["functions"]  # type: ignore[union-attr]
                    for p in f["parameters"]["properties"].values()}  # fmt: skip
    assert prompt_types == {"string"}  # as BFCL shows them
    good = env.oracle_action()
    assert "L" in json.loads(good)["arguments"]["id"]  # a long is written 42L
    assert env.step(good)[1] == 1.0
    env.reset(options={"task_id": "simple_java_25"})
    bad = json.loads(good)
    bad["arguments"]["id"] = 42  # not a string of Java code
    assert env.step(json.dumps(bad))[1] == 0.0
    js = _env("simple_javascript", "python")
    js.reset(options={"task_id": "simple_javascript_0"})
    assert js.step('validateUserInput(inputField="userInputField", isComplete="true")')[1] == 1.0
    js.reset(options={"task_id": "simple_javascript_0"})
    assert js.step('validateUserInput(inputField="userInputField", isComplete="True")')[1] == 0.0


# --- multi-turn episodes on BFCL's backends --------------------------------------------------------------


def test_multi_turn_runs_on_the_real_file_system() -> None:
    env = _env("multi_turn_base", "python")
    env.reset(options={"task_id": "multi_turn_base_0"})
    obs, r, terminated, _, info = env.step('cd(folder="document")\nmkdir(dir_name="temp")\nls()')
    assert not terminated and r == 0.0
    assert [m["role"] for m in info["messages"][-3:]] == ["tool"] * 3
    listing = json.loads(info["messages"][-1]["content"])
    assert "temp" in listing["current_directory_content"]
    assert "final_report.pdf" in listing["current_directory_content"]
    env.step('mv(source="final_report.pdf", destination="temp")')
    obs, r, terminated, _, info = env.step("Done.")
    assert not terminated and "grep" in obs  # the next user turn
    # A wrong move fails the turn on the file system's state.
    env.reset(options={"task_id": "multi_turn_base_0"})
    env.step('cd(folder="document")\nmkdir(dir_name="temp")')
    env.step('mv(source="final_report.pdf", destination="archive")')
    _, r, terminated, _, info = env.step("Done.")
    assert terminated and r == 0.0 and "state of GorillaFileSystem differs" in info["feedback"]
    # No call in a turn that needs calls fails it.
    env.reset(options={"task_id": "multi_turn_base_0"})
    _, r, terminated, _, info = env.step("Sure, done!")
    assert terminated and r == 0.0 and "no function was called" in info["feedback"]


def test_multi_turn_response_check_wants_the_results() -> None:
    """multi_turn_base_1, turn 1 is ``ls(a=True)``: a read-only call whose result must appear."""
    env = _env("multi_turn_base", "python")
    env.reset(options={"task_id": "multi_turn_base_1"})
    env.step("pwd()")  # right state (nothing changes), wrong results
    _, r, terminated, _, info = env.step("Done.")
    assert terminated and r == 0.0 and "expected result(s) are missing" in info["feedback"]
    env.reset(options={"task_id": "multi_turn_base_1"})
    env.step("ls(a=True)")
    assert not env.step("Done.")[2]


def test_miss_func_hands_over_the_held_functions() -> None:
    env = _env("multi_turn_miss_func", "openai")
    _, info = env.reset(options={"task_id": "multi_turn_miss_func_0"})
    offered = {t["function"]["name"] for t in info["tools"]}
    assert "sort" not in offered
    for step in range(5):  # turns 0 and 1, then turn 2: no call fits (sort is missing)
        obs, _, terminated, _, info = env.step(env.oracle_action())
        assert not terminated and ("tools" in info) is (step == 4)
    assert env.episode.extra["session"].turn == 3  # type: ignore[union-attr]
    assert obs.startswith("I have updated some more functions")
    assert "sort" in {t["function"]["name"] for t in info["tools"]}
    while not terminated:
        _, r, terminated, _, info = env.step(env.oracle_action())
    assert r == 1.0


def test_multi_turn_step_limit_and_truncation() -> None:
    env = _env("multi_turn_base", "python")
    env.reset(options={"task_id": "multi_turn_base_1"})
    for i in range(MAX_STEPS_PER_TURN + 1):
        _, r, terminated, truncated, info = env.step("pwd()")
        assert terminated is (i == MAX_STEPS_PER_TURN) and not truncated
    assert r == 0.0 and "forced to quit" in info["feedback"]
    short = _env("multi_turn_base", "python", max_turns=2)
    _, info = short.reset(options={"task_id": "multi_turn_base_1"})
    assert info["max_turns"] == 2
    short.step("pwd()")
    _, r, terminated, truncated, _ = short.step("pwd()")
    assert truncated and not terminated and r == 0.0


def test_multi_turn_snapshots_replay() -> None:
    env = _env("multi_turn_long_context", "hermes")
    env.reset(options={"task_id": "multi_turn_long_context_3"})
    env.step(env.oracle_action())
    state = env.get_state()
    first = [env.step(env.oracle_action())[:4] for _ in range(3)]
    env.set_state(state)
    assert [env.step(env.oracle_action())[:4] for _ in range(3)] == first


def test_memory_sessions_start_from_a_fresh_context() -> None:
    env = _env("memory", "hermes")
    env.reset(options={"task_id": "memory_0-customer-0"})
    store = ToolCall("core_memory_add", {"key": "first_name", "value": "Michael"})
    env.step(format_tool_calls([store], "hermes"))
    first_session = len(env.episode.task.metadata["sessions"][0])  # type: ignore[union-attr]
    for _ in range(first_session):
        obs, r, terminated, _, info = env.step("Noted.")
    assert [m["role"] for m in info["messages"]] == ["system", "user"]  # a new session
    assert '"first_name": "Michael"' in obs  # the core memory carries over
    while not terminated:
        obs, r, terminated, _, info = env.step(env.oracle_action())
    assert r == 1.0 and info["is_success"]


def test_web_search_runs_offline_and_grades_the_answer() -> None:
    env = _env("web_search", "python")
    env.reset(options={"task_id": "web_search_0"})
    _, _, terminated, _, info = env.step('search_engine_query(keywords="most expensive tea")')
    assert not terminated and info["messages"][-1]["content"].startswith("Error during execution")
    _, r, terminated, _, _ = env.step("{'answer': 'Zhang Yiming', 'context': 'Forbes'}")
    assert terminated and r == 1.0
    env.reset(options={"task_id": "web_search_0"})
    assert env.step("{'answer': 'I do not know', 'context': 'no search'}")[1] == 0.0


# --- hostile calls ----------------------------------------------------------------------------------------


HOSTILE = [
    "__init__()",
    "_load_scenario(scenario={})",
    "__class__()",
    "exit()",
    "kill(pid=1)",
    "no_such_function(x=1)",
    'cd(folder="document", extra="x")',
    "cd(folder=" + repr("a" * 60_000) + ")",
    'echo(content="x" , file_name=' + repr("../" * 1000) + ")",
    "mv(source=[[[[[[[[1]]]]]]]], destination={'a': None})",
    "power(base=10, exponent=10**9)",
    "power(base=10, exponent=1000000000)",
    "logarithm(value=10, base=2, precision=1000000000)",
    "square_root(number=2, precision=100000000)",
    "mean(numbers=[])",
    "cd(folder=__import__('os').system('true'))",
    "f(" * 2000,
    "\x00\ud800",
]


@pytest.mark.parametrize("category", ["multi_turn_base", "multi_turn_long_context"])
def test_hostile_calls_never_crash_the_backends(category: str) -> None:
    env = _env(category, "python")
    tasks = [t for t in env.source if "MathAPI" in t.metadata["involved_classes"]][:2]
    tasks += [t for t in env.source if "GorillaFileSystem" in t.metadata["involved_classes"]][:2]
    precision = decimal.getcontext().prec
    for task in tasks:
        env.reset(options={"task_id": task.id})
        for action in HOSTILE:
            _, r, terminated, truncated, info = env.step(action)
            assert -0.5 <= r <= 1.0 and isinstance(info["feedback"], str)
            for m in info["messages"]:
                if m["role"] == "tool":
                    assert isinstance(m["content"], str) and len(m["content"]) < 1_000_000
            if terminated or truncated:
                env.reset(options={"task_id": task.id})
    assert decimal.getcontext().prec == precision  # MathAPI's precision changes are undone


def test_private_and_blocked_methods_are_not_callable() -> None:
    env = _env("multi_turn_base", "python")
    env.reset(options={"task_id": "multi_turn_base_0"})
    _, _, _, _, info = env.step("_load_scenario(scenario={})\nexit()\n__init__()")
    contents = [m["content"] for m in info["messages"] if m["role"] == "tool"]
    assert contents == [
        "Error during execution: name '_load_scenario' is not defined",
        "Error during execution: Function call exit is not allowed.",
        "Error during execution: name '__init__' is not defined",
    ]
    env.step("Done.")  # the state is untouched by all that: the turn fails only on its own calls


@pytest.mark.parametrize("category", ["live_parallel_multiple", "simple_java", "irrelevance"])
def test_hostile_single_shot_replies_never_crash(category: str) -> None:
    env = _env(category, "json")
    task = next(iter(env.source))
    junk: list[Any] = [
        "",
        "{" * 5000,
        json.dumps({"name": "f", "arguments": {"x": "y" * 60_000}}),
        json.dumps([{"name": str(i), "arguments": {}} for i in range(500)]),
        json.dumps({"name": "__class__", "arguments": {"__init__": {"a": [[[[[[]]]]]]}}}),
        json.dumps({"name": task.metadata["functions"][0]["name"], "arguments": [1, 2]}),
    ]
    for action in junk:
        env.reset(options={"task_id": task.id})
        _, r, terminated, _, _ = env.step(action)
        assert terminated and -0.5 <= r <= 1.0
