"""`CatalogWrites`: the writes every definitions store offers, each one change of the catalog.

A store says how a change is applied (`_update`: in memory, or under the file's lock with the
file re-read and written); what each write changes, and which jobs and groups it touches (so
only those are checked), is said once, here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.job import Job, JobGroup
from ..model.templatereader import TemplateReader
from .checks import definition_name, with_default_template

__all__ = ["CatalogWrites"]


class CatalogWrites(ABC):
    """Single-definition writes on top of a store's `_update` (see the module notes)."""

    templates: TemplateReader
    _catalog: Catalog

    @abstractmethod
    def add_jobs(self, jobs: Iterable[Job]) -> Catalog:
        """Add many jobs in one write (all or none)."""

    @abstractmethod
    def _update(
        self,
        change: Callable[[Catalog], Catalog],
        *,
        jobs: Iterable[str] = (),
        groups: Iterable[str] = (),
        email: bool = False,
    ) -> Catalog:
        """Apply `change` to the catalog, check what it touched (`jobs`, `groups`, the e-mail
        settings with `email`), keep and return the new catalog."""

    def add_job(self, job: Job) -> Catalog:
        return self.add_jobs([job])

    def modify_job(self, job: Job) -> Catalog:
        return self._update(lambda c: c.modify_job(job), jobs=[definition_name(job, Job)])

    def remove_job(self, name: str) -> Catalog:
        """Remove job `name` and take it out of the groups that list it; refused while jobs
        depend on it or when it is the last job of a group."""
        groups = [g.name for g in self._catalog.groups_of(name)]  # changed too: conflicts
        return self._update(lambda c: c.remove_job(name), jobs=[name], groups=groups)

    def add_group(self, group: JobGroup) -> Catalog:
        return self._update(lambda c: c.add_group(group), groups=[definition_name(group, JobGroup)])

    def modify_group(self, group: JobGroup) -> Catalog:
        name = definition_name(group, JobGroup)
        return self._update(lambda c: c.modify_group(group), groups=[name])

    def remove_group(self, name: str) -> Catalog:
        return self._update(lambda c: c.remove_group(name), groups=[name])

    def set_email(self, email: EmailConfiguration | None) -> Catalog:
        """Replace the ``email:`` section (None removes it). With `default_template_file`,
        the file is read now and its text becomes `default_template`."""
        email = with_default_template(email, self.templates)
        return self._update(lambda c: c.with_email(email), email=True)
