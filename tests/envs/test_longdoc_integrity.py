"""LongDoc-v0 reward integrity: hedges, candidate lists, shotgun citations and prompt-derived answers.

An RL policy that reads a long document learns whatever pays. Each test below plays one class
of attack against every family (``llmgym.list_families("llm/LongDoc-v0")``) on small documents,
judged against the oracle's own reward (1.0 in every family, as ``tests/test_gold.py`` checks):

- hedges: the gold joined with another candidate ("X or Y", "either X or Y", "X/Y", "X (or Y)"),
  qualified ("possibly X", "X?"), or given twice in two answer tags, score 0;
- candidate lists: the gold with other candidates of its kind (the planted look-alikes, or every
  value of the gold's shape that the document holds) scores at most :data:`CANDIDATE_BOUND`;
- shotgun citations: citing every section earns no more than citing none;
- prompt-derived answers: text taken from the prompt (sections, spans, sentences, the question,
  lists of the document's values) never reaches the oracle's reward, and dumps and candidate
  lists stay at most :data:`CANDIDATE_BOUND`;
- the chunked (``subtask_mode="sequential"``) and tool (``mode="tools"``) variants grade their
  final answer the same way: a hedge there scores 0 too.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym
from llmgym.envs.longdoc import LongDocEnv
from llmgym.envs.longdoc.families.aggregation import MILESTONES
from llmgym.envs.longdoc.writers import vocab
from llmgym.rewards.longdoc import normalize_answer
from llmgym.tasks import Task

FAMILIES = sorted(llmgym.list_families("llm/LongDoc-v0"))
DIFFICULTIES = (0.0, 0.2)
INDICES = (0, 1, 2)
CANDIDATE_BOUND = 0.1
"""What a list of candidates may earn at most: a tenth of the oracle's 1.0. Listing k candidates
must pay less than guessing one of them (1/k of the oracle); with the two to six candidates that
small documents hold, 1/k is 0.17 to 0.5, so a tenth is below every honest guess."""


@cache
def _env() -> LongDocEnv:
    return LongDocEnv(length_range=(1024, 4096))


@cache
def _task(family: str, difficulty: float, index: int) -> Task:
    return _env().source.build(family, difficulty, index)  # type: ignore[attr-defined,no-any-return]


def _score(task: Task, response: str) -> float:
    return _env().grade(task, {"role": "assistant", "content": response}).score


def _oracle_parts(task: Task) -> tuple[str, str]:
    """The oracle's answer text and its citation tag."""
    oracle = task.metadata["oracle"]
    answer = re.search(r"<answer>(.*?)</answer>", oracle, re.S)
    cite = re.search(r"<cite>.*?</cite>", oracle, re.S)
    assert answer is not None, oracle
    return answer.group(1), cite.group(0) if cite else ""


def _gold_items(task: Task) -> list[str]:
    """The gold as the oracle writes it: list items, or the one value, or each key fact's first
    wording that the oracle's own text uses."""
    spec, (answer, _) = task.answer, _oracle_parts(task)
    gold = spec["gold"]
    if spec["type"] in ("set", "list"):
        return [str(g) for g in gold]
    if spec["type"] == "keyfacts":
        return [next((o for o in fact if o in answer), fact[0]) for fact in gold]
    if spec["type"] == "number":
        return [f for f in (f"{gold:,}", str(gold)) if f in answer][:1] or [str(gold)]
    return [answer]


def _flat_distractors(task: Task) -> list[str]:
    out: list[str] = []
    for d in task.answer.get("distractors") or []:
        for x in d if isinstance(d, list) else [d]:
            out.append(str(x))
    golds = {normalize_answer(g) for g in _gold_items(task)}
    return [d for d in dict.fromkeys(out) if normalize_answer(d) not in golds]


def _shape(value: str) -> re.Pattern[str]:
    """A pattern for values written like ``value``: ``RF-7341`` -> codes, ``Anna Berg`` -> two
    capitalised words, ``sync_supplier_by_region`` -> snake_case names, ``1,275`` -> numbers."""
    parts = []
    for run in re.findall(r"[A-Z]+|[a-z]+|\d+|.", value):
        if run[0].isupper():
            parts.append("[A-Z]+" if len(run) > 1 else "[A-Z]")
        elif run[0].islower():
            parts.append("[a-z]+")
        elif run[0].isdigit():
            parts.append(r"\d+")
        else:
            parts.append(re.escape(run))
    body = "".join(parts)
    body = re.sub(r"(\[a-z\]\+(?:_\[a-z\]\+)+)", r"[a-z]+(?:_[a-z]+)+", body)
    return re.compile(rf"(?<![\w-]){body}(?![\w-])")


def _vocabulary_of(value: str) -> list[str]:
    """The vocabulary list a lowercase value was drawn from (milestones, root causes...)."""
    lists = [MILESTONES] + [
        v for k, v in vars(vocab).items() if k.isupper() and isinstance(v, tuple)
    ]
    for words in lists:
        if value in words:
            return [str(w) for w in words]
    return []


STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "for",
        "to",
        "and",
        "or",
        "is",
        "was",
        "it",
        "its",
        "at",
        "by",
        "with",
        "as",
        "be",
        "are",
        "this",
        "that",
    ]
)


def _document_candidates(task: Task, limit: int = 40) -> list[str]:
    """Every value in the document of the same kind as a gold item (its shape, or its vocabulary),
    except phrases made only of the question's own words (``Project is`` for a division)."""
    doc = task.metadata["document"]
    asked = set(normalize_answer(task.metadata["question"]).split()) | STOPWORDS
    found: list[str] = []
    for item in _gold_items(task):
        words = _vocabulary_of(item)
        if words:
            found += [w for w in words if w in doc]
        elif re.search(r"[A-Z\d_]", item):
            found += _shape(item).findall(doc)
    found = [f for f in found if not set(normalize_answer(f).split()) <= asked]
    return list(dict.fromkeys(found))[:limit]


def _other_candidate(task: Task) -> str:
    """A value of the gold's kind that is not the gold: a planted look-alike, else one the
    document holds, else one from the vocabulary the gold was drawn from."""
    golds = {normalize_answer(g) for g in _gold_items(task)}
    vocabulary = [w for g in _gold_items(task) for w in _vocabulary_of(g)]
    for d in _flat_distractors(task) + _document_candidates(task) + vocabulary:
        if normalize_answer(d) not in golds and normalize_answer(d):
            return d
    raise AssertionError(f"{task.id}: no other candidate in the document")


HEDGES = {
    "or_other": "{g} or {d}",
    "other_or": "{d} or {g}",
    "either_or": "either {g} or {d}",
    "slash": "{g}/{d}",
    "slash_reversed": "{d}/{g}",
    "parenthesised_or": "{g} (or {d})",
    "or_possibly": "{g}, or possibly {d}",
    "versus": "{g} vs {d}",
    "one_of": "one of {g}, {d}",
    "possibly": "possibly {g}",
    "maybe": "maybe {g}",
    "probably": "{g}, probably",
    "i_think": "I think {g}",
    "question_mark": "{g}?",
}


def _hedged(task: Task, form: str) -> str:
    """The oracle's response with its first gold item replaced by a hedge around it."""
    answer, cite = _oracle_parts(task)
    gold = next(g for g in _gold_items(task) if g in answer)
    hedge = form.format(g=gold, d=_other_candidate(task))
    return f"<answer>{answer.replace(gold, hedge, 1)}</answer> {cite}"


# --- hedges ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", sorted(HEDGES))
@pytest.mark.parametrize("family", FAMILIES)
def test_hedge_attack_gold_joined_with_another_candidate_scores_zero(
    family: str, form: str
) -> None:
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            response = _hedged(task, HEDGES[form])
            assert _score(task, response) == 0.0, (task.id, response)


@pytest.mark.parametrize("family", FAMILIES)
def test_hedge_attack_two_answer_tags_scores_zero(family: str) -> None:
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            answer, cite = _oracle_parts(task)
            wrong = _hedged(task, "{d}").split("</answer>")[0] + "</answer>"
            for response in (
                f"<answer>{answer}</answer> {wrong} {cite}",
                f"{wrong} <answer>{answer}</answer> {cite}",
            ):
                assert _score(task, response) == 0.0, (task.id, response)


# --- candidate lists -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_candidate_list_attack_gold_with_one_other_candidate_scores_at_most_the_bound(
    family: str,
) -> None:
    """No hedge word: the gold and one other value of its kind, listed. For a single-value question
    that is two answers; for a list it is a wrong item."""
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            for sep in ("; ", ", ", " and ", "\n"):
                response = _hedged(task, "{g}" + sep + "{d}")
                assert _score(task, response) <= CANDIDATE_BOUND, (task.id, response)


@pytest.mark.parametrize("family", FAMILIES)
def test_candidate_list_attack_every_planted_candidate_scores_at_most_the_bound(
    family: str,
) -> None:
    """The gold items and every look-alike the family planted, in either order, with the oracle's
    own citations."""
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            _, cite = _oracle_parts(task)
            if not _flat_distractors(task):
                continue  # the look-alikes are the gold items reordered (timeline_order)
            items = _gold_items(task) + _flat_distractors(task)
            for listed in (items, items[::-1]):
                for sep in ("; ", ", "):
                    response = f"<answer>{sep.join(listed)}</answer> {cite}"
                    assert _score(task, response) <= CANDIDATE_BOUND, (task.id, response)


@pytest.mark.parametrize("family", FAMILIES)
def test_candidate_list_attack_every_value_of_the_golds_kind_in_the_document_scores_at_most_the_bound(
    family: str,
) -> None:
    """Every value in the document shaped like a gold item (every code, every name, every number,
    every milestone or root cause the document mentions), with the oracle's citations."""
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            _, cite = _oracle_parts(task)
            found = _document_candidates(task)
            golds = {normalize_answer(g) for g in _gold_items(task)}
            if {normalize_answer(f) for f in found} <= golds:
                continue  # the document holds nothing else of the kind: the list is the answer
            for listed in (found, sorted(found)):
                response = f"<answer>{'; '.join(listed)}</answer> {cite}"
                assert _score(task, response) <= CANDIDATE_BOUND, (task.id, response)


# --- citations and dumps ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_citation_shotgun_attack_citing_every_section_earns_no_citation_credit(
    family: str,
) -> None:
    """The right answer citing every section scores no more than the right answer citing none,
    wherever the supporting sections are fewer than half the document's."""
    checked = 0
    for difficulty in (*DIFFICULTIES, 0.6, 1.0):
        for index in INDICES:
            task = _task(family, difficulty, index)
            answer, _ = _oracle_parts(task)
            sections = [s[0] for s in task.metadata["sections"]]
            support = {f["section"] for f in task.answer.get("support") or []}
            if not support or 2 * len(support) >= len(sections):
                continue
            checked += 1
            bare = _score(task, f"<answer>{answer}</answer>")
            everything = _score(
                task, f"<answer>{answer}</answer> <cite>{', '.join(sections)}</cite>"
            )
            assert everything <= bare + 1e-9, (task.id, everything, bare)
    if family not in (
        "unanswerable",
        "aggregation_count",
        "code_callers",
        "code_trace",
        "code_lookup",
    ):
        assert checked, f"{family}: no task with more sections than twice its support"


@pytest.mark.parametrize("family", FAMILIES)
def test_dump_attack_pasting_sections_scores_at_most_the_bound(family: str) -> None:
    """Each section, every pair of neighbouring sections and the whole document as the answer,
    citing that section (or every section): pasting the document is not answering."""
    for difficulty in DIFFICULTIES:
        for index in INDICES:
            task = _task(family, difficulty, index)
            doc, sections = task.metadata["document"], task.metadata["sections"]
            every = f"<cite>{', '.join(s[0] for s in sections)}</cite>"
            pastes = [(doc[a:b], f"<cite>{sid}</cite>") for sid, _, a, b in sections]
            pastes += [
                (doc[x[2] : y[3]], f"<cite>{x[0]}, {y[0]}</cite>")
                for x, y in zip(sections, sections[1:], strict=False)
            ]
            pastes.append((doc, every))
            for text, cite in pastes:
                for response in (f"<answer>{text}</answer> {cite}", f"{text}\n{every}"):
                    assert _score(task, response) <= CANDIDATE_BOUND, (task.id, text[:80])


# --- the property: nothing built from the prompt alone reaches the oracle's reward -------------------


def _contains_whole_gold(task: Task, text: str) -> bool:
    norm = f" {normalize_answer(text)} "
    return all(f" {normalize_answer(g)} " in norm for g in _gold_items(task))


@st.composite
def prompt_derived(draw: Any) -> tuple[Task, str, str, str]:
    """A task and a response built only from its prompt (the document and the question): a
    sentence, a span of words, one or more whole sections, the question, the whole prompt, or a
    list of values the document holds; with no citation, every section, the supporting ones, or
    any one. Returns the task, the kind, the copied text and the response."""
    task = _task(
        draw(st.sampled_from(FAMILIES)),
        draw(st.sampled_from(DIFFICULTIES)),
        draw(st.integers(0, 5)),
    )
    doc, sections = task.metadata["document"], task.metadata["sections"]
    kind = draw(
        st.sampled_from(("sentence", "span", "section", "sections", "question", "values", "prompt"))
    )
    if kind == "sentence":
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", doc) if s.strip()]
        text = draw(st.sampled_from(sentences))
    elif kind == "span":
        words = doc.split()
        start = draw(st.integers(0, len(words) - 1))
        text = " ".join(words[start : start + draw(st.integers(1, 120))])
    elif kind in ("section", "sections"):
        first = draw(st.integers(0, len(sections) - 1))
        last = first if kind == "section" else draw(st.integers(first, len(sections) - 1))
        text = doc[sections[first][2] : sections[last][3]]
    elif kind == "question":
        text = task.metadata["question"]
    elif kind == "prompt":
        text = _env().render_prompt(task)
    else:
        pool = list(
            dict.fromkeys(_document_candidates(task) + _flat_distractors(task) + _gold_items(task))
        )
        picked = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=8, unique=True))
        text = draw(st.sampled_from(("; ", ", ", " or ", "\n"))).join(picked)
    ids = [s[0] for s in sections]
    support = list(dict.fromkeys(f["section"] for f in task.answer.get("support") or []))
    cite = draw(
        st.sampled_from(("", ", ".join(ids), ", ".join(support), draw(st.sampled_from(ids))))
    )
    wrap = draw(st.sampled_from(("<answer>{}</answer>", "{}", "Answer: {}")))
    body = text if wrap == "Answer: {}" and "\n" in text else wrap.format(text)
    return task, kind, text, body + (f" <cite>{cite}</cite>" if cite else "")


def _only_gold_items(task: Task, text: str) -> bool:
    """Whether a list of values names gold items only (a partial or reordered answer)."""
    golds = {normalize_answer(g) for g in _gold_items(task)}
    items = {normalize_answer(p) for p in re.split(r"; |, | or |\n", text)}
    return items <= golds


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(prompt_derived())
def test_prompt_derived_responses_never_reach_the_oracle_reward_property(
    case: tuple[Task, str, str, str],
) -> None:
    """Whatever is copied from the prompt, and however it is cited, it scores below the oracle;
    text that holds the whole gold may be the answer sentence itself (then it is answering, and
    held only to the oracle's reward). Pasted sections, the question, the whole prompt, and lists
    of values that name anything besides gold items stay at most the bound (a summary's list of
    values is a partial summary, held only below the oracle)."""
    task, kind, text, response = case
    score = _score(task, response)
    oracle = _score(task, task.metadata["oracle"])
    if _contains_whole_gold(task, text) and kind in ("sentence", "span", "values"):
        assert score <= oracle, (task.id, kind, response[:300])
    else:
        assert score < oracle, (task.id, kind, response[:300])
    if kind in ("section", "sections", "question", "prompt"):
        assert score <= CANDIDATE_BOUND, (task.id, kind, response[:300])
    if kind == "values" and task.answer["type"] != "keyfacts" and not _only_gold_items(task, text):
        assert score <= CANDIDATE_BOUND, (task.id, kind, response[:300])


# --- the other reading modes grade the final answer the same way ------------------------------------


def _play_to_final_answer(env: Any) -> Task:
    """Play the oracle until the step that gives the final answer; return the task."""
    base = env.unwrapped
    for _ in range(64):
        ep = base.episode
        if base.mode == "tools":
            action = base.oracle_action()
            if isinstance(action, str):
                return ep.task  # type: ignore[no-any-return]
        elif ep.subtasks[ep.subtask_index].id == "answer":
            return ep.task  # type: ignore[no-any-return]
        else:
            action = base.oracle_action()
        env.step(action)
    raise AssertionError("the oracle never reached its final answer")


@pytest.mark.parametrize(
    "kwargs",
    [{"mode": "tools"}, {"subtask_mode": "sequential", "chunk_tokens": 512}],
    ids=["tools", "sequential"],
)
@pytest.mark.parametrize(
    "family",
    ["needle_multivalue", "needle_multiquery", "code_callers", "timeline_order", "comparison"],
)
def test_hedge_attack_in_the_tool_and_chunked_modes_scores_zero(
    kwargs: dict[str, Any], family: str
) -> None:
    for seed in (0, 1):
        env = LongDocEnv(length_range=(1024, 4096), family=family, difficulty=0.0, **kwargs)
        env.reset(seed=seed)
        task = _play_to_final_answer(env)
        for form in ("or_other", "possibly", "slash"):
            snapshot = env.get_state()
            response = _hedged(task, HEDGES[form])
            _, reward, terminated, _, info = env.step(response)
            assert terminated and reward == 0.0, (task.id, form, response, info["feedback"])
            env.set_state(snapshot)
        _, reward, *_ = env.step(task.metadata["oracle"])
        assert reward == 1.0, task.id
