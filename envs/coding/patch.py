"""Applying a unified diff to a source text (pure, strict about context, no fuzz in content)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The diff is malformed or does not apply; the message says which hunk and why."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old: tuple[str, ...]
    new: tuple[str, ...]


def looks_like_diff(text: str) -> bool:
    """Whether ``text`` is a unified diff (file headers or ``@@`` hunk headers).

    >>> looks_like_diff("--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x\\n+y\\n")
    True
    >>> looks_like_diff("def f():\\n    return 1\\n")
    False
    """
    return any(_HUNK.match(line) for line in text.splitlines())


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of a one-file unified diff (headers and ``\\ No newline`` lines skipped)."""
    hunks: list[Hunk] = []
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            i += 1
            continue
        old_start = int(m.group(1))
        old_len = int(m.group(2)) if m.group(2) is not None else 1
        new_len = int(m.group(4)) if m.group(4) is not None else 1
        old: list[str] = []
        new: list[str] = []
        i += 1
        while i < len(lines) and (len(old) < old_len or len(new) < new_len):
            line = lines[i]
            if line.startswith("\\"):
                i += 1
                continue
            tag, body = (line[:1], line[1:]) if line else (" ", "")
            if tag == " ":
                old.append(body)
                new.append(body)
            elif tag == "-":
                old.append(body)
            elif tag == "+":
                new.append(body)
            else:
                raise PatchError(f"hunk {len(hunks) + 1}: unexpected line {line[:60]!r}")
            i += 1
        if len(old) != old_len or len(new) != new_len:
            raise PatchError(
                f"hunk {len(hunks) + 1}: the header promises -{old_len} +{new_len} lines, "
                f"the body has -{len(old)} +{len(new)}"
            )
        hunks.append(Hunk(old_start, tuple(old), tuple(new)))
    if not hunks:
        raise PatchError("no hunks (@@ -a,b +c,d @@) found in the diff")
    return hunks


def apply_patch(source: str, diff: str) -> str:
    """``source`` with the diff's hunks applied in order. A hunk's old lines must match
    exactly (trailing whitespace ignored) at its stated line or, if the line numbers are off,
    at the nearest place after the previous hunk.

    >>> apply_patch("a\\nb\\nc\\n", "@@ -2,1 +2,2 @@\\n-b\\n+B\\n+B2\\n")
    'a\\nB\\nB2\\nc\\n'
    >>> try:
    ...     apply_patch("a\\n", "@@ -1 +1 @@\\n-z\\n+y\\n")
    ... except PatchError as e:
    ...     print(e)
    hunk 1: its context does not match the file
    """
    lines = source.splitlines()
    out: list[str] = []
    pos = 0
    for n, hunk in enumerate(parse_hunks(diff), 1):
        at = _locate(lines, hunk, pos)
        if at is None:
            raise PatchError(f"hunk {n}: its context does not match the file")
        out.extend(lines[pos:at])
        out.extend(hunk.new)
        pos = at + len(hunk.old)
    out.extend(lines[pos:])
    return "\n".join(out) + ("\n" if out else "")


def _locate(lines: list[str], hunk: Hunk, pos: int) -> int | None:
    want = [line.rstrip() for line in hunk.old]

    def matches(at: int) -> bool:
        return at + len(want) <= len(lines) and all(
            lines[at + k].rstrip() == want[k] for k in range(len(want))
        )

    stated = max(hunk.old_start - 1, 0) if hunk.old else hunk.old_start
    if stated >= pos and matches(stated):
        return stated
    candidates = [at for at in range(pos, len(lines) - len(want) + 1) if matches(at)]
    if not candidates:
        return None
    return min(candidates, key=lambda at: abs(at - stated))
