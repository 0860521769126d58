"""Built-in environments, registered under ``llm/`` when llmgym is imported.

One flat list of string entry points, as in Gymnasium: nothing heavy is imported until an
env is made. A behaviour change bumps the version suffix.
"""

from llmgym.registry import register

# (the domain envs are registered here as they land)
_ = register
