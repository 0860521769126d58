"""Mutants of a reference solution, for checking a grader against a peer's grader.

A grader that agrees with its peer on reference solutions only may still disagree on the wrong
programs a policy writes. Mutation testing asks both graders about near-misses: the reference
with one operator swapped or one constant changed, which mostly fail and sometimes (an
equivalent mutant) still pass.

>>> code = "def f(xs):\\n    return sum(x for x in xs if x > 1)\\n"
>>> [m.description for m in mutants(code, "f", limit=3, seed=0)]
['line 2: 1 -> 0', 'line 2: > -> >=', 'line 2: 1 -> 2']
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "mutants"]

_BINOPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
}  # fmt: skip
_CMPOPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
}  # fmt: skip
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
    ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One mutant: the whole module's source with a single change, and what changed."""

    code: str
    description: str


def _sites(fn: ast.AST) -> list[tuple[ast.AST, str, object]]:
    """Every place in ``fn`` one mutation can apply: (node, kind, replacement)."""
    out: list[tuple[ast.AST, str, object]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            out.append((node, "binop", _BINOPS[type(node.op)]))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            out.append((node, "cmpop", _CMPOPS[type(node.ops[0])]))
        elif isinstance(node, ast.BoolOp):
            out.append((node, "boolop", ast.Or if isinstance(node.op, ast.And) else ast.And))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            out.append((node, "const", not node.value))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            out.append((node, "const", node.value + 1))
            out.append((node, "const", node.value - 1))
    return out


def _describe(node: ast.AST, kind: str, new: object) -> str:
    line = getattr(node, "lineno", 0)
    if kind == "binop":
        old = _SYMBOLS[type(node.op)]  # type: ignore[attr-defined]
    elif kind == "cmpop":
        old = _SYMBOLS[type(node.ops[0])]  # type: ignore[attr-defined]
    elif kind == "boolop":
        old = _SYMBOLS[type(node.op)]  # type: ignore[attr-defined]
    else:
        return f"line {line}: {node.value!r} -> {new!r}"  # type: ignore[attr-defined]
    return f"line {line}: {old} -> {_SYMBOLS[new]}"  # type: ignore[index]


def _apply(node: ast.AST, kind: str, new: object) -> object:
    """Mutate ``node`` in place; returns what to restore."""
    if kind in ("binop", "boolop"):
        old = node.op  # type: ignore[attr-defined]
        node.op = new()  # type: ignore[attr-defined,operator]
        return old
    if kind == "cmpop":
        old = node.ops[0]  # type: ignore[attr-defined]
        node.ops[0] = new()  # type: ignore[attr-defined,operator]
        return old
    old = node.value  # type: ignore[attr-defined]
    node.value = new  # type: ignore[attr-defined]
    return old


def _restore(node: ast.AST, kind: str, old: object) -> None:
    if kind in ("binop", "boolop"):
        node.op = old  # type: ignore[attr-defined]
    elif kind == "cmpop":
        node.ops[0] = old  # type: ignore[attr-defined]
    else:
        node.value = old  # type: ignore[attr-defined]


def mutants(code: str, function: str, *, limit: int = 2, seed: int | str = 0) -> Iterator[Mutant]:
    """Up to ``limit`` distinct single-change mutants of ``function`` in ``code`` (the rest of
    the module unchanged), drawn in a fixed order from ``seed``. Operators swapped (``+``/``-``,
    ``<``/``<=``, ``==``/``!=``, ``and``/``or``...), integers moved by one, booleans flipped.
    Yields nothing when the code does not parse or defines no such function."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
        ),
        None,
    )
    if fn is None:
        return
    body_start = fn.body[0]
    if isinstance(body_start, ast.Expr) and isinstance(body_start.value, ast.Constant):
        body = fn.body[1:]  # leave the docstring alone
    else:
        body = fn.body
    sites = [s for stmt in body for s in _sites(stmt)]
    random.Random(str(seed)).shuffle(sites)
    original = ast.unparse(tree)
    seen = {original}
    made = 0
    for node, kind, new in sites:
        if made >= limit:
            break
        old = _apply(node, kind, new)
        try:
            text = ast.unparse(tree)
        finally:
            _restore(node, kind, old)
        if text in seen:
            continue
        seen.add(text)
        made += 1
        yield Mutant(text + "\n", _describe(node, kind, new))
