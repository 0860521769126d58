"""The policies, re-exported from the core where they live (:mod:`llmgym.policies`)."""

from llmgym.policies import (
    CallablePolicy,
    Message,
    OraclePolicy,
    Policy,
    Request,
    Response,
    load_policy,
)

__all__ = [
    "CallablePolicy",
    "Message",
    "OraclePolicy",
    "Policy",
    "Request",
    "Response",
    "load_policy",
]
