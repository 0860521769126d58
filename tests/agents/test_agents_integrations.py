"""TRL and verl integrations: reward functions, datasets, environment_factory, compute_score."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import pytest
from agents_common import DIGITS_ENV, MATH, MATH_KWARGS, TOOL_ENV

import llmgym
from llmgym.integrations.trl import (
    LLMGymToolEnv,
    environment_factory,
    prompt_dataset,
    reward_function,
    tool_names,
)
from llmgym.integrations.verl import compute_score, dataset_rows

# --- TRL pieces without a trainer ----------------------------------------------------------------


def test_prompt_dataset_and_reward_function_grade_by_task_id() -> None:
    ds = prompt_dataset(MATH, 4, env_kwargs=MATH_KWARGS, seed=10)
    assert ds.column_names == ["prompt", "task_id", "env_id", "seed"] and len(ds) == 4
    env = llmgym.make(MATH, **MATH_KWARGS)
    env.reset(options={"task_id": ds[0]["task_id"]})
    gold = env.unwrapped.episode.task.answer
    rf = reward_function(MATH, MATH_KWARGS)
    completions = [
        [{"role": "assistant", "content": f"\\boxed{{{gold}}}"}],
        "\\boxed{-1}",
        "",
        [{"role": "assistant", "content": None}],
    ]
    rewards = rf(prompts=ds["prompt"], completions=completions, task_id=[ds[0]["task_id"]] * 4)
    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert rf.__name__ == "reward_llm_Math_v0"
    success = reward_function(MATH, MATH_KWARGS, success=True)
    assert success(prompts=[], completions=[f"\\boxed{{{gold}}}"], task_id=[ds[0]["task_id"]]) == [
        1.0
    ]
    with pytest.raises(llmgym.error.Error, match="task_id"):
        rf(prompts=[], completions=["x"])


def test_tool_env_adapter_exposes_typed_tools_and_steps_the_env() -> None:
    from transformers.utils import get_json_schema

    factory = environment_factory(TOOL_ENV)
    assert tool_names(factory) == ["add"]
    adapter = factory()
    schema = get_json_schema(adapter.add)
    assert schema["function"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert schema["function"]["parameters"]["required"] == ["a", "b"]
    assert list(inspect.signature(type(adapter).add).parameters) == ["self", "a", "b"]
    ds = prompt_dataset(TOOL_ENV, 1)
    adapter.reset(**ds[0])
    task = adapter.env.unwrapped.episode.task
    result = adapter.add(a=task.metadata["a"], b=task.metadata["b"])
    assert result == task.answer
    rf = reward_function(TOOL_ENV)
    final = [{"role": "assistant", "content": str(task.answer)}]
    assert rf(prompts=ds["prompt"], completions=[final], environments=[adapter]) == [1.0]
    assert adapter.add(a=1, b=1).startswith("The episode has ended")
    with pytest.raises(llmgym.error.Error, match="no tools"):
        environment_factory(MATH, MATH_KWARGS)


def _sft_tool_caller(out: Path) -> str:
    """A tiny model after 100 SFT steps on the tool env's oracle: it emits <tool_call> blocks."""
    from llmgym.agents.sft import SFTConfig, SFTTrainer
    from llmgym.agents.tiny import TinyConfig, build_tiny, default_corpus

    build_tiny(TinyConfig(vocab_size=320), corpus=default_corpus(400), output_dir=out / "base")
    cfg = SFTConfig(
        model=str(out / "base"),
        data=f"env:{TOOL_ENV}",
        num_examples=16,
        total_steps=100,
        batch_size=16,
        learning_rate=3e-3,
        output_dir=str(out),
        progress=False,
        tensorboard=False,
    )
    SFTTrainer(cfg).train()
    return str(out / "final")


def _trl_args(out: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    settings: dict[str, Any] = {
        "output_dir": str(out),
        "use_cpu": True,
        "bf16": False,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 40,
        "max_steps": 2,
        "logging_steps": 1,
        "report_to": "none",
        "learning_rate": 1e-3,
        "save_strategy": "no",
        "disable_tqdm": True,
    }
    settings.update(kw)
    return GRPOConfig(**settings)


@pytest.mark.slow
def test_trl_grpo_trainer_single_turn(tiny_dir: str, tmp_path: Path) -> None:
    from trl import GRPOTrainer

    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=[reward_function(DIGITS_ENV)],
        train_dataset=prompt_dataset(DIGITS_ENV, 16),
        args=_trl_args(tmp_path, max_completion_length=8),
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(h["reward_std"] > 0 for h in logs)  # the env's reward reached TRL
    assert any(not p.detach().equal(b) for p, b in zip(model.parameters(), before, strict=True))


@pytest.mark.slow
def test_trl_grpo_trainer_multi_turn_environment_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trl import GRPOTrainer

    from llmgym.agents.tiny import load

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = load(_sft_tool_caller(tmp_path / "sft"))
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=[reward_function(TOOL_ENV)],
        train_dataset=prompt_dataset(TOOL_ENV, 16),
        args=_trl_args(tmp_path / "trl", temperature=0.5, max_completion_length=64),
        environment_factory=environment_factory(TOOL_ENV),
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "tools/call_frequency" in h]
    assert (
        logs and max(h["tools/call_frequency"] for h in logs) > 0
    )  # TRL's loop called the env's tool
    pooled = [e for pool in trainer._environment_pool.values() for e in pool]
    assert any(isinstance(e, LLMGymToolEnv) and e.done for e in pooled)
    assert os.environ["TRL_EXPERIMENTAL_SILENCE"] == "1"


# --- verl ---------------------------------------------------------------------------------------------


def test_verl_compute_score_and_rows() -> None:
    rows = dataset_rows(MATH, 3, env_kwargs=MATH_KWARGS, seed=5)
    assert [r["extra_info"]["seed"] for r in rows] == [5, 6, 7]
    row = rows[0]
    assert (
        row["data_source"] == MATH
        and row["ability"] == "math"
        and row["reward_model"]["style"] == "rule"
    )
    env = llmgym.make(MATH, **MATH_KWARGS)
    env.reset(options={"task_id": row["reward_model"]["ground_truth"]})
    gold = env.unwrapped.episode.task.answer
    good = compute_score(
        row["data_source"],
        f"so \\boxed{{{gold}}}",
        row["reward_model"]["ground_truth"],
        row["extra_info"],
    )
    assert good["score"] == 1.0 and good["acc"] == 1.0 and good["component/correctness"] == 1.0
    assert (
        compute_score(
            MATH, "\x00\ud800" * 1000, row["reward_model"]["ground_truth"], row["extra_info"]
        )["score"]
        == 0.0
    )


@pytest.mark.parametrize(
    ("source", "truth", "extra"),
    [
        ("llm/Nope-v0", "x", None),
        (MATH, "not-a-task-id", {}),
        (MATH, "x", {"env_kwargs": "{not json"}),
        (MATH, None, "oops"),
    ],
)
def test_verl_compute_score_never_raises_on_bad_rows(source: str, truth: Any, extra: Any) -> None:
    out = compute_score(source, "\\boxed{1}", truth, extra)
    assert out["score"] == 0.0 and "error" in out
