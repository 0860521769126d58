"""Work on a given text: summarize a passage, rewrite it, turn notes into a list, and extract
facts as JSON valid against a schema."""

from __future__ import annotations

from llmgym.envs.instruct.compose.task import InstructFamily

FAMILIES = [
    InstructFamily("work.summarize", "summarize", ("length_constraints:number_words", "keywords:existence"), "summarize a passage: shorter than N words, with keywords",
                   extras=("punctuation:no_comma", "change_case:english_lowercase", "detectable_format:title", "startend:end_checker", "keywords:forbidden_words")),
    InstructFamily("work.rewrite", "rewrite", ("change_case:english_lowercase", "punctuation:no_comma"), "rewrite a passage in lowercase without commas",
                   extras=("startend:quotation", "detectable_format:title", "keywords:existence", "detectable_content:postscript")),
    InstructFamily("work.notes_to_list", "format", ("detectable_format:number_bullet_lists", "detectable_format:title"), "notes as exactly N bullets under a title"),
    InstructFamily("work.json_schema", "write", ("detectable_format:json_schema",), "facts as JSON valid against a JSON Schema", extras=()),
]  # fmt: skip
