"""An import graph read from source, for any package: which modules importing a module runs.

It reads the imports that run when a module is imported: statements at module level, inside
``if``/``try``/``with``/loop blocks and class bodies; not those under ``if TYPE_CHECKING:`` (they
never run), and those inside functions only when asked (they run later, but a lazy import that
closes a circle is still one: the tool catalogue's loader was). Importing ``a.b.c`` runs the
packages ``a`` and ``a.b`` first: those count too, except a module's own enclosing packages
(Python starts them before the module, so they close no circle); ``from a.b import c`` counts
``a.b.c`` when it is a module, else ``a.b`` itself (the name must exist when the line runs).
Used by ``test_shape.py`` (the whole codebase) and ``envs/test_tools_imports.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path


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
