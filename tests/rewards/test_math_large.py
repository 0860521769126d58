"""Large answers: a polynomial of degree 500 written out (58,000 characters) is compared
mathematically, exactly and in bounded time; hostile large answers still score 0 promptly.

The bounds on time are loose on purpose (a slow, loaded two-core CI machine): they catch a hang
or quadratic blow-up, not a slow millisecond.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmgym.rewards.math import math_equal, math_reward
from llmgym.rewards.math.cache import clear_caches
from llmgym.rewards.math.modular import modular_eq
from llmgym.rewards.math.nodes import MAX_ANSWER_CHARS
from llmgym.rewards.math.parser import parse

SLOW_S = 10.0  # generous: the comparisons below take milliseconds to a fraction of a second


def poly_latex(coeffs: dict[int, int], *, plain: bool = False) -> str:
    """``sum(c x^k)`` from the highest power down, written as LaTeX (``500 x^{499}``) or plain
    text (``500*x^499``)."""
    parts: list[str] = []
    for k in sorted(coeffs, reverse=True):
        c = coeffs[k]
        if c == 0:
            continue
        sign = "-" if c < 0 else ("+" if parts else "")
        mag = abs(c)
        if k == 0:
            body = str(mag)
        else:
            power = "x" if k == 1 else (f"x^{k}" if plain else f"x^{{{k}}}")
            body = power if mag == 1 else (f"{mag}*{power}" if plain else f"{mag} {power}")
        parts.append(f"{sign} {body}" if parts else f"{sign}{body}")
    return " ".join(parts) if parts else "0"


def binomial_coeffs(n: int, shift: int = 1) -> dict[int, int]:
    """The coefficients of ``(x + shift)^n``."""
    return {k: math.comb(n, k) * shift ** (n - k) for k in range(n + 1)}


EXPANSION_500 = poly_latex(binomial_coeffs(500))


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - start


# ---------------------------------------------------------------------------------------------
# Hostile first: what must not pass, and what must
# ---------------------------------------------------------------------------------------------


def test_the_expansion_of_degree_500_is_long() -> None:
    assert 55_000 < len(EXPANSION_500) < MAX_ANSWER_CHARS


@pytest.mark.parametrize("wrap", ["boxed", "bare", "dollars", "assignment"])
def test_equal_expansion_of_degree_500_is_equal(wrap: str) -> None:
    response = {
        "boxed": rf"So the answer is \boxed{{{EXPANSION_500}}}.",
        "bare": EXPANSION_500,
        "dollars": f"${EXPANSION_500}$",
        "assignment": rf"\boxed{{y = {EXPANSION_500}}}",
    }[wrap]
    gold = "y = (x+1)^{500}" if wrap == "assignment" else "(x+1)^{500}"
    verdict, took = timed(math_equal, response, gold)
    assert verdict is True
    assert took < SLOW_S
    assert math_reward(response, gold).score == 1.0


def test_equal_the_other_way_round_and_between_two_expansions() -> None:
    assert math_equal(r"\boxed{(1+x)^{500}}", EXPANSION_500)
    assert math_equal(rf"\boxed{{{EXPANSION_500}}}", EXPANSION_500)
    plain = poly_latex(binomial_coeffs(500), plain=True)
    assert len(plain) > 50_000
    assert math_equal(rf"\boxed{{{plain}}}", r"\left(x+1\right)^{500}")
    assert math_equal(rf"\boxed{{{plain}}}", EXPANSION_500)


@pytest.mark.parametrize("k", [0, 1, 2, 137, 250, 251, 498, 499, 500])
@pytest.mark.parametrize("delta", [1, -1, 10**40])
def test_one_changed_coefficient_is_unequal(k: int, delta: int) -> None:
    coeffs = binomial_coeffs(500)
    coeffs[k] += delta
    changed = poly_latex(coeffs)
    assert len(changed) > 55_000
    verdict, took = timed(math_equal, rf"\boxed{{{changed}}}", "(x+1)^{500}")
    assert verdict is False
    assert took < SLOW_S
    assert math_equal(r"\boxed{(x+1)^{500}}", changed) is False


def test_a_dropped_or_an_extra_term_is_unequal() -> None:
    coeffs = binomial_coeffs(500)
    del coeffs[300]
    assert not math_equal(rf"\boxed{{{poly_latex(coeffs)}}}", "(x+1)^{500}")
    assert not math_equal(rf"\boxed{{{EXPANSION_500} + x^{{501}}}}", "(x+1)^{500}")
    # a difference that is a multiple of a large prime (2^127 - 1): no fixed modulus fools it
    mersenne = 2**127 - 1
    assert not math_equal(rf"\boxed{{{EXPANSION_500} + {mersenne} x^{{3}}}}", "(x+1)^{500}")
    assert not math_equal(rf"\boxed{{{EXPANSION_500} + {mersenne}}}", "(x+1)^{500}")


@pytest.mark.parametrize("gold", ["(x+2)^{500}", "(x+1)^{499}", "(x-1)^{500}", "(x+1)^{501}", "x"])
def test_a_large_answer_and_a_different_polynomial_are_unequal(gold: str) -> None:
    verdict, took = timed(math_equal, rf"\boxed{{{EXPANSION_500}}}", gold)
    assert verdict is False
    assert took < SLOW_S


def test_a_long_gold_is_not_cut_down_to_its_last_number() -> None:
    # the expansion ends in "+ 1": a gold that long was once read as prose and its last number
    # taken as the answer, so "1" scored
    for response in ("1", r"\boxed{1}", "The answer is 1.", r"\boxed{x^{500}}"):
        assert math_equal(response, EXPANSION_500) is False
    assert math_equal(r"\boxed{(x+1)^{500}}", EXPANSION_500) is True


@pytest.mark.parametrize(
    "template",
    [
        "The final answer is ${}$",
        "Final answer: ${}$.",
        "We get\n$${}$$",
        r"so \[{}\]",
        r"so \({}\)",
    ],
)
def test_a_long_answer_at_the_end_of_prose_is_read_whole(template: str) -> None:
    response = template.replace("{}", EXPANSION_500)
    assert math_equal(response, "(x+1)^{500}") is True
    assert math_equal(response, "1") is False  # not the last number of the expansion


def test_rational_and_gaussian_coefficients() -> None:
    sympy = pytest.importorskip("sympy")
    x = sympy.Symbol("x")
    rational = sympy.latex(sympy.expand((x / 2 + sympy.Rational(1, 3)) ** 120))
    gaussian = sympy.latex(sympy.expand((x + sympy.I) ** 150))
    assert len(rational) > 5000 and len(gaussian) > 5000
    assert math_equal(rf"\boxed{{{rational}}}", r"\left(\frac{x}{2}+\frac{1}{3}\right)^{120}")
    assert not math_equal(rf"\boxed{{{rational}}}", r"\left(\frac{x}{2}+\frac{1}{4}\right)^{120}")
    assert math_equal(rf"\boxed{{{gaussian}}}", "(x+i)^{150}")
    assert not math_equal(rf"\boxed{{{gaussian}}}", "(x-i)^{150}")
    # two variables
    both = sympy.latex(sympy.expand((x + 2 * sympy.Symbol("y") - 1) ** 40))
    assert len(both) > 5000
    assert math_equal(rf"\boxed{{{both}}}", "(x+2y-1)^{40}")
    assert not math_equal(rf"\boxed{{{both}}}", "(x+2y+1)^{40}")


def test_hedges_and_forms_still_apply_to_large_answers() -> None:
    other = poly_latex(binomial_coeffs(499))
    hedge = rf"\boxed{{{EXPANSION_500}}} or \boxed{{{other}}}"
    assert math_reward(hedge, "(x+1)^{500}").score == 0.0
    assert math_equal(rf"{EXPANSION_500} \text{{ or }} {other}", "(x+1)^{500}") is False
    # equal, but the factored form asked for is not what was written
    assert math_equal(rf"\boxed{{{EXPANSION_500}}}", "(x+1)^{500}", form="factored") is False
    assert math_equal(r"\boxed{(x+1)^{500}}", EXPANSION_500, form="polynomial") is False
    assert math_equal(rf"\boxed{{{EXPANSION_500}}}", EXPANSION_500, form="polynomial") is True


def test_beyond_the_bound_only_the_same_text_is_equal() -> None:
    huge = poly_latex(binomial_coeffs(1000))  # 227,000 characters
    assert len(huge) > MAX_ANSWER_CHARS
    verdict, took = timed(math_equal, rf"\boxed{{{huge}}}", "(x+1)^{1000}")
    assert verdict is False
    assert took < SLOW_S
    assert math_equal(rf"\boxed{{{huge}}}", huge) is True


# ---------------------------------------------------------------------------------------------
# Hostile large answers return promptly, False, without raising
# ---------------------------------------------------------------------------------------------

_rng = random.Random(20261205)
HOSTILE = {
    "garbage": "".join(_rng.choice("xyz+-*/^()0123456789 ") for _ in range(190_000)),
    "garbage_latex": "".join(
        _rng.choice([r"\frac", "{", "}", "x", "^", "2", r"\sqrt", "+", "(", ")", r"\cdot "])
        for _ in range(60_000)
    ),
    "long_powers": "+".join(["x^{6000}"] * 21_000),
    "long_powers_and_a_root": "+".join(["x^{6000}"] * 21_000) + r"+\sqrt{x}",
    "long_constants_and_a_root": "+".join(["2^{6000}"] * 21_000) + r"+\sqrt{2}",
    "many_roots": "+".join(rf"\sqrt{{x+{k}}}" for k in range(2, 14_000)),
    "nested_sum": "(" * 90 + "+".join(["x^{6000}"] * 20_000) + ")" * 90,
    "many_fractions": r"\frac12" * 27_000,
    "long_list": ",".join(f"(x+{k})^{{3}}" for k in range(16_000)),
    "megabyte": "+".join(["x^{6000}"] * 110_000),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_large_answers_return_false_promptly(name: str) -> None:
    answer = HOSTILE[name]
    for response in (rf"\boxed{{{answer}}}", answer):
        for gold in ("1", r"\sqrt{x} + x^{6000}"):
            verdict, took = timed(math_equal, response, gold, timeout_s=1.0)
            assert verdict is False, (name, gold)
            assert took < SLOW_S, (name, gold, took)
    assert math_reward(rf"\boxed{{{answer}}}", "1", timeout_s=1.0).score == 0.0


def test_a_hostile_gold_does_not_hang_either() -> None:
    verdict, took = timed(
        math_equal, r"\boxed{1}", HOSTILE["long_powers_and_a_root"], timeout_s=1.0
    )
    assert verdict is False
    assert took < SLOW_S


def test_comparison_time_grows_linearly_with_the_length() -> None:
    """``x^n + ... + x + 1`` against ``(x^{n+1} - 1)/(x - 1)``: four times the degree is four
    times the text and should cost about four times as long (a complexity guard, generous: up to
    four times that, so a loaded machine does not fail it). Exact rationals at random points cost
    the cube: 0.16 s at degree 500, 7 s at 2000 (a ratio of 44)."""

    def geometric(n: int) -> str:
        return " + ".join(f"x^{{{k}}}" for k in range(n, 1, -1)) + " + x + 1"

    def best_of_three(n: int) -> float:
        response, gold = rf"\boxed{{{geometric(n)}}}", rf"\frac{{x^{{{n + 1}}} - 1}}{{x - 1}}"
        best = math.inf
        for _ in range(3):
            clear_caches()
            start = time.perf_counter()
            assert math_equal(response, gold)
            best = min(best, time.perf_counter() - start)
        return best

    ratio_len = len(geometric(2000)) / len(geometric(500))
    ratio_time = best_of_three(2000) / best_of_three(500)
    assert ratio_time < 4 * ratio_len, (ratio_len, ratio_time)
    assert not math_equal(rf"\boxed{{{geometric(2000)} + x^{{7}}}}", r"\frac{x^{2001} - 1}{x - 1}")


# ---------------------------------------------------------------------------------------------
# Properties: expanded and factored forms agree; a perturbed coefficient disagrees
# ---------------------------------------------------------------------------------------------


def _expand(roots: list[int], lead: int) -> dict[int, int]:
    coeffs = [lead]  # lead * prod(x - r), lowest power last while building
    for r in roots:
        nxt = [0] * (len(coeffs) + 1)
        for i, c in enumerate(coeffs):
            nxt[i] += c
            nxt[i + 1] -= c * r
        coeffs = nxt
    degree = len(coeffs) - 1
    return {degree - i: c for i, c in enumerate(coeffs)}


def _factored(roots: list[int], lead: int) -> str:
    factors = "".join(f"(x {'-' if r >= 0 else '+'} {abs(r)})" for r in roots)
    return f"{lead}{factors}" if lead != 1 else factors


polynomials = st.tuples(
    st.lists(st.integers(-9, 9), min_size=1, max_size=8),
    st.integers(-5, 5).filter(lambda c: c != 0),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(polynomials, st.data())
def test_expanded_and_factored_forms_agree(
    poly: tuple[list[int], int], data: st.DataObject
) -> None:
    roots, lead = poly
    coeffs = _expand(roots, lead)
    expanded, factored = poly_latex(coeffs), _factored(roots, lead)
    assert math_equal(rf"\boxed{{{expanded}}}", factored)
    assert math_equal(rf"\boxed{{{factored}}}", expanded)
    # the modular test on its own, which large answers use
    names = ["x"]
    assert modular_eq(parse(expanded), parse(factored), names) is True
    k = data.draw(st.integers(0, max(coeffs)), label="power")
    delta = data.draw(st.integers(-1000, 1000).filter(lambda d: d != 0), label="delta")
    perturbed = dict(coeffs)
    perturbed[k] = perturbed.get(k, 0) + delta
    assert not math_equal(rf"\boxed{{{poly_latex(perturbed)}}}", factored)
    assert modular_eq(parse(poly_latex(perturbed)), parse(factored), names) is False


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(60, 220),
    st.integers(-3, 3).filter(lambda s: s != 0),
    st.data(),
)
def test_large_binomial_expansions_agree_and_perturbations_do_not(
    n: int, shift: int, data: st.DataObject
) -> None:
    coeffs = binomial_coeffs(n, shift)
    gold = f"(x {'+' if shift > 0 else '-'} {abs(shift)})^{{{n}}}"
    assert math_equal(rf"\boxed{{{poly_latex(coeffs)}}}", gold)
    k = data.draw(st.integers(0, n), label="power")
    delta = data.draw(st.sampled_from([1, -1, 2, 7, -(10**30)]), label="delta")
    coeffs[k] += delta
    assert not math_equal(rf"\boxed{{{poly_latex(coeffs)}}}", gold)


def test_modular_eq_leaves_what_it_cannot_read_to_the_other_tiers() -> None:
    x = ["x"]
    assert modular_eq(parse(r"\sqrt{x}"), parse("x"), x) is None
    assert modular_eq(parse(r"\pi x"), parse("x"), x) is None
    assert modular_eq(parse(r"x^{1/2}"), parse("x"), x) is None
    assert modular_eq(parse(r"\frac{1}{x-x}"), parse("x"), x) is None  # undefined everywhere
    assert modular_eq(parse(r"\binom{10}{3} x"), parse("120x"), x) is True
    assert modular_eq(parse(r"\frac{x^2-1}{x-1}"), parse("x+1"), x) is True
    assert modular_eq(parse("x^{-2} x^{3}"), parse("x"), x) is True
    assert modular_eq(parse("2^{100000} \\cdot 2"), parse("2^{100001}"), []) is True
    assert modular_eq(parse("2^{100000} + 1"), parse("2^{100000}"), []) is False


def test_a_constant_used_as_an_exponent_and_as_a_value_keeps_both_meanings() -> None:
    """``35!`` (above the 127-bit prime) both as an exponent (reduced modulo p - 1) and as a term
    (modulo p): one must not stand in for the other, or equal answers score 0."""
    f = math.factorial(35)
    response = rf"\boxed{{{GEOMETRIC_300} + x^{{35!}} + 35!}}"
    assert math_equal(response, rf"{GEOMETRIC_300} + x^{{35!}} + {f}")
    assert not math_equal(response, rf"{GEOMETRIC_300} + x^{{35!}} + {f + 1}")


GEOMETRIC_300 = " + ".join(f"x^{{{k}}}" for k in range(300, 1, -1)) + " + x + 1"


def test_warm_up_starts_a_sympy_worker_ahead_of_the_first_call() -> None:
    """In a fresh process: no worker before; one idle worker right after ``warm_up``, which the
    first call that needs sympy then uses instead of starting its own."""
    import subprocess
    import sys

    code = (
        "from llmgym.rewards.math import sympy_pool\n"
        "pool = sympy_pool.get_pool()\n"
        "assert pool._idle == []\n"
        "sympy_pool.warm_up()\n"
        "assert len(pool._idle) == 1\n"
        "worker = pool._idle[0]\n"
        "assert pool.call(('ping',), 60) is not None\n"
        "assert pool._idle == [worker]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
