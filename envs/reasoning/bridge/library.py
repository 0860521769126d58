"""The reasoning-gym adapter: its datasets' items and scores for a (dataset, level, seed).

reasoning-gym (``pip install 'llmgym[reasoning]'``, pinned: :data:`VERSION`) is imported on first
use, never by ``import llmgym``. One general rule maps llmgym's difficulty to the library's own
knobs: a dataset with a curriculum has attributes, each a list of levels; ``level`` in [0, 1] sets
every attribute to level ``round(level * (len(levels) - 1))``, and the config spans the levels
up to it (reasoning-gym's own default, ``INCLUSIVE``: harder levels add harder items to the easy
ones; its other mode, one level's band alone, breaks several generators in 0.1.25). A
dataset without a curriculum has one configuration, its default, whatever the level. An item is
item 0 of the dataset built with ``seed`` and ``size=1`` (reasoning-gym draws item *i* from
``Random(seed + i)``; size 1 keeps the datasets that precompute every item cheap).

What this module is not: the scorer's isolation. :func:`score` runs the library's own
``score_answer`` in the calling process; the env calls it only inside a worker process
(:mod:`llmgym.envs.reasoning.bridge.worker`) hardened by :func:`harden` first.
"""

from __future__ import annotations

import ast
import importlib
import io
import math
import tokenize
from collections import OrderedDict
from typing import Any

from llmgym import error

NAME = "reasoning-gym"
VERSION = "0.1.25"
EXTRA = "reasoning"

_CURRICULA: dict[str, Any] = {}
_ENTRIES: OrderedDict[tuple[str, float, int], tuple[Any, dict[str, Any]]] = OrderedDict()
_ENTRY_CACHE = 64


def load() -> Any:
    """The ``reasoning_gym`` module, or :class:`~llmgym.error.DependencyNotInstalled`."""
    try:
        return importlib.import_module("reasoning_gym")
    except ImportError as e:
        raise error.DependencyNotInstalled(
            f"llm/ReasoningGym-v0 needs reasoning-gym=={VERSION} ({e}); "
            f"pip install 'llmgym[{EXTRA}]'"
        ) from None


def datasets() -> list[str]:
    """Every dataset name the installed reasoning-gym registers."""
    load()
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


def config(dataset: str, level: float, seed: int) -> Any:
    """The dataset's config at ``level`` in [0, 1] (the rule in the module docstring)."""
    load()
    from reasoning_gym.coaching.base_curriculum import (
        DefaultCurriculumContext,
        RangeAttributeMode,
    )
    from reasoning_gym.factory import CURRICULA, DATASETS, create_curriculum

    _, config_cls = DATASETS[dataset]
    defaults = {"seed": seed, "size": 1}
    if dataset not in CURRICULA:
        return config_cls(**defaults)
    if dataset not in _CURRICULA:
        _CURRICULA[dataset] = create_curriculum(dataset)
    curriculum = _CURRICULA[dataset]
    for name, attr in curriculum.attributes.items():
        curriculum.set_attr_level(name, round(level * (len(attr.levels) - 1)))
    context = DefaultCurriculumContext(mode=RangeAttributeMode.INCLUSIVE)
    return curriculum.generate_configuration(defaults, context=context)


def levels(dataset: str) -> dict[str, int]:
    """How many levels each curriculum attribute of ``dataset`` has (``{}``: no curriculum)."""
    load()
    from reasoning_gym.factory import CURRICULA, create_curriculum

    if dataset not in CURRICULA:
        return {}
    return {n: len(a.levels) for n, a in create_curriculum(dataset).attributes.items()}


def _dataset_and_entry(dataset: str, level: float, seed: int) -> tuple[Any, dict[str, Any]]:
    key = (dataset, level, seed)
    if key in _ENTRIES:
        _ENTRIES.move_to_end(key)
        return _ENTRIES[key]
    from reasoning_gym.factory import DATASETS

    dataset_cls, _ = DATASETS[dataset]
    instance = dataset_cls(config=config(dataset, level, seed))
    pair = (instance, instance[0])
    _ENTRIES[key] = pair
    if len(_ENTRIES) > _ENTRY_CACHE:
        _ENTRIES.popitem(last=False)
    return pair


def entry(dataset: str, level: float, seed: int) -> dict[str, Any]:
    """The item: ``question`` and ``answer`` as str (``metadata`` stays with the library)."""
    _, item = _dataset_and_entry(dataset, level, seed)
    answer = item["answer"]
    return {"question": item["question"], "answer": None if answer is None else str(answer)}


def score(dataset: str, level: float, seed: int, answer: str) -> float:
    """The dataset's own ``score_answer`` on ``answer``, clipped to [0, 1] (a raise scores 0)."""
    instance, item = _dataset_and_entry(dataset, level, seed)
    try:
        value = float(instance.score_answer(answer, item))
    except Exception:  # a scorer that raises on odd text: that text earns nothing
        return 0.0
    return min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.0


# --- hardening the scorers that evaluate answers ----------------------------------------------

LITERAL_EVAL_MODULES = (
    "reasoning_gym.algorithmic.string_insertion",
    "reasoning_gym.algorithmic.spiral_matrix",
    "reasoning_gym.algorithmic.binary_matrix",
    "reasoning_gym.algorithmic.number_sorting",
    "reasoning_gym.games.n_queens",
)
"""Scorers that call ``eval()`` on the model's answer (to accept a Python list): in the worker
their module's ``eval`` is :func:`ast.literal_eval`, which accepts the same lists and runs no code."""

PARSE_EXPR_MODULES = ("reasoning_gym.games.puzzle24", "reasoning_gym.games.countdown")
"""Scorers that call sympy's ``parse_expr`` (an ``eval``) on the answer by their own name for it;
the integration and polynomial scorers call ``sympy.parse_expr``, guarded the same way."""

MATH_NAMES = frozenset(
    [
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "exp",
        "log",
        "ln",
        "sqrt",
        "pi",
        "E",
        "I",
        "oo",
        "Abs",
    ]
)
MATH_OPS = frozenset(["+", "-", "*", "/", "**", "^", "(", ")", ",", "."])


def _literal(source: Any, *_: Any) -> Any:
    if not isinstance(source, str):
        raise TypeError("only text is read")
    return ast.literal_eval(source.strip())


def is_plain_math(text: str) -> bool:
    """True if ``text`` is numbers, one-letter names, :data:`MATH_NAMES` and arithmetic only:
    what sympy's ``parse_expr`` may be given without running code (builtins such as ``exec``
    are names in its namespace, so a name outside the list is refused, not turned into a symbol).

    >>> is_plain_math("3*x**2/2 + sin(x) + C"), is_plain_math("exec(chr(112))")
    (True, False)
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    for tok in tokens:
        if tok.type == tokenize.NAME and not (len(tok.string) == 1 or tok.string in MATH_NAMES):
            return False
        if tok.type == tokenize.OP and tok.string not in MATH_OPS:
            return False
        if tok.type in (tokenize.STRING, tokenize.ERRORTOKEN):
            return False
    return True


def _guarded(parse: Any) -> Any:
    def parse_expr(text: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(text, str) or not is_plain_math(text):
            raise ValueError("not a plain math expression")
        return parse(text, *args, **kwargs)

    return parse_expr


def harden() -> None:
    """Make the scorers that evaluate answers safe in this process (the scoring worker): their
    ``eval`` becomes :func:`ast.literal_eval` and their ``parse_expr`` refuses anything but plain
    math. Idempotent; nothing else of the library changes."""
    load()
    import sympy

    for name in LITERAL_EVAL_MODULES:
        importlib.import_module(name).eval = _literal  # type: ignore[attr-defined]
    for holder in (sympy, *map(importlib.import_module, PARSE_EXPR_MODULES)):
        _guard_parse_expr(holder)


def _guard_parse_expr(holder: Any) -> None:
    if not getattr(holder.parse_expr, "_llmgym_guarded", False):
        guarded = _guarded(holder.parse_expr)
        guarded._llmgym_guarded = True
        holder.parse_expr = guarded
