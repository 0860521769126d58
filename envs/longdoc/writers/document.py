"""Documents: sections of text blocks, planted facts at chosen depths, rendering with offsets.

A :class:`Writer` (one per document kind) invents a document's cast from its seed and
writes front matter, filler body sections and back matter in the kind's own voice. A task
family plants what its question needs (:class:`Plant`: a sentence inside a prose block, a
block of its own, or a whole section) at a depth in [0, 1], and :func:`assemble` fills the
rest of the length budget with body sections, places the plants, numbers the sections
``S1..Sn`` and renders the text once, recording each section's character span.

Speed matters (a 128k-token document is ~500 KB of text and ``reset`` has 50 ms): writers
fill precompiled templates (:class:`Phrases`) from tuples with ``random()`` indexing,
paragraphs are joined once, and the document is joined once.
"""

from __future__ import annotations

import bisect
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llmgym.envs.longdoc.writers.tokens import TokenCounter

Slots = Mapping[str, Callable[[], str]]

_SLOT = re.compile(r"\{(\w+)\}")


class Phrases:
    """Sentence templates with ``{slot}`` names, compiled once; filled from slot callables.

    >>> p = Phrases("{a} rose to {b}.", "{b} was reported by {a}.")
    >>> p.fill(0, {"a": lambda: "Revenue", "b": lambda: "12"})
    'Revenue rose to 12.'
    """

    def __init__(self, *templates: str):
        self._items = [(_SLOT.sub("{}", t), tuple(_SLOT.findall(t))) for t in templates]
        # Steps coprime with the count walk distinct templates in varied orders (cheaper than sample).
        self._strides = [
            s for s in range(1, max(2, len(templates))) if math.gcd(s, len(templates)) == 1
        ] or [1]

    def __len__(self) -> int:
        return len(self._items)

    def fill(self, index: int, slots: Slots) -> str:
        fmt, names = self._items[index]
        return fmt.format(*[slots[n]() for n in names])

    def pick(self, rng: random.Random, slots: Slots) -> str:
        return self.fill(int(rng.random() * len(self._items)), slots)

    def paragraph(self, rng: random.Random, slots: Slots, n: int, budget: Budget) -> str:
        """Up to ``n`` sentences from distinct templates, stopping when the budget runs out."""
        size = len(self._items)
        start = int(rng.random() * size)
        stride = self._strides[int(rng.random() * len(self._strides))]
        out: list[str] = []
        for k in range(min(n, size)):
            if budget.left <= 0 and out:
                break
            fmt, names = self._items[(start + k * stride) % size]
            sentence = fmt.format(*[slots[name]() for name in names])
            budget.spend(len(sentence) + 1)
            out.append(sentence)
        return " ".join(out)


class Budget:
    """Characters left for body text; writers stop adding sentences when it runs out."""

    def __init__(self, chars: int):
        self.left = chars

    def spend(self, chars: int) -> None:
        self.left -= chars


def chooser(rng: random.Random) -> Callable[[Sequence[Any]], Callable[[], Any]]:
    """``choice(seq)``: a slot that draws a uniform element of ``seq`` each time it is called."""
    rnd = rng.random

    def choice(seq: Sequence[Any]) -> Callable[[], Any]:
        n = len(seq)
        return lambda: seq[int(rnd() * n)]

    return choice


def picker(rng: random.Random) -> Callable[[Sequence[Any]], Any]:
    """``pick(seq)``: a uniform element of ``seq`` drawn from ``rng`` (faster than ``choice``)."""
    rnd = rng.random

    def pick(seq: Sequence[Any]) -> Any:
        return seq[int(rnd() * len(seq))]

    return pick


@dataclass
class Section:
    """A titled section: text blocks separated by blank lines.

    ``prose[i]`` says whether block ``i`` is running prose that a planted sentence may join
    (tables, lists and code are not). ``sid`` is set by :func:`assemble`; ``record`` holds
    the structured facts of a section that a writer fills in late (an incident's date).
    """

    title: str
    blocks: list[str]
    prose: list[bool] | None = None
    sid: str = ""
    record: dict[str, Any] | None = None

    def takes_sentences(self, i: int) -> bool:
        return self.prose is None or self.prose[i]

    def chars(self) -> int:
        return len(self.title) + 8 + sum(len(b) + 2 for b in self.blocks)


@dataclass
class Plant:
    """Something a family places at ``depth`` (0 = start of the document, 1 = its end).

    Exactly one of ``sentence`` (joins a prose block), ``block`` (a block of its own, e.g. a
    table row group or a function) or ``section``. After :func:`assemble`, ``sid`` names
    the section it landed in and ``offset`` its character offset in the text.
    """

    depth: float
    sentence: str = ""
    block: str = ""
    section: Section | None = None
    sid: str = ""
    offset: int = -1
    _host: Section | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if self.section is not None:
            return self.section.blocks[0] if self.section.blocks else self.section.title
        return self.sentence or self.block


@dataclass(frozen=True)
class Document:
    """Rendered text and its sections as ``(sid, title, start, end)`` character spans."""

    text: str
    sections: tuple[tuple[str, str, int, int], ...]
    tokens: int
    counter: str
    kind: str


class Writer:
    """Writes one kind of document; subclasses draw their cast in ``__init__`` from ``seed``.

    ``body(rng, budget)`` returns one filler section and must spend from ``budget``;
    ``avoid`` lets a family keep filler from saying something that would change its answer.
    """

    kind: ClassVar[str] = "document"
    heading: ClassVar[str] = "[{sid}] {title}"

    def __init__(self, seed: int):
        self.seed = seed
        self.avoid: Callable[[Any], bool] = _never

    def begin(self) -> None:
        """Reset what the body keeps between sections (counters, names); called per build."""

    def base_slots(self, rng: random.Random) -> dict[str, Callable[[], str]]:
        """The template slots of this kind, drawing from ``rng``."""
        return {}

    def slots(self, rng: random.Random, **fixed: str) -> dict[str, Callable[[], str]]:
        """:meth:`base_slots` (built once per ``rng``) with some slots fixed for one section."""
        if getattr(self, "_slot_rng", None) is not rng:
            self._slot_rng, self._slot_base = rng, self.base_slots(rng)
        out = dict(self._slot_base)
        for name, value in fixed.items():
            out[name] = _constant(value)
        return out

    def header(self) -> str:
        raise NotImplementedError

    def front(self) -> list[Section]:
        return []

    def body(self, rng: random.Random, budget: Budget) -> Section:
        raise NotImplementedError

    def back(self) -> list[Section]:
        return []

    def finalize(self, sections: list[Section]) -> None:
        """Last touches once the order is known (dates and numbers that run in order)."""


def _never(_: Any) -> bool:
    return False


def _constant(value: str) -> Callable[[], str]:
    return lambda: value


def assemble(
    writer: Writer,
    plants: Sequence[Plant],
    tokens: int,
    counter: TokenCounter,
    *,
    tolerance: float = 0.05,
) -> Document:
    """The document of about ``tokens`` tokens (as ``counter`` counts them) holding ``plants``.

    With a real tokenizer the text is measured and, when off by more than ``tolerance``,
    rebuilt (at most twice) with the character budget scaled by the measured ratio; the
    body is drawn from the same seed each time, so the result is deterministic.
    """
    chars = counter.chars_for(tokens)
    for _ in range(3):
        text, sections = _assemble_once(writer, plants, chars)
        n = counter.count(text)
        if not counter.exact or abs(n - tokens) <= tolerance * tokens:
            break
        chars = max(1, int(chars * tokens / max(n, 1)))
    return Document(text, sections, n, counter.name, writer.kind)


def _assemble_once(
    writer: Writer, plants: Sequence[Plant], chars: int
) -> tuple[str, tuple[tuple[str, str, int, int], ...]]:
    writer.begin()
    head = writer.header()
    front, back = writer.front(), writer.back()
    planted = [p for p in plants if p.section is not None]
    fixed = len(head) + sum(s.chars() for s in front + back)
    fixed += sum(p.section.chars() for p in planted if p.section is not None)
    fixed += sum(len(p.sentence) + len(p.block) + 2 for p in plants if p.section is None)
    budget = Budget(chars - fixed)
    rng = random.Random(writer.seed * 7919 + 17)
    body: list[Section] = []
    while budget.left > 0:
        left = budget.left
        section = writer.body(rng, budget)
        budget.left = left - section.chars()  # exact, whatever the writer spent inside
        body.append(section)
    # The last section may overshoot; drop its trailing blocks while that gets closer to the target.
    while body and len(body[-1].blocks) > 1 and len(body[-1].blocks[-1]) + 2 < -2 * budget.left:
        last = body[-1]
        budget.left += len(last.blocks.pop()) + 2
        if last.prose is not None:
            last.prose.pop()
    sections = front + body + back
    for p in sorted(planted, key=lambda p: p.depth):
        assert p.section is not None
        sections.insert(_index_at(sections, p.depth), p.section)
        p._host = p.section
    for p in plants:
        if p.section is None:
            _place_inside(sections, p)
    writer.finalize(sections)
    return _render(writer, head, sections, plants)


def _starts(sections: Sequence[Section]) -> tuple[list[int], int]:
    starts, pos = [], 0
    for s in sections:
        starts.append(pos)
        pos += s.chars()
    return starts, pos


def _index_at(sections: Sequence[Section], depth: float) -> int:
    """Where to insert a section so that it starts near ``depth`` of the text."""
    starts, total = _starts(sections)
    return bisect.bisect_left(starts, depth * total)


def _place_inside(sections: list[Section], plant: Plant) -> None:
    if not sections:
        sections.append(Section("Notes", []))
    starts, total = _starts(sections)
    target = plant.depth * total
    i = max(0, bisect.bisect_right(starts, target) - 1)
    # The section at that depth, or the nearest one with a prose block for a sentence.
    j = i
    if not plant.block:
        for step in range(len(sections)):
            if i - step >= 0 and _has_prose(sections[i - step]):
                j = i - step
                break
            if i + step < len(sections) and _has_prose(sections[i + step]):
                j = i + step
                break
    host = sections[j]
    within = target - starts[j] if j == i else (0.0 if j > i else float(host.chars()))
    pos, k = 0, 0
    for k, b in enumerate(host.blocks):  # noqa: B007  (k: the block at that depth)
        pos += len(b) + 2
        if pos >= within:
            break
    if plant.block:
        at = min(k + 1, len(host.blocks))
        host.blocks.insert(at, plant.block)
        if host.prose is not None:
            host.prose.insert(at, False)
    else:
        prose = [m for m in range(len(host.blocks)) if host.takes_sentences(m)]
        if not prose:
            host.blocks.append(plant.sentence)
            if host.prose is not None:
                host.prose.append(True)
        else:
            m = min(prose, key=lambda m: abs(m - k))
            block = host.blocks[m]
            before = m > k or (m == k and within < pos - len(block) / 2)
            host.blocks[m] = (
                plant.sentence + " " + block if before else block + " " + plant.sentence
            )
    plant._host = host


def _has_prose(section: Section) -> bool:
    return any(section.takes_sentences(k) for k in range(len(section.blocks)))


def _render(
    writer: Writer, head: str, sections: Sequence[Section], plants: Sequence[Plant]
) -> tuple[str, tuple[tuple[str, str, int, int], ...]]:
    pieces = [head, "\n\n"]
    pos = len(head) + 2
    spans = []
    fmt = writer.heading
    for n, s in enumerate(sections, 1):
        s.sid = f"S{n}"
        chunk = fmt.format(sid=s.sid, title=s.title) + "\n\n" + "\n\n".join(s.blocks)
        spans.append((s.sid, s.title, pos, pos + len(chunk)))
        pieces.append(chunk)
        pieces.append("\n\n")
        pos += len(chunk) + 2
    text = "".join(pieces)
    by_section = {id(s): span for s, span in zip(sections, spans, strict=True)}
    for p in plants:
        host = p._host
        if host is None:
            continue
        sid, _, start, end = by_section[id(host)]
        p.sid = sid
        p.offset = text.find(p.text, start, end) if p.text else start
    return text, tuple(spans)
