"""Unit conversion and a calculator (an arithmetic parser, never eval) over a lab's sensor log."""

from __future__ import annotations

import ast
import math
import operator
import random
import sqlite3
from typing import Any, Literal

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    ToolError,
    family,
    one,
    rows,
)

SCHEMA = """
CREATE TABLE readings (reading_id INTEGER PRIMARY KEY, sensor TEXT NOT NULL, quantity TEXT NOT NULL,
                       value REAL NOT NULL, unit TEXT NOT NULL);
"""
Unit = Literal["C", "F", "K", "m", "ft", "km", "mi", "kg", "lb", "g", "oz", "l", "gal"]
_LINEAR = {  # unit -> (quantity, factor to the base unit)
    "m": ("length", 1.0),
    "ft": ("length", 0.3048),
    "km": ("length", 1000.0),
    "mi": ("length", 1609.344),
    "kg": ("mass", 1.0),
    "lb": ("mass", 0.45359237),
    "g": ("mass", 0.001),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),
}
SENSORS = {
    "temperature": ("T1", "T2", "T3"),
    "length": ("L1", "L2"),
    "mass": ("M1", "M2"),
    "volume": ("V1",),
}
UNITS = {
    "temperature": ("C", "F", "K"),
    "length": ("m", "ft", "km", "mi"),
    "mass": ("kg", "lb", "g", "oz"),
    "volume": ("l", "gal"),
}


def convert_value(value: float, src: str, dst: str) -> float:
    """Convert between units of one quantity.

    >>> round(convert_value(212, "F", "C"), 6)
    100.0
    """
    if src in ("C", "F", "K") and dst in ("C", "F", "K"):
        c = value if src == "C" else (value - 32) * 5 / 9 if src == "F" else value - 273.15
        return c if dst == "C" else c * 9 / 5 + 32 if dst == "F" else c + 273.15
    if src in _LINEAR and dst in _LINEAR and _LINEAR[src][0] == _LINEAR[dst][0]:
        return value * _LINEAR[src][1] / _LINEAR[dst][1]
    raise ToolError(f"cannot convert {src} to {dst}")


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    for quantity, sensors in SENSORS.items():
        for sensor in sensors:
            for _ in range(rng.randrange(3, 7)):
                unit = rng.choice(UNITS[quantity])
                value = round(
                    rng.uniform(-20, 120) if quantity == "temperature" else rng.uniform(0.5, 500), 1
                )
                db.execute(
                    "INSERT INTO readings (sensor, quantity, value, unit) VALUES (?, ?, ?, ?)",
                    (sensor, quantity, value, unit),
                )


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def arithmetic(expression: str) -> float:
    """Value of an arithmetic expression (+ - * / % ** and parentheses), parsed, never evaluated.

    >>> arithmetic("(2 + 3) * 4 / 8")
    2.5
    """
    if len(expression) > 500:
        raise ToolError("expression too long (500 characters at most)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolError(f"not an arithmetic expression: {expression[:80]!r}") from None

    def walk(node: ast.AST, depth: int) -> float:
        if depth > 50:
            raise ToolError("expression nested too deeply")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand, depth + 1)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = walk(node.left, depth + 1), walk(node.right, depth + 1)
            if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > 1e6):
                raise ToolError("exponent too large")
            try:
                out = float(_OPS[type(node.op)](a, b))
            except (ZeroDivisionError, OverflowError):
                raise ToolError("division by zero or overflow") from None
            if not math.isfinite(out):
                raise ToolError("result is not finite")
            return out
        raise ToolError("only numbers, + - * / % ** and parentheses are allowed")

    return walk(tree.body, 0)


def list_readings(db: sqlite3.Connection, sensor: str) -> list[dict[str, Any]]:
    """Readings of a sensor with value and unit.

    Args:
        sensor: Sensor id such as "T2".
    """
    return rows(
        db,
        "SELECT reading_id, sensor, quantity, value, unit FROM readings WHERE sensor = ? ORDER BY reading_id",
        (sensor.strip().upper(),),
    )


def convert(db: sqlite3.Connection, value: float, from_unit: Unit, to_unit: Unit) -> dict[str, Any]:
    """Convert a value between units (temperature C/F/K, length, mass, volume).

    Args:
        value: The number to convert.
        from_unit: Its unit.
        to_unit: Target unit.
    """
    return {"value": convert_value(value, from_unit, to_unit), "unit": to_unit}


def calculate(db: sqlite3.Connection, expression: str) -> dict[str, Any]:
    """Evaluate an arithmetic expression with + - * / % ** and parentheses.

    Args:
        expression: For example "(12.5 + 7) / 2".
    """
    return {"result": arithmetic(expression)}


def set_reading(
    db: sqlite3.Connection, reading_id: int, value: float, unit: Unit
) -> dict[str, Any]:
    """Overwrite a reading's value and unit.

    Args:
        reading_id: Reading id.
        value: New value.
        unit: Its unit.
    """
    r = one(db, "SELECT quantity FROM readings WHERE reading_id = ?", (reading_id,))
    if r is None:
        raise ToolError(f"no reading {reading_id}")
    if unit not in UNITS[r["quantity"]]:
        raise ToolError(f"{unit} is not a unit of {r['quantity']}")
    db.execute(
        "UPDATE readings SET value = ?, unit = ? WHERE reading_id = ?", (value, unit, reading_id)
    )
    return {"reading_id": reading_id, "value": value, "unit": unit}


MODULE = Module(
    "calc",
    SCHEMA,
    seed,
    (list_readings, convert, calculate, set_reading),
    {"readings": "SELECT reading_id, round(value, 2), unit FROM readings"},
)


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def _normalize(p: Planner) -> str:
    quantity = p.rng.choice(sorted(SENSORS))
    sensor = p.rng.choice(SENSORS[quantity])
    target = p.rng.choice(UNITS[quantity])
    readings = p.q("SELECT * FROM readings WHERE sensor = ? ORDER BY reading_id", (sensor,))
    p.call("list_readings", sensor=sensor)
    todo = [r for r in readings if r["unit"] != target]
    if p.difficulty < 0.5:
        todo = todo[:2]
    values = []
    for r in todo:
        out = p.call("convert", value=r["value"], from_unit=r["unit"], to_unit=target)
        v = round(out["value"], 2)
        p.call("set_reading", reading_id=r["reading_id"], value=v, unit=target)
    for r in p.q("SELECT * FROM readings WHERE sensor = ? ORDER BY reading_id", (sensor,)):
        values.append(r["value"])
    scope = (
        "every reading"
        if p.difficulty >= 0.5
        else "the first two readings (by id) not already in that unit"
    )
    if not todo:
        scope = "every reading"
    p.fact(_fmt(max(values)))
    return (
        f"Sensor {sensor} logged {quantity} in mixed units. Convert {scope} of {sensor} to {target}, rounded to "
        "2 decimals, and save each converted value. Then tell me the largest value of the sensor's readings "
        f"(whatever their units) with 2 decimals."
    )


def _stats(p: Planner) -> str:
    quantity = p.rng.choice(sorted(SENSORS))
    sensor = p.rng.choice(SENSORS[quantity])
    target = p.rng.choice(UNITS[quantity])
    readings = p.q("SELECT * FROM readings WHERE sensor = ? ORDER BY reading_id", (sensor,))
    p.call("list_readings", sensor=sensor)
    converted = []
    with p.parallel():
        for r in readings:
            converted.append(
                p.call("convert", value=r["value"], from_unit=r["unit"], to_unit=target)["value"]
            )
    expr = "(" + " + ".join(repr(v) for v in converted) + f") / {len(converted)}"
    mean = p.call("calculate", expression=expr)["result"]
    p.fact(_fmt(mean))
    ask = f"What is the average of all of sensor {sensor}'s readings, in {target}? Answer with 2 decimals."
    if p.difficulty >= 0.6:
        spread = max(converted) - min(converted)
        p.fact(_fmt(spread))
        ask = (
            f"What are the average and the range (max minus min) of sensor {sensor}'s readings, in {target}? "
            "Answer both with 2 decimals."
        )
    return ask + " Do not change any stored reading."


FAMILIES = [
    family(
        "unit_convert",
        ["calc"],
        _normalize,
        "Convert a sensor's readings to one unit and save them.",
        distractor_modules=["warehouse", "travel"],
    ),
    family(
        "sensor_stats",
        ["calc"],
        _stats,
        "Convert and average readings with the calculator.",
        distractor_modules=["banking", "kb"],
    ),
]
