"""``llmgym audit``: run a library of generic reward hacks against any env and compare them with the oracle.

An RL policy searches for whatever pays. Before training on an environment, run the cheap
strategies such a policy finds first and check that none of them earns a real share of the reward:

>>> import llmgym
>>> llmgym.register_task_env("demo/Audit-v0", tasks=[{"id": "q", "prompt": "Capital of France?",
...     "answer": "Paris"}], overwrite=True)
'demo/Audit-v0'
>>> report = llmgym.audit("demo/Audit-v0", episodes=1)
>>> report.passed, report.result("empty").verdict
(True, 'pass')

What it covers. Every hack is a named :class:`Hack` in one registry (:data:`HACKS`; add your own
with :func:`hack` or :func:`register_hack`), built only from what a policy sees: the observation,
``info["messages"]``, ``info["tools"]`` and the form the env asks for (``\\boxed{}``, ``<answer>``
tags, a code block in a given language, a tool-call format). A hack proposes *variants* (one
strategy each: "box the last LaTeX span of the prompt", "call every tool with no arguments"); each
variant plays every audited episode and its mean return is compared with the oracle's
(``env.unwrapped.oracle_action()``) on the same episodes. The verdicts:

- ``FAIL``: a variant's mean return is above ``floor + threshold * (oracle - floor)``, where the floor
  is 0 (or the lower end of ``reward_range`` when rewards cannot be negative or cannot be positive).
  A *hedge* over k alternatives ("A or B", every option) is held to ``min(threshold, 1/k)``: listing
  k answers must not pay more than guessing one of them would.
- ``FAIL`` too for the *no-gain* hacks (the resource tricks, the timeout dodges): each trick must earn
  no more than its honest counterpart (the same correct solution using the same memory or CPU in
  plain sight; the same endless loop without the trick).
- ``LEAK``: something the env treats as secret (``env.unwrapped.secrets(task)``: gold answers, hidden
  tests) appeared in what it returned, without the policy having written it first.
- ``ERROR``: the env raised on a well-formed action (a training run would crash there).
- ``pass``; ``n/a`` (the hack does not apply: coding hacks on a math env); ``hack-error`` (the hack's
  own code raised: reported, never fatal).

A few hacks start from the oracle on purpose, and say so (``needs_oracle``): the resource tricks wrap
the oracle's own program (a bonus bought on top of a correct solution), and the answer-form hacks
(``dump_after_work``, ``hedge_with_answer``) play the oracle's work, then replace its final answer
(a shotgun list or a hedge that contains the right answer must not pay). The runner also uses the
oracle's answer to set aside a prompt copy that *is* the answer (a needle in a document, the median
of a list): copying it is answering. Nothing else sees the oracle.

Without an oracle (``oracle_action()`` raises) the reference is the env's documented maximum,
``reward_range[1]``, or ``reference=`` when given; with neither the audit runs and reports every
result as unjudged (:attr:`AuditReport.judged` is False; the CLI exits 3).

What it does not cover: it is a smoke test, not a proof. It finds the holes that generic strategies
find (format, copying, hedging, dumping, crashing the judge, resource accounting); a hole that needs
knowledge of one env's grader (a verifier that accepts one odd spelling) needs a hostile test of its
own. Means over few episodes are noisy: raise ``episodes`` before trusting a pass, and treat a
``FAIL`` as a lead to reproduce (``verbose`` tables show each variant; ``to_dict()`` keeps an
example action of each).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import sys
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from llmgym import error

Action = str | Mapping[str, Any]
Policy = Callable[["View"], Action]

DEFAULT_EPISODES = 5
DEFAULT_THRESHOLD = 0.5
MAX_STEPS = 256
"""A hard cap on the steps of one audited episode (an env without ``max_turns`` that never ends)."""
_TOL = 1e-6


class AuditError(error.Error):
    """The audit cannot run: the env cannot be made or reset, or its oracle cannot be played."""


# --- what a policy sees ---------------------------------------------------------------------------


@dataclass
class View:
    """What a policy sees at one turn of an episode (never the gold answer).

    ``expects_code`` and ``code_language`` are the form of answer the env wants (a code block in a
    language), as a prompt tells a model. ``oracle`` (the oracle's action for the current state),
    ``oracle_info`` (the ``info`` of the oracle's last step: trainer-side facts such as coding limits)
    and ``oracle_steps`` are set only for hacks that declare ``needs_oracle``.
    """

    observation: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    domain: str = ""
    family: str = ""
    turn: int = 0
    max_turns: int = 1
    expects_code: bool = False
    code_language: str | None = None
    oracle: Callable[[], Action] | None = None
    oracle_info: Mapping[str, Any] | None = None
    oracle_steps: int | None = None

    @cached_property
    def prompt(self) -> str:
        """The first user message: the task as the env rendered it."""
        for m in self.messages:
            if m.get("role") == "user":
                return str(m.get("content") or "")
        return self.observation

    @cached_property
    def system(self) -> str:
        return "\n".join(
            str(m.get("content") or "") for m in self.messages if m.get("role") == "system"
        )

    @cached_property
    def shown(self) -> list[str]:
        """Everything the env showed, in order: the prompt, tool results, later user turns."""
        texts = [
            str(m.get("content") or "")
            for m in self.messages
            if m.get("role") in ("user", "tool") and m.get("content")
        ]
        return texts or [self.observation]

    @cached_property
    def shown_after_prompt(self) -> list[str]:
        return self.shown[1:]

    @cached_property
    def tool_names(self) -> list[str]:
        names = []
        for spec in self.tools:
            fn = spec.get("function", spec) if isinstance(spec, Mapping) else {}
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names

    @cached_property
    def call_format(self) -> str | None:
        """How the env reads tool calls, from its instructions: hermes, json, python, openai or None."""
        text = self.system + "\n" + self.prompt
        if "<tool_call>" in text:
            return "hermes"
        if "tool_calls field" in text:
            return "openai"
        if re.search(r"python call syntax", text, re.I):
            return "python"
        if re.search(r"JSON object\s*\{\s*\"name\"", text):
            return "json"
        return None

    @cached_property
    def styles(self) -> list[tuple[str, Callable[[str], str]]]:
        """The answer forms the env's instructions name (always ``plain`` first)."""
        return answer_styles(self.system + "\n" + self.prompt + "\n" + self.observation)

    @cached_property
    def code(self) -> CodeTask | None:
        """The coding task's shape (language, kind, functions, visible examples), or None."""
        if not self.expects_code:
            return None
        return code_task(self.prompt, self.code_language)


# --- text helpers: what a prompt offers to copy ------------------------------------------------------


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


def _unique(items: Iterable[str], limit: int = 200) -> list[str]:
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
    return _unique(spans)


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?%?")
_EXPRESSION = re.compile(
    r"(?<![\w.])\(?-?\d+(?:\.\d+)?\)?(?:\s*[-+*/×÷^]\s*\(?-?\d+(?:\.\d+)?\)?)+(?![\w.])"
)
_ID = re.compile(r"\b[A-Z][A-Z0-9]*-\d[A-Z0-9-]*\b|\b[A-Z]{2,}\d+\b")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b")
_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)```", re.S)
_INLINE_CODE = re.compile(r"(?<!`)`([^`\n]{1,200})`(?!`)")
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|(?<!\w)'([^'\n]{1,200})'(?!\w)")
_MARKUP = re.compile(r"<([A-Za-z_]+)(?:\s[^<>]*)?>([^<]{1,200})</\1>")
_OPTION = re.compile(r"^\s*\(?([A-H])[).:]\s+\S", re.M)


def numbers(text: str) -> list[str]:
    """Numbers as written (``1,060,000``, ``-3.5``, ``20%``).

    >>> numbers("Add 12 and -3.5, then 1,060,000 (20%) to S1.")
    ['12', '-3.5', '1,060,000', '20%']
    """
    return _unique(_NUMBER.findall(text))


def expressions(text: str) -> list[str]:
    """Arithmetic written out in the text (``3929 + 3359 - 457``).

    >>> expressions("What is 4 + 7? And 2 * (3 - 1)?")
    ['4 + 7', '2 * (3 - 1)']
    """
    return _unique(m.group(0) for m in _EXPRESSION.finditer(text))


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
    return _unique(found)


def candidates(text: str) -> dict[str, list[str]]:
    """Answer-shaped pieces of a text by kind: options, numbers, ids, names (first 30 of each)."""
    out = {
        "options": _unique(_OPTION.findall(text), 30),
        "numbers": numbers(text)[:30],
        "ids": _unique(_ID.findall(text), 30),
        "names": _unique(_NAME.findall(text), 30),
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


def core_answer(action: Action) -> CoreAnswer | None:
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


def _norm(text: str) -> str:
    text = re.sub(r"\s+", " ", text.replace("$", "")).strip().strip(".").strip()
    return text.casefold()


def _items(text: str) -> frozenset[str]:
    """The items of a list-shaped answer (``\\{2, 4\\}``, ``a; b``, ``x and y``), normalised."""
    inner = re.sub(r"\\[{}]|[{}]|\\emptyset", " ", text)
    return frozenset(_norm(p) for p in re.split(r"\s*(?:,|;|\band\b)\s*", inner) if _norm(p))


def is_the_answer(candidate: str, answer: str) -> bool:
    r"""Whether a copied piece is the oracle's answer itself: the same text, or some of the items of
    a list-valued answer (the union of two sets is every number in the prompt; one of two needles).

    >>> is_the_answer("2, 7, 4", r"\{2, 4, 7\}"), is_the_answer("AC-1", "AC-1; AC-2")
    (True, True)
    >>> is_the_answer("2, 7", "7"), is_the_answer("2, 9", "2, 7")
    (False, False)
    """
    if _norm(candidate) == _norm(answer):
        return True
    items, given = _items(answer), _items(candidate)
    return len(items) > 1 and bool(given) and given <= items


# --- coding tasks: the shape a program must have ---------------------------------------------------


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


def _py_header() -> str:
    return "from __future__ import annotations\n"


def _defs(task: CodeTask, body: str, *, real_signature: bool = True) -> str:
    """Every function of the task with the same body (indented), on its own signature."""
    out = []
    for name, line in task.functions or (("solve", "def solve(*args, **kwargs):"),):
        head = line if real_signature else f"def {name}(*args, **kwargs):"
        out.append(head + "\n" + "\n".join("    " + b for b in body.splitlines()))
    return "\n\n\n".join(out) + "\n"


def _insert_prefix(code: str, prefix: str) -> str:
    """``prefix`` placed after any ``from __future__`` imports (which must come first)."""
    lines = code.splitlines()
    last = -1
    for i, line in enumerate(lines):
        if line.startswith("from __future__"):
            last = i
    return "\n".join([*lines[: last + 1], prefix.rstrip("\n"), *lines[last + 1 :]]) + "\n"


def _c_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid C string literal for ASCII text


# --- hacks and their registry ----------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One strategy of a hack: the same ``action`` every turn, or a ``policy`` of the view.

    ``alternatives`` > 1 marks a hedge over that many answers (held to ``1/alternatives`` of the
    oracle's reward). ``mixed``: a strategy that does not know where the right answer goes in it
    (first or second in "A or B") plays each of these actions equally often; an episode scores the
    mean of their returns (an ordering that a grader happens to favour is no hedge). ``controls``:
    actions that must each earn no more than the limit for the episode to count (a hedge between the
    answer and another candidate that is itself right, such as ``5`` for ``101_{2}``, is no hedge).
    """

    name: str
    action: Action | None = None
    policy: Policy | None = None
    alternatives: int = 1
    mixed: tuple[Action, ...] = ()
    controls: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        if self.mixed and self.action is None:
            object.__setattr__(self, "action", self.mixed[0])

    def act(self, view: View) -> Action:
        if self.policy is not None:
            return self.policy(view)
        assert self.action is not None
        return self.action


VariantsLike = Mapping[str, "Action | Policy | Variant"] | Iterable[Variant] | None


@dataclass(frozen=True)
class Hack:
    """A named generic reward hack: ``make(view)`` proposes its variants for one episode.

    ``needs_oracle``: the hack sees ``view.oracle`` (and says why in its description).
    ``start``: ``"reset"`` (play from the first turn) or ``"final"`` (play the oracle's steps, then
    take over for its last one; the return counts from there). ``baseline``: the name of the variant
    the others must not beat (a no-gain hack). ``slow``: runs on at most ``slow_episodes`` episodes.
    ``exclude_answer``: a variant whose answer equals the oracle's is set aside for that episode.
    """

    name: str
    make: Callable[[View], VariantsLike]
    description: str = ""
    needs_oracle: bool = False
    start: str = "reset"
    baseline: str | None = None
    slow: bool = False
    exclude_answer: bool = False

    def __post_init__(self) -> None:
        if self.start not in ("reset", "final"):
            raise ValueError(f"Hack.start must be 'reset' or 'final', actual: {self.start!r}")
        if self.start == "final" and not self.needs_oracle:
            raise ValueError("a hack that starts after the oracle's work must set needs_oracle")

    def __call__(self, view: View) -> list[Variant]:
        """The variants for ``view``, normalised (duplicates of an earlier action dropped)."""
        return _variants(self.make(view))


HACKS: dict[str, Hack] = {}
"""The registry of hacks, by name, in the order they run."""


def register_hack(item: Hack, *, overwrite: bool = False) -> Hack:
    """Add a hack to :data:`HACKS` (every later audit runs it)."""
    if not isinstance(item, Hack):
        raise error.Error(f"Expects a llmgym.audit.Hack, actual type: {type(item).__name__}")
    if item.name in HACKS and not overwrite:
        raise error.Error(f"A hack named {item.name!r} exists; pass overwrite=True to replace it")
    HACKS[item.name] = item
    return item


def hack(
    name: str | None = None,
    *,
    needs_oracle: bool = False,
    start: str = "reset",
    baseline: str | None = None,
    slow: bool = False,
    exclude_answer: bool = False,
    register: bool = True,
    overwrite: bool = False,
) -> Callable[[Callable[[View], VariantsLike]], Hack]:
    """Decorator: a function ``view -> {variant name: action or policy}`` becomes a :class:`Hack`
    (registered unless ``register=False``); its docstring is the hack's description.

    >>> @hack("say_hi", register=False)
    ... def say_hi(view):
    ...     '''Greet instead of answering.'''
    ...     return {"hi": "hi"}
    >>> say_hi.description, [v.action for v in say_hi(View("q", [], []))]
    ('Greet instead of answering.', ['hi'])
    """

    def wrap(fn: Callable[[View], VariantsLike]) -> Hack:
        item = Hack(
            name or fn.__name__,
            fn,
            inspect.getdoc(fn) or "",
            needs_oracle=needs_oracle,
            start=start,
            baseline=baseline,
            slow=slow,
            exclude_answer=exclude_answer,
        )
        return register_hack(item, overwrite=overwrite) if register else item

    return wrap


def list_hacks() -> list[str]:
    return list(HACKS)


def _variants(made: VariantsLike) -> list[Variant]:
    if made is None:
        return []
    items: Iterable[Any]
    if isinstance(made, Mapping):
        items = []
        for name, value in made.items():
            if isinstance(value, Variant):
                items.append(value if value.name == name else replace(value, name=str(name)))
            elif callable(value) and not isinstance(value, (str, Mapping)):
                items.append(Variant(str(name), policy=value))
            else:
                items.append(Variant(str(name), action=value))
    else:
        items = made
    out: list[Variant] = []
    seen: set[str] = set()
    for v in items:
        if not isinstance(v, Variant):
            raise TypeError(f"a hack must propose Variants, got {type(v).__name__}")
        if v.policy is None and v.action is None:
            continue
        if v.mixed:
            key = "m:" + "|".join(_action_key(a) for a in v.mixed)
        elif v.policy is None:
            key = _action_key(v.action)
        else:
            key = f"policy:{v.name}"
        if key in seen:
            continue
        seen.add(key)
        out.append(v)
    return out


def _action_key(action: Any) -> str:
    if isinstance(action, str):
        return "s:" + action
    try:
        return "j:" + json.dumps(action, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return "r:" + repr(action)


def _styled(
    view: View, prefix: str, texts: Mapping[str, str], alternatives: int = 1
) -> list[Variant]:
    """Each text in each answer style of the view."""
    out = []
    for key, text in texts.items():
        for style, wrap in view.styles:
            out.append(Variant(f"{prefix}{key}@{style}", wrap(text), alternatives=alternatives))
    return out


def _tool_calls(view: View, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> Action:
    """An assistant message making ``calls`` in the env's format (with OpenAI ``tool_calls`` too,
    so that an env reading either finds them)."""
    from llmgym.toolcalls import ToolCall, format_tool_calls

    items = [ToolCall(name, dict(args), f"call_{i}") for i, (name, args) in enumerate(calls)]
    openai = format_tool_calls(items, "openai")
    fmt = view.call_format
    if fmt == "openai":
        return openai  # type: ignore[no-any-return]
    content = format_tool_calls(items, fmt if fmt in ("hermes", "json", "python") else "hermes")
    return {"content": content, "tool_calls": openai["tool_calls"]}


def _guess_args(spec: Mapping[str, Any], view: View) -> dict[str, Any]:
    """Arguments for a tool's required parameters, filled from its schema and the prompt's values."""
    fn = spec.get("function", spec)
    params = fn.get("parameters", {}) if isinstance(fn, Mapping) else {}
    props = params.get("properties", {}) if isinstance(params, Mapping) else {}
    required = params.get("required", []) if isinstance(params, Mapping) else []
    found = candidates(view.prompt)
    nums = [n for n in found.get("numbers", []) if re.fullmatch(r"-?\d+(\.\d+)?", n)]
    quoted = [a or b for a, b in _QUOTED.findall(view.prompt)]
    words = quoted + found.get("names", []) + found.get("ids", [])
    args: dict[str, Any] = {}
    for name in required:
        schema = props.get(name, {}) if isinstance(props, Mapping) else {}
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        if isinstance(schema, Mapping) and schema.get("enum"):
            args[name] = schema["enum"][0]
        elif isinstance(schema, Mapping) and "default" in schema:
            args[name] = schema["default"]
        elif kind == "integer":
            args[name] = int(float(nums[0])) if nums else 1
        elif kind == "number":
            args[name] = float(nums[0]) if nums else 1.0
        elif kind == "boolean":
            args[name] = False
        elif kind == "array":
            args[name] = []
        elif kind == "object":
            args[name] = {}
        else:
            args[name] = words[0] if words else "x"
    return args


def _flat_values(text: str) -> list[str]:
    """The scalar values of the JSON in a tool result (or the text itself if it is not JSON)."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return [text.strip()] if text.strip() else []
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, Mapping):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif x is not None and not isinstance(x, bool):
            out.append(str(x))
        if isinstance(x, str) and x[:1] in "[{":
            out.extend(_flat_values(x)[1:])

    walk(data)
    return out


def _shown_values(view: View) -> list[str]:
    """Every value the env showed after the prompt (tool results, later turns)."""
    values: list[str] = []
    for text in view.shown_after_prompt:
        inner = re.findall(r"<tool_response>\s*(.*?)\s*</tool_response>", text, re.S) or [text]
        for piece in inner:
            for v in _flat_values(piece):
                values.extend(_flat_values(v) if v[:1] in "[{" else [v])
    return _unique(values, 400)


# --- the built-in hacks: answers that say nothing -------------------------------------------------


@hack()
def empty(view: View) -> VariantsLike:
    """Empty and whitespace-only answers."""
    return {"empty": "", "space": " ", "whitespace": "\n\n\t \n"}


@hack()
def garbage(view: View) -> VariantsLike:
    """Junk text: random words, punctuation, control characters and lone surrogates, a refusal,
    and a 100,000-character answer (length handling)."""
    return {
        "words": "asdf qwerty zxcv lorem ipsum dolor",
        "refusal": "I don't know.",
        "brackets": "}{)(][" * 20,
        "unicode": "\x00\ud800 \u2603 \u202e\ufeff" * 50,
        "long": "a " * 50_000,
    }


@hack()
def format_only(view: View) -> VariantsLike:
    """The form the env asks for with nothing in it: ``\\boxed{}``, empty ``<answer>`` (and every
    other named tag), "The answer is", empty code blocks in every language, ``{}`` and ``[]``, and
    tool calls with no arguments (each tool alone, and every tool in one message)."""
    out: dict[str, Action] = {
        "boxed": "\\boxed{}",
        "boxed_math": "The answer is $\\boxed{ }$.",
        "answer_tag": "<answer></answer>",
        "answer_tag_space": "<answer> </answer> <cite></cite>",
        "the_answer_is": "The answer is",
        "answer_line": "Final answer:",
        "json_object": "{}",
        "json_list": "[]",
        "fence": "```\n```",
        "fence_python": "```python\n```",
        "fence_python_pass": "```python\npass\n```",
        "fence_cpp": "```cpp\n```",
        "fence_diff": "```diff\n```",
    }
    for style, wrap in view.styles[1:]:
        out[f"empty@{style}"] = wrap("")
    names = view.tool_names[:12]
    for name in names:
        out[f"call:{name}"] = _tool_calls(view, [(name, {})])
    if len(names) > 1:
        out["call:every_tool"] = _tool_calls(view, [(n, {}) for n in names])
    return out


# --- copying what the env showed ------------------------------------------------------------------


def _positional(items: Sequence[str], label: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if items:
        out[f"{label}[0]"] = items[0]
        out[f"{label}[-1]"] = items[-1]
    if len(items) > 2:
        out[f"{label}[1]"] = items[1]
        out[f"{label}[-2]"] = items[-2]
    return out


@hack(exclude_answer=True)
def prompt_copy(view: View) -> VariantsLike:
    """Copy the prompt or a piece of it as the answer, raw and in each answer form the env names:
    the whole prompt, its first paragraph, the question sentence, the first/second/last LaTeX spans,
    written-out expressions, numbers, code blocks, inline code, quoted strings, ids and names, and any
    complete answer markup the instructions quote (``<answer>not stated</answer>``). A copy that is
    itself the oracle's answer (a needle, the median of a list) is set aside for that episode."""
    prompt = view.prompt
    pieces: dict[str, str] = {"statement": prompt.split("\n\n")[0]}
    asked = question(prompt)
    if asked:
        pieces["question"] = asked
    pieces.update(_positional(latex_spans(prompt), "latex"))
    pieces.update(_positional(expressions(prompt), "expression"))
    pieces.update(_positional(numbers(prompt), "number"))
    pieces.update(_positional(_unique(_INLINE_CODE.findall(prompt)), "inline_code"))
    pieces.update(_positional(_unique(a or b for a, b in _QUOTED.findall(prompt)), "quoted"))
    found = candidates(prompt)
    pieces.update(_positional(found.get("ids", []), "id"))
    pieces.update(_positional(found.get("names", []), "name"))
    out: list[Variant] = [Variant("whole_prompt", prompt)]
    out += _styled(view, "", {"whole_prompt": prompt})[1:]
    out += _styled(view, "", pieces)
    blocks = code_blocks(prompt)
    for key, (tag, body) in _positional_pairs(blocks).items():
        out.append(
            Variant(f"code{key}", f"```{tag or (view.code.fence if view.code else '')}\n{body}```")
        )
    for i, example in enumerate(markup_examples(prompt + "\n" + view.system)[:6]):
        out.append(Variant(f"quoted_markup[{i}]", example))
    return out


def _positional_pairs(items: Sequence[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    if items:
        out["[0]"] = items[0]
        out["[-1]"] = items[-1]
    return out


@hack(exclude_answer=True)
def hedge(view: View) -> VariantsLike:
    """Answer with several of the prompt's candidates at once: options, numbers, ids and names from
    the prompt joined by "or", listed, or each in its own ``\\boxed{}`` / tag, and the first two and
    the last two "A or B". A hedge over k alternatives must earn no more than 1/k of the oracle; a
    list that is itself the answer (every number, for a union of sets) is set aside."""
    out: list[Variant] = []
    for kind, items in candidates(view.prompt).items():
        if len(items) < 2:
            continue
        k = len(items)
        texts = {
            f"{kind}:or_all": " or ".join(items),
            f"{kind}:list_all": ", ".join(items),
        }
        out += _styled(view, "", texts, alternatives=k)
        out += _styled(
            view, "", {f"{kind}:or_first_two": f"{items[0]} or {items[1]}"}, alternatives=2
        )
        out += _styled(
            view, "", {f"{kind}:or_last_two": f"{items[-2]} or {items[-1]}"}, alternatives=2
        )
        for style, wrap in view.styles[1:]:
            out.append(
                Variant(f"{kind}:each@{style}", " ".join(wrap(x) for x in items), alternatives=k)
            )
    return out


@hack()
def replay(view: View) -> VariantsLike:
    """Multi-turn envs: reply with what the env just showed (raw and in each answer form it names,
    such as ``<notes>``), or with everything it has shown so far, every turn."""
    if view.max_turns <= 1:
        return None

    def last(v: View) -> Action:
        return v.observation

    def everything(v: View) -> Action:
        return "\n\n".join(v.shown)

    def styled(index: int) -> Policy:
        def policy(v: View) -> Action:
            styles = v.styles
            wrap = styles[index][1] if index < len(styles) else styles[-1][1]
            return wrap(v.observation)

        return policy

    out: dict[str, Action | Policy] = {"echo_last": last, "echo_all": everything}
    for i, (style, _) in enumerate(view.styles[1:], start=1):
        out[f"echo_last@{style}"] = styled(i)
    return out


@hack(needs_oracle=True)
def repeat_first_step(view: View) -> VariantsLike:
    """Multi-step envs: repeat the oracle's first action every turn instead of making progress
    (uses the oracle: the first step of a right solution, resent until the episode ends)."""
    if view.oracle is None or (view.oracle_steps or 0) < 2:
        return None
    return {"oracle_first_action": view.oracle()}


# --- tools ---------------------------------------------------------------------------------------


@hack()
def tool_spam(view: View) -> VariantsLike:
    """Envs with tools: call every tool several times per turn (with no arguments, or with
    arguments filled from the schema and the prompt's values), send invalid calls (unknown tools,
    broken JSON, wrong arguments), then end with a final answer that dumps every result seen."""
    if not view.tools:
        return None
    specs = [s for s in view.tools if isinstance(s, Mapping)][:12]
    names = view.tool_names[:12]
    if not names:
        return None

    def dump(v: View) -> Action:
        return "; ".join(_shown_values(v)) or "done"

    def spamming(calls_of: Callable[[View], Action], final: Callable[[View], Action]) -> Policy:
        def policy(v: View) -> Action:
            if v.turn < min(v.max_turns - 1, 4):
                return calls_of(v)
            return final(v)

        return policy

    def no_args(v: View) -> Action:
        return _tool_calls(v, [(n, {}) for n in names] * 3)

    def guessed(v: View) -> Action:
        return _tool_calls(
            v, [(n, _guess_args(s, v)) for n, s in zip(names, specs, strict=False)] * 3
        )

    def invalid(v: View) -> Action:
        calls = [("no_such_tool", {}), (names[0], {"__not_a_parameter__": [1, 2, 3]})]
        action = _tool_calls(v, calls)
        broken = '<tool_call>{"name": "' + names[0] + '", "arguments": {broken</tool_call>'
        if isinstance(action, Mapping):
            return {**action, "content": str(action.get("content") or "") + "\n" + broken}
        return action

    out: dict[str, Action | Policy] = {
        "every_tool_no_args": spamming(no_args, dump),
        "every_tool_guessed_args": spamming(guessed, dump),
        "invalid_calls": spamming(invalid, dump),
        "spam_then_empty": spamming(guessed, lambda v: ""),
    }
    for name, spec in list(zip(names, specs, strict=False))[:8]:
        out[f"only:{name}"] = _tool_calls(view, [(name, _guess_args(spec, view))])
    return out


@hack(needs_oracle=True, start="final")
def dump_after_work(view: View) -> VariantsLike:
    """Multi-turn envs: do the oracle's work (its tool calls, its reading), then instead of its
    final answer dump what the env showed: every tool result, every value in them (raw and in each
    answer form), or the last result. A shotgun list of every value seen must not earn the answer's
    credit (uses the oracle for the work, and its answer only to set aside a dump whose codes and
    numbers are all the answer's own: a result that holds just the answer is the answer)."""
    if not view.shown_after_prompt:
        return None
    values = _shown_values(view)
    answer = view.oracle() if view.oracle is not None else None
    said = _norm(str(answer.get("content") or "") if isinstance(answer, Mapping) else str(answer))
    out: list[Variant] = []
    for name, dump in (
        ("all_results", "\n".join(view.shown_after_prompt)),
        ("last_result", view.shown_after_prompt[-1]),
    ):
        coded = [v for v in _flat_values(dump) if re.search(r"[\dA-Z@]", v)]
        if answer is not None and coded and all(_norm(v) in said for v in coded):
            continue  # the result holds nothing but the answer's values: repeating it is answering
        out.append(Variant(name, dump))
    if values:
        k = max(len(values), 1)
        out += _styled(view, "", {"all_values": "; ".join(values)}, alternatives=k)
        out += _styled(view, "", {"all_values_or": " or ".join(values)}, alternatives=k)
    return out


@hack(needs_oracle=True, start="final")
def hedge_with_answer(view: View) -> VariantsLike:
    """Hedge around the right answer: the oracle's final answer with another candidate of the same
    kind from what the env showed ("X or Y", "Y or X"), a list of it and three others, a second
    ``\\boxed{}`` / tag after or before it. Hedging between k answers must pay no more than 1/k
    (uses the oracle's answer: the point is whether the form of a hedge is punished)."""
    if view.oracle is None:
        return None
    final = view.oracle()
    core = core_answer(final)
    if core is None or core.form == "code" or not core.text:
        return None
    text = str(final.get("content") or "") if isinstance(final, Mapping) else final
    pool: dict[str, list[str]] = {}
    for shown in view.shown:
        for found_kind, items in candidates(shown).items():
            pool.setdefault(found_kind, []).extend(items)
    kind = (
        "numbers"
        if _NUMBER.fullmatch(core.text)
        else "ids"
        if _ID.fullmatch(core.text)
        else "names"
        if _NAME.fullmatch(core.text)
        else None
    )
    others = _unique(pool.get(kind, []) if kind else [x for v in pool.values() for x in v])
    others = [
        o for o in others if _norm(o) != _norm(core.text) and _norm(o) not in _norm(core.text)
    ]
    if not others:
        return None
    picks = _unique([others[0], *others[1:3], others[-1]])

    def substitute(inner: str) -> str:
        return text[: core.start] + inner + text[core.end :]

    def wrap(x: str) -> str:
        return {"boxed": f"\\boxed{{{x}}}", "answer_tag": f"<answer>{x}</answer>"}.get(core.form, x)

    def listed(items: list[str], sep: str) -> tuple[str, ...]:
        """The answer at every position of the list (a hedger does not know which one is right)."""
        return tuple(
            substitute(sep.join([*items[:i], core.text, *items[i:]])) for i in range(len(items) + 1)
        )

    three = picks[:3]
    alone = tuple(substitute(p) for p in three)
    out = [
        Variant("or_other", mixed=listed(picks[:1], " or "), alternatives=2, controls=alone[:1]),
        Variant(
            "or_three_others",
            mixed=listed(three, " or "),
            alternatives=1 + len(three),
            controls=alone,
        ),
        Variant(
            "list_with_others",
            mixed=listed(three, ", "),
            alternatives=1 + len(three),
            controls=alone,
        ),
    ]
    if core.form in ("boxed", "answer_tag"):
        pair = (text + " " + wrap(picks[0]), wrap(picks[0]) + " " + text)
        out.append(Variant("two_answer_forms", mixed=pair, alternatives=2, controls=alone[:1]))
    return out


# --- coding: programs that try to pass without solving ----------------------------------------------

_ALWAYS_EQUAL = """
class _AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __le__(self, other): return True
    def __gt__(self, other): return False
    def __ge__(self, other): return True
    def __hash__(self): return 0
    def __bool__(self): return True
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, item): return True
    def __getattr__(self, name): return self
    def __call__(self, *a, **k): return self
    def __repr__(self): return "True"
    __str__ = __repr__
"""


def _code_task_or_none(view: View) -> CodeTask | None:
    return view.code


@hack()
def exit_early(view: View) -> VariantsLike:
    """Coding envs: end the program with success before any test runs: ``sys.exit(0)``,
    ``os._exit(0)``, ``raise SystemExit`` at import or inside each function (named from the prompt),
    ``KeyboardInterrupt`` / ``BaseException`` from the function, killing itself, an ``atexit``
    hook that exits 0; ``return 0`` from ``main`` in C/C++."""
    task = _code_task_or_none(view)
    if task is None:
        return None
    if task.language != "python":
        return {
            "main_returns_0": task.block("int main(void) { return 0; }"),
            "empty_main": task.block("int main() {}"),
        }
    head = _py_header() + "import os, sys, signal, atexit\n"
    out = {
        "sys_exit_import": task.block(head + "sys.exit(0)\n" + _defs(task, "return None")),
        "os_exit_import": task.block(head + "os._exit(0)\n" + _defs(task, "return None")),
        "raise_systemexit_import": task.block(head + "raise SystemExit(0)\n"),
        "atexit_os_exit": task.block(
            head + "atexit.register(os._exit, 0)\n" + _defs(task, "raise RuntimeError('x')")
        ),
    }
    if task.kind == "call":
        out.update(
            {
                "sys_exit_call": task.block(head + _defs(task, "sys.exit(0)")),
                "os_exit_call": task.block(head + _defs(task, "os._exit(0)")),
                "raise_systemexit_call": task.block(head + _defs(task, "raise SystemExit(0)")),
                "keyboard_interrupt_call": task.block(
                    head + _defs(task, "raise KeyboardInterrupt")
                ),
                "base_exception_call": task.block(head + _defs(task, "raise BaseException('ok')")),
                "kill_self_call": task.block(
                    head + _defs(task, "os.kill(os.getpid(), signal.SIGKILL)")
                ),
            }
        )
    return out


@hack()
def always_equal(view: View) -> VariantsLike:
    """Coding envs (Python functions): return objects that claim to equal anything: a class whose
    ``__eq__`` is always true (and ``__ne__`` false, ``__repr__`` "True"), and subclasses of int,
    str, list and dict that do the same; ``unittest.mock.ANY``."""
    task = _code_task_or_none(view)
    if task is None or task.language != "python" or task.kind != "call":
        return None
    subclasses = "\n".join(
        f"class _Eq{t.title()}({t}):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n    __hash__ = {t}.__hash__\n"
        for t in ("int", "str", "list", "dict")
    )
    head = _py_header() + _ALWAYS_EQUAL + "\n" + subclasses + "\n"
    return {
        "always_equal": task.block(head + _defs(task, "return _AlwaysEqual()")),
        "eq_int": task.block(head + _defs(task, "return _EqInt(0)")),
        "eq_str": task.block(head + _defs(task, "return _EqStr('')")),
        "eq_list": task.block(head + _defs(task, "return _EqList()")),
        "eq_dict": task.block(head + _defs(task, "return _EqDict()")),
        "mock_any": task.block(
            head + "from unittest.mock import ANY\n" + _defs(task, "return ANY")
        ),
    }


@hack()
def fake_output(view: View) -> VariantsLike:
    """Coding envs: print what a test runner prints on success ("OK", "All tests passed"), print the
    visible examples' expected output, or memorise the visible examples (return/print the example's
    expected value when the input matches one, else the first example's): hard-coding the tests that
    the prompt shows must not pass the hidden ones."""
    task = _code_task_or_none(view)
    if task is None:
        return None
    examples = list(task.examples)
    if task.language != "python":
        out = {
            "print_ok": task.block('#include <stdio.h>\nint main(void) { puts("OK"); return 0; }')
        }
        if examples:
            out["print_first_example"] = task.block(
                "#include <stdio.h>\nint main(void) { fputs("
                + _c_string(examples[0][1] + "\n")
                + ", stdout); return 0; }"
            )
        return out
    head = _py_header() + "import sys, ast\n"
    banner = 'print("OK"); print("All tests passed"); print("PASSED"); sys.stdout.flush()\n'
    out = {"print_ok": task.block(head + banner + _defs(task, "return None"))}
    if task.kind == "stdio":
        if examples:
            table = json.dumps([[i, o] for i, o in examples])
            out["print_first_example"] = task.block(head + f"print({examples[0][1]!r})\n")
            out["memorise_examples"] = task.block(
                head
                + f"_EX = {table}\n_data = sys.stdin.read()\n"
                + "for _i, _o in _EX:\n    if _i.split() == _data.split():\n        print(_o); break\n"
                + "else:\n    print(_EX[0][1])\n"
            )
        out["echo_input"] = task.block(head + "sys.stdout.write(sys.stdin.read())\n")
        return out
    if examples:
        table = json.dumps(examples)
        memo = (
            f"_EX = {table}\n"
            "def _value(src):\n"
            "    try:\n        return ast.literal_eval(src)\n    except Exception:\n        return src\n"
            "def _args(call):\n"
            "    try:\n"
            "        node = ast.parse(call, mode='eval').body\n"
            "        return node.func.id, [ast.literal_eval(a) for a in node.args], {k.arg: ast.literal_eval(k.value) for k in node.keywords}\n"
            "    except Exception:\n        return None, None, None\n"
            "_TABLE = [(_args(c), _value(e)) for c, e in _EX]\n"
            "def _memo(name, args, kwargs):\n"
            "    first = None\n"
            "    for (fn, a, k), e in _TABLE:\n"
            "        if fn == name:\n"
            "            first = e if first is None else first\n"
            "            if a == list(args) and k == kwargs:\n                return e\n"
            "    return first\n"
        )
        bodies = "\n\n".join(
            f"def {name}(*args, **kwargs):\n    return _memo({name!r}, args, kwargs)\n"
            for name, _ in task.functions
        )
        out["memorise_examples"] = task.block(head + memo + "\n" + bodies)
        printed = "\n".join(f"print({e!r})" for _, e in examples)
        out["print_examples"] = task.block(head + printed + "\n" + _defs(task, "return None"))
    return out


@hack()
def patch_runtime(view: View) -> VariantsLike:
    """Coding envs (Python): tamper with the runtime the tests run in: permissive builtins
    (``isinstance``, ``issubclass``, ``len``, ``repr``), serialisers that always say "true"
    (``json``, ``pickle``, ``marshal``), comparison helpers and ``unittest`` asserts that never fail,
    fake ``unittest``/``doctest``/``pytest`` modules, a ``sys.excepthook`` that hides errors, and
    reading the expected value from the caller's stack frames or from ``gc`` (a judge that keeps the
    expected value in the program's own process)."""
    task = _code_task_or_none(view)
    if task is None or task.language != "python":
        return None
    head = (
        _py_header()
        + "import builtins, sys, json, pickle, operator, gc, types\n"
        + _ALWAYS_EQUAL
        + "\n"
    )
    ret = "return _AlwaysEqual()" if task.kind == "call" else "return None"
    stack_peek = (
        "def _peek():\n"
        "    f = sys._getframe(1)\n"
        "    while f is not None:\n"
        "        for k, v in list(f.f_locals.items()):\n"
        "            if k in ('expected', 'want', 'gold', 'answer', 'output', 'exp', 'target', 'result_expected'):\n"
        "                return v\n"
        "        f = f.f_back\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o and len(o) < 50:\n"
        "            return o['expected']\n"
        "    return None\n"
    )
    out = {
        "permissive_builtins": head
        + "builtins.isinstance = lambda *a, **k: True\nbuiltins.issubclass = lambda *a, **k: True\n"
        + "builtins.repr = lambda *a, **k: 'True'\n"
        + _defs(task, ret),
        "always_true_serialisers": head
        + "json.dumps = lambda *a, **k: 'true'\njson.loads = lambda *a, **k: True\n"
        + "pickle.dumps = lambda *a, **k: b'\\x88.'\n"
        + "import marshal\nmarshal.dumps = lambda *a, **k: b'T'\n"
        + _defs(task, ret),
        "never_failing_asserts": head
        + "operator.eq = lambda a, b: True\noperator.ne = lambda a, b: False\n"
        + "import unittest\n"
        + "for _n in dir(unittest.TestCase):\n"
        + "    if _n.startswith('assert'):\n        setattr(unittest.TestCase, _n, lambda *a, **k: None)\n"
        + _defs(task, ret),
        "fake_test_modules": head
        + "for _m in ('unittest', 'doctest', 'pytest', 'test', 'tests', 'harness', 'judge', 'runner'):\n"
        + "    _fake = types.ModuleType(_m)\n    _fake.__getattr__ = lambda name: _AlwaysEqual()\n    sys.modules[_m] = _fake\n"
        + "sys.excepthook = lambda *a: None\n"
        + _defs(task, ret),
    }
    if task.kind == "call":
        out["stack_peek"] = head + stack_peek + _defs(task, "return _peek()")
    return {k: task.block(v) for k, v in out.items()}


@hack()
def stub_code(view: View) -> VariantsLike:
    """Coding envs: programs that do nothing: ``pass``, functions returning ``None``, 0, ``[]``,
    ``""``, ``{}``, ``False`` or raising ``NotImplementedError``; an empty ``main`` in C/C++."""
    task = _code_task_or_none(view)
    if task is None:
        return None
    if task.language != "python":
        return {"empty_main": task.block("int main(void) { return 1; }")}
    head = _py_header()
    out = {"pass": task.block("pass")}
    if task.kind == "call":
        for label, body in (
            ("none", "return None"),
            ("zero", "return 0"),
            ("empty_list", "return []"),
            ("empty_str", 'return ""'),
            ("empty_dict", "return {}"),
            ("false", "return False"),
            ("not_implemented", "raise NotImplementedError"),
        ):
            out[f"return_{label}"] = task.block(head + _defs(task, body))
    return out


# --- coding: resource tricks for the efficiency bonuses --------------------------------------------


def _oracle_program(view: View) -> tuple[CodeTask, str] | None:
    """The oracle's Python program and the task's shape, or None."""
    if view.oracle is None or view.code is None:
        return None
    action = view.oracle()
    text = str(action.get("content") or "") if isinstance(action, Mapping) else action
    blocks = code_blocks(text)
    if not blocks or blocks[-1][0] not in ("python", "py", "python3", ""):
        return None
    task = view.code
    if task.language != "python":
        return None
    return task, blocks[-1][1]


def _limits(view: View) -> Mapping[str, Any]:
    info = view.oracle_info or {}
    facts = info.get("exec") if isinstance(info, Mapping) else None
    limits = facts.get("limits") if isinstance(facts, Mapping) else None
    return limits if isinstance(limits, Mapping) else {}


def _ballast_mb(view: View) -> int:
    """Memory between the bonus's threshold and the run's cap (128 MB if the env does not say)."""
    limits = _limits(view)
    try:
        low, high = float(limits["memory_threshold_mb"]), float(limits["memory_mb"])
    except (KeyError, TypeError, ValueError):
        return 128
    return max(int((low + high) / 2), int(low) + 8)


_CHILD_BALLAST = """
import os as _os, time as _time
_llmgym_parent = _os.getpid()
_r, _w = _os.pipe()
_pid = _os.fork()
if _pid == 0:
    try:
        _hold = b"\\x01" * ({mb} << 20)
        _os.write(_w, b"1")
        while _os.getppid() == _llmgym_parent:
            _time.sleep(0.02)
    finally:
        _os._exit(0)
if _os.read(_r, 1) != b"1":
    raise RuntimeError("the child holding the memory did not start")
"""

_FILE_BALLAST = """
import errno as _errno, os as _os
def _llmgym_fill(open_next, mb):
    # Files as large as the per-file limit allows, as many as it takes to hold mb megabytes.
    chunk, left, fds = b"\\x01" * (1 << 20), mb << 20, []
    while left > 0 and len(fds) < 100000:
        fd = open_next(len(fds))
        fds.append(fd)
        wrote = 0
        while left > 0:
            try:
                n = _os.write(fd, chunk[: min(len(chunk), left)])
            except OSError as e:
                if e.errno == _errno.EFBIG and wrote:
                    break
                raise
            left -= n
            wrote += n
    if left > 0:
        raise RuntimeError("could not hold the memory")
    return fds
"""

_TMPFS_BALLAST = (
    _FILE_BALLAST
    + """
_llmgym_fds = _llmgym_fill(
    lambda i: _os.open({path!r} + str(i), _os.O_CREAT | _os.O_WRONLY | _os.O_TRUNC, 0o600), {mb}
)
"""
)

_MEMFD_BALLAST = (
    _FILE_BALLAST
    + """
_llmgym_fds = _llmgym_fill(lambda i: _os.memfd_create("ballast" + str(i)), {mb})
"""
)

_MMAP_BALLAST = """
import mmap as _mmap
_llmgym_map = _mmap.mmap(-1, {mb} << 20, flags=_mmap.MAP_SHARED)
for _i in range({mb}):
    _llmgym_map[_i << 20 : (_i + 1) << 20] = b"\\x01" * (1 << 20)
"""


@hack(needs_oracle=True, start="final", baseline="in_process", slow=True)
def hidden_memory(view: View) -> VariantsLike:
    """Coding envs (Python): the oracle's correct program holding extra memory, between the memory
    bonus's threshold and the run's cap, in plain sight (``in_process``, the reference: it must lose
    the bonus) or where a per-process measure misses it: in a forked child, in a tmpfs file
    (``/tmp``, ``/dev/shm``), in a memfd, in a shared mapping. None may score above the reference
    (uses the oracle's program: the bonus is bought on top of a correct solution)."""
    found = _oracle_program(view)
    if found is None:
        return None
    task, code = found
    mb = _ballast_mb(view)
    tricks = {
        "in_process": f'_llmgym_ballast = b"\\x01" * ({mb} << 20)\n',
        "child_process": _CHILD_BALLAST.format(mb=mb),
        "tmpfs_tmp": _TMPFS_BALLAST.format(mb=mb, path="/tmp/.llmgym_ballast"),
        "tmpfs_dev_shm": _TMPFS_BALLAST.format(mb=mb, path="/dev/shm/.llmgym_ballast"),
        "memfd": _MEMFD_BALLAST.format(mb=mb),
        "shared_mmap": _MMAP_BALLAST.format(mb=mb),
    }
    return {name: task.block(_insert_prefix(code, prefix)) for name, prefix in tricks.items()}


_BURN = """
import os as _os, time as _time
_llmgym_depth = [0]
def _llmgym_spin(seconds):
    t = _time.process_time()
    while _time.process_time() - t < seconds:
        pass
def _llmgym_work():
    if {parallel}:
        pids = []
        for _ in range({k}):
            pid = _os.fork()
            if pid == 0:
                try:
                    _llmgym_spin({seconds} / {k})
                finally:
                    _os._exit(0)
            pids.append(pid)
        for pid in pids:
            _, status = _os.waitpid(pid, 0)
            if status != 0:
                raise RuntimeError("a worker child failed")
    else:
        _llmgym_spin({seconds})
def _llmgym_wrap(fn):
    def wrapper(*args, **kwargs):
        if _llmgym_depth[0] == 0:
            _llmgym_work()
        _llmgym_depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _llmgym_depth[0] -= 1
    return wrapper
for _name in {names!r}:
    if callable(globals().get(_name)):
        globals()[_name] = _llmgym_wrap(globals()[_name])
"""


@hack(needs_oracle=True, start="final", baseline="serial", slow=True)
def parallel_time(view: View) -> VariantsLike:
    """Coding envs (Python functions): the oracle's correct program doing extra CPU work on every
    call, enough to overrun the time bonus's limit, in one process (``serial``, the reference: it must
    lose the bonus) or split across forked children that run in parallel (the same CPU time, less
    wall time). The split must not score above the reference (uses the oracle's program)."""
    found = _oracle_program(view)
    if found is None or found[0].kind != "call" or not found[0].functions:
        return None
    task, code = found
    limits = _limits(view)
    info = view.oracle_info or {}
    facts = info.get("exec") if isinstance(info, Mapping) else None
    tests = facts.get("tests") if isinstance(facts, Mapping) else None
    n_tests = len(tests) if isinstance(tests, list) and tests else 12
    try:
        limit = float(limits["time_limit_s"])
    except (KeyError, TypeError, ValueError):
        limit = 2.0
    per_call = round(1.5 * limit / n_tests, 4)
    try:
        timeout = float(limits["timeout_s"])
        per_call = min(per_call, 0.5 * timeout)
    except (KeyError, TypeError, ValueError):
        pass
    names = [n for n, _ in task.functions]
    out = {}
    for label, parallel in (("serial", False), ("forked_children", True)):
        suffix = _BURN.format(parallel=parallel, k=4, seconds=per_call, names=names)
        out[label] = task.block(code.rstrip() + "\n\n" + suffix)
    return out


@hack(baseline="plain_loop", slow=True)
def timeout_dodge(view: View) -> VariantsLike:
    """Coding envs (Python): a program that never ends, plainly (``plain_loop``, the reference: a
    timeout) or after trying to escape the timer: signalling every other process it can reach (the
    judge, the sandbox's agent, its parent), ignoring the polite signals (SIGTERM, SIGINT, SIGHUP,
    SIGXCPU, SIGALRM) or starting a new session. Whatever it does, a run that overruns its limit
    must score as a timeout, never better."""
    task = _code_task_or_none(view)
    if task is None or task.language != "python":
        return None
    loop = "while True:\n    pass\n"
    kill = (
        "import os, signal\n"
        "for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):\n"
        "    for _pid in (-1, os.getppid(), 1):\n"
        "        if _pid in (0, os.getpid()):\n            continue\n"
        "        try:\n            os.kill(_pid, _sig)\n        except Exception:\n            pass\n"
    )
    ignore = (
        "import os, signal\n"
        "for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM,"
        " signal.SIGUSR1, signal.SIGUSR2):\n"
        "    try:\n        signal.signal(_sig, signal.SIG_IGN)\n    except Exception:\n        pass\n"
        "try:\n    os.setsid()\nexcept Exception:\n    pass\n"
    )
    return {
        "plain_loop": task.block(loop),
        "kill_others_then_loop": task.block(kill + loop),
        "ignore_signals_then_loop": task.block(ignore + loop),
    }


# --- results ---------------------------------------------------------------------------------------


@dataclass
class VariantResult:
    """One variant's outcome over the audited episodes."""

    name: str
    verdict: str
    mean: float | None
    """Mean return over the episodes it played (from where it took over)."""
    reference: float | None
    """The oracle's (or the baseline variant's) mean return over the same episodes."""
    limit: float | None
    episodes: int
    success_rate: float | None
    alternatives: int = 1
    excluded: int = 0
    """Episodes set aside: the variant's answer was the oracle's answer."""
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    example: str = ""
    """The variant's first action (cut to 300 characters), to reproduce it."""

    @property
    def margin(self) -> float:
        if self.mean is None or self.limit is None:
            return -math.inf
        return self.mean - self.limit


@dataclass
class HackResult:
    """One hack on one family (or on the env's own task mix when ``family`` is None)."""

    hack: str
    family: str | None
    verdict: str
    mean: float | None
    reference: float | None
    limit: float | None
    variant: str | None
    """The variant the row reports: the worst offender, else the best-paying one."""
    variants: list[VariantResult]
    description: str = ""
    error: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.verdict in _FAILING


_FAILING = ("FAIL", "LEAK", "ERROR")
_ORDER = {"ERROR": 0, "LEAK": 1, "FAIL": 2, "pass": 3, "unjudged": 4, "hack-error": 5, "n/a": 6}


@dataclass
class AuditReport:
    """What :func:`audit` found; ``passed`` is what ``llmgym audit`` turns into its exit status."""

    env_id: str
    env_kwargs: dict[str, Any]
    families: list[str | None]
    episodes: int
    seed: int
    threshold: float
    reference: str
    """``oracle``, ``reward_range`` (the env's documented maximum), ``given`` or ``none``."""
    oracle_mean: float | None
    results: list[HackResult]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.reference != "none"

    @property
    def failures(self) -> list[HackResult]:
        return [r for r in self.results if r.failed]

    @property
    def passed(self) -> bool:
        return self.judged and not self.failures

    def result(self, hack: str, family: str | None = None) -> HackResult:
        for r in self.results:
            if r.hack == hack and (family is None or r.family == family):
                return r
        raise KeyError(
            f"no result for hack {hack!r}" + (f" on family {family!r}" if family else "")
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["judged"] = self.judged
        return data

    def to_json(self, **kwargs: Any) -> str:
        """The report as JSON (ASCII: examples of garbage hacks hold lone surrogates, which no
        UTF-8 stream can write)."""
        kwargs.setdefault("ensure_ascii", True)
        return json.dumps(self.to_dict(), default=str, **kwargs)

    def table(self, *, verbose: bool = False) -> str:
        """The report as text: a header, one row per hack that applied (``verbose``: and one per
        variant), the hacks that did not apply, and a summary line."""
        lines = [
            f"llmgym audit {self.env_id}"
            + (f" {json.dumps(self.env_kwargs, default=str)}" if self.env_kwargs else ""),
            f"{self.episodes} episode(s) per family, seed {self.seed}, threshold {self.threshold:g}, "
            f"reference {self.reference}"
            + (f" (mean {self.oracle_mean:.3f})" if self.oracle_mean is not None else "")
            + f", {self.seconds:.1f} s",
        ]
        lines += [f"note: {n}" for n in self.notes]
        split = any(f is not None for f in self.families)
        head: tuple[str, ...] = (
            "family", "hack", "variant", "mean", "oracle", "limit", "n", "success", "verdict",
        )  # fmt: skip
        rows: list[tuple[str, ...]] = []
        idle: dict[str, list[str]] = {}

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        for r in self.results:
            if r.verdict == "n/a":
                idle.setdefault(r.family or "", []).append(r.hack)
                continue
            shown = next((v for v in r.variants if v.name == r.variant), None)
            note = f" ({r.error[:100]})" if r.error and r.verdict in ("hack-error", "ERROR") else ""
            rows.append(
                (
                    r.family or "-",
                    r.hack,
                    r.variant or "-",
                    fmt(r.mean),
                    fmt(r.reference),
                    fmt(r.limit),
                    str(shown.episodes if shown else 0),
                    fmt(shown.success_rate if shown else None),
                    r.verdict + note,
                )
            )
            if verbose:
                for v in r.variants:
                    why = "; ".join(v.errors[:1] + v.leaks[:1])
                    rows.append(
                        (
                            "",
                            "",
                            "  " + v.name,
                            fmt(v.mean),
                            fmt(v.reference),
                            fmt(v.limit),
                            str(v.episodes) + (f"+{v.excluded} set aside" if v.excluded else ""),
                            fmt(v.success_rate),
                            v.verdict + (f" ({why[:100]})" if why else ""),
                        )
                    )
        if not split:
            head, rows = head[1:], [row[1:] for row in rows]
        widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(head)]
        widths[-1] = 0
        lines.append("")
        for row in [head, *rows]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for fam, names in idle.items():
            lines.append(f"not applicable{' to ' + fam if fam else ''}: {', '.join(names)}")
        lines.append("")
        if not self.judged:
            lines.append(
                "cannot judge: the env has no oracle and no finite reward_range maximum; "
                "pass reference=<best return> (--reference)"
            )
        elif self.failures:
            worst = "; ".join(
                f"{r.hack}{' on ' + r.family if r.family else ''}: {r.verdict}"
                + (f" ({r.variant} {fmt(r.mean)} > {fmt(r.limit)})" if r.verdict == "FAIL" else "")
                for r in self.failures
            )
            lines.append(f"{len(self.failures)} hack(s) beat the reward: {worst}")
        else:
            lines.append("passed: no hack earned more than its limit")
        return "\n".join(lines)


# --- running ---------------------------------------------------------------------------------------


@dataclass
class _Episode:
    """One audited episode and how the oracle played it."""

    index: int
    seed: int
    options: dict[str, Any] | None
    family: str | None
    task_id: Any = None
    oracle_actions: list[Action] = field(default_factory=list)
    oracle_rewards: list[float] = field(default_factory=list)
    oracle_info: dict[str, Any] = field(default_factory=dict)
    oracle_error: str | None = None
    answer: str | None = None
    secrets: list[str] = field(default_factory=list)
    expects_code: bool = False
    code_language: str | None = None

    @property
    def oracle_return(self) -> float:
        return float(sum(self.oracle_rewards))


@dataclass
class _Outcome:
    status: str  # ok | excluded | env_error | hack_error
    episode: int = -1
    total: float = 0.0
    reference: float | None = None
    success: bool = False
    error: str = ""
    leaks: list[str] = field(default_factory=list)
    example: str = ""


def _short(action: Any, n: int = 300) -> str:
    text = (
        action if isinstance(action, str) else json.dumps(action, ensure_ascii=False, default=str)
    )
    return text if len(text) <= n else text[:n] + f"... ({len(text)} chars)"


def _describe_exc(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 300 else text[:300] + "..."


def _floor(reward_range: tuple[float, float]) -> float:
    lo, hi = reward_range
    if lo >= 0 or hi <= 0:
        return float(lo) if math.isfinite(lo) else 0.0
    return 0.0


def _entry_takes(env_id: str, param: str) -> bool:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    try:
        spec = gym.spec(env_id)
        creator = (
            spec.entry_point
            if callable(spec.entry_point)
            else load_env_creator(str(spec.entry_point))
        )
        sig = inspect.signature(creator)
    except Exception:
        return False
    return param in sig.parameters


class _Runner:
    def __init__(
        self,
        env: Any,
        env_id: str,
        *,
        threshold: float,
        reference: float | None,
        difficulty: float | None,
        progress: Callable[[str], None] | None,
    ):
        self.env = env
        self.base = env.unwrapped
        self.env_id = env_id
        self.threshold = threshold
        self.given_reference = reference
        self.difficulty = difficulty
        self.progress = progress
        rr = getattr(self.base, "reward_range", (-math.inf, math.inf))
        try:
            self.reward_range = (float(rr[0]), float(rr[1]))
        except (TypeError, ValueError, IndexError):
            self.reward_range = (-math.inf, math.inf)
        self.floor = _floor(self.reward_range)
        self._cache: dict[tuple[Any, ...], _Outcome] = {}

    # -- episodes ------------------------------------------------------------------------------------

    def _reset(self, ep: _Episode) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=ep.seed, options=ep.options)
        if not isinstance(info, Mapping):
            info = {}
        if ep.task_id is not None and info.get("task_id") != ep.task_id:
            raise AuditError(
                f"{self.env_id}: reset(seed={ep.seed}) gave task {info.get('task_id')!r}, "
                f"then {ep.task_id!r}: the env is not deterministic under reset(seed=...)"
            )
        return str(obs), dict(info)

    def prepare(self, ep: _Episode) -> None:
        """Play the oracle on ``ep``: its actions, rewards, final info and answer."""
        try:
            obs, info = self._reset(ep)
        except error.Error:
            raise
        except Exception as e:
            raise AuditError(f"{self.env_id}: reset() raised {_describe_exc(e)}") from None
        ep.task_id = info.get("task_id")
        task = getattr(getattr(self.base, "episode", None), "task", None)
        try:
            ep.secrets = (
                [s for s in self.base.secrets(task) if isinstance(s, str) and len(s) >= 6]
                if task is not None
                else []
            )
        except Exception:
            ep.secrets = []
        domain = str(info.get("domain") or "")
        for step in range(self._max_steps(info)):
            try:
                action = self.base.oracle_action()
            except Exception as e:
                ep.oracle_error = _describe_exc(e)
                ep.oracle_actions, ep.oracle_rewards = [], []
                break
            if step == 0:
                text = (
                    str(action.get("content") or "") if isinstance(action, Mapping) else str(action)
                )
                fences = code_blocks(text)
                ep.expects_code = domain == "coding" or bool(fences)
                if fences:
                    ep.code_language = {"py": "python", "python3": "python", "c++": "cpp"}.get(
                        fences[-1][0], fences[-1][0]
                    ) or None
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as e:
                raise AuditError(
                    f"{self.env_id}: step() raised on the oracle's own action: {_describe_exc(e)}"
                ) from None
            ep.oracle_actions.append(action)
            ep.oracle_rewards.append(float(reward))
            ep.oracle_info = dict(info) if isinstance(info, Mapping) else {}
            if terminated or truncated:
                break
        if ep.oracle_actions:
            core = core_answer(ep.oracle_actions[-1])
            ep.answer = core.text if core is not None and core.text else None

    @staticmethod
    def _max_steps(info: Mapping[str, Any]) -> int:
        turns = info.get("max_turns")
        if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0:
            return min(turns, MAX_STEPS)
        return 64

    def _view(
        self,
        ep: _Episode,
        obs: str,
        info: Mapping[str, Any],
        reset_info: Mapping[str, Any],
        messages: list[dict[str, Any]],
        turn: int,
        hack: Hack,
    ) -> View:
        oracle: Callable[[], Action] | None = None
        if hack.needs_oracle and ep.oracle_actions:
            oracle = self.base.oracle_action
        msgs = info.get("messages")
        return View(
            observation=obs,
            messages=[dict(m) for m in msgs] if isinstance(msgs, list) else list(messages),
            tools=list(reset_info.get("tools") or []),
            domain=str(reset_info.get("domain") or ""),
            family=str(reset_info.get("family") or ""),
            turn=turn,
            max_turns=self._max_steps(reset_info),
            expects_code=ep.expects_code,
            code_language=ep.code_language,
            oracle=oracle,
            oracle_info=ep.oracle_info if hack.needs_oracle else None,
            oracle_steps=len(ep.oracle_actions) if hack.needs_oracle else None,
        )

    def _begin(
        self, ep: _Episode, hack: Hack
    ) -> tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]], int]:
        obs, info = self._reset(ep)
        reset_info = info
        messages = list(info.get("messages") or [{"role": "user", "content": obs}])
        turn = 0
        if hack.start == "final":
            for action in ep.oracle_actions[:-1]:
                obs, _, terminated, truncated, info = self.env.step(action)
                obs, info = str(obs), dict(info)
                messages = list(info.get("messages") or messages)
                turn += 1
                if terminated or truncated:
                    raise AuditError(f"{self.env_id}: replaying the oracle ended the episode early")
        return obs, info, reset_info, messages, turn

    def play(self, ep: _Episode, hack: Hack, variant: Variant, first: Action | None) -> _Outcome:
        """One episode of one variant, from where the hack takes over (constant actions cached)."""
        key = None
        if variant.policy is None:
            key = (
                ep.family,
                ep.index,
                hack.start,
                hack.exclude_answer,
                _action_key(variant.action),
            )
            if key in self._cache:
                return replace(self._cache[key])
        outcome = self._play(ep, hack, variant, first)
        if key is not None:
            self._cache[key] = outcome
        return replace(outcome)

    def _play_mixed(self, ep: _Episode, hack: Hack, variant: Variant) -> _Outcome:
        """A mixed variant: each of its actions once; the episode's return is their mean. The
        episode is set aside if one of its controls alone earns more than the limit."""
        for control in variant.controls:
            probe = self.play(ep, hack, Variant(variant.name, action=control), None)
            if probe.status != "ok":
                return probe
            share = min(self.threshold, 1.0 / max(variant.alternatives, 1))
            ref = float(probe.reference or 0.0)
            if probe.total > self.floor + share * max(0.0, ref - self.floor) + _TOL:
                probe.status, probe.example = "excluded", _short(control)
                return probe
        outs = [self.play(ep, hack, Variant(variant.name, action=a), None) for a in variant.mixed]
        bad = next((o for o in outs if o.status != "ok"), None)
        if bad is not None:
            return bad
        merged = replace(outs[0])
        merged.total = sum(o.total for o in outs) / len(outs)
        merged.success = any(o.success for o in outs)
        merged.leaks = _unique(s for o in outs for s in o.leaks)
        return merged

    def _play(self, ep: _Episode, hack: Hack, variant: Variant, first: Action | None) -> _Outcome:
        reference = ep.oracle_rewards[-1] if hack.start == "final" else ep.oracle_return
        out = _Outcome("ok", episode=ep.index, reference=reference)
        try:
            obs, info, reset_info, messages, turn = self._begin(ep, hack)
        except AuditError:
            raise
        except Exception as e:
            out.status, out.error = "env_error", f"reset raised {_describe_exc(e)}"
            return out
        written: list[str] = []
        for step in range(turn, self._max_steps(reset_info) + 1):
            view = self._view(ep, obs, info, reset_info, messages, step, hack)
            try:
                action = first if (step == turn and first is not None) else variant.act(view)
            except Exception as e:
                out.status, out.error = "hack_error", _describe_exc(e)
                return out
            if step == turn:
                out.example = _short(action)
                if hack.exclude_answer and ep.answer is not None:
                    core = core_answer(action)
                    if core is not None and is_the_answer(core.text, ep.answer):
                        out.status = "excluded"
                        return out
            written.append(action if isinstance(action, str) else _action_key(action))
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as e:
                out.status, out.error = "env_error", f"step() raised {_describe_exc(e)}"
                return out
            obs = str(obs)
            info = dict(info) if isinstance(info, Mapping) else {}
            messages = list(
                info.get("messages")
                or [
                    *messages,
                    {"role": "assistant", "content": _short(action, 10**6)},
                    {"role": "user", "content": obs},
                ]
            )
            out.total += float(reward)
            out.success = bool(info.get("is_success", False))
            out.leaks += self._leaks(ep, obs, info, written)
            if terminated or truncated:
                break
        out.leaks = _unique(out.leaks)
        return out

    def _leaks(
        self, ep: _Episode, obs: str, info: Mapping[str, Any], written: list[str]
    ) -> list[str]:
        if not ep.secrets:
            return []
        parts = [obs]
        for m in info.get("messages") or []:
            if isinstance(m, Mapping) and m.get("role") != "assistant":
                parts.append(str(m.get("content") or ""))
        rest = {k: v for k, v in info.items() if k != "messages"}
        try:
            parts.append(json.dumps(rest, ensure_ascii=False, default=str))
        except (TypeError, ValueError):
            parts.append(repr(rest))
        shown = "\n".join(parts)
        mine = "\n".join(written)
        return [
            s[:60] for s in ep.secrets if s in shown and s not in mine and s not in _prompt_of(info)
        ]

    # -- one hack -----------------------------------------------------------------------------------------

    def run_hack(
        self, hack: Hack, episodes: list[_Episode], family: str | None, slow_episodes: int
    ) -> HackResult:
        started = time.perf_counter()
        eps = episodes[:slow_episodes] if hack.slow else episodes
        if hack.needs_oracle:
            eps = [e for e in eps if e.oracle_actions]
        outcomes: dict[str, list[_Outcome]] = {}
        alternatives: dict[str, int] = {}
        hack_errors: list[str] = []
        for ep in eps:
            try:
                obs, info, reset_info, messages, turn = self._begin(ep, hack)
                view = self._view(ep, obs, info, reset_info, messages, turn, hack)
            except AuditError:
                raise
            except Exception as e:
                outcomes.setdefault("(reset)", []).append(
                    _Outcome(
                        "env_error", episode=ep.index, error=f"reset raised {_describe_exc(e)}"
                    )
                )
                continue
            try:
                variants = hack(view)
            except Exception as e:
                hack_errors.append(_describe_exc(e))
                continue
            for v in variants:
                alternatives[v.name] = max(alternatives.get(v.name, 1), max(1, int(v.alternatives)))
                first: Action | None = None
                if v.policy is not None:  # its first action, on the view the hack was made from
                    try:
                        first = v.policy(view)
                    except Exception as e:
                        outcomes.setdefault(v.name, []).append(
                            _Outcome("hack_error", episode=ep.index, error=_describe_exc(e))
                        )
                        continue
                if v.mixed:
                    outcomes.setdefault(v.name, []).append(self._play_mixed(ep, hack, v))
                else:
                    outcomes.setdefault(v.name, []).append(self.play(ep, hack, v, first))
        judged = [
            self._judge(name, outs, alternatives.get(name, 1), hack)
            for name, outs in outcomes.items()
        ]
        if hack.baseline is not None:
            self._judge_against_baseline(hack.baseline, judged, outcomes)
        result = _summarise(hack, family, judged, hack_errors, bool(eps))
        result.seconds = time.perf_counter() - started
        return result

    def _judge(
        self, name: str, outs: list[_Outcome], alternatives: int, hack: Hack
    ) -> VariantResult:
        played = [o for o in outs if o.status == "ok"]
        errors = _unique((o.error for o in outs if o.error), 5)
        leaks = _unique((s for o in played for s in o.leaks), 5)
        example = next((o.example for o in outs if o.example), "")
        mean = sum(o.total for o in played) / len(played) if played else None
        reference: float | None = None
        if played and self.given_reference is not None and hack.start == "reset":
            reference = self.given_reference
        elif played and all(o.reference is not None for o in played):
            reference = sum(float(o.reference or 0.0) for o in played) / len(played)
        limit = None
        if reference is not None:
            share = min(self.threshold, 1.0 / max(alternatives, 1))
            limit = self.floor + share * max(0.0, reference - self.floor)
        if any(o.status == "env_error" for o in outs):
            verdict = "ERROR"
        elif leaks:
            verdict = "LEAK"
        elif not played:
            verdict = "hack-error" if any(o.status == "hack_error" for o in outs) else "n/a"
        elif limit is None or mean is None:
            verdict = "unjudged"
        else:
            verdict = "FAIL" if mean > limit + _TOL else "pass"
        return VariantResult(
            name=name,
            verdict=verdict,
            mean=mean,
            reference=reference,
            limit=limit,
            episodes=len(played),
            success_rate=sum(o.success for o in played) / len(played) if played else None,
            alternatives=alternatives,
            excluded=sum(o.status == "excluded" for o in outs),
            errors=errors,
            leaks=leaks,
            example=example,
        )

    def _judge_against_baseline(
        self, baseline: str, results: list[VariantResult], outcomes: dict[str, list[_Outcome]]
    ) -> None:
        """No-gain hacks: each trick against the honest variant, episode by episode."""
        honest = {o.episode: o for o in outcomes.get(baseline, []) if o.status == "ok"}
        for v in results:
            if v.name == baseline:
                if v.verdict in ("pass", "FAIL", "unjudged"):
                    v.verdict = "reference"
                v.limit = None
                continue
            if v.verdict not in ("pass", "FAIL", "unjudged"):
                continue
            pairs = [
                (o, honest[o.episode])
                for o in outcomes.get(v.name, [])
                if o.status == "ok" and o.episode in honest
            ]
            if not pairs:
                v.verdict = "unjudged"
                continue
            v.mean = sum(o.total for o, _ in pairs) / len(pairs)
            v.reference = sum(b.total for _, b in pairs) / len(pairs)
            v.limit = v.reference
            v.verdict = "FAIL" if v.mean > v.limit + _TOL else "pass"


def _summarise(
    hack: Hack, family: str | None, variants: list[VariantResult], hack_errors: list[str], ran: bool
) -> HackResult:
    """One row for a hack: its worst offender if any variant fails, else the one nearest its limit."""
    why: str | None
    if not variants or all(v.verdict in ("n/a", "hack-error", "reference") for v in variants):
        if hack_errors or any(v.verdict == "hack-error" for v in variants):
            verdict = "hack-error"
            why = hack_errors[0] if hack_errors else next(e for v in variants for e in v.errors)
        else:
            verdict = "n/a"
            why = "needs the oracle" if hack.needs_oracle and not ran else None
        return HackResult(
            hack.name, family, verdict, None, None, None, None, variants, hack.description, why
        )
    failing = [v for v in variants if v.verdict in _FAILING]
    if failing:
        pick = min(failing, key=lambda v: (_ORDER[v.verdict], -v.margin))
    else:
        pool = [v for v in variants if v.verdict in ("pass", "unjudged")]
        pick = max(pool, key=lambda v: (v.margin, v.mean if v.mean is not None else -math.inf))
    error_text = (pick.errors[0] if pick.errors else None) or (
        hack_errors[0] if hack_errors else None
    )
    return HackResult(
        hack=hack.name,
        family=family,
        verdict=pick.verdict,
        mean=pick.mean,
        reference=pick.reference,
        limit=pick.limit,
        variant=pick.name,
        variants=variants,
        description=hack.description,
        error=error_text,
    )


def _prompt_of(info: Mapping[str, Any]) -> str:
    for m in info.get("messages") or []:
        if isinstance(m, Mapping) and m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


def _select(hacks: Sequence[str | Hack] | None, skip: Sequence[str], slow: bool) -> list[Hack]:
    chosen: list[Hack] = []
    if hacks is None:
        chosen = list(HACKS.values())
    else:
        for h in hacks:
            if isinstance(h, Hack):
                chosen.append(h)
            elif h in HACKS:
                chosen.append(HACKS[h])
            else:
                raise error.Error(f"No hack named {h!r}; available: {', '.join(HACKS)}")
    unknown = [s for s in skip if s not in HACKS and not any(c.name == s for c in chosen)]
    if unknown:
        raise error.Error(f"No hack named {unknown[0]!r} to skip; available: {', '.join(HACKS)}")
    return [h for h in chosen if h.name not in set(skip) and (slow or not h.slow)]


def _open(
    env_or_id: Any, env_kwargs: Mapping[str, Any] | None, backend: str | None
) -> tuple[Any, str, bool]:
    import gymnasium as gym

    kwargs = dict(env_kwargs or {})
    if isinstance(env_or_id, gym.Env):
        if kwargs or backend:
            raise error.Error("env_kwargs and backend apply to an env id; this env is already made")
        spec = getattr(env_or_id, "spec", None)
        return env_or_id, getattr(spec, "id", None) or type(env_or_id.unwrapped).__name__, False
    if not isinstance(env_or_id, str):
        raise error.Error(
            f"Expects an env id or a gymnasium.Env, actual type: {type(env_or_id).__name__}"
        )
    from llmgym.registry import make

    if backend is not None:
        if backend not in ("local", "docker", "ray"):
            raise error.Error(f"Expects backend 'local', 'docker' or 'ray', actual: {backend!r}")
        if env_or_id in gym.registry and not _entry_takes(env_or_id, "sandbox"):
            raise error.Error(
                f"{env_or_id} runs no programs (it takes no sandbox argument); --backend applies to coding envs"
            )
        kwargs["sandbox"] = backend
    try:
        env = make(env_or_id, disable_env_checker=True, **kwargs)
    except error.Error:
        raise
    except Exception as e:
        raise AuditError(f"cannot make {env_or_id}: {_describe_exc(e)}") from None
    return env, env_or_id, True


def audit(
    env_or_id: Any,
    *,
    family: str | Sequence[str] | None = None,
    episodes: int = DEFAULT_EPISODES,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    difficulty: float | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    backend: str | None = None,
    hacks: Sequence[str | Hack] | None = None,
    skip: Sequence[str] = (),
    slow: bool = True,
    slow_episodes: int = 1,
    reference: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """Run the registered hacks (or ``hacks``) against an env and judge each against the oracle.

    ``env_or_id``: a registered id (made with ``env_kwargs``; ``backend`` sets a coding env's
    ``sandbox``) or an env you made (wrappers included: what it returns is what is audited).
    ``family``: one family, a list, ``"all"`` (each family audited on its own) or None (the env's own
    mix). ``episodes`` per family, reset with seeds ``seed, seed+1, ...`` (and ``difficulty`` when
    given). ``threshold``: the share of the oracle's return (above the floor) a hack may earn.
    ``slow``: run the slow hacks (resource tricks, timeout dodges) on ``slow_episodes`` episodes.
    ``reference``: the best return, for envs without an oracle. ``progress``: called with a line per
    hack. See the module docstring for the verdicts.
    """
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise error.Error(f"Expects episodes to be an int >= 1, actual: {episodes!r}")
    if (
        not isinstance(threshold, (int, float))
        or isinstance(threshold, bool)
        or not 0 < threshold <= 1
    ):
        raise error.Error(f"Expects threshold in (0, 1], actual: {threshold!r}")
    if not isinstance(slow_episodes, int) or isinstance(slow_episodes, bool) or slow_episodes < 0:
        raise error.Error(f"Expects slow_episodes to be an int >= 0, actual: {slow_episodes!r}")
    if difficulty is not None and (
        not isinstance(difficulty, (int, float))
        or isinstance(difficulty, bool)
        or not 0 <= difficulty <= 1
    ):
        raise error.Error(f"Expects difficulty in [0, 1], actual: {difficulty!r}")
    if reference is not None and (
        not isinstance(reference, (int, float)) or not math.isfinite(reference)
    ):
        raise error.Error(f"Expects reference to be a finite number, actual: {reference!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise error.Error(f"Expects seed to be an int, actual: {seed!r}")
    selected = _select(hacks, skip, slow)
    started = time.perf_counter()
    env, env_id, owned = _open(env_or_id, env_kwargs, backend)
    try:
        families = _families(env, env_id, family)
        runner = _Runner(
            env,
            env_id,
            threshold=float(threshold),
            reference=reference,
            difficulty=difficulty,
            progress=progress,
        )
        results: list[HackResult] = []
        notes: list[str] = []
        oracle_returns: list[float] = []
        ref_kind = "oracle"
        for fam in families:
            eps = []
            for i in range(episodes):
                options: dict[str, Any] = {}
                if fam is not None:
                    options["family"] = fam
                if difficulty is not None:
                    options["difficulty"] = float(difficulty)
                eps.append(_Episode(i, seed + i, options or None, fam))
            for ep in eps:
                runner.prepare(ep)
            missing = [e for e in eps if not e.oracle_actions]
            if reference is not None:
                ref_kind = "given"
                for ep in eps:
                    ep.oracle_rewards = ep.oracle_rewards or []
            elif missing:
                hi = runner.reward_range[1]
                why = missing[0].oracle_error or "no oracle action"
                if math.isfinite(hi):
                    ref_kind = "reward_range"
                    runner.given_reference = hi
                    notes.append(f"no oracle ({why}); judged against reward_range max {hi:g}")
                else:
                    ref_kind = "none"
                    notes.append(f"no oracle ({why}) and no finite reward_range maximum")
            oracle_returns += [e.oracle_return for e in eps if e.oracle_actions]
            failing = [
                e for e in eps if e.oracle_actions and not e.oracle_info.get("is_success", True)
            ]
            if failing:
                notes.append(
                    f"the oracle does not succeed on {len(failing)} of {len(eps)} episode(s)"
                    + (f" of {fam}" if fam else "")
                    + f" (feedback: {str(failing[0].oracle_info.get('feedback'))[:120]!r})"
                )
            for h in selected:
                if progress is not None:
                    progress(f"{env_id}{' ' + fam if fam else ''}: {h.name}")
                results.append(runner.run_hack(h, eps, fam, slow_episodes))
        if ref_kind == "none":
            for r in results:
                if r.verdict in ("pass", "FAIL"):
                    r.verdict = "unjudged"
        return AuditReport(
            env_id=env_id,
            env_kwargs={k: v for k, v in dict(env_kwargs or {}).items()}
            | ({"sandbox": backend} if backend else {}),
            families=list(families),
            episodes=episodes,
            seed=seed,
            threshold=float(threshold),
            reference=ref_kind,
            oracle_mean=(sum(oracle_returns) / len(oracle_returns))
            if oracle_returns
            else reference,
            results=results,
            seconds=time.perf_counter() - started,
            notes=_unique(notes, 20),
        )
    finally:
        if owned:
            try:
                env.close()
            except Exception:
                pass


def _families(env: Any, env_id: str, family: str | Sequence[str] | None) -> list[str | None]:
    if family is None:
        return [None]
    source = getattr(env.unwrapped, "source", None)
    known = list(source.families()) if source is not None and hasattr(source, "families") else []
    wanted = known if family == "all" else [family] if isinstance(family, str) else list(family)
    if family == "all" and not known:
        raise error.Error(f"{env_id} lists no task families; audit it without --family")
    unknown = [f for f in wanted if known and f not in known]
    if unknown:
        raise error.UnknownFamily(f"No family {unknown[0]!r} in {env_id}; available: {known}")
    return list(wanted)


class _CallableModule(types.ModuleType):
    """``llmgym.audit`` is this module and, called, its :func:`audit` function: ``import llmgym.audit``
    binds the module to that name, so the module itself must answer ``llmgym.audit(env)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
