"""Every procedural coding family: tasks rebuild exactly from their ids and hide their hidden
tests; the C/C++ oracles pass every test. The Python oracle of every family, at three
difficulties, is ``tests/test_gold.py``'s (full marks through the env: every test passed, under
the memory and time thresholds)."""

from __future__ import annotations

import pytest

from llmgym.envs.coding.families import FAMILIES, REPAIR_FAMILIES, families_for, family_languages
from llmgym.envs.coding.judge.job import Submission, run_tests_many
from llmgym.envs.coding.problem import Problem, render_test
from llmgym.tasks import ProceduralSource

SOURCE = ProceduralSource(FAMILIES, domain="coding")
POINTS = ((0.0, 0), (0.5, 1), (1.0, 2))


def test_at_least_forty_families_across_the_themes():
    assert len(FAMILIES) >= 40
    themes = {SOURCE.build(f.name, 0.5, 0).metadata["theme"] for f in FAMILIES}
    assert {"strings", "arrays", "hashing", "sorting", "searching", "two pointers", "stacks",
            "queues", "intervals", "dynamic programming", "graphs", "trees", "geometry",
            "parsing", "bits", "number theory", "simulation", "dates", "stdio",
            "modules"} <= themes  # fmt: skip
    assert len(families_for("c")) >= 4 and len(families_for("cpp")) >= 4


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_tasks_rebuild_exactly_and_hide_their_hidden_tests(family):
    for d, i in POINTS:
        task = SOURCE.build(family, d, i)
        assert SOURCE.get(task.id) == task
        problem = Problem.from_answer(task.answer)
        hidden = problem.hidden
        assert (
            len(hidden) >= 10 if problem.kind == "stdio" or not task.subtasks else len(hidden) >= 4
        )
        assert problem.visible, "the prompt shows examples"
        for t in hidden:
            assert render_test(t, problem.kind) not in task.prompt
        for t in problem.visible:
            if problem.kind == "call":
                assert render_test(t, "call").splitlines()[0] in task.prompt


def _sweep(language: str) -> list[tuple[str, float, int]]:
    return [(f.name, d, i) for f in FAMILIES if language in family_languages(f) for d, i in POINTS]


@pytest.mark.slow
@pytest.mark.parametrize("language", ["c", "cpp"])
def test_every_native_oracle_passes_every_test(language):
    cases = [(n, d, i) for n, d, i in _sweep(language) if (d, i) != (0.5, 1)]
    subs = []
    for name, d, i in cases:
        problem = Problem.from_answer(SOURCE.build(name, d, i).answer)
        subs.append(Submission(problem.reference[language], problem, language))
    verdicts = run_tests_many(subs)
    failures = [
        (c, v.status, v.compile_output[-300:])
        for c, v in zip(cases, verdicts, strict=True)
        if v.status != "passed"
    ]
    assert not failures


def test_module_families_have_a_subtask_per_function():
    for family in (f for f in FAMILIES if f.has_subtasks):
        task = SOURCE.build(family.name, 0.5, 0)
        problem = Problem.from_answer(task.answer)
        names = [s.id for s in task.subtask_order()]
        assert names == task.metadata["module"]
        assert set(problem.functions) == set(names)
        for sub in task.subtasks:
            assert sub.depends_on == () or set(sub.depends_on) < set(names)


def test_repair_families_ship_a_broken_module_with_fail_to_pass_tests():
    repair = ProceduralSource(REPAIR_FAMILIES, domain="coding")
    assert len(REPAIR_FAMILIES) >= 6
    for family in REPAIR_FAMILIES:
        for d, i in POINTS:
            task = repair.build(family.name, d, i)
            assert repair.get(task.id) == task
            meta = task.answer["repair"]
            assert meta["original"] != task.answer["reference"]["python"]
            assert meta["original"] in task.prompt
            assert any(t.get("f2p") and t["hidden"] for t in task.answer["tests"])
            assert any(not t.get("f2p") for t in task.answer["tests"])
