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
  sympy), equations, assignments, matrices (sums, products, scalar multiples and small powers
  of matrices are worked out), sums and products (``\\sum_{k=1}^{4} k^2 == 30``; with symbolic
  bounds compared as written, factors in any order and the index renamed), multiple-choice
  letters, "no solution"/empty set, "undefined"/DNE, units and text around the answer, answers
  in words (case-insensitive);
- text as it comes: doubled backslashes (``\\\\frac{1}{2}``, ``-2 \\\\le x``: escaped once too
  often), a final answer in prose ("The largest $n$ is 34.", "Therefore, there are 12
  sequences.", "... 10 which is 1,000.99": the restated value), chat-template tails ("I hope it
  is correct. <|im_start|>user"), a "Final Answer" stated after boxes of intermediate steps,
  ``11,\\! 111`` and ``14 {, }916``, macros the parser does not know (names: ``\\zzz``).

Semantics decided here (each is a test in ``tests/rewards/test_math_verifier.py`` or, for what
math-verify's own test suite exercises, ``tests/rewards/test_math_conformance.py``):

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
  Boxes joined by a short label that ends in "and" (``\\boxed{(3, 3)} \\text{ for (a) and }
  \\boxed{(1, 1)}``) are a list too, unless the label takes one back or hedges ("wait",
  "maybe"). A gold is read more generously: it never hedges, so all its boxes are its answer
  (``\\boxed{1} papers and \\boxed{2} bins`` is ``1, 2``) unless one is taken back, an
  unterminated box runs to its end, and a whole solution in prose is read like a response.
- **labels**: a gold that names what it gives, ``AB = 4``, ``\\frac{NO}{BO} = \\frac{1}{\\sqrt{6}}``,
  ``|AB| = 1``, ``V_1 : V_2 = 11 : 21`` (variables only, no numbers or sums on the left), is an
  assignment like ``x = 3``: the bare value answers it. A bare list answers labelled values in
  the order written or in the order of the names (``x = -5, p = 14/3`` takes ``-5, 14/3``);
  ``;`` separates solutions (``p = 5, q = 2; p = 7, q = 2`` is ``(5, 2), (7, 2)``). In
  ``g(t) = t^2`` the argument is a dummy name: ``g(s) = s^2`` is the same function.
- **multiple choice**: when the gold is a letter A-J (``B``, ``(B)``, ``\\text{(B)}``), the
  answer's letter is compared: ``(B)``, ``B)``, ``B. 42``, ``\\textbf{B}`` all read as B, and so
  does a response that opens with the letter ("C. The slope is ...") or names one letter only
  ("Since the slope is positive, D holds"; the pronoun I and the article A are none).
- ``[2, \\infty]`` reads as ``[2, \\infty)``; ``\\log`` is the natural logarithm; ``e`` is Euler's
  number and ``i`` the imaginary unit; ``1010`` equals ``1010_2`` (digits compared, the base
  was asked for), ``10`` does not.

- ``\\sqrt{2} \\approx 1.414`` means ``\\sqrt{2}`` (the exact value is stated first); ``x \\approx
  1.414`` is only an approximation. Matrices must have the same shape; a one-row or one-column
  matrix equals a tuple of its entries.

Conventions other data follow are options of :func:`math_equal`: ``decimal_comma`` (``2,5`` is
2.5), ``lists_as_tuples`` (``{1,3}`` in order is ``(1, 3)``), ``relations_as_sets=False`` (a gold
written as a set asks for one). On math-verify's own test suite (``benchmarks/math_verify.py
--suite``) llmgym agrees with every expected verdict that is mathematically right, given these
options where math-verify's configuration asks for them; it keeps the right verdict where
math-verify's expectation is wrong (``1 + 1/e`` is not ``1 - 1/e``; inline math spread over
lines still holds its answer) and has no option that renames variables (``f(y) != f(x)``).

Final forms (``form=``): a task that asks to compute a value wants the value, not the question
back: ``3929 + 3359`` equals ``7288`` but is no answer to "compute". With ``form`` an answer must
be equal *and* written in that form (see :data:`FORMS`); without one (the default) equality
alone decides, as before. The forms: ``"number"`` (an integer, a decimal or a fraction in lowest
terms; ``1/2``, ``0.5``, ``2\\frac{1}{2}``, ``1.5\\times10^{3}``), ``"fraction"`` (an integer or
``p/q`` in lowest terms, no decimals), ``"radical"`` (``2\\sqrt{2}``, ``\\frac{-3 \\pm \\sqrt{17}}{4}``;
not ``\\sqrt{8}`` nor ``\\frac{1}{\\sqrt{2}}``), ``"pi"``, ``"complex"`` (``a + bi``), ``"exact"`` (all of
these together), ``"polynomial"`` (expanded, like terms collected), ``"factored"`` (linear
factors), ``"expression"`` (symbols stay, no arithmetic on numbers left), ``"auto"`` (the form
the gold itself has: ``"exact"`` for a gold without symbols, ``"expression"`` for one with them,
none for a gold that is in neither) and ``"any"``. Containers take the form of their elements;
an equation or inequality left to solve (``2x \\le 6``), a set operation left to do
(``\\{1\\} \\cup \\{3\\}``) are in no value form, and an answer has the gold's shape: a list of
copies of one value (``5, 5``) is not that value, and a gold in braces wants a set (``\\{4, 6\\}``,
not ``4, 6``). The gold's own text always passes.

Limits: answers longer than 200,000 characters are only compared as normalised text (shorter
ones are parsed in linear time; large rational expressions, such as a degree-500 polynomial
written out, are compared exactly modulo a pseudo-random 127-bit prime); numbers
beyond ``2^(2^40)`` and differently written are unequal unless their structures or logarithms
(60 digits) agree; sampling-based identity testing can in principle be fooled by an
expression built to vanish at the sampled points.

Safety: model output is never ``eval``-ed; a hand-written parser with depth and size limits
reads it, exact arithmetic bounds every intermediate size, and sympy (rarely needed) runs in
worker processes that are killed at ``timeout_s`` (which bounds all symbolic work of one call;
in-process arithmetic stops then too, after at least half a second).
Nothing here raises on model output. Blocking calls are thread-safe; from asyncio, use
``await asyncio.to_thread(math_equal, ...)``.

How the package reads an answer, one module per step (each states what it does not do):

- :mod:`~llmgym.rewards.math.extract` finds the final answer in a response;
  :mod:`~llmgym.rewards.math.choices` reads multiple-choice letters;
- :mod:`~llmgym.rewards.math.normalize`, :mod:`~llmgym.rewards.math.tokens` (with the words
  and commands of :mod:`~llmgym.rewards.math.vocab`) and :mod:`~llmgym.rewards.math.parser`
  (sums and products: :mod:`~llmgym.rewards.math.series`) turn it into a tree
  (:mod:`~llmgym.rewards.math.nodes`; parses are cached by :mod:`~llmgym.rewards.math.cache`);
- :mod:`~llmgym.rewards.math.values` reads the tree into a value (tuple, set, interval,
  assignment, equation...; :mod:`~llmgym.rewards.math.realsets`,
  :mod:`~llmgym.rewards.math.matrices`) and compares values;
- :mod:`~llmgym.rewards.math.evaluate` compares scalars: exactly
  (:mod:`~llmgym.rewards.math.exact`), numerically (:mod:`~llmgym.rewards.math.numeric`), modulo
  a prime (:mod:`~llmgym.rewards.math.modular`), within the bounds of
  :mod:`~llmgym.rewards.math.limits`, and in sympy (:mod:`~llmgym.rewards.math.sympy_pool`,
  worker processes);
- :mod:`~llmgym.rewards.math.form` checks final forms;
  :mod:`~llmgym.rewards.math.verifier` holds the functions below and puts the steps together;
- :mod:`~llmgym.rewards.math.process` is the process reward (a step checker, reward models).
"""

from __future__ import annotations

from llmgym.rewards.math.verifier import (
    FORMS,
    extract_answer,
    math_equal,
    math_reward,
    math_verifier,
    shutdown_workers,
)

__all__ = [
    "FORMS",
    "extract_answer",
    "math_equal",
    "math_reward",
    "math_verifier",
    "shutdown_workers",
]
