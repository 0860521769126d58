"""The codebase's shape: no import circle, no oversized room, every package installed, every
domain wing of one shape, and every former module path still importing the module it names."""

from __future__ import annotations

import ast
import importlib
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
from import_graph import find_circle, import_graph

from llmgym._moved import former_paths, keep_former_paths

ROOT = Path(__file__).resolve().parents[1]
SOURCE = {"llmgym": ROOT / "llmgym", "llmgym.envs": ROOT / "envs",
          "llmgym.rewards": ROOT / "rewards", "llmgym.agents": ROOT / "agents"}  # fmt: skip
MAX_LINES = 800
EXEMPT = ("single shipped program", "data table")
"""A file may be longer only when its docstring says it is one of these."""


def modules() -> dict[str, Path]:
    """Every llmgym module, by its installed dotted name."""
    out: dict[str, Path] = {}
    for prefix, folder in SOURCE.items():
        for path in folder.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(folder).with_suffix("").parts
            parts = [p for p in rel if p != "__init__"]
            name = ".".join([prefix, *parts])
            if prefix == "llmgym" and rel[0] in ("envs", "rewards", "agents"):
                continue  # not a folder of llmgym/ (mapped from the top level)
            out[name] = path
    return out


FACADE = ("llmgym", "llmgym.evaluation")
"""``llmgym.evaluate``: the package facade names the evaluation layer on first access (the one
edge ``tests/test_layers.py`` allows); every module above imports ``llmgym``, which is no circle
of modules, only the facade's reach."""


@pytest.mark.parametrize("inside_functions", [False, True])
def test_no_import_circle_anywhere(inside_functions: bool) -> None:
    """Counting imports inside functions too: a lazy import that closes a circle is a circle
    (the tools catalogue was one, through a loader)."""
    graph = import_graph(SOURCE, inside_functions=inside_functions)
    assert len(graph) > 150 and "llmgym.envs.tools.families.banking" in graph
    graph[FACADE[0]].discard(FACADE[1])
    circle = find_circle(graph)
    assert circle is None, " -> ".join(circle or [])


def test_every_file_over_800_lines_says_why_in_its_docstring() -> None:
    long = {}
    for name, path in modules().items():
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_LINES:
            doc = (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").lower()
            if not any(reason in " ".join(doc.split()) for reason in EXEMPT):
                long[name] = lines
    assert long == {}, f"split these, or say in the docstring why they are one file: {long}"


def test_every_package_is_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {n for n, p in modules().items() if p.name == "__init__.py"}
    assert packages - listed == set(), "a wheel would leave these packages out"
    assert listed - packages == set(), "listed but no longer there"


DOMAINS = sorted(
    p.name for p in (ROOT / "envs").iterdir() if p.is_dir() and (p / "__init__.py").is_file()
)


def test_there_are_six_domain_wings() -> None:
    assert DOMAINS == ["coding", "instruct", "longdoc", "math", "reasoning", "tools"]


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_domain_wing_has_one_shape(domain: str) -> None:
    """``env.py`` with the env classes, a ``families/`` package that is only the catalogue (one
    theme per module, a plain list in its ``__init__``), registered nowhere but the table."""
    wing = ROOT / "envs" / domain
    assert (wing / "env.py").is_file()
    families = wing / "families"
    assert (families / "__init__.py").is_file()
    themes = [p for p in families.glob("*.py") if not p.name.startswith("_")]
    assert len(themes) >= 3, "one theme per module"
    package = importlib.import_module(f"llmgym.envs.{domain}.families")
    assert isinstance(package.FAMILIES, (list, tuple)) and package.FAMILIES
    names = [getattr(f, "name", None) for f in package.FAMILIES]
    assert all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
    # No self-registration: no theme calls a registering function when imported, and the
    # list is written out in the package's __init__ (names and lists, no call).
    for theme in themes:
        assert registering_calls(theme) == [], theme
    tree = ast.parse((families / "__init__.py").read_text(encoding="utf-8"))
    listed = [
        n.value
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and any(isinstance(t, ast.Name) and t.id in ("FAMILIES", "SPECS") for t in targets_of(n))
        and isinstance(n.value, (ast.List, ast.Tuple))
    ]
    assert listed, "the catalogue is a list written out in families/__init__.py"
    assert not [n for n in ast.walk(listed[0]) if isinstance(n, ast.Call)], "a plain list"


def targets_of(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def registering_calls(path: Path) -> list[str]:
    """Calls at import time (module level, decorators included) to anything named register*."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            roots: list[ast.AST] = list(stmt.decorator_list)
        else:
            roots = [stmt]
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, ast.Call):
                    name = ast.unparse(node.func)
                    if "register" in name.lower() or name.endswith((".family", "reg")):
                        found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_former_paths_import_the_module_now_named() -> None:
    table = former_paths()
    for old, new in table.items():
        assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no such module"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        declarative = importlib.import_module("llmgym.envs.declarative")
    assert declarative is importlib.import_module("llmgym.declarative")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_a_former_path_resolves_lazily_and_to_the_same_object(tmp_path: Path) -> None:
    (tmp_path / "pkgold").mkdir()
    (tmp_path / "pkgold" / "__init__.py").write_text("")
    (tmp_path / "pkgold" / "new.py").write_text("VALUE = object()\nLOADS = []\n")
    sys.path.insert(0, str(tmp_path))
    try:
        keep_former_paths("pkgold", {"old": "pkgold.new"})
        assert "pkgold.new" not in sys.modules  # nothing is imported until asked for
        with pytest.warns(DeprecationWarning, match="pkgold.old moved to pkgold.new"):
            old = importlib.import_module("pkgold.old")
        assert old is importlib.import_module("pkgold.new")
        assert old.__spec__.name == "pkgold.new" and old.__name__ == "pkgold.new"
        assert importlib.reload(old) is old  # reloads from its own file, not through the alias
        from pkgold.old import VALUE  # type: ignore[import-not-found]

        assert VALUE is old.VALUE
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("pkgold", "pkgold.new", "pkgold.old"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("bad", ["a.b", "", "1x", "has space"])
def test_a_former_name_is_one_identifier(bad: str) -> None:
    with pytest.raises(ValueError, match="one identifier"):
        keep_former_paths("pkgold", {bad: "pkgold.new"})
