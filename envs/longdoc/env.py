"""LongDocEnv: question answering over long generated documents (1k-128k tokens) or datasets."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.core import Action, Episode, LLMEnv, Message, Turn
from llmgym.envs.longdoc.datasets import load_dataset
from llmgym.envs.longdoc.families import FAMILIES
from llmgym.envs.longdoc.families.common import DEPTH_GRID, Ctx, LongDocFamily
from llmgym.envs.longdoc.reading import DocumentIndex, notes_of, with_chunks
from llmgym.envs.longdoc.writers.tokens import TokenCounter
from llmgym.rewards import RewardResult
from llmgym.rewards.longdoc import grade_answer, notes_recall
from llmgym.tasks import (
    DatasetSource,
    Family,
    ProceduralSource,
    Subtask,
    Task,
    TaskSource,
    stable_seed,
)
from llmgym.toolcalls import parse_tool_calls
from llmgym.toolspecs import function_spec

MODES = ("full", "tools")
TOC_SECTIONS = 80
"""Tool mode lists every section in the prompt up to this many; past it, only the count."""


def search(query: str) -> str:
    """Find the sections of the document that best match some keywords.

    Args:
        query: Keywords, e.g. "escrow reference Marlow depot".
    """
    raise NotImplementedError  # a spec only: the env answers the call


def read(
    section: str | None = None, start_line: int | None = None, end_line: int | None = None
) -> str:
    """Read one section by id, or a range of lines of the document.

    Args:
        section: A section id such as "S12".
        start_line: First line to read (1-based), when no section is given.
        end_line: Last line to read (inclusive).
    """
    raise NotImplementedError  # a spec only: the env answers the call


class LongDocSource(ProceduralSource):
    """The LongDoc families; item ``index`` puts its primary fact at ``DEPTH_GRID[index % 11]``."""

    def __init__(self, counter: TokenCounter, lengths: tuple[int, int], chunk_chars: int | None):
        self.counter, self.lengths, self.chunk_chars = counter, lengths, chunk_chars
        self._catalogue = {f.name: f for f in FAMILIES}
        super().__init__(
            [
                Family(
                    f.name,
                    self._generator(f),
                    description=f.description,
                    has_subtasks=chunk_chars is not None,
                )
                for f in FAMILIES
            ],
            domain="longdoc",
        )

    def tokens_for(self, difficulty: float) -> int:
        lo, hi = self.lengths
        return round(lo * (hi / lo) ** difficulty)

    def _generator(self, family: LongDocFamily) -> Callable[[random.Random, float], Task]:
        def generate(rng: random.Random, difficulty: float) -> Task:
            depth = DEPTH_GRID[int(rng.random() * len(DEPTH_GRID))]
            ctx = Ctx(rng, difficulty, depth, self.tokens_for(difficulty), self.counter)
            return family.generate(ctx)

        return generate

    def build(self, family: str, difficulty: float, index: int) -> Task:
        self.family(family)
        level = f"{round(float(difficulty), 2):.2f}"
        rng = random.Random(stable_seed(self.domain, family, level, index))
        ctx = Ctx(
            rng,
            float(level),
            DEPTH_GRID[index % len(DEPTH_GRID)],
            self.tokens_for(float(level)),
            self.counter,
        )
        task = self._catalogue[family].generate(ctx)
        task = replace(
            task,
            id=f"{family}:{level}:{index}",
            domain=self.domain,
            family=family,
            difficulty=float(level),
        )
        return with_chunks(task, self.chunk_chars) if self.chunk_chars else task


class LongDocEnv(LLMEnv):
    """Answer questions about long documents: in full context, chunk by chunk with notes, or with tools.

    ## Description
    Each task is a long document that reads like a real one (annual report, contract,
    policy, incident register, meeting minutes, technical manual or Python module), written
    from templates and vocabularies from the task's seed, and a question about facts planted
    in it at a chosen depth among look-alike distractors. 22 families
    (``llmgym.list_families("llm/LongDoc-v0")``): single/multi-key/multi-value/multi-query
    needles, unanswerable questions, multi-hop chains, cross-references, counting and
    summing, comparison, timelines, conditional policies, table lookups, contradictions,
    amendments, incident root causes, summaries graded on key facts, minutes, manuals and
    three code families. ``difficulty`` sets the length (1k to 128k tokens on a log scale)
    and each family's distractors, hops or items. LongBench and HotpotQA style JSONL load
    with ``tasks=path, dataset_format="longbench" | "hotpotqa"``.

    ## Action Space
    ``Text()``: the assistant message; in tool mode also a dict with OpenAI ``tool_calls``
    (Hermes ``<tool_call>`` tags, JSON and Python-call text are read too).

    ## Observation Space
    ``Text()``. Full mode: the document (sections marked ``[S1]``, ``[S2]``...) and the
    question. Sequential mode: the question and one part of the document at a time with the
    reader's notes so far (each observation stands alone). Tool mode: the question and a
    table of contents, then ``<tool_response>`` blocks, then the grader's feedback.

    ## Rewards
    :func:`llmgym.rewards.longdoc.grade_answer` on the final answer, in ``[0, 1]``::

        reward = correctness * ((1 - w) + w * citation) * (1 - dump_penalty)

    ``correctness``: exact match / number / match-all over items (F1 of items; ordered by
    LCS) / token F1 / key-fact recall, 0 for hedged answers or answers naming a distractor;
    ``citation``: F1 of the cited section ids or quotes against the supporting facts (only
    for answers with some correctness; ``w = citation_weight``, 0.2 by default, 0 for tasks
    without supporting facts); ``dump_penalty``: answers longer than the task's word limit,
    over-long quotes, or responses over 40,000 characters. ``reward_range = (0, 1)``;
    sequential mode adds process rewards for the notes (``(0, 2)``: at most 1 in total,
    each chunk weighted by the facts seen so far, halved when notes exceed the budget).

    ## Starting State
    A task drawn with the env's ``np_random`` (or chosen by ``options``); the document is
    rebuilt from the task id alone.

    ## Episode End
    Full mode: one step. Sequential: one step per chunk plus the answer. Tools: a message
    without tool calls ends the episode; ``max_turns`` (default 12) truncates it.

    ## Arguments
    ``mode`` (``"full"`` or ``"tools"``), ``subtask_mode="sequential"`` (chunked reading),
    ``tokenizer`` (object with ``encode`` or a callable; default: estimate of 4 characters
    per token), ``length_range`` (tokens at difficulty 0 and 1, default ``(1024, 131072)``),
    ``chunk_tokens`` (4096), ``notes_tokens`` (256), ``context_budget`` (tool-result tokens
    per episode, 8192), ``citation_weight`` (0.2), ``tasks`` / ``dataset_format`` (datasets),
    plus the core's ``max_turns``, ``difficulty``, ``family``, ``system_prompt``, ``render_mode``.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/LongDoc-v0", family="needle_single", difficulty=0.0)
    >>> obs, info = env.reset(seed=0)
    >>> env.step(env.unwrapped.oracle_action())[1]
    1.0
    """

    domain = "longdoc"
    reward_range = (0.0, 1.0)
    default_max_turns = 1

    def __init__(
        self,
        *,
        mode: str = "full",
        tokenizer: Any = None,
        length_range: tuple[int, int] = (1024, 131072),
        chunk_tokens: int = 4096,
        notes_tokens: int = 256,
        context_budget: int = 8192,
        citation_weight: float = 0.2,
        tasks: str | Path | TaskSource | Iterable[Task | Mapping[str, Any]] | None = None,
        dataset_format: str | None = None,
        **kwargs: Any,
    ):
        if mode not in MODES:
            raise error.Error(
                f"Expects mode in {MODES}, actual: {mode!r}; use subtask_mode='sequential' for chunked reading"
            )
        lo, hi = (int(x) for x in length_range)
        if not 1 <= lo <= hi:
            raise error.Error(
                f"Expects length_range = (low, high) tokens with 1 <= low <= high, actual: {length_range!r}"
            )
        for name, value in (
            ("chunk_tokens", chunk_tokens),
            ("notes_tokens", notes_tokens),
            ("context_budget", context_budget),
        ):
            if not isinstance(value, int) or value < 1:
                raise error.Error(f"Expects {name} to be an int >= 1, actual: {value!r}")
        if not 0.0 <= float(citation_weight) <= 1.0:
            raise error.Error(f"Expects citation_weight in [0, 1], actual: {citation_weight!r}")
        self.mode = mode
        self.counter = TokenCounter(tokenizer)
        self.notes_chars = self.counter.chars_for(notes_tokens)
        self.notes_tokens = notes_tokens
        self.context_budget = context_budget
        self.citation_weight = float(citation_weight)
        sequential = kwargs.get("subtask_mode") == "sequential"
        chunk_chars = self.counter.chars_for(chunk_tokens) if sequential else None
        if mode == "tools" and sequential:
            raise error.Error(
                "mode='tools' and subtask_mode='sequential' are two ways of reading; pick one"
            )
        source: TaskSource
        if tasks is None:
            source = LongDocSource(self.counter, (lo, hi), chunk_chars)
        else:
            source = load_dataset(tasks, dataset_format, chunk_chars=chunk_chars)
        if mode == "tools" and kwargs.get("max_turns") is None:
            kwargs["max_turns"] = 12
        longest = (
            max((len(t.metadata.get("document", "")) for t in source), default=0)
            if isinstance(source, DatasetSource)
            else 0
        )
        kwargs.setdefault("max_observation_length", max(1 << 20, 2 * longest + 65_536))
        super().__init__(source, **kwargs)
        self._index: tuple[str, DocumentIndex] | None = None

    # --- prompts --------------------------------------------------------------------------------

    def render_prompt(self, task: Task) -> str:
        doc = task.metadata.get("document", "")
        if self.subtask_mode == "sequential" and task.subtasks:
            n = len(task.subtasks) - 1
            return (
                f"You will read a long document in {n} part{'s' * (n != 1)} and answer a question about it. "
                f"After each part, reply with notes inside <notes></notes> (at most {self.notes_tokens} tokens; "
                "longer notes are cut). Your notes replace the previous ones and you will not see earlier parts "
                "again, so keep everything the question needs (values, names, dates, section ids). After the "
                f"last part you answer from your notes.\n\n{task.prompt}"
            )
        if self.mode == "tools":
            sections = task.metadata.get("sections", [])
            if len(sections) <= TOC_SECTIONS:
                toc = "\n".join(f"{s[0]}: {s[1]}" for s in sections)
            else:
                toc = f"{sections[0][0]} to {sections[-1][0]} ({len(sections)} sections; use search to find your way)"
            return (
                f"A document of about {task.metadata.get('tokens', len(doc) // 4):,} tokens can be read only "
                f"through the tools search(query) and read(section=... or start_line=..., end_line=...). Tool "
                f"results may use at most {self.context_budget:,} tokens in total. Contents:\n{toc}\n\n"
                f"{task.prompt}\n\nA reply without tool calls is your final answer."
            )
        return (
            "Read the document below and answer the question after it. Sections are marked [S1], [S2], ...\n\n"
            f"<document>\n{doc}\n</document>\n\n{task.prompt}"
        )

    def render_subtask(self, task: Task, subtask: Subtask, index: int, total: int) -> str:
        notes = self._current_notes() if index else ""  # at reset the last episode is still current
        question = task.metadata.get("question", "")
        if subtask.id == "answer":
            return f"Your notes:\n<notes>{notes}</notes>\n\nNow answer from your notes.\n\n{task.prompt}"
        start, end = subtask.metadata["start"], subtask.metadata["end"]
        part = task.metadata["document"][start:end]
        return (
            f"Question (keep notes for it): {question}\n\nYour notes so far:\n<notes>{notes}</notes>\n\n"
            f"Part {index + 1} of {total - 1}:\n<document_part>\n{part}\n</document_part>\n\n"
            "Reply with your updated notes inside <notes></notes>."
        )

    def tools(self, task: Task) -> list[dict[str, Any]]:
        if self.mode != "tools":
            return []
        return [function_spec(search), function_spec(read)]

    def secrets(self, task: Task) -> list[str]:
        """Gold answers that the document does not itself contain (sums, counts...)."""
        spec = task.answer if isinstance(task.answer, Mapping) else {}
        gold = spec.get("gold")
        golds = gold if isinstance(gold, list) else [gold]
        doc = task.metadata.get("document", "")
        out = []
        for g in golds:
            forms = [str(g)] + (
                [f"{g:,}"] if isinstance(g, int) and not isinstance(g, bool) else []
            )
            out += [f for f in forms if len(f) >= 3 and f not in doc and f not in task.prompt]
        return out

    # --- grading ----------------------------------------------------------------------------------

    def grade(self, task: Task, message: Message) -> RewardResult:
        spec = (
            task.answer
            if isinstance(task.answer, Mapping)
            else {"type": "f1", "gold": str(task.answer)}
        )
        sids = {str(s[0]) for s in task.metadata.get("sections", [])}
        return grade_answer(
            message["content"],
            spec,
            citation_weight=self.citation_weight,
            section_ids=sids,
            question=str(task.metadata.get("question") or ""),
        )

    def oracle(self, task: Task) -> Action:
        return str(task.metadata.get("oracle") or task.answer)

    def grade_subtask(self, task: Task, subtask: Subtask, message: Message) -> RewardResult:
        if subtask.id == "answer":
            return self.grade(task, message)
        notes, over = notes_of(message["content"], self.notes_chars)
        kept = notes_recall(notes, subtask.answer or [])
        score = kept * (0.5 if over else 1.0)
        total = len(subtask.answer or [])
        feedback = f"notes keep {round(kept * total)} of {total} facts so far" if total else ""
        if over:
            feedback = (
                feedback + "; " if feedback else ""
            ) + f"notes over {self.notes_tokens} tokens were cut"
        return RewardResult(
            score, {"notes": kept, "notes_over_budget": float(over)}, feedback, kept >= 1.0
        )

    def oracle_subtask(self, task: Task, subtask: Subtask) -> str:
        if subtask.id == "answer":
            return self.oracle(task)  # type: ignore[return-value]
        facts = subtask.answer or []
        return "<notes>" + "; ".join(" ".join(f) for f in facts)[: self.notes_chars] + "</notes>"

    def _current_notes(self) -> str:
        ep = self.episode
        if ep is None or not ep.messages or ep.messages[-1].get("role") != "assistant":
            return ""
        return notes_of(ep.messages[-1].get("content") or "", self.notes_chars)[0]

    # --- tool mode -----------------------------------------------------------------------------------

    def on_reset(self, episode: Episode) -> None:
        if self.mode == "tools":
            episode.extra.update(used=0, read=[])

    def respond(self, episode: Episode, message: Message) -> Turn:
        if self.mode != "tools":
            return Turn.graded(self.grade(episode.task, message))
        calls = parse_tool_calls(message, "auto")
        if not calls:
            return Turn.graded(self.grade(episode.task, message))
        messages: list[Message] = []
        blocks = []
        for i, call in enumerate(calls):
            content = self._run_tool(episode, call.name, call.arguments, call.error)
            name = call.name or "invalid"
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id or f"call_{episode.turn}_{i}",
                    "name": name,
                    "content": content,
                }
            )
            blocks.append(f"<tool_response>\n{content}\n</tool_response>")
        return Turn(0.0, terminated=False, observation="\n".join(blocks), messages=messages)

    def _doc_index(self, task: Task) -> DocumentIndex:
        if self._index is None or self._index[0] != task.id:
            self._index = (
                task.id,
                DocumentIndex(task.metadata.get("document", ""), task.metadata.get("sections", [])),
            )
        return self._index[1]

    def _run_tool(
        self, episode: Episode, name: str, arguments: Mapping[str, Any], problem: str | None
    ) -> str:
        if problem:
            return f"error: {problem}"
        index = self._doc_index(episode.task)
        extra = episode.extra
        left = self.context_budget - int(extra.get("used", 0))
        if left <= 0:
            return (
                f"error: the context budget of {self.context_budget} tokens is used up; answer now"
            )
        if name == "search":
            query = arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                return 'error: search needs a non-empty string "query"'
            hits = index.search(query)
            if not hits:
                text = "no matches"
            else:
                text = "\n".join(
                    f'{sid} "{title}" (line {line}): {index.snippet(off)}'
                    for _, sid, title, off, line in hits
                )
        elif name == "read":
            text = self._read(index, arguments, extra)
        else:
            return f"error: unknown tool {name!r}; the tools are search and read"
        cost = self.counter.count(text) if len(text) < 200_000 else math.ceil(len(text) / 4)
        if cost > left:
            text = text[: max(0, int(len(text) * left / cost))] + "\n[cut: context budget reached]"
            cost = left
        extra["used"] = int(extra.get("used", 0)) + cost
        return text

    def _read(
        self, index: DocumentIndex, arguments: Mapping[str, Any], extra: dict[str, Any]
    ) -> str:
        section = arguments.get("section")
        if section is not None:
            if not isinstance(section, str):
                return 'error: "section" must be a section id such as "S12"'
            found = index.section(section)
            if found is None:
                return f"error: no section {section!r}; ids run from S1 to S{len(index.sections)}"
            sid, _, start, end = found
            extra.setdefault("read", []).append(sid)
            return index.text[start:end]
        start_line, end_line = arguments.get("start_line"), arguments.get("end_line")
        if not isinstance(start_line, int) or isinstance(start_line, bool):
            return 'error: read needs "section" or an integer "start_line" (and "end_line")'
        if end_line is None:
            end_line = start_line + 40
        if not isinstance(end_line, int) or isinstance(end_line, bool) or end_line < start_line:
            return 'error: "end_line" must be an integer >= start_line'
        return index.lines(start_line, min(end_line, start_line + 2000)) or "error: no such lines"

    def oracle_action(self) -> Action:
        ep = self._require_episode()
        if self.mode != "tools" or ep.mode is not None:
            return super().oracle_action()
        spec = ep.task.answer if isinstance(ep.task.answer, Mapping) else {}
        needed = list(dict.fromkeys(f["section"] for f in spec.get("support") or []))
        unread = [s for s in needed if s not in ep.extra.get("read", [])]
        if not unread:
            return self.oracle(ep.task)
        calls = [
            {
                "id": f"call_{k}",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"section": sid})},
            }
            for k, sid in enumerate(unread)
        ]
        return {"content": "", "tool_calls": calls}
