"""Dependencies point one way: core <- rewards <- envs <- evaluation/integrations <- agents.

Two checks. Each layer imported alone, in a fresh interpreter, every one of its modules, pulls
in nothing of a higher layer (nor torch or transformers). And no module of a lower layer names a
higher one in any import statement, even inside a function (the package facade's lazy
``llmgym.evaluate`` aside).
``llmgym.envs`` itself is the built-ins' registration table (string entry points, as in
Gymnasium): the core imports it, never a module below it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RANK = {
    "core": 0,
    "rewards": 1,
    "envs": 2,
    "evaluation": 3,
    "integrations": 3,
    "serve": 3,
    "ray": 3,
    "agents": 4,
}
HEAVY = ("torch", "transformers", "accelerate", "docker", "ray")

LAZY_UPWARD: set[tuple[str, str]] = set()
"""Function-level imports from a lower layer into a higher one: none are left, and none may come
back (the verifier table and the declarative env live in the core; domains are reached by
``"module:function"`` strings, as Gymnasium's entry points are)."""

FACADE = ("llmgym/__init__.py", "llmgym.evaluation")
"""The one arrow allowed: ``llmgym`` itself is the public facade, and ``llmgym.evaluate`` (an
attribute resolved on first access, by ``__getattr__``) names the evaluation layer. Nothing
imports the evaluation layer when the core is imported (the isolation test checks it)."""


def layer_of(module: str) -> str | None:
    """The layer of a module name (None: not llmgym's; "cli": the CLI, above everything)."""
    parts = module.split(".")
    if parts[0] != "llmgym":
        return None
    if len(parts) == 1 or (parts[1] == "envs" and len(parts) == 2):
        return "core"
    if parts[1] in RANK:
        return parts[1]
    return "cli" if parts[1] in ("cli", "__main__") else "core"


def files_of(layer: str) -> list[Path]:
    if layer == "core":
        return [
            p
            for p in (ROOT / "llmgym").rglob("*.py")
            if p.parent.name not in ("evaluation", "integrations", "serve", "ray")
            and p.name not in ("cli.py", "__main__.py")
        ]
    folder = {"rewards": "rewards", "envs": "envs"}.get(layer)
    return list((ROOT / folder).rglob("*.py")) if folder else []


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    if parts[0] in ("rewards", "envs", "agents"):
        parts = ["llmgym", *parts]
    return ".".join(parts)


_IMPORT_ALL = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("layer", ["core", "rewards", "envs"])
def test_each_layer_imported_alone_pulls_in_nothing_above_it(layer: str) -> None:
    modules = sorted(module_of(p) for p in files_of(layer) if "__pycache__" not in p.parts)
    assert len(modules) > 10
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, json.dumps(modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout)
    above = [
        m for m in loaded if (lay := layer_of(m)) not in (None, "cli") and RANK[lay] > RANK[layer]
    ]
    assert above == [], f"{layer} pulls in {above[:10]}"
    assert not [m for m in loaded if m.split(".")[0] in HEAVY], "heavy dependency imported"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
    return out


def test_no_import_statement_points_up_beyond_the_known_lazy_ones() -> None:
    found = set()
    for layer in ("core", "rewards", "envs", "evaluation", "integrations", "serve", "ray"):
        paths = files_of(layer) or list((ROOT / "llmgym" / layer).rglob("*.py"))
        for path in paths:
            for _, target in _imports(path):
                lay = layer_of(target)
                if lay not in (None, "cli") and RANK[lay] > RANK[layer]:
                    found.add((path.relative_to(ROOT).as_posix(), target))
    found.discard(FACADE)
    assert found == LAZY_UPWARD, sorted(found - LAZY_UPWARD)


def test_the_layer_rules_themselves() -> None:
    assert layer_of("llmgym.envs") == "core" and layer_of("llmgym.envs.math") == "envs"
    assert layer_of("llmgym.sandbox.local") == "core" and layer_of("numpy") is None
    assert module_of(ROOT / "envs" / "tools" / "__init__.py") == "llmgym.envs.tools"
