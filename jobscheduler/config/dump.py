"""Writing the configuration file: a `Catalog` as stable, readable YAML.

Each definition becomes an ordered mapping of its non-default keys (`job_entries`,
`group_entries`, `email_entries`); those mappings are what the writer compares to decide what
changed, and what it renders. The same catalog always gives the same text; what is written reads
back as the same catalog. Datetimes in a job's own zone are written as naive wall times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import yaml

from ..errors import InvalidJobError, Problem
from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from ..model.event import Event
from ..model.job import JOB_OPTIONS, Dependence, Job, JobGroup, Message
from ..model.joboptions import Form
from ..model.policies import PauseAfterFailures
from .policykeys import pause_after_failures_data, retry_entries
from .values import JOB_KEYS, datetime_data, format_duration, plain_data
from .yamlnodes import BOOL, INT, STR, TIMESTAMP, resolve_tag

__all__ = [
    "dump_config",
    "email_entries",
    "group_entries",
    "job_entries",
    "render",
    "same_entries",
    "section_lines",
]

_SMTP_DEFAULTS = SmtpSettings()
_FLOW_LIMIT = 72  # a list or mapping shorter than this (as text) is written on one line


class Flow(list[Any]):
    """A list written in flow style: ``[a, b, c]``."""


class FlowMap(dict[str, Any]):
    """A mapping written in flow style: ``{job: a, status: failed}``."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent block lists under their key, as people write them.
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(
    Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)
_Dumper.add_representer(
    FlowMap, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True)
)


# -- writing the common shapes directly ---------------------------------------------------------
#
# PyYAML's emitter is pure Python: about 0.25 ms for a job, most of the time of writing a file.
# These functions write what it would write for the shapes job definitions usually have, and
# give up (None) on anything they are not sure of; a test compares both on generated data.

_WIDTH = 100  # PyYAML's `width` above: longer lines may be folded, so they are left to it
_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`?:")  # a plain scalar cannot start with these
_FLOW_INDICATORS = frozenset(",?[]{}:#")  # nor contain these inside [...] or {...}


def _plain(text: str, flow: bool = False) -> bool:
    """Whether PyYAML's emitter may write `text` plain (unquoted), judged conservatively:
    printable ASCII, no indicator first, no ``: `` or `` #``, no space at either end."""
    if not text or not text.isascii() or not text.isprintable():
        return False
    if _starts_as_syntax(text) or _holds_syntax(text):
        return False
    return not (flow and any(ch in _FLOW_INDICATORS for ch in text))


def _starts_as_syntax(text: str) -> bool:
    """Whether `text` starts like YAML syntax: an indicator, a space, a list item, or a
    document marker."""
    return (
        text[0] in _INDICATORS
        or text[0] == " "
        or (text[0] == "-" and text[1:2] in ("", " "))  # a list item, or '---'
        or text.startswith(("---", "..."))
    )


def _holds_syntax(text: str) -> bool:
    """Whether `text` holds a key's colon or a comment, or ends in a space or a colon."""
    return text[-1] in " :" or ": " in text or " #" in text


def _scalar(value: Any, flow: bool = False) -> str | None:
    """How PyYAML writes a scalar `value` plain, or None (not plain, or not sure)."""
    kind = value.__class__
    text: str
    if kind is str:
        text, tag = value, STR
    elif kind is bool:
        text, tag = ("true" if value else "false"), BOOL
    elif kind is int:
        text, tag = str(value), INT
    elif kind is datetime:
        text, tag = value.isoformat(" "), TIMESTAMP
    else:
        return None
    # Plain only when reading it back gives the same type ('yes' or '12' as text are quoted).
    if not _plain(text, flow) or resolve_tag(text) != tag:
        return None
    return text


_ATOMS = (str, bool, int)  # values PyYAML never writes as an anchor and an alias


def _flow(value: Any) -> str | None:
    """A `Flow` list or `FlowMap` of text, numbers and booleans as PyYAML writes it on one
    line, or None."""
    if value.__class__ is Flow:
        items = _flow_items(value)
        return f"[{', '.join(items)}]" if items else None
    pairs = _flow_pairs(value)
    return f"{{{', '.join(pairs)}}}" if pairs else None


def _flow_items(value: Flow) -> list[str] | None:
    items: list[str] = []
    for item in value:
        text = _scalar(item, flow=True) if item.__class__ in _ATOMS else None
        if text is None:
            return None
        items.append(text)
    return items


def _flow_pairs(value: FlowMap) -> list[str] | None:
    pairs: list[str] = []
    for key, item in value.items():
        if key.__class__ is not str or item.__class__ not in _ATOMS:
            return None
        key_text, text = _scalar(key, flow=True), _scalar(item, flow=True)
        if key_text is None or text is None:
            return None
        pairs.append(f"{key_text}: {text}")
    return pairs


def _entry(key: Any, value: Any, column: int, seen: set[int]) -> str | None:
    """``key: value`` for a scalar or flow `value`, starting at `column`, or None."""
    if key.__class__ is not str:
        return None
    key_text = _scalar(key)
    if key_text is None or len(key_text) > 100:
        return None
    kind = value.__class__
    text = _flow(value) if kind is Flow or kind is FlowMap else _scalar(value)
    if text is None or column + len(key_text) + 2 + len(text) > _WIDTH:
        return None
    if kind not in _ATOMS:
        # PyYAML writes an object met twice in one document as an anchor and an alias.
        if id(value) in seen:
            return None
        seen.add(id(value))
    return f"{key_text}: {text}\n"


def fast_lines(data: Mapping[str, Any], step: int) -> list[str] | None:
    """What ``yaml.dump(data, indent=step)`` (with this module's dumper) gives, as lines, for
    entries whose values are scalars, flow collections, or mappings of those; else None."""
    lines: list[str] = []
    seen: set[int] = set()  # the ids of the collections written so far
    for key, value in data.items():
        if value.__class__ is dict:
            block = _block_lines(key, value, step, seen)
        else:
            line = _entry(key, value, 0, seen)
            block = None if line is None else [line]
        if block is None:
            return None
        lines += block
    return lines or None


def _block_lines(key: Any, value: dict[str, Any], step: int, seen: set[int]) -> list[str] | None:
    """``key:`` and the entries of the mapping `value` below it, indented by `step`."""
    key_text = _scalar(key) if key.__class__ is str else None
    if not value or key_text is None or len(key_text) > 100 or id(value) in seen:
        return None
    seen.add(id(value))
    lines = [f"{key_text}:\n"]
    pad = " " * step
    for inner, item in value.items():
        line = _entry(inner, item, step, seen)
        if line is None:
            return None
        lines.append(pad + line)
    return lines


def render(data: Mapping[str, Any], indent: int = 0, step: int = 2) -> list[str]:
    """`data` (one or more ``key: value`` entries) as YAML lines, each ending in a newline,
    indented by `indent` spaces, nested blocks by `step` more.

    The common shapes (text, numbers, booleans, datetimes, short flow lists and mappings, one
    level of nesting) are written directly, exactly as PyYAML would write them; anything else
    goes through PyYAML (about 25 times slower).
    """
    lines = fast_lines(data, max(2, min(step, 9)))
    if lines is None:
        lines = _yaml_lines(data, step)
    if not indent:
        return lines
    pad = " " * indent
    return [pad + line if line.strip() else line for line in lines]


def _yaml_lines(data: Mapping[str, Any], step: int) -> list[str]:
    text = yaml.dump(
        dict(data),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
        indent=max(2, min(step, 9)),
    )
    return text.splitlines(keepends=True)


def _short(items: list[Any]) -> bool:
    return sum(len(str(item)) + 2 for item in items) <= _FLOW_LIMIT and all(
        isinstance(item, str) and "\n" not in item for item in items
    )


def _list(items: list[Any]) -> list[Any]:
    return Flow(items) if _short(items) else list(items)


def _map(data: dict[str, Any]) -> dict[str, Any]:
    flat = all(
        isinstance(v, Flow) or (not isinstance(v, dict | list) and "\n" not in str(v))
        for v in data.values()
    )
    length = sum(len(str(k)) + len(str(v)) + 4 for k, v in data.items())
    return FlowMap(data) if flat and length <= _FLOW_LIMIT else data


def _message(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"recipients": _list(list(message.recipients))}
    if message.template is not None:
        data["template"] = message.template
    if message.template_file is not None:
        data["template_file"] = message.template_file
    return _map(data)


def _messages(messages: Mapping[Event, Message]) -> dict[str, Any]:
    return {str(event): _message(message) for event, message in messages.items()}


def same_entries(a: Any, b: Any, entries: Callable[[Any], dict[str, Any]]) -> bool:
    """Whether two definitions (jobs, groups, email settings; None for absent) are the same
    in the file: equal, or written as the same `entries` (a start given in another zone)."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    return bool(a == b) or entries(a) == entries(b)


def _dependence(dependence: Dependence) -> FlowMap:
    data: dict[str, Any] = {"job": dependence.job_name, "status": str(dependence.event)}
    if dependence.delay:
        data["delay"] = format_duration(dependence.delay)
    return FlowMap(data)


_Write = Callable[[Any, Job], Any]

# How each form of job key is written (`Form`: a job field's form, declared with the field).
_WRITERS: dict[Form, _Write] = {
    Form.TEXT: lambda value, job: str(value),
    Form.SCALAR: lambda value, job: value,
    Form.DURATION: lambda value, job: format_duration(value),
    Form.UNIT_DURATION: lambda value, job: format_duration(value),
    Form.DATETIME: lambda value, job: datetime_data(value, job.zone),
    Form.COMMAND: lambda value, job: _list(list(value)) if isinstance(value, tuple) else value,
    Form.INTERVAL: lambda value, job: str(value),
    Form.DATA: lambda value, job: plain_data(dict(value), "args"),
    Form.ENV: lambda value, job: _map(dict(value)),
    Form.DEPENDENCE: lambda value, job: _dependence(value),
    Form.RETRY: lambda value, job: FlowMap(retry_entries(value)),
    Form.PAUSE_AFTER_FAILURES: lambda value, job: _pause_after_failures(value),
    Form.MESSAGES: lambda value, job: _messages(value),
    Form.DURATION_OR_AUTO: lambda value, job: (
        value if isinstance(value, str) else format_duration(value)
    ),
}


def _pause_after_failures(value: PauseAfterFailures) -> Any:
    data = pause_after_failures_data(value)
    return FlowMap(data) if isinstance(data, dict) else data


_WRITTEN = sorted(JOB_OPTIONS, key=lambda option: JOB_KEYS.index(option.name))


def job_entries(job: Job) -> dict[str, Any]:
    """The keys a job is written with, in order (`JOB_KEYS`), defaults left out.

    Raises `InvalidJobError` (key ``args…``) for arguments a file cannot hold.
    """
    data: dict[str, Any] = {}
    for option in _WRITTEN:
        key = option.name
        value = getattr(job, key)
        if option.always_written or value != option.default:
            try:
                data[key] = _WRITERS[option.form](value, job)
            except ValueError as exc:
                raise InvalidJobError(Problem(str(exc), job=job.name, key=key)) from None
    return data


def group_entries(group: JobGroup) -> dict[str, Any]:
    """The keys a group is written with."""
    data: dict[str, Any] = {"jobs": _list(list(group.job_names))}
    if group.messages:
        data["messages"] = _messages(group.messages)
    return data


def _smtp(smtp: SmtpSettings) -> dict[str, Any]:
    data: dict[str, Any] = {"host": smtp.host, "port": smtp.port}
    if smtp.security is not SmtpSecurity.NONE:
        data["security"] = str(smtp.security)
    if smtp.username is not None:
        data["username"] = smtp.username
    if smtp.password_env is not None:
        data["password_env"] = smtp.password_env
    if smtp.timeout != _SMTP_DEFAULTS.timeout:
        data["timeout"] = format_duration(timedelta(seconds=smtp.timeout))
    if smtp.retries != _SMTP_DEFAULTS.retries:
        data["retries"] = smtp.retries
    if smtp.queue_size != _SMTP_DEFAULTS.queue_size:
        data["queue_size"] = smtp.queue_size
    return _map(data)


def email_entries(email: EmailConfiguration) -> dict[str, Any]:
    """The keys of the ``email:`` section. With a template file, only its name is written."""
    data: dict[str, Any] = {"from_address": email.from_address, "subject": email.subject}
    if email.default_template_file is not None:
        data["default_template_file"] = email.default_template_file
    else:
        data["default_template"] = email.default_template
    if email.smtp != _SMTP_DEFAULTS:
        data["smtp"] = _smtp(email.smtp)
    return data


def section_lines(name: str, items: Mapping[str, dict[str, Any]], step: int = 2) -> list[str]:
    """A ``jobs:`` or ``groups:`` section: each item a block, blank lines between them."""
    if not items:
        return [f"{name}: {{}}\n"]
    lines = [f"{name}:\n"]
    for i, (key, entries) in enumerate(items.items()):
        if i:
            lines.append("\n")
        lines.extend(render({key: entries}, step, step))
    return lines


def dump_config(catalog: Catalog) -> str:
    """The configuration text of `catalog`: ``email:``, ``jobs:``, ``groups:`` in that order,
    jobs and groups in catalog order. Stable: the same catalog always gives the same text,
    and `parse_config` reads it back as an equal catalog.

    Raises `InvalidJobError` for a job whose `args` a file cannot hold.
    """
    parts: list[list[str]] = []
    if catalog.email is not None:
        parts.append(render({"email": email_entries(catalog.email)}))
    parts.append(section_lines("jobs", {n: job_entries(j) for n, j in catalog.jobs.items()}))
    if catalog.groups:
        groups = {n: group_entries(g) for n, g in catalog.groups.items()}
        parts.append(section_lines("groups", groups))
    return "\n".join("".join(part) for part in parts)
