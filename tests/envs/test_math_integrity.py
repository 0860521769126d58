"""Math-v0 reward integrity: no answer derived from the prompt alone pays (issue 13).

The attack: a policy that boxes the question's own expression (``\\boxed{3929 + 3359 + 457}``),
a sub-expression, a number it sees, or pieces of the prompt glued together. Each family
declares the final form its answer must have, and the verifier enforces it, so an unevaluated
copy of the question scores 0; only the gold's own text (where a family's answer is legitimately
one of the given values, as with a median) is exempt.
"""

from __future__ import annotations

import re
from functools import cache

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym
from llmgym.envs.math.datasets import gsm8k_task, math_task
from llmgym.envs.math.families import FAMILIES
from llmgym.rewards.math import extract_answer
from llmgym.rewards.math.normalize import normalize
from llmgym.tasks import ProceduralSource

SOURCE = ProceduralSource(FAMILIES, domain="math")
NAMES = llmgym.list_families("llm/Math-v0")
LEVELS = (0.0, 0.5, 1.0)
INDICES = range(3)

_MATH_SPAN = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
_ARITH_SPAN = re.compile(
    r"[-(]?\s*\d[\d.,]*(?:\s*(?:[-+*/×÷^:=<>]|\\times|\\div|\\cdot|\\le|\\ge|\\pm)\s*[-(]*\s*"
    r"\d[\d.,]*\)*)*"
)
_TOKEN = re.compile(r"\\[A-Za-z]+|\d+(?:\.\d+)?|[A-Za-z]|\S")


@pytest.fixture(scope="module")
def env():
    made = gym.make("llm/Math-v0")
    yield made.unwrapped
    made.close()


@pytest.fixture(scope="module")
def sequential():
    made = gym.make("llm/Math-v0", subtask_mode="sequential")
    yield made.unwrapped
    made.close()


def canonical(text: str) -> str:
    """The text of an answer with notation noise removed (spaces, a trailing comma)."""
    return re.sub(r"\s+", "", normalize(text)).rstrip(",")


def numbers(text: str) -> list[str]:
    """The signed numbers written in a text, in order (subscripts and exponents are labels):
    what a copy of a value carries."""
    text = re.sub(r"[_^]\s*(?:\{[^{}]*\}|\w)", "", text)
    return [re.sub(r"\s", "", n) for n in re.findall(r"-?\s*\d+(?:\.\d+)?", text)]


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "({["
        depth -= ch in ")}]"
        if depth < 0:
            return False
    return depth == 0


def prompt_expressions(prompt: str, max_tokens: int = 40) -> set[str]:
    """Every expression a copying policy can take from a prompt: the whole prompt and its
    question, every LaTeX math span, every maximal arithmetic-looking span, and every balanced
    run of tokens inside a math span (the sub-expressions)."""
    statement = prompt.rsplit("\n\n", 1)[0]
    found = {prompt, statement, statement.rsplit(". ", 1)[-1]}
    spans = [m.group(1) or m.group(2) for m in _MATH_SPAN.finditer(prompt)]
    found.update(spans)
    found.update(m.group(0).strip() for m in _ARITH_SPAN.finditer(prompt))
    for span in spans:
        tokens = _TOKEN.findall(span)
        if len(tokens) > max_tokens:
            continue
        for i in range(len(tokens)):
            for j in range(i + 1, len(tokens) + 1):
                if _balanced("".join(tokens[i:j])):
                    found.add("".join(tokens[i:j]))
                    found.add(" ".join(tokens[i:j]))
    return {f for f in found if f.strip()}


def score(env, task, text: str) -> float:
    env.reset(options={"task": task})
    return float(env.step(text)[1])


@cache
def task_of(name: str, level: float, index: int):
    return SOURCE.build(name, level, index)


@pytest.mark.parametrize("name", NAMES)
def test_prompt_copy_attack_boxing_any_prompt_expression_scores_zero(name, env):
    """Over every family: boxing any expression taken from the prompt scores 0 unless it is
    the gold's own canonical text."""
    for level in LEVELS:
        for index in INDICES:
            task = task_of(name, level, index)
            oracle = score(env, task, env.oracle(task))
            assert oracle == 1.0, task.id
            gold = canonical(str(task.answer))
            paid = [
                c
                for c in sorted(prompt_expressions(task.prompt))
                if canonical(c) != gold and score(env, task, f"\\boxed{{{c}}}") >= oracle
            ]
            assert not paid, (task.id, task.answer, paid[:5])


@pytest.mark.parametrize("name", [f.name for f in FAMILIES if f.has_subtasks])
def test_prompt_copy_attack_on_subquestions_scores_zero(name, sequential):
    """Sequential and joint modes grade every subquestion: copying its own expression (the
    ``$(3 + 4 \\times 2)$`` of "What is the value of ...") earns no subtask credit. An
    intermediate result may legitimately be a given number (a least common denominator is
    often one of the denominators): copies made of the gold's own numbers are exempt."""
    for level in LEVELS:
        for index in range(2):
            task = task_of(name, level, index)
            for sub in task.subtasks:
                gold = numbers(str(sub.answer))
                reply = {"role": "assistant", "content": sequential.oracle_subtask(task, sub)}
                assert sequential.grade_subtask(task, sub, reply).score == 1.0, (task.id, sub.id)
                for c in sorted(prompt_expressions(f"{task.prompt}\n\n{sub.prompt}")):
                    if numbers(c) == gold:
                        continue
                    reply = {"role": "assistant", "content": f"\\boxed{{{c}}}"}
                    got = sequential.grade_subtask(task, sub, reply).score
                    assert got < 1.0, (task.id, sub.id, sub.answer, c)


# A few unevaluated ways of writing a value: each needs the value, so they test the form check
# itself (the copy attack above only finds what a prompt happens to contain).
_UNEVALUATED = ("{g} + 0", "0 + {g}", "1 \\cdot ({g})", "({g}) \\times 1", "\\frac{{2({g})}}{{2}}",
                "({g})^{{1}}", "{g} - 0", "\\sqrt{{({g})^2}}")  # fmt: skip
_SCALAR_GOLD = re.compile(r"^[-\\{}\w\s.^+%]*$")


@pytest.mark.parametrize("name", NAMES)
def test_unevaluated_expression_attack_wrapping_the_gold_scores_zero(name, env):
    """``gold + 0``, ``1 \\cdot (gold)``, ``\\frac{2(gold)}{2}``: equal to the gold, not final."""
    for level in LEVELS:
        task = task_of(name, level, 0)
        gold = str(task.answer)
        if "," in gold or "pmatrix" in gold or "\\pm" in gold or not _SCALAR_GOLD.match(gold):
            continue  # tuples, sets, intervals, matrices: elements are checked elsewhere
        if task.metadata.get("form") == "factored":
            continue
        for wrap in _UNEVALUATED:
            text = wrap.format(g=gold.replace("\\%", ""))
            assert score(env, task, f"\\boxed{{{text}}}") == 0.0, (task.id, text)


def test_gold_value_never_appears_in_the_prompt_in_another_notation():
    """The value leak behind the copy attack: ``$x - 2$`` holds ``-2`` with a space, ``\\$4.50``
    holds ``4.5``; a family redraws such a task unless its answer is legitimately a given
    value (a median, a gcd)."""
    from llmgym.envs.math.build import gold_value_in_text
    from llmgym.envs.math.families import GOLD_MAY_APPEAR

    assert gold_value_in_text("-2", "Let $f(x) = 3x - 2$.")
    assert gold_value_in_text("4.5", "pens at \\$4.50 each")
    assert not gold_value_in_text("4.5", "pens at \\$4.55 each")
    for name in NAMES:
        if name in GOLD_MAY_APPEAR:
            continue
        for level in LEVELS:
            for index in range(6):
                task = task_of(name, level, index)
                statement = task.prompt.rsplit("\n\n", 1)[0]
                assert not gold_value_in_text(str(task.answer), statement), (task.id, task.answer)


def test_every_family_and_subtask_declares_a_final_form():
    from llmgym.rewards.math import FORMS

    for name in NAMES:
        task = task_of(name, 0.5, 0)
        assert task.metadata.get("form") in FORMS, name
        for sub in task.subtasks:
            assert sub.metadata.get("form") in FORMS, (name, sub.id)


@pytest.mark.parametrize("name", NAMES)
def test_every_gold_is_written_in_its_declared_form(name):
    """The gold's own text always passes (it is what the oracle boxes), so a family whose
    declared form its own golds do not have would reject every other right answer: check the
    golds themselves, of the task and of every subtask."""
    from llmgym.rewards.math.form import in_form
    from llmgym.rewards.math.parser import parse

    for level in (0.0, 0.25, 0.5, 0.75, 1.0):
        for index in range(4):
            task = task_of(name, level, index)
            for gold, form in [(task.answer, task.metadata["form"])] + [
                (s.answer, s.metadata["form"]) for s in task.subtasks
            ]:
                text = normalize(str(gold))
                assert in_form(parse(text), text, form), (task.id, gold, form)


def test_prompt_copy_attack_on_datasets_scores_zero(env):
    """GSM8K answers are numbers; MATH answers take the final form their gold has (``auto``):
    ``\\sqrt{72}`` copied from "Simplify $\\sqrt{72}$" is not ``6\\sqrt{2}``."""
    gsm = gsm8k_task(
        {"question": "Ana has 48 apples and gives away 48/2 of them. How many are left?",
         "answer": "48/2 = <<48/2=24>>24\n48 - 24 = <<48-24=24>>24\n#### 24"}, 0)  # fmt: skip
    problem = math_task(
        {"problem": "Simplify $\\sqrt{72}$.", "solution": "$\\boxed{6\\sqrt{2}}$"}, 0
    )
    for task, copies in ((gsm, ["48/2", "48 - 48/2", "\\frac{48}{2}"]), (problem, ["\\sqrt{72}"])):
        assert score(env, task, env.oracle(task)) == 1.0
        for text in copies:
            assert score(env, task, f"\\boxed{{{text}}}") == 0.0, (task.id, text)


# ---------------------------------------------------------------------------------------------
# The property: nothing built from the prompt alone reaches the oracle's reward
# ---------------------------------------------------------------------------------------------

_WRAPS = ("\\boxed{{{}}}", "{}", "The answer is ${}$.", "Final answer: {}")


@st.composite
def prompt_derived(draw):
    """A family's task and a response built only from its prompt: random substrings, whole
    math spans, arithmetic spans and sub-expressions, glued together, boxed or not."""
    name = draw(st.sampled_from(NAMES))
    task = task_of(
        name, draw(st.sampled_from((0.0, 0.25, 0.5, 0.75, 1.0))), draw(st.integers(0, 5))
    )
    prompt = task.prompt
    kinds = {
        "math": [m.group(1) or m.group(2) for m in _MATH_SPAN.finditer(prompt)],
        "arith": [m.group(0).strip() for m in _ARITH_SPAN.finditer(prompt)],
        "sub": sorted(prompt_expressions(prompt, max_tokens=12)),
    }
    pieces = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("substring", "math", "arith", "sub")))
        if kind == "substring" or not kinds[kind]:
            start = draw(st.integers(0, len(prompt) - 1))
            pieces.append(prompt[start : start + draw(st.integers(1, 40))])
        else:
            pieces.append(draw(st.sampled_from(kinds[kind])))
    body = draw(st.sampled_from(("", " "))).join(pieces)
    return task, draw(st.sampled_from(_WRAPS)).format(body)


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(prompt_derived())
def test_prompt_derived_responses_never_reach_the_oracle_reward_property(env, case):
    task, response = case
    answer = extract_answer(response)
    if answer is not None and canonical(answer) == canonical(str(task.answer)):
        return  # the gold's own text, where a family's answer is one of the given values
    assert score(env, task, response) < score(env, task, env.oracle(task)), (task.id, response)
