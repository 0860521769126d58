"""Sums and products with an index (``\\sum_{k=1}^{4} k^2``): written out term by term when
the bounds are small integers, else one opaque symbol named by a canonical form (factors in any
order, the index renamed), so equal sums written differently are one symbol. Called by the
parser; it reads no text itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from llmgym.rewards.math.nodes import Node, num

MAX_SERIES_NODES = 20_000
"""A sum or product with numeric bounds is written out only while terms x body size stays
under this (nested sums would otherwise multiply); beyond it, it stays one opaque symbol."""


def _size(node: Any, limit: int) -> int:
    """The number of tuples in ``node``, counting stops past ``limit``."""
    count, stack = 0, [node]
    while stack and count <= limit:
        n = stack.pop()
        if isinstance(n, tuple):
            count += 1
            stack.extend(c for c in n if isinstance(c, tuple))
    return count


def _int_value(node: Node) -> int | None:
    if node[0] == "num" and node[1].denominator == 1:
        return int(node[1])
    if node[0] == "neg" and node[1][0] == "num" and node[1][1].denominator == 1:
        return -int(node[1][1])
    return None


def _index_re(var: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z]){re.escape(var)}(?![A-Za-z])")


def _subscript_uses(name: str, var: str) -> bool:
    """Whether a subscripted name (``F_n-k-1``) has the index ``var`` in its subscript."""
    _, _, sub = name.partition("_")
    return bool(sub) and _index_re(var).search(sub) is not None


def _map_syms(node: Any, fn: Callable[[str], Node | None]) -> Any:
    if isinstance(node, tuple) and node:
        if node[0] == "sym" and len(node) == 2:
            replaced = fn(node[1])
            return node if replaced is None else replaced
        return tuple(_map_syms(c, fn) for c in node)
    return node


def const_to_sym(node: Any, name: str) -> Any:
    """``node`` with the constant ``name`` read as a variable (``i`` as a sum's index)."""
    if isinstance(node, tuple) and node:
        if node == ("const", name):
            return ("sym", name)
        return tuple(const_to_sym(c, name) for c in node)
    return node


def _substitute(node: Node, var: str, value: Node) -> Node:
    def at(sym: str) -> Node | None:
        return value if sym == var else None

    return _map_syms(node, at)  # type: ignore[no-any-return]


def _canonical(node: Any) -> Any:
    """``node`` with the terms of sums and the factors of products sorted (by their repr)."""
    if isinstance(node, tuple) and node and isinstance(node[0], str):
        children = tuple(_canonical(c) for c in node[1:])
        if node[0] in ("add", "mul"):
            return (node[0], tuple(sorted(children[0], key=repr)))
        return (node[0], *children)
    if isinstance(node, tuple):
        return tuple(_canonical(c) for c in node)
    return node


def _syms_in(node: Any) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple) and n:
            if n[0] == "sym" and len(n) == 2:
                out.add(n[1])
            else:
                stack.extend(c for c in n if isinstance(c, tuple))
    return out


def series(name: str, var: str, lo: Node, hi: Node, body: Node) -> Node:
    """``\\sum`` (``name`` "sum") or ``\\prod`` ("prod") of ``body`` for ``var`` from ``lo`` to
    ``hi``: the terms written out, or one opaque symbol (see the module docstring)."""
    a, b = _int_value(lo), _int_value(hi)
    # a_k in the body: writing the sum out would need a_1, a_2, ... (kept opaque instead)
    indexed = any(s != var and _subscript_uses(s, var) for s in _syms_in(body))
    count = b - a + 1 if a is not None and b is not None else MAX_SERIES_NODES + 1
    small = count <= 0 or count * _size(body, MAX_SERIES_NODES // count) <= MAX_SERIES_NODES
    if a is not None and not indexed and small:
        terms = [_substitute(body, var, num(i)) for i in range(a, a + count)]
        if not terms:
            return num(0 if name == "sum" else 1)
        if len(terms) == 1:
            return terms[0]  # type: ignore[no-any-return]
        return ("add" if name == "sum" else "mul", tuple(terms))
    pattern = _index_re(var)

    def rename(sym: str) -> Node | None:
        if sym == var:
            return ("sym", "#")
        if _subscript_uses(sym, var):
            base, _, sub = sym.partition("_")
            return ("sym", base + "_" + pattern.sub("#", sub))
        return None

    key = repr(_canonical((lo, hi, _map_syms(body, rename))))
    digest = hashlib.sha1(key.encode("utf-8", "replace")).hexdigest()[:16]
    return ("sym", f"\\{name}#{digest}")
