"""The reward types, ``RewardResult`` and ``Rubric``: defined in the core
(:mod:`llmgym.verifiers`, so the env base class needs nothing from this layer) and named here
for the verifiers that import them from their own layer."""

from llmgym.verifiers import RewardResult, Rubric

__all__ = ["RewardResult", "Rubric"]
