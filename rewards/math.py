"""The math verifier: find the final answer in a response and decide whether it equals the gold.

>>> math_equal(r"... so the answer is $\\boxed{\\dfrac{3}{4}}$.", "0.75")
True
>>> math_equal("x = 1 or x = 2", r"\\{2, 1\\}"), math_equal("1 or 2", "1")
(True, False)
>>> math_reward(r"\\boxed{[1, 3)}", "[1, 3]").score
0.0

What it covers (strict by default; ``rel_tol``/``abs_tol`` make numeric comparison tolerant):

- numbers: integers with separators (``1,000,000``, ``1 000 000``, ``1{,}000``, ``1\\,000``),
  decimals, scientific notation (``1.5e3``, ``1.5\\times10^{3}``), fractions (``3/4``,
  ``\\frac{3}{4}``, ``\\dfrac``, ``\\tfrac``, ``\\frac34``), mixed numbers (``2\\frac{1}{2}``,
  ``2 1/3``), two-part ratios (``1:2 == 1/2``), repeating decimals (``0.\\overline{3}``,
  ``0.1666...``), numbers in a base (``1010_2``), complex numbers (``3+2i``), infinity, scale
  and number words (``1.5 million``, ``twelve``). Decimals are exact: ``0.333 != 1/3``,
  ``3.14 != \\pi``;
- LaTeX and Unicode: ``\\sqrt``, ``\\sqrt[3]{}``, ``\\pi``, powers, ``\\left( \\right)``,
  ``\\cdot``, ``\\times``, spacing, ``\\text{}``/``\\mathrm{}``, ``−``, ``×``, ``÷``, ``√``,
  ``π``, ``≤``, ``≥``, ``∞``, superscripts;
- symbolic equivalence: ``2\\sqrt{2} == \\sqrt{8}``, ``x^2-1 == (x-1)(x+1)`` (exact
  identity testing at random rational points, high-precision numerics, sympy only when those
  are inconclusive);
- structure: ordered tuples, sets (set-builder ``\\{x \\mid x > 2\\}`` too), intervals
  (``[1, 3) != [1, 3]``), unions, inequalities (``x > 2 == (2, \\infty)``, nonlinear ones via
  sympy), equations, assignments, matrices, multiple-choice letters, "no solution"/empty set,
  "undefined"/DNE, units and text around the answer, answers in words (case-insensitive).

Semantics decided here (each is a test in ``tests/rewards/test_math_verifier.py``):

- **percent** is a unit: it is dropped, never scaled. ``50\\%`` equals ``50``; ``50\\%`` and
  ``0.5`` differ whichever of them is the gold (no x100 leniency).
- **units** (``cm``, ``\\text{ meters}``, ``\\$``, ``dollars``) are dropped and not converted:
  ``5 cm == 5``, ``50 mm != 5 cm``.
- **degrees** mark an angle: ``30^\\circ`` equals ``30`` (the unit dropped) and ``\\pi/6`` (the
  same angle in radians); a bare ``30`` does not equal ``\\pi/6``. Inside a trig function the
  degree sign converts: ``\\sin 30^\\circ == 1/2``.
- **tuples vs sets**: parentheses are ordered (``(1, 2) != (2, 1)``); braces are sets
  (``\\{1, 2\\} == \\{2, 1\\}``). A bare comma list (``1, 2``) is a list of answers, compared as
  a set, since "find all solutions" answers come in any order: ``1, 2 == 2, 1 == \\{1, 2\\}``.
  A two-element ``(a, b)`` or ``[a, b]`` is an interval when compared with an interval or an
  inequality; a pair and a bare list differ.
- **solution lists**: ``x = 1, 2``, ``x = 1 \\text{ or } x = 2``, ``x \\in \\{1, 2\\}`` and
  ``x = \\pm 1`` state the set of values of ``x``. ``or`` between relations on one variable is a
  disjunction (``x < 0 \\text{ or } x > 3`` is a union); ``or`` between bare values ("1 or 2",
  "either 3 or 4") is a hedge and gets no credit.
- **assignments**: ``x = 3`` equals ``3`` (and ``x = 3``, but not ``y = 3``);
  ``x = 1, y = 2 == y = 2, x = 1``, and equals the tuple ``(1, 2)`` taking the variables in
  alphabetical order. ``3 \\times 4 = 12`` means ``12``. Equations equal when one is a non-zero
  multiple of the other (``y = 2x + 1 == 2x - y + 1 = 0``).
- **hedging**: two different boxed answers side by side or joined by "or" get no credit;
  boxes joined by "and"/"," form one list answer; a box followed by prose and a later box
  (the model changed its mind) counts the last one.
- **multiple choice**: when the gold is a letter A-J (``B``, ``(B)``, ``\\text{(B)}``), the
  answer's letter is compared: ``(B)``, ``B)``, ``B. 42``, ``\\textbf{B}`` all read as B.
- ``[2, \\infty]`` reads as ``[2, \\infty)``; ``\\log`` is the natural logarithm; ``e`` is Euler's
  number and ``i`` the imaginary unit; ``1010`` equals ``1010_2`` (digits compared, the base
  was asked for), ``10`` does not.

- ``\\sqrt{2} \\approx 1.414`` means ``\\sqrt{2}`` (the exact value is stated first); ``x \\approx
  1.414`` is only an approximation. Matrices must have the same shape; a one-row or one-column
  matrix equals a tuple of its entries.

Limits: answers longer than 5,000 characters are only compared as normalised text; numbers
beyond ``2^(2^40)`` and differently written are unequal unless their structures or logarithms
(60 digits) agree; sampling-based identity testing can in principle be fooled by an
expression built to vanish at the sampled points.

Safety: model output is never ``eval``-ed; a hand-written parser with depth and size limits
reads it, exact arithmetic bounds every intermediate size, and sympy (rarely needed) runs in
worker processes that are killed at ``timeout_s`` (which bounds all symbolic work of one call).
Nothing here raises on model output. Blocking calls are thread-safe; from asyncio, use
``await asyncio.to_thread(math_equal, ...)``.
"""

from __future__ import annotations

import math as _pymath
import re
import time
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from llmgym.rewards import _math_eval as _ev
from llmgym.rewards import _math_sympy as _sym
from llmgym.rewards import _math_values as _vals
from llmgym.rewards._math_extract import extract, find_boxes
from llmgym.rewards._math_parse import Node, ParseError, normalize, parse, short_input_cache

if TYPE_CHECKING:
    from llmgym.rewards.base import RewardResult

__all__ = ["extract_answer", "math_equal", "math_reward", "math_verifier", "shutdown_workers"]

_RAISE_INTERNAL_ERRORS = False
"""Tests set this to see exceptions that the verifier would otherwise turn into "not equal"."""

_FORMAT_SCORE = {"boxed": 1.0, "marker": 1.0, "bare": 1.0, "fallback": 0.5}


def extract_answer(response: str) -> str | None:
    """The final answer of a response: the last ``\\boxed{}``/``\\fbox{}`` (balanced braces), else
    the text after the last "final answer"/"the answer is"/"answer:"/"####", else the whole
    response if it is a bare answer, else the last ``$...$`` math or the last number of the last
    line. None when there is none, or when the response hedges between different answers.

    >>> extract_answer(r"First $x=2$, so the area is \\boxed{\\frac{\\pi}{4}}.")
    '\\\\frac{\\\\pi}{4}'
    >>> extract_answer("Final Answer: The final answer is $12$. I hope it is correct.")
    '12'
    >>> extract_answer(r"It is \\boxed{3} or \\boxed{4}.") is None
    True
    """
    if not isinstance(response, str):
        return None
    try:
        answer, _ = extract(response)
    except Exception:  # never raise on model output
        return None
    return answer.strip() if answer is not None else None


def math_equal(
    response_or_answer: str,
    gold: str,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    timeout_s: float = 2.0,
) -> bool:
    """Whether the final answer of ``response_or_answer`` (a full response or a bare answer)
    equals ``gold``. Strict unless ``rel_tol``/``abs_tol`` are given; ``timeout_s`` bounds the
    symbolic work (sympy in a worker process) of this call. Few answers need sympy; the first
    one in a process also waits, once, for a worker to start (about two seconds).

    >>> math_equal("1{,}000", "1000"), math_equal(r"1.5\\times10^{3}", "1500")
    (True, True)
    >>> math_equal("0.333", r"\\frac{1}{3}"), math_equal("0.333", "1/3", abs_tol=1e-3)
    (False, True)
    >>> math_equal("x > 2", r"(2, \\infty)"), math_equal("(B)", "B")
    (True, True)
    """
    correct, _, _ = _judge(response_or_answer, gold, rel_tol, abs_tol, timeout_s)
    return correct


def math_reward(
    response: str,
    gold: Any,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    timeout_s: float = 2.0,
    format_weight: float = 0.0,
) -> RewardResult:
    """Score a response: ``correctness`` is 1 or 0; ``format`` is 1 for a boxed or clearly
    marked answer, 0.5 for one found by the fallbacks, 0 for none or a hedge. The score is
    ``correctness * (1 - format_weight + format_weight * format)``: format never pays for a
    wrong answer. ``gold`` may be a list of acceptable answers.

    >>> r = math_reward(r"The total is $\\boxed{42}$ dollars.", "42")
    >>> r.score, r.components, r.success
    (1.0, {'correctness': 1.0, 'format': 1.0}, True)
    >>> math_reward("I think 1 or 2", "1").feedback
    'The response hedges between several different answers; give one final answer.'
    """
    from llmgym.rewards.base import RewardResult

    if not 0.0 <= format_weight <= 1.0:
        raise ValueError(f"format_weight must be in [0, 1], actual: {format_weight!r}")
    correct, how, answer = _judge(response, gold, rel_tol, abs_tol, timeout_s)
    fmt = _FORMAT_SCORE.get(how, 0.0)
    if how == "hedge":
        feedback = "The response hedges between several different answers; give one final answer."
    elif how == "truncated":
        feedback = "The response ends inside its final \\boxed{}; finish the answer."
    elif answer is None:
        feedback = "No final answer found; put the final answer in \\boxed{}."
    elif correct:
        feedback = "Correct."
    else:
        shown = answer if len(answer) <= 200 else answer[:200] + "..."
        feedback = f"The final answer {shown} is not correct."
    score = (1.0 - format_weight + format_weight * fmt) if correct else 0.0
    return RewardResult(
        score=score,
        components={"correctness": 1.0 if correct else 0.0, "format": fmt},
        feedback=feedback,
        success=correct,
    )


def math_verifier(response: str, gold: Any, **options: Any) -> RewardResult:
    """The math verifier with the generic ``(response, gold, **options)`` signature; options are
    :func:`math_reward`'s (``rel_tol``, ``abs_tol``, ``timeout_s``, ``format_weight``).

    >>> math_verifier(r"\\boxed{\\sqrt{8}}", r"2\\sqrt{2}").success
    True
    """
    return math_reward(response, gold, **options)


def shutdown_workers() -> None:
    """Stop the sympy worker processes now (they restart when needed; exit also stops them)."""
    _sym.shutdown()


# ---------------------------------------------------------------------------------------------
# Internals
# ---------------------------------------------------------------------------------------------


def _judge(
    response: Any, gold: Any, rel_tol: float, abs_tol: float, timeout_s: float
) -> tuple[bool, str, str | None]:
    """(correct, how the answer was found, the answer)."""
    if not isinstance(response, str):
        return False, "none", None
    try:
        answer, how = extract(response)
    except Exception:
        if _RAISE_INTERNAL_ERRORS:
            raise
        return False, "none", None
    if answer is None:
        return False, how, None
    opts = _ev.Options(
        rel_tol=float(rel_tol),
        abs_tol=float(abs_tol),
        timeout_s=float(timeout_s),
        deadline=time.monotonic() + float(timeout_s),
    )
    for g in _golds(gold):
        try:
            if _answers_equal(answer, g, opts):
                return True, how, answer
        except Exception:  # a bug or a hostile input: no credit, never a crash
            if _RAISE_INTERNAL_ERRORS:
                raise
            continue
    return False, how, answer


def _golds(gold: Any) -> list[str]:
    if isinstance(gold, (list, tuple)):
        return [g for item in gold for g in _golds(item)]
    if isinstance(gold, bool):
        return [str(gold)]
    if isinstance(gold, Fraction):
        return [f"{gold.numerator}/{gold.denominator}"]
    if isinstance(gold, float):
        return [repr(gold)] if _pymath.isfinite(gold) else []
    if isinstance(gold, (int, Decimal)):
        return [str(gold)]
    text = str(gold)
    if "\\boxed" in text or "\\fbox" in text:
        # a full solution as gold (MATH): its final answer, boxes joined by "and" included
        answer, _ = extract(text)
        if answer is not None:
            return [answer]
        boxes = find_boxes(text)
        if boxes:
            return [boxes[-1][2]]
    if "####" in text:
        return [text.rsplit("####", 1)[1].strip()]
    return [text]


_CHOICE_WRAPPER_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|mbox)\s*\{([^{}]*)\}")
_GOLD_CHOICE_RE = re.compile(r"\(?\s*([A-J])\s*\)?[.:]?")
_ANSWER_CHOICE_RE = re.compile(r"\(\s*([A-Ja-j])\s*\)|([A-J])(?=[.:)]|\s|$)")
_ANOTHER_CHOICE_RE = re.compile(r"\)?\s*(?:,|;|/|&|\band\b|\bor\b)\s*\(?[A-Ja-j]\)?(?![A-Za-z])")
_CHOICE_PREFIX_RE = re.compile(r"^(?:option|choice|answer)\s*:?\s*", re.I)


def _choice(s: str, *, gold: bool) -> str | None:
    t = _CHOICE_WRAPPER_RE.sub(r"\1", s).strip()
    t = _CHOICE_PREFIX_RE.sub("", t).strip()
    if gold:
        m = _GOLD_CHOICE_RE.fullmatch(t)
        return m.group(1) if m else None
    m = _ANSWER_CHOICE_RE.match(t)
    if not m or _ANOTHER_CHOICE_RE.match(t, m.end()):
        return None  # no letter, or several: "(A), (C)"
    return (m.group(1) or m.group(2)).upper()


_TEXT_KEY_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|mbox|operatorname)\s*|[{}\s]")


def _text_key(s: str) -> str:
    return _TEXT_KEY_RE.sub("", s).lower().rstrip(".")


@short_input_cache()
def _value(normalized: str) -> tuple[Any, ...]:
    """The comparable value of a normalised answer; ``("?",)`` when it does not parse."""
    try:
        node: Node = parse(normalized)
        return _vals.to_value(node)
    except (ParseError, RecursionError, _ev.NotScalar, ValueError, ArithmeticError):
        return ("?",)
    except (_ev.HasSymbols, _ev.NotExact, _ev.TooBig, _ev.Undefined):
        return ("?",)


_MAX_NORMALIZED_CHARS = 50_000


def _answers_equal(answer: str, gold: str, opts: _ev.Options) -> bool:
    if len(answer) > _MAX_NORMALIZED_CHARS or len(gold) > _MAX_NORMALIZED_CHARS:
        return answer.strip() == gold.strip()  # far beyond anything the parser reads
    na, ng = normalize(answer), normalize(gold)
    if na == ng and na:
        return True
    letter = _choice(ng, gold=True)
    if letter is not None:
        return _choice(na, gold=False) == letter
    va, vg = _value(na), _value(ng)
    if va[0] == "?" or vg[0] == "?":
        return bool(na) and _text_key(na) == _text_key(ng)
    based = _based_digits_match(va, vg)
    if based is not None:
        return based
    if va[0] == "W" or vg[0] == "W":
        # an answer in words ("odd", "\text{Yes}"): compared as case-insensitive text
        return _text_key(na) == _text_key(ng)
    return _vals.values_eq(va, vg, opts)


def _based_digits_match(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool | None:
    """``1010`` vs ``1010_2``: the digits the question asked for, with the base left implicit
    (so ``10``, the value in decimal, is wrong). None when neither side is a based number."""
    if a[0] != "S" or b[0] != "S":
        return None
    na, nb = a[1], b[1]
    if na[0] == "based" and nb[0] == "based":
        return bool(na[1].lstrip("0") == nb[1].lstrip("0") and na[2] == nb[2])
    for based, plain in ((na, nb), (nb, na)):
        if based[0] == "based":
            if plain[0] != "num" or plain[1].denominator != 1 or plain[1] < 0:
                return False
            return str(plain[1].numerator) == (based[1].lstrip("0") or "0")
    return None


# ---------------------------------------------------------------------------------------------
# The sympy fallbacks, run in worker processes
# ---------------------------------------------------------------------------------------------


def _remaining(opts: _ev.Options) -> float:
    return min(opts.timeout_s, opts.deadline - time.monotonic())


def _sympy_equal(a: Node, b: Node, opts: _ev.Options) -> bool | None:
    budget = _remaining(opts)
    if budget <= 0:
        return None
    reply = _sym.get_pool().call(("eq", a, b), budget)
    return reply if isinstance(reply, bool) else None


def _sympy_set_equal(a: Node, b: Node, opts: _ev.Options) -> bool | None:
    budget = _remaining(opts)
    if budget <= 0:
        return None
    reply = _sym.get_pool().call(("seteq", a, b), budget)
    return reply if isinstance(reply, bool) else None


_ev.set_symbolic_fallback(_sympy_equal)
_vals.set_set_solver(_sympy_set_equal)
