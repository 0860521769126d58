"""The language table: how to compile and run each language. Adding a language is one entry.

In ``run`` and ``compile``, ``{python}`` stands for the sandbox's Python interpreter. Everything
runs inside the sandbox with the source written to ``/tmp/<source>``, ``/tmp`` as working directory.

>>> sorted(LANGUAGES)
['c', 'cpp', 'python', 'shell']
>>> resolve_language("c++").name
'cpp'
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgym.sandbox.errors import UnknownLanguage
from llmgym.sandbox.limits import Limits

__all__ = ["LANGUAGES", "Language", "resolve_language"]

_COMPILE_LIMITS = Limits(wall_time_s=30, memory_mb=1024, max_processes=32, max_file_bytes=256 << 20)


@dataclass(frozen=True)
class Language:
    """One row of the language table."""

    name: str
    source: str
    """File name the code is written to, in /tmp."""
    run: tuple[str, ...]
    """argv of the program."""
    compile: tuple[str, ...] | None = None
    """argv of the compile step, or ``None``; a non-zero exit is a ``compile_error``."""
    compile_limits: Limits = _COMPILE_LIMITS
    aliases: tuple[str, ...] = ()
    is_python: bool = False
    """Runs on the warm interpreter (fast path) and reports SyntaxError as ``compile_error``."""


LANGUAGES: dict[str, Language] = {
    "python": Language(
        "python", "main.py", ("{python}", "main.py"), aliases=("py", "python3"), is_python=True
    ),
    "c": Language(
        "c",
        "main.c",
        ("./main",),
        compile=("gcc", "-O2", "-std=gnu17", "-pipe", "-o", "main", "main.c", "-lm"),
    ),
    "cpp": Language(
        "cpp",
        "main.cpp",
        ("./main",),
        compile=("g++", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"),
        aliases=("c++", "cxx"),
    ),
    "shell": Language("shell", "main.sh", ("bash", "main.sh"), aliases=("bash", "sh")),
}


def resolve_language(name: object) -> Language:
    """The table entry for ``name`` or one of its aliases (case-insensitive)."""
    if not isinstance(name, str):
        raise UnknownLanguage(f"language expects a str, actual type: {type(name).__name__}")
    key = name.strip().lower()
    for lang in LANGUAGES.values():
        if key == lang.name or key in lang.aliases:
            return lang
    raise UnknownLanguage(
        f"unknown language {name!r}; known: {sorted(LANGUAGES)} "
        "(add one with an entry in llmgym.sandbox.LANGUAGES)"
    )
