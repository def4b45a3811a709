"""`MemoryStore`: definitions kept in memory only, with the checks a file would apply."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from ..model.catalog import Catalog
from ..model.job import Job
from ..model.templatereader import TemplateReader
from .checks import (
    check_definitions,
    file_checks_apply,
)
from .writes import CatalogWrites

__all__ = ["MemoryStore"]


class MemoryStore(CatalogWrites):
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

    def _update(
        self,
        change: Callable[[Catalog], Catalog],
        *,
        jobs: Iterable[str] = (),
        groups: Iterable[str] = (),
        email: bool = False,
    ) -> Catalog:
        with self._mutex:
            new = change(self._catalog)
            check_definitions(new, list(jobs), list(groups), email, self.templates)
            self._catalog = new
            return new
