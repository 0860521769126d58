"""Banking: accounts, transfers under a per-transfer approval limit, statements, freezes."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from llmgym.envs.tools.scenario import (
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

LIMIT_CENTS = 100_000
SCHEMA = """
CREATE TABLE accounts (account_id TEXT PRIMARY KEY, owner TEXT NOT NULL, kind TEXT NOT NULL,
                       balance_cents INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE transfers (transfer_id INTEGER PRIMARY KEY, from_account TEXT NOT NULL, to_account TEXT NOT NULL,
                        amount_cents INTEGER NOT NULL, memo TEXT NOT NULL, day TEXT NOT NULL);
CREATE TABLE approvals (request_id INTEGER PRIMARY KEY, from_account TEXT NOT NULL, to_account TEXT NOT NULL,
                        amount_cents INTEGER NOT NULL, reason TEXT NOT NULL, status TEXT NOT NULL);
"""
PAYEES = ("City Power", "Metro Water", "Landlord Ltd", "FastNet ISP", "Gym Club")


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)[:30]
    n = 1000
    for person in cast:
        for kind in ("checking", "savings"):
            n += rng.randrange(1, 90)
            balance = rng.randrange(20_000, 900_000)
            db.execute(
                "INSERT INTO accounts VALUES (?, ?, ?, ?, 'open')",
                (f"ACC-{n}", full(person), kind, balance),
            )
    db.execute(
        "INSERT INTO accounts VALUES ('ACC-9000', 'Acme Store', 'merchant', 50000000, 'open')"
    )
    for i, payee in enumerate(PAYEES):
        db.execute(
            "INSERT INTO accounts VALUES (?, ?, 'payee', 0, 'open')", (f"ACC-95{i:02d}", payee)
        )
    checking = [r[0] for r in db.execute("SELECT account_id FROM accounts WHERE kind = 'checking'")]
    for _ in range(90):
        src = rng.choice(checking)
        dst = f"ACC-95{rng.randrange(len(PAYEES)):02d}"
        day = f"2024-03-{rng.randrange(1, 15):02d}"
        db.execute(
            "INSERT INTO transfers (from_account, to_account, amount_cents, memo, day) VALUES (?, ?, ?, '', ?)",
            (src, dst, rng.randrange(1_000, 60_000), day),
        )


def _account(db: sqlite3.Connection, account_id: str) -> sqlite3.Row:
    row = one(db, "SELECT * FROM accounts WHERE account_id = ?", (account_id.strip().upper(),))
    if row is None:
        raise ToolError(f"no account {account_id!r}")
    return row


def find_accounts(db: sqlite3.Connection, owner: str) -> list[dict[str, Any]]:
    """Accounts held by a person or company (exact name, case-insensitive), with balances.

    Args:
        owner: Full name of the account holder.
    """
    found = rows(
        db,
        "SELECT account_id, owner, kind, balance_cents, status FROM accounts WHERE lower(owner) = lower(?) "
        "ORDER BY account_id",
        (owner.strip(),),
    )
    for r in found:
        r["balance"] = money(r.pop("balance_cents"))
    return found


def get_balance(db: sqlite3.Connection, account_id: str) -> dict[str, Any]:
    """Current balance of an account in dollars.

    Args:
        account_id: Account id such as "ACC-1042".
    """
    acc = _account(db, account_id)
    return {
        "account_id": acc["account_id"],
        "balance": money(acc["balance_cents"]),
        "status": acc["status"],
    }


def transfer(
    db: sqlite3.Connection, from_account: str, to_account: str, amount: float, memo: str = ""
) -> dict[str, Any]:
    """Move money between accounts at once.

    Args:
        from_account: Account to debit.
        to_account: Account to credit.
        amount: Amount in dollars (two decimals at most).
        memo: Free-text note.
    """
    src, dst = _account(db, from_account), _account(db, to_account)
    amount_cents = cents(amount)
    if amount_cents <= 0 or abs(amount * 100 - amount_cents) > 1e-6:
        raise ToolError("amount must be positive with at most two decimals")
    if src["account_id"] == dst["account_id"]:
        raise ToolError("cannot transfer to the same account")
    if src["status"] != "open" or dst["status"] != "open":
        raise ToolError("both accounts must be open")
    if src["balance_cents"] < amount_cents:
        raise ToolError(f"insufficient funds: balance is {money(src['balance_cents'])}")
    db.execute(
        "UPDATE accounts SET balance_cents = balance_cents - ? WHERE account_id = ?",
        (amount_cents, src["account_id"]),
    )
    db.execute(
        "UPDATE accounts SET balance_cents = balance_cents + ? WHERE account_id = ?",
        (amount_cents, dst["account_id"]),
    )
    cur = db.execute(
        "INSERT INTO transfers (from_account, to_account, amount_cents, memo, day) VALUES (?, ?, ?, ?, '2024-03-15')",
        (src["account_id"], dst["account_id"], amount_cents, memo[:200]),
    )
    return {"transfer_id": cur.lastrowid, "new_balance": money(src["balance_cents"] - amount_cents)}


def request_approval(
    db: sqlite3.Connection, from_account: str, to_account: str, amount: float, reason: str
) -> dict[str, Any]:
    """File a transfer for manager approval instead of making it (no money moves now).

    Args:
        from_account: Account to debit once approved.
        to_account: Account to credit once approved.
        amount: Amount in dollars.
        reason: Why the transfer is needed.
    """
    src, dst = _account(db, from_account), _account(db, to_account)
    amount_cents = cents(amount)
    if amount_cents <= 0:
        raise ToolError("amount must be positive")
    cur = db.execute(
        "INSERT INTO approvals (from_account, to_account, amount_cents, reason, status) VALUES (?, ?, ?, ?, 'pending')",
        (src["account_id"], dst["account_id"], amount_cents, reason[:200]),
    )
    return {"request_id": cur.lastrowid, "status": "pending"}


def list_transactions(
    db: sqlite3.Connection, account_id: str, limit: int = 50
) -> list[dict[str, Any]]:
    """Transfers into or out of an account this month, newest first.

    Args:
        account_id: Account id.
        limit: At most this many (1-100).
    """
    acc = _account(db, account_id)
    found = rows(
        db,
        "SELECT t.transfer_id, t.from_account, t.to_account, a.owner AS to_owner, t.amount_cents, t.day "
        "FROM transfers t JOIN accounts a ON a.account_id = t.to_account "
        "WHERE t.from_account = ? OR t.to_account = ? ORDER BY t.day DESC, t.transfer_id DESC LIMIT ?",
        (acc["account_id"], acc["account_id"], max(1, min(limit, 100))),
    )
    for r in found:
        r["amount"] = money(r.pop("amount_cents"))
    return found


def freeze_account(db: sqlite3.Connection, account_id: str) -> dict[str, Any]:
    """Freeze an account: no transfers in or out until it is reopened.

    Args:
        account_id: Account id.
    """
    acc = _account(db, account_id)
    db.execute("UPDATE accounts SET status = 'frozen' WHERE account_id = ?", (acc["account_id"],))
    return {"account_id": acc["account_id"], "status": "frozen"}


def _limit_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name == "transfer" and cents(float(args.get("amount", 0))) > LIMIT_CENTS:
        return f"transferred {args.get('amount')} directly, above the {money(LIMIT_CENTS)} limit"
    return None


MODULE = Module(
    "banking",
    SCHEMA,
    seed,
    (find_accounts, get_balance, transfer, request_approval, list_transactions, freeze_account),
    {
        "accounts": "SELECT account_id, balance_cents, status FROM accounts",
        "transfers": "SELECT from_account, to_account, amount_cents, day FROM transfers",
        "approvals": "SELECT from_account, to_account, amount_cents, status FROM approvals",
    },
    (
        Rule(
            "bank_limit",
            f"Transfers above ${money(LIMIT_CENTS)} must not be made directly: file them with "
            "request_approval instead.",
            _limit_rule,
        ),
    ),
)


# --- families ----------------------------------------------------------------------------------


def _owners(p: Planner) -> list[str]:
    return [
        r["owner"]
        for r in p.q(
            "SELECT owner FROM accounts WHERE kind = 'checking' GROUP BY owner HAVING count(*) = 1 ORDER BY owner"
        )
    ]


def _transfer(p: Planner) -> str:
    owner = p.choose(_owners(p))
    accs = {r["kind"]: r for r in p.q("SELECT * FROM accounts WHERE owner = ?", (owner,))}
    check = accs["checking"]
    p.call("find_accounts", owner=owner)
    intro = ""
    if p.difficulty >= 0.8 and check["balance_cents"] > 150_000:
        rent = p.rng.randrange(800, 1000)
        p.call(
            "transfer", from_account=check["account_id"], to_account="ACC-9502", amount=float(rent)
        )
        intro = f"First pay {rent} dollars of rent from {owner}'s checking account to Landlord Ltd (ACC-9502). Then "
    accs = {r["kind"]: r for r in p.q("SELECT * FROM accounts WHERE owner = ?", (owner,))}
    src, dst = (accs["checking"], accs["savings"])
    if src["balance_cents"] < 100_000:
        src, dst = dst, src
    if p.difficulty >= 0.5 and src["balance_cents"] > LIMIT_CENTS + 200:
        amount = (
            p.rng.randrange(LIMIT_CENTS // 100 + 1, min(src["balance_cents"], 500_000) // 100) * 100
        )
    else:
        amount = p.rng.randrange(50, min(src["balance_cents"], LIMIT_CENTS) // 100) * 100
    if amount > LIMIT_CENTS:
        p.offer("transfer")
        p.call(
            "request_approval",
            from_account=src["account_id"],
            to_account=dst["account_id"],
            amount=amount / 100,
            reason="customer request",
        )
        p.fact("approval")
        p.fact(money(src["balance_cents"]))
        tail = "Tell me whether the money moved or awaits approval, and the balance of the source account now."
    else:
        done = p.call(
            "transfer",
            from_account=src["account_id"],
            to_account=dst["account_id"],
            amount=amount / 100,
        )
        p.fact(done["new_balance"])
        tail = "Tell me the new balance of the source account."
    move = f"move {money(amount)} dollars from {owner}'s {src['kind']} account to their {dst['kind']} account."
    return (intro + move if intro else move[0].upper() + move[1:]) + " " + tail


def _statement(p: Planner) -> str:
    owner = p.choose(_owners(p))
    check = p.q("SELECT * FROM accounts WHERE owner = ? AND kind = 'checking'", (owner,))[0]
    paid = p.q(
        "SELECT t.*, a.owner AS payee FROM transfers t JOIN accounts a ON a.account_id = t.to_account "
        "WHERE from_account = ?",
        (check["account_id"],),
    )
    payees = sorted({t["payee"] for t in paid})
    p.call("find_accounts", owner=owner)
    p.call("list_transactions", account_id=check["account_id"])
    if not payees:
        p.fact("0.00")
        return (
            f"How much did {owner} pay from their checking account to City Power this month? "
            "Answer with the total in dollars."
        )
    payee = p.choose(payees)
    total = sum(t["amount_cents"] for t in paid if t["payee"] == payee)
    p.fact(money(total))
    ask = f"How much did {owner} pay from their checking account to {payee} this month in total?"
    if p.difficulty >= 0.6:
        biggest = max(t["amount_cents"] for t in paid)
        threshold = p.rng.choice((biggest - 100, biggest + 100))
        if biggest > threshold:
            p.call("freeze_account", account_id=check["account_id"])
            p.fact("frozen")
            p.decoy("not frozen")
        else:
            p.fact("not frozen")
        ask += (
            f" Security review: if any single payment from that account this month exceeded "
            f"{money(threshold)} dollars, freeze the account; say whether you froze it ('frozen' or 'not frozen')."
        )
    return ask


FAMILIES = [
    family(
        "banking_transfer",
        ["banking"],
        _transfer,
        "Move money between accounts within the approval limit.",
        distractor_modules=["crm", "expenses"],
    ),
    family(
        "banking_statement",
        ["banking"],
        _statement,
        "Total a month's payments to one payee; freeze on a large one.",
        distractor_modules=["orders", "hr"],
    ),
]
