"""Multi-system workflows: tasks that chain tools of several back ends (the same people live in each)."""

from __future__ import annotations

from typing import Any

from llmgym.envs.tools.families import kb, scheduling, tickets, travel
from llmgym.envs.tools.families.banking import LIMIT_CENTS
from llmgym.envs.tools.families.hr import DEPARTMENTS
from llmgym.envs.tools.scenario import FIRST, LAST, Planner, family, money, one


def _refund(p: Planner) -> str:
    options: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for c in p.q(
        "SELECT * FROM customers c WHERE (SELECT count(*) FROM customers d WHERE d.name = c.name) = 1"
    ):
        latest = p.q(
            "SELECT * FROM orders WHERE cust_id = ? AND status = 'placed' ORDER BY day DESC, order_id DESC",
            (c["cust_id"],),
        )
        if latest and (len(latest) == 1 or latest[0]["day"] != latest[1]["day"]):
            big = latest[0]["total_cents"] > LIMIT_CENTS
            if big == (p.difficulty >= 0.6) or not options:
                options.append((c, latest[0]))
    customer, order = p.choose(options)
    p.call("find_customer", name=customer["name"])
    p.call("list_orders", customer_id=customer["cust_id"])
    p.call("cancel_order", order_id=order["order_id"])
    accounts = p.call("find_accounts", owner=customer["name"])
    checking = next(a for a in accounts if a["kind"] == "checking")
    amount = order["total_cents"] / 100
    if order["total_cents"] > LIMIT_CENTS:
        p.offer("transfer")
        p.call(
            "request_approval",
            from_account="ACC-9000",
            to_account=checking["account_id"],
            amount=amount,
            reason=f"refund order {order['order_id']}",
        )
    else:
        p.call(
            "transfer",
            from_account="ACC-9000",
            to_account=checking["account_id"],
            amount=amount,
            memo=f"refund order {order['order_id']}",
        )
    p.fact(order["order_id"])
    p.fact(money(order["total_cents"]))
    return (
        f"{customer['name']} wants to cancel their most recent order that has not shipped yet and get the money "
        "back. Cancel it, then refund its total from the store's merchant account (ACC-9000) to the customer's "
        "checking account. Tell me the order number and the refunded amount."
    )


def _onboarding(p: Planner) -> str:
    first, last = p.rng.choice(FIRST), p.rng.choice(LAST)
    dept_id, dept_name = p.rng.choice(DEPARTMENTS)
    title = p.rng.choice(("Associate", "Analyst", "Specialist"))
    salary = p.rng.randrange(110, 200) * 500
    hire = p.call(
        "create_employee",
        first_name=first,
        last_name=last,
        department=dept_name,
        title=title,
        salary=salary,
    )
    user = hire["email"].split("@")[0]
    p.call("make_dir", path=f"/home/{user}")
    p.call("write_file", path=f"/home/{user}/welcome.txt", content=f"Welcome, {first}!\n")
    p.fact(hire["email"])
    ask = (
        f"Onboard a new hire: {first} {last} joins {dept_name} as {title} at {salary} dollars a year. Create the "
        "employee record, then create their home directory /home/<the part of their new email before the @> "
        f"containing a file welcome.txt whose whole content is 'Welcome, {first}!' followed by a newline."
    )
    if p.difficulty >= 0.4:
        manager = one(
            p.db,
            "SELECT e.emp_id, e.first_name || ' ' || e.last_name AS name FROM departments d "
            "JOIN employees e ON e.emp_id = d.manager_id WHERE d.dept_id = ?",
            (dept_id,),
        )
        assert manager is not None
        record = p.call("get_employee", emp_id=hire["emp_id"])
        assert record["manager_id"] == manager["emp_id"]
        p.call("get_employee", emp_id=manager["emp_id"])
        day = p.rng.choice(scheduling.DAYS)
        slot = scheduling.plan_meeting(p, [manager["name"]], f"Onboarding: {first} {last}", day, 30)
        assert slot is not None
        p.fact(scheduling.hhmm(slot[0]))
        ask += (
            f" Finally book a 30-minute meeting titled 'Onboarding: {first} {last}' on {day} with their manager "
            "only, at the earliest half-hour start when the manager is free, in the smallest free room "
            "(ties: lowest room id). Tell me the new email address and the meeting's start time."
        )
    else:
        ask += " Tell me the new email address."
    return ask


def _trip_expense(p: Planner) -> str:
    claimants = [r["emp_name"] for r in p.q("SELECT emp_name FROM claimants ORDER BY emp_name")]
    traveler = p.choose(claimants)
    for _ in range(100):
        origin, dest = p.rng.sample(travel.CITIES, 2)
        day = p.rng.choice(travel.DAYS)
        flight = travel.cheapest_flight(p.db, origin, dest, day)
        if flight is not None:
            break
    assert flight is not None
    p.call("search_flights", origin=origin, destination=dest, day=day)
    p.call("book_flight", flight_id=flight["flight_id"], traveler=traveler)
    reports = p.call("list_reports", employee=traveler, status="pending")
    if reports:
        report_id = min(r["report_id"] for r in reports)
    else:
        report_id = p.call("create_report", employee=traveler)["report_id"]
    p.call(
        "add_expense",
        report_id=report_id,
        category="travel",
        amount=flight["price_cents"] / 100,
        has_receipt=True,
        day=day,
    )
    p.fact(flight["flight_id"])
    p.fact(report_id)
    return (
        f"Book {traveler} on the cheapest flight from {origin} to {dest} on {day} that has seats and is within "
        "travel policy. Then file the fare as a 'travel' expense with a receipt, dated the flight day, on their "
        "pending expense report with the lowest id (create a report if they have none pending). "
        "Tell me the flight id and the report id."
    )


def _support_kb(p: Planner) -> str:
    k = 1 + round(p.difficulty * 2)
    open_tech = p.q(
        "SELECT * FROM tickets WHERE status = 'open' AND category = 'technical' ORDER BY opened, ticket_id"
    )
    chosen = open_tech[:k]
    p.call("list_tickets", status="open", category="technical")
    for t in chosen:
        product = next(x for x in tickets.PRODUCTS if x in t["subject"])
        article = p.q("SELECT article_id FROM articles WHERE product = ?", (product,))[0]
        p.call("search_kb", query=product)
        with p.parallel():
            p.call("link_article", ticket_id=t["ticket_id"], article_id=article["article_id"])
            p.call("close_ticket", ticket_id=t["ticket_id"], resolution="fixed")
        code = p.q(
            "SELECT value FROM facts WHERE article_id = ? AND attribute = 'reset code'",
            (article["article_id"],),
        )
        p.fact(code[0]["value"])
    return (
        f"Handle the {len(chosen)} oldest open technical ticket(s) (oldest first, ties by lowest ticket number): "
        "for each, link the knowledge-base reference guide of the product named in its subject, then close the "
        "ticket as 'fixed'. Tell me the reset code of each of those products."
    )


assert kb.PRODUCTS == tickets.PRODUCTS

FAMILIES = [
    family(
        "workflow_refund",
        ["orders", "banking"],
        _refund,
        "Cancel an order and refund it through the bank.",
        distractor_modules=["tickets", "crm"],
    ),
    family(
        "workflow_onboarding",
        ["hr", "files", "scheduling"],
        _onboarding,
        "Create a hire, their home directory and an onboarding meeting.",
        distractor_modules=["expenses"],
    ),
    family(
        "workflow_trip_expense",
        ["travel", "expenses"],
        _trip_expense,
        "Book a flight and expense it.",
        distractor_modules=["banking", "calc"],
    ),
    family(
        "workflow_support_kb",
        ["tickets", "kb"],
        _support_kb,
        "Link KB guides to tickets and close them.",
        distractor_modules=["orders", "crm"],
    ),
]
