"""The package's layout holds: layers import only downwards, and no import cycles.

docs/architecture.md ("Layers") is the map this test keeps: one sub-package per layer, a
module imports only from its own layer and the layers below it (imports made only for type
checking included), and there are no import cycles between modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobscheduler

PACKAGE = Path(jobscheduler.__file__).parent

# Rank of each layer; a module may import from its own layer or from one ranked lower. Two
# layers of one rank are independent of each other.
LAYERS: dict[str, int] = {
    "valueclass": -1,
    "errors": 0,
    "clock": 0,
    "examples": 0,
    "lazy": 0,
    "triggers": 1,
    "model": 2,
    "config": 3,
    "state": 3,
    "runners": 4,
    "policies": 5,
    "events": 5,
    "engine": 6,
    "cluster": 7,
    "scheduler": 8,
    "app": 9,
    "__init__": 10,
    "__main__": 10,
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` imports (by their dotted names)."""
    is_package = path.name == "__init__.py" and name != "__init__"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                prefix = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "jobscheduler":
                prefix = node.module.split(".")[1:]
            else:
                continue
            targets = [".".join([*prefix, alias.name]) for alias in node.names]
            targets.append(".".join(prefix))
        elif isinstance(node, ast.Import):
            targets = [
                ".".join(alias.name.split(".")[1:])
                for alias in node.names
                if alias.name.split(".")[0] == "jobscheduler"
            ]
        for target in targets:
            if target in modules and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = sorted(m for m in _modules() if _layer(m) not in LAYERS)
    assert unknown == []


def test_modules_import_only_from_their_layer_or_below() -> None:
    wrong = []
    for module, targets in _graph().items():
        for target in targets:
            mine, theirs = _layer(module), _layer(target)
            if mine == theirs:
                continue
            if LAYERS[theirs] >= LAYERS[mine]:
                wrong.append(f"{module} -> {target}")
    assert sorted(wrong) == []


def test_no_import_cycles() -> None:
    graph = _graph()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycles.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []
