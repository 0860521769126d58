"""Text: the observation and action space of every llmgym environment (any Unicode string).

Gymnasium's own ``spaces.Text`` draws from a fixed character set, which cannot hold the
prompts and answers of a language model. :class:`Text` holds any Unicode string of bounded
length and registers itself with Gymnasium's vector utilities, so ``gym.make_vec`` works in
both ``"sync"`` and ``"async"`` modes (shared memory stores UTF-32 code points).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Space
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

DEFAULT_MAX_LENGTH = 1 << 20
"""Default bound on an observation's length, in code points (~1M: a 128k-token document fits)."""

# Blocks that ``sample`` draws non-ASCII characters from: Latin-1, Greek, Cyrillic, Hebrew,
# Arabic, Devanagari, math symbols, CJK, Hangul and emoji (astral plane).
_SAMPLE_BLOCKS = (
    (0x00A1, 0x00FF),
    (0x0391, 0x03C9),
    (0x0410, 0x044F),
    (0x05D0, 0x05EA),
    (0x0627, 0x064A),
    (0x0905, 0x0939),
    (0x2200, 0x22FF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0x1F600, 0x1F64F),
)


class Text(Space[str]):
    """Any Unicode string whose length (in code points) lies in ``[min_length, max_length]``.

    ``max_length=None`` means unbounded (fine for actions; an unbounded observation space
    cannot use ``AsyncVectorEnv``'s shared memory, and Gymnasium then says so).

    >>> space = Text(max_length=8)
    >>> space.contains("héllo 世界"), space.contains("x" * 9), space.contains(3)
    (True, False, False)
    >>> _ = space.seed(0)
    >>> isinstance(space.sample(), str)
    True
    """

    def __init__(
        self,
        max_length: int | None = DEFAULT_MAX_LENGTH,
        *,
        min_length: int = 0,
        seed: int | np.random.Generator | None = None,
    ):
        if min_length < 0:
            raise ValueError(f"Expects min_length >= 0, actual: {min_length}")
        if max_length is not None and max_length < min_length:
            raise ValueError(
                f"Expects max_length >= min_length, actual: {max_length} < {min_length}"
            )
        self.min_length = int(min_length)
        self.max_length = None if max_length is None else int(max_length)
        super().__init__(dtype=str, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of up to 64 characters, three quarters ASCII, the rest from other scripts.

        ``mask`` may be an int: the exact length to sample.
        """
        if probability is not None:
            raise ValueError("Text.sample does not take a probability mask")
        upper = 64 if self.max_length is None else min(self.max_length, 64)
        upper = max(upper, self.min_length)
        if mask is not None:
            length = int(mask)
            if not self.min_length <= length <= (self.max_length or length):
                raise ValueError(f"Expects a length within the space's bounds, actual: {length}")
        else:
            length = int(self.np_random.integers(self.min_length, upper + 1))
        chars = []
        for _ in range(length):
            if self.np_random.random() < 0.75:
                chars.append(chr(int(self.np_random.integers(0x20, 0x7F))))
            else:
                lo, hi = _SAMPLE_BLOCKS[int(self.np_random.integers(len(_SAMPLE_BLOCKS)))]
                chars.append(chr(int(self.np_random.integers(lo, hi + 1))))
        return "".join(chars)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str):
            return False
        n = len(x)
        return n >= self.min_length and (self.max_length is None or n <= self.max_length)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def to_jsonable(self, sample_n: Iterable[str]) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"Text(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Text)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash((Text, self.min_length, self.max_length))


# Shared memory layout per env: [length, code point 0, ..., code point max_length - 1] as uint32.


@create_shared_memory.register(Text)
def _create_text_shared_memory(space: Text, n: int = 1, ctx: ModuleType = mp) -> Any:
    if space.max_length is None:
        raise CustomSpaceError(
            "An unbounded Text space cannot live in shared memory: give the observation space a "
            "max_length or pass vector_kwargs={'shared_memory': False}"
        )
    return ctx.Array(np.dtype(np.uint32).char, n * (space.max_length + 1), lock=False)


def _text_rows(space: Text, shared_memory: Any) -> np.ndarray:
    assert space.max_length is not None
    flat = np.frombuffer(shared_memory, dtype=np.uint32)
    return flat.reshape((-1, space.max_length + 1))


class SharedTexts(Sequence[str]):
    """A live view of the strings in shared memory.

    ``AsyncVectorEnv`` reads its shared buffer once and returns ``deepcopy`` of that view
    after every step (or the view itself with ``copy=False``); deep-copying decodes the
    current strings into a plain tuple.
    """

    def __init__(self, space: Text, shared_memory: Any, n: int):
        self._rows = _text_rows(space, shared_memory)[:n]

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return row[1 : 1 + int(row[0])].tobytes().decode("utf-32-le", "surrogatepass")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(Text)
def _read_text_from_shared_memory(space: Text, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


@write_to_shared_memory.register(Text)
def _write_text_to_shared_memory(space: Text, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise ValueError(f"Observation of length {len(value)} does not fit {space!r}")
    codes = np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    row = _text_rows(space, shared_memory)[index]
    row[0] = len(codes)
    row[1 : 1 + len(codes)] = codes
