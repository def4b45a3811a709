"""`MemoryStore`: definitions kept in memory only, with the checks a file would apply."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.job import Job, JobGroup
from ..model.templatereader import TemplateReader
from .checks import (
    check_definitions,
    definition_name,
    file_checks_apply,
    with_default_template,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """A `DefinitionStore` without a file: `Scheduler()` keeps its definitions here.

    Each change is checked as a file store checks it (so code moved from memory to a file
    keeps working) and costs O(1) in the number of definitions for a plain job. Relative
    template files are looked up in the current directory at the time the store was made.
    """

    path: Path | None = None
    lock_path: Path | None = None
    merged = False

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir: Path = base_dir if base_dir is not None else Path.cwd()
        self.templates = TemplateReader(self.base_dir)
        self._mutex = threading.RLock()
        self._catalog = Catalog()

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def read(self) -> Catalog:
        """The catalog; template files are read again when next used."""
        self.templates.refresh()
        return self._catalog

    def changed_on_disk(self) -> bool:
        return False

    def add_jobs(self, jobs: Iterable[Job]) -> Catalog:
        batch = list(jobs)
        names = [job.name for job in batch if isinstance(job, Job)]
        with self._mutex:
            new = self._catalog.add_jobs(batch)
            for job in batch:
                if file_checks_apply(job):
                    check_definitions(new, names, [], False, self.templates)
                    break
            self._catalog = new
            return new

    def add_job(self, job: Job) -> Catalog:
        return self.add_jobs([job])

    def modify_job(self, job: Job) -> Catalog:
        return self._update(lambda c: c.modify_job(job), jobs=[definition_name(job, Job)])

    def remove_job(self, name: str) -> Catalog:
        """Remove job `name` and take it out of the groups that list it; refused while jobs
        depend on it or when it is the last job of a group."""
        groups = [g.name for g in self._catalog.groups_of(name)]
        return self._update(lambda c: c.remove_job(name), jobs=[name], groups=groups)

    def add_group(self, group: JobGroup) -> Catalog:
        return self._update(lambda c: c.add_group(group), groups=[definition_name(group, JobGroup)])

    def modify_group(self, group: JobGroup) -> Catalog:
        name = definition_name(group, JobGroup)
        return self._update(lambda c: c.modify_group(group), groups=[name])

    def remove_group(self, name: str) -> Catalog:
        return self._update(lambda c: c.remove_group(name), groups=[name])

    def set_email(self, email: EmailConfiguration | None) -> Catalog:
        """With `default_template_file`, the file is read now and its text becomes
        `default_template`."""
        email = with_default_template(email, self.templates)
        return self._update(lambda c: c.with_email(email), email=True)

    def _update(
        self,
        change: Callable[[Catalog], Catalog],
        *,
        jobs: list[str] | None = None,
        groups: list[str] | None = None,
        email: bool = False,
    ) -> Catalog:
        with self._mutex:
            new = change(self._catalog)
            check_definitions(new, jobs or [], groups or [], email, self.templates)
            self._catalog = new
            return new
