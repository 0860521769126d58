"""Group-relative advantages: GRPO's normalisation of rewards within each group.

Shared by the GRPO trainer (groups of ``group_size`` episodes of one task) and tree-GRPO (sibling
nodes of a search tree), so neither imports the other. Pure tensor code, unit-tested on small
tensors (tests/agents/test_agents_losses.py).
"""

from __future__ import annotations

from typing import Any

from llmgym.agents.config import ConfigError
from llmgym.agents.grpo_config import SCALE_REWARDS


def group_advantages(rewards: Any, group_size: int, scale: str = "group", eps: float = 1e-4) -> Any:
    """Rewards ``[n_groups * group_size]`` (grouped contiguously) -> advantages of the same shape.

    >>> import torch
    >>> group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 2, "none").tolist()
    [0.5, -0.5, 0.0, 0.0]
    """
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    elif scale == "batch":
        centred = centred / (rewards.std() + eps)
    elif scale != "none":
        raise ConfigError(f"scale_rewards must be one of {SCALE_REWARDS}, got {scale!r}")
    return centred.reshape(-1)
