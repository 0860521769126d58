"""HR directory: employees and departments; lookups, raises, transfers and new hires."""

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
    like,
    one,
    people,
    rows,
)

SCHEMA = """
CREATE TABLE departments (dept_id TEXT PRIMARY KEY, name TEXT NOT NULL, manager_id INTEGER);
CREATE TABLE employees (
    emp_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE, phone TEXT NOT NULL, dept_id TEXT NOT NULL, title TEXT NOT NULL,
    salary INTEGER NOT NULL, manager_id INTEGER, status TEXT NOT NULL
);
"""
DEPARTMENTS = (
    ("ENG", "Engineering"),
    ("SAL", "Sales"),
    ("FIN", "Finance"),
    ("OPS", "Operations"),
    ("MKT", "Marketing"),
)
TITLES = ("Associate", "Specialist", "Senior Specialist", "Analyst")


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)
    depts = [d for d, _ in DEPARTMENTS]
    db.executemany("INSERT INTO departments VALUES (?, ?, NULL)", DEPARTMENTS)
    placed: dict[tuple[str, str], str] = {}
    for i, person in enumerate(cast):
        emp_id = 101 + i
        dept = depts[i] if i < len(depts) else rng.choice(depts)
        if person in placed:  # a namesake always works elsewhere
            dept = rng.choice([d for d in depts if d != placed[person]])
        placed.setdefault(person, dept)
        title = "Manager" if i < len(depts) else rng.choice(TITLES)
        status = "on_leave" if i >= len(depts) and rng.random() < 0.15 else "active"
        email = f"{person[0]}.{person[1]}.{emp_id}@acme.example".lower()
        phone = f"+1-555-{rng.randrange(1000, 10000)}"
        salary = rng.randrange(100, 300) * 500
        manager = None if i < len(depts) else 101 + depts.index(dept)
        db.execute(
            "INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (emp_id, person[0], person[1], email, phone, dept, title, salary, manager, status),
        )
    for i, dept in enumerate(depts):
        db.execute("UPDATE departments SET manager_id = ? WHERE dept_id = ?", (101 + i, dept))


def _dept_id(db: sqlite3.Connection, department: str) -> str:
    row = one(
        db,
        "SELECT dept_id FROM departments WHERE lower(dept_id) = lower(?) OR lower(name) = lower(?)",
        (department.strip(), department.strip()),
    )
    if row is None:
        raise ToolError(f"no department {department!r}; see list_departments()")
    return str(row["dept_id"])


def _employee(db: sqlite3.Connection, emp_id: int) -> sqlite3.Row:
    row = one(db, "SELECT * FROM employees WHERE emp_id = ?", (emp_id,))
    if row is None:
        raise ToolError(f"no employee with id {emp_id}")
    return row


def search_employees(
    db: sqlite3.Connection, name: str = "", department: str = ""
) -> list[dict[str, Any]]:
    """Search the employee directory by (part of a) name and/or department.

    Args:
        name: Part of the employee's full name, e.g. "Lopez" or "Ava Lopez".
        department: Department id or name, e.g. "FIN" or "Finance".
    """
    sql = (
        "SELECT e.emp_id, e.first_name || ' ' || e.last_name AS name, d.name AS department, e.title "
        "FROM employees e JOIN departments d USING (dept_id) "
        "WHERE (e.first_name || ' ' || e.last_name) LIKE ? ESCAPE '\\'"
    )
    params: list[Any] = [like(name.strip())]
    if department.strip():
        sql += " AND e.dept_id = ?"
        params.append(_dept_id(db, department))
    return rows(db, sql + " ORDER BY e.emp_id LIMIT 10", params)


def get_employee(db: sqlite3.Connection, emp_id: int) -> dict[str, Any]:
    """Full HR record of one employee: contact details, department, title, salary, manager, status.

    Args:
        emp_id: Employee id.
    """
    return dict(_employee(db, emp_id))


def list_departments(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """All departments with their ids and manager's employee id."""
    return rows(db, "SELECT dept_id, name, manager_id FROM departments ORDER BY dept_id")


def list_department(db: sqlite3.Connection, department: str) -> list[dict[str, Any]]:
    """Everyone in a department with title, salary and status.

    Args:
        department: Department id or name.
    """
    dept = _dept_id(db, department)
    return rows(
        db,
        "SELECT emp_id, first_name || ' ' || last_name AS name, title, salary, status "
        "FROM employees WHERE dept_id = ? ORDER BY emp_id",
        (dept,),
    )


def update_salary(db: sqlite3.Connection, emp_id: int, new_salary: int) -> dict[str, Any]:
    """Set an employee's yearly salary.

    Args:
        emp_id: Employee id.
        new_salary: New yearly salary in whole dollars.
    """
    _employee(db, emp_id)
    if not 10_000 <= new_salary <= 1_000_000:
        raise ToolError("salary must be between 10000 and 1000000")
    db.execute("UPDATE employees SET salary = ? WHERE emp_id = ?", (new_salary, emp_id))
    return {"emp_id": emp_id, "salary": new_salary}


def transfer_employee(db: sqlite3.Connection, emp_id: int, department: str) -> dict[str, Any]:
    """Move an employee to another department (their manager becomes that department's manager).

    Args:
        emp_id: Employee id.
        department: Target department id or name.
    """
    _employee(db, emp_id)
    dept = _dept_id(db, department)
    manager = one(db, "SELECT manager_id FROM departments WHERE dept_id = ?", (dept,))
    db.execute(
        "UPDATE employees SET dept_id = ?, manager_id = ? WHERE emp_id = ?",
        (dept, manager["manager_id"] if manager else None, emp_id),
    )
    return {"emp_id": emp_id, "dept_id": dept}


def set_status(
    db: sqlite3.Connection, emp_id: int, status: Literal["active", "on_leave", "terminated"]
) -> dict[str, Any]:
    """Change an employee's employment status.

    Args:
        emp_id: Employee id.
        status: New status.
    """
    _employee(db, emp_id)
    db.execute("UPDATE employees SET status = ? WHERE emp_id = ?", (status, emp_id))
    return {"emp_id": emp_id, "status": status}


def create_employee(
    db: sqlite3.Connection,
    first_name: str,
    last_name: str,
    department: str,
    title: str,
    salary: int,
) -> dict[str, Any]:
    """Add a new hire; they report to the department's manager.

    Args:
        first_name: Given name.
        last_name: Family name.
        department: Department id or name.
        title: Job title.
        salary: Yearly salary in whole dollars.
    """
    dept = _dept_id(db, department)
    if not (first_name.strip() and last_name.strip() and title.strip()):
        raise ToolError("names and title must not be empty")
    if not 10_000 <= salary <= 1_000_000:
        raise ToolError("salary must be between 10000 and 1000000")
    emp_id = int(db.execute("SELECT max(emp_id) + 1 FROM employees").fetchone()[0])
    email = f"{first_name.strip()}.{last_name.strip()}.{emp_id}@acme.example".lower()
    manager = one(db, "SELECT manager_id FROM departments WHERE dept_id = ?", (dept,))
    db.execute(
        "INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active')",
        (
            emp_id,
            first_name.strip(),
            last_name.strip(),
            email,
            "+1-555-0000",
            dept,
            title.strip(),
            salary,
            manager["manager_id"] if manager else None,
        ),
    )
    return {"emp_id": emp_id, "email": email}


def _leave_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "update_salary":
        return None
    row = one(db, "SELECT status FROM employees WHERE emp_id = ?", (args.get("emp_id"),))
    if row is not None and row["status"] == "on_leave":
        return f"changed the salary of employee {args.get('emp_id')}, who is on leave"
    return None


MODULE = Module(
    "hr",
    SCHEMA,
    seed,
    (
        search_employees,
        get_employee,
        list_departments,
        list_department,
        update_salary,
        transfer_employee,
        set_status,
        create_employee,
    ),
    {
        "employees": "SELECT emp_id, first_name, last_name, email, dept_id, title, salary, "
        "manager_id, status FROM employees"
    },
    (Rule("hr_leave", "Never change the salary of an employee who is on leave.", _leave_rule),),
)


# --- families ----------------------------------------------------------------------------------


def _contact(p: Planner) -> str:
    staff = p.q(
        "SELECT e.*, d.name AS dept_name, e.first_name || ' ' || e.last_name AS full_name "
        "FROM employees e JOIN departments d USING (dept_id) WHERE e.manager_id IS NOT NULL"
    )
    counts: dict[str, int] = {}
    for e in p.q("SELECT first_name || ' ' || last_name AS n FROM employees"):
        counts[e["n"]] = counts.get(e["n"], 0) + 1
    ambiguous = p.difficulty >= 0.4
    pool = [e for e in staff if (counts[e["full_name"]] > 1) == ambiguous]
    target = p.choose(pool)
    name = target["full_name"]
    found = p.call("search_employees", name=name)
    assert any(r["emp_id"] == target["emp_id"] for r in found)
    record = p.call("get_employee", emp_id=target["emp_id"])
    p.fact(record["email"])
    p.fact(record["phone"])
    for other in p.q(
        "SELECT email, phone FROM employees WHERE first_name || ' ' || last_name = ? AND emp_id != ?",
        (name, target["emp_id"]),
    ):
        p.decoy(other["email"], other["phone"])
    who = f"{name} from {target['dept_name']}" if ambiguous else name
    ask = "work email and phone number"
    if p.difficulty >= 0.7:
        manager = p.call("get_employee", emp_id=record["manager_id"])
        p.fact(manager["email"])
        ask += ", and the email of their manager"
    return f"Look up {who} in the HR directory and tell me their {ask}."


def _raise(p: Planner) -> str:
    pct = p.rng.choice((3, 4, 5, 6, 8))
    whole = p.difficulty >= 0.5
    options = []
    for dept_id, dept_name in DEPARTMENTS:
        staff = p.q(
            "SELECT * FROM employees WHERE dept_id = ? AND manager_id IS NOT NULL ORDER BY emp_id",
            (dept_id,),
        )
        for title in sorted({s["title"] for s in staff}) if not whole else [None]:
            group = [s for s in staff if title is None or s["title"] == title]
            eligible = [s for s in group if s["status"] == "active"]
            on_leave = len(group) - len(eligible)
            if eligible and len(group) <= 8 and (not whole or on_leave > 0 or p.difficulty < 0.8):
                options.append((dept_name, title, eligible))
    dept_name, title, eligible = p.choose(options)
    p.call("list_department", department=dept_name)
    total = 0
    with p.parallel():
        for s in eligible:
            new = (s["salary"] * (100 + pct) + 50) // 100
            total += new
            p.call("update_salary", emp_id=s["emp_id"], new_salary=new)
    p.fact(total, f"{total:,}")
    who = (
        f"every {title} in {dept_name}" if title else f"everyone in {dept_name} except its manager"
    )
    return (
        f"Give {who} a {pct}% raise, rounding each new salary to the nearest dollar. "
        "Then tell me the combined new yearly salary of the people you raised."
    )


def _transfer(p: Planner) -> str:
    staff = p.q(
        "SELECT e.*, d.name AS dept_name FROM employees e JOIN departments d USING (dept_id) "
        "WHERE e.manager_id IS NOT NULL ORDER BY emp_id"
    )
    names: dict[str, int] = {}
    for s in staff:
        key = f"{s['first_name']} {s['last_name']}"
        names[key] = names.get(key, 0) + 1
    movers = [s for s in staff if names[f"{s['first_name']} {s['last_name']}"] == 1]
    k = 1 + round(p.difficulty * 2)
    chosen = p.rng.sample(movers, k)
    lines = []
    for s in chosen:
        target = p.rng.choice([n for d, n in DEPARTMENTS if d != s["dept_id"]])
        name = f"{s['first_name']} {s['last_name']}"
        found = p.call("search_employees", name=name)
        p.call("transfer_employee", emp_id=found[0]["emp_id"], department=target)
        lines.append(f"{name} moves to {target}")
        manager = one(
            p.db,
            "SELECT e.email FROM departments d JOIN employees e ON e.emp_id = d.manager_id "
            "WHERE d.name = ?",
            (target,),
        )
        assert manager is not None
        p.fact(manager["email"])
    return (
        "Process these department transfers: " + "; ".join(lines) + ". "
        "Then tell me the email address of each person's new manager."
    )


FAMILIES = [
    family(
        "hr_contact",
        ["hr"],
        _contact,
        "Find an employee (maybe among namesakes) and report contact details.",
        distractor_modules=["crm", "scheduling"],
    ),
    family(
        "hr_raise",
        ["hr"],
        _raise,
        "Give a percentage raise to a group, skipping staff on leave.",
        distractor_modules=["expenses", "banking"],
    ),
    family(
        "hr_transfer",
        ["hr"],
        _transfer,
        "Move employees between departments and report new managers.",
        distractor_modules=["scheduling", "tickets"],
    ),
]
