"""Hacks and their registry: :class:`Variant`, :class:`Hack`, :data:`HACKS` and :func:`hack`.

A hack proposes *variants* for one episode, each one strategy (an action played every turn, or a
policy of the view). This module holds those types, the registry every audit runs (filled with the
built-ins of ``catalogue/`` by ``llmgym.audit`` in their order), and the decorator that makes a
function into a hack. It defines no hack itself and plays nothing (``playing.py`` does).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from llmgym import error
from llmgym.audit.view import Action, Policy, View


@dataclass(frozen=True)
class Variant:
    """One strategy of a hack: the same ``action`` every turn, or a ``policy`` of the view.

    ``alternatives`` > 1 marks a hedge over that many answers (held to ``1/alternatives`` of the
    oracle's reward). ``mixed``: a strategy that does not know where the right answer goes in it
    (first or second in "A or B") plays each of these actions equally often; an episode scores the
    mean of their returns (an ordering that a grader happens to favour is no hedge). ``controls``:
    actions that must each earn no more than the limit for the episode to count (a hedge between the
    answer and another candidate that is itself right, such as ``5`` for ``101_{2}``, is no hedge).
    """

    name: str
    action: Action | None = None
    policy: Policy | None = None
    alternatives: int = 1
    mixed: tuple[Action, ...] = ()
    controls: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        if self.mixed and self.action is None:
            object.__setattr__(self, "action", self.mixed[0])

    def act(self, view: View) -> Action:
        if self.policy is not None:
            return self.policy(view)
        assert self.action is not None
        return self.action


VariantsLike = Mapping[str, "Action | Policy | Variant"] | Iterable[Variant] | None


@dataclass(frozen=True)
class Hack:
    """A named generic reward hack: ``make(view)`` proposes its variants for one episode.

    ``needs_oracle``: the hack sees ``view.oracle`` (and says why in its description).
    ``start``: ``"reset"`` (play from the first turn) or ``"final"`` (play the oracle's steps, then
    take over for its last one; the return counts from there). ``baseline``: the name of the variant
    the others must not beat (a no-gain hack). ``slow``: runs on at most ``slow_episodes`` episodes.
    ``exclude_answer``: a variant whose answer equals the oracle's is set aside for that episode.
    """

    name: str
    make: Callable[[View], VariantsLike]
    description: str = ""
    needs_oracle: bool = False
    start: str = "reset"
    baseline: str | None = None
    slow: bool = False
    exclude_answer: bool = False

    def __post_init__(self) -> None:
        if self.start not in ("reset", "final"):
            raise ValueError(f"Hack.start must be 'reset' or 'final', actual: {self.start!r}")
        if self.start == "final" and not self.needs_oracle:
            raise ValueError("a hack that starts after the oracle's work must set needs_oracle")

    def __call__(self, view: View) -> list[Variant]:
        """The variants for ``view``, normalised (duplicates of an earlier action dropped)."""
        return _variants(self.make(view))


HACKS: dict[str, Hack] = {}
"""The registry of hacks, by name, in the order they run."""


def register_hack(item: Hack, *, overwrite: bool = False) -> Hack:
    """Add a hack to :data:`HACKS` (every later audit runs it)."""
    if not isinstance(item, Hack):
        raise error.Error(f"Expects a llmgym.audit.Hack, actual type: {type(item).__name__}")
    if item.name in HACKS and not overwrite:
        raise error.Error(f"A hack named {item.name!r} exists; pass overwrite=True to replace it")
    HACKS[item.name] = item
    return item


def hack(
    name: str | None = None,
    *,
    needs_oracle: bool = False,
    start: str = "reset",
    baseline: str | None = None,
    slow: bool = False,
    exclude_answer: bool = False,
    register: bool = True,
    overwrite: bool = False,
) -> Callable[[Callable[[View], VariantsLike]], Hack]:
    """Decorator: a function ``view -> {variant name: action or policy}`` becomes a :class:`Hack`
    (registered unless ``register=False``); its docstring is the hack's description.

    >>> @hack("say_hi", register=False)
    ... def say_hi(view):
    ...     '''Greet instead of answering.'''
    ...     return {"hi": "hi"}
    >>> say_hi.description, [v.action for v in say_hi(View("q", [], []))]
    ('Greet instead of answering.', ['hi'])
    """

    def wrap(fn: Callable[[View], VariantsLike]) -> Hack:
        item = Hack(
            name or fn.__name__,
            fn,
            inspect.getdoc(fn) or "",
            needs_oracle=needs_oracle,
            start=start,
            baseline=baseline,
            slow=slow,
            exclude_answer=exclude_answer,
        )
        return register_hack(item, overwrite=overwrite) if register else item

    return wrap


def list_hacks() -> list[str]:
    return list(HACKS)


def _variants(made: VariantsLike) -> list[Variant]:
    if made is None:
        return []
    items: Iterable[Any]
    if isinstance(made, Mapping):
        items = []
        for name, value in made.items():
            if isinstance(value, Variant):
                items.append(value if value.name == name else replace(value, name=str(name)))
            elif callable(value) and not isinstance(value, (str, Mapping)):
                items.append(Variant(str(name), policy=value))
            else:
                items.append(Variant(str(name), action=value))
    else:
        items = made
    out: list[Variant] = []
    seen: set[str] = set()
    for v in items:
        if not isinstance(v, Variant):
            raise TypeError(f"a hack must propose Variants, got {type(v).__name__}")
        if v.policy is None and v.action is None:
            continue
        if v.mixed:
            key = "m:" + "|".join(action_key(a) for a in v.mixed)
        elif v.policy is None:
            key = action_key(v.action)
        else:
            key = f"policy:{v.name}"
        if key in seen:
            continue
        seen.add(key)
        out.append(v)
    return out


def action_key(action: Any) -> str:
    """A string that is equal for equal actions (to drop duplicate variants, to cache plays)."""
    if isinstance(action, str):
        return "s:" + action
    try:
        return "j:" + json.dumps(action, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return "r:" + repr(action)


def styled(
    view: View, prefix: str, texts: Mapping[str, str], alternatives: int = 1
) -> list[Variant]:
    """Each text in each answer style of the view."""
    out = []
    for key, text in texts.items():
        for style, wrap in view.styles:
            out.append(Variant(f"{prefix}{key}@{style}", wrap(text), alternatives=alternatives))
    return out
