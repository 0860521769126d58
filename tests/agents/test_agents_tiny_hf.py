"""Tiny models and tokenizers built locally; the HF policy and its sampler."""

from __future__ import annotations

import pytest
import torch
from agents_common import MATH, MATH_KWARGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym
from llmgym.agents import Request, load_policy
from llmgym.agents.hf import HFPolicy, parse_tool_calls, render_prompt, sample
from llmgym.agents.tiny import CHAT_TEMPLATE, TinyConfig, build_tiny, load, load_model_and_tokenizer


def test_build_save_load_roundtrip(tmp_path) -> None:
    cfg = TinyConfig(
        arch="gpt2", hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, vocab_size=300
    )
    model, tok = build_tiny(cfg, output_dir=tmp_path / "m")
    again, tok2 = load(tmp_path / "m")
    ids = torch.tensor([tok.encode("What is 1 + 2?")])
    assert torch.equal(model(ids).logits, again(ids).logits)
    assert tok2.chat_template == CHAT_TEMPLATE and tok2.eos_token == "<|end|>"
    assert (tmp_path / "m" / "tiny_config.json").is_file()


def test_same_config_same_weights() -> None:
    cfg = TinyConfig(
        hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, vocab_size=300, seed=3
    )
    a, _ = build_tiny(cfg)
    b, _ = build_tiny(cfg)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"arch": "mamba"}, "arch"),
        ({"hidden_size": 30, "num_heads": 4}, "num_heads"),
        ({"vocab_size": 10}, "vocab_size"),
        ({"num_layers": 0}, "num_layers"),
    ],
)
def test_tiny_config_rejects_bad_shapes(kwargs: dict, match: str) -> None:
    with pytest.raises(llmgym.error.Error, match=match):
        TinyConfig(**kwargs)


def test_model_spec_errors_say_what_to_do(tmp_path) -> None:
    with pytest.raises(llmgym.error.Error, match="tiny"):
        load_model_and_tokenizer(str(tmp_path / "missing-model-dir"))
    with pytest.raises(llmgym.error.Error, match="preset"):
        build_tiny("huge")


@pytest.fixture(scope="module")
def tokenizer(tiny_dir: str):
    return load(tiny_dir)[1]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_any_unicode_renders(tokenizer, text: str) -> None:
    tok = tokenizer
    ids = render_prompt(tok, [{"role": "user", "content": text}])
    assert ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    decoded = tok.decode(ids)
    assert decoded.startswith("<|user|>") and decoded.endswith("<|end|><|assistant|>")


def test_sampler_logprobs_match_a_full_forward_with_left_padding(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    prompts = [
        render_prompt(tok, [{"role": "user", "content": c}])
        for c in ("hi", "What is 12 + 30? Be brief.")
    ]
    out = sample(
        model,
        prompts,
        max_new_tokens=6,
        stop_ids=[tok.eos_token_id],
        pad_id=tok.pad_token_id,
        generator=torch.Generator().manual_seed(0),
    )
    for prompt, ids, lps in zip(prompts, out.token_ids, out.logprobs, strict=True):
        with torch.no_grad():
            full = (
                model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].log_softmax(-1)
            )
        ref = full.gather(-1, torch.tensor(ids)[:, None])[:, 0]
        assert torch.allclose(ref, torch.tensor(lps), atol=1e-4)


def test_sampler_greedy_is_batch_invariant_and_stops(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    p1 = render_prompt(tok, [{"role": "user", "content": "a"}])
    p2 = render_prompt(tok, [{"role": "user", "content": "a much longer prompt than the other"}])
    alone = sample(
        model, [p1], max_new_tokens=5, stop_ids=[tok.eos_token_id], pad_id=0, temperature=0
    )
    both = sample(
        model, [p2, p1], max_new_tokens=5, stop_ids=[tok.eos_token_id], pad_id=0, temperature=0
    )
    assert alone.token_ids[0] == both.token_ids[1]
    first = alone.token_ids[0][0]
    stopped = sample(model, [p1], max_new_tokens=5, stop_ids=[first], pad_id=0, temperature=0)
    assert stopped.token_ids[0] == [first] and stopped.finished == [True]
    assert alone.finished == [alone.token_ids[0][-1] == tok.eos_token_id]


def test_sampler_top_k_one_is_greedy(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    p = [render_prompt(tok, [{"role": "user", "content": "x"}])]
    greedy = sample(
        model, p, max_new_tokens=6, stop_ids=[tok.eos_token_id], pad_id=0, temperature=0
    )
    top1 = sample(
        model,
        p,
        max_new_tokens=6,
        stop_ids=[tok.eos_token_id],
        pad_id=0,
        temperature=1.0,
        top_k=1,
        generator=torch.Generator().manual_seed(5),
    )
    tiny_p = sample(
        model,
        p,
        max_new_tokens=6,
        stop_ids=[tok.eos_token_id],
        pad_id=0,
        temperature=1.0,
        top_p=1e-6,
        generator=torch.Generator().manual_seed(5),
    )
    assert greedy.token_ids == top1.token_ids == tiny_p.token_ids


def test_sampler_rejects_empty_prompts(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    assert sample(model, [], max_new_tokens=3, stop_ids=[1], pad_id=0).token_ids == []
    with pytest.raises(llmgym.error.Error, match="at least one token"):
        sample(model, [[]], max_new_tokens=3, stop_ids=[1], pad_id=0)
    with pytest.raises(llmgym.error.Error, match="max_new_tokens"):
        sample(model, [[5]], max_new_tokens=0, stop_ids=[1], pad_id=0)


def test_hf_policy_from_spec_plays_an_env(tiny_dir: str) -> None:
    policy = load_policy(f"hf:{tiny_dir}", temperature=0.0, max_new_tokens=8)
    assert isinstance(policy, HFPolicy) and policy.spec == f"hf:{tiny_dir}"
    env = llmgym.make(MATH, **MATH_KWARGS)
    _, info = env.reset(seed=0)
    reqs = [
        Request(info["messages"], info["tools"]),
        Request([{"role": "user", "content": "\ud800 \x00 ☃"}]),
        Request([]),
    ]
    out = policy.generate(reqs)
    assert len(out) == 3
    assert (
        out[0].error is None
        and out[0].token_ids
        and len(out[0].logprobs or []) == len(out[0].token_ids)
    )
    assert out[0].completion_tokens == len(out[0].token_ids) and out[0].prompt_tokens > 0
    assert out[1].error is None
    env.step(out[0].action)  # whatever it says is a valid action
    again = load_policy(f"hf:{tiny_dir}", temperature=0.0, max_new_tokens=8).generate(reqs[:1])
    assert again[0].action == out[0].action
    policy.close()


def test_hf_policy_rejects_bad_settings(tiny_dir: str) -> None:
    model, tok = load(tiny_dir)
    with pytest.raises(llmgym.error.Error, match="temperature"):
        HFPolicy(model, tok, temperature=-1)
    with pytest.raises(llmgym.error.Error, match="hf:<path"):
        HFPolicy.from_spec("")


def test_parse_tool_calls_hostile_inputs() -> None:
    assert parse_tool_calls("") == ""
    assert parse_tool_calls("<tool_call>[1, 2]</tool_call>") == "<tool_call>[1, 2]</tool_call>"
    assert (
        parse_tool_calls('<tool_call>{"name": 3}</tool_call>')
        == '<tool_call>{"name": 3}</tool_call>'
    )
    two = parse_tool_calls(
        '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b", "arguments": "{}"}</tool_call>'
    )
    assert isinstance(two, dict) and [c["function"]["name"] for c in two["tool_calls"]] == [
        "a",
        "b",
    ]
    assert two["tool_calls"][0]["function"]["arguments"] == {}


def test_hf_policy_prompts_longer_than_the_context_never_allocate_past_it(tiny_dir: str) -> None:
    """A 128k-token LongDoc prompt once made the policy try to allocate 67-168 GB. A prompt
    that does not fit the context (512 positions here) with max_new_tokens after it is cut by
    the documented rule, or fails alone with a clear error, before any allocation."""
    from llmgym.agents.hf import context_length, fit_prompt, render_prompt

    model, tok = load(tiny_dir)
    assert context_length(model, tok) == 512
    long = Request([{"role": "user", "content": "word " * 5000}])
    short = Request([{"role": "user", "content": "hi"}])
    assert len(render_prompt(tok, long.messages)) > 2000
    strict = HFPolicy(model, tok, temperature=0.0, max_new_tokens=8, context_overflow="error")
    out = strict.generate([long, short])
    assert out[0].error and "context of 512 tokens" in out[0].error and out[0].action == ""
    assert out[1].error is None
    cutting = HFPolicy(model, tok, temperature=0.0, max_new_tokens=8)
    out = cutting.generate([long, short])
    assert out[0].error is None and out[1].error is None and cutting.truncated_prompts == 1
    ids = render_prompt(tok, long.messages)
    fitted = fit_prompt(ids, 512 - 8)
    assert len(fitted) == 504 and fitted[:126] == ids[:126] and fitted[-378:] == ids[-378:]
    with pytest.raises(llmgym.error.Error, match="context_overflow"):
        HFPolicy(model, tok, context_overflow="drop")
