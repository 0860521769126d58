"""Several unrelated instructions at once, drawn from the whole catalogue (as IFEval's prompts
combine them)."""

from __future__ import annotations

from llmgym.envs.instruct.compose.task import InstructFamily

FAMILIES = [
    InstructFamily("mixed.write", "write", ("keywords:forbidden_words", "length_constraints:number_words"), "two to six instructions of any kind"),
    InstructFamily("mixed.answer", "answer", ("startend:end_checker",), "a yes/no question answered under several instructions",
                   extras=("keywords:existence", "keywords:letter_frequency", "punctuation:no_comma", "detectable_format:title", "detectable_content:postscript", "length_constraints:number_words")),
]  # fmt: skip
