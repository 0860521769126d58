"""Errors raised by llmgym, all under :class:`gymnasium.error.Error`, each saying what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from gymnasium import error as gym_error


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the closest of ``choices`` to ``name``, or ``""``.

    >>> did_you_mean("Math-v1", ["Math-v0", "Coding-v0"])
    "; did you mean 'Math-v0'?"
    """
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class Error(gym_error.Error):
    """Base class of every llmgym error."""


class ResetNeeded(Error, gym_error.ResetNeeded):
    """``step`` was called before ``reset`` or after the episode ended."""


class InvalidAction(Error, gym_error.InvalidAction):
    """The action is not an assistant message (a ``str`` or an OpenAI-style dict)."""


class UnknownEnv(Error, gym_error.UnregisteredEnv):
    """An env id that is not registered; the message carries Gymnasium's "did you mean"."""


class InvalidTask(Error):
    """A task, subtask or dataset record is malformed."""


class UnknownTask(Error):
    """A ``task_id`` that the env's task source cannot rebuild or find."""


class UnknownFamily(Error):
    """A task family name the env does not have."""


class UnknownVerifier(Error):
    """A verifier name that is not in the verifier table."""


class InvalidSpec(Error):
    """A declarative environment spec (Python, YAML or TOML) is malformed."""


class InvalidState(Error):
    """``set_state`` got a snapshot that this env cannot restore."""


class DependencyNotInstalled(Error, gym_error.DependencyNotInstalled):
    """An optional dependency is missing; the message names the extra to install."""
