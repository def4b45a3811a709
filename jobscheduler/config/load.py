"""Reading the configuration file: YAML text to a checked `Catalog`, every problem located.

Single definitions are checked by their own constructors (`Job`, `Dependence`, `JobGroup`,
`Message`, `EmailConfiguration`), rules spanning jobs by `Catalog.problems()`; this module adds
the file and line of each problem, checks what only a file has (unknown keys, duplicate keys,
value types, templates and template files), and reports every problem of a file at once in
one `ConfigFileError`.

A key given an empty value (``timeout:`` or ``timeout: ~``) is the same as no key: the default.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigFileError, InvalidJobError, Problem
from ..model.catalog import Catalog
from ..model.event import Event
from ..model.job import JOB_OPTIONS, Job, JobGroup, Message
from ..model.joboptions import Form
from ..valueclass import replaced
from .policykeys import read_pause_after_failures, read_retry
from .reader import (
    Bad,
    JobCache,
    ValueReader,
    lookup_line,
)
from .values import (
    EMAIL_KEYS,
    GROUP_KEYS,
    JOB_KEYS,
    SMTP_KEYS,
    TOP_KEYS,
    parse_datetime,
    parse_duration,
    parse_unit_duration,
)
from .yamlnodes import MAX_BYTES, Node, YamlProblem
from .yamlnodes import compose as compose_yaml

if TYPE_CHECKING:
    from ..model.emailconfig import EmailConfiguration
    from ..model.templatereader import TemplateReader

__all__ = ["Document", "load_config", "parse_config", "parse_document", "read_config_text"]

T = TypeVar("T")


class Document:
    """A configuration text read without problems: the catalog, and where things are.

    `job_lines` / `group_lines` map a name to ``{key path: line}`` ("" is the name's line).
    """

    __slots__ = (
        "catalog",
        "email_line",
        "filename",
        "group_lines",
        "job_lines",
        "root",
        "text",
    )

    def __init__(
        self,
        text: str,
        root: Node | None,
        catalog: Catalog,
        filename: str,
        job_lines: dict[str, dict[str, int]] | None = None,
        group_lines: dict[str, dict[str, int]] | None = None,
        email_line: int | None = None,
    ) -> None:
        self.text = text
        self.root = root
        self.catalog = catalog
        self.filename = filename
        self.job_lines: dict[str, dict[str, int]] = {} if job_lines is None else job_lines
        self.group_lines: dict[str, dict[str, int]] = {} if group_lines is None else group_lines
        self.email_line = email_line


class _Reader(ValueReader):
    """Reads jobs, groups and the email section."""

    def job(self, name: str, key_node: Node, node: Node) -> Job | None:
        """The job defined at `node`, or None after reporting its problems.

        With a cache, a job whose text (from its name to its last line) is what it was at the
        previous parse, and refers to no anchor, is not read again.
        """
        if self.cache is None:
            return self._job(name, key_node, node)
        first = key_node.line
        chunk = "\n".join(self.text_lines[first : max(first, node.end_line) + 1])
        if "*" in chunk:
            return self._job(name, key_node, node)
        hit = self.cache.get(name)
        if hit is not None and hit[0] == chunk:
            job = hit[1]
            self.job_lines[name] = {key: line + first for key, line in hit[2].items()}
            if job.messages:
                self.alert_lines.append((key_node.lineno, {"job": name}))
        else:
            read = self._job(name, key_node, node)
            if read is None:
                return None
            job = read
            lines = {key: line - first for key, line in self.job_lines[name].items()}
            hit = (chunk, job, lines)
        self.new_cache[name] = hit
        return job

    def _job(self, name: str, key_node: Node, node: Node) -> Job | None:
        where: dict[str, Any] = {"job": name}
        lines = self.job_lines.setdefault(name, {"": key_node.lineno})
        if node.is_null:
            self.add("the job has no definition", key_node.lineno, job=name)
            return None
        fields = self.entries(node, JOB_KEYS, lines, **where)
        if fields is None:
            return None
        kwargs: dict[str, Any] = {}
        failed: set[str] = set()
        for key, (_, value) in fields.items():
            if not value.is_null:
                self._job_value(name, key, value, lines, kwargs, failed)
        try:
            return Job(name, **kwargs)
        except InvalidJobError as exc:
            for problem in exc.problems:
                top = (problem.key or "").split(".")[0]
                if top in failed:
                    continue  # reported already, from the value itself
                line = lookup_line(lines, problem.key)
                self.problems.append(replaced(problem, file=self.filename, line=line, job=name))
            return None

    def _job_value(
        self,
        name: str,
        key: str,
        value: Node,
        lines: dict[str, int],
        kwargs: dict[str, Any],
        failed: set[str],
    ) -> None:
        """Read the job key `key` into `kwargs` as its field's form says; a value with
        problems (reported here) is named in `failed`."""
        try:
            kwargs[key] = _READERS[_FORMS[key]](self, key, value, lines, {"job": name})
        except _Reported as reported:
            kwargs[key] = reported.value
            failed.add(key)
        except (Bad, ValueError) as exc:
            bad = exc if isinstance(exc, Bad) else Bad(str(exc), value.lineno)
            problem_key = bad.key or key
            line = bad.line or lookup_line(lines, problem_key)
            self.add(bad.message, line, job=name, key=problem_key)
            failed.add(key)

    # -- groups and email ----------------------------------------------------------------

    def group(self, name: str, key_node: Node, node: Node) -> JobGroup | None:
        where: dict[str, Any] = {"group": name}
        lines = self.group_lines.setdefault(name, {"": key_node.lineno})
        fields = self.entries(node, GROUP_KEYS, lines, **where)
        if fields is None:
            return None
        job_names: tuple[str, ...] = ()
        messages: dict[Event, Message] = {}
        ok = True
        jobs_node = self.given(fields, "jobs")
        if jobs_node is not None:
            try:
                job_names = self._group_jobs(jobs_node, lines)
            except Bad as exc:
                self.add(exc.message, exc.line, group=name, key="jobs")
                ok = False
        messages_node = self.given(fields, "messages")
        if messages_node is not None:
            messages, ok_messages = self.messages(messages_node, lines, where)
            ok &= ok_messages
        try:
            group = JobGroup(name, job_names, messages)
        except InvalidJobError as exc:
            if ok or exc.problem.key != "jobs":
                for problem in exc.problems:
                    line = lookup_line(lines, problem.key)
                    self.problems.append(replaced(problem, file=self.filename, line=line))
            return None
        return group if ok else None

    def _group_jobs(self, jobs_node: Node, lines: dict[str, int]) -> tuple[str, ...]:
        """A group's ``jobs:`` list, each name's line kept."""
        if jobs_node.kind != "seq":
            raise Bad("jobs must be a list of job names", jobs_node.lineno)
        job_names = tuple(self.text(item, "a job name") for item in jobs_node.items)
        for i, item in enumerate(jobs_node.items):
            lines.setdefault(f"jobs.{item.value}", item.lineno)
            lines[f"jobs.{i}"] = item.lineno
        return job_names

    def email(self, node: Node) -> EmailConfiguration | None:
        lines: dict[str, int] = {"": node.lineno}
        fields = self.entries(node, EMAIL_KEYS, lines, "email.")
        if fields is None:
            return None
        values, smtp, ok = self._email_values(fields, lines)
        if "default_template" in fields and "default_template_file" in fields:
            self.add(
                "give default_template or default_template_file, not both",
                lines.get("email.default_template_file"),
                key="email.default_template_file",
            )
            return None
        if "from_address" not in values:
            if ok:
                self.add("email needs from_address", node.lineno, key="email.from_address")
            return None
        from ..model.emailconfig import EmailConfiguration, SmtpSettings  # an `email:` only

        try:
            email = EmailConfiguration(smtp=SmtpSettings(**smtp), **values)
        except (ValueError, TypeError) as exc:
            key = _guess_key(str(exc), "email.smtp." if "smtp" in str(exc) else "email.")
            self.add(str(exc), lookup_line(lines, key) or node.lineno, key=key)
            return None
        return email if ok else None

    def _email_values(
        self, fields: dict[str, tuple[Node, Node]], lines: dict[str, int]
    ) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """The ``email:`` section's values, its ``smtp:`` values, and whether all were valid."""
        values: dict[str, Any] = {}
        smtp: dict[str, Any] = {}
        ok = True
        for key, (_, value) in fields.items():
            if value.is_null:
                continue
            try:
                if key == "smtp":
                    smtp = self.smtp(value, lines)
                else:
                    self._email_value(key, value, values)
            except (Bad, ValueError) as exc:
                bad = exc if isinstance(exc, Bad) else Bad(str(exc), value.lineno)
                self.add(bad.message, bad.line or value.lineno, key=f"email.{bad.key or key}")
                ok = False
        return values, smtp, ok

    def _email_value(self, key: str, value: Node, values: dict[str, Any]) -> None:
        values[key] = self.text(value, key)
        if key == "default_template_file":
            values["default_template"] = self.templates.file(values[key]).source
        elif key in ("subject", "default_template"):
            self.template_compiles(values[key], value, key, key)

    def template_compiles(self, source: str, node: Node, name: str, key: str) -> None:
        try:
            self.template(source, node, name)
        except Bad as exc:
            raise Bad(exc.message, exc.line, key) from None

    def smtp(self, node: Node, lines: dict[str, int]) -> dict[str, Any]:
        fields = self.entries(node, SMTP_KEYS, lines, "email.smtp.")
        if fields is None:
            raise Bad("smtp must be a mapping such as {host: localhost, port: 25}", key="smtp")
        out: dict[str, Any] = {}
        for key, (_, value) in fields.items():
            if value.is_null:
                continue
            try:
                if key in ("port", "retries", "queue_size"):
                    out[key] = self.scalar(value, key)
                elif key == "timeout":
                    out[key] = parse_duration(self.scalar(value, key), "timeout").total_seconds()
                else:
                    out[key] = self.text(value, key)
            except (Bad, ValueError) as exc:
                message = exc.message if isinstance(exc, Bad) else str(exc)
                raise Bad(message, value.lineno, f"smtp.{key}") from None
        return out


def _duration_or_auto(value: Any, key: str) -> timedelta | str:
    """``auto``, or a duration as ``timeout`` takes it (`Form.DURATION_OR_AUTO`)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return parse_duration(value, key)
    except ValueError:
        raise ValueError(f"{key} must be a duration (10m, 1h30m) or auto, not {value!r}") from None


class _Reported(Exception):
    """A value read with problems already reported (alerts): kept, and its key failed."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def _messages(r: _Reader, key: str, n: Node, lines: dict[str, int], where: dict[str, Any]) -> Any:
    messages, ok = r.messages(n, lines, where)
    if not ok:
        raise _Reported(messages)
    return messages


_Read = Callable[[_Reader, str, Node, dict[str, int], dict[str, Any]], Any]

# How each form of job key is read (`Form`: a job field's form, declared with the field).
_READERS: dict[Form, _Read] = {
    Form.TEXT: lambda r, key, n, lines, where: r.text(n, key),
    Form.SCALAR: lambda r, key, n, lines, where: r.scalar(n, key),
    Form.DURATION: lambda r, key, n, lines, where: parse_duration(r.scalar(n, key), key),
    Form.UNIT_DURATION: lambda r, key, n, lines, where: parse_unit_duration(r.scalar(n, key), key),
    Form.DATETIME: lambda r, key, n, lines, where: parse_datetime(r.scalar(n, key), key),
    Form.COMMAND: lambda r, key, n, lines, where: r.command(n),
    Form.INTERVAL: lambda r, key, n, lines, where: r.interval(n),
    Form.DATA: lambda r, key, n, lines, where: r.data(n, key),
    Form.ENV: lambda r, key, n, lines, where: r.env(n, lines, where),
    Form.DEPENDENCE: lambda r, key, n, lines, where: r.dependence(n, lines, where),
    Form.RETRY: lambda r, key, n, lines, where: read_retry(r, n, lines, where),
    Form.PAUSE_AFTER_FAILURES: lambda r, key, n, lines, where: read_pause_after_failures(
        r, n, lines, where
    ),
    Form.MESSAGES: _messages,
    Form.DURATION_OR_AUTO: lambda r, key, n, lines, where: _duration_or_auto(r.scalar(n, key), key),
}
_FORMS = {option.name: option.form for option in JOB_OPTIONS}


def _guess_key(message: str, prefix: str) -> str:
    known = SMTP_KEYS if prefix.endswith("smtp.") else EMAIL_KEYS
    for key in known:
        if key in message:
            return prefix + key
    return prefix.rstrip(".")


def _sections(reader: _Reader, root: Node | None) -> Iterator[tuple[str, Node, Node]]:
    if root is None:
        return
    fields = reader.entries(root, TOP_KEYS)
    for name, (key_node, value) in (fields or {}).items():
        yield name, key_node, value


def parse_document(
    text: str,
    *,
    filename: str = "<string>",
    base_dir: Path | None = None,
    cache: JobCache | None = None,
    templates: TemplateReader | None = None,
) -> Document:
    """Read `text` completely: a `Document`, or `ConfigFileError` listing every problem.

    `cache` (a dict the caller keeps between parses) lets jobs whose text did not change be
    reused rather than read again; their template files are then not read again either. It
    is updated after a successful parse. `templates` reads the alert templates (default: a
    new reader for `base_dir`); a store passes its own, so what it read stays read.
    """
    with _gc_paused():
        return _parse_document(text, filename, base_dir, cache, templates)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (if it runs) while a file is read.

    Reading builds about a dozen objects per job and keeps them; none form cycles, yet each
    collection would traverse the growing heap again: half the time of reading a
    100,000-job file. Collection resumes afterwards, even on an error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _parse_document(
    text: str,
    filename: str,
    base_dir: Path | None,
    cache: JobCache | None,
    templates: TemplateReader | None,
) -> Document:
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ConfigFileError(
            Problem(f"the file is larger than the {MAX_BYTES // (1024 * 1024)} MiB limit", filename)
        )
    reader = _Reader(filename, base_dir if base_dir is not None else Path.cwd(), templates)
    try:
        root = compose_yaml(text)
    except YamlProblem as exc:
        raise ConfigFileError(Problem(exc.message, filename, exc.line)) from None
    if cache is not None:
        reader.cache = cache
        reader.text_lines = text.split("\n")
    catalog, invalid, email_line = _read_sections(reader, root)
    _cross_checks(reader, catalog, invalid, email_line is not None)
    if reader.problems:
        problems = sorted(reader.problems, key=lambda p: p.line or 0)
        raise ConfigFileError(problems)
    if cache is not None:
        cache.clear()
        cache.update(reader.new_cache)
    return Document(text, root, catalog, filename, reader.job_lines, reader.group_lines, email_line)


def _read_sections(reader: _Reader, root: Node | None) -> tuple[Catalog, set[str], int | None]:
    """The catalog of the valid definitions, the names of the invalid ones, and the line of
    the ``email:`` section (None: none)."""
    jobs: dict[str, Job] = {}
    groups: dict[str, JobGroup] = {}
    email: EmailConfiguration | None = None
    invalid: set[str] = set()
    email_line = None
    for section, key_node, value in _sections(reader, root):
        if section == "email":
            email_line = key_node.lineno
            if not value.is_null:
                email = reader.email(value)
        elif section == "jobs":
            jobs = _read_definitions(reader, section, value, reader.job, invalid)
        else:
            groups = _read_definitions(reader, section, value, reader.group, invalid)
    return Catalog(jobs, groups, email), invalid, email_line  # the catalog keeps copies


def _read_definitions(
    reader: _Reader,
    section: str,
    node: Node,
    read: Callable[[str, Node, Node], T | None],
    invalid: set[str],
) -> dict[str, T]:
    """The valid definitions of a ``jobs:`` or ``groups:`` section; the names of the invalid
    ones go to `invalid`."""
    found: dict[str, T] = {}
    entries = reader.entries(node, None, None, f"{section}.")
    for name, (name_node, definition) in (entries or {}).items():
        item = read(name, name_node, definition)
        if item is None:
            invalid.add(name)
        else:
            found[name] = item
    return found


def _cross_checks(reader: _Reader, catalog: Catalog, invalid: set[str], has_email: bool) -> None:
    for problem in catalog.problems():
        if any(repr(name) in problem.message for name in invalid):
            continue  # about a definition reported invalid already
        line = _problem_line(reader, problem)
        reader.problems.append(replaced(problem, file=reader.filename, line=line))
    if catalog.email is None and not has_email:
        for line, where in reader.alert_lines:
            reader.add(
                "alerts need an email: section with from_address at the top of the file",
                line,
                **where,
                key="messages",
            )


def _problem_line(reader: _Reader, problem: Problem) -> int | None:
    """The line of a problem of the catalog: its key's in its job or group; for a group's
    ``jobs``, the line of the job named in the message."""
    if problem.job is not None:
        lines = reader.job_lines.get(problem.job, {})
    else:
        lines = reader.group_lines.get(problem.group or "", {})
    if problem.group is not None and problem.key == "jobs":
        for key, item_line in lines.items():
            if key.startswith("jobs.") and repr(key[5:]) in problem.message:
                return item_line
    return lookup_line(lines, problem.key)


def parse_config(text: str, *, filename: str = "<string>", base_dir: Path | None = None) -> Catalog:
    """The `Catalog` that configuration `text` defines.

    `filename` names the text in messages; relative template files are read from `base_dir`
    (default: the current directory). Raises `ConfigFileError` listing every problem, each
    with file, line, job or group, and key.
    """
    return parse_document(text, filename=filename, base_dir=base_dir).catalog


def read_config_text(path: Path) -> str:
    """The text of the configuration file at `path`, refused past `MAX_BYTES`.

    Raises `FileNotFoundError` for a missing file, `ConfigFileError` for anything else.
    """
    filename = str(path)
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_BYTES:
                raise ConfigFileError(
                    Problem(
                        f"the file is {size / (1024 * 1024):.1f} MiB, larger than the "
                        f"{MAX_BYTES // (1024 * 1024)} MiB limit",
                        filename,
                    )
                )
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise ConfigFileError(Problem("is a directory, not a file", filename)) from None
    except OSError as exc:
        raise ConfigFileError(Problem(f"cannot read: {exc.strerror}", filename)) from None
    if len(data) > MAX_BYTES:
        raise ConfigFileError(
            Problem(f"the file is larger than the {MAX_BYTES // (1024 * 1024)} MiB limit", filename)
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigFileError(
            Problem(f"not UTF-8 text: {exc.reason} at byte {exc.start}", filename, line)
        ) from None


def load_config(path: str | os.PathLike[str]) -> Catalog:
    """The `Catalog` that the configuration file at `path` defines.

    Raises `ConfigFileError` (a `JobActionError`) for a missing, unreadable, oversized or
    invalid file, listing every problem with file, line, job or group, and key.
    """
    file = Path(path)
    try:
        text = read_config_text(file)
    except FileNotFoundError:
        raise ConfigFileError(Problem("no such file", str(file))) from None
    return parse_config(text, filename=str(path), base_dir=file.absolute().parent)
