"""Run the doctests of every llmgym module, imported under its installed name.

``envs/``, ``rewards/`` and ``agents/`` are installed as ``llmgym.envs`` etc. through
package-dir mapping; pytest's ``--doctest-modules`` would import them a second time as
top-level ``envs``, ``rewards``... (registering every env twice), so the doctests are
collected here from the real package instead.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

PACKAGES = ["llmgym", "llmgym.envs", "llmgym.rewards", "llmgym.agents", "llmgym.integrations"]


def _module_names() -> list[str]:
    names = []
    for package in PACKAGES:
        if importlib.util.find_spec(package) is None:
            continue
        names.append(package)
        pkg = importlib.import_module(package)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return sorted(set(names))


MODULES = _module_names()


def test_every_package_is_walked():
    assert {
        "llmgym.core",
        "llmgym.rewards.text",
        "llmgym.declarative",
        "llmgym.verifiers",
        "llmgym.answers",
        "llmgym.agents.policies",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures = []
    for test in finder.find(module, name):
        runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)
