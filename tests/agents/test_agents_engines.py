"""Generation engines: config checks, the missing-vLLM error, the weight stream (full and merged
LoRA) and the sync after each update, with an engine that records what it receives beside the
real HF path."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents_common import DIGITS_ENV, MATH, MATH_KWARGS

from llmgym import error
from llmgym.agents.config import ConfigError
from llmgym.agents.engines import HFEngine, policy_weights
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer


def _cfg(tmp_path: Path, model: str = "tiny", **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {
        "model": model,
        "env_id": MATH,
        "env_kwargs": MATH_KWARGS,
        "output_dir": str(tmp_path / "run"),
        "total_steps": 2,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 4,
        "learning_rate": 1e-2,
        "tensorboard": False,
        "progress": False,
    }
    return GRPOConfig(**{**base, **kw})


# --- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"generation_engine": "vLLM"}, "generation_engine must be one of"),
        ({"generation_engine": ""}, "generation_engine must be one of"),
        ({"vllm_server_url": "http://127.0.0.1:8000"}, "generation_engine: vllm only"),
        ({"generation_engine": "vllm", "vllm_server_url": "ftp://h:1"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": "http://h"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": "http://h:99999"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": "http://u:p@h:1"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": "http://h:1/x?y"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": 8000}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_server_url": "h:1\n"}, "http(s)://host:port"),
        ({"generation_engine": "vllm", "vllm_gpu_memory_utilization": 0}, "(0, 1)"),
        ({"generation_engine": "vllm", "vllm_gpu_memory_utilization": 1.5}, "(0, 1)"),
        (
            {"generation_engine": "vllm", "lora_r": 8, "load_in_4bit": True},
            "4-bit",
        ),
    ],
)
def test_config_rejects_engine_settings_that_cannot_work(
    tmp_path: Path, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _cfg(tmp_path, **settings)


def test_config_accepts_hf_colocated_vllm_and_a_server(tmp_path: Path) -> None:
    assert _cfg(tmp_path).generation_engine == "hf"
    assert _cfg(tmp_path, generation_engine="vllm").vllm_server_url is None
    cfg = _cfg(tmp_path, generation_engine="vllm", vllm_server_url="http://127.0.0.1:8000")
    assert cfg.vllm_server_url == "http://127.0.0.1:8000"


@pytest.mark.parametrize("url", [None, "http://127.0.0.1:8000"])
def test_vllm_missing_is_a_dependency_error_naming_the_extra(
    tiny_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str | None
) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    cfg = _cfg(tmp_path, tiny_dir, generation_engine="vllm", vllm_server_url=url)
    with pytest.raises(error.DependencyNotInstalled, match=r"llmgym\[vllm\]"):
        GRPOTrainer(cfg)


# --- the weight stream -------------------------------------------------------------------------


def test_policy_weights_are_the_models_parameters_by_name(tiny_dir: str) -> None:
    import torch

    from llmgym.agents.tiny import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(tiny_dir)
    streamed = dict(policy_weights(model))
    assert list(streamed) == [n for n, _ in model.named_parameters()]
    state = model.state_dict()
    assert all(torch.equal(streamed[n], state[n]) for n in streamed)


def test_lora_weights_are_the_merged_model_and_leave_the_policy_untouched(tiny_dir: str) -> None:
    import torch

    from llmgym.agents.peft_adapters import apply_lora
    from llmgym.agents.tiny import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(tiny_dir)
    plain_names = [n for n, _ in model.named_parameters()]
    cfg = _cfg(Path("."), lora_r=4, lora_alpha=8)
    model = apply_lora(model, cfg)
    with torch.no_grad():  # lora_B starts at 0 (no delta): give the adapters an effect
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    streamed = dict(policy_weights(model))
    assert list(streamed) == plain_names  # what the plain model (and vLLM) names them
    merged = copy.deepcopy(model).merge_and_unload().state_dict()
    for name, tensor in streamed.items():
        assert torch.allclose(tensor, merged[name], atol=1e-6), name
    bases = {  # each adapted layer's own base weight, by its plain name
        n.removeprefix("base_model.model.").replace(".base_layer", ""): v
        for n, v in before.items()
        if ".base_layer." in n
    }
    assert bases and all(not torch.equal(streamed[n], b) for n, b in bases.items())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # untouched


# --- the sync ----------------------------------------------------------------------------------


class RecordingEngine:
    """An engine with weights of its own (a plain copy of the model) that records every load."""

    holds_weights = True

    def __init__(self, model_dir: str):
        from llmgym.agents.tiny import load_model_and_tokenizer

        self.model, _ = load_model_and_tokenizer(model_dir)
        self.loads: list[list[str]] = []
        self.samples = 0

    def sample(self, prompts: Any, **kwargs: Any) -> Any:
        from llmgym.agents.modeling import sample_completions

        self.samples += 1
        return sample_completions(self.model, prompts, **kwargs)

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> None:
        received = {name: t.clone() for name, t in weights}
        self.loads.append(list(received))
        missing, unexpected = self.model.load_state_dict(received, strict=False)
        assert not unexpected, unexpected
        assert set(missing) <= {"lm_head.weight"}, missing  # tied to the embedding, sent once

    def close(self) -> None:
        return None


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("lora_r", [0, 4])
def test_engine_gets_the_policy_after_every_update_and_samples_every_rollout(
    tiny_dir: str, tmp_path: Path, lora_r: int
) -> None:
    import torch

    engine = RecordingEngine(tiny_dir)
    cfg = _cfg(  # rewards graded by length: groups differ, so every update moves the weights
        tmp_path,
        tiny_dir,
        env_id=DIGITS_ENV,
        env_kwargs={},
        max_new_tokens=8,
        lora_r=lora_r,
        lora_alpha=8,
        learning_rate=5e-2,
    )
    trainer = GRPOTrainer(cfg, engine=engine)
    try:
        for step in (1, 2):
            trainer.train_step()
            assert len(engine.loads) == step  # one sync per update, before the next rollout
        assert engine.samples >= 2
        policy = trainer._unwrapped()
        expected = (
            copy.deepcopy(policy).merge_and_unload().state_dict() if lora_r else policy.state_dict()
        )
        got = engine.model.state_dict()
        assert set(engine.loads[-1]) == {n for n, _ in engine.model.named_parameters()}
        for name, tensor in got.items():
            assert torch.allclose(tensor, expected[name], atol=1e-6), name
        fresh = RecordingEngine(tiny_dir).model.state_dict()
        assert any(not torch.equal(got[n], fresh[n]) for n in got)  # training moved the weights
    finally:
        trainer.close()


def test_hf_engine_is_the_default_and_is_never_synced(tiny_dir: str, tmp_path: Path) -> None:
    trainer = GRPOTrainer(_cfg(tmp_path, tiny_dir, total_steps=1))
    try:
        assert isinstance(trainer.engine, HFEngine) and not trainer.engine.holds_weights
        assert trainer.engine.model is trainer._unwrapped()
        metrics = trainer.train_step()
        assert trainer.weight_sync.syncs == 0 and metrics["charts/episodes"] == 4
        with pytest.raises(error.Error, match="no weights to load"):
            trainer.engine.load_weights(iter([]))
    finally:
        trainer.close()
