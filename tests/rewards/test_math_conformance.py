"""Conformance with math-verify's own test suite (issue 14), in llmgym's own cases.

math-verify's tests hold about 280 (gold, prediction, verdict) triples; ``benchmarks/math_verify.py
--suite`` measures llmgym on them (they are not copied here). These are llmgym's cases of each
class those triples exercise: doubled backslashes, prose final answers, thousands separators
``,\\!`` with a space, labelled golds (``AB = 4, CD = 5`` vs ``4, 5``), several boxes forming
one answer, unevaluated matrix arithmetic, sums with commuted factors, and the conventions
llmgym offers as options (decimal commas, a list read as a tuple, a relation for a set, a
precision). Each class also has its attacks: what must still score nothing. The last section
holds the cases where math-verify's verdict is mathematically wrong and llmgym's is not.
"""

from __future__ import annotations

import time

import pytest

from llmgym.rewards.math import extract_answer, math_equal, math_reward

# ---------------------------------------------------------------------------------------------
# Doubled backslashes: text escaped once too often (\\frac, \\left, \\le)
# ---------------------------------------------------------------------------------------------

DOUBLED = [
    (r"So the ratio is $\\boxed{\\dfrac{3}{8}}$.", "0.375", True),
    (r"$\left[ 2, 5 \right)$", r"\\left[2, 5\\right)", True),  # the gold doubled
    (r"x \\geq 3", r"[3, \infty)", True),
    (r"\\boxed{\\left(4, \\frac{\\pi}{3}\\right)}", r"(4, \frac{\pi}{3})", True),
    (r"$\\{\\frac{1}{2}, 2\\}$", r"\{2, \frac{1}{2}\}", True),  # all doubled: \\{ is \{
    (r"\\boxed{\\frac{5}{8}}", r"\frac{3}{8}", False),
    (r"\\boxed{\\left(4, \\frac{\\pi}{6}\\right)}", r"(4, \frac{\pi}{3})", False),
]


@pytest.mark.parametrize(("response", "gold", "expected"), DOUBLED)
def test_doubled_backslashes_read_as_single(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


def test_doubled_backslashes_leave_row_breaks_alone() -> None:
    matrix = r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}"
    assert math_equal(matrix, r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}")
    assert not math_equal(matrix, r"\begin{pmatrix} 1 & 2 & 3 & 4 \end{pmatrix}")
    assert math_equal(
        r"\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", r"\begin{pmatrix}1\\2\end{pmatrix}"
    )


# ---------------------------------------------------------------------------------------------
# Prose final answers
# ---------------------------------------------------------------------------------------------

PROSE = [
    ("Final Answer: The smallest possible $k$ is 17.", "17", True),
    ("Final Answer: The smallest possible $k$ is 17.", "18", False),
    (
        "We list the committees one by one. Therefore, exactly 8 committees can be formed. "
        "I hope it is correct.",
        "8",
        True,
    ),
    ("Final Answer: Maria walked 6 miles on Tuesday.", "6", True),
    ("The first count of 10 was wrong, so the count is 12.", "12", True),
    ("The first count of 10 was wrong, so the count is 12.", "10", False),
    ("So $n = 7$. Check: substituting gives 0.", "7", True),  # a check is no answer
    ("Adding up, the answer is 5. <|im_end|>", "5", True),
    ("so the length is 3 which is 0.25 of the side", "0.25", True),  # "which is" restates
    ("the answer is 4 because $2 \\cdot 2 = 4$ and 9 is too big", "4", True),
    (
        r"Each term doubles: $a_{n+1} = 2a_n$, and $a_1 = 3$. Thus the tenth term is 1536.",
        "1536",
        True,
    ),
    (r"Final answer: $x$ is $-\frac{1}{2}$.", r"-\frac{1}{2}", True),
]


@pytest.mark.parametrize(("response", "gold", "expected"), PROSE)
def test_prose_final_answers(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


@pytest.mark.parametrize(
    "response",
    [
        "Final Answer: The largest $n$ is 34 or 35.",
        "Therefore, the number of tiles is either 34 or 35.",
        "Final Answer: maybe 34, or possibly 35.",
    ],
)
def test_prose_hedge_attack_scores_zero(response: str) -> None:
    for gold in ("34", "35"):
        assert not math_equal(response, gold)
    assert math_reward(response, "34").score == 0.0


@pytest.mark.parametrize(("response", "gold"), [("Serial QX7Z", "7"), ("Room B12 is open", "12")])
def test_number_inside_a_word_is_no_answer(response: str, gold: str) -> None:
    assert not math_equal(response, gold)


# ---------------------------------------------------------------------------------------------
# Thousands separators with LaTeX spacing and a space
# ---------------------------------------------------------------------------------------------

THOUSANDS = [
    (r"$\boxed{12,\! 345}$", "12345", True),
    (r"The total is $7 {, }250$.", "7250", True),
    (r"\boxed{\$3,\! 000.50}", "3000.5", True),
    (r"\boxed{4,\! 000,\! 021}", "4000021", True),
    (r"\boxed{1, 234}", "1234", False),  # a space alone: a list
    (r"\boxed{1,\! 23}", "123", False),  # not a group of three
]


@pytest.mark.parametrize(("response", "gold", "expected"), THOUSANDS)
def test_thousands_separators(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


# ---------------------------------------------------------------------------------------------
# Labelled golds: AB = 4, CD = 5 answered by 4, 5
# ---------------------------------------------------------------------------------------------

LABELLED = [
    (r"\boxed{7, 9}", "PQ = 7, RS = 9", True),
    (r"\boxed{9, 7}", "PQ = 7, RS = 9", False),
    (r"\boxed{2, 1}", "b = 2, a = 1", True),  # the order written
    (r"\boxed{1, 2}", "b = 2, a = 1", True),  # the order of the names (as for a tuple)
    (r"\boxed{(2, 1)}", "b = 2, a = 1", False),  # a tuple takes the names in order
    (r"\boxed{\frac{2}{3}}", r"\frac{AE}{EC} = \frac{2}{3}", True),
    (r"\boxed{\frac{3}{2}}", r"\frac{AE}{EC} = \frac{2}{3}", False),
    (r"\boxed{5}", "|PQ| = 5", True),
    (r"\boxed{0.75}", "X:Y = 3:4", True),
    (r"\boxed{1/4}", r"S_{ABC}:S_{XYZ} = 1:4", True),
    (r"\boxed{BA = 4}", "AB = 4", True),
    (r"\boxed{(3, 4), (1, 2)}", "a = 1, b = 2; a = 3, b = 4", True),
    (r"\boxed{(1, 2)}", "a = 1, b = 2; a = 3, b = 4", False),
    (
        r"\boxed{2+\sqrt{3}} \quad \text{and} \quad \boxed{2-\sqrt{3}}",
        r"u_{1}=2+\sqrt{3},\quadu_{2}=2-\sqrt{3}",
        True,
    ),
    (r"\boxed{g(s) = s^2 + 1}", "g(t) = t^2 + 1", True),  # the argument is a dummy name
    (r"\boxed{g(s) = t^2 + 1}", "g(t) = t^2 + 1", False),
    (r"\boxed{K(y) = 2 \text{ or } K(y) = -2}", r"K(n) = 2 \text{ and } K(n) = -2", True),
]


@pytest.mark.parametrize(("response", "gold", "expected"), LABELLED)
def test_labelled_golds(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        (r"\boxed{7}", "2a + b = 7"),  # an equation with numbers in it is no label
        (r"\boxed{6}", "x^2 + y = 6"),
        (r"\boxed{3}", "xy = 3x"),  # the value names its own label: an equation
        (r"\boxed{x = 4}", "AB = 4"),  # a different name
        (r"\boxed{4, 5, 6}", "AB = 4, CD = 5"),
    ],
)
def test_labels_are_not_equations_attack(response: str, gold: str) -> None:
    assert not math_equal(response, gold)


# ---------------------------------------------------------------------------------------------
# Several boxes form one answer
# ---------------------------------------------------------------------------------------------

BOXES = [
    # a gold never hedges nor changes its mind: its boxes together are the answer...
    (r"\boxed{2, 5}", r"She buys \boxed{2} apples and \boxed{5} pears.", True),
    (r"\boxed{2}", r"She buys \boxed{2} apples and \boxed{5} pears.", False),
    (r"\boxed{3, 8}", r"$\boxed{3}\boxed{8}$", True),
    # ... unless it takes one back
    (r"\boxed{6}", r"First \boxed{4}, wait no, \boxed{6}", True),
    (r"\boxed{4, 6}", r"First \boxed{4}, wait no, \boxed{6}", False),
    # ... or one boxes a step long before the answer
    (r"\boxed{5}", r"A step: \boxed{3} apples. " + "Then we count the rest of them. " * 3 + r"\boxed{5}", True),
    (r"\boxed{3, 5}", r"A step: \boxed{3} apples. " + "Then we count the rest of them. " * 3 + r"\boxed{5}", False),
    # an unterminated last box runs to the end
    (r"\boxed{3}", r"so \boxed{x = 3", True),
    # a response's boxes joined by a label ending in "and"
    (r"The first part gives $\boxed{1}$ for (a) and $\boxed{9}$", "1, 9", True),
    (r"$\boxed{(1, 2)} \text{ for } x>0 \text{ and } \boxed{(3, 4)}$", "(1, 2), (3, 4)", True),
    # boxes of steps, then the final answer stated after them
    (r"Step one: \boxed{10}. Step two: \boxed{20}. Final Answer: The final answer is $35$.", "35", True),
    (r"Step one: \boxed{10}. Step two: \boxed{20}. Final Answer: The final answer is $35$.", "20", False),
]  # fmt: skip


@pytest.mark.parametrize(("response", "gold", "expected"), BOXES)
def test_several_boxes(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


@pytest.mark.parametrize(
    "response",
    [
        r"\boxed{3}\boxed{4}",
        r"\boxed{3} or \boxed{4}",
        r"\boxed{3} for one reading, or maybe \boxed{4}",
        r"Final answer: \boxed{3}. Final Answer: 3 or 4",
    ],
)
def test_several_boxes_hedge_attack_scores_zero(response: str) -> None:
    for gold in ("3", "4"):
        assert not math_equal(response, gold)


def test_a_label_joining_boxes_does_not_pay_a_single_gold() -> None:
    shotgun = r"\boxed{3} for one case and \boxed{4}"
    assert extract_answer(shotgun) == "3, 4"
    assert not math_equal(shotgun, "3") and not math_equal(shotgun, "4")


# ---------------------------------------------------------------------------------------------
# Unevaluated matrix arithmetic, and sums
# ---------------------------------------------------------------------------------------------

I2 = r"\begin{pmatrix}1&0\\0&1\end{pmatrix}"
MATRICES = [
    (I2 + r" + \begin{pmatrix}2&3\\4&5\end{pmatrix}", r"\begin{pmatrix}3&3\\4&6\end{pmatrix}", True),
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}\begin{pmatrix}1\\1\end{pmatrix}", r"\begin{pmatrix}3\\7\end{pmatrix}", True),
    (r"\begin{pmatrix}1&1\\0&1\end{pmatrix}^3", r"\begin{pmatrix}1&3\\0&1\end{pmatrix}", True),
    (r"3\begin{pmatrix}1\\-2\end{pmatrix}", r"\begin{pmatrix}3\\-6\end{pmatrix}", True),
    (I2 + " - " + I2, r"\begin{pmatrix}0&0\\0&0\end{pmatrix}", True),
    (r"\begin{pmatrix}1&1\\0&1\end{pmatrix}^3", r"\begin{pmatrix}1&1\\0&1\end{pmatrix}", False),
    (I2 + r" + \begin{pmatrix}1\\1\end{pmatrix}", I2, False),  # shapes that do not add
    (I2 + " + 1", I2, False),
]  # fmt: skip


@pytest.mark.parametrize(("response", "gold", "expected"), MATRICES)
def test_matrix_arithmetic_is_done(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


def test_unevaluated_matrix_arithmetic_is_not_a_final_form() -> None:
    product = r"\begin{pmatrix}1&2\\3&4\end{pmatrix}\begin{pmatrix}1\\1\end{pmatrix}"
    gold = r"\begin{pmatrix}3\\7\end{pmatrix}"
    assert math_equal(product, gold) and not math_equal(product, gold, form="auto")


SUMS = [
    (r"a_n = \sum_{i=1}^{n} b_i a_{i-1}", r"a_n = \sum_{j=1}^{n} a_{j-1} b_j", True),
    (r"a_n = \sum_{i=1}^{n-1} b_i a_{i-1}", r"a_n = \sum_{j=1}^{n} a_{j-1} b_j", False),
    (r"a_n = \sum_{i=1}^{n} b_i a_{i}", r"a_n = \sum_{j=1}^{n} a_{j-1} b_j", False),
    (r"2\sum_{k=1}^{m} k^2", r"\sum_{i=1}^{m} i^2 \cdot 2", True),
    (r"\sum_{k=1}^{4} k^2", "30", True),
    (r"\prod_{k=1}^{4} (k+1)", "120", True),
    (r"\sum_{k=3}^{2} k", "0", True),
]


@pytest.mark.parametrize(("response", "gold", "expected"), SUMS)
def test_sums(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


def test_nested_sums_attack_stays_fast() -> None:
    start = time.monotonic()
    assert not math_equal(r"\sum_{i=1}^{999}\sum_{j=1}^{999}\sum_{k=1}^{999} ijk", "1")
    assert time.monotonic() - start < 2.0


# ---------------------------------------------------------------------------------------------
# Conventions offered as options (math-verify's defaults differ)
# ---------------------------------------------------------------------------------------------


def test_decimal_comma_option() -> None:
    assert not math_equal("3,75", "3.75")  # a list of two numbers by default
    assert math_equal("3,75", "3.75", decimal_comma=True)
    assert math_equal("Le résultat est 12,5 cm.", "12.5", decimal_comma=True)
    assert math_equal("1.250,75", "1250.75", decimal_comma=True)
    assert math_equal(r"\boxed{0{,}5}", r"\frac{1}{2}", decimal_comma=True)
    assert math_equal("0,5", "0,50", decimal_comma=True)  # the gold too
    assert math_equal("2, 5", r"\{2, 5\}", decimal_comma=True)  # a spaced list stays a list
    assert not math_equal("3,75", "375", decimal_comma=True)


def test_lists_as_tuples_option() -> None:
    assert not math_equal("{2,5}", "(2, 5)")
    assert math_equal("{2,5}", "(2, 5)", lists_as_tuples=True)
    assert math_equal(r"\{2, 5\}", "(2, 5)", lists_as_tuples=True)
    assert not math_equal("{5,2}", "(2, 5)", lists_as_tuples=True)  # in the order written
    assert not math_equal("2, 5, 7", "(2, 5)", lists_as_tuples=True)


def test_relations_as_sets_option() -> None:
    assert math_equal("-1 < x < 4", "(-1, 4)")
    assert not math_equal("-1 < x < 4", "(-1, 4)", relations_as_sets=False)
    assert not math_equal(r"x \le 0", r"x \in (-\infty, 0]", relations_as_sets=False)
    # a relation gold still takes a set answer, and a set answer a set gold
    assert math_equal("(-1, 4)", "-1 < x < 4", relations_as_sets=False)
    assert math_equal(r"x \in (-1, 4)", "(-1, 4)", relations_as_sets=False)


def test_precision_is_an_explicit_tolerance() -> None:
    assert not math_equal("0.2857", r"\frac{2}{7}")
    assert math_equal("0.2857", r"\frac{2}{7}", abs_tol=1e-4)
    assert not math_equal("0.2857", r"\frac{2}{7}", abs_tol=1e-5)
    assert math_equal(r"\begin{pmatrix}0.14\\0.29\end{pmatrix}", r"\begin{pmatrix}\frac17\\\frac27\end{pmatrix}", abs_tol=1e-2)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Choice letters in prose, unknown macros
# ---------------------------------------------------------------------------------------------

CHOICES = [
    ("C. The slope is positive.", "C", True),
    ("C. The slope is positive.", "B", False),
    ("Since the slope is positive, D holds", "D", True),
    ("I would pick D", "D", True),
    ("Both B and D look right.", "B", False),
    ("Both B and D look right.", "D", False),
    ("A careful check shows nothing.", "A", False),  # the article A is no choice
]


@pytest.mark.parametrize(("response", "gold", "expected"), CHOICES)
def test_choice_letters_in_prose(response: str, gold: str, expected: bool) -> None:
    assert math_equal(response, gold) is expected


@pytest.mark.parametrize("response", ["(A) (B) (C) (D)", "(C)(D)", "C D", "C. D. E.", "B, or C"])
def test_choice_shotgun_attack_scores_zero(response: str) -> None:
    assert not any(math_equal(response, letter) for letter in "ABCDE")


def test_unknown_macros_are_names() -> None:
    assert math_equal("0", r"3 = \qval = y = 0")  # a chain means its last value
    assert math_equal(r"\qval + 1", r"1 + \qval")
    assert not math_equal(r"\qval", r"\pval")
    assert not math_equal(r"\qval{3}", "3")  # a macro with an argument is not read


# ---------------------------------------------------------------------------------------------
# Where math-verify's expected verdict is mathematically wrong, llmgym keeps the right one
# ---------------------------------------------------------------------------------------------


def test_where_math_verify_expects_a_wrong_verdict() -> None:
    # a sign error is not equal, whatever else the two answers share
    assert not math_equal(r"$1 + \frac{1}{\mathrm{e}}$", r"1 - \frac{1}{\mathrm{e}}")
    # inline math spread over lines still holds the answer
    assert math_equal("Answer $ \n 7 \n $", "7")
    assert math_equal("Answer \\( \n 7 \n \\)", "7")
    # renaming variables changes the answer (math-verify's strict=False says f(y) == f(x))
    assert not math_equal("f(y)", "f(x)")


# ---------------------------------------------------------------------------------------------
# Agreement with math-verify where both should agree
# ---------------------------------------------------------------------------------------------

AGREED = [
    (r"So the ratio is $\\boxed{\\dfrac{3}{8}}$.", "0.375", True),
    (r"\\boxed{\\left(4, \\frac{\\pi}{3}\\right)}", r"(4, \frac{\pi}{3})", True),
    (r"\\boxed{\\frac{5}{8}}", r"\frac{3}{8}", False),
    ("Final Answer: The smallest possible $k$ is 17.", "17", True),
    ("Final Answer: The smallest possible $k$ is 17.", "18", False),
    (
        "We list the committees one by one. Therefore, exactly 8 committees can be formed. "
        "I hope it is correct.",
        "8",
        True,
    ),
    ("Final Answer: Maria walked 6 miles on Tuesday.", "6", True),
    ("Serial QX7Z", "7", False),
    (r"$\boxed{12,\! 345}$", "12345", True),
    (r"The total is $7 {, }250$.", "7250", True),
    (r"\boxed{1, 234}", "1234", False),
    (r"\boxed{7, 9}", "PQ = 7, RS = 9", True),
    (r"\boxed{\frac{2}{3}}", r"\frac{AE}{EC} = \frac{2}{3}", True),
    (r"\boxed{5}", "|PQ| = 5", True),
    (r"\boxed{0.75}", "X:Y = 3:4", True),
    (r"\boxed{7}", "2a + b = 7", False),
    (r"\boxed{(3, 4), (1, 2)}", "a = 1, b = 2; a = 3, b = 4", True),
    (r"\boxed{2, 5}", r"She buys \boxed{2} apples and \boxed{5} pears.", True),
    (r"\boxed{2}", r"She buys \boxed{2} apples and \boxed{5} pears.", False),
    (r"Step one: \boxed{10}. Step two: \boxed{20}. Final Answer: The final answer is $35$.", "35", True),
    (f"${I2} + " + r"\begin{pmatrix}2&3\\4&5\end{pmatrix}$", r"\begin{pmatrix}3&3\\4&6\end{pmatrix}", True),
    (r"$\begin{pmatrix}1&2\\3&4\end{pmatrix}\begin{pmatrix}1\\1\end{pmatrix}$", r"\begin{pmatrix}3\\7\end{pmatrix}", True),
    (r"$\sum_{k=1}^{4} k^2$", "30", True),
    (r"$1 + \frac{1}{e}$", r"1 - \frac{1}{e}", False),
]  # fmt: skip


def test_agrees_with_math_verify_where_both_should() -> None:
    mv = pytest.importorskip("math_verify")
    import logging

    logging.disable(logging.WARNING)  # math-verify logs its timeouts and parse failures
    try:
        for response, gold, expected in AGREED:
            assert math_equal(response, gold) is expected, (response, gold)
            wrapped = gold if "\\boxed" in gold else f"${gold}$"
            theirs = bool(mv.verify(mv.parse(wrapped), mv.parse(response)))
            assert theirs is expected, ("math-verify", response, gold)
    finally:
        logging.disable(logging.NOTSET)
