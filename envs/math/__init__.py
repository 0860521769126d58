"""The math domain: ``llm/Math-v0`` (procedural families and math datasets, exact answers)."""

from llmgym.envs.math.env import MathEnv

__all__ = ["MathEnv"]
