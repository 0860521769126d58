"""``llm/FunctionCalling-v0``'s procedural families: a request in plain words answered by one
message of calls to the back ends' tools (their specs are the ToolCalling tools'), graded by AST
match against BFCL-style possible answers.

Each request sampler draws ``(request text, possible answer params)`` for one tool; a family
picks one or several tools and, from difficulty, how many calls and distractor functions. No
tool runs here: the gold is the possible-answer entry, not a database state.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from llmgym.envs.tools import scenario
from llmgym.tasks import Family, Task, draft

Sample = tuple[str, dict[str, list[Any]]]
_CITIES = {
    "BOS": "Boston",
    "SEA": "Seattle",
    "AUS": "Austin",
    "DEN": "Denver",
    "SFO": "San Francisco",
}
_DEPTS = {"ENG": "Engineering", "SAL": "Sales", "FIN": "Finance", "OPS": "Operations"}


def _employees(r: random.Random) -> Sample:
    name = f"{r.choice(scenario.FIRST)} {r.choice(scenario.LAST)}"
    if r.random() < 0.5:
        dept = r.choice(sorted(_DEPTS))
        return f"find employees named {name} in {_DEPTS[dept]}", {
            "name": [name],
            "department": [_DEPTS[dept], dept],
        }
    return f"search the directory for {name}", {"name": [name], "department": [""]}


def _flights(r: random.Random) -> Sample:
    a, b = r.sample(sorted(_CITIES), 2)
    day = f"2024-04-{r.randrange(1, 29):02d}"
    return (
        f"list flights from {_CITIES[a]} ({a}) to {_CITIES[b]} ({b}) on {day}",
        {"origin": [a], "destination": [b], "day": [day]},
    )


def _convert(r: random.Random) -> Sample:
    src, dst = r.choice(
        (("ft", "m"), ("lb", "kg"), ("F", "C"), ("mi", "km"), ("gal", "l"), ("oz", "g"))
    )
    value = round(r.uniform(1, 500), 1)
    return f"convert {value} {src} to {dst}", {
        "value": [value],
        "from_unit": [src],
        "to_unit": [dst],
    }


def _transfer(r: random.Random) -> Sample:
    a, b = r.sample(range(1000, 1999), 2)
    amount = r.randrange(5, 900) + r.choice((0, 0.5, 0.25))
    if r.random() < 0.5:
        memo = r.choice(("rent", "groceries", "gift", "invoice 77"))
        return (
            f"send ${amount} from ACC-{a} to ACC-{b} with the memo '{memo}'",
            {
                "from_account": [f"ACC-{a}"],
                "to_account": [f"ACC-{b}"],
                "amount": [amount],
                "memo": [memo],
            },
        )
    return (
        f"transfer ${amount} from account ACC-{a} to ACC-{b}",
        {
            "from_account": [f"ACC-{a}"],
            "to_account": [f"ACC-{b}"],
            "amount": [amount],
            "memo": [""],
        },
    )


def _priority(r: random.Random) -> Sample:
    tid, level = r.randrange(1000, 1100), r.choice(("low", "normal", "high", "urgent"))
    return f"set the priority of ticket {tid} to {level}", {"ticket_id": [tid], "priority": [level]}


def _move(r: random.Random) -> Sample:
    sku = f"P-{r.randrange(200, 216)}"
    a, b = (f"{z}-{r.randrange(1, 7):02d}" for z in r.sample("ABCD", 2))
    q = r.randrange(1, 60)
    return f"move {q} units of {sku} from bin {a} to bin {b}", {
        "sku": [sku],
        "from_bin": [a],
        "to_bin": [b],
        "quantity": [q],
    }


def _tickets(r: random.Random) -> Sample:
    cat = r.choice(("billing", "shipping", "account", "technical"))
    if r.random() < 0.5:
        return (
            f"show the open {cat} tickets that nobody is assigned to",
            {
                "status": ["open", ""],
                "category": [cat],
                "customer": [""],
                "unassigned_only": [True],
            },
        )
    return (
        f"list the closed {cat} tickets",
        {"status": ["closed"], "category": [cat], "customer": [""], "unassigned_only": [False, ""]},
    )


def _hotel(r: random.Random) -> Sample:
    hid, nights = f"H{r.randrange(1, 29):03d}", r.randrange(1, 6)
    who = f"{r.choice(scenario.FIRST)} {r.choice(scenario.LAST)}"
    day = f"2024-04-{r.randrange(1, 25):02d}"
    return (
        f"book hotel {hid} for {who}, checking in on {day} for {nights} nights",
        {"hotel_id": [hid], "traveler": [who], "check_in": [day], "nights": [nights]},
    )


def _deal(r: random.Random) -> Sample:
    did, stage = (
        r.randrange(1, 30),
        r.choice(("qualified", "proposal", "negotiation", "won", "lost")),
    )
    return f"move deal {did} to the {stage} stage", {"deal_id": [did], "stage": [stage]}


def _mkdir(r: random.Random) -> Sample:
    path = f"/home/{r.choice(scenario.FIRST).lower()}/{r.choice(('archive', 'reports', 'tmp2', 'photos'))}"
    return f"create the directory {path}", {"path": [path]}


REQUESTS: dict[str, Callable[[random.Random], Sample]] = {
    "search_employees": _employees,
    "search_flights": _flights,
    "convert": _convert,
    "transfer": _transfer,
    "set_priority": _priority,
    "move_stock": _move,
    "list_tickets": _tickets,
    "book_hotel": _hotel,
    "update_deal_stage": _deal,
    "make_dir": _mkdir,
}


def _function(name: str) -> dict[str, Any]:
    return dict(scenario.tool_spec(name)["function"])


def _build(kind: str) -> Callable[[random.Random, float], Task]:
    def generate(rng: random.Random, difficulty: float) -> Task:
        names = sorted(REQUESTS)
        parallel = kind in ("parallel", "parallel_multiple")
        n_calls = 2 + round(difficulty * 2) if parallel else 1
        if kind == "parallel":
            picks = [rng.choice(names)] * n_calls
        elif kind == "parallel_multiple":
            picks = rng.sample(names, n_calls)
        else:
            picks = [rng.choice(names)]
        offered = list(dict.fromkeys(picks))
        if kind in ("multiple", "parallel_multiple"):
            others = [n for n in names if n not in offered]
            offered += rng.sample(others, min(len(others), 1 + round(difficulty * 5)))
            rng.shuffle(offered)
        requests, gold = [], []
        for name in picks:
            text, params = REQUESTS[name](rng)
            requests.append(text)
            gold.append({name: params})
        prompt = "Please " + "; also ".join(requests) + "."
        return draft(
            prompt,
            {"ground_truth": gold},
            metadata={"functions": [_function(n) for n in offered], "category": kind},
        )

    return generate


FAMILIES = [
    Family("fc_simple", _build("simple"), description="One function offered, one call."),
    Family("fc_multiple", _build("multiple"), description="Several functions offered, one call."),
    Family(
        "fc_parallel", _build("parallel"), description="One function, several calls in one message."
    ),
    Family(
        "fc_parallel_multiple",
        _build("parallel_multiple"),
        description="Several functions, several calls.",
    ),
]
