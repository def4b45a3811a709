"""What changed from one `Catalog` to the next: the one diff every catalog change goes through.

The scheduler mirrors its catalog in the running schedule and the alerts; whatever changed the
catalog (an API write, a write that merged hand edits of the file, `reload`, `start`), it
brings both to the new catalog with this diff, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from .catalog import Catalog
from .job import Job, JobGroup

__all__ = ["CatalogDiff", "diff_catalogs", "drops_pending"]


@dataclass(slots=True)  # not frozen: built on every add_job, and a frozen init costs 3x
class CatalogDiff:
    """Jobs added, changed (old, new) and removed (names); groups added, changed or removed
    (names), those removed; whether the e-mail settings changed. Read-only by convention."""

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
    added, names = _jobs_to_compare(old_jobs, new_jobs, jobs)
    changed: list[tuple[Job, Job]] = []
    removed: list[str] = []
    for name in names:
        after = new_jobs.get(name)
        before = old_jobs.get(name)
        if before is after:
            continue
        if after is None:
            removed.append(name)
        elif before is None:
            added.append(after)
        elif before != after:
            changed.append((before, after))
    groups, removed_groups = _compare_groups(old.groups, new.groups)
    email = old.email is not new.email and old.email != new.email
    return CatalogDiff(added, changed, removed, groups, removed_groups, email)


def _jobs_to_compare(
    old_jobs: Mapping[str, Job], new_jobs: Mapping[str, Job], jobs: Iterable[str] | None
) -> tuple[list[Job], Collection[str]]:
    """The jobs known to be added without comparing, and the names of the jobs to compare."""
    if jobs is None:
        if not old_jobs:  # from nothing (a scheduler reading its file): every job is added
            return list(new_jobs.values()), ()
        return [], [*new_jobs, *(name for name in old_jobs if name not in new_jobs)]
    names = jobs if isinstance(jobs, list) and len(jobs) < 2 else list(dict.fromkeys(jobs))
    if len(new_jobs) - len(old_jobs) == len(names) > 0:
        # Only `names` may differ, and there are that many more jobs: each was added (the
        # common add_job, spared reading the older map).
        if len(names) == 1:
            return [new_jobs[next(iter(names))]], ()
        return [new_jobs[name] for name in names], ()
    return [], names


def _compare_groups(
    old_groups: Mapping[str, JobGroup], new_groups: Mapping[str, JobGroup]
) -> tuple[list[str], list[str]]:
    """The groups added, changed or removed, and those removed."""
    groups: list[str] = []
    removed_groups: list[str] = []
    if old_groups is new_groups:  # a change of jobs only keeps the groups' map
        return groups, removed_groups
    for name, group in new_groups.items():
        previous = old_groups.get(name)
        if previous is not group and previous != group:
            groups.append(name)
    for name in old_groups:
        if name not in new_groups:
            groups.append(name)
            removed_groups.append(name)
    return groups, removed_groups


def drops_pending(old: Job, new: Job) -> bool:
    """Whether changing `old` into `new` cancels a pending dependent start of the job."""
    return (old.enabled and not new.enabled) or old.dependence != new.dependence
