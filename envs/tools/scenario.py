"""Scenario machinery: SQLite-backed tool modules, policy rules, and the planner that builds
a task by replaying its gold calls on a seeded database.

A :class:`Module` is a slice of an enterprise back end: a schema, a seeding function, plain
Python tools (``fn(db, **arguments)``, described by :func:`llmgym.toolspecs.function_spec`),
the queries that define its state, and its policy rules. A family generator gets a
:class:`Planner`: it reads the seeded database to pick entities, calls tools exactly as the
model should (each call runs, so later calls can use earlier results), and states the facts
that the final answer must contain. The planner's database after the last gold call *is* the
goal state; its per-table digests go into the task's answer.

The machinery knows the back ends handed to :func:`install` and nothing else: it never imports
the catalogue (:mod:`llmgym.envs.tools.families`), whose modules are written with it; the package
:mod:`llmgym.envs.tools` installs the catalogue's list when any module of the wing is imported.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from llmgym import error
from llmgym.tasks import Family, Task, draft, stable_seed
from llmgym.toolspecs import function_spec, validate_arguments

T = TypeVar("T")

TODAY = "2024-03-15"
"""The scenarios' fixed 'today' (a Friday), so tasks never depend on the clock."""


class ToolError(Exception):
    """A tool refuses a call (unknown id, insufficient stock...); the model is told why."""


@dataclass(frozen=True)
class Rule:
    """A policy stated to the model; ``check(db, tool, args)`` returns a violation or None.

    Tools do not enforce policies (real APIs rarely do): breaking one is the model's fault
    and costs the safety component, even when the goal state is reached.
    """

    id: str
    text: str
    check: Callable[[sqlite3.Connection, str, Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class Module:
    """One back-end system: schema, seed, tools, state queries and rules."""

    name: str
    schema: str
    seed: Callable[[sqlite3.Connection, random.Random, int], None]
    tools: tuple[Callable[..., Any], ...]
    state: Mapping[str, str]
    rules: tuple[Rule, ...] = ()
    description: str = ""


_MODULES: dict[str, Module] = {}
_TOOLS: dict[str, Callable[..., Any]] = {}


def install(modules: Sequence[Module]) -> None:
    """Make ``modules`` the back ends that tasks may name, replacing those installed before (to
    add one of your own, pass the catalogue's list with it). Module and tool names are unique."""
    by_name: dict[str, Module] = {}
    tools: dict[str, Callable[..., Any]] = {}
    for mod in modules:
        if mod.name in by_name:
            raise ValueError(f"duplicate tool module {mod.name!r}")
        for fn in mod.tools:
            if fn.__name__ in tools:
                raise ValueError(f"tool {fn.__name__!r} is defined twice")
            tools[fn.__name__] = fn
        by_name[mod.name] = mod
    _MODULES.clear()
    _MODULES.update(by_name)
    _TOOLS.clear()
    _TOOLS.update(tools)
    tool_spec.cache_clear()
    _seeded_image.cache_clear()


def module(name: str) -> Module:
    return _MODULES[name]


def tool(name: str) -> Callable[..., Any] | None:
    return _TOOLS.get(name)


@functools.cache
def tool_spec(name: str) -> dict[str, Any]:
    fn = tool(name)
    if fn is None:
        raise KeyError(name)
    return function_spec(fn)


def rules_for(modules: Sequence[str]) -> list[Rule]:
    return [r for m in modules for r in module(m).rules]


# --- databases -------------------------------------------------------------------------------


def connect() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    db.row_factory = sqlite3.Row
    return db


@functools.lru_cache(maxsize=256)
def _seeded_image(modules: tuple[str, ...], db_seed: int) -> bytes:
    db = connect()
    for name in modules:
        mod = module(name)
        db.executescript(mod.schema)
        mod.seed(db, random.Random(stable_seed("tools-db", name, db_seed)), db_seed)
    image = db.serialize()
    db.close()
    return image


def seeded_db(modules: Sequence[str], db_seed: int) -> sqlite3.Connection:
    """A fresh in-memory database with ``modules`` created and seeded from ``db_seed``."""
    return restore(_seeded_image(tuple(modules), int(db_seed)))


def restore(image: bytes) -> sqlite3.Connection:
    db = connect()
    db.deserialize(image)
    return db


_ORDERED: dict[str, str] = {}


def state_digests(db: sqlite3.Connection, modules: Sequence[str]) -> dict[str, str]:
    """``{"module.label": sha256}`` of each state query's rows, sorted canonically (by SQLite,
    on every column, so row order and generated ids that the query leaves out do not matter)."""
    out = {}
    for name in modules:
        for label, sql in module(name).state.items():
            ordered = _ORDERED.get(sql)
            if ordered is None:
                width = len(db.execute(f"SELECT * FROM ({sql}) LIMIT 0").description)
                keys = ", ".join(str(i + 1) for i in range(width))
                ordered = _ORDERED[sql] = f"SELECT * FROM ({sql}) ORDER BY {keys}"
            text = repr([tuple(r) for r in db.execute(ordered).fetchall()])
            out[f"{name}.{label}"] = hashlib.sha256(text.encode()).hexdigest()[:32]
    return out


def execute(db: sqlite3.Connection, name: str, arguments: Mapping[str, Any]) -> Any:
    """Run a tool inside a savepoint: a ToolError or a crash leaves the database untouched."""
    fn = tool(name)
    if fn is None:
        raise ToolError(f"unknown tool {name!r}")
    db.execute("SAVEPOINT tool_call")
    try:
        result = fn(db, **arguments)
    except BaseException:
        db.execute("ROLLBACK TO tool_call")
        db.execute("RELEASE tool_call")
        raise
    db.execute("RELEASE tool_call")
    return result


def violations(
    db: sqlite3.Connection, rules: Sequence[Rule], name: str, arguments: Mapping[str, Any]
) -> list[str]:
    out = []
    for rule in rules:
        try:
            found = rule.check(db, name, arguments)
        except (sqlite3.Error, TypeError, ValueError, KeyError):
            found = None
        if found:
            out.append(f"{rule.id}: {found}")
    return out


def like(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere, its own % and _ escaped (use ESCAPE '\\')."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def one(db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
    row: sqlite3.Row | None = db.execute(sql, tuple(params)).fetchone()
    return row


def rows(db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    return [dict(r) for r in db.execute(sql, tuple(params)).fetchall()]


def money(cents: int) -> str:
    """Dollars with two decimals: ``money(123450) == '1234.50'``."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def cents(amount: float) -> int:
    return int(round(amount * 100))


# --- shared data pools ---------------------------------------------------------------------------

FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Emma",
    "Mia",
    "Lucas",
    "Sofia",
    "Mateo",
    "Amara",
    "Kenji",
    "Priya",
    "Omar",
    "Elena",
    "Tomas",
    "Zara",
    "Ivan",
    "Leila",
    "Hugo",
    "Nadia",
    "Felix",
    "Ines",
    "Ravi",
    "Chloe",
    "Diego",
    "Maya",
    "Jonas",
    "Aisha",
    "Marco",
    "Lena",
    "Yusuf",
    "Clara",
    "Arjun",
    "Freya",
    "Pablo",
    "Hana",
    "Oscar",
    "Selin",
    "Kofi",
    "Nora",
    "Emil",
]
LAST = [
    "Lopez",
    "Chen",
    "Okafor",
    "Novak",
    "Silva",
    "Tanaka",
    "Moreau",
    "Patel",
    "Kowalski",
    "Haddad",
    "Jensen",
    "Rossi",
    "Ivanova",
    "Mendes",
    "Nakamura",
    "Fischer",
    "Costa",
    "Dubois",
    "Singh",
    "Larsen",
    "Kim",
    "Alvarez",
    "Brennan",
    "Yilmaz",
    "Petrov",
    "Nilsen",
]


def people(db_seed: int, n: int = 40) -> list[tuple[str, str]]:
    """The shared cast for one database seed: modules draw customers, staff and account
    owners from it, so multi-system workflows find the same person in every system.
    Two pairs share a full name (ambiguous entities)."""
    rng = random.Random(stable_seed("tools-people", db_seed))
    seen: set[tuple[str, str]] = set()
    cast: list[tuple[str, str]] = []
    while len(cast) < n - 2:
        person = (rng.choice(FIRST), rng.choice(LAST))
        if person not in seen:
            seen.add(person)
            cast.append(person)
    cast.append(cast[1])
    cast.append(cast[4])
    return cast


def full(person: tuple[str, str]) -> str:
    return f"{person[0]} {person[1]}"


# --- planning a task -------------------------------------------------------------------------------


@dataclass
class Planner:
    """Builds one task: gold calls replayed on the seeded database, facts, decoys."""

    modules: list[str]
    db_seed: int
    rng: random.Random
    difficulty: float
    db: sqlite3.Connection = field(init=False)
    turns: list[list[dict[str, Any]]] = field(default_factory=list)
    facts: list[list[str]] = field(default_factory=list)
    decoys: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)
    _group: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.db = seeded_db(self.modules, self.db_seed)
        self._rules = rules_for(self.modules)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run a gold call now and record it; the gold must be valid, allowed and succeed."""
        errors = validate_arguments(tool_spec(name), arguments)
        assert not errors, f"gold call {name}{arguments} is invalid: {errors}"
        broken = violations(self.db, self._rules, name, arguments)
        assert not broken, f"gold call {name}{arguments} breaks a rule: {broken}"
        result = execute(self.db, name, arguments)
        entry = {"name": name, "arguments": json.loads(json.dumps(arguments))}
        if self._group is not None:
            self._group.append(entry)
        else:
            self.turns.append([entry])
        return json.loads(json.dumps(result))

    @contextmanager
    def parallel(self) -> Iterator[None]:
        """Calls inside the block go out together in one assistant turn."""
        self._group = []
        try:
            yield
        finally:
            group, self._group = self._group, None
            if group:
                self.turns.append(group)

    def fact(self, *alternatives: Any) -> None:
        """A fact the final answer must state (any one of the spellings)."""
        self.facts.append([str(a) for a in alternatives])

    def decoy(self, *values: Any) -> None:
        """Values a guesser would name (the wrong namesake's email...): stating one fails."""
        self.decoys.extend(str(v) for v in values if str(v))

    def offer(self, *names: str) -> None:
        """Offer tools the gold does not use (the tempting one a policy forbids here)."""
        self.offered.extend(names)

    def tools_used(self) -> list[str]:
        used = [c["name"] for turn in self.turns for c in turn]
        return list(dict.fromkeys(used + self.offered))

    def q(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return rows(self.db, sql, params)

    def choose(self, options: Sequence[T]) -> T:
        """One of ``options`` (drawn as ``rng.choice`` draws); none means this seeded world has
        nothing to ask of this family, and the task is planned again in a new world."""
        if not options:
            raise NoTask("no candidate in this seeded database")
        return self.rng.choice(options)


class NoTask(Exception):
    """A planner found nothing to build a task from in its seeded database."""


WORLD_REDRAWS = 20
"""Worlds a family may try before its task build fails (each is a fresh seeded database)."""


Generator = Callable[[Planner], str]


def family(
    name: str,
    modules: Sequence[str],
    generate: Generator,
    description: str,
    *,
    distractor_modules: Sequence[str] = (),
) -> Family:
    """A task family from a planner function ``generate(planner) -> prompt``.

    Difficulty adds distractor tools (other tools of the same modules, then, from 0.5 up,
    tools of one more module drawn from ``distractor_modules``, whose tables then exist too).
    """

    def build(rng: random.Random, difficulty: float) -> Task:
        mods = list(modules)
        if difficulty >= 0.5 and distractor_modules:
            extra = rng.choice(sorted(set(distractor_modules) - set(mods)))
            mods.append(extra)
        for _ in range(WORLD_REDRAWS):  # the first world almost always serves: same draws
            planner = Planner(mods, rng.getrandbits(62), rng, difficulty)
            try:
                prompt = generate(planner)
                break
            except NoTask:
                planner.db.close()
        else:
            raise error.Error(f"Tool family {name!r} found no task in {WORLD_REDRAWS} databases")
        used = planner.tools_used()
        pool = sorted({fn.__name__ for m in mods for fn in module(m).tools} - set(used))
        rng.shuffle(pool)
        n_distract = 1 + round(difficulty * min(len(pool), 8))
        offered = used + pool[:n_distract]
        rng.shuffle(offered)
        rules = [r.id for r in rules_for(mods)]
        goal = state_digests(planner.db, mods)
        planner.db.close()
        return draft(
            prompt,
            {
                "calls": planner.turns,
                "facts": planner.facts,
                "decoys": planner.decoys,
                "goal": goal,
            },
            metadata={
                "modules": mods,
                "db_seed": planner.db_seed,
                "tools": offered,
                "rules": rules,
            },
        )

    return Family(name, build, description=description)


def replay_goal(task: Task) -> dict[str, str]:
    """The goal digests recomputed by replaying the task's gold calls on a fresh seeded DB."""
    mods = list(task.metadata["modules"])
    db = seeded_db(mods, int(task.metadata["db_seed"]))
    try:
        for turn in task.answer["calls"]:
            for call in turn:
                execute(db, call["name"], call["arguments"])
        return state_digests(db, mods)
    finally:
        db.close()
