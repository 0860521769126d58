"""Library loans: catalogue, members with fines and a loan limit, checkouts and returns with late fees."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

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

MAX_LOANS, LOAN_DAYS, FEE_PER_DAY = 3, 21, 25
SCHEMA = """
CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, author TEXT NOT NULL, copies INTEGER NOT NULL);
CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, fines_cents INTEGER NOT NULL);
CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL, member_id INTEGER NOT NULL,
                    out_day TEXT NOT NULL, due_day TEXT NOT NULL, returned_day TEXT);
"""
WORDS = (
    "River",
    "Glass",
    "Winter",
    "Signal",
    "Orchard",
    "Copper",
    "Lantern",
    "Atlas",
    "Harbor",
    "Echo",
    "Meadow",
    "Cipher",
)
NOUNS = ("Song", "House", "Garden", "Road", "Machine", "Letters", "Tide", "Archive")
AUTHORS = ("M. Okafor", "J. Larsen", "R. Tanaka", "S. Moreau", "A. Costa", "L. Petrov")


def _day(offset: int) -> str:
    return (dt.date.fromisoformat(TODAY) + dt.timedelta(days=offset)).isoformat()


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    titles = sorted({f"The {w} {n}" for w in WORDS for n in NOUNS})
    for i, title in enumerate(rng.sample(titles, 40), 1):
        db.execute(
            "INSERT INTO books VALUES (?, ?, ?, ?)",
            (i, title, rng.choice(AUTHORS), rng.randrange(1, 4)),
        )
    for i, person in enumerate(people(db_seed)[:30], 1):
        fines = rng.choice((0, 0, 0, 0, 150, 475))
        db.execute("INSERT INTO members VALUES (?, ?, ?)", (i, full(person), fines))
    for _ in range(45):
        book, member = rng.randrange(1, 41), rng.randrange(1, 31)
        out = -rng.randrange(1, 40)
        db.execute(
            "INSERT INTO loans (book_id, member_id, out_day, due_day) VALUES (?, ?, ?, ?)",
            (book, member, _day(out), _day(out + LOAN_DAYS)),
        )


def _available(db: sqlite3.Connection, book_id: int) -> int:
    copies = one(db, "SELECT copies FROM books WHERE book_id = ?", (book_id,))
    if copies is None:
        raise ToolError(f"no book {book_id}")
    out = db.execute(
        "SELECT count(*) FROM loans WHERE book_id = ? AND returned_day IS NULL", (book_id,)
    ).fetchone()[0]
    return int(copies["copies"]) - int(out)


def search_books(db: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    """Books whose title or author contains the text, with copies available now.

    Args:
        query: Part of a title or author name.
    """
    found = rows(
        db,
        "SELECT book_id, title, author FROM books WHERE title LIKE ? ESCAPE '\\' OR author LIKE ? ESCAPE '\\' "
        "ORDER BY book_id LIMIT 15",
        (like(query.strip()), like(query.strip())),
    )
    for r in found:
        r["available"] = _available(db, r["book_id"])
    return found


def find_member(db: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """Library members whose name contains the text, with unpaid fines in dollars.

    Args:
        name: Part of the member's name.
    """
    found = rows(
        db,
        "SELECT member_id, name, fines_cents FROM members WHERE name LIKE ? ESCAPE '\\' ORDER BY member_id",
        (like(name.strip()),),
    )
    for r in found:
        r["fines"] = money(r.pop("fines_cents"))
    return found


def member_loans(db: sqlite3.Connection, member_id: int) -> list[dict[str, Any]]:
    """A member's current (unreturned) loans with due dates.

    Args:
        member_id: Member id.
    """
    return rows(
        db,
        "SELECT l.loan_id, l.book_id, b.title, l.due_day FROM loans l JOIN books b USING (book_id) "
        "WHERE l.member_id = ? AND l.returned_day IS NULL ORDER BY l.loan_id",
        (member_id,),
    )


def checkout(db: sqlite3.Connection, book_id: int, member_id: int) -> dict[str, Any]:
    """Lend a book to a member for 21 days.

    Args:
        book_id: Book id.
        member_id: Member id.
    """
    if one(db, "SELECT 1 FROM members WHERE member_id = ?", (member_id,)) is None:
        raise ToolError(f"no member {member_id}")
    if _available(db, book_id) < 1:
        raise ToolError(f"no copy of book {book_id} is available")
    cur = db.execute(
        "INSERT INTO loans (book_id, member_id, out_day, due_day) VALUES (?, ?, ?, ?)",
        (book_id, member_id, TODAY, _day(LOAN_DAYS)),
    )
    return {"loan_id": cur.lastrowid, "due_day": _day(LOAN_DAYS)}


def return_book(db: sqlite3.Connection, loan_id: int) -> dict[str, Any]:
    """Check a book back in; a late return adds $0.25 per day late to the member's fines.

    Args:
        loan_id: Loan id.
    """
    loan = one(db, "SELECT * FROM loans WHERE loan_id = ? AND returned_day IS NULL", (loan_id,))
    if loan is None:
        raise ToolError(f"no open loan {loan_id}")
    late = max(0, (dt.date.fromisoformat(TODAY) - dt.date.fromisoformat(loan["due_day"])).days)
    fee = late * FEE_PER_DAY
    db.execute("UPDATE loans SET returned_day = ? WHERE loan_id = ?", (TODAY, loan_id))
    db.execute(
        "UPDATE members SET fines_cents = fines_cents + ? WHERE member_id = ?",
        (fee, loan["member_id"]),
    )
    return {"loan_id": loan_id, "days_late": late, "fee": money(fee)}


def pay_fine(db: sqlite3.Connection, member_id: int, amount: float) -> dict[str, Any]:
    """Record a fine payment.

    Args:
        member_id: Member id.
        amount: Dollars paid.
    """
    m = one(db, "SELECT fines_cents FROM members WHERE member_id = ?", (member_id,))
    if m is None:
        raise ToolError(f"no member {member_id}")
    paid = int(round(amount * 100))
    if paid <= 0 or paid > m["fines_cents"]:
        raise ToolError(
            f"amount must be between 0.01 and the fines due ({money(m['fines_cents'])})"
        )
    db.execute(
        "UPDATE members SET fines_cents = fines_cents - ? WHERE member_id = ?", (paid, member_id)
    )
    return {"member_id": member_id, "fines": money(m["fines_cents"] - paid)}


def _borrow_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "checkout":
        return None
    m = one(db, "SELECT fines_cents FROM members WHERE member_id = ?", (args.get("member_id"),))
    if m is None:
        return None
    if m["fines_cents"] > 0:
        return f"lent a book to member {args.get('member_id')}, who has unpaid fines"
    n = db.execute(
        "SELECT count(*) FROM loans WHERE member_id = ? AND returned_day IS NULL",
        (args.get("member_id"),),
    ).fetchone()[0]
    if n >= MAX_LOANS:
        return f"lent a book to member {args.get('member_id')}, who already holds {MAX_LOANS} loans"
    return None


MODULE = Module(
    "library",
    SCHEMA,
    seed,
    (search_books, find_member, member_loans, checkout, return_book, pay_fine),
    {
        "loans": "SELECT book_id, member_id, out_day, due_day, returned_day FROM loans",
        "members": "SELECT member_id, fines_cents FROM members",
    },
    (
        Rule(
            "library_borrow",
            f"Members with unpaid fines may not borrow, and nobody may hold more than {MAX_LOANS} "
            "loans at once.",
            _borrow_rule,
        ),
    ),
)


def _unique_members(p: Planner) -> list[dict[str, Any]]:
    return p.q(
        "SELECT m.*, (SELECT count(*) FROM loans l WHERE l.member_id = m.member_id AND returned_day IS NULL) AS n "
        "FROM members m WHERE (SELECT count(*) FROM members x WHERE x.name = m.name) = 1 ORDER BY member_id"
    )


def _borrow(p: Planner) -> str:
    fined = p.difficulty >= 0.5
    pool = [m for m in _unique_members(p) if (m["fines_cents"] > 0) == fined and m["n"] <= 1]
    member = p.choose(pool)
    books = [
        b for b in p.q("SELECT * FROM books ORDER BY book_id") if _available(p.db, b["book_id"]) > 0
    ]
    wanted = p.rng.sample(books, 1 + (p.difficulty >= 0.3))
    p.call("find_member", name=member["name"])
    intro = ""
    if fined:
        p.call("pay_fine", member_id=member["member_id"], amount=member["fines_cents"] / 100)
        intro = f" They are paying their outstanding fines ({money(member['fines_cents'])} dollars) in full at the desk first."
    with p.parallel():
        for b in wanted:
            p.call("search_books", query=b["title"])
    with p.parallel():
        for b in wanted:
            out = p.call("checkout", book_id=b["book_id"], member_id=member["member_id"])
    p.fact(out["due_day"])
    titles = " and ".join(f"'{b['title']}'" for b in wanted)
    return f"{member['name']} wants to borrow {titles}.{intro} Check the book(s) out and tell me the due date."


def _returns(p: Planner) -> str:
    pool = [m for m in _unique_members(p) if m["n"] >= 1 + (p.difficulty >= 0.5)]
    member = p.choose(pool)
    loans = p.q(
        "SELECT * FROM loans WHERE member_id = ? AND returned_day IS NULL ORDER BY loan_id",
        (member["member_id"],),
    )
    p.call("find_member", name=member["name"])
    p.call("member_loans", member_id=member["member_id"])
    with p.parallel():
        for loan in loans:
            p.call("return_book", loan_id=loan["loan_id"])
    after = one(p.db, "SELECT fines_cents FROM members WHERE member_id = ?", (member["member_id"],))
    assert after is not None
    p.fact(money(after["fines_cents"]))
    return (
        f"{member['name']} is returning every book they currently have on loan. Check them all in and tell me "
        "their total unpaid fines afterwards, in dollars."
    )


FAMILIES = [
    family(
        "library_checkout",
        ["library"],
        _borrow,
        "Settle fines, then lend books within the loan rules.",
        distractor_modules=["files", "kb"],
    ),
    family(
        "library_returns",
        ["library"],
        _returns,
        "Check in all of a member's loans and report fines.",
        distractor_modules=["crm", "orders"],
    ),
]
