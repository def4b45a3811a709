"""Writing API changes into a hand-written file while keeping what did not change, verbatim.

PyYAML drops comments when it writes, so the writer does not re-dump the file: it edits the
text. The node marks of the parsed file say which lines hold each section, job, group and key.
A job or group that did not change keeps its text, comments and all. A changed one has only its
changed keys rewritten (a one-line key keeps its trailing comment); a removed one is cut out
with the comment lines directly above it; a new one is appended at the end of its section,
indented like its neighbours.

`splice` returns None when the text cannot be edited that way (flow-style sections, merge keys,
several keys on one line, unusual line breaks); the caller then writes the whole file anew. The
caller also parses the result and compares it with the catalog it meant to write, so that a
splice that would change meaning is never written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..model.catalog import Catalog
from .dump import (
    dump_config,
    email_entries,
    group_entries,
    job_entries,
    render,
    same_entries,
    section_lines,
)
from .load import Document
from .yamlnodes import MERGE, Node

__all__ = ["splice"]

_UNUSUAL_BREAKS = re.compile("\r(?!\n)|[\x85\u2028\u2029]")
_MISSING = object()

Edit = tuple[int, int, list[str]]  # replace lines[start:end] with these lines


@dataclass
class _Entry:
    key: str
    key_node: Node
    value: Node
    first: int  # the key's line (0-based)
    last: int  # the last line of the value's content
    lead: int  # the first comment line directly above the key (== first when none)


def _block_entries(node: Node, lines: list[str]) -> list[_Entry] | None:
    """The entries of a block mapping with one key per line and the lines each occupies."""
    if node.kind != "map" or node.flow or node.alias:
        return None
    entries: list[_Entry] = []
    for key_node, value in node.pairs:
        above = entries[-1].last if entries else None
        if not _plain_key_line(key_node, lines, above):
            return None
        first = key_node.line
        last = max(first, value.end_line)
        lead = first if above is None else _comment_lead(lines, first, above)
        entries.append(_Entry(key_node.value, key_node, value, first, last, lead))
    return entries


def _plain_key_line(key_node: Node, lines: list[str], above: int | None) -> bool:
    """Whether `key_node` is a plain scalar key that starts its own line below line `above`."""
    if key_node.kind != "scalar" or key_node.tag == MERGE or key_node.alias:
        return False
    first = key_node.line
    if above is not None and first <= above:
        return False
    return first < len(lines) and not lines[first][: key_node.col].strip()


def _comment_lead(lines: list[str], first: int, above: int) -> int:
    """The first of the comment lines directly above line `first` (and below line `above`)."""
    lead = first
    while lead - 1 > above and lines[lead - 1].lstrip().startswith("#"):
        lead -= 1
    return lead


def _kept_in_order(
    children: list[_Entry], old: Mapping[str, Any], new: Mapping[str, Any], added: list[str]
) -> bool:
    """Whether the file lists the old items in order and the new ones keep it, the added ones
    last: only then can the section be edited item by item."""
    kept = [name for name in old if name in new]
    return bool(new) and list(new) == kept + added and [c.key for c in children] == list(old)


def _inner_step(outer: _Entry, first: _Entry, step: int) -> int:
    """The indentation step inside `outer`, whose first nested key is `first`."""
    inner = first.key_node.col - outer.key_node.col
    return inner if inner > 0 else step


def _strip(rendered: list[str]) -> list[str]:
    return [line.rstrip("\n") for line in rendered]


def _trailing_comment(line: str, col: int) -> str | None:
    rest = line[col:].rstrip("\r").lstrip().lstrip(":").lstrip()
    return rest if rest.startswith("#") else None


class _Splicer:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.edits: list[Edit] = []

    def delete(self, entry: _Entry) -> None:
        start, end = entry.lead, entry.last + 1
        before_blank = start > 0 and not self.lines[start - 1].strip()
        after_blank = end >= len(self.lines) or not self.lines[end].strip()
        if before_blank and after_blank:
            start -= 1  # do not leave two blank lines where the entry was
        self.edits.append((start, end, []))

    def replace(self, entry: _Entry, data: Any, step: int) -> None:
        new = _strip(render({entry.key: data}, entry.key_node.col, step))
        old_first = self.lines[entry.first]
        if entry.first == entry.last and len(new) == 1:
            comment = _trailing_comment(old_first, entry.value.end_col)
            if comment:
                new[0] += "  " + comment
        elif len(new) > 1 and new[0].rstrip().endswith(":") and entry.value.line > entry.first:
            comment = _trailing_comment(old_first, entry.key_node.end_col)
            if comment:
                new[0] += "  " + comment
        self.edits.append((entry.first, entry.last + 1, new))

    def fields(self, entry: _Entry, old: dict[str, Any], new: dict[str, Any], step: int) -> bool:
        """Rewrite only the changed keys of `entry`'s block mapping; False if it is not one."""
        fields = _block_entries(entry.value, self.lines)
        if not fields:
            return False
        step = _inner_step(entry, fields[0], step)
        present = set()
        for field in fields:
            present.add(field.key)
            before, after = old.get(field.key, _MISSING), new.get(field.key, _MISSING)
            if before == after:
                continue
            if after is _MISSING:
                self.delete(field)
            else:
                self.replace(field, after, step)
        added = {k: v for k, v in new.items() if k not in present and old.get(k, _MISSING) != v}
        if added:
            self.edits.append(
                (
                    fields[-1].last + 1,
                    fields[-1].last + 1,
                    _strip(render(added, fields[0].key_node.col, step)),
                )
            )
        return True

    def rewrite(self, entry: _Entry, old: dict[str, Any], new: dict[str, Any], step: int) -> None:
        """Rewrite `entry`'s changed keys, or the whole entry when it is no block mapping."""
        if not self.fields(entry, old, new, step):
            self.replace(entry, new, step)

    def items(
        self,
        section: _Entry,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        entries: Callable[[Any], dict[str, Any]],
        step: int,
    ) -> None:
        """Edit a ``jobs:`` or ``groups:`` section item by item (or rewrite it whole)."""
        children = None if section.value.is_null else _block_entries(section.value, self.lines)
        added = [name for name in new if name not in old]
        if not children or not _kept_in_order(children, old, new, added):
            data = {name: entries(item) for name, item in new.items()}
            rendered = section_lines(section.key, data, step)
            self.edits.append(
                (section.first, section.last + 1, _indent(rendered, section.key_node.col))
            )
            return
        step = _inner_step(section, children[0], step)
        for child in children:
            self._edit_item(child, old, new, entries, step)
        if added:
            col = children[0].key_node.col
            self._append_items(
                children, [_strip(render({n: entries(new[n])}, col, step)) for n in added]
            )

    def _edit_item(
        self,
        child: _Entry,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        entries: Callable[[Any], dict[str, Any]],
        step: int,
    ) -> None:
        if child.key not in new:
            self.delete(child)
            return
        before, after = old[child.key], new[child.key]
        if before is after or before == after:
            return
        old_data, new_data = entries(before), entries(after)
        if old_data != new_data:
            self.rewrite(child, old_data, new_data, step)

    def _append_items(self, children: list[_Entry], blocks: list[list[str]]) -> None:
        """Append the new items' lines after the last item, separated like the items are."""
        separated = len(children) < 2 or not self.lines[children[1].lead - 1].strip()
        if not self.lines[children[-1].last].strip():
            separated = False  # a kept ('|+') block scalar would take the blank line
        lines: list[str] = []
        for block in blocks:
            if separated:
                lines.append("")
            lines.extend(block)
        point = children[-1].last + 1
        self.edits.append((point, point, lines))

    def apply(self, crlf: bool) -> list[str] | None:
        out: list[str] = []
        position = 0
        for start, end, new in sorted(self.edits, key=lambda e: (e[0], e[1])):
            if start < position:
                return None  # overlapping edits: give up, the caller rewrites the file
            out.extend(self.lines[position:start])
            out.extend(line + "\r" for line in new) if crlf else out.extend(new)
            position = end
        out.extend(self.lines[position:])
        return out


def _anchored(root: Node) -> list[Node]:
    """The anchored nodes that an alias refers to."""
    anchored: list[Node] = []
    used: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.alias:
            used.add(node.anchor or "")
            continue
        if node.anchor is not None:
            anchored.append(node)
        stack.extend(node.items)
        for key, value in node.pairs:
            stack.extend((key, value))
    return [node for node in anchored if node.anchor in used]


def _changes_an_anchor(splicer: _Splicer, root: Node) -> bool:
    """Whether an edit changes the text of an anchored node that an alias refers to: the
    entries using it would change too, so the file must be written anew."""
    anchored = _anchored(root)
    return any(_edit_touches(edit, node) for edit in splicer.edits for node in anchored)


def _edit_touches(edit: Edit, node: Node) -> bool:
    start, end, new = edit
    if start < end:
        return start <= node.end_line and node.line < end  # replaces some of its lines
    if node.line < start <= node.end_line:
        return True  # inserts lines inside it
    return start == node.end_line + 1 and node.kind != "scalar" and _extends_block(new, node)


def _extends_block(new: list[str], node: Node) -> bool:
    """Whether lines appended right after the block `node` are indented as part of it."""
    lines = [line for line in new if line.strip()]
    if not lines:
        return False
    indent = len(lines[0]) - len(lines[0].lstrip(" "))
    if node.kind == "map" and node.pairs:
        column = node.pairs[0][0].col
    else:
        column = node.items[0].col - 2 if node.items else node.col
    return indent >= column


def _indent(rendered: list[str], col: int) -> list[str]:
    pad = " " * col
    return [pad + line.rstrip("\n") if line.strip() else "" for line in rendered]


def _step(top: list[_Entry]) -> int:
    """The file's indentation step: how far the first nested block is indented."""
    for entry in top:
        value = entry.value
        if value.kind == "map" and not value.flow and not value.alias and value.pairs:
            inner = value.pairs[0][0].col - entry.key_node.col
            if inner > 0:
                return inner
    return 2


def splice(doc: Document, new: Catalog) -> str | None:
    """The text of `doc` edited to define `new`, or None when it cannot be edited in place."""
    text = doc.text
    if _UNUSUAL_BREAKS.search(text):
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if doc.root is None:
        return _fill_empty(lines, new)
    top = _top_entries(doc.root, lines)
    if top is None:
        return None
    splicer = _Splicer(lines)
    appended = _edit_sections(splicer, top, doc.catalog, new)
    if appended:
        _append_after(splicer, top[-1], appended)
    if "*" in text and _changes_an_anchor(splicer, doc.root):
        return None
    return _edited_text(text, splicer)


def _top_entries(root: Node, lines: list[str]) -> list[_Entry] | None:
    """The sections of the file: a block mapping whose keys start at column 0."""
    top = _block_entries(root, lines)
    if top is None or any(e.key_node.col for e in top):
        return None
    return top


def _edit_sections(splicer: _Splicer, top: list[_Entry], old: Catalog, new: Catalog) -> list[str]:
    """Edit the sections that changed; the lines of the new sections the file lacks."""
    step = _step(top)
    by_key = {entry.key: entry for entry in top}
    appended = _edit_email(splicer, by_key.get("email"), old, new, step)
    sections: list[
        tuple[str, Callable[[Any], dict[str, Any]], Mapping[str, Any], Mapping[str, Any]]
    ]
    sections = [
        ("jobs", job_entries, old.jobs, new.jobs),
        ("groups", group_entries, old.groups, new.groups),
    ]
    for name, entries, old_items, new_items in sections:
        appended += _edit_section(
            splicer, by_key.get(name), name, entries, old_items, new_items, step
        )
    return appended


def _fill_empty(lines: list[str], new: Catalog) -> str | None:
    """A file with no document (only comments and blank lines) keeps them above the new one."""
    if any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None  # a document marker or an explicit null: rewrite
    head = "\n".join(lines) + "\n\n" if lines else ""
    return head + dump_config(new)


def _edit_email(
    splicer: _Splicer, email: _Entry | None, old: Catalog, new: Catalog, step: int
) -> list[str]:
    """Edit the ``email:`` section; the lines to append when the file has none."""
    if same_entries(old.email, new.email, email_entries):
        return []
    if new.email is None:
        if email is not None:
            splicer.delete(email)
        return []
    data = email_entries(new.email)
    if email is None:
        return ["", *_strip(render({"email": data}, 0, step))]
    if email.value.is_null:
        rendered = _strip(render({"email": data}, 0, step))
        splicer.edits.append((email.first, email.last + 1, rendered))
    else:
        before = email_entries(old.email) if old.email is not None else {}
        splicer.rewrite(email, before, data, step)
    return []


def _edit_section(
    splicer: _Splicer,
    section: _Entry | None,
    name: str,
    entries: Callable[[Any], dict[str, Any]],
    old_items: Mapping[str, Any],
    new_items: Mapping[str, Any],
    step: int,
) -> list[str]:
    """Edit the ``jobs:`` or ``groups:`` section; the lines to append when the file has none."""
    if section is None:
        if not new_items:
            return []
        data = {key: entries(item) for key, item in new_items.items()}
        return ["", *_strip(section_lines(name, data, step))]
    if list(old_items) == list(new_items) and all(
        same_entries(old_items[k], new_items[k], entries) for k in new_items
    ):
        return []
    if not new_items and name == "groups":
        splicer.delete(section)
    else:
        splicer.items(section, old_items, new_items, entries, step)
    return []


def _append_after(splicer: _Splicer, last: _Entry, appended: list[str]) -> None:
    """Append new sections after the last one, before any comment, document end marker or
    blank line."""
    point = last.last + 1
    if not splicer.lines[point - 1].strip():
        appended = appended[1:]
    splicer.edits.append((point, point, appended))


def _edited_text(text: str, splicer: _Splicer) -> str | None:
    if not splicer.edits:
        return text
    lines = splicer.lines
    crlf = lines[0].endswith("\r") if lines else False  # new lines end like the file's
    result = splicer.apply(crlf)
    if result is None:
        return None
    return "\n".join(result) + "\n" if result else ""
