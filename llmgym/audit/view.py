"""What a hack sees at one turn of an audited episode: :class:`View`, and the action types.

A view is built only from what a policy sees (the observation, ``info["messages"]``,
``info["tools"]``, the answer form the env asks for); the gold answer is never in it. It is not
where views are made (``playing.py`` makes them) nor where hacks are defined (``catalogue/``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from llmgym.audit.reading import CodeTask, answer_styles, code_task

Action = str | Mapping[str, Any]
Policy = Callable[["View"], Action]


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
    open_ended: bool = False
    """The env grades open-ended text (an essay under constraints), not one answer: hacks that
    hedge between candidate answers have nothing to hedge."""

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
