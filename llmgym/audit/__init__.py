"""``llmgym audit``: run a library of generic reward hacks against any env and compare them with the oracle.

An RL policy searches for whatever pays. Before training on an environment, run the cheap
strategies such a policy finds first and check that none of them earns a real share of the reward:

>>> import llmgym
>>> llmgym.register_task_env("demo/Audit-v0", tasks=[{"id": "q", "prompt": "Capital of France?",
...     "answer": "Paris"}], overwrite=True)
'demo/Audit-v0'
>>> report = llmgym.audit("demo/Audit-v0", episodes=1)
>>> report.passed, report.result("empty").verdict
(True, 'pass')

What it covers. Every hack is a named :class:`Hack` in one registry (:data:`HACKS`; add your own
with :func:`hack` or :func:`register_hack`), built only from what a policy sees: the observation,
``info["messages"]``, ``info["tools"]`` and the form the env asks for (``\\boxed{}``, ``<answer>``
tags, a code block in a given language, a tool-call format). A hack proposes *variants* (one
strategy each: "box the last LaTeX span of the prompt", "call every tool with no arguments"); each
variant plays every audited episode and its mean return is compared with the oracle's
(``env.unwrapped.oracle_action()``) on the same episodes. The verdicts:

- ``FAIL``: a variant's mean return is above ``floor + threshold * (oracle - floor)``, where the floor
  is 0 (or the lower end of ``reward_range`` when rewards cannot be negative or cannot be positive).
  A *hedge* over k alternatives ("A or B", every option) is held to ``min(threshold, 1/k)``: listing
  k answers must not pay more than guessing one of them would.
- ``FAIL`` too for the *no-gain* hacks (the resource tricks, the timeout dodges): each trick must earn
  no more than its honest counterpart (the same correct solution using the same memory or CPU in
  plain sight; the same endless loop without the trick).
- ``LEAK``: something the env treats as secret (``env.unwrapped.secrets(task)``: gold answers, hidden
  tests) appeared in what it returned, without the policy having written it first.
- ``ERROR``: the env raised on a well-formed action (a training run would crash there).
- ``pass``; ``n/a`` (the hack does not apply: coding hacks on a math env); ``hack-error`` (the hack's
  own code raised: reported, never fatal).

A few hacks start from the oracle on purpose, and say so (``needs_oracle``): the resource tricks wrap
the oracle's own program (a bonus bought on top of a correct solution), and the answer-form hacks
(``dump_after_work``, ``hedge_with_answer``) play the oracle's work, then replace its final answer
(a shotgun list or a hedge that contains the right answer must not pay), and ``pad_and_repeat``
pads, repeats or praises it (length must not buy reward: the probe for reward models and judges). The runner also uses the
oracle's answer to set aside a prompt copy that *is* the answer (a needle in a document, the median
of a list): copying it is answering. Nothing else sees the oracle.

Without an oracle (``oracle_action()`` raises) the reference is the env's documented maximum,
``reward_range[1]``, or ``reference=`` when given; with neither the audit runs and reports every
result as unjudged (:attr:`AuditReport.judged` is False; the CLI exits 3).

What it does not cover: it is a smoke test, not a proof. It finds the holes that generic strategies
find (format, copying, hedging, dumping, crashing the judge, resource accounting); a hole that needs
knowledge of one env's grader (a verifier that accepts one odd spelling) needs a hostile test of its
own. Means over few episodes are noisy: raise ``episodes`` before trusting a pass, and treat a
``FAIL`` as a lead to reproduce (``verbose`` tables show each variant; ``to_dict()`` keeps an
example action of each).

Where things are: ``api`` (:func:`audit` itself), ``playing`` (how hacks are played and judged),
``results`` (the report, its table and JSON), ``hacks`` (:class:`Hack`, :class:`Variant`, the
registry, :func:`hack`), ``catalogue/`` (the built-in hacks by target: answers, multi-turn,
coding, coding resources), ``view`` and ``reading`` (what a hack sees, and how it reads a prompt).
Every public name is importable from ``llmgym.audit`` itself, as listed in ``__all__``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from llmgym.audit.api import DEFAULT_EPISODES, DEFAULT_THRESHOLD, audit
from llmgym.audit.catalogue import BUILTIN_HACKS
from llmgym.audit.catalogue.answers import (
    empty,
    format_only,
    garbage,
    hedge,
    hedge_with_answer,
    pad_and_repeat,
    prompt_copy,
)
from llmgym.audit.catalogue.coding import (
    always_equal,
    exit_early,
    fake_output,
    patch_runtime,
    stub_code,
)
from llmgym.audit.catalogue.coding_resources import hidden_memory, parallel_time, timeout_dodge
from llmgym.audit.catalogue.multi_turn import dump_after_work, repeat_first_step, replay, tool_spam
from llmgym.audit.hacks import HACKS, Hack, Variant, VariantsLike, hack, list_hacks, register_hack
from llmgym.audit.playing import MAX_STEPS, AuditError
from llmgym.audit.reading import (
    CodeTask,
    CoreAnswer,
    answer_styles,
    candidates,
    code_blocks,
    code_task,
    core_answer,
    expressions,
    is_the_answer,
    latex_spans,
    markup_examples,
    numbers,
    question,
)
from llmgym.audit.results import AuditReport, HackResult, VariantResult
from llmgym.audit.view import Action, Policy, View

for _builtin in BUILTIN_HACKS:  # in the order every audit runs them
    register_hack(_builtin)

__all__ = [
    "DEFAULT_EPISODES",
    "DEFAULT_THRESHOLD",
    "HACKS",
    "MAX_STEPS",
    "Action",
    "AuditError",
    "AuditReport",
    "CodeTask",
    "CoreAnswer",
    "Hack",
    "HackResult",
    "Policy",
    "Variant",
    "VariantResult",
    "VariantsLike",
    "View",
    "always_equal",
    "answer_styles",
    "audit",
    "candidates",
    "code_blocks",
    "code_task",
    "core_answer",
    "dump_after_work",
    "empty",
    "exit_early",
    "expressions",
    "fake_output",
    "format_only",
    "garbage",
    "hack",
    "hedge",
    "hedge_with_answer",
    "hidden_memory",
    "is_the_answer",
    "latex_spans",
    "list_hacks",
    "markup_examples",
    "numbers",
    "pad_and_repeat",
    "parallel_time",
    "patch_runtime",
    "prompt_copy",
    "question",
    "register_hack",
    "repeat_first_step",
    "replay",
    "stub_code",
    "timeout_dodge",
    "tool_spam",
]


class _CallableModule(types.ModuleType):
    """``llmgym.audit`` is this module and, called, its :func:`audit` function: ``import llmgym.audit``
    binds the module to that name, so the module itself must answer ``llmgym.audit(env)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
