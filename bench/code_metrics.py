"""Code metrics of the package: cyclomatic complexity (radon) and the import graph's floors.

``python bench/code_metrics.py [--root PATH] [--json]``: PATH is a checkout (or its
``jobscheduler/`` directory; default this checkout's), so an old commit is measured with
``git worktree add`` and ``--root``. Reports:

- complexity, as ``radon cc -a`` counts it: every block radon's ``cc_visit`` gives (functions,
  methods, classes; a closure counts in its function), the mean over them, the worst, and how
  many functions and methods are above 10;
- the import graph, read from the source (every ``import`` and ``from ... import``, those under
  ``if TYPE_CHECKING:`` and inside functions included; a module's import of its parent
  packages by Python itself is not an edge): between *units* (the package's sub-packages and
  top-level modules: ``engine``, ``state``, ``clock``, ``scheduler``, ``__init__`` for the
  package itself) and between modules. A node's floor is the length of the longest import
  chain below it (0: imports nothing of the package); the members of a cycle (a strongly
  connected component) share a floor. An *upward* import is a unit's import of a unit on its
  own floor or above: the imports that close a cycle between units;
- the state store's protocols (every ``Protocol`` class of ``state/``): their own methods,
  by the section comment (``# -- nodes ---``) they stand under.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radon.complexity import cc_visit
from radon.visitors import Function

PACKAGE = "jobscheduler"
DEFAULT_ROOT = Path(__file__).resolve().parent.parent

Graph = dict[str, set[str]]


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module of the package
    type_checking: bool


def package_dir(root: Path) -> Path:
    """The package directory at `root` (a checkout or the package itself)."""
    for candidate in (root / PACKAGE, root):
        if (candidate / "__init__.py").is_file() and candidate.name == PACKAGE:
            return candidate
    raise SystemExit(f"no {PACKAGE}/__init__.py at {root}")


def module_name(pkg: Path, path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(pkg).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(pkg: Path) -> dict[str, Path]:
    return {module_name(pkg, p): p for p in sorted(pkg.rglob("*.py"))}


# -- complexity ---------------------------------------------------------------------------


def complexity(pkg: Path, files: Mapping[str, Path]) -> dict[str, Any]:
    blocks: list[tuple[str, str, int, bool]] = []  # (name, file, complexity, is a function)
    for path in files.values():
        rel = str(path.relative_to(pkg.parent))
        for block in cc_visit(path.read_text(encoding="utf-8")):
            blocks.append((block.fullname, rel, block.complexity, isinstance(block, Function)))
    if not blocks:
        raise SystemExit(f"no code under {pkg}")
    worst = max(blocks, key=lambda b: b[2])
    above = sorted((b for b in blocks if b[3] and b[2] > 10), key=lambda b: -b[2])
    return {
        "blocks": len(blocks),
        "mean": sum(b[2] for b in blocks) / len(blocks),
        "worst": {"name": worst[0], "file": worst[1], "complexity": worst[2]},
        "functions_above_10": len(above),
        "above_10": [{"name": n, "file": f, "complexity": c} for n, f, c, _ in above],
    }


# -- imports ------------------------------------------------------------------------------


def imports(files: Mapping[str, Path]) -> list[Import]:
    found: list[Import] = []
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, guarded in _import_nodes(tree.body, False):
            for target in _targets(node, name, is_package, files):
                if target != name:
                    found.append(Import(name, target, guarded))
    return found


def _import_nodes(
    body: Iterable[ast.stmt | ast.AST], guarded: bool
) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, guarded
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_nodes(node.body, True)
            yield from _import_nodes(node.orelse, guarded)
        else:
            yield from _import_nodes(ast.iter_child_nodes(node), guarded)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, files: Mapping[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [_known(a.name, files) for a in node.names if _known(a.name, files)]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    out: list[str] = []
    for alias in node.names:
        # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod.
        target = _known(f"{origin}.{alias.name}", files) or _known(origin, files)
        if target and target not in out:
            out.append(target)
    return out


def _known(dotted: str, files: Mapping[str, Path]) -> str:
    """The package's module `dotted` names, or the nearest enclosing one; '' if outside."""
    parts = dotted.split(".")
    while parts and parts[0] == PACKAGE:
        candidate = ".".join(parts)
        if candidate in files:
            return candidate
        parts.pop()
    return ""


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def floors(graph: Graph) -> tuple[dict[str, int], list[list[str]]]:
    """Each node's floor (longest chain of imports below it, a cycle counted once) and the
    cycles (components of more than one node)."""
    components = strongly_connected(graph)  # Tarjan yields a component after those it imports
    component_of = {n: i for i, comp in enumerate(components) for n in comp}
    floor_of: dict[int, int] = {}
    for i, comp in enumerate(components):
        below = {component_of[s] for n in comp for s in graph.get(n, ())} - {i}
        floor_of[i] = 1 + max((floor_of[j] for j in below), default=-1)
    return {n: floor_of[component_of[n]] for n in graph}, [c for c in components if len(c) > 1]


def import_graph(found: list[Import], names: Iterable[str]) -> dict[str, Any]:
    module_graph: Graph = {n: set() for n in names}
    unit_graph: Graph = {unit_of(n): set() for n in module_graph}
    for imp in found:
        module_graph[imp.source].add(imp.target)
        if unit_of(imp.source) != unit_of(imp.target):
            unit_graph[unit_of(imp.source)].add(unit_of(imp.target))
    unit_floor, unit_cycles = floors(unit_graph)
    module_floor, module_cycles = floors(module_graph)
    upward = [
        {
            "from": imp.source,
            "to": imp.target,
            "units": f"{unit_of(imp.source)} -> {unit_of(imp.target)}",
            "type_checking": imp.type_checking,
        }
        for imp in found
        if unit_of(imp.source) != unit_of(imp.target)
        and unit_floor[unit_of(imp.target)] >= unit_floor[unit_of(imp.source)]
    ]
    return {
        "units": {
            u: {"floor": unit_floor[u], "imports": sorted(unit_graph[u])}
            for u in sorted(unit_graph, key=lambda u: (unit_floor[u], u))
        },
        "unit_cycles": unit_cycles,
        "upward_imports": upward,
        "upward_import_count": len(upward),
        "unit_cycle_count": len(unit_cycles),
        "highest_module_floor": max(module_floor.values(), default=0),
        "modules_by_floor": _by_floor(module_floor),
        "module_cycles": module_cycles,
        "module_cycle_count": len(module_cycles),
        "type_checking_imports": sum(1 for imp in found if imp.type_checking),
    }


# -- the state store's protocols ----------------------------------------------------------


def protocols(pkg: Path, files: Mapping[str, Path], under: str = "state") -> dict[str, Any]:
    """Each Protocol class of the `under` sub-package: its own methods, by the section comment
    (``# -- title ---``) they stand under ("-" before any)."""
    out: dict[str, Any] = {}
    for name, path in files.items():
        if unit_of(name) != under:
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.parse(text).body:
            if not (isinstance(node, ast.ClassDef) and any(_is_protocol(b) for b in node.bases)):
                continue
            sections: dict[str, list[str]] = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    title = _section(lines, node.lineno, item.lineno)
                    sections.setdefault(title, []).append(item.name)
            out[f"{name.removeprefix(PACKAGE + '.')}.{node.name}"] = {
                "methods": sum(len(v) for v in sections.values()),
                "by_section": {k: {"count": len(v), "names": v} for k, v in sections.items()},
            }
    return out


def _is_protocol(base: ast.expr) -> bool:
    if isinstance(base, ast.Subscript):
        base = base.value
    return (isinstance(base, ast.Name) and base.id == "Protocol") or (
        isinstance(base, ast.Attribute) and base.attr == "Protocol"
    )


def _section(lines: list[str], start: int, line: int) -> str:
    for text in reversed(lines[start : line - 1]):
        stripped = text.strip()
        if stripped.startswith("# --"):
            return stripped.strip("#- ").strip()
    return "-"


def _by_floor(floor_of: Mapping[str, int]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for module, floor in sorted(floor_of.items(), key=lambda kv: (kv[1], kv[0])):
        out.setdefault(str(floor), []).append(module.removeprefix(PACKAGE + "."))
    return out


def measure(root: Path) -> dict[str, Any]:
    pkg = package_dir(root)
    files = modules(pkg)
    return {
        "root": str(pkg),
        "modules": len(files),
        "complexity": complexity(pkg, files),
        "imports": import_graph(imports(files), files),
        "state_protocols": protocols(pkg, files),
    }


def _text(result: Mapping[str, Any]) -> str:
    cc = result["complexity"]
    graph = result["imports"]
    worst = cc["worst"]
    lines = [
        f"package {result['root']}: {result['modules']} modules",
        f"cyclomatic complexity: mean {cc['mean']:.2f} over {cc['blocks']} blocks; worst "
        f"{worst['name']} ({worst['file']}) {worst['complexity']}; "
        f"{cc['functions_above_10']} functions/methods above 10",
    ]
    lines += [f"  {b['complexity']:3}  {b['name']} ({b['file']})" for b in cc["above_10"]]
    lines.append("sub-packages and top-level modules by floor (longest import chain below):")
    for unit, info in graph["units"].items():
        lines.append(f"  {info['floor']:2}  {unit} -> {', '.join(info['imports']) or '-'}")
    lines.append(f"cycles between them: {graph['unit_cycles'] or 'none'}")
    lines.append(f"upward imports ({len(graph['upward_imports'])}):")
    for up in graph["upward_imports"]:
        guard = " (under TYPE_CHECKING)" if up["type_checking"] else ""
        lines.append(f"  {up['units']}: {up['from']} imports {up['to']}{guard}")
    lines.append(f"modules by floor (highest {graph['highest_module_floor']}):")
    lines += [f"  {f:>2}  {' '.join(mods)}" for f, mods in graph["modules_by_floor"].items()]
    lines.append(f"cycles between modules ({len(graph['module_cycles'])}):")
    lines += [f"  {' <-> '.join(c)}" for c in graph["module_cycles"]]
    lines.append("the state store's protocols: own methods by section")
    for protocol, info in result["state_protocols"].items():
        lines.append(f"  {protocol}: {info['methods']}")
        for title, section in info["by_section"].items():
            lines.append(f"    {section['count']:2}  {title}: {', '.join(section['names'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="a checkout")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    result = measure(args.root.resolve())
    print(json.dumps(result) if args.json else _text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
