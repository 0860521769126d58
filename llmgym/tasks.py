"""Tasks, subtasks and the sources they come from (procedural families and datasets).

A :class:`Task` is frozen and JSON-serializable. A procedural task is rebuilt from its id
alone: the id names the family, the difficulty and an index, and the generator draws from
``random.Random(stable_seed(domain, family, difficulty, index))``, so the same id gives the
same task in any process, whatever ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmgym import error

Difficulty = float | tuple[float, float] | None
"""A fixed difficulty in [0, 1], a range to draw from uniformly, or None (the whole range)."""


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from the ``str`` of each part; identical in every process and platform.

    >>> stable_seed("math", "add", "0.50", 7) == stable_seed("math", "add", "0.50", 7)
    True
    """
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _check_json(value: Any, where: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise error.InvalidTask(f"{where} must be JSON-serializable: {e}") from None


@dataclass(frozen=True)
class Subtask:
    """One node of a task's subtask DAG, graded on its own (a process reward).

    ``verifier`` names an entry of the verifier table (``llmgym.rewards.list_verifiers()``);
    ``answer`` is its gold; ``depends_on`` lists the ids of subtasks that come first.
    """

    id: str
    prompt: str
    answer: Any = None
    verifier: str = "exact"
    weight: float = 1.0
    depends_on: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise error.InvalidTask(f"Subtask id must be a non-empty str, actual: {self.id!r}")
        if not isinstance(self.prompt, str):
            raise error.InvalidTask(f"Subtask {self.id!r}: prompt must be a str")
        if not isinstance(self.verifier, str):
            raise error.InvalidTask(f"Subtask {self.id!r}: verifier must be a verifier name")
        weight = float(self.weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise error.InvalidTask(f"Subtask {self.id!r}: weight must be finite and >= 0")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "depends_on", tuple(self.depends_on))
        object.__setattr__(self, "metadata", dict(self.metadata))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Subtask:
        return cls(**_known_fields(cls, data, "subtask"))


@dataclass(frozen=True)
class Task:
    """One problem: a prompt, its gold ``answer`` and what is needed to grade it.

    >>> t = Task(id="add:0.10:3", prompt="What is 2+2?", answer="4", domain="math")
    >>> Task.from_json(t.to_json()) == t
    True
    """

    id: str
    prompt: str
    answer: Any = None
    domain: str = "generic"
    family: str = "default"
    difficulty: float = 0.0
    subtasks: tuple[Subtask, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise error.InvalidTask(f"Task id must be a str, actual type: {type(self.id).__name__}")
        if not isinstance(self.prompt, str):
            raise error.InvalidTask(f"Task {self.id!r}: prompt must be a str")
        for name in ("domain", "family"):
            if not isinstance(getattr(self, name), str):
                raise error.InvalidTask(f"Task {self.id!r}: {name} must be a str")
        try:
            difficulty = float(self.difficulty)
        except (TypeError, ValueError):
            raise error.InvalidTask(f"Task {self.id!r}: difficulty must be a number") from None
        if not 0.0 <= difficulty <= 1.0:
            raise error.InvalidTask(f"Task {self.id!r}: difficulty must lie in [0, 1]")
        object.__setattr__(self, "difficulty", difficulty)
        subtasks = tuple(
            s if isinstance(s, Subtask) else Subtask.from_dict(s) for s in self.subtasks
        )
        object.__setattr__(self, "subtasks", subtasks)
        object.__setattr__(self, "metadata", dict(self.metadata))
        _topological(subtasks, self.id)  # rejects duplicates, unknown deps and cycles

    def subtask_order(self) -> list[Subtask]:
        """Subtasks in dependency order (ties keep their listed order)."""
        return _topological(self.subtasks, self.id)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (lists, not tuples) that ``from_dict`` turns back into this task."""
        data = asdict(self)
        data["subtasks"] = [dict(s, depends_on=list(s["depends_on"])) for s in data["subtasks"]]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        if not isinstance(data, Mapping):
            raise error.InvalidTask(f"Expects a task as a dict, actual type: {type(data).__name__}")
        kwargs = _known_fields(cls, data, "task")
        kwargs["subtasks"] = tuple(kwargs.get("subtasks") or ())
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> Task:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise error.InvalidTask(f"Task JSON does not parse: {e}") from None
        return cls.from_dict(data)


def _known_fields(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise error.InvalidTask(
            f"Unknown {what} field(s) {unknown}; expected some of {sorted(names)}"
        )
    missing = [n for n in ("id", "prompt") if n not in data]
    if missing:
        raise error.InvalidTask(f"A {what} needs the field(s) {missing}")
    return dict(data)


def _topological(subtasks: Sequence[Subtask], task_id: str) -> list[Subtask]:
    by_id: dict[str, Subtask] = {}
    for s in subtasks:
        if s.id in by_id:
            raise error.InvalidTask(f"Task {task_id!r}: duplicate subtask id {s.id!r}")
        by_id[s.id] = s
    for s in subtasks:
        for dep in s.depends_on:
            if dep not in by_id:
                raise error.InvalidTask(
                    f"Task {task_id!r}: subtask {s.id!r} depends on unknown {dep!r}"
                )
    order: list[Subtask] = []
    done: set[str] = set()
    for s in subtasks:  # the common case, each listed after its dependencies: the listed order
        if not all(d in done for d in s.depends_on):
            break
        done.add(s.id)
    else:
        return list(subtasks)
    done.clear()
    pending = list(subtasks)
    while pending:
        ready = [s for s in pending if all(d in done for d in s.depends_on)]
        if not ready:
            raise error.InvalidTask(f"Task {task_id!r}: subtask dependencies form a cycle")
        first = ready[0]
        order.append(first)
        done.add(first.id)
        pending.remove(first)
    return order


# --- sources -------------------------------------------------------------------------------


class TaskSource(ABC):
    """Where an environment's tasks come from."""

    domain: str = "generic"

    @abstractmethod
    def sample(
        self,
        rng: np.random.Generator,
        *,
        difficulty: Difficulty = None,
        family: str | None = None,
    ) -> Task:
        """Draw one task with ``rng`` (the env's own ``np_random``)."""

    @abstractmethod
    def get(self, task_id: str) -> Task:
        """The task with this id, rebuilt or looked up; :class:`llmgym.error.UnknownTask` if none."""

    @abstractmethod
    def families(self) -> list[str]:
        """The family names this source can draw from."""

    def iter_tasks(
        self,
        n: int | None,
        *,
        seed: int = 0,
        difficulty: Difficulty = None,
        family: str | None = None,
        unique: bool = False,
    ) -> Iterator[Task]:
        """``n`` tasks drawn from a generator seeded with ``seed`` (what ``llmgym export``
        writes). ``unique``: no task twice (a procedural source draws until ``n`` distinct ids,
        giving up after ``20 * n`` draws); ``n=None`` means every task of a dataset."""
        if n is None:
            raise error.Error(f"{type(self).__name__} has no fixed set of tasks: give n")
        rng = np.random.default_rng(seed)
        if not unique:
            for _ in range(n):
                yield self.sample(rng, difficulty=difficulty, family=family)
            return
        seen: set[str] = set()
        for _ in range(20 * n):
            if len(seen) >= n:
                return
            task = self.sample(rng, difficulty=difficulty, family=family)
            if task.id not in seen:
                seen.add(task.id)
                yield task


def _draw_difficulty(rng: np.random.Generator, difficulty: Difficulty) -> float:
    if difficulty is None:
        lo, hi = 0.0, 1.0
    elif isinstance(difficulty, (int, float)):
        lo = hi = float(difficulty)
    else:
        try:
            lo, hi = (float(x) for x in difficulty)
        except (TypeError, ValueError):
            raise error.Error(
                f"Expects difficulty as a number in [0, 1] or a (low, high) pair, actual: {difficulty!r}"
            ) from None
    if not (0.0 <= lo <= hi <= 1.0):
        raise error.Error(f"Expects 0 <= difficulty <= 1 (low <= high), actual: {difficulty!r}")
    value = lo if lo == hi else float(rng.uniform(lo, hi))
    return round(value, 2)


@dataclass(frozen=True)
class Family:
    """A procedural task family: ``generate(rng, difficulty)`` builds one task.

    The generator only fills ``prompt``, ``answer``, ``subtasks`` and ``metadata``; the
    source sets ``id``, ``domain``, ``family`` and ``difficulty``. It must draw every random
    choice from ``rng`` so that an item is rebuilt exactly from its seed.
    """

    name: str
    generate: Callable[[random.Random, float], Task]
    description: str = ""
    weight: float = 1.0
    has_subtasks: bool = False

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name or self.name != self.name.strip():
            raise ValueError(f"Family names are non-empty and have no ':', actual: {self.name!r}")


def select_families(
    catalogue: Sequence[Any], patterns: str | Sequence[str] | None, what: str = "family"
) -> list[Any]:
    """The families of ``catalogue`` (anything with a ``name``) whose names match any of the
    glob ``patterns`` (all of them for None), in catalogue order; none matching is an
    :class:`~llmgym.error.UnknownFamily` naming the closest name and every one."""
    if patterns is None:
        return list(catalogue)
    if isinstance(patterns, str):
        patterns = [patterns]
    chosen = [f for f in catalogue if any(fnmatch.fnmatchcase(f.name, p) for p in patterns)]
    if not chosen:
        names = [f.name for f in catalogue]
        hint = error.did_you_mean(str(patterns[0]), names) if patterns else ""
        raise error.UnknownFamily(f"No {what} matches {list(patterns)}{hint}; available: {names}")
    return chosen


def draft(prompt: str, answer: Any = None, **fields: Any) -> Task:
    """A task under construction inside a family generator (the source fills in the id)."""
    return Task(id="", prompt=prompt, answer=answer, **fields)


class ProceduralSource(TaskSource):
    """Tasks generated on the fly by families; task ids are ``"<family>:<difficulty>:<index>"``."""

    def __init__(self, families: Iterable[Family], *, domain: str):
        self.domain = domain
        self._families = {f.name: f for f in families}
        if not self._families:
            raise error.Error(f"A procedural source for {domain!r} needs at least one family")
        self._names = sorted(self._families)
        weights = np.array([self._families[n].weight for n in self._names], dtype=float)
        # rng.choice(n, p=weights)'s own draw (one rng.random() looked up in the normalized
        # cumulative sum), without its ~20 us of checks on p per call: the same family for the
        # same rng state (tests/test_tasks.py holds the two equal)
        self._cdf = (weights / weights.sum()).cumsum()
        self._cdf /= self._cdf[-1]

    def families(self) -> list[str]:
        return list(self._names)

    def family(self, name: str) -> Family:
        try:
            return self._families[name]
        except KeyError:
            raise error.UnknownFamily(
                f"No family {name!r} in {self.domain!r}; available: {self._names}"
            ) from None

    def sample(
        self,
        rng: np.random.Generator,
        *,
        difficulty: Difficulty = None,
        family: str | None = None,
    ) -> Task:
        name = (
            family
            if family is not None
            else self._names[int(self._cdf.searchsorted(rng.random(), side="right"))]
        )
        self.family(name)
        level = _draw_difficulty(rng, difficulty)
        index = int(rng.integers(0, 2**31 - 1))
        return self.build(name, level, index)

    def build(self, family: str, difficulty: float, index: int) -> Task:
        """Rebuild item ``index`` of ``family`` at ``difficulty`` (rounded to 2 decimals)."""
        fam = self.family(family)
        level = f"{round(float(difficulty), 2):.2f}"
        rng = random.Random(stable_seed(self.domain, family, level, index))
        task = fam.generate(rng, float(level))
        return replace(
            task,
            id=f"{family}:{level}:{index}",
            domain=self.domain,
            family=family,
            difficulty=float(level),
        )

    def get(self, task_id: str) -> Task:
        parts = task_id.rsplit(":", 2) if isinstance(task_id, str) else []
        try:
            family, level, index = parts
            difficulty, idx = float(level), int(index)
        except ValueError:
            raise error.UnknownTask(
                f"Expects a procedural task id '<family>:<difficulty>:<index>', actual: {task_id!r}"
            ) from None
        if not 0.0 <= difficulty <= 1.0 or idx < 0:
            raise error.UnknownTask(f"Task id {task_id!r} is out of range")
        return self.build(family, difficulty, idx)


class DatasetSource(TaskSource):
    """A fixed list of tasks: JSONL in llmgym's schema, any records plus a converter, or a
    Hugging Face ``datasets.Dataset``.

    ``difficulty`` picks among the tasks whose difficulty is closest to the one asked for.
    """

    def __init__(self, tasks: Iterable[Task], *, domain: str | None = None):
        self._tasks = list(tasks)
        if not self._tasks:
            raise error.InvalidTask("A dataset source needs at least one task")
        self._by_id: dict[str, int] = {}
        for i, t in enumerate(self._tasks):
            if not isinstance(t, Task):
                raise error.InvalidTask(f"Expects Task items, actual type: {type(t).__name__}")
            if t.id in self._by_id:
                raise error.InvalidTask(f"Duplicate task id {t.id!r} in dataset")
            self._by_id[t.id] = i
        self.domain = domain or self._tasks[0].domain

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def families(self) -> list[str]:
        return sorted({t.family for t in self._tasks})

    def iter_tasks(
        self,
        n: int | None,
        *,
        seed: int = 0,
        difficulty: Difficulty = None,
        family: str | None = None,
        unique: bool = False,
    ) -> Iterator[Task]:
        """As :meth:`TaskSource.iter_tasks`; ``unique`` (or ``n=None``) walks a permutation of
        the tasks (of ``family``), each once, ``n`` of them at most: a 6-task dataset exports
        6 tasks, never one twice and another not at all."""
        if not unique and n is not None:
            yield from super().iter_tasks(n, seed=seed, difficulty=difficulty, family=family)
            return
        pool = self._tasks
        if family is not None:
            pool = [t for t in pool if t.family == family]
            if not pool:
                raise error.UnknownFamily(
                    f"No family {family!r} in this dataset; available: {self.families()}"
                )
        order = [int(i) for i in np.random.default_rng(seed).permutation(len(pool))]
        if difficulty is not None:  # the closest difficulties first, each task still once
            target = _draw_difficulty(np.random.default_rng(seed), difficulty)
            order.sort(key=lambda i: abs(pool[i].difficulty - target))
        for i in order[: len(pool) if n is None else n]:
            yield pool[i]

    def get(self, task_id: str) -> Task:
        try:
            return self._tasks[self._by_id[task_id]]
        except (KeyError, TypeError):
            raise error.UnknownTask(f"No task with id {task_id!r} in this dataset") from None

    def sample(
        self,
        rng: np.random.Generator,
        *,
        difficulty: Difficulty = None,
        family: str | None = None,
    ) -> Task:
        pool = self._tasks
        if family is not None:
            pool = [t for t in pool if t.family == family]
            if not pool:
                raise error.UnknownFamily(
                    f"No family {family!r} in this dataset; available: {self.families()}"
                )
        if difficulty is not None:
            target = _draw_difficulty(rng, difficulty)
            best = min(abs(t.difficulty - target) for t in pool)
            pool = [t for t in pool if abs(t.difficulty - target) == best]
        return pool[int(rng.integers(len(pool)))]

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any] | Task],
        *,
        converter: Callable[[Mapping[str, Any], int], Task] | None = None,
        domain: str | None = None,
        name: str = "dataset",
    ) -> DatasetSource:
        """Tasks from dict records, in llmgym's schema or through ``converter(record, index)``
        (``Task`` items are taken as they are).

        Records in llmgym's schema without an ``id`` get ``"<name>-<index>"``.
        """
        tasks = []
        for i, record in enumerate(records):
            task: Task
            if isinstance(record, Task):
                task = record
            elif converter is not None:
                try:
                    task = converter(record, i)
                except error.Error:
                    raise
                except Exception as e:
                    raise error.InvalidTask(f"{name}: record {i} cannot be converted: {e!r}") from e
            else:
                if not isinstance(record, Mapping):
                    raise error.InvalidTask(f"{name}: record {i} is not a JSON object")
                data = dict(record)
                data.setdefault("id", f"{name}-{i}")
                if domain is not None:
                    data.setdefault("domain", domain)
                try:
                    task = Task.from_dict(data)
                except error.InvalidTask as e:
                    raise error.InvalidTask(f"{name}: record {i}: {e}") from None
            _check_json(task.answer, f"{name}: record {i} answer")
            tasks.append(task)
        return cls(tasks, domain=domain)

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        *,
        converter: Callable[[Mapping[str, Any], int], Task] | None = None,
        domain: str | None = None,
    ) -> DatasetSource:
        """Tasks from a JSONL file (blank lines skipped; errors name the line)."""
        return cls.from_records(
            read_jsonl(path), converter=converter, domain=domain, name=Path(path).stem
        )

    @classmethod
    def from_hf(
        cls,
        dataset: Any,
        *,
        converter: Callable[[Mapping[str, Any], int], Task] | None = None,
        domain: str | None = None,
        name: str = "hf",
    ) -> DatasetSource:
        """Tasks from a Hugging Face ``datasets.Dataset`` (each row a dict)."""
        try:
            import datasets
        except ImportError:
            raise error.DependencyNotInstalled(
                "Hugging Face datasets are not installed; pip install 'llmgym[agents]'"
            ) from None
        if not isinstance(dataset, datasets.Dataset):
            raise error.InvalidTask(
                f"Expects a datasets.Dataset, actual type: {type(dataset).__name__}"
            )
        return cls.from_records(iter(dataset), converter=converter, domain=domain, name=name)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file (gzip-compressed when its name ends in ``.gz``, as
    HumanEval ships); a bad line raises InvalidTask naming it."""
    path = Path(path)
    if not path.is_file():
        raise error.InvalidTask(f"No such JSONL file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise error.InvalidTask(f"{path}:{lineno}: not valid JSON: {e.msg}") from None
            if not isinstance(record, dict):
                raise error.InvalidTask(f"{path}:{lineno}: expects a JSON object per line")
            yield record
