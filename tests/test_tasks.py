"""Tasks, subtasks and task sources: serialization, validation, rebuilding, datasets."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgym import error
from llmgym.tasks import DatasetSource, Family, ProceduralSource, Subtask, Task, draft, stable_seed


def make_family(name: str) -> Family:
    def generate(rng: random.Random, difficulty: float) -> Task:
        n = 1 + int(difficulty * 100)
        a, b = rng.randint(0, n), rng.randint(0, n)
        return draft(f"{a} + {b} = ?", str(a + b), metadata={"a": a, "b": b})

    return Family(name, generate)


SOURCE = ProceduralSource([make_family("add"), make_family("plus")], domain="toy")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    prompt=st.text(),
    answer=json_values,
    difficulty=st.floats(0, 1),
    metadata=st.dictionaries(st.text(), json_values, max_size=3),
)
def test_task_json_round_trip(prompt, answer, difficulty, metadata):
    task = Task(id="t", prompt=prompt, answer=answer, difficulty=difficulty, metadata=metadata)
    again = Task.from_json(task.to_json())
    assert again.to_dict() == json.loads(task.to_json())
    assert again.prompt == prompt and again.difficulty == difficulty


def test_task_validation_names_the_problem():
    with pytest.raises(error.InvalidTask, match="difficulty"):
        Task(id="t", prompt="p", difficulty=1.5)
    with pytest.raises(error.InvalidTask, match="prompt"):
        Task(id="t", prompt=None)  # type: ignore[arg-type]
    with pytest.raises(error.InvalidTask, match="Unknown task field"):
        Task.from_dict({"id": "t", "prompt": "p", "gold": 1})
    with pytest.raises(error.InvalidTask, match="needs the field"):
        Task.from_dict({"prompt": "p"})
    with pytest.raises(error.InvalidTask, match="dict"):
        Task.from_dict(["id", "prompt"])  # type: ignore[arg-type]
    with pytest.raises(error.InvalidTask, match="does not parse"):
        Task.from_json("{not json")
    with pytest.raises(error.InvalidTask, match="weight"):
        Subtask("s", "p", weight=float("nan"))


def test_subtask_dag_order_and_errors():
    t = Task(
        id="t",
        prompt="p",
        subtasks=(
            {"id": "c", "prompt": "c", "depends_on": ["a", "b"]},
            {"id": "a", "prompt": "a"},
            {"id": "b", "prompt": "b", "depends_on": ["a"]},
        ),
    )
    assert [s.id for s in t.subtask_order()] == ["a", "b", "c"]
    with pytest.raises(error.InvalidTask, match="cycle"):
        Task(
            id="t",
            prompt="p",
            subtasks=(
                {"id": "a", "prompt": "", "depends_on": ["b"]},
                {"id": "b", "prompt": "", "depends_on": ["a"]},
            ),
        )
    with pytest.raises(error.InvalidTask, match="unknown"):
        Task(id="t", prompt="p", subtasks=({"id": "a", "prompt": "", "depends_on": ["z"]},))
    with pytest.raises(error.InvalidTask, match="duplicate"):
        Task(id="t", prompt="p", subtasks=({"id": "a", "prompt": ""}, {"id": "a", "prompt": ""}))


@given(
    deps=st.lists(st.sets(st.integers(0, 7), max_size=3), min_size=1, max_size=8),
    perm_seed=st.integers(0, 1000),
)
def test_subtask_order_is_the_first_ready_in_listed_order(deps, perm_seed):
    """Whatever the listing, the order is: repeatedly, the first listed subtask whose
    dependencies are done (a DAG: subtask i depends only on lower numbers)."""
    n = len(deps)
    listed = list(range(n))
    random.Random(perm_seed).shuffle(listed)
    subtasks = tuple(
        {"id": f"s{i}", "prompt": "", "depends_on": sorted(f"s{d}" for d in deps[i] if d < i)}
        for i in listed
    )
    got = [s.id for s in Task(id="t", prompt="p", subtasks=subtasks).subtask_order()]
    want, done, pending = [], set(), list(subtasks)
    while pending:
        first = next(s for s in pending if set(s["depends_on"]) <= done)
        want.append(first["id"])
        done.add(first["id"])
        pending.remove(first)
    assert got == want


def test_procedural_items_rebuild_from_their_id():
    rng = np.random.default_rng(5)
    for _ in range(50):
        task = SOURCE.sample(rng)
        assert SOURCE.get(task.id) == task
        family, level, index = task.id.split(":")
        assert task.family == family and task.difficulty == float(level)
    assert SOURCE.sample(rng, difficulty=0.333).difficulty == 0.33
    assert {SOURCE.sample(rng, family="plus").family for _ in range(5)} == {"plus"}
    assert 0.2 <= SOURCE.sample(rng, difficulty=(0.2, 0.4)).difficulty <= 0.4


@given(
    weights=st.lists(st.floats(0.01, 100), min_size=1, max_size=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_family_draw_is_numpys_weighted_choice(weights, seed):
    """The source draws a family exactly as ``rng.choice(n, p=weights)`` would (the same family
    and the same rng state after), so seeded task streams are what they were with it."""
    families = [Family(f"f{i}", make_family("x").generate, weight=w) for i, w in enumerate(weights)]
    source = ProceduralSource(families, domain="toy")
    p = np.array([f.weight for f in sorted(families, key=lambda f: f.name)])
    ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(20):
        name = source.sample(ours).family
        want = sorted(f.name for f in families)[int(numpys.choice(len(p), p=p / p.sum()))]
        numpys.uniform(0.0, 1.0), numpys.integers(0, 2**31 - 1)  # the level and index draws
        assert name == want


@pytest.mark.parametrize("bad", ["add", "add:x:1", "add:0.5:-3", "add:2.0:1", "nope:0.5:1", 7])
def test_procedural_bad_ids(bad):
    with pytest.raises((error.UnknownTask, error.UnknownFamily)):
        SOURCE.get(bad)


def test_family_names_are_checked():
    with pytest.raises(ValueError):
        Family("a:b", make_family("x").generate)


def _ids_in_subprocess(hashseed: str) -> list[str]:
    code = (
        "import json, numpy as np, sys; sys.path.insert(0, 'tests');"
        "from test_tasks import SOURCE;"
        "rng = np.random.default_rng(11);"
        "print(json.dumps([SOURCE.sample(rng).to_json() for _ in range(20)]))"
    )
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout)


def test_tasks_are_identical_across_processes_and_hash_seeds():
    assert _ids_in_subprocess("0") == _ids_in_subprocess("12345") == _ids_in_subprocess("random")


def test_stable_seed_is_a_fixed_function():
    assert stable_seed("math", "add", "0.50", 7) == stable_seed("math", "add", "0.50", 7)
    assert stable_seed("a", "bc") != stable_seed("ab", "c")
    assert stable_seed("x") == 2697552496229297191  # pinned: a change breaks every task id


def test_dataset_from_jsonl(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [
        {"prompt": "1+1?", "answer": "2"},
        {"id": "b", "prompt": "2+2?", "answer": "4", "difficulty": 0.9},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    source = DatasetSource.from_jsonl(path)
    assert [t.id for t in source] == ["qa-0", "b"]
    assert source.get("b").answer == "4"
    assert source.sample(np.random.default_rng(0), difficulty=1.0).id == "b"


@pytest.mark.parametrize(
    "content, match",
    [
        ('{"prompt": "x"}\n{bad json\n', "qa.jsonl:2: not valid JSON"),
        ("[1, 2]\n", "expects a JSON object"),
        ('{"prompt": "x", "answer": 1, "extra": 2}\n', "Unknown task field"),
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "Duplicate task id"),
        ("\n\n", "at least one task"),
        ('{"prompt": "x", "answer": NaN}\n', "JSON-serializable"),
    ],
)
def test_dataset_errors_name_the_line(tmp_path, content, match):
    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(error.InvalidTask, match=match):
        DatasetSource.from_jsonl(path)


def test_dataset_missing_file_and_converter_errors(tmp_path):
    with pytest.raises(error.InvalidTask, match="No such JSONL"):
        DatasetSource.from_jsonl(tmp_path / "missing.jsonl")

    def converter(record, i):
        return Task(id=f"r{i}", prompt=record["question"], answer=record["a"])

    with pytest.raises(error.InvalidTask, match="record 0 cannot be converted"):
        DatasetSource.from_records([{"q": 1}], converter=converter)


def test_dataset_from_hugging_face_datasets():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list([{"id": "a", "prompt": "Capital of Peru?", "answer": "Lima"}])
    source = DatasetSource.from_hf(ds)
    assert source.get("a").answer == "Lima"
    with pytest.raises(error.InvalidTask, match="datasets.Dataset"):
        DatasetSource.from_hf([{"id": "a"}])
