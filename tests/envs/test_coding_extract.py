"""Answer extraction and unified-diff application: behaviour and hostile input."""

from __future__ import annotations

import difflib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.envs.coding.extract import code_blocks, extract_code
from llmgym.envs.coding.patch import PatchError, apply_patch, looks_like_diff


def test_language_tagged_blocks_win_over_untagged_ones():
    text = "```python\na = 1\n```\n```\nexample()\n```\n```py\nb = 2\n```"
    assert extract_code(text) == "b = 2\n"
    assert extract_code(text, which="first") == "a = 1\n"
    assert extract_code("```\nx = 1\n```\nthen\n```\ny = 2\n```") == "y = 2\n"


def test_other_languages_and_empty_blocks_are_not_code():
    assert extract_code("```java\nclass A {}\n```") is None
    assert extract_code("```python\n\n```") is None
    assert extract_code("```cpp\nint main(){}\n```", "cpp") == "int main(){}\n"
    assert extract_code("```c++\nint main(){}\n```", "cpp") == "int main(){}\n"
    assert extract_code("```python\nx=1\n```", "c") is None


def test_tildes_longer_fences_and_unclosed_blocks():
    assert extract_code("~~~python\nx = 1\n~~~") == "x = 1\n"
    assert extract_code("````python\n```\nx = 1\n````") == "```\nx = 1\n"
    assert extract_code("```python\ndef f():\n    return 1") == "def f():\n    return 1\n"


def test_bare_code_needs_to_look_like_code():
    assert extract_code("import sys\nprint(sys.argv)") == "import sys\nprint(sys.argv)\n"
    assert extract_code("#include <stdio.h>\nint main(){}", "c") is not None
    assert extract_code("the answer is 4", "python") is None
    with pytest.raises(ValueError):
        extract_code("x", which="middle")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("`~ \npythonc+\x00") + ["\ud800", "é"]), max_size=300))
def test_extraction_never_raises(text):
    code = extract_code(text)
    assert code is None or isinstance(code, str)
    assert isinstance(code_blocks(text), list)


@pytest.mark.parametrize(
    "text", ["```\n" * 300_000, "```python\n" + "x" * 5_000_000, "`" * 3_000_000, "\n" * 5_000_000]
)
def test_extraction_is_linear_on_adversarial_input(text):
    start = time.perf_counter()
    extract_code(text)
    assert time.perf_counter() - start < 2.0


def test_apply_a_difflib_patch():
    old = "a\nb\nc\nd\ne\n"
    new = "a\nB\nc\nd\ne\nf\n"
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/x", "b/x"))
    assert looks_like_diff(diff)
    assert apply_patch(old, diff) == new


def test_hunks_with_wrong_line_numbers_still_apply_where_the_context_is():
    old = "x\n" * 5 + "target\n" + "y\n" * 5
    diff = "@@ -1,1 +1,1 @@\n-target\n+fixed\n"
    assert apply_patch(old, diff) == old.replace("target", "fixed")


@pytest.mark.parametrize(
    "diff",
    [
        "",
        "no hunks here",
        "@@ -1,2 +1,2 @@\n-a\n",
        "@@ -1 +1 @@\n*a\n+b\n",
        "@@ -1 +1 @@\n-zzz\n+b\n",
    ],
)
def test_bad_diffs_raise_patch_errors(diff):
    with pytest.raises(PatchError):
        apply_patch("a\nb\n", diff)


lines = st.lists(st.sampled_from(["a", "b", "c", "def f():", "    return 1", ""]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(lines, lines)
def test_any_difflib_diff_applies_back_exactly(old_lines, new_lines):
    old = "".join(line + "\n" for line in old_lines)
    new = "".join(line + "\n" for line in new_lines)
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a", "b", n=2))
    if not diff:
        return
    assert apply_patch(old, diff) == new
