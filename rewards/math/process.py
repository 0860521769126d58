"""Process rewards for math: a rule-based step checker, and reward models (ORM/PRM) as rewards.

**Step checker.** A task's *milestones* are its intermediate results (exact values, with the
milestones each one needs first). :func:`check_steps` reads the reasoning of a free-form
solution (the text before the final ``\\boxed{}``), finds the equations in it, and credits a
milestone when some equation's right-hand side equals it (exactly for numbers, with
:func:`llmgym.rewards.math.math_equal` for expressions), after the equations that credited the
milestones it depends on. What it does not reward, by construction:

- numbers that are not stated as results: ``12`` alone, or "it is 12", never counts; only
  ``... = 12``;
- wrong arithmetic: an equation whose two sides are plain arithmetic and differ
  (``3 \\times 4 = 13``, and every link but one of a sprayed chain ``= 1 = 2 = 3``) scales the
  credit by the fraction of checkable equations that hold;
- listing candidates: beyond ``A = 3 * milestones + 8`` distinct right-hand sides ``D`` the
  credit is multiplied by ``(A / D)^2``, so a response that enumerates values earns next to
  nothing (60 values against 3 milestones keep 8%);
- a wrong final answer caps the credit at :data:`WRONG_ANSWER_CAP`.

Tasks without milestones get the outcome (1 when the final answer is right, else 0). The score
lies in [0, 1]. Limits: only the first :data:`MAX_REASONING_CHARS` characters of the reasoning
are read; results stated in words ("three times four is twelve") are not recognised.

**Reward models.** :class:`RewardModel` wraps a transformers sequence classifier: an *outcome*
reward model scores ``(prompt, response)``; a *process* reward model scores each prefix of
the response's steps and aggregates (min by default). torch and transformers are imported
only when a model is loaded or used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from llmgym.rewards.base import RewardResult
from llmgym.rewards.math.verifier import math_equal
from llmgym.rewards.reward_model import (  # Math-v0's reward model, shared by every env now
    MAX_RM_CHARS as MAX_RM_CHARS,
)
from llmgym.rewards.reward_model import (
    RewardModel as RewardModel,
)
from llmgym.rewards.reward_model import (
    load_reward_model as load_reward_model,
)
from llmgym.rewards.reward_model import (
    split_steps as split_steps,
)

MAX_REASONING_CHARS = 50_000
"""The step checker reads at most this many characters of reasoning."""
MAX_EQUATIONS = 500
"""More equations than this in the reasoning is a listing, not a solution: no credit."""
WRONG_ANSWER_CAP = 0.5
"""Process credit when the final answer is wrong is at most this."""
MAX_SYMBOLIC_CHECKS = 64
"""At most this many calls to ``math_equal`` per response (for non-numeric milestones)."""


@dataclass(frozen=True)
class Milestone:
    """An intermediate result a solution should state: its exact value (a gold answer string)
    and the ids of the milestones it builds on.
    """

    id: str
    value: str
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Equation:
    """One ``lhs = rhs`` read from a solution; values are exact when a side is plain arithmetic."""

    lhs: str
    rhs: str
    lhs_value: Fraction | None
    rhs_value: Fraction | None
    checkable: bool
    """Both sides are arithmetic and the left one is a computation: it must hold."""

    @property
    def holds(self) -> bool:
        return self.lhs_value == self.rhs_value


@dataclass(frozen=True)
class StepCheck:
    """What :func:`check_steps` found: the score in [0, 1] and why."""

    score: float
    matched: tuple[str, ...]
    equations: int
    invalid: int
    note: str


# --- tokens ----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?|\.\d+)"
    r"|(?P<cmd>\\[A-Za-z]+)"
    r"|(?P<esc>\\.)"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<nl>\n)"
    r"|(?P<sym>[^\s])"
)
_COMMANDS = frozenset(
    [
        "frac",
        "dfrac",
        "tfrac",
        "sqrt",
        "times",
        "cdot",
        "div",
        "pi",
        "left",
        "right",
        "pm",
        "mp",
        "infty",
        "cup",
        "cap",
        "sin",
        "cos",
        "tan",
        "log",
        "ln",
        "exp",
        "circ",
        "binom",
        "dbinom",
        "lceil",
        "rceil",
        "lfloor",
        "rfloor",
    ]
)
_IGNORED = frozenset({"$", "&", "\\,", "\\;", "\\!", "\\ ", "\\$", "\\left", "\\right", "\\quad"})
_MATH_SYMBOLS = frozenset("+-*/^()[]{}!|_'%×÷·−–")
_OPENERS = {"(": ")", "[": "]", "{": "}", "\\{": "\\}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_OPERATORS = frozenset({"+", "-", "*", "/", "^", "×", "÷", "·", "−", "–", "\\times", "\\cdot", "\\div", "\\frac", "\\dfrac", "\\tfrac"})  # fmt: skip
_CONNECTIVES = frozenset(
    [
        "of",
        "by",
        "per",
        "times",
        "plus",
        "minus",
        "over",
        "from",
        "than",
        "divided",
        "multiplied",
        "into",
        "and",
        "with",
    ]
)


class _Tok(NamedTuple):
    kind: str
    text: str
    start: int
    end: int


def _tokens(text: str) -> list[_Tok]:
    return [
        _Tok(m.lastgroup or "sym", m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)
    ]


def _is_math(tok: _Tok) -> bool:
    if tok.kind == "num":
        return True
    if tok.kind == "cmd":
        return tok.text[1:] in _COMMANDS or tok.text in _IGNORED
    if tok.kind == "esc":
        return tok.text in ("\\%", "\\{", "\\}") or tok.text in _IGNORED
    if tok.kind == "word":
        return len(tok.text) == 1
    if tok.kind == "sym":
        return tok.text in _MATH_SYMBOLS or tok.text in _IGNORED or tok.text == ","
    return False


def _span(toks: list[_Tok], index: int, step: int) -> list[_Tok]:
    """The math tokens next to an ``=`` at ``index``, walking in direction ``step``."""
    out: list[_Tok] = []
    depth = 0
    i = index + step
    while 0 <= i < len(toks):
        tok = toks[i]
        if tok.kind == "nl" or tok.text == "=" or not _is_math(tok):
            break
        opening, closing = (_OPENERS, _CLOSERS) if step > 0 else (_CLOSERS, _OPENERS)
        if tok.text in opening:
            depth += 1
        elif tok.text in closing:
            if depth == 0:
                break
            depth -= 1
        elif tok.text == "," and depth == 0:
            break
        out.append(tok)
        i += step
    return out if step > 0 else out[::-1]


def _text(source: str, toks: list[_Tok]) -> str:
    return source[toks[0].start : toks[-1].end] if toks else ""


def find_equations(text: str, *, limit: int = MAX_EQUATIONS + 1) -> list[Equation]:
    """The equations of a solution, in order (chains ``a = b = c`` give ``a = b`` and ``b = c``).

    >>> [(e.lhs, e.rhs, e.holds) for e in find_equations("Cost: $3 \\\\times 4 = 12$ dollars.")]
    [('3 \\\\times 4', '12', True)]
    >>> [e.rhs for e in find_equations("x = 5\\ny = 6 apples, so 2x = 10")]
    ['5', '6', '10']
    """
    toks = _tokens(text)
    out = []
    for k, tok in enumerate(toks):
        if (
            tok.text != "="
            or (k > 0 and toks[k - 1].text in "<>!=")
            or (k + 1 < len(toks) and toks[k + 1].text == "=")
        ):
            continue
        left, right = _span(toks, k, -1), _span(toks, k, 1)
        left = [t for t in left if t.text not in _IGNORED]
        right = [t for t in right if t.text not in _IGNORED]
        if not right:
            continue
        lhs_value = _evaluate(left) if left else None
        rhs_value = _evaluate_prefix(right)
        before = _before(toks, k, len(left))
        checkable = (
            lhs_value is not None
            and rhs_value is not None
            and (any(t.text in _OPERATORS for t in left) or before == "=")
            and before not in _CONNECTIVES
        )
        out.append(Equation(_text(text, left), _text(text, right), lhs_value, rhs_value, checkable))
        if len(out) >= limit:
            break
    return out


def _before(toks: list[_Tok], k: int, span: int) -> str:
    """The token just before an equation's left side, lowercased: ``of`` in "20% of 50 = 10"
    (the left side is then not the whole computation), ``=`` in a chain ``a = b = c``."""
    i = k - 1
    seen = 0
    while i >= 0 and seen < span:
        if toks[i].text not in _IGNORED:
            seen += 1
        i -= 1
    while i >= 0 and toks[i].text in _IGNORED:
        i -= 1
    return toks[i].text.lower() if i >= 0 else ""


# --- exact arithmetic --------------------------------------------------------------------------

_MAX_BITS = 4096


class _NotArithmetic(Exception):
    pass


def evaluate_arithmetic(text: str) -> Fraction | None:
    """The exact value of plain arithmetic (numbers, + - × ÷ / ^, parentheses, ``\\frac``,
    ``%``, square roots of perfect squares); None for anything else. Never evaluates code.

    >>> evaluate_arithmetic("\\\\frac{3}{4} \\\\times (2 + 6)"), evaluate_arithmetic("2^{10} - 24")
    (Fraction(6, 1), Fraction(1000, 1))
    >>> evaluate_arithmetic("15\\\\% \\\\times 240"), evaluate_arithmetic("2x + 1") is None
    (Fraction(36, 1), True)
    """
    toks = [t for t in _tokens(text) if t.text not in _IGNORED]
    return _evaluate(toks) if toks else None


def _evaluate(toks: list[_Tok]) -> Fraction | None:
    if len(toks) > 200:
        return None
    parser = _Arithmetic(toks)
    try:
        value = parser.expr()
        if parser.i != len(toks):
            return None
        return value
    except (_NotArithmetic, ZeroDivisionError, OverflowError, ValueError, RecursionError):
        return None


def _evaluate_prefix(toks: list[_Tok]) -> Fraction | None:
    """The value of the longest arithmetic prefix (``12 \\text{ km}`` -> 12), trying a few."""
    for end in range(len(toks), max(0, len(toks) - 8), -1):
        value = _evaluate(toks[:end])
        if value is not None:
            return value
    return None


class _Arithmetic:
    """Recursive descent over tokens: expr := term (± term)*; term := unary ((×|÷|implicit) unary)*."""

    def __init__(self, toks: list[_Tok]):
        self.toks = toks
        self.i = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.toks[self.i].text if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> _Tok:
        if self.i >= len(self.toks):
            raise _NotArithmetic
        tok = self.toks[self.i]
        if expected is not None and tok.text != expected:
            raise _NotArithmetic
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        self.depth += 1
        if self.depth > 40:
            raise _NotArithmetic
        value = self.term()
        while self.peek() in ("+", "-", "−", "–"):
            op = self.take().text
            right = self.term()
            value = value + right if op == "+" else value - right
        self.depth -= 1
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while True:
            nxt = self.peek()
            if nxt in ("*", "×", "·", "\\times", "\\cdot"):
                self.take()
                value *= self.unary()
            elif nxt in ("/", "÷", "\\div"):
                self.take()
                value /= self.unary()
            elif nxt in ("(", "[", "\\frac", "\\dfrac", "\\tfrac", "\\sqrt") and self.i > 0:
                value *= self.unary()  # implicit product: 2(3 + 4)
            else:
                return value

    def unary(self) -> Fraction:
        if self.peek() in ("-", "−", "–"):
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        while self.peek() in ("^", "%", "\\%"):
            if self.take().text != "^":
                base /= 100
                continue
            if self.peek() == "\\circ":
                raise _NotArithmetic  # degrees are not arithmetic
            exponent = self.group() if self.peek() == "{" else self.unary()
            if exponent.denominator != 1 or abs(exponent) > 64:
                raise _NotArithmetic
            if base == 0 and exponent < 0:
                raise ZeroDivisionError
            bits = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
            if bits * abs(exponent) > _MAX_BITS:
                raise _NotArithmetic
            base = base ** int(exponent)
        return base

    def group(self) -> Fraction:
        opener = self.take().text
        value = self.expr()
        self.take(_OPENERS.get(opener, ")"))
        return value

    def atom(self) -> Fraction:
        tok = self.take()
        if tok.kind == "num":
            return Fraction(tok.text.replace(",", ""))
        if tok.text in ("(", "[", "{"):
            self.i -= 1
            return self.group()
        if tok.text in ("\\frac", "\\dfrac", "\\tfrac"):
            if self.peek() != "{":
                raise _NotArithmetic
            num = self.group()
            if self.peek() != "{":
                raise _NotArithmetic
            return num / self.group()
        if tok.text == "\\sqrt" and self.peek() == "{":
            inside = self.group()
            root = _exact_sqrt(inside)
            if root is None:
                raise _NotArithmetic
            return root
        raise _NotArithmetic


def _exact_sqrt(value: Fraction) -> Fraction | None:
    if value < 0:
        return None
    num, den = math.isqrt(value.numerator), math.isqrt(value.denominator)
    if num * num == value.numerator and den * den == value.denominator:
        return Fraction(num, den)
    return None


# --- the step checker ---------------------------------------------------------------------------

_FINAL_MARKERS = re.compile(r"\\boxed|\\fbox|(?:the\s+)?final answer|the answer is", re.IGNORECASE)


def reasoning_part(response: str) -> str:
    """The text before the final answer (the last ``\\boxed``/"final answer" marker)."""
    last = None
    for m in _FINAL_MARKERS.finditer(response[: MAX_REASONING_CHARS + 1000]):
        last = m
    head = response[: last.start()] if last is not None else response
    return head[:MAX_REASONING_CHARS]


def check_steps(
    response: str,
    milestones: Sequence[Milestone],
    *,
    final_correct: bool | None = None,
    timeout_s: float = 1.0,
) -> StepCheck:
    """Credit for the milestones a free-form solution states as equation results (see the module
    docstring for the rules). ``final_correct``: whether the final answer is right (None:
    unknown, no cap).

    >>> ms = [Milestone("s1", "12"), Milestone("s2", "17", ("s1",))]
    >>> check_steps("Apples: 3 \\\\times 4 = 12. With 5 more: 12 + 5 = 17. \\\\boxed{20}", ms,
    ...             final_correct=False).score
    0.5
    >>> check_steps("= 12 = 17 = 20", ms, final_correct=True).score
    0.0
    """
    if not milestones:
        ok = bool(final_correct)
        return StepCheck(1.0 if ok else 0.0, (), 0, 0, "no intermediate results; the outcome")
    equations = find_equations(reasoning_part(response))
    if len(equations) > MAX_EQUATIONS:
        return StepCheck(0.0, (), len(equations), 0, "too many equations: a listing")
    matched = _match(equations, milestones, timeout_s)
    score = len(matched) / len(milestones)
    checkable = [e for e in equations if e.checkable]
    invalid = sum(1 for e in checkable if not e.holds)
    notes = [f"{len(matched)} of {len(milestones)} intermediate results stated"]
    if invalid:
        score *= (len(checkable) - invalid) / len(checkable)
        notes.append(f"{invalid} of {len(checkable)} checkable equations are wrong")
    distinct = len({e.rhs_value if e.rhs_value is not None else e.rhs for e in equations})
    allowance = 3 * len(milestones) + 8
    if distinct > allowance:
        score *= (allowance / distinct) ** 2
        notes.append(f"{distinct} different results stated (more than {allowance})")
    if final_correct is False and score > WRONG_ANSWER_CAP:
        score = WRONG_ANSWER_CAP
        notes.append(f"capped at {WRONG_ANSWER_CAP}: the final answer is wrong")
    ids = tuple(m.id for m in milestones if m.id in matched)
    return StepCheck(score, ids, len(equations), invalid, "; ".join(notes))


def _match(
    equations: list[Equation], milestones: Sequence[Milestone], timeout_s: float
) -> dict[str, int]:
    """Greedy earliest match of each milestone (in dependency order) to an unused equation
    after the equations that matched its (transitive) dependencies; returns
    {milestone id: equation index}."""
    order = _dependency_order(milestones)
    ancestors = _ancestors(milestones)
    used: set[int] = set()
    matched: dict[str, int] = {}
    budget = [MAX_SYMBOLIC_CHECKS]

    def equal(eq: Equation, value: str, exact: Fraction | None) -> bool:
        if exact is not None:
            return eq.rhs_value == exact
        if budget[0] <= 0 or len(eq.rhs) > 300:
            return False
        budget[0] -= 1
        return math_equal(eq.rhs, value, timeout_s=timeout_s)

    for m in order:
        exact = evaluate_arithmetic(m.value)
        start = max((matched[d] + 1 for d in ancestors[m.id] if d in matched), default=0)
        for j in range(start, len(equations)):
            if j not in used and equal(equations[j], m.value, exact):
                matched[m.id] = j
                used.add(j)
                break
    return matched


def _ancestors(milestones: Sequence[Milestone]) -> dict[str, set[str]]:
    """Every milestone's transitive dependencies (a result comes after all it builds on)."""
    direct = {m.id: set(m.after) for m in milestones}
    out: dict[str, set[str]] = {}
    for m in milestones:
        seen: set[str] = set()
        stack = list(direct[m.id])
        while stack:
            d = stack.pop()
            if d in direct and d not in seen and d != m.id:
                seen.add(d)
                stack.extend(direct[d])
        out[m.id] = seen
    return out


def _dependency_order(milestones: Sequence[Milestone]) -> list[Milestone]:
    done: set[str] = set()
    ids = {m.id for m in milestones}
    pending = list(milestones)
    order = []
    while pending:
        ready = [m for m in pending if all(d in done or d not in ids for d in m.after)]
        nxt = ready[0] if ready else pending[0]  # a cycle: take them as listed
        order.append(nxt)
        done.add(nxt.id)
        pending.remove(nxt)
    return order


def process_verifier(
    response: str,
    gold: Sequence[Milestone | Mapping[str, Any] | str],
    *,
    final_correct: bool | None = None,
    timeout_s: float = 1.0,
) -> RewardResult:
    """The step checker with the verifier signature: ``gold`` lists milestones (Milestone,
    ``{"id", "value", "after"}`` dicts, or bare values taken in no particular order).

    >>> process_verifier("So 6 \\\\times 7 = 42 and 42 - 2 = 40. \\\\boxed{40}", ["42"]).score
    1.0
    """
    try:
        milestones = [_milestone(g, i) for i, g in enumerate(gold)]
    except (TypeError, ValueError, KeyError) as e:
        return RewardResult(0.0, {"process": 0.0}, f"malformed milestones: {e}")
    if not isinstance(response, str):
        return RewardResult(0.0, {"process": 0.0}, "the response is not text")
    check = check_steps(response, milestones, final_correct=final_correct, timeout_s=timeout_s)
    return RewardResult(check.score, {"process": check.score}, check.note, check.score >= 1.0)


def _milestone(item: Milestone | Mapping[str, Any] | str, index: int) -> Milestone:
    if isinstance(item, Milestone):
        return item
    if isinstance(item, Mapping):
        return Milestone(str(item["id"]), str(item["value"]), tuple(item.get("after", ())))
    return Milestone(f"m{index + 1}", str(item))
