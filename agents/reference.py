"""Reference models and KL control: fixed or dynamic references, the k3 estimator, adaptive KL.

A fixed reference (classic RLHF) anchors the policy to where it started. A dynamic reference
lets it move (the background articles' "dynamic reference models ... encouraging the model to
explore"): ``refresh`` copies the policy into the reference every ``update_every`` steps (a hard
update), ``mix`` moves it a fraction ``alpha`` toward the policy every ``update_every`` steps
(a soft, exponential-moving-average update). The adaptive controller (Ziegler et al., 2019)
scales the KL coefficient so the measured KL tracks a target.

>>> import torch
>>> float(k3(torch.tensor([0.0]), torch.tensor([0.0])))
0.0
>>> kl = AdaptiveKLController(0.1, target=1.0, horizon=100)
>>> kl.update(current=2.0, n_steps=10); round(kl.value, 4)
0.102
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from llmgym import error

REFERENCE_MODES = ("fixed", "refresh", "mix")


def k3(logprobs: Any, ref_logprobs: Any) -> Any:
    """Per-token k3 estimate of KL(policy || reference): ``exp(r) - r - 1`` with ``r = ref - logp``.

    Unbiased, always >= 0, and low-variance (Schulman's "Approximating KL divergence").
    """
    import torch

    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


class ReferenceModel:
    """A frozen copy of the policy, fixed or updated toward it (``mode`` in :data:`REFERENCE_MODES`)."""

    def __init__(
        self, policy: Any, *, mode: str = "fixed", update_every: int = 0, alpha: float = 0.1
    ):
        if mode not in REFERENCE_MODES:
            raise error.Error(f"Reference mode must be one of {REFERENCE_MODES}, got {mode!r}")
        if mode != "fixed" and update_every < 1:
            raise error.Error(
                f"A {mode!r} reference needs update_every >= 1 (steps between updates)"
            )
        if mode == "mix" and not 0 < alpha <= 1:
            raise error.Error(f"A 'mix' reference needs 0 < alpha <= 1, got {alpha}")
        self.mode = mode
        self.update_every = update_every
        self.alpha = alpha
        self.model = copy.deepcopy(policy)
        self.model.eval()
        self.model.requires_grad_(False)
        self.updates = 0

    def active(self) -> contextlib.AbstractContextManager[None]:
        """Where ``self.model`` computes the reference's outputs (always: it is its own copy)."""
        return contextlib.nullcontext()

    def update(self, policy: Any, step: int) -> bool:
        """Apply the mode's update after training step ``step``; True when the reference changed."""
        import torch

        if self.mode == "fixed" or step % self.update_every:
            return False
        with torch.no_grad():
            for ref_p, p in zip(self.model.parameters(), policy.parameters(), strict=True):
                if self.mode == "refresh":
                    ref_p.copy_(p.detach())
                else:
                    ref_p.mul_(1 - self.alpha).add_(p.detach(), alpha=self.alpha)
        self.updates += 1
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.updates = int(state["updates"])


class FixedKLController:
    """A constant KL coefficient."""

    def __init__(self, value: float):
        self.value = float(value)

    def update(self, current: float, n_steps: int) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = float(state["value"])


class AdaptiveKLController(FixedKLController):
    """Multiplies the coefficient by ``1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon``.

    Above the target the penalty grows, below it shrinks; ``horizon`` (in samples) sets how fast.
    """

    def __init__(self, value: float, *, target: float, horizon: int):
        if target <= 0 or horizon < 1:
            raise error.Error("AdaptiveKLController needs target > 0 and horizon >= 1")
        super().__init__(value)
        self.target = float(target)
        self.horizon = int(horizon)

    def update(self, current: float, n_steps: int) -> None:
        proportional_error = min(max(current / self.target - 1, -0.2), 0.2)
        self.value *= 1 + proportional_error * n_steps / self.horizon
