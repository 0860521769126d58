"""Reward results and their composition into a weighted rubric (the reward matrix)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RewardResult:
    """What a verifier says about one answer.

    ``score`` is the scalar reward, ``components`` its named parts (the reward matrix),
    ``feedback`` what the model may be told, ``success`` whether the answer is right. When
    ``success`` is not given it follows the score: ``score >= 1.0`` (full marks on the usual
    0..1 scale); a verifier on another scale says ``success=`` itself.

    >>> RewardResult.of(True, "correct")
    RewardResult(score=1.0, components={'correctness': 1.0}, feedback='correct', success=True)
    >>> RewardResult(1.0).success, RewardResult(0.5).success, RewardResult(0.5, success=True).success
    (True, False, True)
    """

    score: float
    components: dict[str, float] = field(default_factory=dict)
    feedback: str = ""
    success: bool = None  # type: ignore[assignment]  # None: derived from the score

    def __post_init__(self) -> None:
        score = float(self.score)
        if not math.isfinite(score):
            raise ValueError(f"A reward must be finite, actual: {self.score!r}")
        object.__setattr__(self, "score", score)
        object.__setattr__(
            self, "success", score >= 1.0 if self.success is None else bool(self.success)
        )
        object.__setattr__(
            self, "components", {str(k): float(v) for k, v in self.components.items()}
        )

    @classmethod
    def of(cls, correct: bool, feedback: str = "") -> RewardResult:
        """A 0/1 result with a single ``correctness`` component."""
        value = 1.0 if correct else 0.0
        return cls(value, {"correctness": value}, feedback, bool(correct))


@dataclass(frozen=True)
class Rubric:
    """Weights that combine named reward components into one scalar.

    >>> Rubric({"correctness": 10.0, "format": 1.0}).combine({"correctness": 0.5, "format": 1.0})
    6.0
    """

    weights: Mapping[str, float]

    def __post_init__(self) -> None:
        for name, w in self.weights.items():
            if not math.isfinite(float(w)):
                raise ValueError(f"Rubric weight {name!r} must be finite, actual: {w!r}")
        object.__setattr__(self, "weights", {k: float(v) for k, v in self.weights.items()})

    def combine(self, components: Mapping[str, float]) -> float:
        """Sum of ``weight * component`` over the rubric's components (missing ones count 0)."""
        return sum(w * float(components.get(name, 0.0)) for name, w in self.weights.items())

    def weighted(self, components: Mapping[str, float]) -> dict[str, float]:
        """Each component times its weight: what ``reward_components`` reports."""
        return {name: w * float(components.get(name, 0.0)) for name, w in self.weights.items()}
