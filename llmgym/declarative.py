"""DeclarativeEnv: an environment from tasks, a named verifier and a prompt template, no class
needed; ``register_task_env`` and ``load_spec`` (YAML/TOML spec files) register one."""

from __future__ import annotations

import difflib
import string
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from llmgym import error
from llmgym.answers import extract, wrap_for
from llmgym.core import Episode, LLMEnv, Message, Turn
from llmgym.registry import register
from llmgym.tasks import DatasetSource, Task, TaskSource
from llmgym.verifiers import RewardResult, Verifier, get_verifier, safe_verify

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
    path, a callable, or a list of ``{"verifier", "weight", "options", "name", "gate"}`` combined
    as a weighted rubric; a ``gate: true`` verifier that fails zeroes the reward, as a safety
    check should; ``requires: <name>`` pays a verifier only when the named one succeeds),
    ``verifier_options`` (checked against the verifier's signature),
    ``extract`` (``None``, ``"answer_tag"``, ``"answer_line"``, ``"last_line"``, ``"boxed"``,
    ``"regex:<pattern>"``), ``prompt_template``, ``system_prompt``, ``domain``,
    ``reward_range``, ``max_turns``, ``answer_required`` (default True: every task must have
    an ``answer``; False for a verifier that needs no gold), and the core's ``reward_model`` and
    ``judge`` (extra terms mixed in by the rule of :mod:`llmgym.rewards.mixing`).

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
            one = cast("str | Verifier", verifier)  # anything else: get_verifier says what it takes
            self.verifier, top = get_verifier(one, **dict(verifier_options or {})), 1.0
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


_RUBRIC_KEYS = ("verifier", "weight", "options", "name", "gate", "requires")


def _rubric(entries: Sequence[Any]) -> tuple[Verifier, float]:
    """A verifier that runs several, each weighted (``[{"verifier", "weight", "options",
    "name", "gate"}]``), and the highest score it can give. Components are each verifier's
    weighted score under its name; the answer succeeds when every verifier says it does; when a
    verifier marked ``gate`` fails, the reward is 0 whatever the others gave; a verifier that
    ``requires`` another counts only when that one succeeds (style credit for code that works,
    never for an empty answer)."""
    parts: list[tuple[str, float, Verifier]] = []
    gates: set[str] = set()
    requires: dict[str, str] = {}
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
                hint = error.did_you_mean(str(key), _RUBRIC_KEYS)
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
        gate = entry.get("gate", False)
        if not isinstance(gate, bool):
            raise error.InvalidSpec(f"{where}: gate must be true or false, actual: {gate!r}")
        if gate:
            gates.add(name)
        if entry.get("requires") is not None:
            requires[name] = str(entry["requires"])
        parts.append((name, float(weight), fn))
    if not parts:
        raise error.InvalidSpec("a list of verifiers needs at least one")
    names = [p[0] for p in parts]
    for name, needed in requires.items():
        if needed not in names or needed == name:
            hint = error.did_you_mean(needed, names)
            raise error.InvalidSpec(
                f"verifier {name!r} requires {needed!r}, not another verifier's name{hint}"
            )

    def combined(response: str, gold: Any) -> RewardResult:
        results = [(name, w, safe_verify(fn, response, gold)) for name, w, fn in parts]
        succeeded = {name for name, _, r in results if r.success}
        unpaid = {name for name, needed in requires.items() if needed not in succeeded}
        components = {name: 0.0 if name in unpaid else w * r.score for name, w, r in results}
        feedback = "; ".join(f"{name}: {r.feedback}" for name, _, r in results if r.feedback)
        gated = [name for name, _, r in results if name in gates and not r.success]
        total = 0.0 if gated else sum(components.values())
        if gated:
            feedback = f"failed {', '.join(gated)}: reward 0; " + feedback
        return RewardResult(total, components, feedback, all(r.success for *_, r in results))

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


# --- declarative envs ------------------------------------------------------------------------

_SPEC_KEYS = {
    "id",
    "tasks",
    "verifier",
    "verifier_options",
    "extract",
    "prompt_template",
    "system_prompt",
    "domain",
    "reward_range",
    "max_turns",
    "description",
    "answer_required",
    "reward_model",
    "judge",
}


def register_task_env(
    id: str,
    tasks: Any,
    verifier: Any = "exact",
    *,
    verifier_options: Mapping[str, Any] | None = None,
    extract: str | None = None,
    prompt_template: str | None = None,
    system_prompt: str | None = None,
    domain: str = "custom",
    reward_range: tuple[float, float] | None = None,
    max_turns: int = 1,
    description: str = "",
    answer_required: bool = True,
    reward_model: Any = None,
    judge: Any = None,
    overwrite: bool = False,
) -> str:
    """Register an env from tasks (JSONL path or list), a verifier and a prompt template.

    Everything is checked now (the tasks load and each has an answer, the verifier exists
    and takes the options given, the template fills), so a bad spec fails at registration,
    not in the middle of training. ``verifier`` may be a list of weighted verifiers
    (``[{"verifier": "exact", "weight": 0.8}, ...]``); ``max_turns`` > 1 gives a wrong answer
    the verifier's feedback and another try. ``reward_model`` and ``judge`` add the core's
    extra reward terms (a path or mapping, and a mapping with ``url`` and ``model``).
    """
    if not isinstance(id, str):
        raise error.InvalidSpec(f"Expects the env id as a str, actual type: {type(id).__name__}")
    try:
        parse_env_id(id)
    except gym.error.Error as e:
        raise error.InvalidSpec(f"Bad env id {id!r}: {e}. Use 'namespace/Name-v0'.") from None
    if id in gym.registry and not overwrite:
        raise error.InvalidSpec(f"{id!r} is already registered; pass overwrite=True to replace it")
    if isinstance(tasks, (str, Path)):
        tasks = str(Path(tasks).resolve())
    if reward_range is not None:
        try:
            lo, hi = (float(x) for x in reward_range)
        except (TypeError, ValueError):
            raise error.InvalidSpec(
                f"reward_range must be two numbers, actual: {reward_range!r}"
            ) from None
        reward_range = (lo, hi)
    kwargs: dict[str, Any] = {
        "tasks": tasks,
        "verifier": verifier,
        "verifier_options": dict(verifier_options or {}),
        "extract": extract,
        "prompt_template": prompt_template,
        "system_prompt": system_prompt,
        "domain": domain,
        "reward_range": reward_range,
        "max_turns": max_turns,
        "answer_required": answer_required,
    }
    for key, value in (("reward_model", reward_model), ("judge", judge)):
        if value is not None:
            kwargs[key] = value
    env = DeclarativeEnv(**kwargs)  # validates tasks, verifier, extraction
    if prompt_template is not None:
        for task in env.source.iter_tasks(1):
            render_template(prompt_template, task)
    if id in gym.registry:
        del gym.registry[id]
    register(id, "llmgym.declarative:DeclarativeEnv", kwargs=kwargs)
    gym.registry[id].description = description  # type: ignore[attr-defined]
    return id


def _import_beside(folder: Path, verifier: Any) -> None:
    """Make a ``"module:function"`` verifier whose module sits beside the spec file importable
    (its folder joins ``sys.path``), so a spec and its Python verifier travel together."""
    targets = verifier if isinstance(verifier, list) else [verifier]
    for target in targets:
        if isinstance(target, Mapping):
            target = target.get("verifier")
        if not isinstance(target, str) or ":" not in target:
            continue
        root = target.partition(":")[0].split(".")[0]
        if (folder / f"{root}.py").is_file() or (folder / root / "__init__.py").is_file():
            where = str(folder.resolve())
            if where not in sys.path:
                sys.path.insert(0, where)


def _model_beside(folder: Path, spec: Any) -> Any:
    """A reward model named by a path relative to the spec file, made absolute (a mapping's
    ``model`` too); a hub id or an absolute path is left as it is."""
    if isinstance(spec, Mapping) and isinstance(spec.get("model"), str):
        return {**spec, "model": _model_beside(folder, spec["model"])}
    if isinstance(spec, str) and (folder / spec).exists():
        return str((folder / spec).resolve())
    return spec


def load_spec(path: str | Path, *, overwrite: bool = False) -> list[str]:
    """Register the env(s) of a YAML or TOML spec file; returns their ids.

    The file holds one env (``id``, ``tasks``, ``verifier`` ...) or ``envs: [...]``. A
    relative ``tasks`` path is taken from the spec file's folder, and a ``"module:function"``
    verifier whose module file sits in that folder is imported from there (no PYTHONPATH).
    """
    path = Path(path)
    if not path.is_file():
        raise error.InvalidSpec(f"No such spec file: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            raise error.InvalidSpec(f"Expects a .yaml, .yml or .toml spec, actual: {path.name}")
    except error.InvalidSpec:
        raise
    except Exception as e:
        raise error.InvalidSpec(f"{path}: cannot parse: {e}") from None
    if not isinstance(data, Mapping):
        raise error.InvalidSpec(f"{path}: expects a mapping at the top level")
    specs = data.get("envs", [data]) if "envs" in data else [data]
    if not isinstance(specs, list) or not specs:
        raise error.InvalidSpec(f"{path}: 'envs' must be a non-empty list")
    ids = []
    for i, spec in enumerate(specs):
        where = f"{path} (env {i})"
        if not isinstance(spec, Mapping):
            raise error.InvalidSpec(f"{where}: each env is a mapping")
        unknown = sorted(set(map(str, spec)) - _SPEC_KEYS)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(_SPEC_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise error.InvalidSpec(
                f"{where}: unknown key(s) {unknown}{hint}; expected {sorted(_SPEC_KEYS)}"
            )
        for key in ("id", "tasks"):
            if key not in spec:
                raise error.InvalidSpec(f"{where}: missing {key!r}")
        spec = dict(spec)
        tasks = spec.pop("tasks")
        if isinstance(tasks, str):
            tasks = path.parent / tasks
        _import_beside(path.parent, spec.get("verifier"))
        if "reward_model" in spec:
            spec["reward_model"] = _model_beside(path.parent, spec["reward_model"])
        try:
            ids.append(register_task_env(spec.pop("id"), tasks, overwrite=overwrite, **spec))
        except error.Error as e:
            raise type(e)(f"{where}: {e}") from None
        except TypeError as e:
            raise error.InvalidSpec(f"{where}: {e}") from None
    return ids
