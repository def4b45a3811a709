"""What a store checks beyond `Catalog`'s rules, in memory and in a file alike.

Arguments a file can hold, templates that compile, template files that exist, and an
``email:`` section for alerts. Templates are read through the store's `TemplateReader`, so a
template checked here is the one the alerts then use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..errors import InvalidJobError, Problem
from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.event import Event
from ..model.job import Job, JobGroup, Message
from ..model.templatereader import TemplateReader
from .dump import job_entries

__all__ = [
    "check_definitions",
    "definition_name",
    "file_checks_apply",
    "with_default_template",
]


def file_checks_apply(job: Job) -> bool:
    """Whether `check_definitions` has anything to look at in `job`: args that must be
    writable, or messages whose templates must compile (so plain jobs skip it)."""
    return bool(job.args or job.messages)


def check_definitions(
    new: Catalog, jobs: list[str], groups: list[str], email: bool, templates: TemplateReader
) -> None:
    """Check the `jobs` and `groups` of `new` (every one when `email` changed, and the e-mail
    settings then); raise `InvalidJobError` listing every problem."""
    problems, alerting_jobs = _jobs_problems(new, list(new.jobs) if email else jobs, templates)
    more, alerting_groups = _groups_problems(new, list(new.groups) if email else groups, templates)
    problems += more
    if new.email is None:
        problems += _unsent_alerts(alerting_jobs, alerting_groups)
    elif email:
        problems += _email_problems(new.email, templates)
    if problems:
        raise InvalidJobError(problems)


def _jobs_problems(
    new: Catalog, names: list[str], templates: TemplateReader
) -> tuple[list[Problem], list[str]]:
    """The problems of the jobs named (those that exist and are checked), and those of them
    that have alerts."""
    problems: list[Problem] = []
    alerting: list[str] = []
    for name in names:
        job = new.jobs.get(name)
        if job is not None and file_checks_apply(job):
            problems += _definition_problems(name, job, templates)
            if job.messages:
                alerting.append(name)
    return problems, alerting


def _groups_problems(
    new: Catalog, names: list[str], templates: TemplateReader
) -> tuple[list[Problem], list[str]]:
    """The problems of the groups named (those that exist), and those of them that have
    alerts."""
    problems: list[Problem] = []
    alerting: list[str] = []
    for name in names:
        group = new.groups.get(name)
        if group is not None:
            problems += _template_problems(templates, group.messages, group=name)
            if group.messages:
                alerting.append(name)
    return problems, alerting


def _unsent_alerts(jobs: list[str], groups: list[str]) -> list[Problem]:
    message = "alerts need an email configuration (set_email)"
    return [Problem(message, job=name, key="messages") for name in jobs] + [
        Problem(message, group=name, key="messages") for name in groups
    ]


def _definition_problems(name: str, job: Job, templates: TemplateReader) -> list[Problem]:
    """One job's problems: args that cannot be written, alert templates that do not compile."""
    problems: list[Problem] = []
    if job.args:  # only args can fail to be written
        try:
            job_entries(job)
        except InvalidJobError as exc:
            problems.extend(exc.problems)
    if job.messages:
        problems.extend(_template_problems(templates, job.messages, job=name))
    return problems


def _email_problems(email: EmailConfiguration, templates: TemplateReader) -> list[Problem]:
    problems: list[Problem] = []
    for key, source in (("subject", email.subject), ("default_template", email.default_template)):
        try:
            templates.inline(source, key)
        except ValueError as exc:
            problems.append(Problem(str(exc), key=f"email.{key}"))
    return problems


def _template_problems(
    templates: TemplateReader,
    messages: Mapping[Event, Message],
    job: str | None = None,
    group: str | None = None,
) -> list[Problem]:
    problems: list[Problem] = []
    for event, message in messages.items():
        key = f"messages.{event}"
        try:
            templates.message(message, key)
        except ValueError as exc:  # TemplateError included
            if message.template is None and message.template_file is not None:
                key += ".template_file"
            problems.append(Problem(str(exc), job=job, group=group, key=key))
    return problems


def with_default_template(
    email: EmailConfiguration | None, templates: TemplateReader
) -> EmailConfiguration | None:
    """`email` with the text of its `default_template_file` as `default_template` (read now,
    through `templates`); `InvalidJobError` when the file cannot be used."""
    if email is None or email.default_template_file is None:
        return email
    try:
        source = templates.file(email.default_template_file).source
    except ValueError as exc:
        raise InvalidJobError(Problem(str(exc), key="email.default_template_file")) from None
    return replace(email, default_template=source)


def definition_name(item: object, kind: type[Job] | type[JobGroup]) -> str:
    """The name of `item`, refused (`InvalidJobError`) when it is not a `kind`."""
    if not isinstance(item, kind):
        raise InvalidJobError(f"expected a {kind.__name__}, not {type(item).__name__}")
    return item.name
