"""Errors the sandbox raises for misuse of its API (never for what the sandboxed program does).

A program that crashes, loops or floods its output is a *result* (:class:`ExecResult` with a
``status``); these exceptions are for the caller's own mistakes and for a host that cannot
sandbox at all. All derive from :class:`SandboxError`, itself an :class:`llmgym.error.Error`
(and so a :class:`gymnasium.error.Error`): ``except llmgym.error.Error`` catches every error
llmgym raises.
"""

from __future__ import annotations

from llmgym.error import Error


class SandboxError(Error):
    """Base class of every sandbox error."""


class InvalidLimits(SandboxError, ValueError):
    """A :class:`Limits` field is negative, zero where it must be positive, or of the wrong type."""


class InvalidRunRequest(SandboxError, ValueError):
    """``run()`` got arguments that cannot describe one execution (e.g. both ``code`` and ``command``)."""


class UnknownLanguage(SandboxError, ValueError):
    """A ``language`` that is not in the language table (see ``llmgym.sandbox.LANGUAGES``)."""


class UnknownBackend(SandboxError, ValueError):
    """A backend name other than ``"local"``, ``"docker"`` or ``"ray"``."""


class BackendUnavailable(SandboxError, RuntimeError):
    """The backend cannot work on this host (no Docker daemon, Ray missing, no namespaces...).

    The message says what is missing and how to get it.
    """


class SandboxClosed(SandboxError, RuntimeError):
    """The sandbox was closed; create a new one with ``get_sandbox()``."""
