"""A dense test reward (importable by subprocesses through PYTHONPATH=tests/agents)."""

from __future__ import annotations

from llmgym.rewards import RewardResult


def length_reward(response: str, gold: object) -> RewardResult:
    """min(1, characters / 40): every random completion scores differently, so groups carry signal."""
    score = min(1.0, len(response.strip()) / 40)
    return RewardResult(score, {"correctness": score}, f"{score:.2f}", score >= 1.0)
