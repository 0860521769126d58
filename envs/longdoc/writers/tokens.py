"""Token counts for documents: a tokenizer when one is given, otherwise a character estimate.

The estimate is one token per :data:`CHARS_PER_TOKEN` characters, rounded up. Against a
byte-level BPE (32k vocabulary) trained locally on 9 MiB of vim manuals and Python source,
it counts 6% (policies) to 21% (code) fewer tokens on the generated documents, which are
dense in numbers and codes (``benchmarks/longdoc.py`` prints the error per kind); a
production tokenizer trained on far more text is more efficient than that small BPE, so
expect less. Pass a tokenizer for exact counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from llmgym import error

CHARS_PER_TOKEN = 4.0
"""Characters per token of the estimate (English prose in GPT-style BPEs is 4 to 4.5)."""


class TokenCounter:
    """Counts tokens with ``tokenizer`` (an object with ``encode`` or a callable) or estimates them.

    ``encode(text)`` / ``tokenizer(text)`` may return a sequence of ids, an object with an
    ``ids`` attribute (a Hugging Face ``Encoding``) or ``input_ids`` key, or an int.

    >>> TokenCounter().count("x" * 10)
    3
    >>> TokenCounter(str.split).count("three short words")
    3
    """

    def __init__(self, tokenizer: Any = None):
        if tokenizer is None:
            self._encode: Callable[[str], Any] | None = None
            self.name = f"estimate: ceil(chars / {CHARS_PER_TOKEN:g})"
        elif callable(getattr(tokenizer, "encode", None)):
            self._encode = tokenizer.encode
            self.name = f"tokenizer: {type(tokenizer).__name__}"
        elif callable(tokenizer):
            self._encode = tokenizer
            self.name = f"tokenizer: {getattr(tokenizer, '__name__', type(tokenizer).__name__)}"
        else:
            raise error.Error(
                "Expects tokenizer to be an object with an encode(text) method or a callable "
                f"text -> token ids, actual type: {type(tokenizer).__name__}"
            )

    @property
    def exact(self) -> bool:
        """Whether counts come from a real tokenizer."""
        return self._encode is not None

    def count(self, text: str) -> int:
        if self._encode is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return _length(self._encode(text))

    def chars_for(self, tokens: int) -> int:
        """The characters that the estimate gives ``tokens`` tokens (a first guess for writers)."""
        return int(tokens * CHARS_PER_TOKEN)


def _length(encoded: Any) -> int:
    if isinstance(encoded, int) and not isinstance(encoded, bool):
        return encoded
    ids = getattr(encoded, "ids", None)
    if ids is None and isinstance(encoded, dict):
        ids = encoded.get("input_ids")
    if ids is None:
        ids = encoded
    try:
        return len(ids)
    except TypeError:
        raise error.Error(
            "The tokenizer returned neither token ids nor a count; expects encode(text) to give "
            f"a list of ids, an Encoding or an int, actual type: {type(encoded).__name__}"
        ) from None
