"""The definitions store: where jobs, groups and the e-mail settings live.

`DefinitionStore` is the seam the `Scheduler` codes against. Two implementations:

- `MemoryStore` (`config.memory`): definitions in memory only, with the same checks a file
  applies (arguments a file could hold, templates that compile, template files that exist,
  an ``email:`` section for alerts);
- `FileStore` (`config.store`): the YAML file, read and written under a lock shared by every
  process, merging edits made to the file since it was last read, written atomically.

`ConfigStore(path)` returns the right one (None: memory).

Every write returns the new catalog, or raises `JobActionError` and changes nothing. A
file-backed write may bring in edits made to the file since it was last read (`merged` then
says so): the catalog it returns may differ from the previous one in more than the change
asked for, and whoever mirrors the catalog (the scheduler's running schedule) must compare
them whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ..model.catalog import Catalog
from ..model.emailconfig import EmailConfiguration
from ..model.job import Job, JobGroup
from ..model.templatereader import TemplateReader

__all__ = ["DefinitionStore"]


class DefinitionStore(Protocol):
    """Jobs, groups and e-mail settings, checked, kept, and changed one write at a time."""

    @property
    def path(self) -> Path | None:
        """The file the definitions live in; None in memory."""

    @property
    def base_dir(self) -> Path:
        """Where relative template files are looked up (the file's folder, or the current
        directory in memory)."""

    @property
    def templates(self) -> TemplateReader:
        """The reader of the alert templates: what it read when the definitions were read
        is what the alerts use."""

    @property
    def catalog(self) -> Catalog:
        """The catalog last read or written."""

    @property
    def merged(self) -> bool:
        """Whether the last write brought in edits made elsewhere (never, in memory)."""

    def read(self) -> Catalog:
        """(Re)read the definitions (a missing file: an empty catalog) and the template
        files; a broken file raises `ConfigFileError` and `catalog` stays as it was."""

    def changed_on_disk(self) -> bool:
        """Whether the file differs from what was last read or written (never, in memory)."""

    def add_jobs(self, jobs: Iterable[Job]) -> Catalog:
        """Add `jobs` in one write (they may depend on each other): all or none."""

    def add_job(self, job: Job) -> Catalog: ...

    def modify_job(self, job: Job) -> Catalog: ...

    def remove_job(self, name: str) -> Catalog:
        """Refused while jobs depend on it, or when it would leave a group empty."""

    def add_group(self, group: JobGroup) -> Catalog: ...

    def modify_group(self, group: JobGroup) -> Catalog: ...

    def remove_group(self, name: str) -> Catalog: ...

    def set_email(self, email: EmailConfiguration | None) -> Catalog:
        """Replace the ``email:`` section (None removes it)."""
