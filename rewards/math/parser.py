"""Parse a normalised math answer (LaTeX, plain text, Unicode) into a tuple tree.

The parser is a hand-written recursive descent over the tokens of
:mod:`~llmgym.rewards.math.tokens`: it never ``eval``s, has a hard depth limit (deeply nested
input is a parse error, not a ``RecursionError``) and refuses answers longer than
:data:`~llmgym.rewards.math.nodes.MAX_ANSWER_CHARS`. A parse error means "not math we
understand"; callers then fall back to comparing normalised text. The node shapes are listed in
:mod:`~llmgym.rewards.math.nodes`.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from llmgym.rewards.math.cache import short_input_cache
from llmgym.rewards.math.nodes import MAX_ANSWER_CHARS, MAX_DEPTH, Node, ParseError, num
from llmgym.rewards.math.series import const_to_sym, series
from llmgym.rewards.math.tokens import Token, tokenize
from llmgym.rewards.math.vocab import UNIT_PHRASES

ZERO = num(0)
_PI = ("const", "pi")


def _literal(text: str) -> Node:
    """A number literal, exactly: ``0.1`` is 1/10, ``1.5e3`` is 1500."""
    if text.isascii() and text.isdigit():  # the common case, without Fraction's string parsing
        return ("num", Fraction(int(text)), len(text.lstrip("0")) or 1)
    digits = len(text.split("e")[0].split("E")[0].replace(".", "").lstrip("0")) or 1
    try:
        return ("num", Fraction(text), digits)
    except (ValueError, ZeroDivisionError) as e:
        raise ParseError(f"bad number {text[:20]!r}") from e


_FUNCTION_LETTERS = {"f", "g", "h", "F", "G", "H", "P", "Q", "p", "q"}
_CLOSERS = {"(": (")", "]"), "[": (")", "]"), "{": ("}",), "{s": ("{s",)}
_MATRIX_ENVS = {"pmatrix", "bmatrix", "Bmatrix", "matrix", "smallmatrix", "array"}
_STOP_UNITS = {"unit", "word", "per", "deg"}


class _Parser:
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.abs_depth = 0
        self.fn_depth = 0

    # -- helpers -------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", None)

    def next(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, kind: str, value: Any = None) -> Token:
        tok = self.next()
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise ParseError(f"expected {value or kind}, got {tok[1]!r}")
        return tok

    def at(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        return tok[0] == kind and (value is None or tok[1] == value)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("nesting too deep")

    # -- grammar -------------------------------------------------------------------------------
    def parse(self) -> Node:
        if self.at("either"):
            self.next()
        # "\text{The answer is } 5", "= 5", "\approx 3.14": a lead-in before the math
        while self.peek()[0] in ("word", "unit") and self.peek(1)[0] not in ("eof", "word", "unit"):
            self.next()
        if self.at("rel") and self.peek()[1] in ("=", "~"):
            self.next()
        node = self.parse_or()
        self.skip_units()
        if not self.at("eof"):
            raise ParseError(f"unexpected {self.peek()[1]!r}")
        return node

    def parse_or(self) -> Node:
        items = [self.parse_list()]
        while self.at("or"):
            self.next()
            items.append(self.parse_list())
        return items[0] if len(items) == 1 else ("or", tuple(items))

    def parse_list(self) -> Node:
        groups: list[list[Node]] = [[self.parse_setop()]]
        while self.at("comma") or self.at("and"):
            if self.next() == ("comma", ";"):
                groups.append([])
            if self.at("and"):  # ", and"
                self.next()
            if self.at("eof") or self.at("or"):
                break
            groups[-1].append(self.parse_setop())
        groups = [g for g in groups if g]
        if len(groups) > 1 and any(len(g) > 1 for g in groups):
            # "p = 5, q = 2; p = 7, q = 2": semicolons separate solutions, commas their parts
            items = [g[0] if len(g) == 1 else ("list", tuple(g)) for g in groups]
        else:
            items = [node for g in groups for node in g]
        return items[0] if len(items) == 1 else ("list", tuple(items))

    def parse_setop(self) -> Node:
        node = self.parse_relation()
        while self.at("setop"):
            op = self.next()[1]
            node = ("setop", op, node, self.parse_relation())
        return node

    def parse_relation(self) -> Node:
        exprs = [self.parse_additive()]
        ops: list[str] = []
        while self.at("rel"):
            ops.append(self.next()[1])
            exprs.append(self.parse_additive())
        self.skip_units()
        if not ops:
            return exprs[0]
        return ("rel", tuple(exprs), tuple(ops))

    def skip_units(self) -> None:
        """Drop unit annotations: ``cm``, ``\\text{ cm}^2``, ``m/s``, ``dollars per hour``."""
        while self.peek()[0] in _STOP_UNITS:
            self.next()
            if self.at("op", "^"):
                self.next()
                if self.at("num"):
                    self.next()
                elif self.at("open", "{"):
                    self.parse_primary()
            if self.at("op", "/") and self.peek(1)[0] in _STOP_UNITS:
                self.next()

    def parse_additive(self) -> Node:
        self.enter()
        terms: list[Node] = []
        pm: list[tuple[str, Node]] = []
        if self.at("op", "-"):
            self.next()
            terms.append(("neg", self.parse_term()))
        elif self.at("pm"):
            sign = self.next()[1]
            pm.append((sign, self.parse_term()))
        else:
            if self.at("op", "+"):
                self.next()
            terms.append(self.parse_term())
        while True:
            if self.at("op", "+"):
                self.next()
                terms.append(self.parse_term())
            elif self.at("op", "-"):
                self.next()
                terms.append(("neg", self.parse_term()))
            elif self.at("pm"):
                sign = self.next()[1]
                pm.append((sign, self.parse_term()))
            else:
                break
        self.depth -= 1
        if len(pm) > 2:
            raise ParseError("too many \\pm")
        node = (terms[0] if len(terms) == 1 else ("add", tuple(terms))) if terms else ZERO
        for sign, t in pm:
            node = ("pm", node, t, sign)
        return node

    def starts_factor(self) -> bool:
        kind, val = self.peek()
        if kind == "begin":  # a matrix times a matrix: \begin{pmatrix}..\end{pmatrix}\begin{...
            return val in _MATRIX_ENVS
        if kind in ("num", "id", "const", "fn", "cmd", "special"):
            return not (kind == "cmd" and val in ("end",))
        if kind == "open":
            return val in ("(", "[", "{", "floor", "ceil")
        return kind == "op" and val == "|" and self.abs_depth == 0

    def parse_term(self) -> Node:
        self.enter()
        factors = [self.parse_unary()]
        divs: list[bool] = [False]
        while True:
            if self.at("op", "*"):
                self.next()
                factors.append(self.parse_unary())
                divs.append(False)
            elif self.at("op", "/"):
                self.next()
                factors.append(self.parse_unary())
                divs.append(True)
            elif self.at("op", ":") and len(factors) == 1 and self.depth <= 4:
                # a ratio 1:2 is the fraction 1/2 (only two parts, at the top level)
                self.next()
                factors.append(self.parse_unary())
                divs.append(True)
                if self.at("op", ":"):
                    raise ParseError("a ratio of three parts")
            elif self.at("op", "choose"):
                self.next()
                k = self.parse_unary()
                factors[-1] = ("fn", "binom", (factors[-1], k))
            elif self.starts_factor():
                prev = factors[-1]
                if self.at("num") and prev[0] == "num":
                    raise ParseError("two numbers in a row")
                if (
                    self.at("cmd", "frac")
                    and prev[0] == "num"
                    and len(factors) == 1
                    and prev[1].denominator == 1
                ):
                    frac = self.parse_unary()
                    if (
                        frac[0] == "div"
                        and frac[1][0] == "num"
                        and frac[2][0] == "num"
                        and frac[1][1].denominator == 1
                        and frac[2][1].denominator == 1
                    ):
                        # a mixed number: 2\frac{1}{2} is 5/2
                        factors[-1] = ("add", (prev, frac))
                        continue
                    factors.append(frac)
                    divs.append(False)
                    continue
                factors.append(self.parse_unary(implicit=True))
                divs.append(False)
            else:
                break
        self.depth -= 1
        node = factors[0]
        run: list[Node] = [node]
        for f, d in zip(factors[1:], divs[1:], strict=False):
            if d:
                node = ("div", _mul(run), f)
                run = [node]
            else:
                run.append(f)
        return _mul(run)

    def parse_unary(self, implicit: bool = False) -> Node:
        self.enter()
        if not implicit and self.at("op", "-"):
            self.next()
            node: Node = ("neg", self.parse_unary())
        elif not implicit and self.at("op", "+"):
            self.next()
            node = self.parse_unary()
        else:
            node = self.parse_power()
        self.depth -= 1
        return node

    def parse_power(self) -> Node:
        base = self.parse_postfix()
        if self.at("op", "^"):
            self.next()
            exp = self.parse_exponent()
            base = ("pow", base, exp)
            # postfix after a power: 2^3! is unusual; degrees after power handled by the caller
        return base

    def parse_exponent(self) -> Node:
        self.enter()
        if self.at("op", "-"):
            self.next()
            node: Node = ("neg", self.parse_exponent())
        elif self.at("op", "+"):
            self.next()
            node = self.parse_exponent()
        else:
            node = _literal(self.next()[1]) if self.at("num") else self.parse_primary()
            if self.at("op", "^"):  # a^b^c = a^(b^c)
                self.next()
                node = ("pow", node, self.parse_exponent())
        self.depth -= 1
        return node

    def parse_postfix(self) -> Node:
        node = self.parse_primary()
        while True:
            if self.at("op", "!"):
                self.next()
                if self.at("op", "!"):
                    self.next()
                    node = ("fn", "fact2", (node,))
                else:
                    node = ("fn", "fact", (node,))
            elif self.at("scale"):  # 1.5 million
                node = ("mul", (node, num(self.next()[1])))
            elif self.at("deg"):
                self.next()
                # inside sin(...) an angle in degrees converts; an angle answer is kept as one
                # (60 degrees is also pi/3, see llmgym.rewards.math.values)
                in_function = self.fn_depth > 0
                node = ("div", _mul([node, _PI]), num(180)) if in_function else ("deg", node)
            elif self.at("op", "'"):
                raise ParseError("primes are not supported")
            else:
                return node

    def parse_group(self, opener: str) -> Node:
        """The content of ``{...}`` (an expression, no commas)."""
        node = self.parse_or()
        self.expect("close", "}" if opener == "{" else opener)
        return node

    def parse_braced_arg(self) -> Node:
        """A LaTeX argument: ``{...}`` or a single token (``\\frac34``)."""
        if self.at("open", "{"):
            self.next()
            return self.parse_group("{")
        tok = self.peek()
        if tok[0] == "num":
            self.next()
            text = tok[1]
            if text.isdigit() and len(text) > 1:
                # \frac34: one digit per argument; the rest stays the next token (rewritten
                # in place: rebuilding the token list would make \frac12\frac12... quadratic)
                self.i -= 1
                self.toks[self.i] = ("num", text[1:])
                return _literal(text[0])
            return _literal(text)
        return self.parse_primary()

    def parse_primary(self) -> Node:
        self.enter()
        node = self._primary()
        self.depth -= 1
        return node

    def _primary(self) -> Node:
        kind, val = self.next()
        if kind == "num":
            node = _literal(val)
            if self.at("op", "_") and val.isdigit():  # 1010_2
                self.next()
                base = self.parse_braced_arg()
                if base[0] != "num" or base[1].denominator != 1 or not 2 <= base[1] <= 36:
                    raise ParseError("bad base")
                node = ("based", val, int(base[1]))
            return node
        if kind == "id":
            name = val
            if self.at("op", "_"):
                self.next()
                name = f"{name}_{self._subscript()}"
            if name in _FUNCTION_LETTERS and self.at("open", "("):
                call = self._function_call(name)
                if call is not None:
                    return call
            elif (
                name.isupper()
                and len(name) == 1
                and self.at("open", "(")
                and self.peek(1)[0] == "id"
                and self.peek(2) == ("close", ")")
            ):
                # W(n): a function of one variable (A(1, 2), a point, stays a product)
                return self._function_call(name)  # type: ignore[return-value]
            if name == "e":
                return ("const", "e")
            if name == "i":
                return ("const", "i")
            return ("sym", name)
        if kind == "const":
            return ("const", val)
        if kind == "special":
            if val == "inf":
                return ("inf", 1)
            return ("special", val)
        if kind == "word":
            return ("text", val)
        if kind == "fn":
            return self.parse_function(val)
        if kind == "open":
            return self.parse_bracket(val)
        if kind == "op" and val == "|":
            self.abs_depth += 1
            inner = self.parse_additive()
            self.abs_depth -= 1
            self.expect("op", "|")
            return ("fn", "abs", (inner,))
        if kind == "cmd":
            return self.parse_command(val)
        if kind == "begin":
            return self.parse_env(val)
        raise ParseError(f"unexpected {val!r}")

    def _function_call(self, name: str) -> Node | None:
        """``f(x)``, ``g(2)``: function notation, read as one opaque name (so ``f(x) = 2x``
        is an assignment); None (and nothing consumed) for anything else, e.g. ``f(x+1)``."""
        args = []
        j = self.i + 1
        while True:
            kind, val = self.toks[j] if j < len(self.toks) else ("eof", None)
            if kind not in ("id", "num"):
                return None
            args.append(str(val))
            kind, val = self.toks[j + 1] if j + 1 < len(self.toks) else ("eof", None)
            if kind == "close" and val == ")":
                self.i = j + 2
                return ("sym", f"{name}({','.join(args)})")
            if kind != "comma":
                return None
            j += 2

    def _subscript(self) -> str:
        if self.at("open", "{"):
            self.next()
            parts = []
            while not self.at("close", "}"):
                kind, val = self.next()
                if kind not in ("num", "id", "op", "comma", "word") or (
                    kind == "op" and val not in "+-"
                ):
                    raise ParseError("complex subscript")
                parts.append(str(val))
                if len(parts) > 10:
                    raise ParseError("long subscript")
            self.next()
            return "".join(parts)
        kind, val = self.next()
        if kind not in ("num", "id"):
            raise ParseError("bad subscript")
        return str(val)

    def parse_bracket(self, opener: str) -> Node:
        if opener in ("floor", "ceil"):
            inner = self.parse_additive()
            self.expect("close", opener)
            return ("fn", opener, (inner,))
        items: list[Node] = []
        if self.at("close") and self.peek()[1] in _CLOSERS[opener]:
            closer = self.next()[1]
            if opener in ("{", "{s"):
                return ("special", "empty")
            return ("tuple", opener, closer, ())
        if (
            opener in ("{", "{s")
            and self.peek()[0] == "id"
            and self.peek(1) in (("op", "|"), ("op", ":"))
        ):
            # set-builder notation {x | x > 2}: the set is what the condition describes
            self.next()
            self.next()
            condition = self.parse_or()
            self.expect("close", "}" if opener == "{" else opener)
            return condition
        while True:
            items.append(self.parse_setop() if opener in ("(", "[") else self.parse_or())
            if self.at("comma"):
                self.next()
                continue
            break
        tok = self.next()
        if tok[0] != "close" or tok[1] not in _CLOSERS[opener]:
            raise ParseError("unbalanced brackets")
        closer = tok[1]
        if opener in ("{", "{s"):
            if len(items) == 1 and opener == "{":
                return items[0]
            return ("set", tuple(items))
        if len(items) == 1 and closer == {"(": ")", "[": "]"}[opener]:
            return items[0]
        return ("tuple", opener, closer, tuple(items))

    def parse_function(self, name: str) -> Node:
        power: Node | None = None
        base: Node | None = None
        if self.at("op", "^"):
            self.next()
            power = self.parse_exponent()
            inverse = power[0] == "neg" and power[1][0] == "num" and power[1][1] == 1
            if inverse and name in ("sin", "cos", "tan", "sec", "csc", "cot"):
                name, power = "arc" + name, None
        if self.at("op", "_") and name == "log":
            self.next()
            base = self.parse_braced_arg()
        self.fn_depth += 1
        try:
            if name in ("gcd", "lcm", "max", "min"):
                self.expect("open", "(")
                args = [self.parse_additive()]
                while self.at("comma"):
                    self.next()
                    args.append(self.parse_additive())
                self.expect("close", ")")
                node: Node = ("fn", name, tuple(args))
            else:
                arg = self.parse_fn_arg()
                if base is not None:
                    node = ("fn", "logb", (base, arg))
                elif name == "exp":
                    node = ("pow", ("const", "e"), arg)
                else:
                    node = ("fn", name, (arg,))
        finally:
            self.fn_depth -= 1
        if power is not None:
            node = ("pow", node, power)
        return node

    def parse_fn_arg(self) -> Node:
        """``sin(x)``, ``\\sin{x}``, or ``\\sin 2x`` (a product without + or -)."""
        if self.at("open", "(") or self.at("open", "{"):
            opener = self.next()[1]
            inner = self.parse_additive()
            self.expect("close", ")" if opener == "(" else "}")
            node = inner
            while self.at("deg"):
                self.next()
                node = ("div", _mul([node, _PI]), num(180))
            return node
        factors = [self.parse_unary()]
        while self.starts_factor() and not self.at("fn"):
            factors.append(self.parse_unary(implicit=True))
        return _mul(factors)

    def parse_command(self, name: str) -> Node:
        if name == "frac":
            num = self.parse_braced_arg()
            den = self.parse_braced_arg()
            return ("div", num, den)
        if name == "binom":
            n = self.parse_braced_arg()
            k = self.parse_braced_arg()
            return ("fn", "binom", (n, k))
        if name == "sqrt":
            if self.at("open", "["):
                self.next()
                index = self.parse_additive()
                self.expect("close", "]")
                self.fn_depth += 1
                arg = self.parse_braced_arg()
                self.fn_depth -= 1
                return ("fn", "root", (index, arg))
            return ("fn", "sqrt", (self.parse_braced_arg(),))
        if name in ("sum", "prod"):
            return self.parse_series(name)
        if name == "overline":
            raise ParseError("\\overline outside a decimal")
        raise ParseError(f"unexpected \\{name}")

    def parse_series(self, name: str) -> Node:
        """``\\sum_{k=0}^{n-1} F_k F_{n-k-1}``: summed out when its bounds are small integers,
        else one opaque symbol named by its canonical form (factors in any order, any index
        name), so equal sums written differently are one symbol."""
        index: Node | None = None
        hi: Node | None = None
        for _ in range(2):
            if self.at("op", "_") and index is None:
                self.next()
                index = self.parse_braced_arg()
            elif self.at("op", "^") and hi is None:
                self.next()
                hi = self.parse_braced_arg()
        if (
            index is None
            or hi is None
            or index[0] != "rel"
            or index[2] != ("=",)
            or index[1][0][0] not in ("sym", "const")
        ):
            raise ParseError(f"\\{name} without index and bounds")
        var, lo = index[1][0][1], index[1][1]
        body = self.parse_fn_arg()
        if index[1][0][0] == "const":  # \sum_{i=1}: i is the index, not the imaginary unit
            body = const_to_sym(body, var)
        return series(name, var, lo, hi, body)

    def parse_env(self, env: str) -> Node:
        if env not in _MATRIX_ENVS:
            raise ParseError(f"unsupported environment {env}")
        rows: list[tuple[Node, ...]] = []
        row: list[Node] = []
        while True:
            if self.at("end"):
                self.next()
                break
            if self.at("eof"):
                raise ParseError("unterminated matrix")
            row.append(self.parse_additive())
            if self.at("amp"):
                self.next()
            elif self.at("rowsep"):
                self.next()
                rows.append(tuple(row))
                row = []
        if row:
            rows.append(tuple(row))
        if not rows or any(len(r) != len(rows[0]) for r in rows):
            raise ParseError("ragged matrix")
        return ("matrix", tuple(rows))


def _mul(factors: list[Node]) -> Node:
    return factors[0] if len(factors) == 1 else ("mul", tuple(factors))


def _wrap_depth(s: str, left: str, right: str) -> int:
    """How many ``left ... right`` pairs wrap all of ``s`` (``((1))`` -> 2), in linear time."""
    n = len(s)
    depth = [0] * n
    d = 0
    for i, ch in enumerate(s):
        if ch == left:
            d += 1
        elif ch == right:
            d -= 1
            if d < 0:
                return 0
        depth[i] = d
    if d != 0:
        return 0
    # layer j+1 wraps s[j:n-j] iff every depth in s[j : n-j-1] stays >= j+1
    half = n // 2
    window_min = [0] * (half + 1)
    best = n
    for j in range(half - 1, -1, -1):
        if j <= n - j - 2:
            best = min(best, depth[j], depth[n - j - 2])
        window_min[j] = best
    w = 0
    while w < half and s[w] == left and s[n - 1 - w] == right and window_min[w] >= w + 1:
        w += 1
    return w


def strip_redundant_grouping(s: str) -> str:
    """``((((1))))`` -> ``(1)`` and ``{{{x}}}`` -> ``{x}``: doubled grouping is meaningless, and
    removing it keeps thousands of redundant levels from hitting the depth limit."""
    for left, right in (("(", ")"), ("{", "}")):
        if s.startswith(left * 2) and not (left == "{" and ("\\{" in s or "\\}" in s)):
            w = _wrap_depth(s, left, right)
            if w >= 2:
                s = s[w - 1 : len(s) - (w - 1)]
    return s


_REPEATING_RE = re.compile(r"(\d*)\.(\d*)\\overline\{(\d+)\}|(\d*)\.(\d*)\((\d+)\)$")


def _repeating(m: re.Match[str]) -> str:
    whole, fixed, rep = (m.group(1), m.group(2), m.group(3)) if m.group(3) else m.group(4, 5, 6)
    whole = whole or "0"
    value = Fraction(
        int(whole + fixed + rep) - int(whole + fixed), 10 ** len(fixed) * (10 ** len(rep) - 1)
    )
    return f"({value.numerator}/{value.denominator})"


_ELLIPSIS_RE = re.compile(r"(\d*)\.(\d+)\s*(?:\.\.\.|\\[lc]?dots|…)")


def _ellipsis(m: re.Match[str]) -> str:
    """``0.1666...`` -> ``(1/6)``: the shortest period repeated at least twice (thrice for a
    single digit) at the end of the digits; no repetition -> ParseError."""
    whole, digits = m.group(1) or "0", m.group(2)
    for period in range(1, len(digits) // 2 + 1):
        rep = digits[-period:]
        copies = 3 if period == 1 else 2
        if len(digits) >= period * copies and digits.endswith(rep * copies):
            fixed = digits[: len(digits) - period * copies]
            while fixed.endswith(rep):
                fixed = fixed[:-period]
            value = Fraction(
                int(whole + fixed + rep) - int(whole + fixed),
                10 ** len(fixed) * (10**period - 1),
            )
            return f"({value.numerator}/{value.denominator})"
    raise ParseError("an ellipsis without a repeating pattern")


@short_input_cache()
def parse(answer: str) -> Node:
    """Parse a normalised answer (see :func:`normalize`) into an AST; raise :class:`ParseError`.

    >>> parse(r"\\frac{3}{4}")
    ('div', ('num', Fraction(3, 1), 1), ('num', Fraction(4, 1), 1))
    >>> parse("x = 1, 2")[0]
    'list'
    """
    if answer.startswith(("((", "{{")):
        answer = strip_redundant_grouping(answer)
    if len(answer) > MAX_ANSWER_CHARS:
        raise ParseError("answer too long")
    if not answer:
        raise ParseError("empty answer")
    if "overline" in answer or answer.endswith(")"):
        answer = _REPEATING_RE.sub(_repeating, answer)
    if "..." in answer or "dots" in answer or "…" in answer:
        answer = _ELLIPSIS_RE.sub(_ellipsis, answer)
    if UNIT_PHRASES.search(answer):
        answer = UNIT_PHRASES.sub("", answer).strip()
    toks = tokenize(answer)
    if not toks:
        raise ParseError("empty answer")
    return _Parser(list(toks)).parse()
