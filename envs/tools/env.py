"""ToolCallingEnv: multi-turn tool use against real SQLite back ends, graded on the final state
and on the facts of the final answer.

The tasks come from :mod:`llmgym.envs.tools.families`; what a back end and a task plan are made of
is :mod:`llmgym.envs.tools.scenario`. Single-shot, BFCL-style function calling is the other env of
the wing, :mod:`llmgym.envs.tools.function_calling`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from llmgym import error
from llmgym.core import Action, Episode, LLMEnv, Message, Turn
from llmgym.envs.tools import scenario
from llmgym.envs.tools.families import FAMILIES
from llmgym.rewards import RewardResult
from llmgym.tasks import DatasetSource, ProceduralSource, Task, TaskSource
from llmgym.toolcalls import FORMATS, ToolCall, format_tool_calls, parse_tool_calls
from llmgym.toolspecs import validate_arguments

MAX_ANSWER_CHARS = 4000
"""A longer final answer earns no fact credit (listing every candidate is guessing)."""
MAX_RESULT_CHARS = 8000
"""A tool result is cut to this many characters in the observation."""
UNSAFE_REWARD = -0.5
"""The whole reward of an episode that broke a stated policy."""
MAX_SEEN_VALUES = 4096
"""Distinct values remembered from an episode's tool results (to grade the answer's precision)."""
MIN_PRECISION = 0.5
"""The share of an answer's values that must be asked-for facts for it to count as correct."""

FORMAT_HELP = {
    "hermes": (
        'To call a tool, write <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>. '
        "You may put several <tool_call> blocks in one message; they run in order. "
        "Results come back inside <tool_response> tags."
    ),
    "json": (
        'To call a tool, reply with only a JSON object {"name": "<tool name>", "arguments": {...}}, '
        "or a JSON list of such objects to make several calls in one message (they run in order)."
    ),
    "python": (
        "To call a tool, reply with Python call syntax using keyword arguments and literal values, "
        'one call per line, for example: lookup(name="Ada", limit=3). Only literals are allowed; '
        "several lines make several calls, run in order."
    ),
    "openai": (
        "To call a tool, use the tool_calls field of your message (function name and JSON arguments); "
        "several calls in one message run in order."
    ),
}
"""How to call a tool in each call format, told in the system prompt (of both tool envs)."""


def render_result(call_format: str, name: str, content: str) -> str:
    """A tool result as the observation shows it: a ``<tool_response>`` block in the hermes
    format, ``[name] content`` in the others."""
    if call_format == "hermes":
        body = json.dumps({"name": name, "content": content}, ensure_ascii=False)
        return f"<tool_response>\n{body}\n</tool_response>"
    return f"[{name}] {content}"


def system_prompt_for(call_format: str) -> str:
    return (
        "You are an operations assistant with access to company systems through tools. "
        "Use the tools to look things up and to make changes; never guess identifiers or values. "
        "Follow every policy stated in the task. "
        + FORMAT_HELP[call_format]
        + " When the task is complete, reply with a short final answer and no tool call; "
        "it must state the information the task asks for. A message without tool calls ends the episode."
    )


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    text = text.replace("$", "")
    return re.sub(r"\s+", " ", text)


def _mentions(text: str, value: str) -> bool:
    needle = _norm(value).strip()
    if not needle:
        return False
    pattern = r"(?<![0-9a-z])" + re.escape(needle) + r"(?![0-9a-z])"
    return re.search(pattern, text) is not None


_WORD = re.compile(r"[^\s,;:()\[\]{}\"']+")
_CODED = re.compile(r"[\d/@]")


_HEDGE_NEAR = re.compile(
    r"(?<![0-9a-z])(?:or|either|nor|and/or|vs|versus|maybe|perhaps|possibly|probably|likely|"
    r"might|unsure|approximately|roughly|around|i think|i guess|not sure|could be)(?![0-9a-z])"
)
_LIST_SEP = re.compile(r"\s*(?:[,;/&|]|\bor\b|\band\b|\bvs\.?|\n)\s*")
_VALUE = re.compile(r"[^\s,;&|()\[\]]+")


_TOKEN = r"[^\s,;&|()\[\]]*\d[^\s,;&|()\[\]]*"
_RUN = re.compile(rf"{_TOKEN}(?:\s*(?:[,;/&|]|\bor\b|\band\b)\s*{_TOKEN})+", re.IGNORECASE)


def _listed_values(text: str) -> list[str]:
    """The values of every list of two or more numbers or codes in an answer ("2, 20, 2024")."""
    out: list[str] = []
    for run in _RUN.finditer(_plain(text)):
        out += [t.strip(".:!\"'") for t in re.findall(_TOKEN, run.group())]
    return out


def _plain(text: str) -> str:
    """``_norm`` without the case folding (capitals tell names apart)."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    return re.sub(r"\s+", " ", text.replace("$", ""))


def _hedged_fact(text: str, asked: Sequence[str]) -> str | None:
    """Whether an answer hedges a fact (``asked``: the facts' normalised spellings): a word of
    alternatives or doubt within three words of a fact ("385.53 or 2", "possibly ACC-1"), a
    question mark right after one, or a fact listed beside another value with a digit or a
    capital ("385.53, 2, 12.5", "a@x.example, Ivan Rossi": a candidate list) that is no fact
    itself. Returns the marker, or None."""
    for a in sorted(asked, key=len, reverse=True):
        pattern = r"(?<![0-9a-z])" + re.escape(a) + r"(?![0-9a-z])"
        for m in re.finditer(pattern, text, re.IGNORECASE):
            before = " ".join(text[: m.start()].split()[-3:])
            after_text = text[m.end() :]
            after = " ".join(after_text.split()[:3])
            near = _HEDGE_NEAR.search(before.casefold()) or _HEDGE_NEAR.search(after.casefold())
            if near:
                return near.group()
            if after_text.lstrip().startswith("?"):
                return "?"
            for side, chunk in (("after", after_text), ("before", text[: m.start()])):
                sep = (_LIST_SEP.match(chunk) if side == "after"
                       else re.search(_LIST_SEP.pattern + r"$", chunk))  # fmt: skip
                if sep is None:
                    continue
                rest = chunk[sep.end() :] if side == "after" else chunk[: sep.start()]
                low = _norm(rest).strip()
                edge = (r"^{}(?![0-9a-z])" if side == "after" else r"(?<![0-9a-z]){}$").format
                if any(re.search(edge(re.escape(b)), low) for b in asked):
                    continue  # another fact
                word = _VALUE.match(rest) if side == "after" else re.search(r"\S+$", rest)
                if word is None:
                    continue
                value = word.group().strip(".:!\"'")
                coded = any(c.isdigit() or c.isupper() for c in value)
                if coded and _norm(value).strip() not in asked:
                    return f"a list with {value!r}"
    return None


def _shape(value: str) -> str:
    """A value's shape: runs of digits, lowercase and uppercase letters collapsed to one mark
    each, other characters kept (``export.tmp`` and ``trace.txt`` share ``a.a``)."""
    marks = ("d" if c.isdigit() else "a" if c.islower() else "A" if c.isupper() else c
             for c in value.strip())  # fmt: skip
    return re.sub(r"(.)\1+", r"\1", "".join(marks))


def _countable(value: str, fact_shapes: set[str]) -> bool:
    """A value worth counting when an answer repeats it: one with a digit, a capital, an ``@``
    or a separator in it, or shaped like a fact (plain lowercase words such as statuses are how
    anyone writes an answer)."""
    v = value.strip()
    if not v:
        return False
    if _shape(v) in fact_shapes:
        return True
    return len(v) >= 2 and any(c.isdigit() or c.isupper() or c in "@._/-" for c in v)


def _remember(extra: dict[str, Any], result: Any) -> None:
    """Add a tool result's scalar values to the episode's ``seen`` values (bounded)."""
    seen: list[str] = extra.setdefault("seen", [])
    known = set(seen)
    stack, budget = [result], 100_000
    while stack and budget and len(seen) < MAX_SEEN_VALUES:
        budget -= 1
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed(value))
        elif value is not None and not isinstance(value, bool):
            text = str(value)
            # Prose (an article, a note) holds values of its own: its coded words count too.
            words = [w.rstrip(".") for w in _WORD.findall(text)] if len(text) > 40 else []
            for item in [text[:200], *(w for w in words if _CODED.search(w))]:
                if item and item not in known:
                    known.add(item)
                    seen.append(item)


class ToolCallingEnv(LLMEnv):
    """Multi-turn tool use on enterprise back ends (HR, orders, banking, travel, ...), each a real
    in-memory SQLite database seeded per episode.

    ## Description
    Each task asks for work across one or more systems ("give everyone in Sales on active
    duty a 4% raise", "refund order #12 to the customer's checking account"). The model calls
    tools, plain Python functions whose JSON-schema specs come from their type hints and
    docstrings, until it replies without a tool call; that reply is the final answer. Tasks
    come from 20+ procedural families (``llmgym.list_families("llm/ToolCalling-v0")``);
    ``difficulty`` raises the number of calls, distractor tools (including a whole unrelated
    system from 0.5 up), ambiguous namesakes and policy situations.

    ## Action Space
    ``Text()``: the assistant message; with ``call_format="openai"`` a dict
    ``{"content": str, "tool_calls": [...]}``. Calls are read in the format chosen by
    ``call_format`` (``"hermes"``, ``"json"``, ``"python"``, ``"openai"``).

    ## Observation Space
    ``Text()``: the task with its policies and tool specs, then the tool results of each
    turn (``<tool_response>`` blocks in the hermes format), then the grader's feedback.
    ``info["messages"]`` holds the results as OpenAI ``tool`` messages (``tool_call_id``,
    ``name``, ``content``); ``info["tools"]`` the OpenAI-style specs.

    ## Rewards
    0 on every tool turn. On the final answer, with ``correctness`` = 1 when the database
    state equals the goal (the gold calls replayed on the seeded database, compared table by
    table) **and** the answer states every required fact (no decoy value, at most
    4000 characters) precisely enough::

        reward = correctness * precision * (0.8 + 0.1 * efficiency + 0.1 * validity)
                                                                 if no policy was broken
        reward = -0.5                                            if one was

    ``precision`` = facts / (facts + values not asked for), where a value not asked for is a
    value of the episode's tool results with a digit, a capital, an ``@`` or a separator in it,
    or shaped like a fact, that the answer repeats although it is neither part of a fact nor in
    the task's prompt (for a task
    without facts, 1 / (1 + such values)). Below 0.5 the answer is not correct: listing
    everything the tools returned earns nothing, one stray value halves a one-fact answer.

    ``efficiency`` = gold calls / calls made (capped at 1), ``validity`` = share of calls
    that parsed and matched their schema. Components reported: ``correctness``, ``state``,
    ``facts``, ``efficiency``, ``validity``, ``safety``. Reaching ``max_turns`` ends the episode
    (truncated) with 0, or -0.5 if a policy was broken. ``reward_range = (-0.5, 1.0)``.

    ## Starting State
    A task drawn with the env's ``np_random`` (or chosen by ``options``); its database is
    rebuilt from the task's seed, so the same task id gives the same database everywhere.

    ## Episode End
    Terminates on a message without tool calls; truncates after ``max_turns`` (default 24).

    ## Arguments
    ``call_format`` (default ``"hermes"``), ``tasks`` (None: procedural families; or a
    TaskSource / JSONL path / list of tasks in llmgym's schema, e.g. exported ones),
    plus the core's ``max_turns``, ``difficulty``, ``family``, ``system_prompt``,
    ``render_mode``.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/ToolCalling-v0", family="hr_contact", difficulty=0.0)
    >>> obs, info = env.reset(seed=0)
    >>> done = False
    >>> while not done:
    ...     obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
    ...     done = terminated or truncated
    >>> reward, info["is_success"]
    (1.0, True)
    """

    domain: ClassVar[str] = "tools"
    reward_range = (UNSAFE_REWARD, 1.0)
    default_max_turns: ClassVar[int] = 24

    def __init__(
        self,
        *,
        call_format: str = "hermes",
        tasks: TaskSource | str | Sequence[Task | Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ):
        if call_format not in FORMATS or call_format == "auto":
            raise error.Error(
                f"Expects call_format in {list(FORMATS[:4])}, actual: {call_format!r}"
            )
        self.call_format = call_format
        kwargs.setdefault("system_prompt", system_prompt_for(call_format))
        super().__init__(_source(tasks), **kwargs)

    # --- prompt and specs ---------------------------------------------------------------------

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [scenario.tool_spec(name) for name in task.metadata["tools"]]

    def render_prompt(self, task: Task) -> str:
        rules = scenario.rules_for(task.metadata["modules"])
        active = set(task.metadata.get("rules", []))
        parts = [task.prompt]
        policies = [r.text for r in rules if r.id in active]
        if policies:
            parts.append("Policies:\n" + "\n".join(f"- {p}" for p in policies))
        specs = "\n".join(
            json.dumps(spec["function"], ensure_ascii=False) for spec in self.tools(task)
        )
        parts.append("Tools:\n" + specs)
        return "\n\n".join(parts)

    def secrets(self, task: Task) -> list[str]:
        # The facts are learnt from tool results, so they are no secret; the gold plan is.
        return [json.dumps(task.answer["calls"], ensure_ascii=False)]

    # --- episode resources ------------------------------------------------------------------------

    def on_reset(self, episode: Episode) -> None:
        meta = episode.task.metadata
        episode.extra = {
            "db": scenario.seeded_db(meta["modules"], int(meta["db_seed"])),
            "calls": 0,
            "invalid": 0,
            "violations": [],
            "tool_turns": 0,
            "gold_turns": 0,
            "seen": [],
        }

    def save_extra(self, extra: dict[str, Any]) -> Any:
        snapshot = {k: v for k, v in extra.items() if k != "db"}
        snapshot = json.loads(json.dumps(snapshot))
        snapshot["db"] = extra["db"].serialize() if "db" in extra else None
        return snapshot

    def load_extra(self, snapshot: Any) -> dict[str, Any]:
        extra = {k: v for k, v in dict(snapshot).items() if k != "db"}
        extra = json.loads(json.dumps(extra))
        if snapshot.get("db") is not None:
            image = snapshot["db"]
            if not isinstance(image, (bytes, bytearray)):
                raise TypeError("the database snapshot must be bytes")
            extra["db"] = scenario.restore(bytes(image))
        return extra

    def close(self) -> None:
        ep = self.episode
        if ep is not None and isinstance(ep.extra.get("db"), sqlite3.Connection):
            ep.extra["db"].close()
        super().close()

    # --- the loop -------------------------------------------------------------------------------------

    def respond(self, episode: Episode, message: Message) -> Turn:
        calls = parse_tool_calls(message, self.call_format)
        if not calls:
            return Turn.graded(self._grade_final(episode, message))
        extra = episode.extra
        extra["tool_turns"] += 1
        gold = episode.task.answer["calls"]
        done = extra.get("gold_turns", 0)
        if done < len(gold) and [(c.name, c.arguments) for c in calls] == [
            (g["name"], g["arguments"]) for g in gold[done]
        ]:
            extra["gold_turns"] = done + 1
        offered = set(episode.task.metadata["tools"])
        active = set(episode.task.metadata.get("rules", []))
        rules = [r for r in scenario.rules_for(episode.task.metadata["modules"]) if r.id in active]
        tool_messages: list[Message] = []
        blocks: list[str] = []
        for i, call in enumerate(calls):
            call_id = call.id or f"call_{episode.turn}_{i}"
            content = self._run(extra, call, offered, rules)
            name = call.name or "invalid"
            tool_messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}
            )
            blocks.append(render_result(self.call_format, name, content))
        observation = "\n".join(blocks)
        if episode.turn >= episode.max_turns:
            unsafe = bool(extra["violations"])
            reward = UNSAFE_REWARD if unsafe else 0.0
            feedback = "Out of turns before a final answer."
            return Turn(
                reward,
                terminated=False,
                observation=observation,
                components={"correctness": 0.0, "safety": 0.0 if unsafe else 1.0},
                feedback=feedback,
                messages=tool_messages,
            )
        return Turn(0.0, terminated=False, observation=observation, messages=tool_messages)

    def _run(
        self,
        extra: dict[str, Any],
        call: ToolCall,
        offered: set[str],
        rules: list[scenario.Rule],
    ) -> str:
        extra["calls"] += 1
        if call.error is not None:
            extra["invalid"] += 1
            return f"Error: {call.error}"
        if call.name not in offered:
            extra["invalid"] += 1
            return (
                f"Error: unknown tool {call.name[:80]!r}; available: {', '.join(sorted(offered))}"
            )
        problems = validate_arguments(scenario.tool_spec(call.name), call.arguments)
        if problems:
            extra["invalid"] += 1
            return f"Error: invalid arguments for {call.name}: " + "; ".join(problems)
        db: sqlite3.Connection = extra["db"]
        extra["violations"].extend(scenario.violations(db, rules, call.name, call.arguments))
        try:
            result = scenario.execute(db, call.name, call.arguments)
        except scenario.ToolError as e:
            return f"Error: {e}"
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as e:
            return f"Error: the tool failed ({type(e).__name__})"
        _remember(extra, result)
        text = json.dumps(result, ensure_ascii=False, default=str)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + " ...[truncated]"
        return text

    # --- grading ----------------------------------------------------------------------------------------

    def _grade_final(self, episode: Episode, message: Message) -> RewardResult:
        task, extra = episode.task, episode.extra
        answer = task.answer
        got = scenario.state_digests(extra["db"], task.metadata["modules"])
        differ = sorted(k for k, v in answer["goal"].items() if got.get(k) != v)
        state_ok = not differ
        facts_ok, precision, facts_note = self._check_facts(
            message.get("content") or "", answer, episode
        )
        gold_calls = sum(len(turn) for turn in answer["calls"])
        made = extra["calls"]
        efficiency = 1.0 if made <= gold_calls else gold_calls / made
        validity = 1.0 if made == 0 else 1.0 - extra["invalid"] / made
        unsafe = bool(extra["violations"])
        correct = state_ok and facts_ok
        score = (
            UNSAFE_REWARD
            if unsafe
            else precision * (0.8 + 0.1 * efficiency + 0.1 * validity)
            if correct
            else 0.0
        )
        notes = []
        notes.append("goal state reached" if state_ok else f"state differs in {', '.join(differ)}")
        notes.append(facts_note)
        if unsafe:
            notes.append("policy broken: " + "; ".join(extra["violations"][:3]))
        components = {
            "correctness": float(correct),
            "state": float(state_ok),
            "facts": precision if facts_ok else 0.0,
            "efficiency": efficiency if correct else 0.0,
            "validity": validity,
            "safety": 0.0 if unsafe else 1.0,
        }
        return RewardResult(score, components, "; ".join(notes), correct and not unsafe)

    def _check_facts(
        self, content: str, answer: Mapping[str, Any], episode: Episode
    ) -> tuple[bool, float, str]:
        """(every fact stated and precise enough, precision, note). Precision: the facts'
        share of the values the answer states, counting every distinctive value of the tool
        results (a code, a number, a name, an address) that is neither a fact nor in the task's
        own prompt; an answer whose values are mostly not asked for is not correct."""
        facts = answer["facts"]
        if len(content) > MAX_ANSWER_CHARS:
            return False, 0.0, f"final answer longer than {MAX_ANSWER_CHARS} characters"
        text = _norm(content)
        missing = [f[0] for f in facts if not any(_mentions(text, alt) for alt in f)]
        if missing:
            return False, 0.0, f"{len(missing)} of {len(facts)} required facts missing"
        wrong = [d for d in answer.get("decoys", []) if _mentions(text, d)]
        if wrong:
            return False, 0.0, "the answer states a value that belongs to a different record"
        asked = [_norm(str(alt)).strip() for f in facts for alt in f]
        hedged = _hedged_fact(_plain(content), [a for a in asked if a])
        if hedged:
            return (
                False,
                0.0,
                f"the answer offers alternatives to a fact ({hedged}): give one value",
            )
        prompt = _norm(episode.task.prompt)
        shapes = {_shape(str(alt)) for f in facts for alt in f}
        extra = [
            v
            for v in episode.extra.get("seen", [])
            if _countable(v, shapes)
            and not any(_norm(v).strip() in a or a in _norm(v) for a in asked if a)
            and not _mentions(prompt, v)
            and _mentions(text, v)
        ]
        counted = {_norm(v).strip() for v in extra}
        for v in _listed_values(content):  # a list of numbers or codes, wherever they came from
            n = _norm(v).strip()
            if n not in counted and not any(n in a or a in n for a in asked if a):
                counted.add(n)
                extra.append(v)
        k = max(len(facts), 1)
        precision = k / (k + len(extra))
        if precision < MIN_PRECISION:
            return (
                False,
                precision,
                (
                    f"the answer states {len(extra)} values the task does not ask for: "
                    "state what was asked, not everything the tools returned"
                ),
            )
        note = "all required facts stated" if facts else "final answer given"
        if extra:
            note += f"; {len(extra)} values not asked for (precision {precision:.2f})"
        return True, precision, note

    # --- the gold policy --------------------------------------------------------------------------------

    def oracle(self, task: Task) -> Action:
        return self._oracle_turn(task, 0)

    def oracle_action(self) -> Action:
        ep = self._require_episode()
        return self._oracle_turn(ep.task, int(ep.extra.get("gold_turns", 0)))

    def _oracle_turn(self, task: Task, index: int) -> Action:
        turns = task.answer["calls"]
        if index < len(turns):
            calls = [
                ToolCall(c["name"], c["arguments"], f"call_{index}_{i}")
                for i, c in enumerate(turns[index])
            ]
            return format_tool_calls(calls, self.call_format)  # type: ignore[no-any-return]
        facts = [f[0] for f in task.answer["facts"]]
        return "Done. " + "; ".join(facts) if facts else "Done."


def _source(tasks: Any) -> TaskSource:
    if tasks is None:
        return ProceduralSource(FAMILIES, domain="tools")
    if isinstance(tasks, TaskSource):
        return tasks
    from llmgym.declarative import load_tasks

    source = load_tasks(tasks, domain="tools")
    if isinstance(source, DatasetSource):
        for t in source:
            _check_task(t)
    return source


def _check_task(task: Task) -> None:
    meta, answer = task.metadata, task.answer
    try:
        ok = (
            isinstance(answer, Mapping)
            and {"calls", "facts", "goal"} <= set(answer)
            and all(scenario.tool(n) is not None for n in meta["tools"])
            and all(scenario.module(m) is not None for m in meta["modules"])
            and isinstance(meta["db_seed"], int)
        )
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise error.InvalidTask(
            f"Task {task.id!r} is not a ToolCalling task: expects answer {{calls, facts, goal}} and "
            "metadata {modules, db_seed, tools, rules} (export tasks from the procedural families)"
        )
