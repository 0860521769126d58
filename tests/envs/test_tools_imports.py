"""The tool wing imports without a circle, and its scenario machinery never imports its catalogue
(the graph reader is ``tests/import_graph.py``)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest
from import_graph import find_circle, import_graph

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"llmgym.envs.tools": ROOT / "envs" / "tools"}


# --- the tool wing -------------------------------------------------------------------------------


@pytest.mark.parametrize("inside_functions", [False, True])
def test_the_tool_wing_has_no_import_circle(inside_functions: bool) -> None:
    graph = import_graph(TOOLS, inside_functions=inside_functions)
    assert {"llmgym.envs.tools.families.banking", "llmgym.envs.tools.bfcl.peer"} <= set(graph)
    assert "llmgym.envs.tools.scenario" in graph["llmgym.envs.tools.families.banking"]
    assert find_circle(graph) is None, " -> ".join(find_circle(graph) or [])


def test_the_scenario_machinery_never_imports_the_catalogue() -> None:
    """Not even inside a function: the catalogue is handed to it (``scenario.install``)."""
    tree = ast.parse((TOOLS["llmgym.envs.tools"] / "scenario.py").read_text(encoding="utf-8"))
    named = [
        name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        )
    ]
    assert not [n for n in named if n.startswith("llmgym.envs.tools")], named


# --- the graph reader on a made-up package -------------------------------------------------------


def _package(root: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_reader_counts_what_runs_at_import_and_nothing_else(tmp_path: Path) -> None:
    folder = _package(
        tmp_path / "pkg",
        {
            "__init__.py": "from pkg.a import VALUE\n",
            "a.py": "import os\nimport pkg.b\nVALUE = 1\ndef later():\n    import pkg.e\n",
            "b.py": "from . import c\nif TYPE_CHECKING:\n    import pkg.a\n",
            "c.py": "try:\n    from pkg.sub import x\nexcept ImportError:\n    pass\n",
            "d.py": "class K:\n    from pkg import VALUE\n",
            "sub/__init__.py": "",
            "e.py": "",
            "sub/x.py": "from pkg.sub import y\nfrom .. import e\n",
            "sub/y.py": "",
        },
    )
    assert import_graph({"pkg": folder}) == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c"},
        "pkg.c": {"pkg.sub", "pkg.sub.x"},
        "pkg.d": {"pkg"},  # VALUE must exist in pkg when d's class body runs
        "pkg.e": set(),
        "pkg.sub": set(),
        "pkg.sub.x": {"pkg.sub.y", "pkg.e"},
        "pkg.sub.y": set(),
    }
    assert find_circle(import_graph({"pkg": folder})) is None
    assert import_graph({"pkg": folder}, inside_functions=True)["pkg.a"] == {"pkg.b", "pkg.e"}


def test_the_reader_finds_a_circle_through_a_package(tmp_path: Path) -> None:
    folder = _package(
        tmp_path / "pkg",
        {
            "__init__.py": "",
            "machinery.py": "import pkg.catalogue.one\n",
            "catalogue/__init__.py": "from pkg.catalogue import one\n",
            "catalogue/one.py": "from pkg.machinery import helper\n",
        },
    )
    circle = find_circle(import_graph({"pkg": folder}))
    assert circle is not None and circle[0] == circle[-1]
    assert set(circle) == {"pkg.machinery", "pkg.catalogue", "pkg.catalogue.one"}
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_circle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
