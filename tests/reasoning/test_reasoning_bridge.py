"""The reasoning-gym bridge: the catalogue matches the library, every family's own gold scores full
marks and a wrong answer does not, items are the same in every process, the optional dependency
stays optional, and the bridged families work inside llm/Mixture-v0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym.envs.reasoning.bridge import library
from llmgym.envs.reasoning.families import EXCLUDED, FAMILIES

NAMES = [f.name for f in FAMILIES]


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_the_catalogue_is_the_library_minus_the_listed_exclusions() -> None:
    assert sorted(NAMES) == sorted(set(library.datasets()) - set(EXCLUDED))
    assert set(EXCLUDED) <= set(library.datasets()) and len(NAMES) == len(set(NAMES))
    assert len(NAMES) >= 90


def test_each_theme_module_is_the_library_category_of_its_families() -> None:
    from reasoning_gym.factory import DATASETS

    from llmgym.envs.reasoning import families

    themes = [
        m
        for m in vars(families).values()
        if getattr(m, "__name__", "").startswith(families.__name__ + ".")
    ]
    assert len(themes) == 12
    for theme in themes:
        for fam in theme.FAMILIES:
            category = DATASETS[fam.name][0].__module__.split(".")[1]
            assert theme.__name__.endswith("." + category), fam.name


def test_importing_llmgym_and_the_wing_does_not_import_the_library() -> None:
    code = (
        "import sys, llmgym, llmgym.envs.reasoning, llmgym.envs.reasoning.families\n"
        "assert 'reasoning_gym' not in sys.modules, 'imported'\n"
        "print(len(llmgym.envs.reasoning.families.FAMILIES))\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == len(NAMES)


def test_a_missing_library_is_a_clear_dependency_error_and_the_default_mixture_goes_on() -> None:
    code = (
        "import sys; sys.modules['reasoning_gym'] = None\n"
        "import gymnasium as gym, llmgym\n"
        "try:\n"
        "    gym.make('llm/ReasoningGym-v0', family='gcd')\n"
        "except llmgym.error.DependencyNotInstalled as e:\n"
        "    print('ERR', e)\n"
        "env = gym.make('llm/Mixture-v0').unwrapped\n"
        "print('MEMBERS', sorted(env.members))\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert "pip install 'llmgym[reasoning]'" in out.stdout and "reasoning-gym==" in out.stdout
    assert "llm/Math-v0" in out.stdout and "ReasoningGym" not in out.stdout.split("MEMBERS")[1]


SEVERAL_RIGHT = {
    "n_queens": lambda gold: gold.replace("Q", "_"),  # the board emptied
    "jugs": lambda gold: json.dumps(json.loads(gold)[:-1]),  # the plan without its last move
}


def _gold_and_wrong(env: Any, family: str) -> list[str]:
    """Every failure of: gold scores 1 and succeeds; another item's different gold does not."""
    base = env.unwrapped
    problems = []
    for index in (0, 1):
        task = base.source.build(family, 0.5, index)
        env.reset(options={"task_id": task.id})
        _, reward, _, _, info = env.step(base.oracle_action())
        if not (reward == 1.0 and info["is_success"]):
            problems.append(f"{task.id}: gold scored {reward} ({info['feedback']})")
        if family in SEVERAL_RIGHT:  # another item's answer may solve this one too
            wrong = SEVERAL_RIGHT[family](task.answer)
        else:
            wrong = next(
                (
                    other.answer
                    for i in range(2, 40)
                    if (other := base.source.build(family, 0.5, i)).answer != task.answer
                ),
                task.answer + " 1",
            )
        env.reset(options={"task_id": task.id})
        _, reward, _, _, info = env.step(f"<answer>{wrong}</answer>")
        if info["is_success"] or reward >= 1.0:
            problems.append(f"{task.id}: a wrong answer {wrong[:40]!r} got full marks")
    return problems


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_family_gold_full_marks_and_a_wrong_answer_not() -> None:
    env = gym.make("llm/ReasoningGym-v0")
    problems = []
    for name in NAMES:
        try:
            problems += _gold_and_wrong(env, name)
        except Exception as e:  # a generator that fails: reported with the others
            problems.append(f"{name}: {e!r}")
    env.close()
    assert problems == []


_FINGERPRINT = (
    "import hashlib, json, sys, gymnasium as gym, llmgym\n"
    "env = gym.make('llm/ReasoningGym-v0').unwrapped\n"
    "out = {}\n"
    "for name in NAMES:\n"
    "    for level, index in ((0.0, 3), (1.0, 4)):\n"
    "        t = env.source.build(name, level, index)\n"
    "        out[t.id] = hashlib.sha256((t.prompt + '|' + str(t.answer)).encode()).hexdigest()\n"
    "json.dump(out, open(sys.argv[1], 'w'))\n"
)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_family_gives_the_same_items_in_processes_with_different_hash_seeds(
    tmp_path: Path,
) -> None:
    code = f"NAMES = {NAMES!r}\n" + _FINGERPRINT
    prints = []
    for hash_seed in ("1", "4242"):
        path = tmp_path / f"items-{hash_seed}.json"
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert out.returncode == 0, out.stderr
        prints.append(json.loads(path.read_text()))
    first, second = prints
    assert len(first) == 2 * len(NAMES)
    assert sorted({k for k in first if first[k] != second.get(k)}) == []


def test_difficulty_reaches_the_library_curriculum() -> None:
    easy = library.config("gcd", 0.0, 1)
    hard = library.config("gcd", 1.0, 1)
    assert (easy.min_value, easy.max_value) != (hard.min_value, hard.max_value)
    assert hard.max_value > easy.max_value
    assert library.levels("gcd") and library.levels("acre") == {}


def test_a_narrowed_level_span_is_what_the_library_is_asked_for() -> None:
    fam = next(f for f in FAMILIES if f.levels != (0.0, 1.0))
    low, high = fam.levels
    assert fam.level(0.0) == low and fam.level(1.0) == high


def test_usable_alone_and_inside_the_mixture() -> None:
    env = gym.make(
        "llm/Mixture-v0",
        envs=[
            {"id": "llm/ReasoningGym-v0", "kwargs": {"families": ["gcd", "lcm"]}},
            {"id": "llm/Math-v0", "kwargs": {"family": "arith.add_small"}},
        ],
    )
    families = llmgym.list_families("llm/Mixture-v0", envs=["llm/ReasoningGym-v0"])
    assert "llm/ReasoningGym-v0::gcd" in families and len(families) == len(NAMES)
    domains = set()
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        domains.add(info["domain"])
        _, reward, *_ = env.step(env.unwrapped.oracle_action())
        assert reward == 1.0
    assert domains == {"reasoning", "math"}
    obs, info = env.reset(options={"family": "llm/ReasoningGym-v0::lcm"})
    assert info["family"] == "llm/ReasoningGym-v0::lcm" and "<answer>" in obs
    again, _ = env.reset(options={"task_id": info["task_id"]})
    assert again == obs
    env.close()


def test_the_same_seed_gives_the_same_task_and_options_pick_family_and_difficulty() -> None:
    a, b = gym.make("llm/ReasoningGym-v0"), gym.make("llm/ReasoningGym-v0")
    assert a.reset(seed=7) == b.reset(seed=7)
    obs, info = a.reset(seed=1, options={"family": "sudoku", "difficulty": 0.25})
    assert info["family"] == "sudoku" and info["difficulty"] == 0.25
    with pytest.raises(gym.error.Error, match="did you mean 'gcd'"):
        gym.make("llm/ReasoningGym-v0", families=["gdc"])
    a.close(), b.close()


class BandedLibrary:
    """A library that cannot generate any item in a band of levels (as reasoning-gym 0.1.25's
    ``modulo_grid`` between levels 0.1 and 0.3, where its curriculum asks for ``max_target=0``)."""

    NAME = "banded"

    def __init__(self, bad: tuple[float, float]):
        self.bad = bad
        self.asked: list[float] = []

    def entry(self, dataset: str, level: float, seed: int) -> dict[str, Any]:
        self.asked.append(level)
        if self.bad[0] <= level <= self.bad[1]:
            raise AssertionError("max_target must be greater than 0")
        return {"question": f"{dataset} at {level} ({seed})?", "answer": str(seed % 7)}


def test_a_level_the_library_cannot_generate_falls_to_the_nearest_easier_one() -> None:
    from llmgym.envs.reasoning.bridge.source import LibraryFamily, LibrarySource

    fam = LibraryFamily("grid", "a grid")
    lib = BandedLibrary((0.1, 0.3))
    source = LibrarySource([fam], lib, domain="test")
    task = source.build("grid", 0.25, 3)
    assert task.metadata["level_asked"] == 0.25 and task.metadata["level"] == 0.05
    assert f"at {task.metadata['level']}" in task.prompt
    again = LibrarySource([fam], BandedLibrary((0.1, 0.3)), domain="test").build("grid", 0.25, 3)
    assert again.prompt == task.prompt and again.answer == task.answer  # a function of its id
    ok = source.build("grid", 0.5, 3)
    assert ok.metadata["level"] == ok.metadata["level_asked"] == 0.5
    top = LibrarySource([fam], BandedLibrary((0.0, 0.9)), domain="test").build("grid", 0.5, 1)
    assert top.metadata["level"] == 0.95  # nothing easier works: the nearest harder level


def test_a_family_the_library_cannot_generate_at_all_is_a_clear_error() -> None:
    from llmgym.envs.reasoning.bridge.source import LibraryFamily, LibrarySource

    source = LibrarySource([LibraryFamily("grid", "a grid")], BandedLibrary((0.0, 1.0)), domain="t")
    with pytest.raises(llmgym.error.InvalidTask, match="could not generate 'grid'"):
        source.build("grid", 0.5, 0)


@pytest.mark.parametrize("difficulty", [0.2, 0.24, 0.28])
def test_modulo_grid_generates_across_its_broken_band(difficulty: float) -> None:
    env = gym.make("llm/ReasoningGym-v0", family="modulo_grid")
    _, info = env.reset(seed=2770, options={"difficulty": difficulty})
    task = env.unwrapped.episode.task
    assert info["difficulty"] == difficulty and task.metadata["level"] <= 0.1
    assert task.metadata["level_asked"] == difficulty
    env.close()
