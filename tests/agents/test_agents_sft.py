"""SFT: assistant-only masks laid out like the RL rollouts, text pretraining, exact resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from agents_common import TOOL_ENV

import llmgym
from llmgym.agents.checkpoint import save_checkpoint
from llmgym.agents.sft import (
    SFTConfig,
    SFTTrainer,
    conversation_tokens,
    oracle_conversations,
    text_tokens,
    write_jsonl,
)
from llmgym.agents.tiny import load


def test_conversation_mask_covers_exactly_the_assistant_turns(tiny_dir: str) -> None:
    _, tok = load(tiny_dir)
    (conv,) = oracle_conversations(TOOL_ENV, {}, [4])
    ids, mask = conversation_tokens(tok, conv["messages"], conv["tools"])
    assert len(ids) == len(mask)
    trained = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    untrained = tok.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    answer = conv["messages"][-1]["content"]
    assert trained.startswith("<tool_call>") and trained.endswith(f"{answer}<|end|>")
    assert trained.count("<|end|>") == 2  # each assistant turn's end token is learned
    assert "<|tool|>" in untrained and "<|user|>" in untrained and "<|assistant|>" in untrained
    full = tok.apply_chat_template(conv["messages"], tools=conv["tools"], tokenize=False)
    assert tok.decode(ids) == full


def test_text_tokens_train_everything(tiny_dir: str) -> None:
    _, tok = load(tiny_dir)
    ids, mask = text_tokens(tok, "1 + 2 = 3. \ud800")
    assert all(mask) and ids[-1] == tok.eos_token_id


def test_sft_learns_and_resumes_exactly(tiny_dir: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"{i} + {i} = {2 * i}."} for i in range(12)])

    def cfg(out: str, steps: int, **kw: object) -> SFTConfig:
        return SFTConfig(
            model=tiny_dir,
            data=str(data),
            output_dir=str(tmp_path / out),
            total_steps=steps,
            batch_size=4,
            learning_rate=3e-3,
            save_every=2,
            progress=False,
            tensorboard=False,
            **kw,  # type: ignore[arg-type]
        )

    straight = SFTTrainer(cfg("a", 4))
    first_loss = straight.train_step()["losses/sft"]
    last = straight.train()["losses/sft"]
    assert last < first_loss
    part = SFTTrainer(cfg("b", 4))  # the same run, stopped after its step-2 checkpoint
    while part.step < 2:
        part.train_step()
    save_checkpoint(part.accelerator, tmp_path / "b", 2, extra={"order": part._order})
    del part
    resumed = SFTTrainer(cfg("b", 4, resume=True))
    assert resumed.step == 2
    resumed.train()
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_sft_rejects_records_without_text_or_messages(tiny_dir: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "x"}])
    with pytest.raises(llmgym.error.Error, match="needs 'messages'"):
        SFTTrainer(
            SFTConfig(
                model=tiny_dir, data=str(data), output_dir=str(tmp_path / "o"), progress=False
            )
        )
