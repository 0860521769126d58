"""Writing tasks (a blog post, a letter, a review...) about one kind of instruction each:
length, keywords, letters, case, start and end, punctuation, content marks and layout."""

from __future__ import annotations

from llmgym.envs.instruct.compose.task import InstructFamily

FAMILIES = [
    InstructFamily("write.word_count", "write", ("length_constraints:number_words",), "at least / fewer than N words"),
    InstructFamily("write.sentence_count", "write", ("length_constraints:number_sentences",), "at least / fewer than N sentences"),
    InstructFamily("write.paragraphs", "write", ("length_constraints:number_paragraphs",), "exactly N paragraphs divided by ***"),
    InstructFamily("write.paragraph_first_word", "write", ("length_constraints:nth_paragraph_first_word",), "N paragraphs, the k-th starting with a given word"),
    InstructFamily("write.keywords", "write", ("keywords:existence", "keywords:frequency"), "include keywords; one keyword a set number of times"),
    InstructFamily("write.forbidden_words", "write", ("keywords:forbidden_words",), "avoid the listed words"),
    InstructFamily("write.letter_frequency", "write", ("keywords:letter_frequency",), "a letter at least / fewer than N times"),
    InstructFamily("write.lowercase", "write", ("change_case:english_lowercase",), "English, all lowercase"),
    InstructFamily("write.capitals", "write", ("change_case:english_capital",), "English, all capitals"),
    InstructFamily("write.capital_words", "write", ("change_case:capital_word_frequency",), "at least / fewer than N words in capitals"),
    InstructFamily("write.start_end", "write", ("startend:start_checker", "startend:end_checker"), "begin and end with exact phrases"),
    InstructFamily("write.quotation", "write", ("startend:quotation",), "the whole response in double quotes"),
    InstructFamily("write.no_comma", "write", ("punctuation:no_comma",), "no commas at all"),
    InstructFamily("write.placeholders_postscript", "write", ("detectable_content:number_placeholders", "detectable_content:postscript"), "square-bracket placeholders and a postscript"),
    InstructFamily("write.sections", "write", ("detectable_format:multiple_sections",), "N sections marked SECTION 1, SECTION 2..."),
    InstructFamily("write.bullets", "write", ("detectable_format:number_bullet_lists",), "exactly N markdown bullet points"),
    InstructFamily("write.highlights", "write", ("detectable_format:number_highlighted_sections",), "at least N *highlighted* sections"),
    InstructFamily("write.title", "write", ("detectable_format:title",), "a title in <<double angular brackets>>"),
]  # fmt: skip
