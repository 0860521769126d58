"""CRM: companies, contacts with marketing consent, deals and activity logging."""

from __future__ import annotations

import random
import sqlite3
from typing import Any, Literal

from llmgym.envs.tools.scenario import (
    TODAY,
    Module,
    Planner,
    Rule,
    ToolError,
    family,
    full,
    like,
    money,
    one,
    people,
    rows,
)

SCHEMA = """
CREATE TABLE companies (company_id INTEGER PRIMARY KEY, name TEXT NOT NULL, industry TEXT NOT NULL);
CREATE TABLE contacts (contact_id INTEGER PRIMARY KEY, company_id INTEGER NOT NULL, name TEXT NOT NULL,
                       email TEXT NOT NULL, opted_out INTEGER NOT NULL);
CREATE TABLE deals (deal_id INTEGER PRIMARY KEY, company_id INTEGER NOT NULL, name TEXT NOT NULL, stage TEXT NOT NULL,
                    amount_cents INTEGER NOT NULL);
CREATE TABLE activities (activity_id INTEGER PRIMARY KEY, contact_id INTEGER NOT NULL, kind TEXT NOT NULL, day TEXT NOT NULL);
CREATE TABLE emails (email_id INTEGER PRIMARY KEY, contact_id INTEGER NOT NULL, template TEXT NOT NULL);
"""
COMPANIES = (
    "Northwind",
    "Globex",
    "Initech",
    "Umbrella Labs",
    "Stark Textiles",
    "Wayne Freight",
    "Hooli",
    "Vandelay Imports",
    "Soylent Foods",
    "Tyrell Robotics",
)
STAGES = ("lead", "qualified", "proposal", "negotiation", "won", "lost")
Stage = Literal["lead", "qualified", "proposal", "negotiation", "won", "lost"]


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)
    for cid, name in enumerate(COMPANIES, 1):
        db.execute(
            "INSERT INTO companies VALUES (?, ?, ?)",
            (cid, name, rng.choice(("retail", "logistics", "software"))),
        )
        for person in rng.sample(cast, rng.randrange(2, 5)):
            db.execute(
                "INSERT INTO contacts (company_id, name, email, opted_out) VALUES (?, ?, ?, ?)",
                (
                    cid,
                    full(person),
                    f"{person[0]}@{name.split()[0]}.example".lower(),
                    int(rng.random() < 0.3),
                ),
            )
        for label in rng.sample(
            ("Renewal", "Expansion", "Pilot", "Support plan"), rng.randrange(1, 3)
        ):
            db.execute(
                "INSERT INTO deals (company_id, name, stage, amount_cents) VALUES (?, ?, ?, ?)",
                (cid, f"{name} {label}", rng.choice(STAGES[:4]), rng.randrange(50, 900) * 10_000),
            )


def find_company(db: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """Companies whose name contains the text.

    Args:
        name: Part of the company name.
    """
    return rows(
        db,
        "SELECT company_id, name, industry FROM companies WHERE name LIKE ? ESCAPE '\\' ORDER BY company_id",
        (like(name.strip()),),
    )


def list_contacts(db: sqlite3.Connection, company_id: int) -> list[dict[str, Any]]:
    """Contacts at a company, with whether they opted out of marketing email.

    Args:
        company_id: Company id.
    """
    found = rows(
        db,
        "SELECT contact_id, name, email, opted_out FROM contacts WHERE company_id = ? ORDER BY contact_id",
        (company_id,),
    )
    for r in found:
        r["opted_out"] = bool(r["opted_out"])
    return found


def list_deals(db: sqlite3.Connection, company_id: int) -> list[dict[str, Any]]:
    """Deals with a company: stage and amount in dollars.

    Args:
        company_id: Company id.
    """
    found = rows(
        db,
        "SELECT deal_id, name, stage, amount_cents FROM deals WHERE company_id = ? ORDER BY deal_id",
        (company_id,),
    )
    for r in found:
        r["amount"] = money(r.pop("amount_cents"))
    return found


def update_deal_stage(db: sqlite3.Connection, deal_id: int, stage: Stage) -> dict[str, Any]:
    """Move a deal to another pipeline stage.

    Args:
        deal_id: Deal id.
        stage: New stage.
    """
    if one(db, "SELECT 1 FROM deals WHERE deal_id = ?", (deal_id,)) is None:
        raise ToolError(f"no deal {deal_id}")
    db.execute("UPDATE deals SET stage = ? WHERE deal_id = ?", (stage, deal_id))
    return {"deal_id": deal_id, "stage": stage}


def log_activity(
    db: sqlite3.Connection,
    contact_id: int,
    kind: Literal["call", "meeting", "email"],
    day: str = TODAY,
) -> dict[str, Any]:
    """Record a call, meeting or email with a contact.

    Args:
        contact_id: Contact id.
        kind: What happened.
        day: Date as YYYY-MM-DD (default today).
    """
    if one(db, "SELECT 1 FROM contacts WHERE contact_id = ?", (contact_id,)) is None:
        raise ToolError(f"no contact {contact_id}")
    cur = db.execute(
        "INSERT INTO activities (contact_id, kind, day) VALUES (?, ?, ?)",
        (contact_id, kind, day.strip()),
    )
    return {"activity_id": cur.lastrowid}


def send_email(
    db: sqlite3.Connection, contact_id: int, template: Literal["intro", "followup", "renewal"]
) -> dict[str, Any]:
    """Send a templated marketing email to a contact.

    Args:
        contact_id: Contact id.
        template: Which template to send.
    """
    if one(db, "SELECT 1 FROM contacts WHERE contact_id = ?", (contact_id,)) is None:
        raise ToolError(f"no contact {contact_id}")
    cur = db.execute(
        "INSERT INTO emails (contact_id, template) VALUES (?, ?)", (contact_id, template)
    )
    return {"email_id": cur.lastrowid, "sent": True}


def _consent_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "send_email":
        return None
    row = one(db, "SELECT opted_out FROM contacts WHERE contact_id = ?", (args.get("contact_id"),))
    if row is not None and row["opted_out"]:
        return f"emailed contact {args.get('contact_id')}, who opted out"
    return None


MODULE = Module(
    "crm",
    SCHEMA,
    seed,
    (find_company, list_contacts, list_deals, update_deal_stage, log_activity, send_email),
    {
        "deals": "SELECT deal_id, stage FROM deals",
        "activities": "SELECT contact_id, kind, day FROM activities",
        "emails": "SELECT contact_id, template FROM emails",
    },
    (
        Rule(
            "crm_consent",
            "Never send marketing email to a contact who opted out.",
            _consent_rule,
        ),
    ),
)


def _followup(p: Planner) -> str:
    cid = p.rng.randrange(1, len(COMPANIES) + 1)
    company = COMPANIES[cid - 1]
    contacts = p.q("SELECT * FROM contacts WHERE company_id = ? ORDER BY contact_id", (cid,))
    deals = p.q("SELECT * FROM deals WHERE company_id = ? ORDER BY deal_id", (cid,))
    deal = p.choose(deals)
    spoke = p.choose(contacts)
    stage = STAGES[min(STAGES.index(deal["stage"]) + 1, 4)]
    found = p.call("find_company", name=company)
    assert found[0]["company_id"] == cid
    p.call("list_deals", company_id=cid)
    p.call("list_contacts", company_id=cid)
    p.call("update_deal_stage", deal_id=deal["deal_id"], stage=stage)
    p.call("log_activity", contact_id=spoke["contact_id"], kind="call", day=TODAY)
    ask = (
        f"I just had a call with {spoke['name']} from {company}. Move the deal '{deal['name']}' to stage "
        f"'{stage}' and log the call (today, {TODAY})."
    )
    if p.difficulty >= 0.4:
        with p.parallel():
            for c in contacts:
                if not c["opted_out"]:
                    p.call("send_email", contact_id=c["contact_id"], template="followup")
        ask += " Then send the 'followup' email to every contact at the company who may receive marketing email."
    p.fact(money(deal["amount_cents"]))
    return ask + " Finally tell me the deal's amount."


FAMILIES = [
    family(
        "crm_followup",
        ["crm"],
        _followup,
        "Advance a deal, log a call, email consenting contacts.",
        distractor_modules=["orders", "tickets"],
    ),
]
