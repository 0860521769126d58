"""LongDoc-v0: families, documents, the three reading modes, datasets and the contract."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.envs.longdoc import LongDocEnv
from llmgym.envs.longdoc.datasets import load_dataset
from llmgym.envs.longdoc.families import FAMILIES
from llmgym.envs.longdoc.families.common import DEPTH_GRID
from llmgym.envs.longdoc.reading import chunk_bounds
from llmgym.rewards.longdoc import grade_answer

DATA = Path(__file__).parent.parent / "data" / "longdoc"
FAMILY_NAMES = sorted(f.name for f in FAMILIES)


def _env(**kwargs: Any) -> LongDocEnv:
    kwargs.setdefault("length_range", (1024, 16384))
    return LongDocEnv(**kwargs)


def _distractor_answers(spec: dict[str, Any]) -> list[str]:
    out = []
    for wrong in spec.get("distractors") or []:
        out.append("; ".join(wrong) if isinstance(wrong, list) else str(wrong))
    return out


def test_registered_and_has_twenty_families() -> None:
    assert "llm/LongDoc-v0" in llmgym.list_envs()
    families = llmgym.list_families("llm/LongDoc-v0")
    assert len(families) >= 20 and set(families) == set(FAMILY_NAMES)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_planted_distractors_get_nothing(family: str) -> None:
    """Every family plants look-alikes, and each scores 0 even with the oracle's citations (that
    the oracle itself scores full marks is ``tests/test_gold.py``'s job)."""
    env = _env()
    for difficulty in (0.0, 0.5, 1.0):
        for index in (0, 5):
            task = env.source.build(family, difficulty, index)  # type: ignore[attr-defined]
            support = task.answer.get("support") or []
            cite = ", ".join(dict.fromkeys(f["section"] for f in support))
            wrongs = _distractor_answers(task.answer)
            assert wrongs, f"{task.id}: a family must plant distractors"
            for wrong in wrongs:
                result = grade_answer(f"<answer>{wrong}</answer><cite>{cite}</cite>", task.answer)
                assert result.score == 0.0, (task.id, wrong, result.feedback)


@pytest.mark.parametrize("family", ["needle_single", "needle_multiquery"])
def test_look_alike_distractors_grow_with_difficulty(family: str) -> None:
    env = _env()

    def look_alikes(difficulty: float) -> list[int]:
        out = []
        for index in range(6):
            task = env.source.build(family, difficulty, index)  # type: ignore[attr-defined]
            out.append(len(_distractor_answers(task.answer)))
            document = task.metadata["document"]
            for wrong in _distractor_answers(task.answer):  # planted in the document itself
                assert all(part in document for part in wrong.split("; ")), (task.id, wrong)
        return out

    easy, hard = look_alikes(0.0), look_alikes(1.0)
    assert min(easy) >= 1 and sum(hard) > sum(easy), (easy, hard)


@pytest.mark.parametrize("mode", [{}, {"mode": "tools"}, {"subtask_mode": "sequential"}])
def test_check_env_in_every_mode(mode: dict[str, Any]) -> None:
    llmgym.check_env(gym.make("llm/LongDoc-v0", length_range=(1024, 8192), **mode))


def test_contract_mixin_on_the_registered_defaults() -> None:
    class Contract(llmgym.EnvContractTests):
        env_id = "llm/LongDoc-v0"

    c = Contract()
    c.test_contract()
    c.test_step_before_reset()
    c.test_replay_by_task_id()


def test_document_length_follows_difficulty() -> None:
    env = LongDocEnv()
    for difficulty, target in ((0.0, 1024), (0.5, 11585), (1.0, 131072)):
        task = env.source.build("needle_single", difficulty, 3)  # type: ignore[attr-defined]
        tokens = task.metadata["tokens"]
        assert abs(tokens - target) / target < 0.12, (difficulty, tokens)
        assert task.metadata["tokens"] == -(-len(task.metadata["document"]) // 4)


def test_a_given_tokenizer_measures_the_document() -> None:
    class WordTokenizer:
        def encode(self, text: str) -> list[str]:
            return text.split()

    env = _env(tokenizer=WordTokenizer(), length_range=(2000, 20000))
    task = env.source.build("table_lookup", 0.5, 1)  # type: ignore[attr-defined]
    words = len(task.metadata["document"].split())
    assert task.metadata["tokens"] == words
    assert abs(words - 6325) / 6325 < 0.06
    assert task.metadata["token_counter"].startswith("tokenizer")
    with pytest.raises(error.Error, match="encode"):
        LongDocEnv(tokenizer=42)


def test_needle_depth_follows_the_grid_by_index() -> None:
    env = _env(length_range=(8192, 8192))
    for index in range(11):
        task = env.source.build("needle_single", 0.3, index)  # type: ignore[attr-defined]
        assert abs(task.metadata["depth"] - DEPTH_GRID[index]) < 0.08, (
            index,
            task.metadata["depth"],
        )


def test_documents_are_deterministic_across_processes() -> None:
    code = (
        "from llmgym.envs.longdoc import LongDocEnv;"
        "import hashlib;"
        "t = LongDocEnv().source.build('multihop_chain', 0.4, 77);"
        "print(hashlib.sha256((t.metadata['document'] + t.prompt).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("0", "1", "random")
    }
    assert len(digests) == 1


@pytest.mark.parametrize(
    "family",
    ["needle_single", "aggregation_count", "aggregation_sum", "code_lookup", "table_lookup"],
)
def test_documents_read_like_documents(family: str) -> None:
    env = LongDocEnv()
    task = env.source.build(family, 0.75, 2)  # type: ignore[attr-defined]
    doc = task.metadata["document"]
    assert "lorem" not in doc.lower()
    if task.metadata["kind"] == "code_file":
        ast.parse(doc)  # a long code file is valid Python
        functions = re.findall(r"(?ms)^def .*?(?=^def |\Z)", doc)
        assert len(functions) == len(set(functions))
    else:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", doc) if len(s) > 40]
        repeats = sum(n - 1 for n in Counter(sentences).values())
        assert repeats / len(sentences) < 0.2
        paragraphs = [p for p in doc.split("\n\n") if len(p) > 200]
        assert len(paragraphs) == len(set(paragraphs))


def test_secrets_stay_out_of_the_prompt() -> None:
    env = _env(family="aggregation_sum", difficulty=0.3)
    obs, info = env.reset(seed=4)
    secrets = env.secrets(env.episode.task)  # type: ignore[union-attr]
    assert secrets and not any(s in obs for s in secrets)


def test_full_mode_single_step() -> None:
    env = _env(family="comparison", difficulty=0.2)
    obs, info = env.reset(seed=1)
    assert "<document>" in obs and info["tools"] == [] and info["subtask"] is None
    _, reward, terminated, _, info = env.step(env.oracle_action())
    assert reward == 1.0 and terminated and info["is_success"]
    assert set(info["reward_components"]) >= {"correctness", "citation", "dump_penalty"}


@pytest.mark.parametrize("mode", [{}, {"mode": "tools"}, {"subtask_mode": "sequential"}])
def test_ten_megabyte_answers_are_fast_and_score_nothing(mode: dict[str, Any]) -> None:
    env = _env(**mode)
    env.reset(seed=0)
    start = time.perf_counter()
    _, reward, *_ = env.step("<answer>" + "x" * 10_000_000 + "</answer>")
    assert time.perf_counter() - start < 1.0 and reward == 0.0


# --- chunked reading -------------------------------------------------------------------------------


def test_sequential_reading_hands_over_chunks_and_grades_notes() -> None:
    env = _env(
        subtask_mode="sequential",
        chunk_tokens=512,
        notes_tokens=64,
        family="needle_multikey",
        difficulty=0.3,
    )
    obs, info = env.reset(seed=2)
    task = env.episode.task  # type: ignore[union-attr]
    chunks = [s for s in task.subtasks if s.id.startswith("chunk-")]
    assert len(chunks) >= 3 and info["subtask"] == {
        "index": 0,
        "total": len(chunks) + 1,
        "id": "chunk-1",
    }
    assert "<document_part>" in obs and "<document>" not in obs
    doc = task.metadata["document"]
    assert "".join(doc[s.metadata["start"] : s.metadata["end"]] for s in chunks) == doc
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        total += reward
        if terminated or truncated:
            break
        assert "<notes>" in obs  # each observation carries the notes so far
    assert total == pytest.approx(2.0) and info["is_success"]


def test_sequential_notes_over_budget_are_cut_and_penalised() -> None:
    env = _env(
        subtask_mode="sequential",
        chunk_tokens=256,
        notes_tokens=16,
        family="needle_single",
        difficulty=0.0,
    )
    env.reset(seed=0)
    ep = env.episode
    assert ep is not None
    facts_chunk = next(s for s in ep.subtasks if s.weight > 0)
    while ep.subtasks[ep.subtask_index].id != facts_chunk.id:
        env.step(env.oracle_action())
    value = facts_chunk.answer[0][0]
    _, _, _, _, info = env.step(f"<notes>{'filler ' * 40} {value}</notes>")
    assert info["subtask_rewards"][facts_chunk.id] == 0.0  # the fact fell past the budget
    assert "cut" in info["feedback"]


def test_chunk_bounds_cover_the_text() -> None:
    text = "para one.\n\npara two is longer.\n\nthree\nfour\n\nfive"
    bounds = chunk_bounds(text, 12)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))


# --- tool mode ----------------------------------------------------------------------------------


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def test_tool_mode_search_read_and_answer() -> None:
    env = _env(mode="tools", family="needle_single", difficulty=0.5)
    obs, info = env.reset(seed=3)
    assert [t["function"]["name"] for t in info["tools"]] == ["search", "read"]
    assert "<document>" not in obs
    task = env.episode.task  # type: ignore[union-attr]
    question = task.metadata["question"]
    key = re.search(r"for the (.+)\?|of the (.+)\?", question)
    assert key is not None
    obs, reward, terminated, _, info = env.step(
        _call("search", query=(key.group(1) or key.group(2)))
    )
    support = task.answer["support"][0]["section"]
    assert not terminated and reward == 0.0 and support in obs
    assert info["messages"][-1]["role"] == "tool"
    obs, *_ = env.step(_call("read", section=support))
    assert task.answer["gold"] in obs
    obs, *_ = env.step(
        '<tool_call>{"name": "read", "arguments": {"start_line": 1, "end_line": 3}}</tool_call>'
    )
    assert task.metadata["document"].splitlines()[0] in obs
    _, reward, terminated, _, info = env.step(task.metadata["oracle"])
    assert terminated and reward == 1.0


def test_tool_mode_budget_and_bad_calls() -> None:
    env = _env(mode="tools", context_budget=50, family="needle_single", difficulty=0.3)
    env.reset(seed=5)
    obs, *_ = env.step(_call("read", section="S1"))
    assert "context budget" in obs
    obs, *_ = env.step(_call("read", section="S2"))
    assert "used up" in obs
    env.reset(seed=5)
    for call, expected in (
        (_call("delete_everything"), "unknown tool"),
        (_call("read", section="S99999"), "no section"),
        (_call("read", section=["S1"]), "section id"),
        (_call("read", start_line="x"), "start_line"),
        (_call("search", query=""), "non-empty"),
        (
            {
                "content": "",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{not json"},
                    }
                ],
            },
            "error",
        ),
    ):
        obs, reward, terminated, *_ = env.step(call)
        assert expected in obs and reward == 0.0 and not terminated


def test_tool_mode_truncates_after_max_turns() -> None:
    env = _env(mode="tools", max_turns=2)
    env.reset(seed=0)
    env.step(_call("search", query="code"))
    *_, terminated, truncated, _ = env.step(_call("search", query="code"))
    assert truncated and not terminated


# --- datasets ---------------------------------------------------------------------------------------


def test_longbench_jsonl() -> None:
    source = load_dataset(DATA / "longbench_sample.jsonl", "longbench")
    tasks = {t.id: t for t in source}  # type: ignore[attr-defined]
    assert tasks["lb-trec-1"].answer["distractors"] == ["Numeric value", "Location", "Entity"]
    assert tasks["lb-count-1"].answer["type"] == "number"
    env = LongDocEnv(tasks=DATA / "longbench_sample.jsonl", dataset_format="longbench")
    llmgym.check_env(env)
    env.reset(options={"task_id": "lb-trec-1"})
    assert env.step("<answer>Human being or Location</answer>")[1] == 0.0
    env.reset(options={"task_id": "lb-hotpot-1"})
    assert env.step("<answer>Dunmore</answer>")[1] == 1.0


def test_hotpotqa_jsonl_with_citations_and_modes() -> None:
    for kwargs in ({}, {"mode": "tools"}, {"subtask_mode": "sequential", "chunk_tokens": 32}):
        env = LongDocEnv(
            tasks=str(DATA / "hotpotqa_sample.jsonl"), dataset_format="hotpotqa", **kwargs
        )
        llmgym.check_env(env)
    env = LongDocEnv(tasks=DATA / "hotpotqa_sample.jsonl", dataset_format="hotpotqa")
    env.reset(options={"task_id": "hp-1"})
    _, reward, *_ = env.step("<answer>Castellan Shipping</answer><cite>S1, S2</cite>")
    assert reward == 1.0
    env.reset(options={"task_id": "hp-1"})
    _, reward, *_ = env.step("<answer>Castellan Shipping</answer><cite>S3</cite>")
    assert reward == pytest.approx(0.8)
    env.reset(options={"task_id": "hp-2"})
    assert env.step("<answer>no</answer>")[1] == 0.0


@pytest.mark.parametrize(
    "record, fmt",
    [
        ({"input": "q", "context": 3, "answers": ["a"]}, "longbench"),
        ({"input": "q", "context": "c", "answers": []}, "longbench"),
        ({"question": "q", "answer": "a", "context": "not a list"}, "hotpotqa"),
        ({"question": "q", "answer": "a", "context": [["title only"]]}, "hotpotqa"),
        ({"id": "x", "prompt": "q"}, None),
    ],
)
def test_malformed_records_are_rejected_clearly(record: dict[str, Any], fmt: str | None) -> None:
    with pytest.raises(error.InvalidTask):
        load_dataset([record], fmt)


def test_bad_arguments_raise_clear_errors() -> None:
    for kwargs in (
        {"mode": "chunks"},
        {"length_range": (0, 10)},
        {"chunk_tokens": 0},
        {"citation_weight": 2.0},
        {"mode": "tools", "subtask_mode": "sequential"},
        {"tasks": [], "dataset_format": "squad"},
    ):
        with pytest.raises(error.Error):
            LongDocEnv(**kwargs)


def test_former_module_paths_still_import() -> None:
    """The writers moved into ``writers/`` (two renamed for what they write); the old paths stay."""
    moved = {
        "cast": "writers.cast",
        "codefile": "writers.code_file",
        "contract": "writers.contract",
        "document": "writers.document",
        "incidents": "writers.incident_log",
        "manual": "writers.manual",
        "minutes": "writers.minutes",
        "policy": "writers.corporate_policy",
        "report": "writers.annual_report",
        "tokens": "writers.tokens",
        "vocab": "writers.vocab",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in moved.items():
            former = importlib.import_module(f"llmgym.envs.longdoc.{old}")
            assert former is importlib.import_module(f"llmgym.envs.longdoc.{new}"), old
        from llmgym.envs.longdoc.report import AnnualReport
        from llmgym.envs.longdoc.writers.annual_report import AnnualReport as Moved
    assert AnnualReport is Moved
