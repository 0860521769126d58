"""``form=``: the final form an answer must have besides being equal to the gold (issue 13).

The attack each test names: an answer equal to the gold but left unevaluated (the question's
own expression, a sum of numbers, an unreduced fraction, an unsimplified radical) is not an
answer to "compute"; with a form it scores 0, without one ``math_equal`` is as before.
"""

from __future__ import annotations

import pytest

from llmgym.rewards.math import FORMS, math_equal, math_reward, math_verifier


def eq(answer: str, gold: str, form: str | None) -> bool:
    return math_equal(f"\\boxed{{{answer}}}", gold, form=form)


def test_without_a_form_math_equal_is_backward_compatible():
    assert math_equal("3+4", "7") and math_equal(r"\sqrt{8}", r"2\sqrt{2}")
    assert math_equal("2/4", "1/2") and math_equal(r"\boxed{3929 + 3359}", "7288")
    assert math_equal("3+4", "7", form=None) and math_equal("3+4", "7", form="any")


def test_unknown_forms_are_a_caller_error_that_lists_the_forms():
    with pytest.raises(ValueError, match="number"):
        math_equal("7", "7", form="numbr")
    assert {"number", "fraction", "radical", "pi", "complex", "exact"} <= set(FORMS)
    assert {"polynomial", "factored", "expression", "auto", "any"} <= set(FORMS)


@pytest.mark.parametrize(
    "answer",
    ["3+4", "3 + 4", "10 - 3", "14/2", r"\frac{14}{2}", "7/1", r"\frac{7}{1}", r"\sqrt{49}",
     "7^1", r"\log_{2} 128", r"3929 + 3359 + 457 - 3919 + 3152 - 6971", r"1 \cdot 7", "(3+4)",
     "x = 3 + 4", r"7 \cdot 1", "--7", "+7 + 0", r"\frac{21}{3}", "7, 7", r"\{7, 7\}", "49^{1/2}",
     r"\left(3+4\right)", r"\binom{7}{1}", r"|{-7}|", r"7!/6!"],
)  # fmt: skip
def test_unevaluated_expression_attack_fails_the_number_form(answer):
    assert math_equal(answer, "7")  # equal, so only the form can reject it
    assert not eq(answer, "7", "number"), answer


@pytest.mark.parametrize(
    "answer, gold",
    [("7", "7"), ("7.0", "7"), ("x = 7", "7"), (r"3 \times 4 = 12", "12"), ("12 cm", "12"),
     (r"\$12", "12"), ("1,000", "1000"), ("1.5e3", "1500"), (r"1.5 \times 10^{3}", "1500"),
     ("1/2", r"\frac{1}{2}"), ("0.5", r"\frac{1}{2}"), (r"\dfrac{1}{2}", "0.5"), (r"\frac12", "0.5"),
     ("-3/4", r"-\frac{3}{4}"), (r"\frac{-3}{4}", "-0.75"), (r"-\frac{3}{4}", "-0.75"),
     (r"2\frac{1}{2}", "5/2"), ("2 1/2", "5/2"), (r"0.\overline{3}", "1/3"), ("1:2", "1/2"),
     (r"40\%", r"40\%"), (r"30^\circ", "30"), ("1010_2", "1010_{2}"), ("0", "0"), ("-2", "-2")],
)  # fmt: skip
def test_numbers_in_any_final_notation_pass_the_number_form(answer, gold):
    assert eq(answer, gold, "number"), (answer, gold)


def test_reduced_fraction_attack_fails_the_fraction_form():
    assert eq(r"\frac{1}{2}", "1/2", "fraction") and eq("-3/4", r"-\frac{3}{4}", "fraction")
    assert eq(r"\frac{-3}{4}", r"-\frac{3}{4}", "fraction") and eq("2", "2", "fraction")
    assert not eq("2/4", "1/2", "fraction") and not eq(r"\frac{2}{4}", "1/2", "fraction")
    assert not eq("0.5", "1/2", "fraction")  # "as a fraction p/q in lowest terms"
    assert not eq(r"\frac{1}{3} + \frac{1}{6}", "1/2", "fraction")
    assert not eq(r"\frac{3}{6}", r"\frac{1}{2}", "number")  # lowest terms for numbers too


def test_unsimplified_radical_attack_fails_the_radical_form():
    gold = r"2\sqrt{2}"
    for good in (r"2\sqrt{2}", r"2 \sqrt 2", r"2\sqrt{2}"):
        assert eq(good, gold, "radical")
    for bad in (r"\sqrt{8}", r"\sqrt{2} + \sqrt{2}", r"\sqrt{2}\sqrt{4}", r"\frac{4}{\sqrt{2}}",
                r"2\sqrt{2} + 0", r"\sqrt{2} \cdot 2", "8^{1/2}", r"\sqrt{4 \cdot 2}"):  # fmt: skip
        assert math_equal(bad, gold) and not eq(bad, gold, "radical"), bad
    half = r"\frac{\sqrt{2}}{2}"
    assert eq(r"\frac{\sqrt{2}}{2}", half, "radical") and eq(r"\sqrt{2}/2", half, "radical")
    assert eq(r"\frac{1}{2}\sqrt{2}", half, "radical")
    assert not eq(r"\frac{1}{\sqrt{2}}", half, "radical")  # a root left in the denominator
    assert not eq(r"\sin(45^\circ)", half, "radical") and not eq(r"\cos 45^\circ", half, "radical")
    assert eq("5", "5", "radical") and not eq(r"\sqrt{25}", "5", "radical")
    roots = r"-\frac{3}{4} \pm \frac{\sqrt{17}}{4}"
    assert eq(r"\frac{-3 \pm \sqrt{17}}{4}", roots, "radical") and eq(roots, roots, "radical")
    assert not eq(r"\frac{-6 \pm 2\sqrt{17}}{8}", roots, "radical")
    assert not eq(r"\frac{-3 \pm \sqrt{17}}{2 \cdot 2}", roots, "radical")
    assert eq(r"\pm 3", r"\pm 3", "number") and not eq(r"1 \pm 2", "-1, 3", "number")


def test_unevaluated_multiple_of_pi_fails_the_pi_form():
    gold = r"\frac{32\pi}{3}"
    assert eq(r"\frac{32}{3}\pi", gold, "pi") and eq(r"\frac{32\pi}{3}", gold, "pi")
    assert not eq(r"\frac{4}{3}\pi \cdot 2^3", gold, "pi") and not eq(
        r"\frac{64\pi}{6}", gold, "pi"
    )
    assert eq(r"16\pi", r"16\pi", "pi") and not eq(r"\pi \cdot 4^2", r"16\pi", "pi")
    assert not eq(r"25\pi - 9\pi", r"16\pi", "pi") and eq("12", "12", "pi")


def test_unevaluated_complex_product_fails_the_complex_form():
    gold = "18 + 16i"
    assert eq("18 + 16i", gold, "complex") and eq("16i + 18", gold, "complex")
    for bad in ("(4 - 2i)(2 + 5i)", "8 + 20i - 4i - 10i^2", "18 + 16i + 0", "18 + 8i + 8i"):
        assert math_equal(bad, gold) and not eq(bad, gold, "complex"), bad
    assert eq(r"\frac{3 - 4i}{5}", r"\frac{3}{5} - \frac{4}{5}i", "complex")
    assert not eq(r"\frac{5 + 10i}{1 + 2i}", "5", "complex") and eq("-i", "-i", "complex")


def test_containers_need_every_element_in_final_form():
    assert eq("(1, 2)", "(1, 2)", "number") and not eq("(1, 1 + 1)", "(1, 2)", "number")
    assert eq("x = 1, y = 2", "(1, 2)", "number") and not eq("x = 1, y = 4/2", "(1, 2)", "number")
    assert eq(r"\{1, 3\}", r"\{1, 3\}", "number")
    assert not eq(r"\{1\} \cup \{3\}", r"\{1, 3\}", "number")  # a set operation left to do
    assert not eq(r"\{1, 2, 3\} \setminus \{2\}", r"\{1, 3\}", "number")
    assert eq(r"\mathbb{R} \setminus \{0\}", r"x \ne 0", "number")  # a domain, written out
    assert eq(r"[0, 2] \setminus \{1\}", r"[0, 1) \cup (1, 2]", "number")
    assert not eq(r"\mathbb{R} \setminus \{1 - 1\}", r"x \ne 0", "number")
    assert eq("-2, 5", "-2, 5", "number") and eq("x = -2 or x = 5", "-2, 5", "number")
    assert not eq("x = -2 or x = 10/2", "-2, 5", "number")
    matrix = r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}"
    assert eq(matrix, matrix, "number")
    assert not eq(matrix.replace("4", "2 + 2"), matrix, "number")


def test_unsolved_inequality_attack_fails_while_solved_forms_pass():
    gold = r"(-\infty, 3]"
    for good in (r"(-\infty, 3]", r"x \le 3", r"3 \ge x", r"\{x \mid x \le 3\}"):
        assert eq(good, gold, "number"), good
    for bad in (r"2x \le 6", r"2x + 1 \le 7", r"x \le 1 + 2", r"(-\infty, 6/2]"):
        assert math_equal(bad, gold) and not eq(bad, gold, "number"), bad
    union = r"(-\infty, -1) \cup (3, \infty)"
    assert eq(union, union, "number") and eq("x < -1 or x > 3", union, "number")
    assert not eq(r"x^2 - 2x - 3 > 0", union, "number")


def test_unsolved_equation_attack_fails_every_value_form():
    assert not eq("2x + 1 = 7", "x = 3", "number") and eq("x = 3", "x = 3", "number")


def test_false_equation_attack_copied_from_the_prompt_fails():
    """``x^2 + 9 = 0`` holds ``9 = 0``; "a = b" between numbers states the value b only when
    it is true (``3 \\times 4 = 12``)."""
    assert math_equal("9 = 0", "0")  # read as "the value is 0", as before without a form
    assert not eq("9 = 0", "0", "number") and not eq(r"3 \times 5 = 12", "12", "number")
    assert eq(r"3 \times 4 = 12", "12", "number") and eq("12 = 12", "12", "number")


def test_unexpanded_product_fails_the_polynomial_form():
    gold = "x^2 + 2x + 1"
    assert eq("x^2 + 2x + 1", gold, "polynomial") and eq("1 + 2x + x^2", gold, "polynomial")
    for bad in (
        "(x+1)^2",
        "(x + 1)(x + 1)",
        "x^2 + x + x + 1",
        "x \\cdot x + 2x + 1",
        "x^2 + 2x + 2 - 1",
    ):
        assert math_equal(bad, gold) and not eq(bad, gold, "polynomial"), bad
    assert eq(r"\frac{1}{2}x^2 - 3", r"\frac{x^2}{2} - 3", "polynomial") and eq(
        "0", "0", "polynomial"
    )


def test_factored_form_wants_linear_factors():
    gold = "(x - 2)(x + 3)"
    assert eq("(x + 3)(x - 2)", gold, "factored") and not eq("x^2 + x - 6", gold, "factored")


def test_expression_form_lets_symbols_stay_but_evaluates_numbers():
    gold = "(x + 1)^2"
    assert eq("(x+1)^2", gold, "expression") and eq("x^2 + 2x + 1", gold, "expression")
    assert not eq("(x + 1)^{1 + 1}", gold, "expression") and not eq(
        "(x + 2 - 1)^2", gold, "expression"
    )
    assert eq(r"2\sqrt{3}x", r"2\sqrt{3}x", "expression") and not eq(
        r"\sqrt{12}x", r"2\sqrt{3}x", "expression"
    )


def test_auto_takes_the_form_the_gold_has():
    assert (
        not eq(r"3 \times 4", "12", "auto") and eq("12", "12", "auto") and eq("12.0", "12", "auto")
    )
    assert not eq(r"\sqrt{72}", r"6\sqrt{2}", "auto") and eq(r"6\sqrt{2}", r"6\sqrt{2}", "auto")
    assert eq("(x+1)^2", "x^2 + 2x + 1", "auto") and not eq("(x+1)^{3-1}", "x^2 + 2x + 1", "auto")
    # a gold that is not in a final form itself sets no form: whatever is equal passes
    assert eq("1024", "2^{10}", "auto") and eq("2^{10}", "2^{10}", "auto")
    assert eq(r"\text{Monday}", r"\text{Monday}", "auto") and eq("(B)", "B", "auto")


def test_a_list_of_copies_of_one_value_is_not_an_answer_with_a_form():
    assert math_equal("5, 5, 5", "5")  # as before without a form
    assert not eq("5, 5, 5", "5", "number") and not eq(r"\{5\}", "5", "number")


def test_a_gold_written_as_a_set_wants_a_set():
    """A run of a given set's elements (``4, 6`` out of ``\\{4, 6, 9\\}``) is a list, not the set."""
    assert math_equal("4, 6", r"\{4, 6\}")  # as before without a form
    assert not eq("4, 6", r"\{4, 6\}", "number") and eq(r"\{6, 4\}", r"\{4, 6\}", "number")
    assert eq(r"x \in \{4, 6\}", r"\{4, 6\}", "number") and eq(r"\emptyset", r"\{\}", "number")
    assert eq(r"\{-2, 5\}", "-2, 5", "number")  # a list of solutions may be written as a set


def test_form_failures_score_zero_and_say_why_without_the_gold():
    r = math_reward(r"\boxed{3929 + 3359}", "7288", form="number")
    assert r.score == 0.0 and not r.success and r.components["correctness"] == 0.0
    assert "not in final form" in r.feedback and "7288" not in r.feedback
    assert math_reward(r"\boxed{7288}", "7288", form="number").score == 1.0
    r = math_reward(r"\boxed{x^2 + x - 6}", "(x - 2)(x + 3)", form="factored")
    assert r.score == 0.0 and "not factored" in r.feedback
    assert not math_verifier(r"\boxed{2/4}", "1/2", form="fraction").success
    assert math_verifier(r"\boxed{1/2}", "0.5", form="number").success


def test_hostile_forms_of_a_gold_list_are_checked_per_gold():
    assert math_equal(r"\boxed{3/6}", ["0.5", "1/2"])
    assert not math_equal(r"\boxed{3/6}", ["0.5", "1/2"], form="number")
    assert math_equal(r"\boxed{1/2}", ["0.5", "1/2"], form="number")
