"""Knowledge-base search: product articles with settings; answer from the right article, link it to tickets."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    ToolError,
    family,
    one,
    rows,
)

SCHEMA = """
CREATE TABLE articles (article_id INTEGER PRIMARY KEY, title TEXT NOT NULL, product TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE facts (article_id INTEGER NOT NULL, attribute TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE ticket_links (ticket_id INTEGER NOT NULL, article_id INTEGER NOT NULL, PRIMARY KEY (ticket_id, article_id));
"""
PRODUCTS = (
    "Desk Lamp",
    "Office Chair",
    "Soundbar",
    "Electric Kettle",
    "Camping Tent",
    "Standing Desk",
)
SERVERS = (
    "Relay Server",
    "Relay Server Lite",
    "Vault Gateway",
    "Vault Gateway Edge",
    "Pulse Agent",
    "Pulse Agent Pro",
)
ATTRIBUTES = {
    "default port": lambda r: str(r.randrange(1024, 65000)),
    "maximum upload size": lambda r: f"{r.choice((16, 32, 64, 128, 256))} MB",
    "session timeout": lambda r: f"{r.choice((5, 10, 15, 30, 45, 60))} minutes",
    "log retention": lambda r: f"{r.choice((7, 14, 30, 90))} days",
    "config file": lambda r: (
        f"/etc/{r.choice(('relay', 'vault', 'pulse'))}/{r.choice(('main', 'core', 'server'))}.toml"
    ),
}
PRODUCT_ATTRIBUTES = {
    "warranty": lambda r: f"{r.choice((1, 2, 3, 5))} years",
    "reset code": lambda r: f"RC-{r.randrange(1000, 9999)}",
    "support line": lambda r: f"+1-800-{r.randrange(100, 999)}-{r.randrange(1000, 9999)}",
}


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    catalogue = [(s, ATTRIBUTES) for s in SERVERS] + [(p, PRODUCT_ATTRIBUTES) for p in PRODUCTS]
    for aid, (product, attrs) in enumerate(catalogue, 1):
        facts = {name: make(rng) for name, make in attrs.items()}
        body = " ".join(f"The {name} of {product} is {value}." for name, value in facts.items())
        db.execute(
            "INSERT INTO articles VALUES (?, ?, ?, ?)",
            (aid, f"{product}: reference guide", product, body),
        )
        db.executemany(
            "INSERT INTO facts VALUES (?, ?, ?)", [(aid, n, v) for n, v in facts.items()]
        )


def search_kb(db: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    """Knowledge-base articles whose title contains every word of the query (at most 10).

    Args:
        query: Words to look for, e.g. "relay server".
    """
    words = [w for w in query.lower().split() if w][:8]
    if not words:
        raise ToolError("give at least one word")
    sql = "SELECT article_id, title FROM articles WHERE " + " AND ".join(
        ["lower(title) LIKE ?"] * len(words)
    )
    return rows(db, sql + " ORDER BY article_id LIMIT 10", [f"%{w}%" for w in words])


def get_article(db: sqlite3.Connection, article_id: int) -> dict[str, Any]:
    """Full text of an article.

    Args:
        article_id: Article id.
    """
    row = one(
        db, "SELECT article_id, title, body FROM articles WHERE article_id = ?", (article_id,)
    )
    if row is None:
        raise ToolError(f"no article {article_id}")
    return dict(row)


def link_article(db: sqlite3.Connection, ticket_id: int, article_id: int) -> dict[str, Any]:
    """Attach a knowledge-base article to a support ticket.

    Args:
        ticket_id: Ticket number.
        article_id: Article id.
    """
    if one(db, "SELECT 1 FROM articles WHERE article_id = ?", (article_id,)) is None:
        raise ToolError(f"no article {article_id}")
    db.execute("INSERT OR IGNORE INTO ticket_links VALUES (?, ?)", (ticket_id, article_id))
    return {"ticket_id": ticket_id, "article_id": article_id}


MODULE = Module(
    "kb",
    SCHEMA,
    seed,
    (search_kb, get_article, link_article),
    {"links": "SELECT ticket_id, article_id FROM ticket_links"},
)


def _answer(p: Planner) -> str:
    k = 1 + (p.difficulty >= 0.5)
    product = p.rng.choice(SERVERS)
    article = p.q("SELECT * FROM articles WHERE product = ?", (product,))[0]
    facts = p.q(
        "SELECT * FROM facts WHERE article_id = ? ORDER BY attribute", (article["article_id"],)
    )
    asked = p.rng.sample(facts, k)
    p.call("search_kb", query=product)
    p.call("get_article", article_id=article["article_id"])
    for f in asked:
        p.fact(f["value"])
        for other in p.q(
            "SELECT value FROM facts WHERE attribute = ? AND article_id != ?",
            (f["attribute"], f["article_id"]),
        ):
            if other["value"] != f["value"]:
                p.decoy(other["value"])
    what = " and the ".join(f["attribute"] for f in asked)
    return f"According to the knowledge base, what is the {what} of {product}? (Exactly that product, not a variant.)"


FAMILIES = [
    family(
        "kb_answer",
        ["kb"],
        _answer,
        "Answer a product question from the right KB article, not a look-alike.",
        distractor_modules=["tickets", "files"],
    ),
]
