"""Jobs defined in code: the ``@scheduler.job`` decorator's jobs, and any `Job` whose command
is a function or class itself (``Job.source == "code"``).

They live in memory beside the definitions store and are never written into the YAML file:
the file must stand alone (another process, the command line, a hand edit read it without
this program's functions). So a job or group of the file cannot name a job defined in code
(its dependence, its list of jobs); a job defined in code may depend on a job of the file.
A name is defined in one place only: a name in both is refused, whichever came second (the
decorator, `add_job`, or the file gaining it through a reload), with an error naming both.

`CodeJobStore` keeps them beside the definitions store (the decorator itself:
`model.jobfunction`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import DuplicateNameError, InvalidJobError, Problem
from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.job import Job, JobGroup
from ..model.jobfunction import callable_name
from ..model.templatereader import TemplateReader
from .base import DefinitionStore

__all__ = ["CodeJobStore"]


class CodeJobStore:
    """A `DefinitionStore` over another (the file's, or memory's: `inner`) that also keeps
    the jobs defined in code, in memory, never handing them to `inner` (see the module
    notes). Its `catalog` is both together; every change is checked on the whole before
    anything is written, so a write refused leaves the file and the code jobs as they were.
    """

    def __init__(self, inner: DefinitionStore) -> None:
        self.inner = inner
        self._jobs: dict[str, Job] = {}
        self._catalog = inner.catalog

    @property
    def path(self) -> Path | None:
        return self.inner.path

    @property
    def base_dir(self) -> Path:
        return self.inner.base_dir

    @property
    def templates(self) -> TemplateReader:
        return self.inner.templates

    @property
    def merged(self) -> bool:
        return self.inner.merged

    @property
    def catalog(self) -> Catalog:
        """The store's definitions and the jobs defined in code."""
        return self._catalog

    @property
    def file_catalog(self) -> Catalog:
        """The store's definitions alone (the file's, or memory's)."""
        return self.inner.catalog

    def read(self) -> Catalog:
        """Read the store again: `DuplicateNameError` if it now defines a name a job defined
        in code has (the caller keeps the definitions in force)."""
        self._catalog = self._merged(self.inner.read(), self._jobs)
        return self._catalog

    def changed_on_disk(self) -> bool:
        return self.inner.changed_on_disk()

    def add_jobs(self, jobs: Iterable[Job]) -> Catalog:
        """Add `jobs`: those defined in code here, the others to the store (one write)."""
        jobs = list(jobs)
        code = {**self._jobs}
        in_file: list[Job] = []
        for job in jobs:
            if not isinstance(job, Job) or job.source != "code":
                in_file.append(job)
            elif job.name in code:
                raise DuplicateNameError(
                    Problem("a job with this name is defined in code already", job=job.name)
                )
            else:
                code[job.name] = job
        if any(isinstance(job, Job) and job.name in code for job in in_file):
            raise DuplicateNameError(
                [_clash(job.name, code[job.name], self.path) for job in in_file if job.name in code]
            )
        if len(code) > len(self._jobs):
            self._merged(self.inner.catalog, code)  # checked before the file is written
        stored = self.inner.add_jobs(in_file) if in_file else self.inner.catalog
        return self._set(stored, code)

    def add_job(self, job: Job) -> Catalog:
        return self.add_jobs([job])

    def modify_job(self, job: Job) -> Catalog:
        """Replace job ``job.name`` where it is defined (code or store)."""
        name = job.name
        if name not in self._jobs:
            if job.source == "code":
                raise InvalidJobError(
                    Problem(f"job {name!r} is not defined in code: it cannot take a function")
                )
            return self._set(self.inner.modify_job(job), self._jobs)
        if job.source != "code":
            raise InvalidJobError(
                Problem(
                    "this job is defined in code: its new definition must hold its function or "
                    "class too (job.with_changes(...))",
                    job=name,
                )
            )
        return self._set(self.inner.catalog, {**self._jobs, name: job})

    def remove_job(self, name: str) -> Catalog:
        """Remove job `name`; refused while another job depends on it (the catalog's rule,
        checked on the whole)."""
        self._catalog.remove_job(name)  # UnknownNameError, dependents, emptied groups
        if name not in self._jobs:
            return self._set(self.inner.remove_job(name), self._jobs)
        return self._set(self.inner.catalog, {n: j for n, j in self._jobs.items() if n != name})

    def add_group(self, group: JobGroup) -> Catalog:
        if group.name in self._jobs:
            raise DuplicateNameError(
                Problem("a job defined in code has this name", group=group.name, key="name")
            )
        return self._set(self.inner.add_group(group), self._jobs)

    def modify_group(self, group: JobGroup) -> Catalog:
        return self._set(self.inner.modify_group(group), self._jobs)

    def remove_group(self, name: str) -> Catalog:
        return self._set(self.inner.remove_group(name), self._jobs)

    def set_email(self, email: EmailConfiguration | None) -> Catalog:
        return self._set(self.inner.set_email(email), self._jobs)

    def _set(self, stored: Catalog, code: dict[str, Job]) -> Catalog:
        self._catalog = self._merged(stored, code)
        self._jobs = code
        return self._catalog

    def _merged(self, stored: Catalog, code: Mapping[str, Job]) -> Catalog:
        """`stored` with the jobs `code` added: `DuplicateNameError` for a name in both,
        naming both places; the catalog's own errors for a broken dependence."""
        if not code:
            return stored
        clashes = [
            _clash(name, job, self.path)
            for name, job in code.items()
            if name in stored.jobs or name in stored.groups
        ]
        if clashes:
            raise DuplicateNameError(clashes)
        return stored.add_jobs(list(code.values()))


def _clash(name: str, job: Job, path: Path | None) -> Problem:
    where = f"in the file {path}" if path is not None else "with add_job (a command text)"
    return Problem(
        f"job {name!r} is defined twice: in code ({callable_name(job.command)}) and {where}; "
        "rename one of them",
        job=name,
        key="name",
    )
