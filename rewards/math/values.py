"""Turn parsed answers into comparable values and compare them: tuples, sets, solution lists,
intervals and unions, inequalities, equations and assignments, matrices, special answers.

Values are tagged tuples:

``("S", node)`` scalar, ``("T", open, close, items)`` ordered tuple, ``("F", items)`` set
(braces), ``("L", items)`` bare list (compared as a set), ``("I", intervals)`` a set of reals,
``("M", rows)`` matrix, ``("A", var, value)`` assignment ``x = ...`` (``("A", key, value,
lhs)`` for a label made of variables: ``AB = 4``, ``\\frac{NO}{BO} = ...``, ``|AB| = 1``),
``("D", pairs, values)`` several assignments (sorted by name; the values in the order written),
``("E", lhs, rhs)`` an equation, ``("R", node, var)`` a relation only sympy can solve, ``("X",
name)`` a special answer (undefined...), ``("W", text)`` words.

Scalars inside them are compared by :mod:`~llmgym.rewards.math.evaluate`; sets of reals are
:mod:`~llmgym.rewards.math.realsets`, matrix arithmetic :mod:`~llmgym.rewards.math.matrices`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.evaluate import (
    Options,
    all_pairs_match,
    equations_equivalent,
    scalar_eq,
)
from llmgym.rewards.math.exact import exact
from llmgym.rewards.math.limits import NotScalar
from llmgym.rewards.math.matrices import matrix_arith
from llmgym.rewards.math.nodes import Node, contains_kind, symbols
from llmgym.rewards.math.realsets import (
    NEG_INF,
    POS_INF,
    complement,
    intersect,
    interval,
    normalize_realset,
    realset_eq,
    solve_linear_chain,
    to_realset,
)

Value = tuple[Any, ...]

SCALAR_KINDS = {
    "num",
    "based",
    "sym",
    "const",
    "inf",
    "add",
    "mul",
    "div",
    "neg",
    "pow",
    "fn",
    "pm",
}

SetSolver = Callable[[Node, Node, Options], bool | None]
_set_solver: list[SetSolver] = []


def set_set_solver(fn: SetSolver) -> None:
    """Install the function that compares relations sympy must solve (the worker)."""
    _set_solver[:] = [fn]


# ---------------------------------------------------------------------------------------------
# Building values
# ---------------------------------------------------------------------------------------------


def _expand_pm(node: Node) -> list[Node]:
    """``a \\pm b`` -> [a + b, a - b], recursively (at most 4 variants)."""
    if not isinstance(node, tuple) or not node or not isinstance(node[0], str):
        return [node]
    if node[0] == "pm":
        lefts = _expand_pm(node[1])
        rights = _expand_pm(node[2])
        out = []
        for sign in ("+", "-") if node[3] == "+" else ("-", "+"):
            for left in lefts:
                for right in rights:
                    out.append(("add", (left, right if sign == "+" else ("neg", right))))
        return out[:4]
    variants: list[list[Any]] = [[node[0]]]
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            options = _expand_pm(child)
        elif isinstance(child, tuple) and child and isinstance(child[0], tuple):
            combos: list[tuple[Node, ...]] = [()]
            for c in child:
                combos = [t + (o,) for t in combos for o in _expand_pm(c)][:4]
            options = combos  # type: ignore[assignment]
        else:
            options = [child]
        variants = [v + [o] for v in variants for o in options][:4]
    return [tuple(v) for v in variants]


def _has_pm(node: Node) -> bool:
    return contains_kind(node, {"pm"})


def _flatten_lists(vals: list[Value]) -> list[Value]:
    out: list[Value] = []
    for v in vals:
        if v[0] == "L":
            out.extend(v[1])
        else:
            out.append(v)
    return out


def _degrees(node: Node, convert: bool) -> Node:
    """``node`` with each ``("deg", x)`` replaced by ``x`` (the unit dropped) or, when
    ``convert``, by ``x * pi / 180`` (the angle in radians)."""
    if not isinstance(node, tuple) or not node or not isinstance(node[0], str):
        return node
    if node[0] == "deg":
        inner = _degrees(node[1], convert)
        return (
            ("div", ("mul", (inner, ("const", "pi"))), ("num", Fraction(180), 0))
            if convert
            else inner
        )
    out: list[Any] = [node[0]]
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            out.append(_degrees(child, convert))
        elif isinstance(child, tuple) and child and isinstance(child[0], tuple):
            out.append(tuple(_degrees(c, convert) for c in child))
        else:
            out.append(child)
    return tuple(out)


def _has_degrees(node: Node) -> bool:
    return contains_kind(node, {"deg"})


def to_value(node: Node) -> Value:
    """The comparable value of a parsed answer.

    >>> from llmgym.rewards.math.parser import parse
    >>> to_value(parse("x = 3"))
    ('A', 'x', ('S', ('num', Fraction(3, 1), 1)))
    """
    kind = node[0]
    if kind == "deg" or (kind in SCALAR_KINDS and _has_degrees(node)):
        # an angle in degrees: ("S", value with the unit dropped, value in radians)
        plain, radians = _degrees(node, False), _degrees(node, True)
        if _has_pm(plain):
            return to_value(plain)
        return ("S", plain, radians)
    if kind in ("rel", "setop", "tuple", "set", "list", "or", "matrix") and _has_degrees(node):
        node = _degrees(node, False)  # degrees inside structures: the unit is dropped
        kind = node[0]
    if kind in SCALAR_KINDS and contains_kind(node, {"matrix"}):
        # \begin{pmatrix}..\end{pmatrix} + \begin{pmatrix}..\end{pmatrix}: do the arithmetic
        result = matrix_arith(node)
        if result[0] != "matrix":
            raise NotScalar
        return to_value(result)
    if kind in SCALAR_KINDS:
        if kind == "pm" or _has_pm(node):
            return ("L", tuple(("S", n) for n in _expand_pm(node)))
        return ("S", node)
    if kind == "special":
        name = node[1]
        if name == "empty":
            return ("F", ())
        if name == "reals":
            return ("I", (interval(NEG_INF, False, POS_INF, False),))
        return ("X", name)
    if kind == "text":
        return ("W", " ".join(str(node[1]).lower().split()))
    if kind == "tuple":
        return ("T", node[1], node[2], tuple(to_value(x) for x in node[3]))
    if kind == "set":
        return ("F", tuple(_flatten_lists([to_value(x) for x in node[1]])))
    if kind == "matrix":
        return ("M", tuple(tuple(to_value(x) for x in row) for row in node[1]))
    if kind == "list":
        return _list_value([to_value(x) for x in node[1]])
    if kind == "or":
        return _or_value([to_value(x) for x in node[1]])
    if kind == "rel":
        return _rel_value(node)
    if kind == "setop":
        return _setop_value(node)
    raise NotScalar


def _list_value(vals: list[Value]) -> Value:
    assigns = [v for v in vals if v[0] == "A"]
    if assigns and len(assigns) == len(vals):
        names = [v[1] for v in assigns]
        if len(set(names)) == len(names) and all(v[2][0] != "I" for v in assigns):
            return _dict_value([(v[1], v[2]) for v in assigns])
        if len(set(names)) == 1:
            return ("A", names[0], _or_inner([v[2] for v in assigns]))
    if vals and vals[0][0] == "A" and all(v[0] in ("S", "L") for v in vals[1:]):
        # x = 1, 2: a solution list for x
        return ("A", vals[0][1], ("L", tuple(_flatten_lists([vals[0][2], *vals[1:]]))))
    return ("L", tuple(_flatten_lists(vals)))


def _dict_value(pairs: list[tuple[str, Value]]) -> Value:
    return ("D", tuple(sorted(pairs)), tuple(v for _, v in pairs))


def _label_key(node: Node) -> str | None:
    """A canonical name for a label made of variables only (``AB``, ``\\frac{NO}{BO}``,
    ``S_{MBCN}:S``, ``|AB|``): what a gold like ``AB = 4`` names; None for anything with a
    number, a constant or a sum in it (``2x + z``, ``a^2 + b``: an equation, not a label)."""
    kind = node[0]
    if kind == "sym":
        return str(node[1])
    if kind == "mul":
        keys = [_label_key(f) for f in node[1]]
        return None if None in keys else "*".join(sorted(keys))  # type: ignore[arg-type]
    if kind == "div":
        num, den = _label_key(node[1]), _label_key(node[2])
        return None if num is None or den is None else f"({num})/({den})"
    if kind == "fn" and node[1] == "abs" and len(node[2]) == 1:
        inner = _label_key(node[2][0])
        return None if inner is None else f"|{inner}|"
    return None


def _or_inner(vals: list[Value]) -> Value:
    """Values joined by "or" for one variable: a list of points, or a union of sets of reals."""
    if all(v[0] in ("S", "L") for v in vals):
        return ("L", tuple(_flatten_lists(vals)))
    sets = [to_realset(v) for v in vals]
    if any(s is None for s in sets):
        return ("L", tuple(vals))
    return ("I", normalize_realset([i for s in sets if s is not None for i in s]))


def _or_value(vals: list[Value]) -> Value:
    if all(v[0] == "A" for v in vals) and len({v[1] for v in vals}) == 1:
        return ("A", vals[0][1], _or_inner([v[2] for v in vals]))
    return ("L", tuple(_flatten_lists(vals)))


def _is_const(node: Node) -> bool:
    return node[0] in SCALAR_KINDS and not symbols(node)


def _rel_value(node: Node) -> Value:
    exprs, ops = node[1], node[2]
    if _has_pm(node) and all(e[0] in SCALAR_KINDS for e in exprs) and len(set(ops)) == 1:
        # x = \pm 2 is "x = 2 or x = -2"; x \neq \pm 2 is "x != 2 and x != -2"
        variants = [_rel_value(v) for v in _expand_pm(node)]
        if ops[0] == "=":
            return _or_value(variants)
        if (
            ops[0] == "!="
            and all(v[0] == "A" for v in variants)
            and len({v[1] for v in variants}) == 1
        ):
            sets = [to_realset(v) for v in variants]
            if all(s is not None for s in sets):
                result = sets[0]
                for other in sets[1:]:
                    result = intersect(result, other)  # type: ignore[arg-type]
                return ("A", variants[0][1], ("I", result))
        raise NotScalar
    if "~" in ops and not all(op == "~" for op in ops):
        # x = \sqrt{2} \approx 1.414: what follows the first "approximately" is commentary
        k = ops.index("~")
        exprs, ops = exprs[: k + 1], ops[:k]
        if not ops:
            return to_value(exprs[0])
    if all(op == "~" for op in ops):
        # "\sqrt{2} \approx 1.414": the exact value is stated first; "x \approx 1.41": x is
        # (only) approximately 1.41
        if exprs[0][0] in SCALAR_KINDS and not symbols(exprs[0]):
            return to_value(exprs[0])
        ops = tuple("=" for _ in ops)
    if all(op == "=" for op in ops):
        lhs, rhs = exprs[0], exprs[-1]
        if lhs[0] == "sym":
            return ("A", lhs[1], to_value(rhs))
        if rhs[0] == "sym" and len(exprs) == 2:
            return ("A", rhs[1], to_value(lhs))
        label = _label_key(lhs)
        if label is not None and rhs[0] in SCALAR_KINDS and not symbols(rhs) & symbols(lhs):
            return ("A", label, to_value(rhs), lhs)
        if (
            lhs[0] == "tuple"
            and rhs[0] == "tuple"
            and len(lhs[3]) == len(rhs[3])
            and all(x[0] == "sym" for x in lhs[3])
        ):
            return _dict_value([(x[1], to_value(y)) for x, y in zip(lhs[3], rhs[3], strict=False)])
        if all(e[0] in SCALAR_KINDS for e in exprs):
            if _is_const(rhs) and (_is_const(lhs) or len(exprs) > 2):
                return to_value(rhs)  # "3 \times 4 = 12": the value is what it equals
            return ("E", lhs, rhs)
        raise NotScalar
    if len(ops) == 1 and ops[0] == "in" and exprs[0][0] == "sym":
        return ("A", exprs[0][1], to_value(exprs[1]))
    if all(e[0] in SCALAR_KINDS for e in exprs):
        names = set().union(*(symbols(e) for e in exprs))
        if len(names) == 1:
            var = next(iter(names))
            solved = solve_linear_chain(exprs, ops, var)
            if solved is not None:
                return ("A", var, ("I", solved))
            return ("A", var, ("R", node, var))
    raise NotScalar


def _setop_value(node: Node) -> Value:
    a, b = to_realset(to_value(node[2])), to_realset(to_value(node[3]))
    if a is None or b is None:
        raise NotScalar
    if node[1] == "cup":
        return ("I", normalize_realset(list(a) + list(b)))
    if node[1] == "cap":
        return ("I", intersect(a, b))
    return ("I", intersect(a, complement(b)))


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def _matrix_of(v: Value) -> tuple[tuple[Value, ...], ...] | None:
    """A nested list ``[[1, 2], [3, 4]]`` read as a matrix."""
    if v[0] == "M":
        return v[1]  # type: ignore[no-any-return]
    if v[0] in ("T", "L") and v[-1] and all(x[0] == "T" for x in v[-1]):
        rows = tuple(x[3] for x in v[-1])
        if len({len(r) for r in rows}) == 1:
            return rows
    return None


def _vector_of(v: Value) -> tuple[Value, ...] | None:
    if v[0] == "M":
        rows = v[1]
        if len(rows) == 1:
            return rows[0]  # type: ignore[no-any-return]
        if all(len(r) == 1 for r in rows):
            return tuple(r[0] for r in rows)
        return None
    if v[0] == "T":
        return v[3]  # type: ignore[no-any-return]
    return None


def values_eq(a: Value, b: Value, opts: Options) -> bool:
    """Whether two answer values are equal (the semantics are documented in :mod:`llmgym.rewards.math`)."""
    ka, kb = a[0], b[0]
    # assignments: x = 3 vs 3, x = 3 vs x = 3, y = 2x + 1 vs 2x - y + 1 = 0
    if ka == "A" and kb == "A":
        if a[1] == b[1]:
            return values_eq(a[2], b[2], opts)
        if (len(a) == 4 or len(b) == 4) and a[2][0] == "S" and b[2][0] == "S":
            # labels written differently (BA = 1 vs AB = 1, AB = 2 vs 2AB = 4 is no label)
            return equations_equivalent(_lhs(a), a[2][1], _lhs(b), b[2][1], opts)
        renamed = _rename_argument(a, b)
        return renamed is not None and values_eq(a[2], renamed, opts)
    if ka == "A" and kb == "E" or ka == "E" and kb == "A":
        (av, bv) = (a, b) if ka == "A" else (b, a)
        if av[2][0] != "S":
            return False
        return equations_equivalent(_lhs(av), av[2][1], bv[1], bv[2], opts)
    if ka == "A" and kb != "D":
        return values_eq(a[2], b, opts)
    if kb == "A" and ka != "D":
        return values_eq(a, b[2], opts)
    if ka == "E" and kb == "E":
        return equations_equivalent(a[1], a[2], b[1], b[2], opts)
    if ka == "D" or kb == "D":
        return _dict_eq(a, b, opts)
    if ka == "S" and kb == "S":
        if scalar_eq(a[1], b[1], opts):
            return True
        # 60^\circ vs \pi/3: an answer in degrees also equals its value in radians
        if (len(a) == 3) != (len(b) == 3):
            ra = a[2] if len(a) == 3 else a[1]
            rb = b[2] if len(b) == 3 else b[1]
            return scalar_eq(ra, rb, opts)
        return False
    if ka == "R" or kb == "R":
        return _relation_eq(a, b, opts)
    if ka == "X" or kb == "X":
        return ka == kb and a[1] == b[1]
    if ka == "W" or kb == "W":
        return ka == kb and a[1] == b[1]
    if ka == "I" or kb == "I":
        sa, sb = to_realset(a), to_realset(b)
        return sa is not None and sb is not None and realset_eq(sa, sb, opts)
    if ka == "T" and kb == "T":
        if len(a[3]) != len(b[3]):
            return False
        if len(a[3]) == 2 and (a[1], a[2]) != (b[1], b[2]):
            # (1, 2) vs [1, 2]: open vs closed interval, or a point vs a list; only as
            # intervals can they still agree ([2, \infty] is [2, \infty))
            sa, sb = to_realset(a), to_realset(b)
            return sa is not None and sb is not None and realset_eq(sa, sb, opts)
        return all(values_eq(x, y, opts) for x, y in zip(a[3], b[3], strict=False))
    if ka in ("F", "L") and kb in ("F", "L"):
        return _collections_eq(a[1], b[1], opts)
    if opts.lists_as_tuples and {ka, kb} in ({"T", "L"}, {"T", "F"}):
        # the convention that reads a list in the order written as a tuple
        xs, ys = (a[3], b[1]) if ka == "T" else (a[1], b[3])
        return len(xs) == len(ys) and all(
            values_eq(x, y, opts) for x, y in zip(xs, ys, strict=True)
        )
    if ka in ("F", "L") and kb == "S":
        return len(a[1]) >= 1 and all(values_eq(x, b, opts) for x in a[1])
    if kb in ("F", "L") and ka == "S":
        return len(b[1]) >= 1 and all(values_eq(a, y, opts) for y in b[1])
    if ka == "M" or kb == "M":
        ma, mb = _matrix_of(a), _matrix_of(b)
        if ma is not None and mb is not None:
            if len(ma) != len(mb) or any(len(r) != len(s) for r, s in zip(ma, mb, strict=False)):
                return False
            return all(
                values_eq(x, y, opts)
                for r, s in zip(ma, mb, strict=False)
                for x, y in zip(r, s, strict=False)
            )
        va, vb = _vector_of(a), _vector_of(b)
        if va is not None and vb is not None and len(va) == len(vb) and len(va) > 1:
            return all(values_eq(x, y, opts) for x, y in zip(va, vb, strict=False))
        return False
    return False


def _lhs(v: Value) -> Node:
    """The left side of an assignment: its label, or its variable."""
    return v[3] if len(v) == 4 else ("sym", v[1])  # type: ignore[no-any-return]


_CALL_RE = re.compile(r"([A-Za-z])\(([A-Za-z])\)")


def _rename_argument(a: Value, b: Value) -> Value | None:
    """``W(x) = 1`` vs ``W(n) = 1``: one function, its argument a dummy name. ``b``'s value
    with its argument renamed to ``a``'s, or None when these are not two such definitions."""
    ma, mb = _CALL_RE.fullmatch(str(a[1])), _CALL_RE.fullmatch(str(b[1]))
    if not ma or not mb or ma.group(1) != mb.group(1):
        return None
    old, new = mb.group(2), ma.group(2)
    if ("sym", new) in _subnodes(b[2]):
        return None  # the new name is already taken in b's value
    return _replace_sym(b[2], old, new)  # type: ignore[no-any-return]


def _subnodes(v: Any) -> set[Any]:
    out: set[Any] = set()
    stack = [v]
    while stack:
        n = stack.pop()
        if isinstance(n, tuple):
            if n and n[0] == "sym":
                out.add(n)
            stack.extend(n)
    return out


def _replace_sym(v: Any, old: str, new: str) -> Any:
    if isinstance(v, tuple):
        if len(v) == 2 and v[0] == "sym" and v[1] == old:
            return ("sym", new)
        return tuple(_replace_sym(x, old, new) for x in v)
    return v


def _exact_key(v: Value) -> Any:
    """A hashable exact value for a rational (or Gaussian rational) scalar, else None."""
    if v[0] != "S":
        return None
    try:
        return exact(v[1])
    except Exception:  # not exact, too big, symbolic...
        return None


def _collections_eq(xs: tuple[Value, ...], ys: tuple[Value, ...], opts: Options) -> bool:
    """Set equality; exact elements are matched by hashing (linear), the rest pairwise."""
    if opts.tolerant:
        return all_pairs_match(xs, ys, lambda x, y: values_eq(x, y, opts))
    kx = [_exact_key(x) for x in xs]
    ky = [_exact_key(y) for y in ys]
    if {k for k in kx if k is not None} != {k for k in ky if k is not None}:
        return False
    rest_x = [x for x, k in zip(xs, kx, strict=True) if k is None]
    rest_y = [y for y, k in zip(ys, ky, strict=True) if k is None]
    if len(rest_x) * len(rest_y) > 10_000:
        return False  # too many inexact elements to match pairwise: no verdict of equality
    # an element that is not exact (irrational, symbolic) cannot equal an exact one
    return all_pairs_match(rest_x, rest_y, lambda x, y: values_eq(x, y, opts))


def _dict_eq(a: Value, b: Value, opts: Options) -> bool:
    if a[0] == "D" and b[0] == "D":
        if [k for k, _ in a[1]] != [k for k, _ in b[1]]:
            return False
        return all(values_eq(x, y, opts) for (_, x), (_, y) in zip(a[1], b[1], strict=False))
    d, other = (a, b) if a[0] == "D" else (b, a)
    items = other[3] if other[0] == "T" else other[1] if other[0] == "L" else None
    if items is None or len(items) != len(d[1]):
        return False
    # x = 1, y = 2 vs (1, 2): values in alphabetical order of the variables; a bare list may
    # also give them in the order written (x = -5, p = 14/3 vs -5, 14/3)
    orders = [[x for _, x in d[1]]] + ([list(d[2])] if other[0] == "L" else [])
    return any(
        all(values_eq(x, y, opts) for x, y in zip(order, items, strict=False)) for order in orders
    )


def _relation_eq(a: Value, b: Value, opts: Options) -> bool:
    if a[0] == "R" and b[0] == "R" and a[1] == b[1]:
        return True
    if not _set_solver:
        return False
    left = a[1] if a[0] == "R" else _realset_node(a)
    right = b[1] if b[0] == "R" else _realset_node(b)
    if left is None or right is None:
        return False
    return bool(_set_solver[0](left, right, opts))


def _realset_node(v: Value) -> Node | None:
    """A set of reals as a node the sympy worker understands."""
    rs = to_realset(v)
    if rs is None:
        return None
    return ("realset", tuple((iv[1], iv[2], iv[4], iv[5]) for iv in rs))
