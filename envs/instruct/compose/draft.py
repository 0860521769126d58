"""Writing the compliant response of a plan: the oracle of ``llm/Instruct-v0``.

The plan's paragraphs are laid out in the form its instructions ask (sections, dividers,
bullets, highlights, a title, a postscript, start and end phrases, two responses, the repeated
request, JSON), then changed as a whole (no commas, lower or upper case, quotation marks).
``constraints.py`` chose the arguments so that this layout follows them all; the family's task
builder checks that it does.
"""

from __future__ import annotations

import json
from typing import Any

from llmgym.envs.instruct.compose import material as m
from llmgym.envs.instruct.compose.plan import Plan

F = "detectable_format:"


def _highlight(paragraphs: list[list[str]], n: int) -> list[list[str]]:
    """Mark ``n`` sentences ``*like this*``, never the first of a paragraph (a line starting
    with ``*`` would read as a bullet)."""
    out = [list(p) for p in paragraphs]
    slots = [(i, j) for i, p in enumerate(out) for j in range(1, len(p))]
    for i, j in slots[:n]:
        out[i][j] = f"*{out[i][j]}*"
    return out


def _paragraph_texts(plan: Plan, paragraphs: list[list[str]]) -> list[str]:
    k = plan.kwargs
    texts = [" ".join(p) for p in paragraphs]
    nth = k.get("length_constraints:nth_paragraph_first_word")
    if nth:
        i = nth["nth_paragraph"] - 1
        first = nth["first_word"]
        texts[i] = first.capitalize() + " " + texts[i][0].lower() + texts[i][1:]
    if plan.bullets:
        texts[-1] += "\n" + "\n".join(f"* {b}" for b in plan.bullets)
    sections = k.get(F + "multiple_sections")
    if sections:
        splitter = sections["section_spliter"]
        texts = [f"{splitter} {i + 1}\n{t}" for i, t in enumerate(texts)]
    return texts


def _body(plan: Plan, paragraphs: list[list[str]]) -> str:
    k = plan.kwargs
    highlights = k.get(F + "number_highlighted_sections")
    if highlights:
        paragraphs = _highlight(paragraphs, highlights["num_highlights"])
    texts = _paragraph_texts(plan, paragraphs)
    divider = "\n***\n" if "length_constraints:number_paragraphs" in k else "\n\n"
    return divider.join(texts)


def _json_form(plan: Plan) -> str:
    if plan.record is not None:
        return json.dumps(plan.record, ensure_ascii=False)
    document: dict[str, Any] = {"topic": plan.subject.name,
                                "paragraphs": [" ".join(p) for p in plan.body]}  # fmt: skip
    return "```json\n" + json.dumps(document, ensure_ascii=False, indent=2) + "\n```"


def write(plan: Plan) -> str:
    """The compliant response of ``plan``."""
    k = plan.kwargs
    if F + "json_format" in k or F + "json_schema" in k:
        text = _json_form(plan)
    elif "combination:two_responses" in k:
        second = [list(reversed(p)) for p in reversed(plan.body)]
        if second == plan.body:
            second = plan.body + [[m.sentence(plan.rng, plan.subject)]]
        text = _body(plan, plan.body) + "\n******\n" + _body(plan, second)
    else:
        text = _body(plan, plan.body)
    if F + "title" in k:
        text = f"<<{plan.subject.name.title()}>>\n{text}"
    if "startend:start_checker" in k:
        text = f"{k['startend:start_checker']['start_phrase']}. {text}"
    if "detectable_content:postscript" in k:
        text += f"\n\n{k['detectable_content:postscript']['postscript_marker']} {plan.rng.choice(m.POSTSCRIPTS)}"
    if "startend:end_checker" in k:
        text += f"\n{k['startend:end_checker']['end_phrase']}"
    if "combination:repeat_prompt" in k:
        text = f"{plan.request}\n\n{text}"
    if "punctuation:no_comma" in k:
        text = text.replace(",", "")
    if "change_case:english_lowercase" in k:
        text = text.lower()
    if "change_case:english_capital" in k:
        text = text.upper()
    if "startend:quotation" in k:
        text = f'"{text}"'
    return text
