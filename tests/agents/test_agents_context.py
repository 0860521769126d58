"""Context limits of training rollouts, and loading a model saved in the layout real checkpoints
use (``hf:<dir>``, ``llmgym train --model DIR``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from agents_common import DIGITS_ENV, TOOL_ENV

from llmgym import error
from llmgym.agents import cli
from llmgym.agents.config import ConfigError
from llmgym.agents.context import context_budget, reading_kwargs
from llmgym.agents.rollout import collect, make_env
from llmgym.agents.runlog import read_metrics

LONG_PROMPT = {"task": {"id": "long", "prompt": "word " * 400, "answer": "0"}}


def _collect(model: Any, tok: Any, env_id: str, **kw: Any) -> Any:
    envs = [make_env(env_id) for _ in range(2)]
    try:
        return collect(
            envs,
            model,
            tok,
            seeds=[0, 1],
            options=kw.pop("options", [None, None]),
            generator=torch.Generator().manual_seed(0),
            **kw,
        )
    finally:
        for env in envs:
            env.close()


def test_a_prompt_longer_than_the_budget_is_cut_by_the_documented_rule(tiny_dir: str) -> None:
    from llmgym.agents.hf import render_prompt
    from llmgym.agents.rollout import rollout_metrics
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    env = make_env(DIGITS_ENV)
    _, info = env.reset(options=LONG_PROMPT)
    full = render_prompt(tok, info["messages"])
    assert len(full) > 120
    trajs = _collect(
        model, tok, DIGITS_ENV, options=[LONG_PROMPT] * 2, max_new_tokens=8, max_total_tokens=120
    )
    for t in trajs:
        assert t.prompt_truncated and t.prompt_length == 111
        head = min(256, 111 // 4)  # llmgym.agents.hf.fit_prompt: head kept, then the tail
        assert t.token_ids[:head] == full[:head]
        assert t.token_ids[head:111] == full[len(full) - (111 - head) :]
        assert len(t.token_ids) <= 120
    assert rollout_metrics(trajs)["charts/prompt_truncated_frac"] == 1.0


def test_a_prompt_that_does_not_fit_raises_before_sampling_with_error(tiny_dir: str) -> None:
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    timings: dict[str, float] = {}
    with pytest.raises(error.Error, match="leaves no room for max_new_tokens"):
        _collect(
            model,
            tok,
            DIGITS_ENV,
            options=[LONG_PROMPT] * 2,
            max_new_tokens=8,
            max_total_tokens=120,
            context_overflow="error",
            timings=timings,
        )
    assert "generate_s" not in timings  # nothing was sampled


@pytest.mark.timeout(60)
def test_multi_turn_episodes_never_pass_the_budget(tiny_dir: str) -> None:
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    for budget in (60, 90, 140):
        for t in _collect(model, tok, TOOL_ENV, max_new_tokens=12, max_total_tokens=budget):
            assert len(t.token_ids) <= budget


def test_budget_is_capped_by_the_models_context(tiny_dir: str) -> None:
    from llmgym.agents.tiny import load

    model, tok = load(tiny_dir)
    limit = model.config.max_position_embeddings
    assert context_budget(model, tok, 10**6, 32) == limit
    assert context_budget(model, tok, 100, 32) == 100
    with pytest.raises(ConfigError, match="lower max_new_tokens"):
        context_budget(model, tok, 10**6, limit - 4)


def test_long_documents_that_do_not_fit_are_read_in_chunks(tiny_dir: str) -> None:
    from llmgym.agents.hf import render_prompt
    from llmgym.agents.tiny import load

    _, tok = load(tiny_dir)
    assert reading_kwargs(DIGITS_ENV, {}, tok, 512, 32) == {}
    assert reading_kwargs("llm/LongDoc-v0", {"mode": "full"}, tok, 512, 32) == {}
    short = {"length_range": (64, 200)}
    assert reading_kwargs("llm/LongDoc-v0", short, tok, 512, 32) == {}
    kwargs = {"length_range": (4000, 6000), "difficulty": 0.5}
    extra = reading_kwargs("llm/LongDoc-v0", kwargs, tok, 2048, 32)
    assert extra["subtask_mode"] == "sequential" and extra["tokenizer"] is tok
    env = make_env("llm/LongDoc-v0", {**kwargs, **extra})
    try:
        for seed in range(4):  # the episodes reading_kwargs measured
            _, info = env.reset(seed=seed)
            assert info["subtask"]["total"] > 1  # the document is split
            assert len(render_prompt(tok, info["messages"])) + 32 + 32 < 2048  # + notes, answer
    finally:
        env.close()
    # a budget that cannot hold the instructions and a chunk: a clear error, not a crash later
    with pytest.raises(ConfigError, match="raise max_total_tokens"):
        reading_kwargs("llm/LongDoc-v0", kwargs, tok, 400, 32)


# --- a model in the layout real checkpoints use ---------------------------------------------------

CHATML = (
    "{%- for message in messages -%}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)


@pytest.fixture(scope="module")
def qwen_layout_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny Qwen2 causal LM with a ChatML tokenizer, saved with save_pretrained (config.json,
    model.safetensors, generation_config.json, tokenizer.json, tokenizer_config.json, chat
    template): the files a hub checkpoint has."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from llmgym.agents.tiny import build_tokenizer, default_corpus

    tok = build_tokenizer(default_corpus(300), vocab_size=300)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.pad_token = "<|im_end|>", "<|im_end|>"
    tok.chat_template = CHATML
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("qwen") / "model"
    Qwen2ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    return str(path)


@pytest.mark.timeout(60)
def test_hf_spec_loads_a_checkpoint_directory_with_its_chat_template(qwen_layout_dir: str) -> None:
    from llmgym.policies import Request, load_policy

    policy: Any = load_policy(f"hf:{qwen_layout_dir}", max_new_tokens=4)
    assert type(policy.model).__name__ == "Qwen2ForCausalLM" and policy.context == 256
    (out,) = policy.generate([Request([{"role": "user", "content": "What is 2 + 2?"}])])
    assert out.error is None and 1 <= out.completion_tokens <= 4
    text = policy.tokenizer.decode(out.token_ids)
    assert isinstance(text, str)
    policy.close()


@pytest.mark.timeout(120)
def test_train_command_takes_the_model_directory(qwen_layout_dir: str, tmp_path: Path) -> None:
    config = tmp_path / "grpo.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "algo": "grpo",
                "model": "tiny",
                "env_id": DIGITS_ENV,
                "total_steps": 1,
                "prompts_per_step": 2,
                "group_size": 2,
                "max_new_tokens": 4,
                "progress": False,
                "tensorboard": False,
            }
        )
    )
    args = ["train", "--config", str(config), "--model", qwen_layout_dir]
    assert cli.main([*args, "--output-dir", str(tmp_path / "run")]) == 0
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["model"] == qwen_layout_dir
    assert read_metrics(tmp_path / "run")[0]["step"] == 1
    assert (tmp_path / "run" / "final" / "chat_template.jinja").is_file()
