"""Property tests for the math verifier: reflexivity across notations, exactness, symmetry,
and robustness on arbitrary text."""

from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmgym.rewards.math import extract_answer, math_equal, math_reward


@pytest.fixture(scope="module", autouse=True)
def warm_worker() -> None:
    """Start a sympy worker first, so time bounds below measure checks, not sympy's import."""
    from llmgym.rewards.math import sympy_pool

    assert sympy_pool.get_pool().call(("ping",), timeout_s=60) == "pong"


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


# ---------------------------------------------------------------------------------------------
# Numbers in many notations
# ---------------------------------------------------------------------------------------------


def _grouped(n: int, sep: str) -> str:
    s = f"{abs(n):,}".replace(",", sep)
    return ("-" if n < 0 else "") + s


def integer_forms(n: int) -> list[str]:
    """Ways to write ``n`` as a gold answer (all of them are also valid responses)."""
    forms = [str(n), _grouped(n, ","), _grouped(n, "{,}"), _grouped(n, r"\,"), f"{n}.0"]
    forms += [rf"\boxed{{{n}}}", f"${n}$"]
    if n < 0:
        forms.append("\u2212" + str(-n))  # Unicode minus
    return forms


def response_forms(answer: str) -> list[str]:
    """Ways a model response can carry ``answer``."""
    return [
        answer,
        f"The answer is {answer}.",
        f"We compute it step by step.\n\nFinal answer: ${answer}$",
        rf"So the result is $\boxed{{{answer}}}$.",
        f"**Answer:** {answer}",
    ]


def fraction_forms(q: Fraction) -> list[str]:
    p, d = q.numerator, q.denominator
    sign = "-" if p < 0 else ""
    forms = [f"{p}/{d}", rf"\frac{{{p}}}{{{d}}}", rf"{sign}\dfrac{{{abs(p)}}}{{{d}}}"]
    forms += [rf"\tfrac{{{p}}}{{{d}}}", rf"\frac{{{2 * p}}}{{{2 * d}}}", rf"\boxed{{{p}/{d}}}"]
    if all(c in (2, 5) for c in _prime_factors(d)):  # a terminating decimal
        forms.append(str(Decimal(p) / Decimal(d)))
    return forms


def _prime_factors(n: int) -> list[int]:
    out, k = [], 2
    while k * k <= n:
        while n % k == 0:
            out.append(k)
            n //= k
        k += 1
    return out + ([n] if n > 1 else [])


@SETTINGS
@given(st.integers(min_value=-(10**12), max_value=10**12), st.data())
def test_integers_equal_across_notations(n: int, data: st.DataObject) -> None:
    forms = integer_forms(n)
    gold = data.draw(st.sampled_from(forms))
    response = data.draw(st.sampled_from(response_forms(data.draw(st.sampled_from(forms)))))
    assert math_equal(response, gold), (response, gold)


@SETTINGS
@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_distinct_integers_differ(a: int, b: int) -> None:
    assume(a != b)
    assert not math_equal(str(a), str(b))
    assert not math_equal(_grouped(a, ","), str(b))


@SETTINGS
@given(st.fractions(max_denominator=10**4).filter(lambda q: abs(q) < 10**6), st.data())
def test_fractions_equal_across_notations(q: Fraction, data: st.DataObject) -> None:
    forms = fraction_forms(q)
    gold = data.draw(st.sampled_from(forms))
    response = data.draw(st.sampled_from(response_forms(data.draw(st.sampled_from(forms)))))
    assert math_equal(response, gold), (response, gold)


@SETTINGS
@given(st.fractions(max_denominator=1000).filter(lambda q: abs(q) < 10**6), st.integers(1, 6))
def test_rounded_decimals_are_not_exact(q: Fraction, places: int) -> None:
    rounded = round(Decimal(q.numerator) / Decimal(q.denominator), places)
    assume(Fraction(rounded) != q)
    assert not math_equal(str(rounded), rf"\frac{{{q.numerator}}}{{{q.denominator}}}")


@SETTINGS
@given(
    st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=4, allow_nan=False),
    st.integers(-5, 5),
)
def test_scientific_notation(d: Decimal, e: int) -> None:
    value = d * Decimal(10) ** e
    assert math_equal(f"{d}e{e}", str(value))
    assert math_equal(rf"{d} \times 10^{{{e}}}", str(value))


# ---------------------------------------------------------------------------------------------
# Expressions: random trees rendered as LaTeX and as plain text
# ---------------------------------------------------------------------------------------------

Leaf = st.one_of(
    st.sampled_from(["x", "y", "a"]),
    st.integers(0, 12).map(str),
    st.sampled_from([r"\pi", r"\sqrt{2}", r"\frac{1}{2}"]),
)


def _node(children: st.SearchStrategy[tuple]) -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*"]), children, children),
        st.tuples(st.just("/"), children, st.integers(1, 9).map(str)),
        st.tuples(st.just("^"), children, st.integers(0, 3).map(str)),
    )


Expr = st.recursive(Leaf, _node, max_leaves=6)


def latex(e: object) -> str:
    if isinstance(e, str):
        return e
    op, a, b = e  # type: ignore[misc]
    if op == "/":
        return rf"\frac{{{latex(a)}}}{{{latex(b)}}}"
    if op == "^":
        return rf"\left({latex(a)}\right)^{{{b}}}"
    if op == "*":
        return rf"\left({latex(a)}\right) \cdot \left({latex(b)}\right)"
    return rf"\left({latex(a)}\right) {op} \left({latex(b)}\right)"


def plain(e: object) -> str:
    if isinstance(e, str):
        return {r"\pi": "pi", r"\sqrt{2}": "sqrt(2)", r"\frac{1}{2}": "(1/2)"}.get(e, e)
    op, a, b = e  # type: ignore[misc]
    return f"({plain(a)}){op}({plain(b)})"


@SETTINGS
@given(Expr)
def test_expression_equals_itself_in_both_notations(e: object) -> None:
    assert math_equal(latex(e), latex(e))
    assert math_equal(latex(e), plain(e)), (latex(e), plain(e))
    assert math_equal(plain(e), latex(e)), (plain(e), latex(e))


@SETTINGS
@given(Expr)
def test_expression_differs_from_itself_plus_one(e: object) -> None:
    assert not math_equal(latex(e), rf"\left({latex(e)}\right) + 1")


# ---------------------------------------------------------------------------------------------
# Symmetry
# ---------------------------------------------------------------------------------------------

POOL = [
    "1/2",
    "0.5",
    r"\frac{2}{4}",
    "0.50",
    "2",
    "-2",
    r"\sqrt{4}",
    r"\sqrt{8}",
    r"2\sqrt{2}",
    "(1, 2)",
    "(2, 1)",
    "[1, 2]",
    "[1, 2)",
    r"\{1, 2\}",
    r"\{2, 1\}",
    "1, 2",
    "2, 1",
    "x = 2",
    "y = 2",
    "x = 1, y = 2",
    "y = 2, x = 1",
    r"x > 1",
    r"(1, \infty)",
    r"[1, \infty)",
    r"x \le 2",
    r"(-\infty, 2]",
    "x^2 - 1",
    "(x - 1)(x + 1)",
    "x^2 + 1",
    r"\pi",
    "3.14",
    r"\emptyset",
    "no solution",
    r"\infty",
    r"-\infty",
    "3 + 2i",
    "2i + 3",
    r"\text{(B)}",
    r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
    "[[1, 2], [3, 4]]",
    "50%",
    "50",
    "0.5%",
    "y = 2x + 1",
    "2x - y + 1 = 0",
    "1010_2",
    "1010",
    r"x = \pm 1",
    "-1, 1",
]


@SETTINGS
@given(st.sampled_from(POOL), st.sampled_from(POOL))
def test_symmetry_on_bare_answers(a: str, b: str) -> None:
    if r"\text{(B)}" in (a, b):  # a choice-letter gold switches to letter comparison
        return
    assert math_equal(a, b) == math_equal(b, a), (a, b)


@SETTINGS
@given(st.sampled_from(POOL))
def test_reflexive_on_bare_answers(a: str) -> None:
    assert math_equal(a, a)


# ---------------------------------------------------------------------------------------------
# Robustness on arbitrary text
# ---------------------------------------------------------------------------------------------

PIECES = list("0123456789+-*/^_=<>()[]{}|,.!\\ $xyeiπ√−×&%")
PIECES += [r"\frac", r"\sqrt", r"\boxed{", r"\left(", r"\right)", r"\pi", r"\infty", r"\text{"]
PIECES += [" or ", r"\begin{pmatrix}", r"\end{pmatrix}", r"\\", r"\{", r"\}", r"\cup", r"\le"]
LATEXISH = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=200), LATEXISH), st.one_of(st.text(max_size=40), LATEXISH))
def test_never_raises_and_returns_promptly(response: str, gold: str) -> None:
    start = time.monotonic()
    assert isinstance(math_equal(response, gold, timeout_s=0.5), bool)
    answer = extract_answer(response)
    assert answer is None or isinstance(answer, str)
    r = math_reward(response, gold, timeout_s=0.5)
    assert 0.0 <= r.score <= 1.0
    assert time.monotonic() - start < 10.0
