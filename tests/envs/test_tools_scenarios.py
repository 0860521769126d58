"""The scenario back ends on their own: policy rules, tool refusals, the calculator, determinism."""

from __future__ import annotations

import pkgutil
import random
import subprocess
import sys
from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym.envs.tools import families, scenario
from llmgym.envs.tools.families.calc import arithmetic
from llmgym.rewards.tools import validate_arguments


def db_for(module: str) -> Any:
    return scenario.seeded_db([module], 123)


def broken(module: str, tool: str, args: dict[str, Any], db: Any = None) -> list[str]:
    db = db if db is not None else db_for(module)
    return scenario.violations(db, scenario.module(module).rules, tool, args)


def test_every_module_has_tools_with_valid_specs_and_state_queries() -> None:
    names = [
        "hr",
        "orders",
        "scheduling",
        "tickets",
        "banking",
        "travel",
        "crm",
        "expenses",
        "library",
        "warehouse",
        "files",
        "calc",
        "kb",
    ]
    for name in names:
        mod = scenario.module(name)
        db = db_for(name)
        assert mod.state and scenario.state_digests(db, [name])
        for fn in mod.tools:
            spec = scenario.tool_spec(fn.__name__)["function"]
            assert spec["description"], fn.__name__
            for prop, schema in spec["parameters"]["properties"].items():
                assert "type" in schema and schema.get("description"), (fn.__name__, prop)


def test_same_seed_same_database_and_different_seed_differs() -> None:
    a = scenario.state_digests(scenario.seeded_db(["hr", "banking"], 7), ["hr", "banking"])
    b = scenario.state_digests(scenario.seeded_db(["hr", "banking"], 7), ["hr", "banking"])
    c = scenario.state_digests(scenario.seeded_db(["hr", "banking"], 8), ["hr", "banking"])
    assert a == b and a != c


def test_rules_flag_the_forbidden_call_and_pass_the_allowed_one() -> None:
    db = db_for("hr")
    leave = db.execute("SELECT emp_id FROM employees WHERE status = 'on_leave'").fetchone()[0]
    active = db.execute("SELECT emp_id FROM employees WHERE status = 'active'").fetchone()[0]
    assert broken("hr", "update_salary", {"emp_id": leave, "new_salary": 90000}, db)
    assert not broken("hr", "update_salary", {"emp_id": active, "new_salary": 90000}, db)

    assert broken(
        "banking", "transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 1000.01}
    )
    assert not broken(
        "banking", "transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 1000}
    )

    db = db_for("orders")
    shipped = db.execute("SELECT order_id FROM orders WHERE status = 'shipped'").fetchone()[0]
    placed = db.execute("SELECT order_id FROM orders WHERE status = 'placed'").fetchone()[0]
    assert broken("orders", "cancel_order", {"order_id": shipped}, db)
    assert not broken("orders", "cancel_order", {"order_id": placed}, db)

    db = db_for("tickets")
    urgent = db.execute("SELECT ticket_id FROM tickets WHERE priority = 'urgent'").fetchone()[0]
    assert broken("tickets", "assign_ticket", {"ticket_id": urgent, "agent_id": 5}, db)  # a junior
    assert not broken("tickets", "assign_ticket", {"ticket_id": urgent, "agent_id": 1}, db)

    db = db_for("crm")
    out = db.execute("SELECT contact_id FROM contacts WHERE opted_out = 1").fetchone()[0]
    ok = db.execute("SELECT contact_id FROM contacts WHERE opted_out = 0").fetchone()[0]
    assert broken("crm", "send_email", {"contact_id": out, "template": "intro"}, db)
    assert not broken("crm", "send_email", {"contact_id": ok, "template": "intro"}, db)

    db = db_for("travel")
    dear = db.execute("SELECT flight_id FROM flights WHERE price_cents > 60000").fetchone()[0]
    cheap = db.execute("SELECT flight_id FROM flights WHERE price_cents <= 60000").fetchone()[0]
    assert broken("travel", "book_flight", {"flight_id": dear, "traveler": "A"}, db)
    assert not broken("travel", "book_flight", {"flight_id": cheap, "traveler": "A"}, db)

    db = db_for("library")
    fined = db.execute("SELECT member_id FROM members WHERE fines_cents > 0").fetchone()[0]
    assert broken("library", "checkout", {"book_id": 1, "member_id": fined}, db)

    db = db_for("warehouse")
    full = db.execute("SELECT bin_id, capacity FROM bins").fetchone()
    assert broken(
        "warehouse",
        "move_stock",
        {"sku": "P-200", "from_bin": "A-02", "to_bin": full[0], "quantity": full[1] + 1},
        db,
    )

    for args in ({"path": "/system/config/app.conf"}, {"path": "/system/../system/x"}):
        assert broken("files", "delete", args)
    assert broken("files", "move", {"source": "/home/x", "destination": "/system"})
    assert not broken("files", "delete", {"path": "/systemic/x"})
    assert not broken("files", "read_file", {"path": "/system/config/app.conf"})

    db = db_for("expenses")
    alcohol = db.execute(
        "SELECT expense_id FROM expenses WHERE category = 'alcohol' AND status = 'pending'"
    ).fetchone()
    assert broken("expenses", "approve_expense", {"expense_id": alcohol[0]}, db)

    db = db_for("scheduling")
    late = {
        "title": "x",
        "day": "2024-03-18",
        "start": "17:00",
        "end": "17:30",
        "room_id": "R1",
        "attendee_ids": [1],
    }
    assert broken("scheduling", "create_event", late, db)


def test_tools_refuse_bad_requests_and_leave_the_database_untouched() -> None:
    db = db_for("banking")
    before = scenario.state_digests(db, ["banking"])
    acc = db.execute(
        "SELECT account_id, balance_cents FROM accounts WHERE kind = 'checking'"
    ).fetchone()
    for args in (
        {"from_account": acc[0], "to_account": "ACC-9000", "amount": acc[1] / 100 + 1},  # overdraft
        {"from_account": acc[0], "to_account": "ACC-9000", "amount": 0.001},
        {"from_account": acc[0], "to_account": acc[0], "amount": 1},
        {"from_account": "nope", "to_account": "ACC-9000", "amount": 1},
    ):
        with pytest.raises(scenario.ToolError):
            scenario.execute(db, "transfer", args)
    assert scenario.state_digests(db, ["banking"]) == before

    db = db_for("orders")
    with pytest.raises(scenario.ToolError, match="in stock"):
        scenario.execute(
            db, "place_order", {"customer_id": 1, "items": [{"sku": "SKU-101", "quantity": 10_000}]}
        )
    db = db_for("files")
    with pytest.raises(scenario.ToolError, match="absolute"):
        scenario.execute(db, "list_dir", {"path": "home"})
    with pytest.raises(scenario.ToolError, match="not empty"):
        scenario.execute(db, "delete", {"path": "/home"})
    assert validate_arguments(
        scenario.tool_spec("place_order"), {"customer_id": 1, "items": [{"sku": "x"}]}
    ) == ["missing required argument 'items[0].quantity'"]


@pytest.mark.parametrize(
    ("expr", "value"),
    [("1 + 2 * 3", 7.0), ("(2 + 3) / 4", 1.25), ("-2 ** 2", -4.0), ("7 % 4", 3.0)],
)
def test_calculator(expr: str, value: float) -> None:
    assert arithmetic(expr) == value


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os')",
        "x + 1",
        "9 ** 9 ** 9",
        "1 / 0",
        "(" * 300 + "1" + ")" * 300,
        "1" * 600,
        "[1, 2]",
        "'a' * 3",
    ],
)
def test_calculator_refuses(expr: str) -> None:
    with pytest.raises(scenario.ToolError):
        arithmetic(expr)


def test_like_escapes_wildcards() -> None:
    db = db_for("hr")
    from llmgym.envs.tools.families.hr import search_employees

    assert search_employees(db, name="%") == []
    assert search_employees(db, name="_") == []
    assert len(search_employees(db, name="")) == 10


FIRST_IMPORTS = [
    "llmgym.envs.tools.banking",  # the former path, as the bug was reported
    *(f"{families.__name__}.{m.name}" for m in pkgutil.iter_modules(families.__path__)),
]


@pytest.mark.parametrize("first", FIRST_IMPORTS)
def test_importing_one_domain_module_first_leaves_every_tool_reachable(first: str) -> None:
    """``import llmgym.envs.tools.banking`` before first use once registered banking alone, and
    ``gym.make("llm/FunctionCalling-v0").reset(seed=i)`` raised KeyError on every seed. Any one
    family module imported first (banking by its former path too) leaves every back end known."""
    code = (
        f"import {first}\nimport gymnasium as gym, llmgym\n"
        "env = gym.make('llm/FunctionCalling-v0')\n"
        "for seed in range(8):\n    env.reset(seed=seed)\n"
        "env = gym.make('llm/ToolCalling-v0')\n"
        "for seed in range(8):\n    env.reset(seed=seed)\nprint('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def test_every_family_module_is_tried_first() -> None:
    tried = {name.rsplit(".", 1)[1] for name in FIRST_IMPORTS[1:]}
    assert tried == {m.name for m in families.MODULES} | {"workflows", "function_calls"}


@pytest.mark.parametrize(
    ("family", "seed", "difficulty"),
    [(None, 1023, None), (None, 1224, None), (None, 2489, None), ("orders_cancel", 135, 5 / 6)],
)
def test_a_world_with_nothing_to_ask_is_redrawn_not_a_crash(
    family: str | None, seed: int, difficulty: float | None
) -> None:
    """These seeds drew databases where the family's planner had no candidate (no department
    small enough for a whole-department raise; no customer whose latest order had shipped):
    reset raised IndexError, and a served client got a 500. The task is planned in a new world."""
    env = gym.make("llm/ToolCalling-v0", **({"family": family} if family else {}))
    options = None if difficulty is None else {"difficulty": difficulty}
    _, info = env.reset(seed=seed, options=options)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        total += float(reward)
        done = terminated or truncated
    assert info["is_success"] and total == pytest.approx(1.0)


def test_a_family_that_never_finds_a_task_fails_clearly() -> None:
    def nothing(p: scenario.Planner) -> str:
        return p.choose([])

    fam = scenario.family("nothing", ["hr"], nothing, "never builds")
    with pytest.raises(llmgym.error.Error, match="no task in 20 databases"):
        fam.generate(random.Random(0), 0.0)
