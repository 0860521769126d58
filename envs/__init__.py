"""Built-in environments, registered under ``llm/`` when llmgym is imported.

One flat list of string entry points, as in Gymnasium: nothing heavy is imported until an
env is made. A behaviour change bumps the version suffix.
"""

from llmgym._moved import keep_former_paths
from llmgym.registry import register

# The declarative env is core machinery now (llmgym.declarative); its former path still imports.
keep_former_paths(__name__, {"declarative": "llmgym.declarative"})

# --- math (envs/math/) ------------------------------------------------------------------------

register(id="llm/Math-v0", entry_point="llmgym.envs.math:MathEnv")

# --- coding (envs/coding/) --------------------------------------------------------------------

register(id="llm/Coding-v0", entry_point="llmgym.envs.coding:CodingEnv")
register(id="llm/CodingMultiTurn-v0", entry_point="llmgym.envs.coding:CodingMultiTurnEnv")
register(id="llm/CodeRepair-v0", entry_point="llmgym.envs.coding:CodeRepairEnv")

# --- tool calling (envs/tools/) ---------------------------------------------------------------

register(id="llm/ToolCalling-v0", entry_point="llmgym.envs.tools.env:ToolCallingEnv")
register(
    id="llm/FunctionCalling-v0", entry_point="llmgym.envs.tools.function_calling:FunctionCallingEnv"
)

# --- long documents (envs/longdoc/) -----------------------------------------------------------

register(id="llm/LongDoc-v0", entry_point="llmgym.envs.longdoc:LongDocEnv")

# --- instruction following (envs/instruct/) ---------------------------------------------------

register(id="llm/Instruct-v0", entry_point="llmgym.envs.instruct:InstructEnv")

# --- bridged task libraries (envs/reasoning/; needs the reasoning extra) ----------------------

register(id="llm/ReasoningGym-v0", entry_point="llmgym.envs.reasoning:ReasoningGymEnv")

# --- joint training (envs/mixture.py) ---------------------------------------------------------

register(id="llm/Mixture-v0", entry_point="llmgym.envs.mixture:MixtureEnv")

_ = register
