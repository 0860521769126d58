"""The bridge: how llmgym brings in a task library (reasoning-gym here; any library the same way).

A bridged library becomes a domain wing whose families are the library's datasets:

1. ``library.py``, the adapter, the only module that imports the library (on first use, raising
   :class:`~llmgym.error.DependencyNotInstalled` with the pip extra when it is missing): an item
   for ``(dataset, level, seed)``, the library's own score of an answer, and the one rule that maps
   llmgym's ``difficulty`` in [0, 1] to the library's difficulty knobs.
2. ``families/``, the catalogue: one plain line per bridged dataset (:class:`LibraryFamily`),
   grouped by the library's own categories, so the families are data that a test compares with
   the installed library; datasets left out are listed with the reason.
3. ``source.py``, :class:`LibrarySource`: the catalogue as llmgym procedural families, each item
   rebuilt from its task id (a 32-bit seed drawn from llmgym's per-item ``Random``).
4. ``worker.py``: the library's scorer in a worker process under a real timeout, hardened against
   scorers that evaluate answers, so that a policy's text never runs library code in the trainer.
5. ``answers.py``: the answer protocol (the last ``<answer>`` element), bounded in length.

The env (``env.py``) grades with the library's score and gates what the library would pay for
partial answers (see its Rewards section); ``tests/reasoning/`` checks every bridged family's
gold answer, determinism across processes, hostile answers and the audit.
"""

from llmgym.envs.reasoning.bridge.source import Library, LibraryFamily, LibrarySource

__all__ = ["Library", "LibraryFamily", "LibrarySource"]
