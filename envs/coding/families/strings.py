"""String families: words, ciphers, run-length coding, prefixes, palindromes, anagrams, case."""

from __future__ import annotations

import random

from llmgym.envs.coding.problem import call_task, scale
from llmgym.tasks import Family, Task

WORDS = (
    "apple", "banana", "cherry", "delta", "echo", "falcon", "garden", "harbor", "island",
    "jungle", "kettle", "lemon", "mango", "nectar", "orbit", "pepper", "quartz", "river",
    "saddle", "tiger", "umbra", "velvet", "willow", "xenon", "yellow", "zephyr", "stone",
    "paper", "tree", "cloud", "storm", "light", "night", "table", "chair", "forest", "ocean",
    "code", "data", "graph",
)  # fmt: skip


def random_word(
    rng: random.Random, alphabet: str = "abcdefghijklmnopqrstuvwxyz", n: int = 6
) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, n)))


# --- reverse_words ------------------------------------------------------------------------------


def reverse_words(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


def _reverse_words(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 30)

    def make() -> tuple[str]:
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, n))]
        gaps = [" " * rng.randint(1, 1 + scale(d, 0, 3)) for _ in words]
        lead = " " * rng.randint(0, scale(d, 0, 2))
        return (lead + "".join(w + g for w, g in zip(words, gaps, strict=True)).rstrip() + lead,)

    return call_task(
        rng, d, fn=reverse_words, make=make, theme="strings",
        edge=[("",), ("   ",), ("solo",), ("  two   words  ",)],
        description="Return the words of `sentence` in reverse order, separated by single "
        "spaces. Words are maximal runs of non-space characters; leading, trailing and repeated "
        "spaces disappear. An empty or all-space sentence gives the empty string.",
    )  # fmt: skip


# --- caesar_cipher ------------------------------------------------------------------------------


def caesar_cipher(text: str, shift: int) -> str:
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + shift) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + shift) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)


def _caesar_cipher(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 60)
    span = scale(d, 25, 1000)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.!?-0123456789"

    def make() -> tuple[str, int]:
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, n)))
        return (text, rng.randint(-span, span))

    return call_task(
        rng, d, fn=caesar_cipher, make=make, theme="strings",
        edge=[("", 3), ("Zz", 1), ("abc", -1), ("Hello, World!", 26), ("xyz", 52 * 3 + 1)],
        description="Shift every ASCII letter of `text` by `shift` places in the alphabet, "
        "wrapping around and keeping its case (`shift` may be negative or larger than 26). "
        "Every other character stays as it is.",
    )  # fmt: skip


# --- run_length_encode --------------------------------------------------------------------------


def run_length_encode(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{j - i}{s[i]}")
        i = j
    return "".join(out)


def _run_length_encode(rng: random.Random, d: float) -> Task:
    runs = scale(d, 2, 25)
    letters = "abcxyz" if d < 0.5 else "abcdefghijklmnopqrstuvwxyzABC"

    def make() -> tuple[str]:
        return (
            "".join(
                rng.choice(letters) * rng.randint(1, scale(d, 3, 15))
                for _ in range(rng.randint(1, runs))
            ),
        )

    return call_task(
        rng, d, fn=run_length_encode, make=make, theme="strings",
        edge=[("",), ("a",), ("aaaaaaaaaaaa",), ("abab",)],
        description="Run-length encode `s` (letters only): each maximal run of one character "
        "becomes its length in decimal followed by the character, e.g. `'aaabcc'` -> "
        "`'3a1b2c'`. The empty string encodes to the empty string.",
    )  # fmt: skip


# --- longest_common_prefix ----------------------------------------------------------------------


def longest_common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    prefix = words[0]
    for w in words[1:]:
        k = 0
        while k < len(prefix) and k < len(w) and prefix[k] == w[k]:
            k += 1
        prefix = prefix[:k]
    return prefix


def _longest_common_prefix(rng: random.Random, d: float) -> Task:
    count = scale(d, 2, 12)

    def make() -> tuple[list[str]]:
        stem = random_word(rng, "abc", scale(d, 2, 8))
        return (
            [
                stem[: rng.randint(0, len(stem))] + random_word(rng, "abc", 4)
                for _ in range(rng.randint(1, count))
            ],
        )

    return call_task(
        rng, d, fn=longest_common_prefix, make=make, theme="strings",
        edge=[([],), ([""],), (["same", "same"],), (["a", "b"],), (["prefix", "pre"],)],
        description="Return the longest string that is a prefix of every string in `words` "
        "(the empty string when `words` is empty or they share no prefix).",
    )  # fmt: skip


# --- longest_palindrome -------------------------------------------------------------------------


def longest_palindrome(s: str) -> str:
    best = ""
    for center in range(2 * len(s) - 1):
        lo, hi = center // 2, center // 2 + center % 2
        while lo >= 0 and hi < len(s) and s[lo] == s[hi]:
            lo, hi = lo - 1, hi + 1
        if hi - lo - 1 > len(best):
            best = s[lo + 1 : hi]
    return best


def _longest_palindrome(rng: random.Random, d: float) -> Task:
    n = scale(d, 4, 300)

    def make() -> tuple[str]:
        s = random_word(rng, "ab" if rng.random() < 0.5 else "abc", n)
        if len(s) > 2 and rng.random() < 0.5:
            k = rng.randint(0, len(s) - 1)
            s = s[:k] + s[k:][::-1] + s[k:]
        return (s,)

    return call_task(
        rng, d, fn=longest_palindrome, make=make, theme="strings",
        edge=[("",), ("a",), ("ab",), ("aaaa",), ("abcba",)],
        description="Return the longest contiguous substring of `s` that reads the same "
        "backwards. If several have that length, return the one that starts first. The empty "
        "string gives the empty string.",
    )  # fmt: skip


# --- camel_to_snake -----------------------------------------------------------------------------


def camel_to_snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper():
            prev_lower = i > 0 and (name[i - 1].islower() or name[i - 1].isdigit())
            next_lower = i + 1 < len(name) and name[i + 1].islower()
            prev_upper = i > 0 and name[i - 1].isupper()
            if i > 0 and (prev_lower or (prev_upper and next_lower)):
                out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def _camel_to_snake(rng: random.Random, d: float) -> Task:
    parts = scale(d, 2, 6)

    def make() -> tuple[str]:
        pieces = []
        for k in range(rng.randint(1, parts)):
            w = rng.choice(WORDS)
            if rng.random() < 0.15 + 0.3 * d:
                pieces.append(w[:3].upper())
            else:
                pieces.append(w if k == 0 and rng.random() < 0.5 else w.capitalize())
            if rng.random() < 0.2 * d:
                pieces.append(str(rng.randint(0, 99)))
        return ("".join(pieces),)

    return call_task(
        rng, d, fn=camel_to_snake, make=make, theme="strings",
        edge=[("",), ("simple",), ("HTTPServer",), ("getHTTPResponseCode",), ("A",)],
        description="Convert a camelCase or PascalCase identifier to snake_case: insert `_` "
        "before an uppercase letter that follows a lowercase letter or digit, and before the "
        "last uppercase letter of an acronym when a lowercase letter follows it; then lowercase "
        "everything. Examples: `'getHTTPResponse'` -> `'get_http_response'`, `'Version2Beta'` "
        "-> `'version2_beta'`.",
    )  # fmt: skip


# --- group_anagrams -----------------------------------------------------------------------------


def group_anagrams(words: list[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault("".join(sorted(w)), []).append(w)
    return sorted(sorted(g) for g in groups.values())


def _group_anagrams(rng: random.Random, d: float) -> Task:
    n = scale(d, 3, 40)

    def make() -> tuple[list[str]]:
        bases = [random_word(rng, "abcde", scale(d, 3, 6)) for _ in range(rng.randint(1, 5))]
        out = []
        for _ in range(rng.randint(1, n)):
            letters = list(rng.choice(bases))
            rng.shuffle(letters)
            out.append("".join(letters))
        return (out,)

    return call_task(
        rng, d, fn=group_anagrams, make=make, theme="hashing",
        edge=[([],), (["a"],), (["ab", "ba", "ab"],), (["abc", "def"],)],
        description="Group the words of `words` that are anagrams of each other (same letters, "
        "same counts). Return the groups as lists sorted alphabetically, and the list of groups "
        "sorted (as Python sorts lists of strings). Duplicate words stay duplicated.",
    )  # fmt: skip


FAMILIES = [
    Family("reverse_words", _reverse_words, "reverse the words of a sentence"),
    Family("caesar_cipher", _caesar_cipher, "shift letters, keep case"),
    Family("run_length_encode", _run_length_encode, "run-length encoding"),
    Family("longest_common_prefix", _longest_common_prefix, "common prefix of strings"),
    Family("longest_palindrome", _longest_palindrome, "longest palindromic substring"),
    Family("camel_to_snake", _camel_to_snake, "identifier case conversion"),
    Family("group_anagrams", _group_anagrams, "group anagrams with a hash map"),
]
