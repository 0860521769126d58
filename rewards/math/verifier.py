"""The math verifier's entry points: :func:`math_equal`, :func:`math_reward`,
:func:`math_verifier`, :func:`extract_answer`; the semantics they implement are documented in
:mod:`llmgym.rewards.math`.

It finds the answer (:mod:`~llmgym.rewards.math.extract`), reads answer and gold into values
(:mod:`~llmgym.rewards.math.values`), compares them, and checks the final form
(:mod:`~llmgym.rewards.math.form`); sympy questions go to the worker processes of
:mod:`~llmgym.rewards.math.sympy_pool`, wired in at the end of this module.
"""

from __future__ import annotations

import math as _pymath
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from llmgym.rewards.math import sympy_pool
from llmgym.rewards.math.cache import short_input_cache
from llmgym.rewards.math.choices import choice_in_text, choice_letter
from llmgym.rewards.math.evaluate import Options, set_symbolic_fallback
from llmgym.rewards.math.extract import extract, extract_gold
from llmgym.rewards.math.form import FORMS, in_form, infer
from llmgym.rewards.math.limits import (
    HasSymbols,
    NotExact,
    NotScalar,
    TooBig,
    Undefined,
    time_limit,
)
from llmgym.rewards.math.nodes import MAX_ANSWER_CHARS, Node, ParseError
from llmgym.rewards.math.normalize import normalize
from llmgym.rewards.math.parser import parse
from llmgym.rewards.math.values import set_set_solver, to_value, values_eq

if TYPE_CHECKING:
    from llmgym.rewards.base import RewardResult

__all__ = [
    "FORMS",
    "extract_answer",
    "math_equal",
    "math_reward",
    "math_verifier",
    "shutdown_workers",
]

_RAISE_INTERNAL_ERRORS = False
"""Tests set this to see exceptions that the verifier would otherwise turn into "not equal"."""

_FORMAT_SCORE = {"boxed": 1.0, "marker": 1.0, "bare": 1.0, "fallback": 0.5}


def extract_answer(response: str) -> str | None:
    """The final answer of a response: the last ``\\boxed{}``/``\\fbox{}`` (balanced braces; a
    "Final Answer" stated after it wins), else the text after the last "final answer"/"the answer
    is"/"answer:"/"####", else the whole response if it is a bare answer, else what the last
    sentence states (its math, the value after its verb, its only number) or the last ``$...$``
    math or number of the last line. None when there is none, or when the response hedges
    between different answers.

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
    form: str | None = None,
    decimal_comma: bool = False,
    lists_as_tuples: bool = False,
    relations_as_sets: bool = True,
) -> bool:
    """Whether the final answer of ``response_or_answer`` (a full response or a bare answer)
    equals ``gold``. Strict unless ``rel_tol``/``abs_tol`` are given; ``timeout_s`` bounds the
    symbolic work (sympy in a worker process) of this call. Few answers need sympy; the first
    one in a process also waits, once, for a worker to start (about two seconds). ``form``
    (a name in :data:`FORMS`; None: equality alone) is the final form the answer must have;
    an unknown name is a ``ValueError``.

    Conventions, for data written another way (the defaults suit most data):

    - ``decimal_comma``: a comma between digits is a decimal separator (``2,5`` is 2.5,
      ``1.000,5`` is 1000.5), in the response and in the gold. Off: ``2,5`` is a list.
    - ``lists_as_tuples``: a bare list or a set equals a tuple when its elements, in the order
      written, are the tuple's (``{1,3}`` and ``1, 3`` equal ``(1, 3)``). Off: a list is a
      list of answers in any order, so it does not stand for an ordered pair.
    - ``relations_as_sets``: an inequality equals the set it describes whichever side is the
      gold (``-2 \\le x \\le 7`` equals ``x \\in [-2, 7]``). False: a gold written as a set
      (an interval, a union, ``x \\in ...``) asks for a set, not an inequality.

    >>> math_equal("1{,}000", "1000"), math_equal(r"1.5\\times10^{3}", "1500")
    (True, True)
    >>> math_equal("0.333", r"\\frac{1}{3}"), math_equal("0.333", "1/3", abs_tol=1e-3)
    (False, True)
    >>> math_equal("x > 2", r"(2, \\infty)"), math_equal("(B)", "B")
    (True, True)

    An unevaluated expression is equal, but not in a final form:

    >>> math_equal(r"\\boxed{3929 + 3359}", "7288"), math_equal(r"\\boxed{3929 + 3359}", "7288", form="number")
    (True, False)
    >>> math_equal("1/2", "0.5", form="number"), math_equal("2/4", "1/2", form="number")
    (True, False)
    >>> math_equal("0.5", "1/2", form="fraction"), math_equal(r"\\frac{1}{2}", "0.5", form="fraction")
    (False, True)
    >>> math_equal(r"\\sqrt{8}", r"2\\sqrt{2}", form="radical"), math_equal(r"2\\sqrt{2}", r"\\sqrt{8}", form="radical")
    (False, True)
    >>> math_equal(r"2x \\le 6", r"(-\\infty, 3]", form="number"), math_equal(r"x \\le 3", r"(-\\infty, 3]", form="number")
    (False, True)
    >>> math_equal(r"3 \\times 4", "12", form="auto"), math_equal("(x+1)^2", "x^2+2x+1", form="polynomial")
    (False, False)
    >>> math_equal("2,74", "2.74"), math_equal("2,74", "2.74", decimal_comma=True)
    (False, True)
    >>> math_equal("1, 3", "(1, 3)"), math_equal("1, 3", "(1, 3)", lists_as_tuples=True)
    (False, True)
    """
    conv = _Conventions(decimal_comma, lists_as_tuples, relations_as_sets)
    correct, _, _, _ = _judge(response_or_answer, gold, rel_tol, abs_tol, timeout_s, form, conv)
    return correct


def math_reward(
    response: str,
    gold: Any,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    timeout_s: float = 2.0,
    format_weight: float = 0.0,
    form: str | None = None,
    decimal_comma: bool = False,
    lists_as_tuples: bool = False,
    relations_as_sets: bool = True,
) -> RewardResult:
    """Score a response: ``correctness`` is 1 or 0; ``format`` is 1 for a boxed or clearly
    marked answer, 0.5 for one found by the fallbacks, 0 for none or a hedge. The score is
    ``correctness * (1 - format_weight + format_weight * format)``: format never pays for a
    wrong answer. ``gold`` may be a list of acceptable answers. ``form`` is
    :func:`math_equal`'s: an equal answer not in that form scores 0, and the feedback says so;
    so are the conventions ``decimal_comma``, ``lists_as_tuples`` and ``relations_as_sets``.

    >>> r = math_reward(r"The total is $\\boxed{42}$ dollars.", "42")
    >>> r.score, r.components, r.success
    (1.0, {'correctness': 1.0, 'format': 1.0}, True)
    >>> math_reward("I think 1 or 2", "1").feedback
    'The response hedges between several different answers; give one final answer.'
    >>> math_reward(r"\\boxed{\\frac{6}{8}}", "0.75", form="fraction").feedback
    'The answer is equal but not in final form; write it as an integer or a fraction p/q in lowest terms.'
    """
    from llmgym.rewards.base import RewardResult

    if not 0.0 <= format_weight <= 1.0:
        raise ValueError(f"format_weight must be in [0, 1], actual: {format_weight!r}")
    conv = _Conventions(decimal_comma, lists_as_tuples, relations_as_sets)
    correct, how, answer, unfinal = _judge(response, gold, rel_tol, abs_tol, timeout_s, form, conv)
    fmt = _FORMAT_SCORE.get(how, 0.0)
    if unfinal is not None:
        label = "factored" if unfinal == "factored" else "in final form"
        feedback = f"The answer is equal but not {label}; write it as {FORMS[unfinal]}."
    elif how == "hedge":
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
    :func:`math_reward`'s (``rel_tol``, ``abs_tol``, ``timeout_s``, ``format_weight``, ``form``,
    ``decimal_comma``, ``lists_as_tuples``, ``relations_as_sets``).

    >>> math_verifier(r"\\boxed{\\sqrt{8}}", r"2\\sqrt{2}").success
    True
    >>> math_verifier(r"\\boxed{\\sqrt{8}}", r"2\\sqrt{2}", form="radical").success
    False
    """
    return math_reward(response, gold, **options)


def shutdown_workers() -> None:
    """Stop the sympy worker processes now (they restart when needed; exit also stops them)."""
    sympy_pool.shutdown()


# ---------------------------------------------------------------------------------------------
# Internals
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Conventions:
    decimal_comma: bool = False
    lists_as_tuples: bool = False
    relations_as_sets: bool = True


def _judge(
    response: Any,
    gold: Any,
    rel_tol: float,
    abs_tol: float,
    timeout_s: float,
    form: str | None,
    conv: _Conventions = _Conventions(),
) -> tuple[bool, str, str | None, str | None]:
    """(correct, how the answer was found, the answer, the form an equal answer is not in)."""
    if form == "any":
        form = None
    if form is not None and form not in FORMS:
        raise ValueError(f"Expects form in {sorted(FORMS)} or None, actual: {form!r}")
    if not isinstance(response, str):
        return False, "none", None, None
    if conv.decimal_comma:
        response = _decimal_commas(response)
    if conv.decimal_comma and isinstance(gold, str):
        gold = _decimal_commas(gold)
    golds = _golds(gold)
    try:
        answer, how = extract(response)
        lettered = how != "hedge" and any(choice_letter(normalize(g), gold=True) for g in golds)
        if lettered and (answer is None or choice_letter(normalize(answer), gold=False) is None):
            # a choice-letter gold: "A. Because B is not valid", "Because B is valid"
            letter = choice_in_text(response)
            if letter is not None:
                answer, how = letter, (how if answer is not None else "fallback")
    except Exception:
        if _RAISE_INTERNAL_ERRORS:
            raise
        return False, "none", None, None
    if answer is None:
        return False, how, None, None
    opts = Options(
        rel_tol=float(rel_tol),
        abs_tol=float(abs_tol),
        timeout_s=float(timeout_s),
        deadline=time.monotonic() + float(timeout_s),
        lists_as_tuples=bool(conv.lists_as_tuples),
    )
    unfinal = None
    # in-process evaluation is bounded too: past the deadline what is left compares by structure
    with time_limit(time.monotonic() + max(float(timeout_s), _MIN_EVAL_S)):
        for g in golds:
            try:
                verdict = _answers_equal(answer, g, opts, form)
                if verdict is True and not conv.relations_as_sets and _relation_for_set(answer, g):
                    verdict = False
            except Exception:  # a bug or a hostile input: no credit, never a crash
                if _RAISE_INTERNAL_ERRORS:
                    raise
                continue
            if verdict is True:
                return True, how, answer, None
            if isinstance(verdict, str):
                unfinal = unfinal or verdict
    return False, how, answer, unfinal


_MIN_EVAL_S = 0.5
"""In-process evaluation (exact and numeric arithmetic) of one call gets at least this long,
however small ``timeout_s`` is; sympy gets ``timeout_s``."""


_EURO_NUMBER_RE = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+),(\d+)(?![\d,])")
_DECIMAL_COMMA_RE = re.compile(r"(?<![\d.,])(\d+)(?:,|\{,\})(\d+)(?![\d,])")


def _decimal_commas(text: str) -> str:
    """Decimal commas as points: ``2,5`` -> ``2.5``, ``2{,}5`` -> ``2.5``, ``1.000,5`` -> ``1000.5``."""
    if "," not in text:
        return text
    text = _EURO_NUMBER_RE.sub(lambda m: m.group(1).replace(".", "") + "." + m.group(2), text)
    return _DECIMAL_COMMA_RE.sub(r"\1.\2", text)


def _relation_for_set(answer: str, gold: str) -> bool:
    """An inequality answer to a gold written as a set (``relations_as_sets=False``)."""
    try:
        a, g = parse(normalize(answer)), parse(normalize(gold))
    except (ParseError, RecursionError, ValueError):
        return False
    inequality = {"<", ">", "<=", ">=", "!="}
    if g[0] == "rel" and g[2] == ("in",):
        g = g[1][1]
    set_gold = g[0] in ("setop", "set") or g[0] == "tuple" and len(g[3]) == 2
    set_gold = set_gold or g[0] == "special" and g[1] in ("reals", "empty")
    relations = a[1] if a[0] in ("or", "list") else (a,)
    answer_relation = all(r[0] == "rel" and set(r[2]) <= inequality for r in relations)
    return bool(set_gold and answer_relation)


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
    try:
        # a full solution as gold (MATH, GSM8K's "#### 9"), a gold with several boxes, prose
        answer = extract_gold(text)
    except Exception:  # a gold the reader cannot take apart is compared as written
        answer = None
    return [answer if answer is not None else text]


_TEXT_KEY_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|mbox|operatorname)\s*|[{}\s]")


def _text_key(s: str) -> str:
    return _TEXT_KEY_RE.sub("", s).lower().rstrip(".")


@short_input_cache()
def _value(normalized: str) -> tuple[Any, ...]:
    """The comparable value of a normalised answer; ``("?",)`` when it does not parse."""
    try:
        node: Node = parse(normalized)
        return to_value(node)
    except (ParseError, RecursionError, NotScalar, ValueError, ArithmeticError):
        return ("?",)
    except (HasSymbols, NotExact, TooBig, Undefined):
        return ("?",)


_MAX_NORMALIZED_CHARS = 2 * MAX_ANSWER_CHARS
"""Longer answers are compared as written (normalising them could not bring them under the
parser's bound)."""


def _answers_equal(answer: str, gold: str, opts: Options, form: str | None) -> bool | str:
    """True when equal (and in ``form``); False when not equal; the name of the form an equal
    answer is not written in."""
    if len(answer) > _MAX_NORMALIZED_CHARS or len(gold) > _MAX_NORMALIZED_CHARS:
        return answer.strip() == gold.strip()  # far beyond anything the parser reads
    na, ng = normalize(answer), normalize(gold)
    if na == ng and na:
        return True  # the gold's own text is in the gold's form
    letter = choice_letter(ng, gold=True)
    if letter is not None:
        return choice_letter(na, gold=False) == letter
    va, vg = _value(na), _value(ng)
    if va[0] == "?" or vg[0] == "?":
        return bool(na) and _text_key(na) == _text_key(ng)
    based = _based_digits_match(va, vg)
    if based is not None:
        return based
    if va[0] == "W" or vg[0] == "W":
        # an answer in words ("odd", "\text{Yes}"): compared as case-insensitive text
        return _text_key(na) == _text_key(ng)
    if not values_eq(va, vg, opts):
        return False
    if form is None:
        return True
    if form == "auto":
        inferred = infer(parse(ng), ng)
        if inferred is None:
            return True  # a gold in no final form itself sets none
        form = inferred
    shape, gold_shape = _unwrap(va)[0], _unwrap(vg)[0]
    if gold_shape == "S" and shape in ("L", "F") or gold_shape == "F" and shape != "F":
        return form  # "5, 5" is a list, not 5; a gold in braces wants a set, not "4, 6"
    return True if in_form(parse(na), na, form) else form


def _unwrap(v: tuple[Any, ...]) -> tuple[Any, ...]:
    while v[0] == "A":
        v = v[2]
    return v


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


def _remaining(opts: Options) -> float:
    return min(opts.timeout_s, opts.deadline - time.monotonic())


def _sympy_equal(a: Node, b: Node, opts: Options) -> bool | None:
    budget = _remaining(opts)
    if budget <= 0:
        return None
    reply = sympy_pool.get_pool().call(("eq", a, b), budget)
    return reply if isinstance(reply, bool) else None


def _sympy_set_equal(a: Node, b: Node, opts: Options) -> bool | None:
    budget = _remaining(opts)
    if budget <= 0:
        return None
    reply = sympy_pool.get_pool().call(("seteq", a, b), budget)
    return reply if isinstance(reply, bool) else None


set_symbolic_fallback(_sympy_equal)
set_set_solver(_sympy_set_equal)
