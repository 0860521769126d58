"""The tool-calling task catalogue, as plain lists: the back-end systems, ``llm/ToolCalling-v0``'s
families and ``llm/FunctionCalling-v0``'s procedural families.

One theme per module: each back-end module (``hr.py``, ``orders.py``...) holds one system (schema,
seed, tools, policy rules, as a :class:`llmgym.envs.tools.scenario.Module`) and the families
written on it; ``workflows.py`` chains several systems; ``function_calls.py`` asks for one message
of calls. Nothing here registers itself: the package :mod:`llmgym.envs.tools` hands
:data:`MODULES` to the scenario machinery, and the envs take their families from these lists.
"""

from __future__ import annotations

from llmgym.envs.tools.families import (
    banking,
    calc,
    crm,
    expenses,
    files,
    function_calls,
    hr,
    kb,
    library,
    orders,
    scheduling,
    tickets,
    travel,
    warehouse,
    workflows,
)

MODULES = [
    hr.MODULE,
    orders.MODULE,
    scheduling.MODULE,
    tickets.MODULE,
    banking.MODULE,
    travel.MODULE,
    crm.MODULE,
    expenses.MODULE,
    library.MODULE,
    warehouse.MODULE,
    files.MODULE,
    calc.MODULE,
    kb.MODULE,
]
"""Every back-end system a task may name in ``metadata["modules"]``."""

FAMILIES = [
    *hr.FAMILIES,
    *orders.FAMILIES,
    *scheduling.FAMILIES,
    *tickets.FAMILIES,
    *banking.FAMILIES,
    *travel.FAMILIES,
    *crm.FAMILIES,
    *expenses.FAMILIES,
    *library.FAMILIES,
    *warehouse.FAMILIES,
    *files.FAMILIES,
    *calc.FAMILIES,
    *kb.FAMILIES,
    *workflows.FAMILIES,
]
"""``llm/ToolCalling-v0``'s families."""

FUNCTION_CALLING_FAMILIES = function_calls.FAMILIES
"""``llm/FunctionCalling-v0``'s procedural families (its other tasks are BFCL's data)."""
