"""`FileAlerts`: the alert handlers built from the ``messages:`` of jobs and groups.

Built from the templates the definitions store read with the definitions (nothing is read or
compiled here), and rebuilt only for the jobs and groups a change touched: adding a plain job
to a file full of alerting jobs builds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..clock import Clock
from ..model.catalog import Catalog
from ..model.catalogdiff import CatalogDiff
from ..model.job import Job, JobGroup
from ..model.templatereader import TemplateReader
from .base import EventHandler
from .email import EmailEventHandler, handlers_from_messages

__all__ = ["FileAlerts"]


class FileAlerts:
    """The alert handlers of a catalog's jobs and groups, by job or group name."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._handlers: dict[str, list[EventHandler]] = {}

    def for_names(self, names: Sequence[str]) -> list[EventHandler]:
        """The handlers of the jobs and groups called `names` (cheap when there are none)."""
        handlers = self._handlers
        if not handlers:
            return []
        return [h for n in names for h in handlers.get(n, ())]

    @property
    def by_name(self) -> Mapping[str, list[EventHandler]]:
        """The handlers of every job and group that has alerts (read it, do not change it)."""
        return self._handlers

    def needs_update(self, diff: CatalogDiff) -> bool:
        """Whether `diff` may change any alert: groups changed, alerts exist, or a job added
        or changed has some (with no alerts yet, adding plain jobs builds nothing)."""
        if diff.groups or self._handlers:
            return True
        return any(job.messages for job in diff.added) or any(
            new.messages for _, new in diff.changed
        )

    def update(
        self,
        catalog: Catalog,
        templates: TemplateReader,
        config_file: str | None,
        jobs: Iterable[str],
        groups: Iterable[str],
        *,
        rebuild: bool = False,
        code_handlers: Iterable[EventHandler] = (),
    ) -> None:
        """Alerts from the ``messages:`` of `jobs` and `groups`; with `rebuild`, all of them
        anew (pass every job and group), and the e-mail settings handed again to the e-mail
        handlers added in code (`code_handlers`) that have none of their own."""
        # Changed in place unless rebuilt (readers only `get`, and an O(1) change must not
        # copy the alerts of every job).
        handlers: dict[str, list[EventHandler]] = {} if rebuild else self._handlers
        kinds: list[tuple[Iterable[str], Mapping[str, Job | JobGroup], bool]] = [
            (jobs, catalog.jobs, True),
            (groups, catalog.groups, False),
        ]
        for names, owners, is_job in kinds:
            for name in names:
                owner = owners.get(name)
                if owner is None or not owner.messages:
                    if handlers:
                        handlers.pop(name, None)
                    continue
                handlers[name] = list(
                    handlers_from_messages(
                        owner.messages,
                        catalog.email,
                        templates,
                        job=name if is_job else None,
                        group=None if is_job else name,
                        config_file=config_file,
                        clock=self._clock,
                    )
                )
        self._handlers = handlers
        if rebuild:
            for handler in code_handlers:
                if isinstance(handler, EmailEventHandler) and not handler.has_own_config:
                    handler.inherit_config(catalog.email)
