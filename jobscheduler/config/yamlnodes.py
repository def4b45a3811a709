"""Safe YAML reading for the configuration file: parser events to a tree of located nodes.

Nothing here builds a Python object from a tag. The document is read as parser events (libyaml's
C parser when PyYAML has it, else PyYAML's pure parser) and composed into `Node` trees that keep,
for every node, where it starts and where its content ends — the loader names lines with them,
and the writer splices text with them.

Hostile input is refused early and with a clear message:

- any tag but the standard ``str``, ``int``, ``float``, ``bool``, ``null``, ``timestamp``,
  ``map``, ``seq`` (``!!python/...`` tags in particular) is an error;
- aliases are not expanded; each node knows the size its subtree would have once expanded, so
  an expansion bomb ("billion laughs") is refused in time proportional to the file, not to
  the expansion (cap: `MAX_NODES`);
- nesting deeper than `MAX_DEPTH`, a recursive alias, more than one document are errors.

The size cap on the text itself (`MAX_BYTES`) is applied by the loader before parsing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

# PyYAML's pure-Python reader compiles, when imported, a pattern of the characters a YAML
# document may not hold, written as the complement of the allowed ones: compiling that set over
# all of Unicode was a sixth of `jobscheduler validate`'s start, though the file is read by
# libyaml's parser, which never uses it. The same set written as the few ranges it holds
# compiles twelve times faster: PyYAML is imported with that pattern compiled in its place.
_PYYAML_NOT_PRINTABLE = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_NOT_PRINTABLE = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"


def _import_pyyaml() -> None:
    """Import PyYAML, its pattern of characters not allowed compiled from `_NOT_PRINTABLE`
    (the very same set). Nothing is done when PyYAML is imported already; `re.compile` is
    swapped only while PyYAML's modules run, and changes that one pattern only."""
    if "yaml" in sys.modules:
        return
    compile_ = re.compile

    def compile_equivalent(pattern: Any, flags: Any = 0) -> Any:
        if pattern == _PYYAML_NOT_PRINTABLE and not flags:
            pattern = _NOT_PRINTABLE
        return compile_(pattern, flags)

    re.compile = compile_equivalent
    try:
        import yaml  # noqa: F401
    finally:
        re.compile = compile_


_import_pyyaml()

import yaml  # noqa: E402  (imported by _import_pyyaml already)
from yaml.constructor import SafeConstructor  # noqa: E402
from yaml.resolver import Resolver  # noqa: E402

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "Node",
    "YamlProblem",
    "compose",
    "resolve_tag",
    "scalar_value",
]

MAX_BYTES = 32 * 1024 * 1024
"""The largest configuration file read, in bytes (a 100,000-job file is 12 to 15 MiB)."""
MAX_NODES = 2_000_000
"""The most nodes a document may hold once its aliases are expanded (a 100,000-job file has
1.3 million; composing costs about 220 bytes per node written out, so the cap also bounds the
memory a file can take: about 440 MB)."""
MAX_DEPTH = 64
"""The deepest nesting of collections allowed."""

# The C parser when libyaml is available: faster, and it only parses (it builds nothing).
_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVER = Resolver()


_RESOLVED: dict[tuple[str, bool], str] = {}


def _resolve(value: str, implicit: tuple[bool, bool]) -> str:
    """The tag of an untagged scalar; remembered, since values repeat (``1 day``, ``true``)."""
    key = (value, implicit[0])
    tag = _RESOLVED.get(key)
    if tag is None:
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, implicit)  # type: ignore[no-untyped-call]
        if len(value) <= 64:
            if len(_RESOLVED) > 4096:
                _RESOLVED.clear()
            _RESOLVED[key] = tag
    return tag


def resolve_tag(value: str) -> str:
    """The tag PyYAML reads a plain scalar `value` as (``...:str``, ``...:int``…)."""
    return _resolve(value, (True, False))


_CONSTRUCTOR = SafeConstructor()
_PREFIX = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, TIMESTAMP, MERGE = (
    _PREFIX + name for name in ("str", "int", "float", "bool", "null", "timestamp", "merge")
)
_SCALAR_TAGS = frozenset({STR, INT, FLOAT, BOOL, NULL, TIMESTAMP, MERGE})
_SEQ_TAG, _MAP_TAG = _PREFIX + "seq", _PREFIX + "map"


class YamlProblem(Exception):
    """A problem in the YAML text itself, at a 1-based `line` (None: the whole file)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class Node:
    """A YAML node with its place in the text.

    `line`/`col`: where it starts (0-based). `end_line`/`end_col`: the line of its last
    character of content and the column just after it (trailing blank lines of a block scalar
    and comments after a block collection are not content). `alias` is True for a ``*name``
    reference, which shares `value`/`items`/`pairs` with its anchored node; `anchor` is the
    name an anchored node defines or an alias refers to. `size` is the
    number of nodes of the subtree once aliases are expanded.
    """

    __slots__ = (
        "alias",
        "anchor",
        "col",
        "end_col",
        "end_line",
        "flow",
        "items",
        "kind",
        "line",
        "pairs",
        "size",
        "style",
        "tag",
        "value",
    )

    def __init__(
        self,
        kind: str,
        tag: str,
        line: int,
        col: int,
        value: str = "",
        style: str | None = None,
        flow: bool = False,
    ) -> None:
        self.kind = kind  # "scalar" | "seq" | "map"
        self.tag = tag
        self.line = line
        self.col = col
        self.end_line = line
        self.end_col = col
        self.value = value
        self.style = style
        self.flow = flow
        self.items: list[Node] = [] if kind == "seq" else _NONE
        self.pairs: list[tuple[Node, Node]] = [] if kind == "map" else _NO_PAIRS
        self.size = 1
        self.alias = False
        self.anchor: str | None = None  # the &name it defines, or the *name it refers to

    @property
    def lineno(self) -> int:
        """The 1-based line where the node starts."""
        return self.line + 1

    @property
    def is_null(self) -> bool:
        return self.tag == NULL


_NONE: list[Node] = []  # shared by scalars and maps, never appended to
_NO_PAIRS: list[tuple[Node, Node]] = []


def _tag_problem(tag: str, line: int) -> YamlProblem:
    if tag.startswith(_PREFIX + "python/") or tag.startswith("!python/"):
        return YamlProblem(
            f"tag {tag!r} refused: the file is read with a safe loader that never builds "
            "Python objects",
            line + 1,
        )
    return YamlProblem(
        f"tag {tag!r} not supported (only plain YAML: text, numbers, booleans, null, "
        "timestamps, lists and mappings)",
        line + 1,
    )


def _yaml_error_problem(exc: yaml.YAMLError, text: str) -> YamlProblem:
    if isinstance(exc, yaml.reader.ReaderError):  # a character not allowed: no mark, a place
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        return YamlProblem(f"YAML syntax: {exc.reason} (#x{exc.character:04x})", line)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem:
        message = f"{context}, {problem}" if context else str(problem)
    else:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return YamlProblem(f"YAML syntax: {message}", None if mark is None else mark.line + 1)


class _Composer:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.anchors: dict[str, Node] = {}
        self.open_anchors: set[str] = set()
        # The collections being built; for each, its anchor and a pending mapping key.
        self.stack: list[Node] = []
        self.frames: list[tuple[str | None, list[Node]]] = []
        self.root: Node | None = None
        self.documents = 0
        self.dispatch: dict[type, Callable[[Any], None]] = {
            yaml.ScalarEvent: self._scalar,
            yaml.MappingStartEvent: self._start,
            yaml.SequenceStartEvent: self._start,
            yaml.MappingEndEvent: self._end,
            yaml.SequenceEndEvent: self._end,
            yaml.AliasEvent: self._alias,
            yaml.DocumentStartEvent: self._document,
        }

    def compose(self, text: str) -> Node | None:
        dispatch = self.dispatch
        scalar_event = yaml.ScalarEvent
        scalar = self._scalar
        try:
            loader = _LOADER(text)  # the pure reader checks the characters here
        except yaml.YAMLError as exc:
            raise _yaml_error_problem(exc, text) from None
        try:
            get = loader.get_event  # None once the stream has ended
            while (event := get()) is not None:
                if type(event) is scalar_event:  # most events: skip the lookup
                    scalar(event)
                else:
                    handler = dispatch.get(type(event))
                    if handler is not None:
                        handler(event)
        except yaml.YAMLError as exc:
            raise _yaml_error_problem(exc, text) from None
        except RecursionError:
            raise YamlProblem("nesting too deep", None) from None
        except UnicodeError as exc:
            raise YamlProblem(f"not valid text: {exc}", None) from None
        finally:
            loader.dispose()
        return self.root

    def _document(self, event: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            raise YamlProblem(
                "the file holds more than one YAML document (a second '---')",
                event.start_mark.line + 1,
            )

    def _start(self, event: Any) -> None:
        start = event.start_mark
        is_map = type(event) is yaml.MappingStartEvent
        default = _MAP_TAG if is_map else _SEQ_TAG
        tag = event.tag if event.tag not in (None, "!") else default
        if tag != default:
            raise _tag_problem(tag, start.line)
        if len(self.stack) >= MAX_DEPTH:
            raise YamlProblem(f"nesting deeper than {MAX_DEPTH} levels", start.line + 1)
        node = Node("map" if is_map else "seq", tag, start.line, start.column)
        node.flow = bool(event.flow_style)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(node)
        self.frames.append((event.anchor, []))

    def _end(self, event: Any) -> None:
        node = self.stack.pop()
        anchor, _ = self.frames.pop()
        if node.flow:
            end = event.end_mark
            node.end_line, node.end_col = end.line, end.column
        if anchor is not None:
            self.open_anchors.discard(anchor)
            self.anchors[anchor] = node
            node.anchor = anchor
        self._add(node)

    def _scalar(self, event: Any) -> None:
        start, end = event.start_mark, event.end_mark
        tag = self._scalar_tag(event)
        node = Node("scalar", tag, start.line, start.column, event.value, event.style)
        if event.style == "|" or event.style == ">":
            node.end_line, node.end_col = self._block_scalar_end(start, end)
        else:
            node.end_line, node.end_col = end.line, end.column
        if event.anchor is not None:
            self.anchors[event.anchor] = node
            node.anchor = event.anchor
        self._add(node)

    def _scalar_tag(self, event: Any) -> str:
        """The scalar's tag, resolved when it has none; a tag not allowed is a problem."""
        tag: str | None = event.tag
        if tag is None:
            tag = self._implicit_tag(event)
        elif tag == "!":
            tag = STR
        if tag not in _SCALAR_TAGS or (tag == MERGE and event.tag is not None):
            raise _tag_problem(tag, event.start_mark.line)
        return tag

    def _implicit_tag(self, event: Any) -> str:
        """The tag of a scalar written without one."""
        frames = self.frames
        if frames and not frames[-1][1] and self.stack[-1].kind == "map":
            # A mapping key is read as text whatever it looks like; only '<<' matters.
            return MERGE if event.value == "<<" and not event.style else STR
        return _resolve(event.value, event.implicit)

    def _block_scalar_end(self, start: Any, end: Any) -> tuple[int, int]:
        """A block scalar's last line with text and its end on it. Its end mark lies past its
        trailing blank lines: stepping back to the last line with text, blank separator lines
        are not counted as content (unless '+' keeps them in the value)."""
        lines = self.lines
        line = min(end.line if end.column > 0 else end.line - 1, len(lines) - 1)
        if not self._keeps(start):
            while line > start.line and not lines[line].strip():
                line -= 1
        line = max(line, start.line)
        return line, len(lines[line].rstrip()) if line >= 0 else 0

    def _keeps(self, start: Any) -> bool:
        """Whether the block scalar starting at `start` has the '+' (keep) chomping indicator."""
        if start.line >= len(self.lines):
            return False
        header = self.lines[start.line][start.column :].split("#", 1)[0].split()
        return bool(header) and "+" in header[0]

    def _alias(self, event: Any) -> None:
        name = event.anchor
        line = event.start_mark.line
        if name in self.open_anchors:
            raise YamlProblem(f"alias *{name} refers to a node that contains it", line + 1)
        target = self.anchors.get(name)
        if target is None:
            raise YamlProblem(f"alias *{name} has no anchor &{name} before it", line + 1)
        # An alias occupies one place on one line, like a flow collection.
        node = Node(target.kind, target.tag, line, event.start_mark.column, target.value)
        node.style, node.flow, node.alias, node.anchor = target.style, True, True, name
        node.end_line, node.end_col = event.end_mark.line, event.end_mark.column
        node.items, node.pairs, node.size = target.items, target.pairs, target.size
        self._add(node)

    def _add(self, node: Node) -> None:
        if not self.stack:
            self.root = node
            return
        parent = self.stack[-1]
        parent.size += node.size
        if parent.size > MAX_NODES:
            raise YamlProblem(
                f"the document expands to more than {MAX_NODES:,} nodes (an alias expansion bomb?)",
                node.line + 1,
            )
        if not parent.flow and (
            node.end_line > parent.end_line
            or (node.end_line == parent.end_line and node.end_col > parent.end_col)
        ):
            parent.end_line, parent.end_col = node.end_line, node.end_col
        if parent.kind == "seq":
            parent.items.append(node)
            return
        pending = self.frames[-1][1]
        if pending:
            parent.pairs.append((pending.pop(), node))
        else:
            pending.append(node)


def compose(text: str) -> Node | None:
    """The document of `text` as a `Node` tree; None for a document with no content.

    Raises `YamlProblem` (with a 1-based line when known) for a syntax error, a refused tag,
    an alias problem or a cap exceeded.
    """
    return _Composer(text.split("\n")).compose(text)


def scalar_value(node: Node) -> Any:
    """The value of a scalar node as YAML reads it: str, int, float, bool, None, datetime or
    date. Raises `YamlProblem` for a value its tag cannot hold (``!!int abc``, 30 February)."""
    if node.tag == STR:
        return node.value
    if node.tag == MERGE:
        return "<<"
    try:
        construct = SafeConstructor.yaml_constructors[node.tag]
        value = construct(_CONSTRUCTOR, yaml.ScalarNode(node.tag, node.value))
    except Exception as exc:  # PyYAML raises many kinds for a malformed scalar
        raise YamlProblem(
            f"{node.value!r} is not a valid {node.tag[len(_PREFIX) :]}: {exc}", node.lineno
        ) from None
    if isinstance(value, datetime | date | str | int | float | bool) or value is None:
        return value
    raise YamlProblem(f"unexpected value {node.value!r}", node.lineno)  # pragma: no cover
