"""Warehouse moves: bins with capacities across zones, stock moves and counts."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    Rule,
    ToolError,
    family,
    one,
    rows,
)

SCHEMA = """
CREATE TABLE bins (bin_id TEXT PRIMARY KEY, zone TEXT NOT NULL, capacity INTEGER NOT NULL);
CREATE TABLE stock (bin_id TEXT NOT NULL, sku TEXT NOT NULL, qty INTEGER NOT NULL, PRIMARY KEY (bin_id, sku));
"""
ZONES = ("A", "B", "C", "D")
SKUS = tuple(f"P-{n}" for n in range(200, 216))


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    for zone in ZONES:
        for i in range(1, 7):
            db.execute(
                "INSERT INTO bins VALUES (?, ?, ?)",
                (f"{zone}-{i:02d}", zone, rng.choice((50, 80, 120))),
            )
    for bin_id, capacity in db.execute("SELECT bin_id, capacity FROM bins").fetchall():
        room = capacity
        for sku in rng.sample(SKUS, rng.randrange(0, 4)):
            qty = rng.randrange(1, max(2, room // 3))
            room -= qty
            db.execute("INSERT INTO stock VALUES (?, ?, ?)", (bin_id, sku, qty))


def _used(db: sqlite3.Connection, bin_id: str) -> int:
    return int(
        db.execute(
            "SELECT coalesce(sum(qty), 0) FROM stock WHERE bin_id = ?", (bin_id,)
        ).fetchone()[0]
    )


def locate_sku(db: sqlite3.Connection, sku: str) -> list[dict[str, Any]]:
    """Bins holding a SKU and how many units each.

    Args:
        sku: Product code such as "P-204".
    """
    return rows(
        db,
        "SELECT s.bin_id, b.zone, s.qty FROM stock s JOIN bins b USING (bin_id) WHERE s.sku = ? "
        "ORDER BY s.bin_id",
        (sku.strip().upper(),),
    )


def bin_contents(db: sqlite3.Connection, bin_id: str) -> dict[str, Any]:
    """What a bin holds, its capacity and free space (units).

    Args:
        bin_id: Bin id such as "B-03".
    """
    b = one(db, "SELECT * FROM bins WHERE bin_id = ?", (bin_id.strip().upper(),))
    if b is None:
        raise ToolError(f"no bin {bin_id!r}")
    items = rows(db, "SELECT sku, qty FROM stock WHERE bin_id = ? ORDER BY sku", (b["bin_id"],))
    return {
        "bin_id": b["bin_id"],
        "zone": b["zone"],
        "capacity": b["capacity"],
        "free": b["capacity"] - _used(db, b["bin_id"]),
        "items": items,
    }


def list_bins(db: sqlite3.Connection, zone: str) -> list[dict[str, Any]]:
    """Bins of a zone with capacity and free space.

    Args:
        zone: Zone letter A-D.
    """
    found = rows(
        db,
        "SELECT bin_id, capacity FROM bins WHERE zone = ? ORDER BY bin_id",
        (zone.strip().upper(),),
    )
    for r in found:
        r["free"] = r["capacity"] - _used(db, r["bin_id"])
    return found


def move_stock(
    db: sqlite3.Connection, sku: str, from_bin: str, to_bin: str, quantity: int
) -> dict[str, Any]:
    """Move units of a SKU from one bin to another.

    Args:
        sku: Product code.
        from_bin: Source bin.
        to_bin: Destination bin.
        quantity: Units to move.
    """
    sku, src, dst = sku.strip().upper(), from_bin.strip().upper(), to_bin.strip().upper()
    if quantity < 1:
        raise ToolError("quantity must be positive")
    if src == dst:
        raise ToolError("source and destination are the same bin")
    if one(db, "SELECT 1 FROM bins WHERE bin_id = ?", (dst,)) is None:
        raise ToolError(f"no bin {to_bin!r}")
    have = one(db, "SELECT qty FROM stock WHERE bin_id = ? AND sku = ?", (src, sku))
    if have is None or have["qty"] < quantity:
        raise ToolError(f"bin {src} holds {have['qty'] if have else 0} of {sku}")
    db.execute("UPDATE stock SET qty = qty - ? WHERE bin_id = ? AND sku = ?", (quantity, src, sku))
    db.execute("DELETE FROM stock WHERE qty = 0")
    db.execute(
        "INSERT INTO stock VALUES (?, ?, ?) ON CONFLICT (bin_id, sku) DO UPDATE SET qty = qty + excluded.qty",
        (dst, sku, quantity),
    )
    return {"sku": sku, "from_bin": src, "to_bin": dst, "moved": quantity}


def _capacity_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "move_stock":
        return None
    dst = str(args.get("to_bin", "")).strip().upper()
    b = one(db, "SELECT capacity FROM bins WHERE bin_id = ?", (dst,))
    if b is not None and _used(db, dst) + int(args.get("quantity", 0)) > b["capacity"]:
        return f"overfilled bin {dst}"
    return None


MODULE = Module(
    "warehouse",
    SCHEMA,
    seed,
    (locate_sku, bin_contents, list_bins, move_stock),
    {"stock": "SELECT bin_id, sku, qty FROM stock WHERE qty > 0"},
    (Rule("bin_capacity", "Never put more units in a bin than its capacity.", _capacity_rule),),
)


def _consolidate(p: Planner) -> str:
    options = []
    for sku in SKUS:
        spots = p.q(
            "SELECT s.*, b.zone FROM stock s JOIN bins b USING (bin_id) WHERE sku = ? ORDER BY bin_id",
            (sku,),
        )
        if len(spots) >= 2:
            options.append((sku, spots))
    sku, spots = p.choose(options)
    spots = spots[: 2 + round(p.difficulty * 2)]
    zone = p.rng.choice(ZONES)
    bins = p.q("SELECT bin_id, capacity FROM bins WHERE zone = ? ORDER BY bin_id", (zone,))
    target = max(
        bins,
        key=lambda b: (
            b["capacity"]
            - sum(r["qty"] for r in p.q("SELECT qty FROM stock WHERE bin_id = ?", (b["bin_id"],))),
            [-ord(c) for c in b["bin_id"]],
        ),
    )
    p.call("locate_sku", sku=sku)
    p.call("list_bins", zone=zone)
    moved = 0
    sources = [s for s in spots if s["bin_id"] != target["bin_id"]]
    for s in sources:
        free = target["capacity"] - sum(
            r["qty"] for r in p.q("SELECT qty FROM stock WHERE bin_id = ?", (target["bin_id"],))
        )
        qty = min(s["qty"], free)
        if qty > 0:
            p.call(
                "move_stock", sku=sku, from_bin=s["bin_id"], to_bin=target["bin_id"], quantity=qty
            )
            moved += qty
    p.fact(moved)
    listed = ", ".join(s["bin_id"] for s in spots)
    return (
        f"Consolidate {sku}: move its units from bins {listed} into the bin of zone {zone} with the most free "
        f"space (ties: lowest bin id), taking sources in the order listed and moving as many units as fit "
        f"(skip a source once the target is full; a source that is the target stays). Tell me how many units "
        "you moved."
    )


FAMILIES = [
    family(
        "warehouse_consolidate",
        ["warehouse"],
        _consolidate,
        "Move a SKU into one bin without overfilling it.",
        distractor_modules=["orders", "files"],
    ),
]
