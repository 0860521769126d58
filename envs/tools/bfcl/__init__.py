"""The tool wing's BFCL annex: the Berkeley Function Calling Leaderboard's data and checks, as
``llm/FunctionCalling-v0`` uses them.

- :mod:`.datasets`: BFCL's question and possible-answer files read as llmgym tasks (its names are
  re-exported here, where the former module ``llmgym.envs.tools.bfcl`` published them);
- :mod:`.languages`: Java and JavaScript arguments, code strings read as BFCL reads them;
- :mod:`.multi_turn`: multi-turn episodes on BFCL's stateful backends, turns checked as BFCL does;
- :mod:`.peer`: BFCL's own code from the optional ``bfcl-eval`` package (data, backends, checkers);
- :mod:`.conformance`: gold and perturbed answers judged by llmgym and by BFCL's checkers.

Not here: the env (:mod:`llmgym.envs.tools.function_calling`) and the AST match itself
(:func:`llmgym.rewards.tools.ast_match`).
"""

from llmgym.envs.tools.bfcl.datasets import (
    AGENTIC_ANSWER_FORMAT,
    CATEGORIES,
    CATEGORY_DIFFICULTY,
    FUNC_DOC_FILES,
    MEMORY_BACKEND,
    category_of,
    data_file,
    example_call,
    function_doc,
    kind_of,
    language_of,
    load_bfcl,
    openai_schema,
)

__all__ = [
    "AGENTIC_ANSWER_FORMAT",
    "CATEGORIES",
    "CATEGORY_DIFFICULTY",
    "FUNC_DOC_FILES",
    "MEMORY_BACKEND",
    "category_of",
    "data_file",
    "example_call",
    "function_doc",
    "kind_of",
    "language_of",
    "load_bfcl",
    "openai_schema",
]
