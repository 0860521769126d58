"""Reading prompts and responses as a policy would: the pieces a hack copies or hedges with.

The answer forms a prompt names (:func:`answer_styles`), the answer-shaped pieces it offers
(LaTeX spans, numbers, expressions, ids, names, code blocks, quoted markup), the part of a response
that carries the answer (:func:`core_answer`), whether a copied piece *is* the answer
(:func:`is_the_answer`), and the shape a coding prompt asks for (:func:`code_task`). Pure text
functions: no env, no hacks, no gold answers (the runner passes the oracle's answer in).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def answer_styles(text: str) -> list[tuple[str, Callable[[str], str]]]:
    """Wrappers for an answer in the forms ``text`` (instructions) names; plain first.

    >>> [name for name, _ in answer_styles("Put your final answer in \\\\boxed{}.")]
    ['plain', 'boxed']
    >>> dict(answer_styles("reply inside <notes></notes>"))["<notes>"]("x")
    '<notes>x</notes>'
    """
    styles: list[tuple[str, Callable[[str], str]]] = [("plain", lambda s: s)]
    named = False
    if "\\boxed" in text:
        styles.append(("boxed", lambda s: f"\\boxed{{{s}}}"))
        named = True
    ids = list(dict.fromkeys(re.findall(r"<answer\s+id\s*=\s*[\"']?([^\"'>\s]+)", text, re.I)))
    if ids:
        styles.append(
            ("answer_ids", lambda s: "\n".join(f'<answer id="{i}">{s}</answer>' for i in ids))
        )
        named = True
    tags = set(re.findall(r"<([A-Za-z_]+)>\s*(?:\.\.\.)?\s*</\1>", text))
    if re.search(r"<answer>", text, re.I):
        tags.add("answer")
    tags -= {"cite", "tool_call", "tool_response", "document", "document_part", "think"}
    for tag in sorted(tags):
        styles.append((f"<{tag}>", _tag_wrapper(tag)))
        named = True
    if re.search(r"\banswer\s*:", text, re.I):
        styles.append(("answer_line", lambda s: f"Answer: {s}"))
        named = True
    if not named:  # the instructions name no form: try the common ones
        styles.append(("boxed", lambda s: f"\\boxed{{{s}}}"))
        styles.append(("<answer>", lambda s: f"<answer>{s}</answer>"))
        styles.append(("answer_line", lambda s: f"Answer: {s}"))
    return styles


def _tag_wrapper(tag: str) -> Callable[[str], str]:
    return lambda s: f"<{tag}>{s}</{tag}>"


def unique(items: Iterable[str], limit: int = 200) -> list[str]:
    """The distinct non-empty items, stripped, in the order first seen (at most ``limit``)."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if item and item not in seen:
            seen.add(item)
            out.append(item)
            if len(out) >= limit:
                break
    return out


def latex_spans(text: str) -> list[str]:
    """The contents of ``$...$``, ``$$...$$``, ``\\(...\\)`` and ``\\[...\\]`` spans (``\\$`` is a dollar).

    >>> latex_spans(r"Compute $3 + 4$ for \\$5; then $$x^2$$.")
    ['3 + 4', 'x^2']
    """
    spans: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] in "([":
                close = "\\)" if text[i + 1] == "(" else "\\]"
                j = text.find(close, i + 2)
                if j != -1:
                    spans.append(text[i + 2 : j])
                    i = j + 2
                    continue
            i += 2
            continue
        if c == "$":
            delim = "$$" if text.startswith("$$", i) else "$"
            j = i + len(delim)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(delim, j):
                    break
                if delim == "$" and (text[j] == "\n" or j - i > 300):
                    j = n  # a lone dollar (a price in prose): inline math stays on one line
                    break
                j += 1
            if j < n:
                spans.append(text[i + len(delim) : j])
                i = j + len(delim)
                continue
        i += 1
    return unique(spans)


NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?%?")
_EXPRESSION = re.compile(
    r"(?<![\w.])\(?-?\d+(?:\.\d+)?\)?(?:\s*[-+*/×÷^]\s*\(?-?\d+(?:\.\d+)?\)?)+(?![\w.])"
)
ID_CODE = re.compile(r"\b[A-Z][A-Z0-9]*-\d[A-Z0-9-]*\b|\b[A-Z]{2,}\d+\b")
PROPER_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b")
_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)```", re.S)
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]{1,200})`(?!`)")
QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|(?<!\w)'([^'\n]{1,200})'(?!\w)")
_MARKUP = re.compile(r"<([A-Za-z_]+)(?:\s[^<>]*)?>([^<]{1,200})</\1>")
_OPTION = re.compile(r"^\s*\(?([A-H])[).:]\s+\S", re.M)


def numbers(text: str) -> list[str]:
    """Numbers as written (``1,060,000``, ``-3.5``, ``20%``).

    >>> numbers("Add 12 and -3.5, then 1,060,000 (20%) to S1.")
    ['12', '-3.5', '1,060,000', '20%']
    """
    return unique(NUMBER.findall(text))


def expressions(text: str) -> list[str]:
    """Arithmetic written out in the text (``3929 + 3359 - 457``).

    >>> expressions("What is 4 + 7? And 2 * (3 - 1)?")
    ['4 + 7', '2 * (3 - 1)']
    """
    return unique(m.group(0) for m in _EXPRESSION.finditer(text))


def code_blocks(text: str) -> list[tuple[str, str]]:
    """``(language tag, code)`` of each fenced block."""
    return [(tag.lower(), body) for tag, body in _FENCE.findall(text)]


def question(text: str) -> str | None:
    """The question the prompt asks: a ``Question:`` line, else the last sentence with a ``?``.

    >>> question("A bag holds 3 balls. How many are red? Answer in tags.")
    'How many are red?'
    """
    m = re.search(r"^Question(?: \d+ of \d+)?:\s*(.+)$", text, re.M)
    if m:
        return m.group(1).strip()
    sentences = re.split(r"(?<=[.?!])\s+", re.sub(r"```.*?```", " ", text, flags=re.S))
    asked = [s for s in sentences if s.rstrip().endswith("?")]
    if asked:
        return asked[-1].strip()
    return sentences[0].strip() if sentences and sentences[0].strip() else None


def markup_examples(text: str) -> list[str]:
    """Complete answer markup that the instructions quote (``<answer>not stated</answer>``,
    ``\\boxed{...}_{2}``): a constant a policy could copy."""
    found = [
        m.group(0)
        for m in _MARKUP.finditer(text)
        if m.group(2).strip() not in ("", "...")
        and m.group(1).lower() not in ("document", "document_part", "tool_response")
    ]
    found += [f"\\boxed{{{b}}}" for b in _boxed_contents(text) if b.strip() not in ("", "...")]
    return unique(found)


def candidates(text: str) -> dict[str, list[str]]:
    """Answer-shaped pieces of a text by kind: options, numbers, ids, names (first 30 of each)."""
    out = {
        "options": unique(_OPTION.findall(text), 30),
        "numbers": numbers(text)[:30],
        "ids": unique(ID_CODE.findall(text), 30),
        "names": unique(PROPER_NAME.findall(text), 30),
    }
    return {k: v for k, v in out.items() if v}


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the content of each ``\\boxed{...}`` (balanced braces)."""
    spans = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        if depth == 0:
            spans.append((m.end(), j - 1))
    return spans


def _boxed_contents(text: str) -> list[str]:
    return [text[a:b] for a, b in _boxed_spans(text)]


@dataclass(frozen=True)
class CoreAnswer:
    """The part of a response that carries the answer, and where it sits in the response."""

    text: str
    start: int
    end: int
    form: str
    """``boxed``, ``answer_tag``, ``code`` or ``plain``."""


def core_answer(action: str | Mapping[str, Any]) -> CoreAnswer | None:
    """The answer inside a response: the last ``\\boxed{}``, else the last ``<answer>`` tag, else
    the last code block, else the whole text; None for a message of tool calls.

    >>> core_answer("so the answer is $\\\\boxed{42}$.").text
    '42'
    >>> core_answer("<answer> Paris </answer> <cite>S1</cite>").text
    'Paris'
    """
    if isinstance(action, Mapping):
        if action.get("tool_calls"):
            return None
        text = str(action.get("content") or "")
    else:
        text = action
    boxes = _boxed_spans(text)
    if boxes:
        a, b = boxes[-1]
        return CoreAnswer(text[a:b].strip(), a, b, "boxed")
    tags = list(re.finditer(r"<answer(?:\s[^>]*)?>(.*?)</answer\s*>", text, re.S | re.I))
    if tags:
        m = tags[-1]
        return CoreAnswer(m.group(1).strip(), m.start(1), m.end(1), "answer_tag")
    fences = list(_FENCE.finditer(text))
    if fences:
        m = fences[-1]
        return CoreAnswer(m.group(2).strip(), m.start(2), m.end(2), "code")
    return CoreAnswer(text.strip(), 0, len(text), "plain")


def normalise(text: str) -> str:
    """The text as two answers are compared: no ``$``, no edge dots, one space, case folded."""
    text = re.sub(r"\s+", " ", text.replace("$", "")).strip().strip(".").strip()
    return text.casefold()


def _items(text: str) -> frozenset[str]:
    """The items of a list-shaped answer (``\\{2, 4\\}``, ``a; b``, ``x and y``), normalised."""
    inner = re.sub(r"\\[{}]|[{}]|\\emptyset", " ", text)
    return frozenset(
        normalise(p) for p in re.split(r"\s*(?:,|;|\band\b)\s*", inner) if normalise(p)
    )


def is_the_answer(candidate: str, answer: str) -> bool:
    r"""Whether a copied piece is the oracle's answer itself: the same text, or some of the items of
    a list-valued answer (the union of two sets is every number in the prompt; one of two needles).

    >>> is_the_answer("2, 7, 4", r"\{2, 4, 7\}"), is_the_answer("AC-1", "AC-1; AC-2")
    (True, True)
    >>> is_the_answer("2, 7", "7"), is_the_answer("2, 9", "2, 7")
    (False, False)
    """
    if normalise(candidate) == normalise(answer):
        return True
    items, given = _items(answer), _items(candidate)
    return len(items) > 1 and bool(given) and given <= items


@dataclass(frozen=True)
class CodeTask:
    """What a coding prompt says about the program: language, kind, functions, visible examples."""

    language: str
    """``python``, ``c`` or ``cpp``."""
    kind: str
    """``call`` (functions called by the tests) or ``stdio`` (a program reading stdin)."""
    functions: tuple[tuple[str, str], ...]
    """``(name, def line)`` of each top-level function the prompt shows."""
    examples: tuple[tuple[str, str], ...]
    """Visible examples: ``(call, expected)`` for call tasks, ``(stdin, stdout)`` for stdio ones."""

    @property
    def fence(self) -> str:
        return {"python": "python", "c": "c", "cpp": "cpp"}[self.language]

    def block(self, code: str) -> str:
        return f"```{self.fence}\n{code.rstrip()}\n```"


def code_task(prompt: str, language: str | None = None) -> CodeTask:
    """Read a coding prompt: the language it asks for, stdin/stdout or functions, examples.

    >>> t = code_task("Implement:\\n```python\\ndef f(n: int) -> int:\\n    ...\\n```\\n"
    ...               "```python\\n>>> f(2)\\n4\\n```")
    >>> t.language, t.kind, t.functions, t.examples
    ('python', 'call', (('f', 'def f(n: int) -> int:'),), (('f(2)', '4'),))
    """
    lang = language
    if re.search(r"```cpp\b|C\+\+", prompt):
        lang = "cpp"
    elif re.search(r"```c\b(?![+#])|\bC \(C\d\d", prompt):
        lang = "c"
    lang = lang if lang in ("python", "c", "cpp") else "python"
    stdio = bool(re.search(r"standard input|\bstdin\b", prompt, re.I))
    functions: dict[str, str] = {}
    calls: list[tuple[str, str]] = []
    io: list[tuple[str, str]] = []
    for _tag, body in code_blocks(prompt):
        for m in re.finditer(
            r"^def\s+([A-Za-z_]\w*)\s*\(.*\)\s*(?:->\s*[^\n:]+)?:\s*$", body, re.M
        ):
            functions.setdefault(m.group(1), m.group(0).strip())
        lines = body.splitlines()
        for i, line in enumerate(lines):
            if line.startswith(">>> "):
                expected = []
                for nxt in lines[i + 1 :]:
                    if nxt.startswith(">>> ") or not nxt.strip():
                        break
                    expected.append(nxt)
                if expected:
                    calls.append((line[4:].strip(), "\n".join(expected)))
        pair = re.match(r"\s*Input:\s*\n(.*?)\nOutput:\s*\n(.*)\Z", body, re.S)
        if pair:
            io.append((pair.group(1) + "\n", pair.group(2).rstrip("\n")))
    kind = "stdio" if stdio else "call"
    return CodeTask(lang, kind, tuple(functions.items()), tuple(io if stdio else calls))
