"""DeclarativeEnv: an environment from tasks, a named verifier and a prompt template, no class needed."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.core import LLMEnv, Message
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
    The verifier's score, in ``reward_range`` (default ``(0, 1)``).

    ## Starting State
    A task drawn from the task list with the env's ``np_random`` (or chosen by
    ``options={"task_id": ...}``).

    ## Episode End
    Terminates after one step.

    ## Arguments
    ``tasks`` (JSONL path, TaskSource or list), ``verifier``, ``verifier_options``,
    ``extract`` (``None``, ``"answer_tag"``, ``"answer_line"``, ``"last_line"``, ``"boxed"``,
    ``"regex:<pattern>"``), ``prompt_template``, ``system_prompt``, ``domain``,
    ``reward_range``.

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
        verifier: str | Verifier = "exact",
        *,
        verifier_options: Mapping[str, Any] | None = None,
        extract: str | None = None,
        prompt_template: str | None = None,
        domain: str = "custom",
        reward_range: tuple[float, float] = (0.0, 1.0),
        **kwargs: Any,
    ):
        self.domain = domain  # type: ignore[misc]
        self.reward_range = (float(reward_range[0]), float(reward_range[1]))
        self.verifier: Verifier = get_verifier(verifier, **dict(verifier_options or {}))
        self.extract_how = extract
        _check_extract(extract)
        self.prompt_template = prompt_template
        super().__init__(load_tasks(tasks, domain=domain), **kwargs)

    def render_prompt(self, task: Task) -> str:
        if self.prompt_template is None:
            return task.prompt
        return render_template(self.prompt_template, task)

    def grade(self, task: Task, message: Message) -> RewardResult:
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

    def oracle(self, task: Task) -> str:
        reference = task.metadata.get("reference")
        if reference is not None:
            return str(reference)
        return wrap_for(self.extract_how, str(task.answer))


def _check_extract(how: str | None) -> None:
    try:
        extract("", how)
    except ValueError as e:
        raise error.InvalidSpec(str(e)) from None
    except ImportError:
        pass
