"""Built-in environments, registered under ``llm/`` when llmgym is imported.

One flat list of string entry points, as in Gymnasium: nothing heavy is imported until an
env is made. A behaviour change bumps the version suffix.
"""

from llmgym.registry import register

# --- math (envs/math/) ------------------------------------------------------------------------

# --- coding (envs/coding/) --------------------------------------------------------------------

# --- tool calling (envs/tools/) ---------------------------------------------------------------

# --- long documents (envs/longdoc/) -----------------------------------------------------------

# --- joint training (envs/mixture.py) ---------------------------------------------------------

_ = register
