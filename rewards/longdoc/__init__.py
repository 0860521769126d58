"""Long-document rewards: SQuAD-style matching, multi-part answers, citations and penalties.

Covered: SQuAD normalisation, exact match, token F1, numbers written as reports write them
("€1.25 million"), multi-part answers graded precision first (sets and ordered lists), key-fact
recall for summaries, citation checking (section ids or quoted spans that must contain the
supporting facts), and penalties for answers that offer more than one possibility, answers that
copy a distractor, and answers that dump large parts of the document. :func:`grade_answer`
combines them:

    score = correctness * ((1 - w) + w * citation) * (1 - dump_penalty)     in [0, 1]

where ``w`` is the citation weight (0 when the gold names no supporting facts) and the
citation part counts only for answers that are at least partly correct.

An optimizing policy pays for hedging wherever a hedge earns more than a committed answer, so
correctness is 0 for every answer type when the answer hedges (:func:`find_hedge`: "X or Y",
"either", "X/Y", "possibly X", "X?", two different ``<answer>`` tags...), names a distractor,
or names a second value: a single-value answer may wrap its value in words but not add another
code, number, name or quoted string that neither the gold nor the question holds
(:func:`other_values`); a count or amount states exactly one quantity (a number inside a code
such as ``SEV-2`` is not one); a list earns nothing when any item is not asked for
(:func:`list_credit`); a summary earns nothing when it states a fact of another section or a
second value for one of its facts. Citing more sections than support the answer earns no
citation credit once fewer than half the citations support a fact.

Not covered: paraphrase (an answer must use the document's wording or number), ROUGE or
model-based judging of free text; the value rule reads the shape of words, so a single-value
answer that explains itself with other proper names ("Ana Ruiz, who heads the Iberia division")
scores 0 like a candidate list would.

Every function is pure, never raises on model output and bounds its work: a response past
:data:`MAX_RESPONSE_CHARS` is treated as a dump and scores 0 without being read.

The package: :mod:`~llmgym.rewards.longdoc.grade` (the score: correctness, citations,
penalties), :mod:`~llmgym.rewards.longdoc.matching` (normalising and matching answers),
:mod:`~llmgym.rewards.longdoc.hedges` (signs of more than one answer) and
:mod:`~llmgym.rewards.longdoc.extract` (reading the answer and citations out of a response).
Every public name is importable from ``llmgym.rewards.longdoc`` itself.
"""

from llmgym.rewards.longdoc.extract import extract_answer, given_answers, parse_citations
from llmgym.rewards.longdoc.grade import (
    QUOTE_CHARS,
    citation_score,
    correctness,
    dump_penalty,
    grade_answer,
    notes_recall,
)
from llmgym.rewards.longdoc.hedges import find_hedge, other_values
from llmgym.rewards.longdoc.matching import (
    MAX_RESPONSE_CHARS,
    NOT_STATED,
    contains_phrase,
    exact_match,
    key_fact_recall,
    list_credit,
    match_all,
    normalize_answer,
    number_match,
    numbers_in,
    part_matches,
    split_parts,
    token_f1,
)

__all__ = [
    "MAX_RESPONSE_CHARS",
    "NOT_STATED",
    "QUOTE_CHARS",
    "citation_score",
    "contains_phrase",
    "correctness",
    "dump_penalty",
    "exact_match",
    "extract_answer",
    "find_hedge",
    "given_answers",
    "grade_answer",
    "key_fact_recall",
    "list_credit",
    "match_all",
    "normalize_answer",
    "notes_recall",
    "number_match",
    "numbers_in",
    "other_values",
    "parse_citations",
    "part_matches",
    "split_parts",
    "token_f1",
]
