"""Scoring a response against its instructions: strict and loose checks, IFEval's accuracies,
and a reward that a do-nothing response cannot collect.

IFEval's loose check tries the response as given, without its first line, without its last line,
without both, and each of those with markdown asterisks removed: the instruction is followed
loosely when any non-empty variant follows it. IFEval's figures follow: prompt-level accuracy
(every instruction followed) and instruction-level accuracy (the share followed), strict and
loose.

The reward (one component per instruction, summing to it) adds two rules IFEval does not need
because nobody optimizes against it:

- a *gate*: the response must be one (at least ``min_words`` distinct words of its own, beyond
  the words the instructions dictate), must not echo the instructions back (a run of the
  instruction text of ``ECHO_WORDS`` words or more), and must carry the task's content (at least
  ``min_terms`` of the task's ``terms``, when it has them); otherwise every component is 0;
- *no credit for abstaining*: an instruction that the empty response would follow ("no commas",
  "fewer than 80 words", "do not say X") earns its share only when every instruction that asks
  for something is followed too.

Not here: the checkers themselves (``checks.py``) and how a task is written (the env).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmgym.rewards.base import RewardResult
from llmgym.rewards.instruct.checks import CHECKS, check, validate

ECHO_WORDS = 6
"""A run of this many words of the instruction text in a response is an echo of it."""
DEFAULT_MIN_WORDS = 8
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


@dataclass(frozen=True)
class InstructionResult:
    """One instruction's verdicts: ``strict`` on the response as given, ``loose`` on any variant."""

    id: str
    kwargs: dict[str, Any]
    strict: bool
    loose: bool
    abstainable: bool
    """Whether the empty response would follow it (it only forbids or caps something)."""


@dataclass(frozen=True)
class Assessment:
    """Everything known about one response: per-instruction verdicts, the gate, the reward."""

    results: list[InstructionResult]
    gate: bool
    gate_reason: str
    credits: list[float] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(self.credits) / len(self.credits) if self.credits else 0.0

    def accuracy(self) -> dict[str, float]:
        """IFEval's four figures for this one prompt."""
        n = len(self.results) or 1
        return {
            "prompt_strict": float(all(r.strict for r in self.results)),
            "prompt_loose": float(all(r.loose for r in self.results)),
            "instruction_strict": sum(r.strict for r in self.results) / n,
            "instruction_loose": sum(r.loose for r in self.results) / n,
        }


def loose_variants(text: str) -> list[str]:
    """The response, without its first line, last line or both, each also without ``*``.

    >>> loose_variants("Sure!\\n*body*\\nBye")[:3]
    ['Sure!\\n*body*\\nBye', '*body*\\nBye', 'Sure!\\n*body*']
    """
    lines = text.split("\n")
    base = [
        text,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return base + [v.replace("*", "") for v in base]


def follows(instruction_id: str, kwargs: Mapping[str, Any], text: str) -> tuple[bool, bool]:
    """``(strict, loose)`` for one validated instruction.

    >>> follows("startend:end_checker", {"end_phrase": "Bye."}, "Hello.\\nBye.\\n(note)")
    (False, True)
    """
    strict = check(instruction_id, kwargs, text)
    loose = strict or any(check(instruction_id, kwargs, v) for v in loose_variants(text)[1:])
    return strict, loose


def instructions_of(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The validated ``(id, kwargs)`` pairs of an answer spec's ``instructions``."""
    out = []
    for item in spec.get("instructions") or []:
        out.append((str(item["id"]), validate(str(item["id"]), item.get("kwargs"))))
    return out


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _literal_words(kwargs_list: Iterable[Mapping[str, Any]]) -> set[str]:
    words: set[str] = set()
    for kwargs in kwargs_list:
        for value in kwargs.values():
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, str):
                    words.update(_words(item))
    return words


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    first = needle[0]
    return any(
        haystack[i] == first and list(haystack[i : i + n]) == list(needle)
        for i in range(len(haystack) - n + 1)
    )


def echoed(text_words: Sequence[str], echo: Iterable[str]) -> bool:
    """Whether the response's words contain ``ECHO_WORDS`` consecutive words of any echo text.

    >>> echoed("ok answer in all lowercase letters and no capital letters at all".split(),
    ...        ["Your answer must be in all lowercase letters and no capital letters at all."])
    True
    """
    grams = {tuple(text_words[i : i + ECHO_WORDS]) for i in range(len(text_words) - ECHO_WORDS + 1)}
    if not grams:
        return False
    for segment in echo:
        words = _words(segment)
        for i in range(len(words) - ECHO_WORDS + 1):
            if tuple(words[i : i + ECHO_WORDS]) in grams:
                return True
    return False


def _gate(text: str, spec: Mapping[str, Any], kwargs_list: list[dict[str, Any]]) -> str:
    """Why the response is not an answer at all, or ``""`` when it is one."""
    body = text.strip()
    repeat = str(spec.get("repeat") or "")
    if repeat and body.lower().startswith(repeat.strip().lower()):
        body = body[len(repeat.strip()) :]
    words = _words(body)
    if echoed(words, spec.get("echo") or []):
        return "the response repeats the instructions instead of following them"
    own = set(words) - _literal_words(kwargs_list)
    need = int(spec.get("min_words", DEFAULT_MIN_WORDS))
    if len(own) < need:
        return f"too little of your own: {len(own)} distinct words beyond the required ones (at least {need})"
    terms = [str(t) for t in spec.get("terms") or []]
    need_terms = min(int(spec.get("min_terms", 0)), len(terms))
    if need_terms:
        present = set(words)
        found = sum(1 for t in terms if set(_words(t)) <= present)
        if found < need_terms:
            return (
                f"off the task: it mentions {found} of the task's subjects (at least {need_terms})"
            )
    return ""


def assess(text: str, spec: Mapping[str, Any], *, loose: bool = False) -> Assessment:
    """Check ``text`` against the answer spec (``instructions``, and for the gate ``echo``,
    ``repeat``, ``min_words``, ``terms``, ``min_terms``); ``loose`` pays loose verdicts."""
    pairs = instructions_of(spec)
    results = []
    for instruction_id, kwargs in pairs:
        strict, loose_ok = follows(instruction_id, kwargs, text)
        abstainable = bool(_abstains(instruction_id, kwargs))
        results.append(InstructionResult(instruction_id, kwargs, strict, loose_ok, abstainable))
    reason = _gate(text, spec, [k for _, k in pairs])
    verdicts = [r.loose if loose else r.strict for r in results]
    asked = all(v for v, r in zip(verdicts, results, strict=True) if not r.abstainable)
    credits = [
        float(v and not reason and (asked or not r.abstainable))
        for v, r in zip(verdicts, results, strict=True)
    ]
    return Assessment(results, not reason, reason, credits)


def _abstains(instruction_id: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether a response with nothing in it (a single neutral word) would follow it."""
    try:
        return bool(CHECKS[instruction_id]("ok", **kwargs))
    except Exception:  # noqa: BLE001 - a checker that cannot judge "ok" does not abstain
        return False


def grade_instructions(
    response: str, gold: Mapping[str, Any], *, loose: bool = False
) -> RewardResult:
    """The reward for one response: the share of instructions followed, under the gate and the
    no-credit-for-abstaining rule; components ``"<index>:<instruction id>"`` sum to the score.

    >>> spec = {"instructions": [{"id": "punctuation:no_comma"},
    ...                          {"id": "startend:end_checker", "kwargs": {"end_phrase": "Done."}}],
    ...         "min_words": 3}
    >>> grade_instructions("Tea leaves need hot water. Done.", spec).score
    1.0
    >>> grade_instructions("Tea leaves need hot water.", spec).score  # no credit for no commas
    0.0
    """
    return result_of(assess(response, gold, loose=loose))


def result_of(a: Assessment) -> RewardResult:
    """The reward of an assessment: components ``"<index>:<instruction id>"`` and feedback naming
    the instructions not followed (ids only: nothing of the response is repeated)."""
    n = len(a.credits) or 1
    components = {
        f"{i}:{r.id}": c / n for i, (r, c) in enumerate(zip(a.results, a.credits, strict=True))
    }
    missed = [r.id for r, c in zip(a.results, a.credits, strict=True) if not c]
    if not a.gate:
        feedback = a.gate_reason
    elif missed:
        feedback = f"{len(a.results) - len(missed)} of {len(a.results)} instructions followed; not: {', '.join(missed)}"
    else:
        feedback = f"all {len(a.results)} instructions followed"
    return RewardResult(a.score, components, feedback, bool(a.results) and a.score >= 1.0)
