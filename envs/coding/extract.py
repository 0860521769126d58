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
    "python": re.compile(r"^(?:def |async def |class |import |from \S+ import |@)", re.M),
    "c": re.compile(r"^\s*(?:#include\b|int\s+main\s*\()", re.M),
    "cpp": re.compile(r"^\s*(?:#include\b|int\s+main\s*\(|using namespace )", re.M),
}
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n`]*$")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as ``(tag, code)``; an unclosed last block runs to the end.

    >>> code_blocks("x\\n```python\\nprint(1)\\n```\\n~~~\\nraw\\n~~~")
    [('python', 'print(1)\\n'), ('', 'raw\\n')]
    >>> code_blocks("```cpp\\nint main(){}")
    [('cpp', 'int main(){}\\n')]
    """
    blocks: list[tuple[str, str]] = []
    fence = ""
    tag = ""
    body: list[str] = []
    for line in text.split("\n"):
        if not fence:
            m = _FENCE.match(line)
            if m:
                fence, tag, body = m.group(1), m.group(2).lower(), []
            continue
        stripped = line.strip()
        if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
            blocks.append((tag, "\n".join(body) + "\n"))
            fence = ""
            continue
        body.append(line)
    if fence and body:
        blocks.append((tag, "\n".join(body) + "\n"))
    return blocks


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
