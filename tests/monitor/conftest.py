"""Fixtures of the monitor tests: a tiny saved model, the phase test env, and the headless
chromium of the evaluation report tests (shared, not copied)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))

from monitor_envs import GRADED, PHASE_ENV, PhaseEnv  # noqa: E402
from test_eval_report import browser  # noqa: E402, F401 - the fixture, shared

import llmgym  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A saved nano tiny model (the agents tests' recipe)."""
    import torch

    from llmgym.agents.tiny import TinyConfig, build_tiny, default_corpus

    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny(
        TinyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, vocab_size=320),
        corpus=default_corpus(200),
        output_dir=path,
    )
    return str(path)


@pytest.fixture(autouse=True)
def phase_env() -> Iterator[str]:
    """Register the phase env for one test (the registry-wide tests must not see it)."""
    import gymnasium as gym

    GRADED["episodes"] = 0
    llmgym.register(PHASE_ENV, PhaseEnv)
    try:
        yield PHASE_ENV
    finally:
        del gym.registry[PHASE_ENV]
