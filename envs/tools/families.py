"""Every ToolCalling family, gathered from the domain modules (importing them registers their tools)."""

from __future__ import annotations

from llmgym.envs.tools import (
    banking,
    calc,
    crm,
    expenses,
    files,
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
