"""FunctionCallingEnv: function calling graded as BFCL grades it (single-shot calls by AST match,
abstaining, multi-turn and agentic episodes on BFCL's backends), with the oracle and the verdict
helpers it shares with the BFCL conformance cases.

Its procedural families are :mod:`llmgym.envs.tools.families.function_calls`; reading BFCL's
data, its Java/JavaScript arguments and its multi-turn backends is the annex
:mod:`llmgym.envs.tools.bfcl`. Multi-turn tool use graded on a database state is the other env of
the wing, :mod:`llmgym.envs.tools.env`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from llmgym import error
from llmgym.core import Action, Episode, LLMEnv, Message, Turn
from llmgym.envs.tools.env import FORMAT_HELP, render_result
from llmgym.envs.tools.families import FUNCTION_CALLING_FAMILIES
from llmgym.rewards import RewardResult
from llmgym.rewards.tools import AstMatch, ast_match_result
from llmgym.tasks import DatasetSource, ProceduralSource, Task, TaskSource
from llmgym.toolcalls import FORMATS, ToolCall, format_tool_calls, parse_tool_calls

CALL_PENALTY = -0.5
"""The reward for calling a function where none fits the request (BFCL's irrelevance categories)."""
MORE_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"
"""What the user says when a multi-turn task hands over the functions it held back (BFCL's words)."""
_AGENTIC_STD = re.compile(r"[\,\.\/\-\_\*\^\(\)]")


def _first(options: Any) -> tuple[bool, Any]:
    """(present, value): the first acceptable value; absent when only "" (optional) is allowed."""
    for v in options if isinstance(options, list) else [options]:
        if not (isinstance(v, str) and v == ""):
            return True, v
    return False, None


def _concrete(option: Any, schema: Any) -> Any:
    """An acceptable value as a call states it: a dict (or list of dicts) of acceptable values
    per key (BFCL's dict answers) becomes the dict of each key's first value."""

    def one(d: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, (ok, v) in ((k, _first(o)) for k, o in d.items()) if ok}

    if isinstance(option, Mapping):
        return one(option)
    items = schema.get("items") if isinstance(schema, Mapping) else None
    item_type = items.get("type") if isinstance(items, Mapping) else None
    if (
        isinstance(option, list)
        and option
        and all(isinstance(x, Mapping) for x in option)
        and item_type in (None, "object", "dict")
    ):
        return [one(x) for x in option]
    return option


def gold_calls(
    ground_truth: Sequence[Mapping[str, Any]], functions: Sequence[Mapping[str, Any]] | None = None
) -> list[ToolCall]:
    """One concrete call per possible-answer entry (first acceptable value of each parameter).

    With the offered ``functions``, the call is one BFCL accepts: an optional parameter the spec
    does not know is left out, and a parameter the spec requires but the answer leaves optional
    is passed as ``""`` (which BFCL reads as omitted)."""
    specs = {f.get("name"): f.get("parameters") or {} for f in functions or []}
    calls = []
    for entry in ground_truth:
        ((name, params),) = entry.items()
        spec = specs.get(name)
        props = spec.get("properties", {}) if spec is not None else None
        required = spec.get("required", []) if spec is not None else []
        args = {}
        for key, options in params.items():
            ok, value = _first(options)
            if not ok:
                if key in required:
                    args[key] = ""
                continue
            if props is not None and key not in props and "" in _listed(options):
                continue
            args[key] = _concrete(value, (props or {}).get(key))
        calls.append(ToolCall(name, args))
    return calls


def _listed(options: Any) -> list[Any]:
    return options if isinstance(options, list) else [options]


def agentic_match(response: str, answers: Sequence[str]) -> bool:
    """BFCL's agentic check: an acceptable answer appears in the response as a whole word, both
    lower-cased without ``, . / - _ * ^ ( )``.

    >>> agentic_match("{'answer': 'Zhang Yiming', 'context': '...'}", ["Zhang Yiming"])
    True
    >>> agentic_match("It is 17.", ["7", "seven"])
    False
    """

    def std(text: str) -> str:
        return _AGENTIC_STD.sub("", text).lower().replace("'", '"')

    text = std(response)
    return any(re.search(rf"\b{re.escape(std(a))}\b", text) for a in answers)


def match_calls(task: Task, calls: Sequence[ToolCall]) -> AstMatch:
    """An ``ast`` task's verdict on parsed calls: Java/JavaScript code strings read as BFCL reads
    them, then :func:`llmgym.rewards.tools.ast_match_result` against the possible answers."""
    functions = task.metadata["functions"]
    language = task.metadata.get("language")
    if language:
        from llmgym.envs.tools.bfcl.languages import convert_calls

        calls = convert_calls(list(calls), task.metadata["bfcl_functions"], language)
        functions = task.metadata["grading_functions"]
    return ast_match_result(list(calls), task.answer["ground_truth"], functions)


def oracle_calls(task: Task) -> list[ToolCall]:
    """The reference calls of a single-shot task (``ast`` or ``relevance``), arguments written as
    the task's language writes them."""
    if _kind(task) == "relevance":
        example = [
            {n: {k: [v] for k, v in a.items()}}
            for e in task.answer["example"]
            for n, a in e.items()
        ]
        return gold_calls(example)
    functions = task.metadata.get("grading_functions", task.metadata["functions"])
    calls = gold_calls(task.answer["ground_truth"], functions)
    language = task.metadata.get("language")
    return _as_code(calls, task.metadata["bfcl_functions"], language) if language else calls


def _kind(task: Task) -> str:
    return str(task.metadata.get("kind", "ast"))


class FunctionCallingEnv(LLMEnv):
    """Function calling (BFCL-style): single-shot calls graded by AST match, abstaining where no
    function fits, and BFCL's multi-turn and agentic episodes on its stateful backends.

    ## Description
    The prompt lists function specs and asks for one or more calls; the reply is parsed in
    ``call_format``. Tasks come from BFCL files (``tasks=<questions.json>`` or a category name
    such as ``"live_simple"``, ``dataset_format="bfcl"``; every category of the data shipped in
    ``bfcl-eval`` loads, one family per category) or from four procedural families
    (``fc_simple``, ``fc_multiple``, ``fc_parallel``, ``fc_parallel_multiple``) whose functions
    are the ToolCalling tools; ``difficulty`` adds calls and distractors. Each task is one of:

    - ``ast``: one message of calls, matched against the possible answers with
      :func:`llmgym.rewards.tools.ast_match` (BFCL's rules: exact names, required parameters, no
      unknown ones, types, standardised strings, parallel calls in any order); Java and
      JavaScript arguments are code strings read as BFCL reads them.
    - ``irrelevance``: no offered function fits the request; the right reply calls none.
    - ``relevance``: a function fits; the right reply calls an offered function.
    - ``multi_turn``: several user turns; calls run on BFCL's own stateful backends (a file
      system, trading, travel, messaging...) and the results come back as tool messages; a
      message without a readable call ends the turn, which is then checked as BFCL checks it
      (the backends' state equals the ground truth's, the ground truth's results appear among
      the model's; :mod:`llmgym.envs.tools.bfcl.multi_turn`). Needs the optional ``bfcl-eval``.
    - ``agentic`` (BFCL's memory and web search): tool calls, then a final answer that must
      state the answer; ``memory`` plays the scenario's earlier sessions first (each in a fresh
      context: only the memory backend carries over).

    ## Action Space
    ``Text()`` (or an OpenAI dict with ``tool_calls`` when ``call_format="openai"``).

    ## Observation Space
    ``Text()``: the request and the function specs; then tool results (multi-turn), the next
    user turn, or the grader's feedback.

    ## Rewards
    ``ast``, ``relevance``, ``multi_turn``, ``agentic``: 1 if right, else 0 (``correctness``);
    a multi-turn episode is right when every turn is. ``irrelevance``: 1 for a reply without a
    call, -0.5 for one that calls a function. ``reward_range = (-0.5, 1)``.

    ## Starting State
    A task drawn with the env's ``np_random`` (or chosen by ``options``); a multi-turn task's
    backends are loaded from its ``initial_config``.

    ## Episode End
    Single-shot tasks terminate after one step. A multi-turn episode terminates when its last
    turn ends or a turn fails its check, or after 21 messages with calls in one turn (BFCL's
    limit); it truncates at ``max_turns`` (default: 22 steps per user turn).

    ## Arguments
    ``call_format`` (``"hermes"``, ``"json"``, ``"python"`` default, ``"openai"``), ``tasks``
    (None: procedural; a path, a BFCL category name, a list of them, a TaskSource or records),
    ``dataset_format`` (``"bfcl"`` or None for llmgym's JSONL), ``answers`` (BFCL
    possible-answer file; default ``possible_answer/<same name>`` beside the questions), plus
    the core's arguments.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/FunctionCalling-v0", family="fc_simple")
    >>> obs, info = env.reset(seed=0)
    >>> env.step(env.unwrapped.oracle_action())[1]
    1.0
    """

    domain: ClassVar[str] = "tools"
    reward_range = (CALL_PENALTY, 1.0)

    def __init__(
        self,
        *,
        call_format: str = "python",
        tasks: TaskSource | str | Path | Sequence[Any] | None = None,
        dataset_format: str | None = None,
        answers: str | Path | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ):
        if call_format not in FORMATS or call_format == "auto":
            raise error.Error(
                f"Expects call_format in {list(FORMATS[:4])}, actual: {call_format!r}"
            )
        if dataset_format not in (None, "bfcl"):
            raise error.Error(f"Expects dataset_format None or 'bfcl', actual: {dataset_format!r}")
        self.call_format = call_format
        self._max_turns_given = kwargs.get("max_turns") is not None
        kwargs.setdefault(
            "system_prompt",
            "You call functions to fulfil the user's request. "
            + FORMAT_HELP[call_format]
            + " Reply with the calls only, using exactly the functions and parameter names given."
            " If none of the functions fits the request, or the request lacks a value a function"
            " needs, say so without calling any. When a conversation has several turns, keep"
            " calling functions until the current request is done, then reply without a call:"
            " that ends your turn.",
        )
        super().__init__(_source(tasks, dataset_format, answers), **kwargs)

    def _openai_name(self, name: str) -> str:
        return name.replace(".", "_") if self.call_format == "openai" else name

    def _specs(self, functions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {**f, "name": self._openai_name(f["name"])}}
            for f in functions
        ]

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return self._specs(task.metadata["functions"])

    def _listing(self, functions: Sequence[Mapping[str, Any]]) -> str:
        specs = self._specs(functions)
        return "Functions:\n" + "\n".join(
            json.dumps(t["function"], ensure_ascii=False) for t in specs
        )

    def render_prompt(self, task: Task) -> str:
        head = task.prompt
        if task.metadata.get("category") == "memory":
            head = _memory_instructions(task, None) + "\n\n" + head
        return f"{head}\n\n{self._listing(task.metadata['functions'])}"

    def secrets(self, task: Task) -> list[str]:
        return []

    def _calls(self, task: Task, message: Message) -> list[ToolCall]:
        calls = parse_tool_calls(message, self.call_format)
        if self.call_format == "openai":
            back = {self._openai_name(f["name"]): f["name"] for f in task.metadata["functions"]}
            calls = [ToolCall(back.get(c.name, c.name), c.arguments, c.id, c.error) for c in calls]
        return calls

    # --- single-shot tasks ------------------------------------------------------------------------

    def grade(self, task: Task, message: Message) -> RewardResult:
        calls = self._calls(task, message)
        kind = _kind(task)
        made = [c for c in calls if c.error is None]
        if kind == "irrelevance":
            if made:
                names = ", ".join(sorted({c.name for c in made}))[:200]
                return RewardResult(
                    CALL_PENALTY,
                    {"correctness": 0.0},
                    f"called {names}, but none of the functions fits the request",
                    False,
                )
            return RewardResult.of(True, "no call: right, none of the functions fits the request")
        if kind == "relevance":
            offered = {f["name"] for f in task.metadata["functions"]}
            ok = any(c.name in offered for c in made)
            return RewardResult.of(
                ok, "a function is called" if ok else "no offered function is called"
            )
        if not calls:
            return RewardResult.of(False, "no function call found")
        result = match_calls(task, calls)
        return RewardResult.of(
            result.matched, "the calls match" if result.matched else "; ".join(result.reasons[:5])
        )

    def oracle(self, task: Task) -> Action:
        kind = _kind(task)
        if kind == "irrelevance":
            return "None of the functions can do this."
        if kind in ("multi_turn", "agentic"):
            return self._turn_oracle(task, None)
        calls = oracle_calls(task)
        calls = [
            ToolCall(self._openai_name(c.name), c.arguments, f"call_{i}")
            for i, c in enumerate(calls)
        ]
        return format_tool_calls(calls, self.call_format)  # type: ignore[no-any-return]

    # --- multi-turn and agentic episodes --------------------------------------------------------------

    def on_reset(self, episode: Episode) -> None:
        task = episode.task
        if _kind(task) not in ("multi_turn", "agentic"):
            return
        from llmgym.envs.tools.bfcl.multi_turn import MAX_STEPS_PER_TURN, Session

        gold = task.answer["ground_truth"] if _kind(task) == "multi_turn" else None
        episode.extra = {
            "session": Session(task.metadata, gold),
            "called": False,
            "offered": list(task.metadata["functions"]),
        }
        if not self._max_turns_given:
            episode.max_turns = len(_all_turns(task)) * (MAX_STEPS_PER_TURN + 2)

    def respond(self, episode: Episode, message: Message) -> Turn:
        if _kind(episode.task) not in ("multi_turn", "agentic"):
            return Turn.graded(self.grade(episode.task, message))
        from llmgym.envs.tools.bfcl.multi_turn import MAX_STEPS_PER_TURN

        task, extra = episode.task, episode.extra
        session = extra["session"]
        calls = self._calls(task, message)
        if calls and all(c.error is None for c in calls):
            results = session.run_model(calls)
            extra["called"] = True
            tool_messages: list[Message] = []
            for i, (call, content) in enumerate(zip(calls, results, strict=False)):
                tool_messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id or f"call_{episode.turn}_{i}",
                        "name": call.name,
                        "content": content,
                    }
                )
            observation = "\n".join(
                render_result(self.call_format, m["name"], m["content"]) for m in tool_messages
            )
            if session.steps > MAX_STEPS_PER_TURN:
                feedback = f"forced to quit after {MAX_STEPS_PER_TURN} steps in one turn"
                return Turn(0.0, True, feedback, {"correctness": 0.0}, False, feedback)
            return Turn(0.0, terminated=False, observation=observation, messages=tool_messages)
        note = (
            "the calls could not be read (" + "; ".join(c.error or "" for c in calls)[:300] + "); "
            if calls
            else ""
        )
        return self._end_turn(episode, message, note)

    def _end_turn(self, episode: Episode, message: Message, note: str) -> Turn:
        task, extra = episode.task, episode.extra
        session = extra["session"]
        turns = _all_turns(task)
        index = session.turn
        if _kind(task) == "multi_turn":
            problem = session.end_turn(task.answer["ground_truth"][index], extra["called"])
            if problem:
                return Turn(0.0, True, note + problem, {"correctness": 0.0}, False, note + problem)
        else:
            session.turn += 1
            session.steps = 0
            if session.turn >= len(turns):
                ok = agentic_match(str(message.get("content") or ""), task.answer["ground_truth"])
                feedback = (
                    "the answer is right" if ok else "the answer is not among the expected ones"
                )
                result = RewardResult.of(ok, note + feedback)
                return Turn.graded(result)
        extra["called"] = False
        if session.turn >= len(turns):
            feedback = f"all {len(turns)} turns done: state and results match the ground truth's"
            return Turn.graded(RewardResult.of(True, note + feedback))
        return self._next_turn(episode, turns[session.turn], note)

    def _next_turn(self, episode: Episode, turn: list[dict[str, Any]], note: str) -> Turn:
        task, extra = episode.task, episode.extra
        session = extra["session"]
        info: dict[str, Any] = {}
        held = task.metadata.get("held_functions", {}).get(str(session.turn - _prereq_turns(task)))
        parts = [str(m.get("content", "")) for m in turn if m.get("content")]
        if held and _kind(task) == "multi_turn":
            extra["offered"] = extra["offered"] + list(held)
            parts = [MORE_FUNCTIONS, self._listing(held)]
            info["tools"] = self._specs(extra["offered"])
        if _opens_session(
            task, session.turn
        ):  # a new session: a fresh context, only the memory carries over
            del episode.messages[
                1 if episode.messages and episode.messages[0]["role"] == "system" else 0 :
            ]
            parts.insert(0, _memory_instructions(task, session))
            parts.append(self._listing(extra["offered"]))
        text = "\n\n".join(parts)
        return Turn(
            0.0,
            terminated=False,
            observation=text,
            feedback=note.rstrip("; "),
            info=info,
            messages=[{"role": "user", "content": text}],
        )

    def oracle_action(self) -> Action:
        ep = self._require_episode()
        if ep.mode is None and _kind(ep.task) in ("multi_turn", "agentic"):
            return self._turn_oracle(ep.task, ep.extra["session"])
        return super().oracle_action()

    def _turn_oracle(self, task: Task, session: Any) -> Action:
        turn = session.turn if session is not None else 0
        steps = session.steps if session is not None else 0
        if _kind(task) == "agentic":
            if turn + 1 < len(_all_turns(task)):
                return "Noted."
            answer = task.answer["ground_truth"][0]
            return (
                "{'answer': "
                + json.dumps(answer, ensure_ascii=False)
                + ", 'context': 'the reference answer'}"
            )
        gold = task.answer["ground_truth"][turn]
        if not gold:
            return "I cannot do that with the functions and the information I have."
        if steps:
            return "Done."
        from llmgym.envs.tools.bfcl.multi_turn import gold_call

        calls = [gold_call(c, task.metadata["involved_classes"]) for c in gold]
        calls = [
            ToolCall(self._openai_name(c.name), c.arguments, f"call_{turn}_{i}")
            for i, c in enumerate(calls)
        ]
        return format_tool_calls(calls, self.call_format)  # type: ignore[no-any-return]


def _prereq_turns(task: Task) -> int:
    return sum(len(s) for s in task.metadata.get("sessions", []))


def _all_turns(task: Task) -> list[list[dict[str, Any]]]:
    """Every user turn of an episode: the earlier sessions' (memory), then the task's own."""
    return [t for s in task.metadata.get("sessions", []) for t in s] + list(task.metadata["turns"])


def _opens_session(task: Task, turn: int) -> bool:
    """Whether ``turn`` opens a session after the first (memory tasks: a fresh context)."""
    start = 0
    for s in task.metadata.get("sessions", []):
        start += len(s)
        if turn == start:
            return True
    return False


def _memory_instructions(task: Task, session: Any) -> str:
    """BFCL's memory system prompt for the scenario, with the core memory's current content."""
    from llmgym.envs.tools.bfcl.peer import memory_prompts

    settings, template = memory_prompts()
    content = "There is no content in the core memory at this point."
    if session is not None:
        backend = next(iter(session.model.values()))
        content = backend._dump_core_memory_to_context()
    return template.format(
        scenario_setting=settings.get(task.metadata.get("scenario", ""), ""),
        memory_content=content,
    )


def _as_code(
    calls: list[ToolCall], functions: list[Mapping[str, Any]], language: str
) -> list[ToolCall]:
    """Gold calls with each value written as the Java/JavaScript code BFCL reads back as it."""
    from llmgym.envs.tools.bfcl.languages import literal

    docs = {f["name"]: f["parameters"].get("properties", {}) for f in functions}
    out = []
    for call in calls:
        props = docs.get(call.name, {})
        args = {}
        for key, value in call.arguments.items():
            schema = props.get(key, {})
            item = (schema.get("items") or {}).get("type")
            args[key] = literal(value, schema.get("type", "any"), item, language)
        out.append(ToolCall(call.name, args))
    return out


def _source(tasks: Any, dataset_format: str | None, answers: Any) -> TaskSource:
    if tasks is None:
        if dataset_format is not None:
            raise error.Error("dataset_format needs tasks (a path or a list of records)")
        return ProceduralSource(FUNCTION_CALLING_FAMILIES, domain="tools")
    if isinstance(tasks, TaskSource):
        return tasks
    if dataset_format == "bfcl":
        from llmgym.envs.tools.bfcl.datasets import load_bfcl

        if (
            isinstance(tasks, (list, tuple))
            and tasks
            and all(isinstance(t, (str, Path)) for t in tasks)
        ):
            if answers is not None:
                raise error.Error("answers goes with one question file, not a list of them")
            return DatasetSource([t for f in tasks for t in load_bfcl(f)], domain="tools")
        return DatasetSource(load_bfcl(tasks, answers), domain="tools")
    from llmgym.declarative import load_tasks

    return load_tasks(tasks, domain="tools")
