"""The tool wing imports without a circle, and its scenario machinery never imports its catalogue.

The graph reader is written for any package (give it ``{dotted name: folder}`` for one or several
roots). It reads the imports that run when a module is imported: statements at module level,
inside ``if``/``try``/``with``/loop blocks and class bodies; not those under ``if TYPE_CHECKING:``
(they never run), and those inside functions only when asked (they run later, but a lazy import
that closes a circle is still one: the tool catalogue's loader was). Importing ``a.b.c`` runs the
packages ``a`` and ``a.b`` first: those count too, except a module's own enclosing packages
(Python starts them before the module, so they close no circle); ``from a.b import c`` counts
``a.b.c`` when it is a module, else ``a.b`` itself (the name must exist when the line runs).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"llmgym.envs.tools": ROOT / "envs" / "tools"}


def modules_under(packages: Mapping[str, Path]) -> dict[str, tuple[Path, bool]]:
    """Every module below each root: dotted name -> (its file, whether it is an ``__init__``)."""
    out = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            out[name] = (path, is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def import_statements(
    node: ast.AST, *, inside_functions: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements in ``node`` (a module's tree) that run when the module is imported,
    and with ``inside_functions`` those in its function bodies too."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    elif isinstance(node, ast.If) and _is_type_checking(node.test):
        for child in node.orelse:
            yield from import_statements(child, inside_functions=inside_functions)
    elif inside_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for child in ast.iter_child_nodes(node):
            yield from import_statements(child, inside_functions=inside_functions)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    anchor = parts[: len(parts) - node.level + 1]
    return ".".join(anchor + ([node.module] if node.module else []))


def _with_packages(target: str, importer: str, known: set[str]) -> set[str]:
    """``target`` and the packages above it that importing it starts, less the importer's own."""
    parts = target.split(".")
    out = {target}
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i])
        if prefix in known and not (importer + ".").startswith(prefix + "."):
            out.add(prefix)
    return out


def _longest_known(name: str, known: set[str]) -> str | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in known:
            return ".".join(parts[:i])
    return None


def import_graph(
    packages: Mapping[str, Path], *, inside_functions: bool = False
) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` that importing it runs (see the module docstring),
    and with ``inside_functions`` those its functions import too."""
    found = modules_under(packages)
    known = set(found)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in found.items():
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in import_statements(tree, inside_functions=inside_functions):
            if isinstance(node, ast.Import):
                targets = [_longest_known(alias.name, known) for alias in node.names]
            else:
                base = _absolute(node, module, is_package)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known
                    else _longest_known(base, known)
                    for alias in node.names
                ]  # fmt: skip
            for target in targets:
                if target is not None:
                    edges |= _with_packages(target, module, known)
        graph[module] = edges - {module}
    return graph


def find_circle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One circle as a path that ends where it starts (``["a", "b", "a"]``), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


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
