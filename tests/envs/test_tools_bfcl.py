"""BFCL-style loader and FunctionCalling-v0 (single-shot calls graded by AST match)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.envs.tools.bfcl import category_of, load_bfcl, openai_schema
from llmgym.envs.tools.function_calling import FunctionCallingEnv, gold_calls
from llmgym.rewards.tools import ast_match, format_tool_calls

DATA = Path(__file__).resolve().parents[1] / "data" / "bfcl"
FILES = sorted(DATA.glob("BFCL_v3_*.json"))


def test_loader_reads_every_category_with_answers_beside() -> None:
    tasks = [t for f in FILES for t in load_bfcl(f)]
    assert {t.family for t in tasks} == {"simple", "multiple", "parallel"}
    by_id = {t.id: t for t in tasks}
    simple = by_id["simple_0"]
    assert simple.prompt.startswith("Find the area of a triangle")
    assert simple.answer["ground_truth"][0]["calculate_triangle_area"]["unit"] == ["units", ""]
    params = simple.metadata["functions"][0]["parameters"]
    assert params["type"] == "object" and params["required"] == ["base", "height"]
    assert (
        by_id["multiple_1"].prompt == "Order a taxi from the Central Station to the airport."
    )  # v1 string question
    assert len(by_id["parallel_0"].answer["ground_truth"]) == 2
    assert by_id["simple_0"].difficulty < by_id["parallel_0"].difficulty


def test_schema_conversion_and_categories() -> None:
    schema = {
        "type": "dict",
        "properties": {
            "x": {"type": "float"},
            "t": {"type": "tuple", "items": {"type": "integer"}},
            "a": {"type": "any"},
        },
    }
    assert openai_schema(schema) == {
        "type": "object",
        "properties": {
            "x": {"type": "number"},
            "t": {"type": "array", "items": {"type": "integer"}},
            "a": {"type": "string"},  # BFCL shows (and checks) `any` as a string
        },
    }
    assert category_of("parallel_multiple_3") == "parallel_multiple" and category_of("odd") == "odd"
    assert category_of("live_parallel_multiple_3-2-1") == "live_parallel_multiple"  # not per task
    assert category_of("memory_kv_4-customer-4") == "memory_kv"


def test_loader_errors_name_the_problem(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text(
        json.dumps({"id": "simple_0", "question": "hi", "function": [{"name": "f"}]}) + "\n"
    )
    with pytest.raises(error.InvalidTask, match="no possible answer"):
        load_bfcl(q)
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"id": "simple_0", "ground_truth": "f(x=1)"}) + "\n")
    with pytest.raises(error.InvalidTask, match="ground_truth must be"):
        load_bfcl(q, a)
    with pytest.raises(error.InvalidTask, match="No such BFCL file"):
        load_bfcl(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json\n")
    with pytest.raises(error.InvalidTask, match="not valid JSON"):
        load_bfcl(bad, a)
    inline = [
        {
            "id": "simple_9",
            "question": [[{"role": "user", "content": "x"}]],
            "function": [{"name": "f"}],
            "ground_truth": [{"f": {}}],
        }
    ]
    assert load_bfcl(inline)[0].id == "simple_9"


@pytest.mark.parametrize("fmt", ["hermes", "json", "python", "openai"])
def test_bfcl_env_oracle_and_wrong_calls(fmt: str) -> None:
    env = FunctionCallingEnv(
        tasks=str(DATA / "BFCL_v3_multiple.json"), dataset_format="bfcl", call_format=fmt
    )
    for task_id in ("multiple_0", "multiple_1"):
        obs, info = env.reset(options={"task_id": task_id})
        assert "Functions:" in obs and len(info["tools"]) >= 2
        _, reward, terminated, _, info = env.step(env.oracle_action())
        assert reward == 1.0 and terminated and info["is_success"], info["feedback"]
    env.reset(options={"task_id": "multiple_1"})
    wrong = format_tool_calls(
        [("taxi.order", {"pickup": "Central Station", "dropoff": "the zoo"})], fmt
    )
    if fmt == "openai":
        wrong["tool_calls"][0]["function"]["name"] = "taxi_order"
    _, reward, *_, info = env.step(wrong)
    assert reward == 0.0 and "not an acceptable value" in info["feedback"]


def test_openai_format_offers_underscore_names_and_maps_back() -> None:
    env = FunctionCallingEnv(
        tasks=str(DATA / "BFCL_v3_simple.json"), dataset_format="bfcl", call_format="openai"
    )
    _, info = env.reset(options={"task_id": "simple_1"})
    assert info["tools"][0]["function"]["name"] == "weather_get_current"
    action = {
        "content": "",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {
                    "name": "weather_get_current",
                    "arguments": '{"location": "new york", "unit": "fahrenheit"}',
                },
            }
        ],
    }
    assert env.step(action)[1] == 1.0


def test_bfcl_semantics_on_the_sample_files() -> None:
    tasks = {t.id: t for f in FILES for t in load_bfcl(f)}
    t = tasks["simple_2"]
    fns = t.metadata["functions"]
    assert ast_match([{"stats_mean": {"numbers": [1.5, 2.0, 4.0]}}], t.answer["ground_truth"], fns)
    assert not ast_match(
        [{"stats_mean": {"numbers": [1.5, 4.0, 2.0]}}], t.answer["ground_truth"], fns
    )
    # BFCL checks a list's items against the item type (or the gold's first item's type): no
    # int where the spec asks for floats and the gold's first item is a float.
    assert not ast_match([{"stats_mean": {"numbers": [1.5, 2, 4]}}], t.answer["ground_truth"], fns)
    t = tasks["parallel_1"]
    calls = [
        {"convert_distance": {"value": 3, "from_unit": "miles", "to_unit": "KM"}},
        {"convert_distance": {"value": 10, "from_unit": "km", "to_unit": "mi"}},
    ]
    assert ast_match(calls, t.answer["ground_truth"], t.metadata["functions"])
    assert gold_calls(t.answer["ground_truth"])[0].arguments == {
        "value": 10.0,
        "from_unit": "km",
        "to_unit": "mi",
    }


def test_contract_bfcl_and_procedural() -> None:
    llmgym.check_env(gym.make("llm/FunctionCalling-v0"), seeds=(0, 1, 2))
    llmgym.check_env(
        gym.make(
            "llm/FunctionCalling-v0",
            tasks=str(DATA / "BFCL_v3_parallel.json"),
            dataset_format="bfcl",
            call_format="hermes",
        ),
        seeds=(0, 1),
    )


@pytest.mark.parametrize("fmt", ["hermes", "json", "python", "openai"])
def test_procedural_families_oracle(fmt: str) -> None:
    env = FunctionCallingEnv(call_format=fmt)
    assert env.source.families() == [
        "fc_multiple",
        "fc_parallel",
        "fc_parallel_multiple",
        "fc_simple",
    ]
    for family in env.source.families():
        for difficulty in (0.0, 1.0):
            for seed in range(4):
                _, info = env.reset(seed=seed, options={"family": family, "difficulty": difficulty})
                n_calls = len(env.episode.task.answer["ground_truth"])
                assert (n_calls > 1) == ("parallel" in family)
                assert len(info["tools"]) > 1 or family in ("fc_simple", "fc_parallel")
                assert env.step(env.oracle_action())[1] == 1.0


def test_parallel_calls_in_any_order_and_missing_ones_fail() -> None:
    env = FunctionCallingEnv(call_format="python")
    env.reset(seed=1, options={"family": "fc_parallel", "difficulty": 1.0})
    lines = env.oracle_action().splitlines()
    assert len(lines) >= 2
    assert env.step("\n".join(reversed(lines)))[1] == 1.0
    env.reset(seed=1, options={"family": "fc_parallel", "difficulty": 1.0})
    assert env.step("\n".join(lines[:-1]))[1] == 0.0


@pytest.mark.parametrize(
    "junk", ["", "I cannot help.", "x" * 10_000_000, "f(" * 100_000, "<tool_call>" * 10_000]
)
def test_garbage_scores_zero(junk: Any) -> None:
    env = FunctionCallingEnv(call_format="python")
    env.reset(seed=0)
    assert env.step(junk)[1] == 0.0


def test_bad_arguments() -> None:
    with pytest.raises(error.Error, match="dataset_format"):
        FunctionCallingEnv(dataset_format="xlam")
    with pytest.raises(error.Error, match="needs tasks"):
        FunctionCallingEnv(dataset_format="bfcl")
    with pytest.raises(error.Error, match="call_format"):
        FunctionCallingEnv(call_format="auto")
