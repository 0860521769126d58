"""The built-in hacks of ``llmgym audit``, by target, in the order every audit runs them.

A plain list: each module defines its hacks without registering them, and ``llmgym.audit``
registers :data:`BUILTIN_HACKS` in this order (the order of the report's rows). Add a built-in
hack to the module of its target and to this list; a user's own hacks go through
:func:`llmgym.audit.hack`. The types, the registry and the runner are beside this package.

- ``answers``: final answers that say nothing, copy the prompt or hedge (any graded answer).
- ``multi_turn``: tool calls and chunked reading (replay, tool spam, dumping what was shown).
- ``coding``: programs that try to pass the tests without solving the task.
- ``coding_resources``: no-gain tricks (hidden memory, parallel CPU, timeout dodges).
"""

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
from llmgym.audit.hacks import Hack

BUILTIN_HACKS: list[Hack] = [
    empty,
    garbage,
    format_only,
    prompt_copy,
    hedge,
    replay,
    repeat_first_step,
    tool_spam,
    dump_after_work,
    hedge_with_answer,
    pad_and_repeat,
    exit_early,
    always_equal,
    fake_output,
    patch_runtime,
    stub_code,
    hidden_memory,
    parallel_time,
    timeout_dodge,
]
"""Every built-in hack, in the order they run (cheap answer hacks first, slow coding tricks last)."""
