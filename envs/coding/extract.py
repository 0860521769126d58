"""Finding the program in an assistant message: fenced code blocks first, then bare code.

Linear in the message length (a line scanner, no backtracking regex), so a 10 MB answer is
read in well under a second; nothing here parses or runs the code.
"""

from __future__ import annotations

import re

LANGUAGE_TAGS = {
    "python": ("python", "python3", "py", "py3"),
    "c": ("c", "h"),
    "cpp": ("cpp", "c++", "cc", "cxx", "hpp", "cplusplus"),
}
_BARE_MARKERS = {
    "python": re.compile(r"^(?:def |async def |class |import |from \S+ import |@\w)", re.M),
    "c": re.compile(r"^\s*(?:#include\b|int\s+main\s*\()", re.M),
    "cpp": re.compile(r"^\s*(?:#include\b|int\s+main\s*\(|using namespace )", re.M),
}
_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)$", re.M)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as ``(tag, code)``; an unclosed last block runs to the end.

    Only fence lines are visited (found by one anchored regex pass), so the cost is linear in
    the text whatever it holds.

    >>> code_blocks("x\\n```python\\nprint(1)\\n```\\n~~~\\nraw\\n~~~")
    [('python', 'print(1)\\n'), ('', 'raw\\n')]
    >>> code_blocks("```cpp\\nint main(){}")
    [('cpp', 'int main(){}\\n')]
    """
    blocks: list[tuple[str, str]] = []
    opening: re.Match[str] | None = None
    for m in _FENCE_LINE.finditer(text):
        fence, info = m.group(1), m.group(2).strip()
        if opening is None:
            if fence[0] == "`" and "`" in info:
                continue  # not a fence: a backtick fence's info string has no backticks
            opening = m
            continue
        if fence[0] == opening.group(1)[0] and len(fence) >= len(opening.group(1)) and not info:
            blocks.append((_tag(opening), text[opening.end() + 1 : m.start()]))
            opening = None
    if opening is not None:
        body = text[opening.end() + 1 :]
        if body:
            blocks.append((_tag(opening), body if body.endswith("\n") else body + "\n"))
    return blocks


def _tag(opening: re.Match[str]) -> str:
    words = opening.group(2).split()
    return words[0].lower() if words else ""


def strip_reasoning(text: str) -> str:
    """The text after the last ``</think>`` (reasoning is not the answer).

    >>> strip_reasoning("<think>```python\\nx=1\\n```</think>final")
    'final'
    """
    end = text.rfind("</think>")
    return text[end + len("</think>") :] if end >= 0 else text


def extract_code(text: str, language: str = "python", *, which: str = "last") -> str | None:
    """The program in ``text``: among fenced blocks, those tagged with ``language`` win, then
    untagged ones (``which`` picks the ``"last"`` or ``"first"``); without fences, the whole
    text if it looks like code in ``language``; else ``None``.

    >>> extract_code("Here:\\n```python\\ndef f(): return 1\\n```\\nand a test:\\n```\\nf()\\n```")
    'def f(): return 1\\n'
    >>> extract_code("```js\\nlet x = 1\\n```") is None
    True
    >>> extract_code("def f(x):\\n    return x\\n")
    'def f(x):\\n    return x\\n'
    >>> extract_code("I think the answer is 42.") is None
    True
    """
    if which not in ("last", "first"):
        raise ValueError(f"which expects 'last' or 'first', actual: {which!r}")
    text = strip_reasoning(text)
    tags = LANGUAGE_TAGS.get(language, (language,))
    blocks = code_blocks(text)
    if blocks:
        tagged = [code for tag, code in blocks if tag in tags]
        untagged = [code for tag, code in blocks if not tag]
        pool = tagged or untagged
        if not pool:
            return None
        code = pool[-1] if which == "last" else pool[0]
        return code if code.strip() else None
    marker = _BARE_MARKERS.get(language)
    if marker is not None and marker.search(text):
        return text if text.endswith("\n") else text + "\n"
    return None
