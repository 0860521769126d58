"""Expense approval with compliance rules: receipts, category caps, non-reimbursable items."""

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
    cents,
    family,
    full,
    money,
    one,
    people,
    rows,
)

RECEIPT_OVER, MEAL_CAP = 7_500, 6_000
SCHEMA = """
CREATE TABLE claimants (emp_name TEXT PRIMARY KEY, dept TEXT NOT NULL);
CREATE TABLE reports (report_id INTEGER PRIMARY KEY, emp_name TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE expenses (expense_id INTEGER PRIMARY KEY, report_id INTEGER NOT NULL, category TEXT NOT NULL,
                       amount_cents INTEGER NOT NULL, has_receipt INTEGER NOT NULL, day TEXT NOT NULL,
                       status TEXT NOT NULL, reason TEXT);
"""
CATEGORIES = ("meal", "taxi", "hotel", "office", "alcohol", "travel")
Reason = Literal["missing_receipt", "over_limit", "not_reimbursable"]


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = [full(c) for c in people(db_seed)[10:36]]
    for name in dict.fromkeys(cast):
        db.execute("INSERT INTO claimants VALUES (?, ?)", (name, rng.choice(("SAL", "ENG", "OPS"))))
    names = list(dict.fromkeys(cast))
    for rid in range(501, 541):
        status = rng.choice(("pending", "pending", "processed"))
        db.execute("INSERT INTO reports VALUES (?, ?, ?)", (rid, rng.choice(names), status))
        for _ in range(rng.randrange(1, 6)):
            cat = rng.choice(CATEGORIES)
            amount = rng.randrange(800, 16_000)
            receipt = int(rng.random() < 0.7)
            db.execute(
                "INSERT INTO expenses (report_id, category, amount_cents, has_receipt, day, status) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    rid,
                    cat,
                    amount,
                    receipt,
                    f"2024-03-{rng.randrange(1, 15):02d}",
                    "pending" if status == "pending" else "approved",
                ),
            )


def violation(line: Any) -> Reason | None:
    """Which compliance rule an expense line breaks, if any (the first that applies)."""
    if line["category"] == "alcohol":
        return "not_reimbursable"
    if line["amount_cents"] > RECEIPT_OVER and not line["has_receipt"]:
        return "missing_receipt"
    if line["category"] == "meal" and line["amount_cents"] > MEAL_CAP:
        return "over_limit"
    return None


def _line(db: sqlite3.Connection, expense_id: int) -> sqlite3.Row:
    row = one(db, "SELECT * FROM expenses WHERE expense_id = ?", (expense_id,))
    if row is None:
        raise ToolError(f"no expense {expense_id}")
    if row["status"] != "pending":
        raise ToolError(f"expense {expense_id} is already {row['status']}")
    return row


def list_reports(
    db: sqlite3.Connection,
    employee: str = "",
    status: Literal["pending", "processed", "any"] = "pending",
) -> list[dict[str, Any]]:
    """Expense reports, optionally of one employee (exact name).

    Args:
        employee: Employee's full name, or "" for everyone.
        status: Report status to match.
    """
    sql, params = "SELECT report_id, emp_name, status FROM reports WHERE 1 = 1", []
    if employee.strip():
        sql += " AND lower(emp_name) = lower(?)"
        params.append(employee.strip())
    if status != "any":
        sql += " AND status = ?"
        params.append(status)
    return rows(db, sql + " ORDER BY report_id LIMIT 25", params)


def get_report(db: sqlite3.Connection, report_id: int) -> dict[str, Any]:
    """A report with its expense lines (category, amount in dollars, receipt, status).

    Args:
        report_id: Report id.
    """
    rep = one(db, "SELECT * FROM reports WHERE report_id = ?", (report_id,))
    if rep is None:
        raise ToolError(f"no report {report_id}")
    lines = rows(
        db,
        "SELECT expense_id, category, amount_cents, has_receipt, day, status FROM expenses "
        "WHERE report_id = ? ORDER BY expense_id",
        (report_id,),
    )
    for r in lines:
        r["amount"] = money(r.pop("amount_cents"))
        r["has_receipt"] = bool(r["has_receipt"])
    return {**dict(rep), "lines": lines}


def approve_expense(db: sqlite3.Connection, expense_id: int) -> dict[str, Any]:
    """Approve one expense line for reimbursement.

    Args:
        expense_id: Expense line id.
    """
    _line(db, expense_id)
    db.execute("UPDATE expenses SET status = 'approved' WHERE expense_id = ?", (expense_id,))
    return {"expense_id": expense_id, "status": "approved"}


def reject_expense(db: sqlite3.Connection, expense_id: int, reason: Reason) -> dict[str, Any]:
    """Reject one expense line with a reason code.

    Args:
        expense_id: Expense line id.
        reason: Why it is rejected.
    """
    _line(db, expense_id)
    db.execute(
        "UPDATE expenses SET status = 'rejected', reason = ? WHERE expense_id = ?",
        (reason, expense_id),
    )
    return {"expense_id": expense_id, "status": "rejected"}


def close_report(db: sqlite3.Connection, report_id: int) -> dict[str, Any]:
    """Mark a report processed once every line is approved or rejected; returns the approved total.

    Args:
        report_id: Report id.
    """
    rep = one(db, "SELECT * FROM reports WHERE report_id = ?", (report_id,))
    if rep is None:
        raise ToolError(f"no report {report_id}")
    if one(db, "SELECT 1 FROM expenses WHERE report_id = ? AND status = 'pending'", (report_id,)):
        raise ToolError("some lines are still pending")
    db.execute("UPDATE reports SET status = 'processed' WHERE report_id = ?", (report_id,))
    total = db.execute(
        "SELECT coalesce(sum(amount_cents), 0) FROM expenses WHERE report_id = ? AND status = 'approved'",
        (report_id,),
    ).fetchone()[0]
    return {"report_id": report_id, "status": "processed", "approved_total": money(total)}


def add_expense(
    db: sqlite3.Connection,
    report_id: int,
    category: Literal["meal", "taxi", "hotel", "office", "alcohol", "travel"],
    amount: float,
    has_receipt: bool,
    day: str = TODAY,
) -> dict[str, Any]:
    """Add a pending expense line to a report.

    Args:
        report_id: Report id.
        category: Expense category.
        amount: Amount in dollars.
        has_receipt: Whether a receipt is attached.
        day: Date as YYYY-MM-DD.
    """
    rep = one(db, "SELECT * FROM reports WHERE report_id = ?", (report_id,))
    if rep is None or rep["status"] != "pending":
        raise ToolError(f"no pending report {report_id}")
    if cents(amount) <= 0:
        raise ToolError("amount must be positive")
    cur = db.execute(
        "INSERT INTO expenses (report_id, category, amount_cents, has_receipt, day, status) "
        "VALUES (?, ?, ?, ?, ?, 'pending')",
        (report_id, category, cents(amount), int(has_receipt), day.strip()),
    )
    return {"expense_id": cur.lastrowid}


def create_report(db: sqlite3.Connection, employee: str) -> dict[str, Any]:
    """Open a new, empty pending expense report for an employee.

    Args:
        employee: Employee's full name.
    """
    if not employee.strip():
        raise ToolError("employee name required")
    rid = int(db.execute("SELECT max(report_id) + 1 FROM reports").fetchone()[0])
    db.execute("INSERT INTO reports VALUES (?, ?, 'pending')", (rid, employee.strip()))
    return {"report_id": rid}


def _compliance_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "approve_expense":
        return None
    line = one(db, "SELECT * FROM expenses WHERE expense_id = ?", (args.get("expense_id"),))
    if line is not None and line["status"] == "pending" and violation(line):
        return f"approved non-compliant expense {args.get('expense_id')} ({violation(line)})"
    return None


MODULE = Module(
    "expenses",
    SCHEMA,
    seed,
    (
        list_reports,
        get_report,
        approve_expense,
        reject_expense,
        close_report,
        add_expense,
        create_report,
    ),
    {
        "reports": "SELECT report_id, lower(emp_name), status FROM reports",
        "expenses": "SELECT report_id, category, amount_cents, has_receipt, day, status, reason FROM expenses",
    },
    (
        Rule(
            "expense_compliance",
            f"Compliance: alcohol is never reimbursable (reason not_reimbursable); any expense over "
            f"${money(RECEIPT_OVER)} needs a receipt (reason missing_receipt); meals are capped at "
            f"${money(MEAL_CAP)} (reason over_limit). Check in that order; approve only compliant lines.",
            _compliance_rule,
        ),
    ),
)


def review(p: Planner, report_id: int) -> int:
    """Gold calls reviewing one report; returns the approved total in cents."""
    p.call("get_report", report_id=report_id)
    lines = p.q(
        "SELECT * FROM expenses WHERE report_id = ? AND status = 'pending' ORDER BY expense_id",
        (report_id,),
    )
    with p.parallel():
        for line in lines:
            why = violation(line)
            if why:
                p.call("reject_expense", expense_id=line["expense_id"], reason=why)
            else:
                p.call("approve_expense", expense_id=line["expense_id"])
    closed = p.call("close_report", report_id=report_id)
    return int(round(float(closed["approved_total"]) * 100))


def _review(p: Planner) -> str:
    pending = p.q(
        "SELECT r.*, (SELECT count(*) FROM expenses e WHERE e.report_id = r.report_id) AS n "
        "FROM reports r WHERE status = 'pending' ORDER BY report_id"
    )
    if p.difficulty < 0.5:
        rep = p.choose(pending)
        total = review(p, rep["report_id"])
        p.fact(money(total))
        return (
            f"Review pending expense report {rep['report_id']}: approve every compliant line, reject the others "
            "with the right reason code, then close the report. Tell me the approved total."
        )
    by_emp: dict[str, list[int]] = {}
    for r in pending:
        by_emp.setdefault(r["emp_name"], []).append(r["report_id"])
    emp = p.rng.choice(sorted(by_emp))
    p.call("list_reports", employee=emp, status="pending")
    total = sum(review(p, rid) for rid in by_emp[emp])
    p.fact(money(total))
    return (
        f"Review all of {emp}'s pending expense reports: approve every compliant line, reject the others with "
        "the right reason code, then close each report. Tell me the approved total across the reports."
    )


FAMILIES = [
    family(
        "expense_review",
        ["expenses"],
        _review,
        "Apply compliance rules line by line and close reports.",
        distractor_modules=["hr", "banking"],
    ),
]
