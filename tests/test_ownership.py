"""A class's fields are written by that class only.

docs/architecture.md ("Layers"): one class lives whole in one file, and its fields are
written by that class alone; another object asks through a method or hands the value to the
constructor. This test reads every module of the package and finds the attribute writes
(``x.a = v``, ``x.a += v``, ``x.a: T = v``, ``del x.a``, ``setattr(x, "a", v)``,
``delattr(x, "a")``, ``object.__setattr__(x, "a", v)``, ``x.__setattr__("a", v)``) whose
object is not the writer's own. A write is the class's own when its object is:

1. ``self`` or ``cls``: the first parameter of the method the write is in (a function
   nested in that method included), so the class writes its own object (a frozen
   dataclass's ``object.__setattr__(self, ...)`` included); or
2. a fresh object: a local name that every binding in the same function gives a new object
   of a class this module defines (``C(...)``, ``cls(...)``, ``C.__new__(C)``,
   ``super().__new__(cls, ...)``) or a function defined right there (``def f``). Until the
   function hands it out nobody else holds it: the module of its class is still building it.

Anything else is a violation, unless `ALLOWED` lists it with the reason it is the idea.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import jobscheduler

PACKAGE = Path(jobscheduler.__file__).parent

# (module file, enclosing function's qualified name, written object) -> why it is the idea.
ALLOWED: dict[tuple[str, str, str], str] = {
    # uvicorn's documented way to stop a Server from another thread is its `should_exit`
    # flag; the object is uvicorn's, not ours, and has no method for it.
    ("app/http/server.py", "HttpServer.close", "self._server"): "uvicorn's stop flag",
    ("app/http/server.py", "serve_http", "server"): "uvicorn's stop flag",
    # The job's storage trick lives whole in joblayout.py (docs/architecture.md): its
    # functions write the `_options` slot of `JobSlots` (this module's class) and the
    # options object (this module's class too), both frozen, so through object.__setattr__.
    ("model/joblayout.py", "settle", "job"): "the job's storage, owned by joblayout",
    ("model/joblayout.py", "set_trigger", "job._options"): "the job's storage, owned by joblayout",
    ("model/joblayout.py", "_option_setter.set_option", "job"): "the job's storage",
    ("model/joblayout.py", "_option_setter.set_option", "options"): "the job's storage",
    # Building a class, not writing an object's fields: `lay_out` turns Job's option fields
    # into properties once, and an `Option` becomes its dataclass field by `__set_name__`.
    ("model/joblayout.py", "lay_out", "cls"): "class attributes made at class creation",
    ("model/joboptions.py", "Option.__set_name__", "owner"): "a descriptor's field",
    # `value_class` builds a class as @dataclass does: its defaults and methods are class
    # attributes set once, and a frozen instance hands a non-field's write to its base.
    ("valueclass.py", "_own_fields", "cls"): "class attributes made at class creation",
    ("valueclass.py", "value_class.make", "cls"): "class attributes made at class creation",
    ("valueclass.py", "value_class.make", "method"): "a method's name, at class creation",
    ("valueclass.py", "_methods.__setattr__", "super(cls, self)"): "dataclass's frozen guard",
    ("valueclass.py", "_methods.__delattr__", "super(cls, self)"): "dataclass's frozen guard",
    # argparse's translation lookup kept behind a cache for the process (same answers).
    ("app/cli.py", "_translate_once", "argparse"): "argparse's lookup, cached",
    # PyYAML is imported with `re.compile` swapped for the length of its import, so that its
    # costly pattern is compiled from an equivalent source; the module's function, put back.
    ("config/yamlnodes.py", "_import_pyyaml", "re"): "swapped while PyYAML imports",
}

# Violations not fixed yet, each to be fixed the same way (the owning class gets a method or
# a constructor argument that does the write) and then dropped from here. Not excuses: the
# last test fails when an entry no longer matches, so the list only shrinks.
PENDING: set[tuple[str, str, str]] = {
    # The YAML composer finishes the `Node`s on its stack (ends, anchors, sizes).
    ("config/yamlnodes.py", "_Composer._end", "node"),
    ("config/yamlnodes.py", "_Composer._add", "parent"),
    # systemd's calendar parser, ported function by function: the helpers move a `_Cursor`
    # and fill a `_Spec` they are handed, and `_settled_end_of_month` a `_Local`'s offset.
    ("triggers/calendar_parse.py", "_parse_weekdays", "c"),
    ("triggers/calendar_parse.py", "_fraction", "cur"),
    ("triggers/calendar_parse.py", "_decimal", "cur"),
    ("triggers/calendar_parse.py", "_parse_chain", "cur"),
    ("triggers/calendar_parse.py", "_parse_date", "c"),
    ("triggers/calendar_parse.py", "_parse_date", "cur"),
    ("triggers/calendar_parse.py", "_from_epoch", "c"),
    ("triggers/calendar_parse.py", "_parse_time", "c"),
    ("triggers/calendar_parse.py", "_parse_time", "cur"),
    ("triggers/calendar_parse.py", "_normalize", "c"),
    ("triggers/calendar_eval.py", "_settled_end_of_month", "local"),
    ("triggers/calendar_parse.py", "_apply_shorthand", "c"),
    ("triggers/calendar_parse.py", "_date_separator", "c"),
    ("triggers/calendar_parse.py", "_date_separator", "cur"),
    ("triggers/calendar_parse.py", "_parse_component", "cur"),
    ("triggers/calendar_parse.py", "_parse_epoch", "cur"),
    ("triggers/calendar_parse.py", "_range_stop", "cur"),
    ("triggers/calendar_parse.py", "_weekday_name", "cur"),
    ("triggers/calendar_parse.py", "_weekday_separator", "cur"),
    ("triggers/calendar_parse.py", "_zone_suffix", "c"),
}


@dataclass(frozen=True)
class Write:
    module: str  # the file, relative to the package
    line: int
    function: str  # qualified name of the enclosing function ("" at module level)
    target: str  # the written object, as source text
    attribute: str  # the field written ("?" when not a literal)

    def __str__(self) -> str:
        where = self.function or "<module>"
        return f"{self.module}:{self.line} {where}: {self.target}.{self.attribute}"


_SETTERS = {"setattr", "delattr", "object.__setattr__", "object.__delattr__"}


def _flat(targets: list[ast.expr]) -> list[ast.expr]:
    flat: list[ast.expr] = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            flat.extend(_flat(list(target.elts)))
        elif isinstance(target, ast.Starred):
            flat.extend(_flat([target.value]))
        else:
            flat.append(target)
    return flat


class _Finder(ast.NodeVisitor):
    """The foreign writes of one module."""

    def __init__(self, module: str, tree: ast.Module) -> None:
        self.module = module
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.found: list[Write] = []
        self._names: list[str] = []  # the qualified name's parts
        self._owner: str | None = None  # the name of `self`/`cls` where the code runs
        self._fresh: set[str] = set()

    # --- scopes
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._names.append(node.name)
        owner, fresh = self._owner, self._fresh
        self._owner, self._fresh = None, set()
        for child in node.body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(child, method=True)
            else:
                self.visit(child)
        self._owner, self._fresh = owner, fresh
        self._names.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node, method=False)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node, method=False)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, *, method: bool) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._names.append(node.name)
        owner, fresh = self._owner, self._fresh
        static = any(ast.unparse(d) == "staticmethod" for d in node.decorator_list)
        params = [*node.args.posonlyargs, *node.args.args]
        if method:
            self._owner = params[0].arg if params and not static else None
        self._fresh = self._fresh_names(node)
        for child in node.body:
            self.visit(child)
        self._owner, self._fresh = owner, fresh
        self._names.pop()

    def _fresh_names(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        """The local names every binding of which in `node` (not in nested scopes) is a new
        object of this module's classes, or a function defined there."""
        bindings: dict[str, list[bool]] = {}
        for child in _own_nodes(node):
            if isinstance(child, ast.Assign):
                for target in _flat(child.targets):
                    if isinstance(target, ast.Name):
                        fresh = len(child.targets) == 1 and child.targets[0] is target
                        bindings.setdefault(target.id, []).append(
                            fresh and self._constructs(child.value)
                        )
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
                if child.value is not None:
                    bindings.setdefault(child.target.id, []).append(self._constructs(child.value))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bindings.setdefault(child.name, []).append(True)
            else:
                for bound in _bound(child):
                    bindings.setdefault(bound, []).append(False)
        return {name for name, fresh in bindings.items() if all(fresh)}

    def _constructs(self, value: ast.expr) -> bool:
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Name):
            return func.id in self.classes or func.id == self._owner == "cls"
        if isinstance(func, ast.Attribute) and func.attr == "__new__":
            made = ast.unparse(func.value)
            return made in self.classes or made in {"cls", "super()"}
        return False

    # --- writes
    def _write(self, node: ast.AST, target: ast.expr, attribute: str) -> None:
        if isinstance(target, ast.Name) and (target.id == self._owner or target.id in self._fresh):
            return
        write = Write(
            self.module,
            getattr(node, "lineno", 0),
            ".".join(self._names),
            ast.unparse(target),
            attribute,
        )
        self.found.append(write)

    def _targets(self, node: ast.AST, targets: list[ast.expr]) -> None:
        for target in _flat(targets):
            if isinstance(target, ast.Attribute):
                self._write(node, target.value, target.attr)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = ast.unparse(node.func)
        name = node.args[1] if len(node.args) > 1 else None
        attribute = name.value if isinstance(name, ast.Constant) else "?"
        if func in _SETTERS and node.args:
            self._write(node, node.args[0], str(attribute))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in {
            "__setattr__",
            "__delattr__",
        }:
            first = node.args[0] if node.args else None
            self._write(
                node, node.func.value, first.value if isinstance(first, ast.Constant) else "?"
            )
        self.generic_visit(node)


def _bound(node: ast.AST) -> list[str]:
    """The names `node` binds other than by a plain assignment (a loop, a `with`, `:=`,
    `+=`, an import, an `except` clause)."""
    targets: list[ast.AST] = []
    if isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    return [
        name.id
        for target in targets
        for name in ast.walk(target)
        if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
    ]


def _own_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, not descending into nested functions or classes
    (a nested function's own name is listed)."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        found.append(child)
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(child))
    return found


def foreign_writes(package: Path = PACKAGE) -> list[Write]:
    """Every write of a field not the writer's own, in the package's modules."""
    found: list[Write] = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        finder = _Finder(module, tree)
        finder.visit(tree)
        found.extend(finder.found)
    return found


def _allowed(write: Write) -> bool:
    return (write.module, write.function, write.target) in ALLOWED


def _pending(write: Write) -> bool:
    return (write.module, write.function, write.target) in PENDING


def test_fields_are_written_by_their_class_only() -> None:
    violations = [str(w) for w in foreign_writes() if not _allowed(w) and not _pending(w)]
    assert not violations, "fields written from outside their class:\n" + "\n".join(violations)


def test_every_listed_write_is_still_there() -> None:
    """An entry of `ALLOWED` or `PENDING` that matches nothing any more is dropped, so the
    lists stay exactly the writes they name."""
    seen = {(w.module, w.function, w.target) for w in foreign_writes()}
    assert set(ALLOWED) - seen == set()
    assert PENDING - seen == set()
    assert PENDING & set(ALLOWED) == set()


def test_the_check_finds_each_kind_of_foreign_write(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "class Mine:\n"
        "    def __init__(self, other):\n"
        "        self.a = 1\n"
        "        other.b = 2\n"
        "        other.c += 1\n"
        "        setattr(other, 'd', 3)\n"
        "        object.__setattr__(other, 'e', 4)\n"
        "        del other.f\n"
        "        self.child.g = 5\n"
        "        object.__setattr__(self, 'h', 6)\n"
        "        def later():\n"
        "            self.i = 7\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        new = cls.__new__(cls)\n"
        "        new.j = 8\n"
        "        return new\n"
        "def build(x):\n"
        "    made = Mine(x)\n"
        "    made.k = 9\n"
        "    bought = Foreign()\n"
        "    bought.l = 10\n"
        "    x.m = 11\n"
        "    return made\n",
        encoding="utf-8",
    )
    found = {f"{w.function}:{w.target}.{w.attribute}" for w in foreign_writes(tmp_path)}
    assert found == {
        "Mine.__init__:other.b",
        "Mine.__init__:other.c",
        "Mine.__init__:other.d",
        "Mine.__init__:other.e",
        "Mine.__init__:other.f",
        "Mine.__init__:self.child.g",
        "build:bought.l",
        "build:x.m",
    }
