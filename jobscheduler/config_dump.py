"""Writing the configuration file: a `Catalog` as stable, readable YAML.

Each definition becomes an ordered mapping of its non-default keys (`job_entries`,
`group_entries`, `email_entries`); those mappings are what the writer compares to decide what
changed, and what it renders. The same catalog always gives the same text; what is written reads
back as the same catalog. Datetimes in a job's own zone are written as naive wall times.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import yaml

from .catalog import Catalog
from .config_values import datetime_data, format_duration, plain_data
from .emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from .errors import InvalidJobError, Problem
from .events import Event
from .job import DEFAULT_KILL_GRACE, DEFAULT_OUTPUT_LIMIT, Job, JobGroup, Message

__all__ = [
    "dump_config",
    "email_entries",
    "group_entries",
    "job_entries",
    "render",
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


def render(data: Mapping[str, Any], indent: int = 0, step: int = 2) -> list[str]:
    """`data` (one or more ``key: value`` entries) as YAML lines, each ending in a newline,
    indented by `indent` spaces, nested blocks by `step` more."""
    text = yaml.dump(
        dict(data),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
        indent=max(2, min(step, 9)),
    )
    pad = " " * indent
    return [pad + line if line.strip() else line for line in text.splitlines(keepends=True)]


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


def job_entries(job: Job) -> dict[str, Any]:
    """The keys a job is written with, in order, defaults left out.

    Raises `InvalidJobError` (key ``args…``) for arguments a file cannot hold.
    """
    zone = job.zone
    data: dict[str, Any] = {}
    if job.description is not None:
        data["description"] = job.description
    data["type"] = str(job.type)
    data["command"] = _list(list(job.command)) if isinstance(job.command, tuple) else job.command
    if job.shell:
        data["shell"] = True
    if job.cwd is not None:
        data["cwd"] = job.cwd
    if job.env is not None:
        data["env"] = _map(dict(job.env))
    if job.args:
        try:
            data["args"] = plain_data(dict(job.args), "args")
        except ValueError as exc:
            raise InvalidJobError(Problem(str(exc), job=job.name, key="args")) from None
    if job.start is not None:
        data["start"] = datetime_data(job.start, zone)
    if job.stop is not None:
        data["stop"] = datetime_data(job.stop, zone)
    if job.interval is not None:
        data["interval"] = str(job.interval)
    if job.timezone is not None:
        data["timezone"] = job.timezone
    if job.dependence is not None:
        dep = job.dependence
        dependence: dict[str, Any] = {"job": dep.job_name, "status": str(dep.event)}
        if dep.delay:
            dependence["delay"] = format_duration(dep.delay)
        data["dependence"] = FlowMap(dependence)
    if not job.enabled:
        data["enabled"] = False
    if job.timeout is not None:
        data["timeout"] = format_duration(job.timeout)
    if job.kill_grace != DEFAULT_KILL_GRACE:
        data["kill_grace"] = format_duration(job.kill_grace)
    if job.max_instances is not None:
        data["max_instances"] = job.max_instances
    if job.priority:
        data["priority"] = job.priority
    if job.output_limit != DEFAULT_OUTPUT_LIMIT:
        data["output_limit"] = job.output_limit
    if job.messages:
        data["messages"] = _messages(job.messages)
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
