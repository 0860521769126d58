"""How a math task is written: exact formatting, difficulty scaling, task assembly, the
catalogue entry of a family.

Every family generator (one theme per module of :mod:`llmgym.envs.math.families`) draws from
the ``random.Random`` it is given and computes its gold answer exactly (``int``/``Fraction``,
never floats). :func:`build` turns a statement, a question, the gold and the intermediate steps
into a :class:`~llmgym.tasks.Task` whose subtasks are the steps (ids ``s1``, ``s2``...; the last
asks the task's own question) and whose ``metadata["solution"]`` is a worked solution stating
each step as ``work = value``.

Every family declares the final form of its answer (``family(..., form="number")``, a name in
:data:`llmgym.rewards.math.FORMS`): the task and its last subtask carry it in
``metadata["form"]``, each intermediate step its own (``Step.form``, a number by default), and
the verifier enforces it, so the question's own expression, boxed, is not an answer.

Not here: the families themselves (:mod:`llmgym.envs.math.families`), the env
(:mod:`llmgym.envs.math.env`), grading (:mod:`llmgym.rewards.math`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from llmgym.rewards.math.form import FORMS
from llmgym.tasks import Family, Subtask, Task, draft

ANSWER_INSTRUCTION = "Put your final answer in \\boxed{}."
"""The last sentence of every Math-v0 prompt (the env rewrites it in subtask modes)."""

Number = int | Fraction
Generator = Callable[[random.Random, float], Task]

NAMES = (
    "Ava", "Liam", "Noah", "Emma", "Olivia", "Mateo", "Sofia", "Yuki", "Amara", "Kwame",
    "Priya", "Arjun", "Chen", "Mei", "Fatima", "Omar", "Elena", "Lucas", "Zara", "Diego",
    "Hana", "Ivan", "Leila", "Tomas", "Nia", "Ravi", "Ingrid", "Kofi", "Sven", "Aisha",
    "Marco", "Chloe", "Jamal", "Rosa", "Kenji", "Ana", "Felix", "Maya", "Tariq", "Lena",
)  # fmt: skip


# --- difficulty ---------------------------------------------------------------------------


def scale(difficulty: float, low: int, high: int) -> int:
    """An integer parameter that grows from ``low`` at difficulty 0 to ``high`` at 1.

    >>> scale(0.0, 2, 6), scale(0.5, 2, 6), scale(1.0, 2, 6)
    (2, 4, 6)
    """
    return low + math.floor((high - low) * difficulty + 0.5)


def up_to(difficulty: float, low: int, high: int) -> int:
    """A magnitude bound that grows geometrically from ``low`` to ``high``.

    >>> up_to(0.0, 9, 999), up_to(1.0, 9, 999)
    (9, 999)
    """
    return max(low, round(low * (high / low) ** difficulty))


def nonzero(rng: random.Random, bound: int) -> int:
    """A random integer in ``[-bound, bound]`` other than 0."""
    value = rng.randint(1, bound)
    return value if rng.random() < 0.5 else -value


# --- exact formatting --------------------------------------------------------------------


def tex(value: Number) -> str:
    """LaTeX for an exact rational: ``5``, ``-\\frac{3}{4}``.

    >>> tex(Fraction(-3, 4)), tex(Fraction(10, 2)), tex(7)
    ('-\\\\frac{3}{4}', '5', '7')
    """
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def decimal(value: Number) -> str:
    """A terminating rational as a plain decimal: ``12.5``, ``-0.05``, ``40``.

    >>> decimal(Fraction(25, 2)), decimal(Fraction(-1, 20)), decimal(40)
    ('12.5', '-0.05', '40')
    """
    value = Fraction(value)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        raise ValueError(f"{value} has no terminating decimal")
    places = max(twos, fives)
    if places == 0:
        return str(value.numerator)
    scaled = abs(value.numerator) * 10**places // value.denominator
    digits = str(scaled).rjust(places + 1, "0")
    text = f"{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


def terminates(value: Number) -> bool:
    """Whether a rational has a terminating decimal expansion."""
    den = Fraction(value).denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1


def coef_term(coef: Number, body: str, *, first: bool) -> str:
    """One signed term ``coef*body`` of a sum (``body`` empty for a constant), or ``""`` for 0."""
    coef = Fraction(coef)
    if coef == 0:
        return ""
    sign = "-" if coef < 0 else ("" if first else "+")
    size = abs(coef)
    if body and size == 1:
        text = body
    elif body and size.denominator != 1:
        text = f"{tex(size)}{body}"
    else:
        text = tex(size) + body
    if first:
        return f"{sign}{text}"
    return f" {sign} {text}"


def poly(coeffs: Sequence[Number], var: str = "x") -> str:
    """LaTeX for a polynomial from its coefficients, lowest power first.

    >>> poly([1, -4, 0, 3]), poly([0]), poly([Fraction(1, 2), 1], "t")
    ('3x^3 - 4x + 1', '0', 't + \\\\frac{1}{2}')
    """
    parts: list[str] = []
    for power in range(len(coeffs) - 1, -1, -1):
        body = "" if power == 0 else var if power == 1 else f"{var}^{power}"
        if power >= 10:
            body = f"{var}^{{{power}}}"
        part = coef_term(coeffs[power], body, first=not parts)
        if part:
            parts.append(part)
    return "".join(parts) or "0"


def poly_at(coeffs: Sequence[Number], value: Number) -> str:
    """A polynomial with ``x`` replaced by a number, products written out: the work of
    evaluating it.

    >>> poly_at([-5, 0, 3], -2), poly_at([1, 1], Fraction(1, 2))
    ('3 \\\\cdot (-2)^2 - 5', '\\\\frac{1}{2} + 1')
    """
    parts: list[str] = []
    for power in range(len(coeffs) - 1, -1, -1):
        c = Fraction(coeffs[power])
        if c == 0:
            continue
        x = paren(value) if power == 1 else f"{paren(value)}^{power}" if power else ""
        if Fraction(value).denominator != 1 and power > 1:
            x = f"\\left({tex(value)}\\right)^{power}"
        size = abs(c)
        body = x if (x and size == 1) else (f"{tex(size)} \\cdot {x}" if x else tex(size))
        if not parts:
            parts.append(("-" if c < 0 else "") + body)
        else:
            parts.append(f" {'-' if c < 0 else '+'} {body}")
    return "".join(parts) or "0"


def linear(a: Number, b: Number, var: str = "x") -> str:
    """``a*var + b`` in LaTeX."""
    return poly([b, a], var)


def paren(value: Number) -> str:
    """A rational for use inside an expression: negatives in parentheses."""
    text = tex(value)
    return f"({text})" if Fraction(value) < 0 else text


def simplify_sqrt(n: int) -> tuple[int, int]:
    """``sqrt(n) = k*sqrt(m)`` with ``m`` square-free: returns ``(k, m)``.

    >>> simplify_sqrt(72), simplify_sqrt(49), simplify_sqrt(7)
    ((6, 2), (7, 1), (1, 7))
    """
    k, m = 1, n
    f = 2
    while f * f <= m:
        while m % (f * f) == 0:
            m //= f * f
            k *= f
        f += 1
    return k, m


def sqrt_tex(n: int, coef: Number = 1) -> str:
    """LaTeX for ``coef*sqrt(n)``, simplified: ``5\\sqrt{2}``, ``\\frac{3\\sqrt{5}}{2}``, ``12``.

    >>> sqrt_tex(50), sqrt_tex(45, Fraction(1, 2)), sqrt_tex(16, 3)
    ('5\\\\sqrt{2}', '\\\\frac{3\\\\sqrt{5}}{2}', '12')
    """
    k, m = simplify_sqrt(n)
    total = Fraction(coef) * k
    if m == 1:
        return tex(total)
    sign = "-" if total < 0 else ""
    num = abs(total.numerator)
    root = f"\\sqrt{{{m}}}" if num == 1 else f"{num}\\sqrt{{{m}}}"
    if total.denominator == 1:
        return sign + root
    return f"{sign}\\frac{{{root}}}{{{total.denominator}}}"


def interval(lo: Number | None, hi: Number | None, *, lo_closed: bool, hi_closed: bool) -> str:
    """Interval notation with ``None`` for an infinite end: ``(-\\infty, 3]``.

    >>> interval(None, 3, lo_closed=False, hi_closed=True)
    '(-\\\\infty, 3]'
    """
    left = "(-\\infty" if lo is None else ("[" if lo_closed else "(") + tex(lo)
    right = "\\infty)" if hi is None else tex(hi) + ("]" if hi_closed else ")")
    return f"{left}, {right}"


def tex_set(values: Sequence[Number]) -> str:
    """A finite set in LaTeX, sorted: ``\\{-2, 5\\}``; ``\\emptyset`` when empty."""
    if not values:
        return "\\emptyset"
    return "\\{" + ", ".join(tex(v) for v in sorted(set(values))) + "\\}"


def matrix(rows: Sequence[Sequence[Number]]) -> str:
    """A ``pmatrix`` in LaTeX."""
    body = " \\\\ ".join(" & ".join(tex(v) for v in row) for row in rows)
    return f"\\begin{{pmatrix}} {body} \\end{{pmatrix}}"


def money(value: Number) -> str:
    """An exact amount of money for a prompt: ``$12``, ``$4.50``."""
    value = Fraction(value)
    if value.denominator == 1:
        return f"\\${value.numerator}"
    cents = value * 100
    if cents.denominator != 1:
        raise ValueError(f"{value} is not a whole number of cents")
    return f"\\${int(cents) // 100}.{int(cents) % 100:02d}"


# --- assembling a task -------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """An intermediate result: the subquestion that asks for it, its exact value, and the
    work that produces it (a LaTeX expression; the worked solution states ``work = value``).

    ``after`` lists the indices (0-based, into the task's steps) of the steps it uses;
    None means the step before it. ``form`` is the final form its answer must have.
    """

    question: str
    value: str
    work: str
    after: tuple[int, ...] | None = None
    form: str = "number"


def build(
    statement: str,
    question: str,
    answer: str,
    *,
    steps: Sequence[Step] = (),
    final_work: str = "",
    fmt: str = "",
    form: str | None = None,
    after: tuple[int, ...] | None = None,
) -> Task:
    """A task: prompt ``statement question`` + answer format + :data:`ANSWER_INSTRUCTION`.

    ``steps`` become subtasks ``s1..sk`` and the question itself ``s(k+1)`` (depending on
    ``after``, default: the last step); ``final_work`` is the expression that yields the
    answer in the worked solution; ``fmt`` says how to write the answer; ``form`` names the
    final form the answer must have besides being equal (default: the family's).
    """
    head = f"{statement} {question}".strip()
    tail = f"{fmt} {ANSWER_INSTRUCTION}".strip()
    prompt = f"{head}\n\n{tail}"
    subtasks: list[Subtask] = []
    lines = []
    for i, step in enumerate(steps):
        deps = (i - 1,) if step.after is None and i > 0 else (step.after or ())
        subtasks.append(
            Subtask(
                id=f"s{i + 1}",
                prompt=step.question,
                answer=step.value,
                verifier="math",
                depends_on=tuple(f"s{d + 1}" for d in deps),
                metadata={"form": step.form},
            )
        )
        lines.append(f"{step.question} ${step.work} = {step.value}$.")
    if steps:
        deps = (len(steps) - 1,) if after is None else after
        subtasks.append(
            Subtask(
                id=f"s{len(steps) + 1}",
                prompt=question,
                answer=answer,
                verifier="math",
                depends_on=tuple(f"s{d + 1}" for d in deps),
                metadata={"form": form} if form else {},
            )
        )
    if final_work:
        lines.append(f"So ${final_work} = {answer}$.")
    lines.append(f"The answer is $\\boxed{{{answer}}}$.")
    metadata: dict[str, object] = {"solution": "\n".join(lines)}
    if fmt:
        metadata["format"] = fmt
    if form:
        metadata["form"] = form
    return draft(prompt, answer, subtasks=tuple(subtasks), metadata=metadata)


def gold_in_text(gold: str, text: str) -> bool:
    """Whether the gold answer appears in ``text`` as a token of its own (a leak to copy).

    >>> gold_in_text("12", "What is 3 + 12?"), gold_in_text("12", "What is 3 + 120?")
    (True, False)
    >>> gold_in_text("4", "What is $a_{4}$ if $a_1 = 2^4$?")
    False
    >>> gold_in_text("\\\\frac{3}{4}", "Add $\\\\frac{3}{4}$ and 1.")
    True
    """
    if not _NUMBER.fullmatch(gold):
        return gold in text
    start = text.find(gold)
    while start >= 0:
        end = start + len(gold)
        before = text[max(0, start - 2) : start]
        after = text[end : end + 2]
        # Subscripts and exponents (a_{4}, x^2) are labels, not values to copy.
        glued_before = (
            before[-1:].isdigit() or before[-1:] in (".", "_", "^") or before in ("_{", "^{")
        )
        glued_after = after[:1].isdigit() or (after[:1] in (".", ",") and after[1:2].isdigit())
        if not glued_before and not glued_after:
            return True
        start = text.find(gold, start + 1)
    return False


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_GOLD_VALUE = re.compile(r"(-?)(?:(\d+(?:\.\d+)?)|\\frac\{(\d+)\}\{(\d+)\})(?:\\%)?")
_TEXT_VALUE = re.compile(
    r"(?<![\w.])(?:(-)\s*)?(?:(\d+(?:\.\d+)?)(?![\d.]?\d)|\\frac\{(\d+)\}\{(\d+)\})"
)


def _value_of(match: re.Match[str]) -> Fraction:
    sign, number, num, den = match.groups()
    value = Fraction(number) if number is not None else Fraction(int(num), int(den))
    return -value if sign else value


def gold_value_in_text(gold: str, text: str) -> bool:
    """Whether ``text`` holds the value of a rational gold in any notation a copier can box:
    the gold's own text (:func:`gold_in_text`), a sign set apart (``x - 2`` holds ``-2``), or
    trailing zeros (``\\$4.50`` holds ``4.5``). Exponents and subscripts count as well.

    >>> gold_value_in_text("-2", "Let $f(x) = 3x - 2$."), gold_value_in_text("4.5", r"at \\$4.50")
    (True, True)
    >>> gold_value_in_text("12", "What is $x^{12}$?"), gold_value_in_text("12", "What is $3 + 120$?")
    (True, False)
    """
    if gold_in_text(gold, text):
        return True
    match = _GOLD_VALUE.fullmatch(gold.strip())
    if match is None or (match.group(4) is not None and int(match.group(4)) == 0):
        return False
    value = _value_of(match)
    return any(
        _value_of(m) == value
        for m in _TEXT_VALUE.finditer(text)
        if m.group(4) is None or int(m.group(4)) != 0
    )


@dataclass(frozen=True)
class FamilySpec:
    """One entry of the catalogue: the family, whether its gold may appear in the prompt, and the
    final form of its answers."""

    family: Family
    gold_may_appear: bool
    form: str


def family(
    name: str,
    generate: Generator,
    description: str,
    *,
    form: str,
    steps: bool = False,
    gold_may_appear: bool = False,
) -> FamilySpec:
    """The catalogue entry of a family: ``generate`` under ``name``, with what it asks.

    ``form`` (a name in :data:`llmgym.rewards.math.FORMS`) is the final form of the family's
    answers: generated tasks carry it in ``metadata["form"]`` (a task built with its own
    ``form`` keeps that one), and so does their last subtask. ``steps`` says that its tasks have
    subtasks. Unless ``gold_may_appear`` (an answer that is legitimately one of the given
    numbers, as with a median or a gcd), a generated task whose statement holds its gold's value
    (:func:`gold_value_in_text`) is redrawn from the same ``rng`` (deterministic, at most 50
    times).
    """
    if form not in FORMS or form in ("auto", "any"):
        raise ValueError(
            f"Family {name!r}: expects form in {sorted(set(FORMS) - {'auto', 'any'})}, "
            f"actual: {form!r}"
        )
    fn = generate if gold_may_appear else _redraw_leaks(generate)
    fam = Family(name, _with_form(fn, form), description=description, has_subtasks=steps)
    return FamilySpec(fam, gold_may_appear, form)


def _with_form(generate: Generator, form: str) -> Generator:
    def with_form(rng: random.Random, difficulty: float) -> Task:
        task = generate(rng, difficulty)
        own = str(task.metadata.get("form") or form)
        subtasks = tuple(
            dataclasses.replace(sub, metadata={**sub.metadata, "form": own})
            if "form" not in sub.metadata
            else sub
            for sub in task.subtasks
        )
        return dataclasses.replace(task, metadata={**task.metadata, "form": own}, subtasks=subtasks)

    with_form.__name__ = generate.__name__
    with_form.__doc__ = generate.__doc__
    return with_form


def _redraw_leaks(generate: Generator) -> Generator:
    def no_leak(rng: random.Random, difficulty: float) -> Task:
        for _ in range(50):
            task = generate(rng, difficulty)
            statement = task.prompt.rsplit("\n\n", 1)[0]
            if not gold_value_in_text(str(task.answer), statement):
                return task
        return task

    no_leak.__name__ = generate.__name__
    no_leak.__doc__ = generate.__doc__
    return no_leak
