"""Policies, trainers (GRPO, PPO on Accelerate), the task scheduler and integrations.

Heavy dependencies (torch, transformers, accelerate) are imported by the modules that use them.
"""

from llmgym.agents.policies import (
    CallablePolicy,
    OraclePolicy,
    Policy,
    Request,
    Response,
    load_policy,
)

__all__ = ["CallablePolicy", "OraclePolicy", "Policy", "Request", "Response", "load_policy"]
