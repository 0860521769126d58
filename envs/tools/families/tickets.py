"""Support tickets: agents with levels and workloads; triage, assignment and bulk closing."""

from __future__ import annotations

import random
import sqlite3
from typing import Any, Literal

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    Rule,
    ToolError,
    family,
    full,
    one,
    people,
    rows,
)

SCHEMA = """
CREATE TABLE agents (agent_id INTEGER PRIMARY KEY, name TEXT NOT NULL, team TEXT NOT NULL, level TEXT NOT NULL);
CREATE TABLE tickets (ticket_id INTEGER PRIMARY KEY, customer TEXT NOT NULL, subject TEXT NOT NULL,
                      category TEXT NOT NULL, priority TEXT NOT NULL, status TEXT NOT NULL, agent_id INTEGER,
                      opened TEXT NOT NULL, resolution TEXT);
"""
CATEGORIES = ("billing", "shipping", "account", "technical")
PRODUCTS = (
    "Desk Lamp",
    "Office Chair",
    "Soundbar",
    "Electric Kettle",
    "Camping Tent",
    "Standing Desk",
)
PROBLEMS = {
    "billing": "charged twice for {p}",
    "shipping": "{p} never arrived",
    "account": "cannot log in to order {p}",
    "technical": "{p} stopped working",
}
Priority = Literal["low", "normal", "high", "urgent"]


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)
    for i, person in enumerate(cast[30:38], 1):
        team = CATEGORIES[(i - 1) % len(CATEGORIES)]
        db.execute(
            "INSERT INTO agents VALUES (?, ?, ?, ?)",
            (i, full(person), team, "senior" if i <= 4 else "junior"),
        )
    customers = [full(c) for c in cast[:30]]
    for tid in range(1001, 1071):
        cat = rng.choice(CATEGORIES)
        status = rng.choice(("open", "open", "open", "closed"))
        agent = None if status == "open" and rng.random() < 0.4 else rng.randrange(1, 9)
        opened = f"2024-03-{rng.randrange(1, 15):02d}"
        subject = PROBLEMS[cat].format(p=rng.choice(PRODUCTS))
        priority = rng.choice(("low", "normal", "normal", "high", "urgent"))
        db.execute(
            "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tid,
                rng.choice(customers),
                subject,
                cat,
                priority,
                status,
                agent,
                opened,
                "fixed" if status == "closed" else None,
            ),
        )


def _ticket(db: sqlite3.Connection, ticket_id: int) -> sqlite3.Row:
    row = one(db, "SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,))
    if row is None:
        raise ToolError(f"no ticket {ticket_id}")
    return row


def list_tickets(
    db: sqlite3.Connection,
    status: Literal["open", "closed", "any"] = "open",
    category: str = "",
    customer: str = "",
    unassigned_only: bool = False,
) -> list[dict[str, Any]]:
    """Tickets matching the filters, oldest first (at most 25).

    Args:
        status: Ticket status to match.
        category: billing, shipping, account or technical ("" for all).
        customer: Exact customer name ("" for all).
        unassigned_only: Only tickets without an agent.
    """
    sql = "SELECT ticket_id, customer, subject, category, priority, status, agent_id, opened FROM tickets WHERE 1 = 1"
    params: list[Any] = []
    if status != "any":
        sql += " AND status = ?"
        params.append(status)
    if category.strip():
        sql += " AND category = ?"
        params.append(category.strip().lower())
    if customer.strip():
        sql += " AND lower(customer) = lower(?)"
        params.append(customer.strip())
    if unassigned_only:
        sql += " AND agent_id IS NULL"
    return rows(db, sql + " ORDER BY opened, ticket_id LIMIT 25", params)


def get_ticket(db: sqlite3.Connection, ticket_id: int) -> dict[str, Any]:
    """One ticket in full.

    Args:
        ticket_id: Ticket number.
    """
    return dict(_ticket(db, ticket_id))


def list_agents(db: sqlite3.Connection, team: str = "") -> list[dict[str, Any]]:
    """Support agents with their team, level and current number of open tickets.

    Args:
        team: Only agents of this team (a ticket category), or "" for all.
    """
    sql = (
        "SELECT a.agent_id, a.name, a.team, a.level, (SELECT count(*) FROM tickets t WHERE t.agent_id = a.agent_id "
        "AND t.status = 'open') AS open_tickets FROM agents a"
    )
    params: list[Any] = []
    if team.strip():
        sql += " WHERE a.team = ?"
        params.append(team.strip().lower())
    return rows(db, sql + " ORDER BY a.agent_id", params)


def assign_ticket(db: sqlite3.Connection, ticket_id: int, agent_id: int) -> dict[str, Any]:
    """Assign a ticket to an agent.

    Args:
        ticket_id: Ticket number.
        agent_id: Agent id.
    """
    _ticket(db, ticket_id)
    if one(db, "SELECT 1 FROM agents WHERE agent_id = ?", (agent_id,)) is None:
        raise ToolError(f"no agent {agent_id}")
    db.execute("UPDATE tickets SET agent_id = ? WHERE ticket_id = ?", (agent_id, ticket_id))
    return {"ticket_id": ticket_id, "agent_id": agent_id}


def set_priority(db: sqlite3.Connection, ticket_id: int, priority: Priority) -> dict[str, Any]:
    """Change a ticket's priority.

    Args:
        ticket_id: Ticket number.
        priority: New priority.
    """
    _ticket(db, ticket_id)
    db.execute("UPDATE tickets SET priority = ? WHERE ticket_id = ?", (priority, ticket_id))
    return {"ticket_id": ticket_id, "priority": priority}


def close_ticket(
    db: sqlite3.Connection,
    ticket_id: int,
    resolution: Literal["fixed", "duplicate", "wont_fix", "refunded"],
) -> dict[str, Any]:
    """Close a ticket with a resolution code.

    Args:
        ticket_id: Ticket number.
        resolution: How it was resolved.
    """
    ticket = _ticket(db, ticket_id)
    if ticket["status"] == "closed":
        raise ToolError(f"ticket {ticket_id} is already closed")
    db.execute(
        "UPDATE tickets SET status = 'closed', resolution = ? WHERE ticket_id = ?",
        (resolution, ticket_id),
    )
    return {"ticket_id": ticket_id, "status": "closed"}


def _senior_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "assign_ticket":
        return None
    t = one(db, "SELECT priority FROM tickets WHERE ticket_id = ?", (args.get("ticket_id"),))
    a = one(db, "SELECT level FROM agents WHERE agent_id = ?", (args.get("agent_id"),))
    if t is not None and a is not None and t["priority"] == "urgent" and a["level"] != "senior":
        return f"assigned urgent ticket {args.get('ticket_id')} to a junior agent"
    return None


MODULE = Module(
    "tickets",
    SCHEMA,
    seed,
    (list_tickets, get_ticket, list_agents, assign_ticket, set_priority, close_ticket),
    {"tickets": "SELECT ticket_id, priority, status, agent_id, resolution FROM tickets"},
    (
        Rule(
            "tickets_urgent",
            "Urgent tickets may only be assigned to senior agents.",
            _senior_rule,
        ),
    ),
)


# --- families ----------------------------------------------------------------------------------


def _triage(p: Planner) -> str:
    options = []
    for cat in CATEGORIES:
        waiting = p.q(
            "SELECT * FROM tickets WHERE status = 'open' AND agent_id IS NULL AND category = ? "
            "ORDER BY opened, ticket_id",
            (cat,),
        )
        urgent = any(t["priority"] == "urgent" for t in waiting)
        if (
            waiting
            and len(waiting) <= 2 + round(p.difficulty * 4)
            and (urgent or p.difficulty < 0.6)
        ):
            options.append((cat, waiting))
    if not options:  # fall back to the smallest queue
        cat, waiting = min(
            (
                (
                    c,
                    p.q(
                        "SELECT * FROM tickets WHERE status = 'open' AND agent_id IS NULL AND category = ? "
                        "ORDER BY opened, ticket_id",
                        (c,),
                    ),
                )
                for c in CATEGORIES
            ),
            key=lambda cw: len(cw[1]) or 99,
        )
    else:
        cat, waiting = p.choose(options)
    p.call("list_tickets", status="open", category=cat, unassigned_only=True)
    p.call("list_agents")
    names = []
    for t in waiting:
        agents = p.q(
            "SELECT a.*, (SELECT count(*) FROM tickets t WHERE t.agent_id = a.agent_id AND t.status = 'open') "
            "AS load FROM agents a ORDER BY a.agent_id"
        )
        if t["priority"] == "urgent":
            agents = [a for a in agents if a["level"] == "senior"]
        best = min(agents, key=lambda a: (a["team"] != cat, a["load"], a["agent_id"]))
        p.call("assign_ticket", ticket_id=t["ticket_id"], agent_id=best["agent_id"])
        names.append(best["name"])
    for name in dict.fromkeys(names):
        p.fact(name)
    return (
        f"Assign every open, unassigned {cat} ticket, oldest first. Give each one to the {cat}-team agent "
        "allowed to take it who has the fewest open tickets at that moment (ties: lowest agent id). "
        "Tell me which agents received tickets."
    )


def _dedupe(p: Planner) -> str:
    groups = p.q(
        "SELECT customer, count(*) AS n FROM tickets WHERE status = 'open' "
        "GROUP BY customer HAVING n >= 2 ORDER BY customer"
    )
    cap = 2 + round(p.difficulty * 3)
    g = p.rng.choice([x for x in groups if x["n"] <= cap] or groups)
    found = p.q(
        "SELECT * FROM tickets WHERE status = 'open' AND customer = ? ORDER BY opened, ticket_id",
        (g["customer"],),
    )
    keep = found[0]
    p.call("list_tickets", status="open", customer=g["customer"])
    with p.parallel():
        for t in found[1:]:
            p.call("close_ticket", ticket_id=t["ticket_id"], resolution="duplicate")
    if p.difficulty >= 0.5 and keep["priority"] != "high":
        p.call("set_priority", ticket_id=keep["ticket_id"], priority="high")
        extra = " Set the kept ticket's priority to high."
    else:
        extra = ""
    p.fact(keep["ticket_id"])
    return (
        f"{g['customer']} opened several tickets that are really one problem. Keep their oldest open ticket (ties: lowest ticket number) "
        f"and close every other open ticket of theirs with resolution 'duplicate'.{extra} Tell me the number of "
        "the ticket you kept."
    )


FAMILIES = [
    family(
        "tickets_triage",
        ["tickets"],
        _triage,
        "Assign queued tickets by workload; urgent ones to seniors.",
        distractor_modules=["kb", "crm"],
    ),
    family(
        "tickets_dedupe",
        ["tickets"],
        _dedupe,
        "Close a customer's duplicate tickets, keep the oldest.",
        distractor_modules=["orders", "hr"],
    ),
]
