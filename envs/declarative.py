"""DeclarativeEnv: an environment from tasks, a named verifier and a prompt template, no class needed."""

from __future__ import annotations

import difflib
import string
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.core import Episode, LLMEnv, Message, Turn
from llmgym.rewards import RewardResult, Verifier, get_verifier, safe_verify
from llmgym.rewards.text import extract, wrap_for
from llmgym.tasks import DatasetSource, Task, TaskSource

TaskInput = str | Path | TaskSource | Iterable[Task | Mapping[str, Any]]


def load_tasks(tasks: TaskInput, *, domain: str = "custom") -> TaskSource:
    """A task source from a JSONL path, a TaskSource, or a list of Tasks or task dicts."""
    if isinstance(tasks, TaskSource):
        return tasks
    if isinstance(tasks, (str, Path)):
        return DatasetSource.from_jsonl(tasks, domain=domain)
    if isinstance(tasks, Mapping):
        raise error.InvalidSpec(
            "Expects tasks as a JSONL path or a list of tasks, not a single dict"
        )
    try:
        items = list(tasks)
    except TypeError:
        raise error.InvalidSpec(
            f"Expects tasks as a JSONL path, a TaskSource or a list, actual type: {type(tasks).__name__}"
        ) from None
    if all(isinstance(t, Task) for t in items):
        return DatasetSource(items, domain=domain)  # type: ignore[arg-type]
    return DatasetSource.from_records(items, domain=domain, name="tasks")  # type: ignore[arg-type]


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        raise error.InvalidSpec(
            f"prompt_template uses {{{key}}}; available fields: prompt, id, family, difficulty "
            "and the task's metadata keys"
        )


def render_template(template: str, task: Task) -> str:
    """Fill ``{prompt}``, ``{id}``, ``{family}``, ``{difficulty}`` and metadata keys."""
    values = _Fields(task.metadata)
    values.update(prompt=task.prompt, id=task.id, family=task.family, difficulty=task.difficulty)
    return string.Formatter().vformat(template, (), values)


class DeclarativeEnv(LLMEnv):
    """A single-turn environment defined by data: tasks, a verifier and a prompt template.

    ## Description
    Each episode shows one task's prompt (through ``prompt_template``), takes one answer and
    grades it with a verifier from the verifier table (``exact``, ``numeric``, ``regex``,
    ``json``, ``json_schema``, ``math``, ...) or a ``"module:function"`` callable.

    ## Action Space
    ``Text()``: the assistant's message.

    ## Observation Space
    ``Text()``: the rendered prompt, then the verifier's feedback.

    ## Rewards
    The verifier's score, in ``reward_range`` (default ``(0, 1)``; with several weighted
    verifiers, ``(0, sum of weights)``, components named after each).

    ## Starting State
    A task drawn from the task list with the env's ``np_random`` (or chosen by
    ``options={"task_id": ...}``).

    ## Episode End
    Terminates after one step; with ``max_turns`` > 1, after a right answer, and a wrong one
    gets the verifier's feedback and another try (truncated after ``max_turns``; only the
    attempt that ends the episode is rewarded).

    ## Arguments
    ``tasks`` (JSONL path, TaskSource or list), ``verifier`` (a name, a ``"module:function"``
    path, a callable, or a list of ``{"verifier", "weight", "options", "name"}`` combined as a
    weighted rubric), ``verifier_options`` (checked against the verifier's signature),
    ``extract`` (``None``, ``"answer_tag"``, ``"answer_line"``, ``"last_line"``, ``"boxed"``,
    ``"regex:<pattern>"``), ``prompt_template``, ``system_prompt``, ``domain``,
    ``reward_range``, ``max_turns``, ``answer_required`` (default True: every task must have
    an ``answer``; False for a verifier that needs no gold).

    ## Version History
    * v0: initial version.

    ## Example
    >>> import llmgym
    >>> env = DeclarativeEnv(tasks=[{"id": "q1", "prompt": "Capital of France?", "answer": "Paris"}])
    >>> obs, info = env.reset(seed=0)
    >>> env.step("paris")[1]
    1.0
    """

    def __init__(
        self,
        tasks: TaskInput,
        verifier: str | Verifier | Sequence[Mapping[str, Any]] = "exact",
        *,
        verifier_options: Mapping[str, Any] | None = None,
        extract: str | None = None,
        prompt_template: str | None = None,
        domain: str = "custom",
        reward_range: tuple[float, float] | None = None,
        answer_required: bool = True,
        **kwargs: Any,
    ):
        self.domain = domain  # type: ignore[misc]
        self.verifier: Verifier
        if isinstance(verifier, (list, tuple)):
            if verifier_options:
                raise error.InvalidSpec(
                    "verifier_options applies to one verifier; give each of several its own "
                    "'options'"
                )
            self.verifier, top = _rubric(verifier)
        else:
            self.verifier, top = get_verifier(verifier, **dict(verifier_options or {})), 1.0
        if reward_range is None:
            reward_range = (0.0, top)
        self.reward_range = (float(reward_range[0]), float(reward_range[1]))
        self.extract_how = extract
        _check_extract(extract)
        self.prompt_template = prompt_template
        self.answer_required = bool(answer_required)
        source = load_tasks(tasks, domain=domain)
        if self.answer_required:
            _require_answers(source)
        super().__init__(source, **kwargs)

    def render_prompt(self, task: Task) -> str:
        if self.prompt_template is None:
            return task.prompt
        return render_template(self.prompt_template, task)

    def grade(self, task: Task, message: Message) -> RewardResult:
        if task.answer is None and self.answer_required:
            return RewardResult(0.0, {"correctness": 0.0}, "the task has no gold answer", False)
        answer = extract(message["content"], self.extract_how)
        if answer is None:
            return RewardResult.of(False, f"no answer found ({self.extract_how})")
        result = safe_verify(self.verifier, answer, task.answer)
        lo, hi = self.reward_range
        if not lo <= result.score <= hi:
            return RewardResult(
                min(max(result.score, lo), hi),
                result.components,
                result.feedback + f" (score clipped to {self.reward_range})",
                result.success,
            )
        return result

    def respond(self, episode: Episode, message: Message) -> Turn:
        """One attempt. With ``max_turns`` > 1 a wrong answer gets the verifier's feedback as
        the next user turn and another try; only the attempt that ends the episode is
        rewarded (a right one, or the last one), as in CodingMultiTurn-v0."""
        result = self.grade(episode.task, message)
        if result.success or episode.max_turns <= 1:
            return Turn.graded(result)
        if episode.turn >= episode.max_turns:
            return Turn.graded(result, terminated=False)  # out of tries: truncated
        feedback = result.feedback or "That is not right."
        return Turn(
            0.0,
            terminated=False,
            observation=f"{feedback}\nTry again ({episode.max_turns - episode.turn} left).",
            components={k: 0.0 for k in result.components},
            feedback=feedback,
        )

    def oracle(self, task: Task) -> str:
        reference = task.metadata.get("reference")
        if reference is not None:
            return str(reference)
        return wrap_for(self.extract_how, str(task.answer))


_RUBRIC_KEYS = ("verifier", "weight", "options", "name")


def _rubric(entries: Sequence[Any]) -> tuple[Verifier, float]:
    """A verifier that runs several, each weighted (``[{"verifier", "weight", "options",
    "name"}]``), and the highest score it can give. Components are each verifier's weighted
    score under its name; the answer succeeds when every verifier says it does."""
    parts: list[tuple[str, float, Verifier]] = []
    for i, entry in enumerate(entries):
        where = f"verifier {i}"
        if isinstance(entry, str):
            entry = {"verifier": entry}
        if not isinstance(entry, Mapping) or "verifier" not in entry:
            raise error.InvalidSpec(
                f"{where}: each of several verifiers is a mapping with 'verifier' (and 'weight', "
                "'options', 'name')"
            )
        for key in entry:
            if key not in _RUBRIC_KEYS:
                close = difflib.get_close_matches(str(key), _RUBRIC_KEYS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise error.InvalidSpec(f"{where}: unknown key {key!r}{hint}")
        weight = entry.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise error.InvalidSpec(f"{where}: weight must be a number >= 0, actual: {weight!r}")
        options = entry.get("options") or {}
        if not isinstance(options, Mapping):
            raise error.InvalidSpec(f"{where}: options must be a mapping, actual: {options!r}")
        target = entry["verifier"]
        name = str(entry.get("name") or (target if isinstance(target, str) else f"v{i}"))
        if any(name == p[0] for p in parts):
            raise error.InvalidSpec(f"{where}: two verifiers are named {name!r}; set 'name'")
        try:
            fn = get_verifier(target, **dict(options))
        except error.Error as e:
            raise error.InvalidSpec(f"{where}: {e}") from None
        parts.append((name, float(weight), fn))
    if not parts:
        raise error.InvalidSpec("a list of verifiers needs at least one")

    def combined(response: str, gold: Any) -> RewardResult:
        results = [(name, w, safe_verify(fn, response, gold)) for name, w, fn in parts]
        components = {name: w * r.score for name, w, r in results}
        feedback = "; ".join(f"{name}: {r.feedback}" for name, _, r in results if r.feedback)
        return RewardResult(
            sum(components.values()), components, feedback, all(r.success for *_, r in results)
        )

    return combined, sum(w for _, w, _ in parts)


def _require_answers(source: TaskSource) -> None:
    """Every task of a dataset has a gold answer (a verifier compares against it)."""
    try:
        tasks = list(source)  # type: ignore[call-overload]
    except TypeError:
        return
    missing = [t.id for t in tasks if t.answer is None]
    if missing:
        raise error.InvalidSpec(
            f"{len(missing)} task(s) have no answer (e.g. {', '.join(missing[:3])}): a verifier "
            "would compare replies with nothing. Give each task an 'answer', or declare "
            "answer_required: false for a verifier that needs no gold."
        )


def _check_extract(how: str | None) -> None:
    try:
        extract("", how)
    except ValueError as e:
        raise error.InvalidSpec(str(e)) from None
    except ImportError:
        pass
