"""Reading the values of configuration nodes: mappings, text, data, durations, alerts.

`ValueReader` turns `Node`s into the values the definitions' constructors take, and records
each problem with its file, line, job or group, and key instead of stopping at the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidJobError, Problem
from ..model.event import Event
from ..model.job import Dependence, Job, Message
from .values import DEPENDENCE_KEYS, MESSAGE_KEYS, parse_delay, unknown_key_message
from .yamlnodes import FLOAT, INT, MERGE, NULL, Node, YamlProblem, scalar_value

if TYPE_CHECKING:
    from ..model.templatereader import TemplateReader

__all__ = ["JobCache", "ValueReader", "lookup_line"]

JobCache = dict[str, tuple[str, Job, dict[str, int]]]
"""Jobs already read, by name: the text they were read from, the job, relative key lines."""


class Bad(Exception):
    """One problem with a value: message, 1-based line, key path (None: the caller's key)."""

    def __init__(self, message: str, line: int | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.key = message, line, key


def lookup_line(lines: dict[str, int], key: str | None) -> int | None:
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return lines.get("")


@contextmanager
def _at_key(key: str) -> Iterator[None]:
    """A problem with a value inside is one of `key`."""
    try:
        yield
    except Bad as exc:
        raise Bad(exc.message, exc.line, key) from None


def _unknown_key(key: str, known: tuple[str, ...]) -> str:
    if key.lower() == "password" and "password_env" in known:
        return (
            "passwords are never stored in the file: name the environment "
            "variable that holds it with password_env"
        )
    return unknown_key_message(key, known)


class ValueReader:
    """Reads the values of a configuration file's nodes, collecting located problems."""

    def __init__(
        self, filename: str, base_dir: Path, templates: TemplateReader | None = None
    ) -> None:
        self.filename = filename
        self.base_dir = base_dir
        self._templates = templates
        self.problems: list[Problem] = []
        self.job_lines: dict[str, dict[str, int]] = {}
        self.group_lines: dict[str, dict[str, int]] = {}
        self.alert_lines: list[tuple[int, dict[str, Any]]] = []
        self.cache: JobCache | None = None
        self.new_cache: JobCache = {}
        self.text_lines: list[str] = []

    @property
    def templates(self) -> TemplateReader:
        """Reads and compiles the alert templates (a store passes its own: read once). Made
        when first needed: reading a file without alerts imports no template reader."""
        if self._templates is None:
            from ..model.templatereader import TemplateReader

            self._templates = TemplateReader(self.base_dir)
        return self._templates

    def add(self, message: str, line: int | None, **where: Any) -> None:
        self.problems.append(Problem(message, self.filename, line, **where))

    # -- mappings ------------------------------------------------------------------------

    def entries(
        self,
        node: Node,
        known: tuple[str, ...] | None,
        lines: dict[str, int] | None = None,
        prefix: str = "",
        **where: Any,
    ) -> dict[str, tuple[Node, Node]] | None:
        """The entries of a mapping by key text, merges (``<<: *x``) applied. Reports
        duplicate and unknown keys (``known`` None: any key). Null is an empty mapping."""
        if node.is_null:
            return {}
        if node.kind != "map":
            what = prefix.rstrip(".") or "the file"
            self.add(f"{what} must be a mapping of keys to values", node.lineno, **where)
            return None
        out, merges = self._own_entries(node, known, prefix, where)
        for merge in merges:
            self._merge(out, merge, known, prefix, where)
        if lines is not None:
            for key, (key_node, _) in out.items():
                lines[prefix + key] = key_node.lineno
        return out

    def _own_entries(
        self, node: Node, known: tuple[str, ...] | None, prefix: str, where: dict[str, Any]
    ) -> tuple[dict[str, tuple[Node, Node]], list[Node]]:
        """The entries written in mapping `node` itself, and the values of its merge keys."""
        out: dict[str, tuple[Node, Node]] = {}
        merges: list[Node] = []
        for key_node, value in node.pairs:
            if key_node.kind == "scalar" and key_node.tag == MERGE:
                merges.append(value)
            elif self._good_key(key_node, out, known, prefix, where):
                out[key_node.value] = (key_node, value)
        return out, merges

    def _good_key(
        self,
        key_node: Node,
        out: dict[str, tuple[Node, Node]],
        known: tuple[str, ...] | None,
        prefix: str,
        where: dict[str, Any],
    ) -> bool:
        """Whether `key_node` is a plain, known key not in `out` yet; else reports it."""
        if key_node.kind != "scalar":
            self.add("a key must be plain text", key_node.lineno, **where)
            return False
        key = key_node.value
        if key in out:
            first = out[key][0].lineno
            self.add(
                f"key {key!r} appears twice (lines {first} and {key_node.lineno})",
                key_node.lineno,
                **where,
                key=prefix + key,
            )
            return False
        if known is not None and key not in known:
            self.add(_unknown_key(key, known), key_node.lineno, **where, key=prefix + key)
            return False
        return True

    def _merge(
        self,
        out: dict[str, tuple[Node, Node]],
        merge: Node,
        known: tuple[str, ...] | None,
        prefix: str,
        where: dict[str, Any],
    ) -> None:
        """Add the entries of the mappings merged by ``<<: value``, those of `out` winning."""
        for source in merge.items if merge.kind == "seq" else [merge]:
            if source.kind != "map":
                self.add("'<<' merges mappings only", source.lineno, **where)
                continue
            merged = self.entries(source, known, None, prefix, **where) or {}
            for key, pair in merged.items():
                out.setdefault(key, pair)

    @staticmethod
    def given(fields: dict[str, tuple[Node, Node]], key: str) -> Node | None:
        """The value of `key` in `fields`; None when it is missing or null."""
        pair = fields.get(key)
        return None if pair is None or pair[1].is_null else pair[1]

    # -- values --------------------------------------------------------------------------

    @staticmethod
    def text(node: Node, key: str) -> str:
        """Any scalar as the text written (``8080`` and ``yes`` stay text); not null."""
        if node.kind != "scalar" or node.tag == NULL:
            what = (
                "null"
                if node.kind == "scalar"
                else f"a {'list' if node.kind == 'seq' else 'mapping'}"
            )
            raise Bad(f"{key} must be text, not {what}", node.lineno)
        return node.value

    @staticmethod
    def scalar(node: Node, key: str) -> Any:
        if node.kind != "scalar":
            kind = "a list" if node.kind == "seq" else "a mapping"
            raise Bad(f"{key} must be a single value, not {kind}", node.lineno)
        try:
            return scalar_value(node)
        except YamlProblem as exc:
            raise Bad(exc.message, node.lineno) from None

    def data(self, node: Node, key: str) -> Any:
        """Plain data (for ``args``): scalars by their YAML type, lists, text-keyed maps."""
        if node.kind == "scalar":
            return self.scalar(node, key)
        if node.kind == "seq":
            return [self.data(item, f"{key}.{i}") for i, item in enumerate(node.items)]
        out: dict[str, Any] = {}
        for key_node, value in node.pairs:
            if key_node.kind != "scalar" or key_node.tag == MERGE:
                raise Bad(f"{key}: keys must be plain text", key_node.lineno)
            out[key_node.value] = self.data(value, f"{key}.{key_node.value}")
        return out

    def command(self, node: Node) -> str | tuple[str, ...]:
        if node.kind == "seq":
            return tuple(self.text(item, "every argument of command") for item in node.items)
        return self.text(node, "command")

    def interval(self, node: Node) -> str:
        if node.kind == "scalar" and node.tag in (INT, FLOAT):
            raise Bad(
                f"interval needs a unit: write e.g. '{node.value} seconds' or '{node.value} days'",
                node.lineno,
            )
        return self.text(node, "interval")

    def env(self, node: Node, lines: dict[str, int], where: dict[str, Any]) -> Any:
        fields = self.entries(node, None, lines, "env.", **where)
        if fields is None:
            raise Bad("env must be a mapping of variable names to text", node.lineno)
        return {k: ("" if v.is_null else self.text(v, f"env.{k}")) for k, (_, v) in fields.items()}

    def dependence(self, node: Node, lines: dict[str, int], where: dict[str, Any]) -> Any:
        kwargs: dict[str, Any] = {}
        if node.kind == "scalar":
            kwargs["job_name"] = self.text(node, "dependence")
            return self._dependence(kwargs, lines)
        fields = self.entries(node, DEPENDENCE_KEYS, lines, "dependence.", **where)
        if fields is None:
            raise Bad("dependence must be {job: name, status: successful, delay: 10s}")
        for key, (_, value) in fields.items():
            if value.is_null:
                continue
            try:
                if key == "job":
                    kwargs["job_name"] = self.text(value, "dependence.job")
                elif key == "status":
                    kwargs["event"] = self.text(value, "dependence.status")
                else:
                    kwargs["delay"] = parse_delay(self.scalar(value, "delay"))
            except (Bad, ValueError) as exc:
                message = exc.message if isinstance(exc, Bad) else str(exc)
                raise Bad(message, value.lineno, f"dependence.{key}") from None
        if "job_name" not in kwargs:
            raise Bad("dependence needs job: the name of the job it follows")
        return self._dependence(kwargs, lines)

    @staticmethod
    def _dependence(kwargs: dict[str, Any], lines: dict[str, int]) -> Dependence:
        try:
            return Dependence(**kwargs)
        except InvalidJobError as exc:
            problem = exc.problem
            raise Bad(problem.message, lookup_line(lines, problem.key), problem.key) from None

    # -- messages and templates ----------------------------------------------------------

    def template(self, source: str, node: Node, name: str) -> None:
        from ..model.templatereader import TemplateError

        try:
            self.templates.inline(source, name)
        except TemplateError as exc:
            line = node.lineno
            if exc.line is not None and node.style in ("|", ">"):
                line += exc.line  # a block scalar's text starts on the line after its key
            raise Bad(str(exc), line) from None

    def template_file(self, name: str, node: Node) -> None:
        try:
            self.templates.file(name)
        except ValueError as exc:  # TemplateError included: the file is named in it
            raise Bad(str(exc), node.lineno) from None

    def messages(
        self, node: Node, lines: dict[str, int], where: dict[str, Any]
    ) -> tuple[dict[Event, Message], bool]:
        """The alerts of a job or group, and whether all of them were valid."""
        fields = self.entries(node, None, None, "messages.", **where)
        if fields is None:
            return {}, False
        out: dict[Event, Message] = {}
        ok = True
        for event_text, (key_node, value) in fields.items():
            try:
                event = Event.parse(event_text)
            except ValueError as exc:
                self.add(str(exc), key_node.lineno, **where, key=f"messages.{event_text}")
                ok = False
                continue
            prefix = f"messages.{event}."
            lines[prefix.rstrip(".")] = key_node.lineno
            try:
                out[event] = self.message(value, prefix, lines, where)
            except Bad as exc:
                line = exc.line or lookup_line(lines, exc.key or prefix.rstrip("."))
                self.add(exc.message, line, **where, key=exc.key or prefix.rstrip("."))
                ok = False
        if out:
            self.alert_lines.append((lines.get("messages", node.lineno), dict(where)))
        return out, ok

    def message(
        self, node: Node, prefix: str, lines: dict[str, int], where: dict[str, Any]
    ) -> Message:
        fields = self.entries(node, MESSAGE_KEYS, lines, prefix, **where)
        if fields is None:
            raise Bad("an alert is {recipients: [...], template: ... or template_file: ...}")
        recipients_node, recipients = self._recipients(fields, prefix)
        texts = self._template_texts(fields, prefix)
        try:
            message = Message(
                recipients,
                template=texts["template"][0] if "template" in texts else None,
                template_file=texts["template_file"][0] if "template_file" in texts else None,
            )
        except ValueError as exc:
            raise Bad(str(exc), recipients_node.lineno, prefix + "recipients") from None
        for name, (text, value) in texts.items():
            with _at_key(prefix + name):
                if name == "template":
                    self.template(text, value, prefix + name)
                else:
                    self.template_file(text, value)
        return message

    def _recipients(self, fields: dict[str, tuple[Node, Node]], prefix: str) -> tuple[Node, Any]:
        """An alert's recipients: its node, and the text or tuple of texts it holds."""
        node = self.given(fields, "recipients")
        if node is None:
            raise Bad("an alert needs recipients", key=prefix + "recipients")
        with _at_key(prefix + "recipients"):
            if node.kind == "seq":
                return node, tuple(self.text(r, "a recipient") for r in node.items)
            return node, self.text(node, "recipients")

    def _template_texts(
        self, fields: dict[str, tuple[Node, Node]], prefix: str
    ) -> dict[str, tuple[str, Node]]:
        """An alert's template or template file: its key, its text and node."""
        texts: dict[str, tuple[str, Node]] = {}
        for name in ("template", "template_file"):
            value = self.given(fields, name)
            if value is not None:
                with _at_key(prefix + name):
                    texts[name] = (self.text(value, name), value)
        if len(texts) == 2:
            raise Bad("give template or template_file, not both", key=prefix + "template_file")
        return texts

    # -- jobs ----------------------------------------------------------------------------
