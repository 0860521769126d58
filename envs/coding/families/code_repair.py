"""CodeRepair families: a small module with an injected bug or a missing feature, a change
request with constraints, and tests that tell which behaviour is fixed.

Each template is a correct module (the reference) plus variants: a text edit that injects a
bug into one function, or removes the error handling a requirement asks for. Tests are drawn
per function; the ones the shipped module fails are the *fail-to-pass* tests, the others
guard against regressions (*pass-to-pass*).
"""

from __future__ import annotations

import copy
import random
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmgym import error
from llmgym.envs.coding.families.strings import WORDS
from llmgym.envs.coding.judge.program import decode, encode, static_facts
from llmgym.envs.coding.problem import DEFAULT_LIMITS, render_call, render_expected, scale
from llmgym.tasks import Family, Task, draft

FORBIDDEN_IMPORTS = ("os", "sys", "subprocess", "socket", "shutil", "ctypes", "importlib", "pickle")
FORBIDDEN_CALLS = ("eval", "exec", "compile", "open", "__import__", "input", "breakpoint")

Maker = Callable[[random.Random, float], tuple[Any, ...]]


@dataclass(frozen=True)
class Variant:
    """One change request: ``find`` (text of the reference) becomes ``replace`` in the shipped
    module, which breaks ``target``."""

    target: str
    find: str
    replace: str
    request: str
    """What the change request says, e.g. "withdrawals are added instead of subtracted"."""
    requirement: str = ""
    """An extra constraint on the fix (e.g. the errors to raise)."""
    cases: tuple[tuple[Any, ...], ...] = ()
    """Inputs of ``target`` that show the bug (always among the tests)."""


@dataclass(frozen=True)
class Template:
    name: str
    module: str
    intro: str
    source: str
    makers: dict[str, Maker]
    variants: tuple[Variant, ...]
    error_cases: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)
    """Inputs that must raise (the reference raises a builtin exception on them)."""


def _namespace(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "repair_template"}
    exec(
        compile(source, "<template>", "exec"), namespace
    )  # our own template code, not model output
    return namespace


def _outcome(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "value", encode(fn(*copy.deepcopy(args)))
    except Exception as e:  # noqa: BLE001 - the buggy module may fail in any way
        return "raises", type(e).__name__


def build_repair_task(template: Template, rng: random.Random, d: float) -> Task:
    """Pick a variant, ship the broken module, and draw fail-to-pass and pass-to-pass tests."""
    variant = template.variants[rng.randrange(len(template.variants))]
    reference = textwrap.dedent(template.source).strip() + "\n"
    if reference.count(variant.find) != 1:
        raise error.InvalidTask(f"{template.name}: a variant's edit must match exactly once")
    original = reference.replace(variant.find, variant.replace)
    good, bad = _namespace(reference), _namespace(original)
    per_fn = scale(d, 3, 5)
    tests: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(fn: str, args: tuple[Any, ...], hidden: bool = True) -> bool:
        key = fn + repr(encode(list(args)))
        if key in seen:
            return False
        want, bad_result = _outcome(good[fn], args), _outcome(bad[fn], args)
        test: dict[str, Any] = {"fn": fn, "args": encode(list(args)), "hidden": hidden}
        if want[0] == "raises":
            test["raises"] = want[1]
        else:
            test["expected"] = want[1]
        test["f2p"] = want != bad_result
        seen.add(key)
        tests.append(test)
        return True

    for fn, maker in template.makers.items():
        for _ in range(per_fn * 4):
            if sum(t["fn"] == fn for t in tests) >= per_fn:
                break
            add(fn, maker(rng, d))
    for args in (*variant.cases, *template.error_cases.get(variant.target, ())):
        add(variant.target, args)
    for _ in range(20 * per_fn):  # look for more inputs that show the bug
        if sum(t["f2p"] for t in tests) >= 3:
            break
        args = template.makers[variant.target](rng, d)
        if _outcome(good[variant.target], args) != _outcome(bad[variant.target], args):
            add(variant.target, args)
    f2p = [t for t in tests if t["f2p"]]
    if not f2p:
        raise error.InvalidTask(f"{template.name}: no test tells the fix from the bug")
    example = ""
    if d < 0.5 and len(f2p) >= 3:  # show one failing case: it becomes a visible test
        shown = f2p[0]
        shown["hidden"] = False
        call, want = render_call(shown), render_expected(shown)
        got = _outcome(bad[variant.target], tuple(decode(shown["args"])))
        got_text = f"raises `{got[1]}`" if got[0] == "raises" else f"returns `{decode(got[1])!r}`"
        want_text = f"raise `{shown['raises']}`" if "raises" in shown else f"return `{want}`"
        example = f"\nFor example, `{call}` {got_text} but should {want_text}."
    others = [name for name in _namespace_functions(reference) if name != variant.target]
    constraints = [
        f"Do not change the signature of the other public functions ({', '.join(f'`{n}`' for n in others)}).",
        "Do not import " + ", ".join(f"`{m}`" for m in FORBIDDEN_IMPORTS)
        + " and do not call " + ", ".join(f"`{c}()`" for c in FORBIDDEN_CALLS) + ".",
    ]  # fmt: skip
    if variant.requirement:
        constraints.insert(0, variant.requirement)
    prompt = (
        f"{template.intro.strip()}\n\n`{template.module}.py`:\n```python\n{original}```\n\n"
        f"Change request: {variant.request}{example}\n\nRequirements:\n"
        + "\n".join(f"- {c}" for c in constraints)
        + "\n\nAnswer with the complete corrected module in one ```python code block, or with "
        f"a unified diff against `{template.module}.py` in one ```diff code block."
    )
    answer = {
        "kind": "call",
        "entry_point": variant.target,
        "tests": tests,
        "compare": {"mode": "exact"},
        "languages": ["python"],
        "reference": {"python": reference},
        "limits": dict(DEFAULT_LIMITS),
        "repair": {
            "original": original,
            "target": variant.target,
            "signatures": static_facts(reference)["functions"],
            "forbidden_imports": list(FORBIDDEN_IMPORTS),
            "forbidden_calls": list(FORBIDDEN_CALLS),
        },
    }
    return draft(prompt, answer, metadata={"theme": "repair", "module": template.module})


def _namespace_functions(source: str) -> list[str]:
    return [n for n in static_facts(source)["functions"] if not n.startswith("_")]


# --- templates ----------------------------------------------------------------------------------

_LEDGER = '''
def parse_amount(text):
    """'12.34' or '12' -> cents as an int; ValueError if malformed or negative."""
    text = text.strip()
    whole, _, frac = text.partition(".")
    if not whole.isdigit() or (frac and (not frac.isdigit() or len(frac) > 2)):
        raise ValueError(f"bad amount: {text!r}")
    return int(whole) * 100 + int(frac.ljust(2, "0") or 0)


def apply_transactions(balance, transactions):
    """Apply [kind, cents] pairs in order; kind is 'deposit' or 'withdraw'."""
    for kind, cents in transactions:
        if kind == "deposit":
            balance += cents
        elif kind == "withdraw":
            if cents > balance:
                raise ValueError("insufficient funds")
            balance -= cents
        else:
            raise ValueError(f"unknown transaction kind: {kind!r}")
    return balance


def summarize(transactions):
    """Totals per kind and the number of transactions."""
    deposits = sum(c for k, c in transactions if k == "deposit")
    withdrawals = sum(c for k, c in transactions if k == "withdraw")
    return {"deposits": deposits, "withdrawals": withdrawals, "count": len(transactions)}
'''


def _amount_text(rng: random.Random, d: float) -> tuple[str]:
    if rng.random() < 0.2:
        return (rng.choice(["1.234", "abc", "-5", "1.x", " 3.5 ", "", "7."]),)
    whole = str(rng.randint(0, 10 ** scale(d, 2, 6)))
    frac = rng.choice(["", "5", "05", "50", "99"])
    return (whole + ("." + frac if frac else ""),)


def _transactions(rng: random.Random, d: float) -> list[list[Any]]:
    return [[rng.choice(["deposit", "withdraw"]), rng.randint(1, 500)]
            for _ in range(rng.randint(0, scale(d, 4, 12)))]  # fmt: skip


LEDGER = Template(
    name="repair_ledger",
    module="ledger",
    intro="A small bank-ledger module keeps amounts in integer cents.",
    source=_LEDGER,
    makers={
        "parse_amount": _amount_text,
        "apply_transactions": lambda rng, d: (rng.randint(0, 2000), _transactions(rng, d)),
        "summarize": lambda rng, d: (_transactions(rng, d),),
    },
    variants=(
        Variant(
            "apply_transactions",
            "            balance -= cents",
            "            balance += cents",
            "`apply_transactions` adds withdrawals to the balance instead of subtracting them.",
            cases=((100, [["withdraw", 30]]), (50, [["deposit", 5], ["withdraw", 20]])),
        ),
        Variant(
            "apply_transactions",
            '            if cents > balance:\n                raise ValueError("insufficient funds")\n',
            "",
            "`apply_transactions` lets the balance go negative.",
            "`apply_transactions` must raise `ValueError` when a withdrawal exceeds the "
            "current balance, and for an unknown transaction kind.",
        ),
        Variant(
            "parse_amount",
            'int(frac.ljust(2, "0") or 0)',
            "int(frac or 0)",
            "`parse_amount('12.5')` returns 1205 cents instead of 1250.",
            cases=(("12.5",), ("0.1",), ("3.7",)),
        ),
        Variant(
            "summarize",
            "len(transactions)}",
            "len(transactions) - 1}",
            "`summarize` reports one transaction too few.",
        ),
    ),  # fmt: skip
    error_cases={
        "apply_transactions": (
            (10, [["withdraw", 11]]),
            (0, [["refund", 5]]),
            (5, [["deposit", 5], ["withdraw", 11]]),
        )
    },
)

_INVENTORY = '''
def add_stock(stock, item, qty):
    """Return a new stock dict with qty more of item; qty must be positive."""
    if qty <= 0:
        raise ValueError("quantity must be positive")
    new = dict(stock)
    new[item] = new.get(item, 0) + qty
    return new


def remove_stock(stock, item, qty):
    """Return a new stock dict with qty less of item; items reaching 0 disappear."""
    have = stock.get(item, 0)
    if qty <= 0 or qty > have:
        raise ValueError(f"cannot remove {qty} of {item!r}")
    new = dict(stock)
    if have == qty:
        del new[item]
    else:
        new[item] = have - qty
    return new


def low_items(stock, threshold):
    """Items whose quantity is below threshold, sorted by quantity then name."""
    return sorted((name for name, qty in stock.items() if qty < threshold), key=lambda n: (stock[n], n))


def total_units(stock):
    return sum(stock.values())
'''


def _stock(rng: random.Random, d: float) -> dict[str, int]:
    return {w: rng.randint(1, 40) for w in rng.sample(WORDS, rng.randint(0, scale(d, 4, 10)))}


def _stock_and_item(rng: random.Random, d: float) -> tuple[dict[str, int], str, int]:
    stock = _stock(rng, d)
    item = rng.choice(sorted(stock)) if stock and rng.random() < 0.8 else rng.choice(WORDS)
    return stock, item, rng.randint(-2, 45)


INVENTORY = Template(
    name="repair_inventory",
    module="inventory",
    intro="An inventory module keeps stock as a dict from item name to quantity; functions "
    "return new dicts and never modify their argument.",
    source=_INVENTORY,
    makers={
        "add_stock": _stock_and_item,
        "remove_stock": _stock_and_item,
        "low_items": lambda rng, d: (_stock(rng, d), rng.randint(0, 40)),
        "total_units": lambda rng, d: (_stock(rng, d),),
    },
    variants=(
        Variant(
            "remove_stock",
            "    if have == qty:\n        del new[item]\n    else:\n        new[item] = have - qty\n",
            "    new[item] = have - qty\n",
            "`remove_stock` leaves items with quantity 0 in the stock; they must disappear.",
            cases=(({"bolt": 3}, "bolt", 3), ({"nut": 1, "gear": 2}, "nut", 1)),
        ),
        Variant(
            "remove_stock",
            '    if qty <= 0 or qty > have:\n        raise ValueError(f"cannot remove {qty} of {item!r}")\n',
            "",
            "`remove_stock` accepts impossible removals.",
            "`remove_stock` must raise `ValueError` when `qty` is not positive or larger than "
            "the quantity in stock (including items not in stock).",
        ),
        Variant(
            "low_items",
            "key=lambda n: (stock[n], n))",
            "key=lambda n: n)",
            "`low_items` must order items by quantity first, then by name.",
            cases=(({"a": 5, "b": 1, "c": 3}, 10), ({"x": 2, "y": 1}, 3)),
        ),
        Variant(
            "add_stock",
            '    if qty <= 0:\n        raise ValueError("quantity must be positive")\n',
            "",
            "`add_stock` accepts zero and negative quantities.",
            "`add_stock` must raise `ValueError` when `qty` is not positive.",
        ),
    ),  # fmt: skip
    error_cases={
        "remove_stock": (({"bolt": 3}, "bolt", 4), ({}, "nut", 1), ({"bolt": 3}, "bolt", 0)),
        "add_stock": (({}, "nut", 0), ({"a": 1}, "a", -2)),
    },
)

_TEXT = '''
def slugify(title):
    """Lowercase words of letters and digits joined by single hyphens."""
    words, current = [], ""
    for ch in title.lower():
        if ch.isascii() and ch.isalnum():
            current += ch
        elif current:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return "-".join(words)


def truncate(text, width):
    """At most width characters; cut text ends with '...' (counted in width)."""
    if width < 3:
        raise ValueError("width must be at least 3")
    if len(text) <= width:
        return text
    return text[: width - 3] + "..."


def wrap(text, width):
    """Greedy word wrap into lines of at most width characters (longer words stand alone)."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines
'''


def _title(rng: random.Random, d: float) -> tuple[str]:
    parts = [rng.choice(WORDS).capitalize() for _ in range(rng.randint(0, scale(d, 3, 8)))]
    seps = [rng.choice([" ", "  ", " - ", ", ", "!", "_", "é"]) for _ in parts]
    return ("".join(p + s for p, s in zip(parts, seps, strict=True)),)


TEXT = Template(
    name="repair_text_utils",
    module="text_utils",
    intro="A text utility module.",
    source=_TEXT,
    makers={
        "slugify": _title,
        "truncate": lambda rng, d: (_title(rng, d)[0], rng.randint(0, 30)),
        "wrap": lambda rng, d: (
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))),
            rng.randint(4, 20),
        ),
    },
    variants=(
        Variant(
            "truncate",
            "text[: width - 3]",
            "text[:width]",
            "`truncate` returns strings longer than `width`: the `...` must fit inside it.",
            cases=(("hello world", 5), ("abcdefgh", 7)),
        ),
        Variant(
            "truncate",
            '    if width < 3:\n        raise ValueError("width must be at least 3")\n',
            "",
            "`truncate` accepts widths that cannot hold the ellipsis.",
            "`truncate` must raise `ValueError` when `width` is less than 3.",
        ),
        Variant(
            "wrap",
            "len(line) + 1 + len(word) > width",
            "len(line) + len(word) > width",
            "`wrap` makes lines one character longer than `width`.",
            cases=(("aaa bbb ccc", 7), ("ab cd ef gh", 5)),
        ),
        Variant(
            "slugify",
            "if ch.isascii() and ch.isalnum():",
            "if ch.isalnum():",
            "`slugify` keeps non-ASCII letters; only ASCII letters and digits belong in a slug.",
            cases=(("Café Olé",), ("naïve façade 2",)),
        ),
    ),  # fmt: skip
    error_cases={"truncate": (("hello", 2), ("", 0))},
)

_STATS = '''
def mean(values):
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


def median(values):
    if not values:
        raise ValueError("median of an empty list")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def mode(values):
    """The most common value; ties go to the smallest."""
    if not values:
        raise ValueError("mode of an empty list")
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return min(counts, key=lambda v: (-counts[v], v))


def value_range(values):
    return max(values) - min(values) if values else 0
'''


def _values(rng: random.Random, d: float) -> tuple[list[int]]:
    return (
        [
            rng.randint(-20, 20)
            for _ in range(rng.randint(0 if rng.random() < 0.15 else 1, scale(d, 5, 15)))
        ],
    )


STATS = Template(
    name="repair_stats",
    module="stats",
    intro="A small statistics module over lists of integers.",
    source=_STATS,
    makers={"mean": _values, "median": _values, "mode": _values, "value_range": _values},
    variants=(
        Variant(
            "median",
            "    ordered = sorted(values)\n",
            "    ordered = values\n",
            "`median` gives wrong answers for unsorted input.",
            cases=(([3, 1, 2],), ([5, -1, 4, 0],)),
        ),
        Variant(
            "median",
            "        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2",
            "        return ordered[mid]\n    return ordered[mid]",
            "`median` of an even number of values must average the two middle values.",
            cases=(([1, 2],), ([4, 1, 3, 2],)),
        ),
        Variant(
            "mode",
            "key=lambda v: (-counts[v], v))",
            "key=lambda v: -counts[v])",
            "`mode` must break ties by returning the smallest of the most common values.",
            cases=(([3, 1, 3, 1, 2],), ([9, 4],)),
        ),
        Variant(
            "mean",
            '    if not values:\n        raise ValueError("mean of an empty list")\n',
            "",
            "`mean([])` fails with ZeroDivisionError.",
            "`mean` must raise `ValueError` (not ZeroDivisionError) for an empty list.",
        ),
    ),  # fmt: skip
    error_cases={"mean": (([],),), "median": (([],),), "mode": (([],),)},
)

_SCHEDULE = '''
def to_minutes(hhmm):
    """'HH:MM' (24-hour) -> minutes after midnight; ValueError if malformed."""
    hours, sep, minutes = hhmm.partition(":")
    if sep != ":" or not hours.isdigit() or not minutes.isdigit() or len(minutes) != 2:
        raise ValueError(f"bad time: {hhmm!r}")
    h, m = int(hours), int(minutes)
    if h > 23 or m > 59:
        raise ValueError(f"bad time: {hhmm!r}")
    return h * 60 + m


def overlaps(a, b):
    """Whether two [start, end) meetings given as 'HH:MM' pairs overlap."""
    return to_minutes(a[0]) < to_minutes(b[1]) and to_minutes(b[0]) < to_minutes(a[1])


def free_slots(meetings, day_start, day_end):
    """Gaps between meetings within [day_start, day_end), as ['HH:MM', 'HH:MM'] pairs."""
    spans = sorted((to_minutes(s), to_minutes(e)) for s, e in meetings)
    slots, cursor = [], to_minutes(day_start)
    end = to_minutes(day_end)
    for s, e in spans:
        if s > cursor:
            slots.append((cursor, min(s, end)))
        cursor = max(cursor, e)
    if cursor < end:
        slots.append((cursor, end))
    return [[f"{a // 60:02d}:{a % 60:02d}", f"{b // 60:02d}:{b % 60:02d}"] for a, b in slots if a < b]
'''


def _hhmm(rng: random.Random, lo: int = 0, hi: int = 24 * 60 - 1) -> str:
    t = rng.randint(lo, hi)
    return f"{t // 60:02d}:{t % 60:02d}"


def _meeting(rng: random.Random) -> list[str]:
    start = rng.randint(6 * 60, 19 * 60)
    end = start + rng.randint(5, 180)
    return [
        f"{start // 60:02d}:{start % 60:02d}",
        f"{min(end, 1439) // 60:02d}:{min(end, 1439) % 60:02d}",
    ]


SCHEDULE = Template(
    name="repair_schedule",
    module="schedule",
    intro="A meeting-scheduling module; times are 24-hour 'HH:MM' strings.",
    source=_SCHEDULE,
    makers={
        "to_minutes": lambda rng, d: (
            rng.choice(["7:5", "24:00", "12:60", "ab:cd", "1230"])
            if rng.random() < 0.25
            else _hhmm(rng),
        ),
        "overlaps": lambda rng, d: (_meeting(rng), _meeting(rng)),
        "free_slots": lambda rng, d: (
            [_meeting(rng) for _ in range(rng.randint(0, scale(d, 3, 8)))],
            _hhmm(rng, 7 * 60, 10 * 60),
            _hhmm(rng, 16 * 60, 21 * 60),
        ),
    },
    variants=(
        Variant(
            "overlaps",
            "to_minutes(a[0]) < to_minutes(b[1]) and to_minutes(b[0]) < to_minutes(a[1])",
            "to_minutes(a[0]) <= to_minutes(b[1]) and to_minutes(b[0]) <= to_minutes(a[1])",
            "`overlaps` reports back-to-back meetings (one ends when the other starts) as overlapping.",
            cases=(
                (["09:00", "10:00"], ["10:00", "11:00"]),
                (["13:30", "14:00"], ["12:00", "13:30"]),
            ),
        ),
        Variant(
            "free_slots",
            "        cursor = max(cursor, e)\n",
            "        cursor = e\n",
            "`free_slots` reports time inside a long meeting as free when a shorter meeting starts within it.",
            cases=(
                ([["09:00", "12:00"], ["10:00", "11:00"]], "08:00", "17:00"),
                ([["13:00", "16:00"], ["13:30", "14:00"], ["09:00", "09:30"]], "08:30", "18:00"),
            ),
        ),
        Variant(
            "to_minutes",
            '    if h > 23 or m > 59:\n        raise ValueError(f"bad time: {hhmm!r}")\n',
            "",
            "`to_minutes` accepts impossible times such as '25:00'.",
            "`to_minutes` must raise `ValueError` for hours above 23 or minutes above 59.",
        ),
    ),  # fmt: skip
    error_cases={"to_minutes": (("24:00",), ("12:60",), ("99:99",))},
)

_CONFIG = '''
def parse_config(text):
    """'key = value' lines -> dict; '#' starts a comment line; blank lines are skipped."""
    config = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"line {number}: expected key = value")
        config[key.strip()] = value.strip()
    return config


def get_int(config, key, default):
    """config[key] as an int, default when absent; ValueError if it is not an integer."""
    if key not in config:
        return default
    value = config[key]
    if not value.lstrip("-").isdigit():
        raise ValueError(f"{key} is not an integer")
    return int(value)


def get_bool(config, key):
    """true/yes/on/1 -> True, false/no/off/0 -> False (any case), absent -> False."""
    value = config.get(key, "false").lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"{key} is not a boolean")


def merge(base, override):
    merged = dict(base)
    merged.update(override)
    return merged
'''


def _config_text(rng: random.Random, d: float) -> tuple[str]:
    lines = []
    for _ in range(rng.randint(0, scale(d, 3, 10))):
        r = rng.random()
        if r < 0.1:
            lines.append("# " + rng.choice(WORDS))
        elif r < 0.15:
            lines.append("")
        elif r < 0.2 and d > 0.3:
            lines.append(rng.choice(["novalue", " = 3"]))
        else:
            lines.append(
                f"{rng.choice(WORDS)}{rng.choice(['=', ' = ', '  ='])}{rng.choice(['1', 'yes', 'Off', '-4', 'x', ''])}"
            )
    return ("\n".join(lines),)


def _config(rng: random.Random) -> dict[str, str]:
    values = ["1", "-7", "yes", "OFF", "maybe", "12x", "true", "0", "On", "no"]
    return {w: rng.choice(values) for w in rng.sample(WORDS[:8], rng.randint(0, 5))}


CONFIG = Template(
    name="repair_config",
    module="config",
    intro="A configuration module for 'key = value' files; values stay strings until read.",
    source=_CONFIG,
    makers={
        "parse_config": _config_text,
        "get_int": lambda rng, d: (
            (c := _config(rng)),
            rng.choice([*c, "missing"]),
            rng.randint(-5, 5),
        ),
        "get_bool": lambda rng, d: ((c := _config(rng)), rng.choice([*c, "missing"])),
        "merge": lambda rng, d: (_config(rng), _config(rng)),
    },
    variants=(
        Variant(
            "get_int",
            'value.lstrip("-").isdigit()',
            "value.isdigit()",
            "`get_int` rejects negative numbers such as '-7'.",
            cases=(({"a": "-7"}, "a", 0), ({"b": "-12", "c": "3"}, "b", 1)),
        ),
        Variant(
            "get_bool",
            '"true", "yes", "on", "1"',
            '"true", "yes", "1"',
            "`get_bool` must accept 'on' (in any case) as true.",
            cases=(({"x": "on"}, "x"), ({"y": "ON", "z": "no"}, "y")),
        ),
        Variant(
            "parse_config",
            '        if not sep or not key.strip():\n            raise ValueError(f"line {number}: expected key = value")\n',
            "",
            "`parse_config` silently accepts lines that are not `key = value`.",
            "`parse_config` must raise `ValueError` for a line without `=` or with an empty key.",
        ),
        Variant(
            "merge",
            "    merged = dict(base)\n    merged.update(override)\n",
            "    merged = dict(override)\n    merged.update(base)\n",
            "In `merge`, values of `override` must win over those of `base`.",
            cases=(({"a": "1"}, {"a": "2"}), ({"k": "x", "j": "y"}, {"k": "z"})),
        ),
    ),  # fmt: skip
    error_cases={"parse_config": (("novalue",), ("a = 1\n = 2",))},
)

TEMPLATES = (LEDGER, INVENTORY, TEXT, STATS, SCHEDULE, CONFIG)


def _family(template: Template) -> Family:
    def generate(rng: random.Random, d: float) -> Task:
        return build_repair_task(template, rng, d)

    return Family(template.name, generate, f"repair the {template.module} module")


REPAIR_FAMILIES = [_family(t) for t in TEMPLATES]
