"""Orders and inventory: customers, a product catalogue with stock, orders, cancellations, returns."""

from __future__ import annotations

import random
import sqlite3
from typing import Annotated, Any, Literal

from llmgym.envs.tools.scenario import (
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
CREATE TABLE customers (cust_id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, city TEXT);
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE orders (order_id INTEGER PRIMARY KEY, cust_id INTEGER NOT NULL, status TEXT NOT NULL,
                     total_cents INTEGER NOT NULL, day TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL, sku TEXT NOT NULL, qty INTEGER NOT NULL,
                          price_cents INTEGER NOT NULL);
CREATE TABLE returns (order_id INTEGER NOT NULL, reason TEXT NOT NULL);
"""
CATALOGUE = {
    "lighting": ("Desk Lamp", "Desk Lamp Pro", "Floor Lamp", "Clip Light"),
    "furniture": ("Office Chair", "Office Chair Plus", "Standing Desk", "Bookshelf"),
    "audio": ("Wireless Headphones", "Wireless Headphones Mini", "Bluetooth Speaker", "Soundbar"),
    "kitchen": ("Coffee Grinder", "Electric Kettle", "Espresso Machine", "Toaster"),
    "outdoor": ("Camping Tent", "Sleeping Bag", "Trail Backpack", "Headlamp"),
}
CITIES = ("Lisbon", "Oslo", "Austin", "Osaka", "Nairobi", "Lyon", "Toronto", "Pune")


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)[:30]
    for i, person in enumerate(cast, 1):
        db.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?)",
            (i, full(person), f"{person[0]}{i}@mail.example".lower(), rng.choice(CITIES)),
        )
    n = 0
    for category, names in CATALOGUE.items():
        for name in names:
            n += 1
            stock = 0 if rng.random() < 0.15 else rng.randrange(3, 40)
            db.execute(
                "INSERT INTO products VALUES (?, ?, ?, ?, ?)",
                (f"SKU-{100 + n}", name, category, rng.randrange(900, 40000), stock),
            )
    skus = [r[0] for r in db.execute("SELECT sku FROM products")]
    for order_id in range(1, 61):
        cust = rng.randrange(1, 31)
        day = f"2024-{rng.choice(('02', '03'))}-{rng.randrange(1, 15):02d}"
        status = rng.choice(("placed", "shipped", "shipped", "delivered", "delivered", "cancelled"))
        total = 0
        for sku in rng.sample(skus, rng.randrange(1, 4)):
            qty = rng.randrange(1, 4)
            price = db.execute("SELECT price_cents FROM products WHERE sku = ?", (sku,)).fetchone()[
                0
            ]
            total += qty * price
            db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (order_id, sku, qty, price))
        db.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)", (order_id, cust, status, total, day)
        )


def _order(db: sqlite3.Connection, order_id: int) -> sqlite3.Row:
    row = one(db, "SELECT * FROM orders WHERE order_id = ?", (order_id,))
    if row is None:
        raise ToolError(f"no order {order_id}")
    return row


def find_customer(db: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """Customers whose name contains the text.

    Args:
        name: Part of the customer's name.
    """
    return rows(
        db,
        "SELECT cust_id, name, email, city FROM customers WHERE name LIKE ? ESCAPE '\\' "
        "ORDER BY cust_id LIMIT 10",
        (like(name.strip()),),
    )


def search_products(db: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    """Products whose name or category contains the text, with price (dollars) and units in stock.

    Args:
        query: Text to look for, e.g. "lamp".
    """
    found = rows(
        db,
        "SELECT sku, name, category, price_cents, stock FROM products "
        "WHERE name LIKE ? ESCAPE '\\' OR category LIKE ? ESCAPE '\\' ORDER BY sku LIMIT 10",
        (like(query.strip()), like(query.strip())),
    )
    for r in found:
        r["price"] = money(r.pop("price_cents"))
    return found


ITEM_SCHEMA = {
    "items": {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
        "required": ["sku", "quantity"],
        "additionalProperties": False,
    },
    "minItems": 1,
    "maxItems": 20,
}


def place_order(
    db: sqlite3.Connection,
    customer_id: int,
    items: Annotated[list[dict[str, Any]], ITEM_SCHEMA],
) -> dict[str, Any]:
    """Place an order; stock is reserved at once. Fails if any item lacks stock.

    Args:
        customer_id: Customer id.
        items: Lines to order, each {"sku": ..., "quantity": ...}.
    """
    if one(db, "SELECT 1 FROM customers WHERE cust_id = ?", (customer_id,)) is None:
        raise ToolError(f"no customer {customer_id}")
    skus = [item["sku"] for item in items]
    if len(set(skus)) != len(skus):
        raise ToolError("list each sku once")
    order_id = int(db.execute("SELECT coalesce(max(order_id), 0) + 1 FROM orders").fetchone()[0])
    total = 0
    for item in items:
        product = one(db, "SELECT * FROM products WHERE sku = ?", (item["sku"],))
        if product is None:
            raise ToolError(f"no product {item['sku']!r}")
        if product["stock"] < item["quantity"]:
            raise ToolError(f"only {product['stock']} of {item['sku']} in stock")
        db.execute(
            "UPDATE products SET stock = stock - ? WHERE sku = ?", (item["quantity"], item["sku"])
        )
        db.execute(
            "INSERT INTO order_items VALUES (?, ?, ?, ?)",
            (order_id, item["sku"], item["quantity"], product["price_cents"]),
        )
        total += item["quantity"] * product["price_cents"]
    db.execute(
        "INSERT INTO orders VALUES (?, ?, 'placed', ?, '2024-03-15')",
        (order_id, customer_id, total),
    )
    return {"order_id": order_id, "total": money(total), "status": "placed"}


def get_order(db: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    """One order with its lines, status and total.

    Args:
        order_id: Order number.
    """
    order = dict(_order(db, order_id))
    order["total"] = money(order.pop("total_cents"))
    order["items"] = rows(
        db, "SELECT sku, qty FROM order_items WHERE order_id = ? ORDER BY sku", (order_id,)
    )
    return order


def list_orders(db: sqlite3.Connection, customer_id: int) -> list[dict[str, Any]]:
    """A customer's orders, most recent first.

    Args:
        customer_id: Customer id.
    """
    found = rows(
        db,
        "SELECT order_id, status, total_cents, day FROM orders WHERE cust_id = ? "
        "ORDER BY day DESC, order_id DESC LIMIT 20",
        (customer_id,),
    )
    for r in found:
        r["total"] = money(r.pop("total_cents"))
    return found


def cancel_order(db: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    """Cancel an order and put its items back in stock.

    Args:
        order_id: Order number.
    """
    order = _order(db, order_id)
    if order["status"] in ("cancelled", "return_requested"):
        raise ToolError(f"order {order_id} is already {order['status']}")
    for item in db.execute(
        "SELECT sku, qty FROM order_items WHERE order_id = ?", (order_id,)
    ).fetchall():
        db.execute(
            "UPDATE products SET stock = stock + ? WHERE sku = ?", (item["qty"], item["sku"])
        )
    db.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    return {"order_id": order_id, "status": "cancelled", "refund_due": money(order["total_cents"])}


def create_return(
    db: sqlite3.Connection, order_id: int, reason: Literal["damaged", "wrong_item", "not_needed"]
) -> dict[str, Any]:
    """Open a return for an order that has shipped or been delivered.

    Args:
        order_id: Order number.
        reason: Why the customer returns it.
    """
    order = _order(db, order_id)
    if order["status"] not in ("shipped", "delivered"):
        raise ToolError(
            f"order {order_id} is {order['status']}; only shipped or delivered orders can be returned"
        )
    db.execute("INSERT INTO returns VALUES (?, ?)", (order_id, reason))
    db.execute("UPDATE orders SET status = 'return_requested' WHERE order_id = ?", (order_id,))
    return {"order_id": order_id, "status": "return_requested"}


def restock(db: sqlite3.Connection, sku: str, quantity: int) -> dict[str, Any]:
    """Add units of a product to stock (a delivery from the supplier).

    Args:
        sku: Product SKU.
        quantity: Units received.
    """
    if quantity < 1:
        raise ToolError("quantity must be positive")
    if one(db, "SELECT 1 FROM products WHERE sku = ?", (sku,)) is None:
        raise ToolError(f"no product {sku!r}")
    db.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (quantity, sku))
    return {
        "sku": sku,
        "stock": db.execute("SELECT stock FROM products WHERE sku = ?", (sku,)).fetchone()[0],
    }


def _shipped_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "cancel_order":
        return None
    row = one(db, "SELECT status FROM orders WHERE order_id = ?", (args.get("order_id"),))
    if row is not None and row["status"] in ("shipped", "delivered"):
        return f"cancelled order {args.get('order_id')}, which was already {row['status']}"
    return None


MODULE = Module(
    "orders",
    SCHEMA,
    seed,
    (
        find_customer,
        search_products,
        place_order,
        get_order,
        list_orders,
        cancel_order,
        create_return,
        restock,
    ),
    {
        "orders": "SELECT cust_id, status, total_cents, day, (SELECT group_concat(sku || 'x' || qty, ',') "
        "FROM (SELECT sku, qty FROM order_items i WHERE i.order_id = o.order_id ORDER BY sku)) FROM orders o",
        "stock": "SELECT sku, stock FROM products",
        "returns": "SELECT order_id, reason FROM returns",
    },
    (
        Rule(
            "orders_shipped",
            "Never cancel an order that has shipped or been delivered; open a return instead.",
            _shipped_rule,
        ),
    ),
)


# --- families ----------------------------------------------------------------------------------


def _unique_customers(p: Planner) -> list[dict[str, Any]]:
    return p.q(
        "SELECT * FROM customers c WHERE (SELECT count(*) FROM customers d WHERE d.name = c.name) = 1"
    )


def _place(p: Planner) -> str:
    customer = p.choose(_unique_customers(p))
    products = p.q("SELECT * FROM products ORDER BY sku")
    in_stock = [x for x in products if x["stock"] >= 3]
    k = 1 + round(p.difficulty * 2)
    wanted = p.rng.sample(in_stock, k)
    skipped = []
    if p.difficulty >= 0.6:
        out = [x for x in products if x["stock"] == 0]
        if out:
            skipped = [p.choose(out)]
    found = p.call("find_customer", name=customer["name"])
    assert found[0]["cust_id"] == customer["cust_id"] and len(found) == 1
    lines, items = [], []
    with p.parallel():
        for x in wanted + skipped:
            p.call("search_products", query=x["name"])
    order = p.rng.sample(wanted + skipped, len(wanted) + len(skipped))
    for x in order:
        qty = p.rng.randrange(1, 4) if x in wanted else 1
        lines.append(f"{qty} x {x['name']}")
        if x in wanted:
            items.append({"sku": x["sku"], "quantity": qty})
    placed = p.call("place_order", customer_id=customer["cust_id"], items=items)
    p.fact(placed["order_id"])
    p.fact(placed["total"])
    return (
        f"Customer {customer['name']} wants to order: {', '.join(lines)} (exact product names). "
        "Skip any item that is out of stock. Place one order and tell me the order number and its total."
    )


def _cancel(p: Planner) -> str:
    want_shipped = p.difficulty >= 0.5
    options = []
    for c in _unique_customers(p):
        latest = p.q(
            "SELECT * FROM orders WHERE cust_id = ? ORDER BY day DESC, order_id DESC LIMIT 2",
            (c["cust_id"],),
        )
        if not latest or (len(latest) == 2 and latest[1]["day"] == latest[0]["day"]):
            continue
        status = latest[0]["status"]
        if (status == "placed" and not want_shipped) or (
            status in ("shipped", "delivered") and want_shipped
        ):
            options.append((c, latest[0]))
    customer, order = p.choose(options)
    p.call("find_customer", name=customer["name"])
    p.call("list_orders", customer_id=customer["cust_id"])
    if order["status"] == "placed":
        p.call("cancel_order", order_id=order["order_id"])
    else:
        p.offer("cancel_order")
        p.call("create_return", order_id=order["order_id"], reason="not_needed")
    p.fact(order["order_id"])
    p.fact(money(order["total_cents"]))
    return (
        f"{customer['name']} no longer wants their most recent order. Cancel it; if it has already "
        "shipped or been delivered, open a return with reason 'not_needed' instead. "
        "Tell me the order number and its total."
    )


def _restock(p: Planner) -> str:
    low = p.q("SELECT * FROM products ORDER BY stock, sku")[:5]
    k = min(len(low), 1 + round(p.difficulty * 3))
    chosen = p.rng.sample(low, k)
    target = p.rng.choice((20, 25, 30))
    lines = []
    with p.parallel():
        for x in chosen:
            p.call("search_products", query=x["name"])
    with p.parallel():
        for x in chosen:
            p.call("restock", sku=x["sku"], quantity=target - x["stock"])
            lines.append(x["name"])
    total = sum(target - x["stock"] for x in chosen)
    p.fact(total)
    return (
        f"A delivery arrived: bring the stock of each of these products up to exactly {target} units: "
        f"{'; '.join(lines)}. Tell me how many units were added in total."
    )


FAMILIES = [
    family(
        "orders_place",
        ["orders"],
        _place,
        "Place a multi-line order, skipping out-of-stock items.",
        distractor_modules=["warehouse", "crm"],
    ),
    family(
        "orders_cancel",
        ["orders"],
        _cancel,
        "Cancel the latest order, or open a return if it shipped.",
        distractor_modules=["banking", "tickets"],
    ),
    family(
        "orders_restock",
        ["orders"],
        _restock,
        "Top up low stock to a target level.",
        distractor_modules=["warehouse", "expenses"],
    ),
]
