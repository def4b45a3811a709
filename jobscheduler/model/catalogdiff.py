"""What changed from one `Catalog` to the next: the one diff every catalog change goes through.

The scheduler mirrors its catalog in the running schedule and the alerts; whatever changed the
catalog (an API write, a write that merged hand edits of the file, `reload`, `start`), it
brings both to the new catalog with this diff, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .catalog import Catalog
from .job import Job

__all__ = ["CatalogDiff", "diff_catalogs"]


@dataclass(frozen=True, slots=True)
class CatalogDiff:
    """Jobs added, changed (old, new) and removed (names); groups added, changed or removed
    (names), those removed; whether the e-mail settings changed."""

    added: list[Job] = field(default_factory=list)
    changed: list[tuple[Job, Job]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    removed_groups: list[str] = field(default_factory=list)
    email: bool = False

    @property
    def jobs(self) -> list[str]:
        """The names of every job added, changed or removed."""
        return [
            *(job.name for job in self.added),
            *(new.name for _, new in self.changed),
            *self.removed,
        ]

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.groups or self.email)


def diff_catalogs(old: Catalog, new: Catalog, jobs: Iterable[str] | None = None) -> CatalogDiff:
    """How `new` differs from `old`.

    `jobs`: the only jobs that may differ (a change made here, to `old`: O(len(jobs))); None
    compares every job (O(n), an identity test first: the jobs of a file read again whose
    text did not change are the same objects). Groups are always compared whole (removing a
    job changes the groups that listed it), by identity first.
    """
    old_jobs, new_jobs = old.jobs, new.jobs
    names: Iterable[str]
    if jobs is None:
        names = [*new_jobs, *(name for name in old_jobs if name not in new_jobs)]
    else:
        names = dict.fromkeys(jobs)
    diff = CatalogDiff(email=old.email != new.email)
    for name in names:
        before, after = old_jobs.get(name), new_jobs.get(name)
        if before is after:
            continue
        if after is None:
            diff.removed.append(name)
        elif before is None:
            diff.added.append(after)
        elif before != after:
            diff.changed.append((before, after))
    old_groups, new_groups = old.groups, new.groups
    for name, group in new_groups.items():
        previous = old_groups.get(name)
        if previous is not group and previous != group:
            diff.groups.append(name)
    for name in old_groups:
        if name not in new_groups:
            diff.groups.append(name)
            diff.removed_groups.append(name)
    return diff
