"""Ways to read a long document: chunks with notes (sequential mode) and search/read tools.

Chunked reading turns a task into subtasks ``chunk-1 .. chunk-n`` and a final ``answer``;
each chunk subtask is graded on whether the reader's notes keep the facts the question
needs that have appeared so far (its weight is their number). Tool reading answers
``search(query)`` and ``read(section=..., start_line=..., end_line=...)`` over the text.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import replace
from typing import Any

from llmgym.tasks import Subtask, Task

_NOTES = re.compile(r"<notes>(.*?)(?:</notes>|$)", re.DOTALL | re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]")
STOPWORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "for",
        "to",
        "and",
        "or",
        "is",
        "was",
        "what",
        "which",
        "who",
        "how",
        "many",
        "much",
        "does",
        "did",
        "do",
        "at",
        "by",
        "with",
        "from",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "be",
        "are",
        "were",
        "as",
        "any",
        "all",
        "give",
        "list",
    ]
)
SEARCH_HITS = 5
SNIPPET_CHARS = 240


def with_chunks(task: Task, chunk_chars: int) -> Task:
    """``task`` with one subtask per chunk of its document (cut at blank lines) and an answer step."""
    doc = task.metadata["document"]
    facts = sorted(
        (int(off), list(keep)) for off, keep in task.metadata.get("facts") or [] if off >= 0
    )
    bounds = chunk_bounds(doc, chunk_chars)
    subtasks = []
    for i, (start, end) in enumerate(bounds):
        seen = [keep for off, keep in facts if off < end]
        subtasks.append(
            Subtask(
                id=f"chunk-{i + 1}",
                prompt=f"Read part {i + 1} of {len(bounds)} and update your notes.",
                answer=seen,
                verifier="longdoc_notes",
                weight=float(len(seen)),
                depends_on=(f"chunk-{i}",) if i else (),
                metadata={"start": start, "end": end},
            )
        )
    any_facts = any(s.weight for s in subtasks)
    subtasks.append(
        Subtask(
            id="answer",
            prompt="Answer the question from your notes.",
            answer=None,
            verifier="longdoc_answer",
            weight=0.0 if any_facts else 1.0,
            depends_on=(f"chunk-{len(bounds)}",),
        )
    )
    return replace(task, subtasks=tuple(subtasks))


def chunk_bounds(text: str, chunk_chars: int) -> list[tuple[int, int]]:
    """Spans of about ``chunk_chars`` characters, cut at a blank line (or a newline) when one
    lies in the last third of the span.

    >>> chunk_bounds("aaaa\\n\\nbbbb\\n\\ncccc", 8)
    [(0, 6), (6, 12), (12, 16)]
    """
    chunk_chars = max(1, chunk_chars)
    out, start, n = [], 0, len(text)
    while start < n:
        end = min(n, start + chunk_chars)
        if end < n:
            cut = text.rfind("\n\n", start + (2 * chunk_chars) // 3, end)
            if cut < 0:
                cut = text.rfind("\n", start + (2 * chunk_chars) // 3, end)
            end = (
                cut + 2
                if cut >= 0 and text[cut : cut + 2] == "\n\n"
                else (cut + 1 if cut >= 0 else end)
            )
        out.append((start, end))
        start = end
    return out


def notes_of(content: str, limit_chars: int) -> tuple[str, bool]:
    """The notes in a reply (last ``<notes>`` tag, or the whole reply) cut to ``limit_chars``,
    and whether they had to be cut.

    >>> notes_of("ok <notes>Marlow: RF-1</notes>", 100)
    ('Marlow: RF-1', False)
    >>> notes_of("<notes>" + "x" * 50, 10)
    ('xxxxxxxxxx', True)
    """
    head = content[: limit_chars * 4 + 64]
    found = _NOTES.findall(head)
    notes = (found[-1] if found else head).strip()
    over = len(notes) > limit_chars or len(content) > len(head)
    return notes[:limit_chars], over


class DocumentIndex:
    """Line and section lookups and a keyword search over one document (built lazily)."""

    def __init__(self, text: str, sections: list[list[Any]]):
        self.text = text
        self.sections = [(str(s[0]), str(s[1]), int(s[2]), int(s[3])) for s in sections]
        self._starts = [s[2] for s in self.sections]
        self._lower: str | None = None
        self._lines: list[int] | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def line_starts(self) -> list[int]:
        if self._lines is None:
            starts, pos, text = [0], 0, self.text
            while True:
                pos = text.find("\n", pos) + 1
                if pos <= 0:
                    break
                starts.append(pos)
            self._lines = starts
        return self._lines

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def section(self, sid: str) -> tuple[str, str, int, int] | None:
        sid = sid.strip().strip("[]").upper()
        for sec in self.sections:
            if sec[0] == sid:
                return sec
        return None

    def lines(self, start_line: int, end_line: int) -> str:
        starts = self.line_starts
        start_line = max(1, start_line)
        end_line = min(len(starts), end_line)
        if end_line < start_line:
            return ""
        end = starts[end_line] - 1 if end_line < len(starts) else len(self.text)
        return self.text[starts[start_line - 1] : end]

    def search(self, query: str) -> list[tuple[float, str, str, int, int]]:
        """The best sections for a keyword query: ``(score, sid, title, offset, line)``."""
        terms = [
            t for t in dict.fromkeys(_WORD.findall(query.lower()[:500])) if t not in STOPWORDS
        ][:10]
        if not terms:
            return []
        lower = self.lower
        scores: dict[int, float] = {}
        first: dict[int, tuple[float, int]] = {}
        for term in terms:
            hits: list[int] = []
            pos = lower.find(term)
            while pos >= 0 and len(hits) < 5000:
                hits.append(pos)
                pos = lower.find(term, pos + len(term))
            if not hits:
                continue
            weight = 1.0 / math.log(2 + len(hits))
            counted: set[int] = set()
            for h in hits:
                i = bisect.bisect_right(self._starts, h) - 1
                if i < 0 or i in counted:
                    continue
                counted.add(i)
                scores[i] = scores.get(i, 0.0) + weight
                if i not in first or weight > first[i][0]:
                    first[i] = (weight, h)
        phrase = " ".join(terms)
        if len(terms) > 1:
            pos = lower.find(phrase)
            while pos >= 0:
                i = bisect.bisect_right(self._starts, pos) - 1
                if i >= 0:
                    scores[i] = scores.get(i, 0.0) + 1.0
                    first[i] = (9.0, pos)
                pos = lower.find(phrase, pos + 1)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:SEARCH_HITS]
        out = []
        for i in best:
            sid, title, _, _ = self.sections[i]
            off = first[i][1]
            out.append((scores[i], sid, title, off, self.line_of(off)))
        return out

    def snippet(self, offset: int) -> str:
        start = max(0, offset - SNIPPET_CHARS // 3)
        return " ".join(self.text[start : start + SNIPPET_CHARS].split())
