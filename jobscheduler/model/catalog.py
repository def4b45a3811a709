"""The set of definitions — jobs, groups, e-mail settings — and the rules that span jobs.

A `Catalog` is immutable: each operation returns a new one or raises `JobActionError`. Rules
that one job cannot check alone live here: unique names (jobs and groups share one name space,
since handlers are added by name), dependences on known jobs without cycles, groups of known
jobs, and no removal of a job that others depend on or that is the last job of a group.
Groups hold names, not jobs: removing a job takes it out of every group that lists it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from ..errors import DuplicateNameError, InvalidJobError, Problem, UnknownNameError
from ..valueclass import field, value_class
from .job import Job, JobGroup
from .layeredmap import LayeredMap

if TYPE_CHECKING:  # a catalog only holds one: a file without `email:` never imports it
    from .emailconfig import EmailConfiguration

__all__ = ["Catalog"]


# The default of `jobs` and `groups`: each catalog given none gets a new empty LayeredMap.
_NONE_GIVEN: Mapping[str, Any] = LayeredMap()


@value_class(frozen=True, init=False)
class Catalog:
    """Jobs and groups by name, in their order of definition, and the e-mail settings."""

    jobs: Mapping[str, Job] = field(default_factory=LayeredMap)
    groups: Mapping[str, JobGroup] = field(default_factory=LayeredMap)
    email: EmailConfiguration | None = None

    def __init__(
        self,
        jobs: Mapping[str, Job] = _NONE_GIVEN,
        groups: Mapping[str, JobGroup] = _NONE_GIVEN,
        email: EmailConfiguration | None = None,
    ) -> None:
        put = object.__setattr__
        put(self, "jobs", LayeredMap() if jobs is _NONE_GIVEN else jobs)
        put(self, "groups", LayeredMap() if groups is _NONE_GIVEN else groups)
        put(self, "email", email)
        self.__post_init__()

    def __post_init__(self) -> None:
        # Stored as LayeredMaps: immutable, and a changed copy costs O(1), not O(n).
        if self.jobs.__class__ is not LayeredMap:
            object.__setattr__(self, "jobs", LayeredMap(self.jobs))
        if self.groups.__class__ is not LayeredMap:
            object.__setattr__(self, "groups", LayeredMap(self.groups))

    @classmethod
    def _derived(
        cls,
        jobs: Mapping[str, Job],
        groups: Mapping[str, JobGroup],
        email: EmailConfiguration | None,
    ) -> Catalog:
        """A catalog of maps that are LayeredMaps already (what every operation derives):
        built without the checks of `__init__`, which would find nothing to convert."""
        new = object.__new__(cls)
        put = object.__setattr__
        put(new, "jobs", jobs)
        put(new, "groups", groups)
        put(new, "email", email)
        return new

    @property
    def _jobs(self) -> LayeredMap[str, Job]:
        return cast("LayeredMap[str, Job]", self.jobs)  # a string: nothing built at run time

    @property
    def _groups(self) -> LayeredMap[str, JobGroup]:
        return cast("LayeredMap[str, JobGroup]", self.groups)

    @classmethod
    def build(
        cls,
        jobs: Iterable[Job] = (),
        groups: Iterable[JobGroup] = (),
        email: EmailConfiguration | None = None,
    ) -> Catalog:
        """A catalog of `jobs` and `groups`, checked as a whole (all problems reported)."""
        job_map: dict[str, Job] = {}
        group_map: dict[str, JobGroup] = {}
        problems: list[Problem] = []
        for job in jobs:
            if job.name in job_map:
                problems.append(
                    Problem("a job with this name is defined twice", job=job.name, key="name")
                )
            job_map[job.name] = job
        for group in groups:
            if group.name in group_map:
                problems.append(
                    Problem("a group with this name is defined twice", group=group.name, key="name")
                )
            group_map[group.name] = group
        catalog = cls(LayeredMap(job_map), LayeredMap(group_map), email)
        problems.extend(catalog.problems())
        if problems:
            raise InvalidJobError(problems)
        return catalog

    # -- queries ---------------------------------------------------------------------------

    def job(self, name: str) -> Job:
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownNameError(Problem("no job has this name", job=name)) from None

    def group(self, name: str) -> JobGroup:
        try:
            return self.groups[name]
        except KeyError:
            raise UnknownNameError(Problem("no group has this name", group=name)) from None

    def dependents(self, name: str) -> list[Job]:
        """The jobs whose dependence names job `name`, in definition order."""
        return list(self._dependents.get(name, ()))

    def groups_of(self, name: str) -> list[JobGroup]:
        """The groups that list job `name`."""
        return list(self._groups_of.get(name, ()))

    # Indexes built on first use, once per catalog (it is immutable): every finished run asks
    # for its job's dependents and groups, and a scan per run would cost O(jobs).
    @cached_property
    def _dependents(self) -> dict[str, list[Job]]:
        index: dict[str, list[Job]] = {}
        for job in self.jobs.values():
            if job.dependence is not None:
                index.setdefault(job.dependence.job_name, []).append(job)
        return index

    @cached_property
    def _groups_of(self) -> dict[str, list[JobGroup]]:
        index: dict[str, list[JobGroup]] = {}
        for group in self.groups.values():
            for job_name in group.job_names:
                index.setdefault(job_name, []).append(group)
        return index

    def problems(
        self, jobs: Iterable[str] | None = None, groups: Iterable[str] | None = None
    ) -> list[Problem]:
        """Every rule that spans jobs and is broken, each as a `Problem`.

        With `jobs` or `groups` given, only the rules those names take part in are checked
        (the rest of a catalog derived from a checked one is known to be sound): that keeps an
        operation on a catalog of 100,000 jobs O(1).
        """
        if jobs is None and groups is None:
            job_names, group_names = list(self.jobs), list(self.groups)
        else:
            job_names, group_names = list(jobs or ()), list(groups or ())
        return [
            *self._unknown_dependences(job_names),
            *self._cycles(job_names),
            *self._group_problems(group_names),
        ]

    def _unknown_dependences(self, names: list[str]) -> list[Problem]:
        problems: list[Problem] = []
        for name in names:
            dep = self.jobs[name].dependence
            if dep is not None and dep.job_name not in self.jobs:
                problems.append(
                    Problem(
                        f"depends on unknown job {dep.job_name!r}",
                        job=name,
                        key="dependence.job",
                    )
                )
        return problems

    def _group_problems(self, names: list[str]) -> list[Problem]:
        """A group named like a job, a group listing unknown jobs."""
        problems: list[Problem] = []
        for name in names:
            group = self.groups[name]
            if group.name in self.jobs:
                problems.append(
                    Problem("a group cannot have the name of a job", group=group.name, key="name")
                )
            problems.extend(
                Problem(f"lists unknown job {job_name!r}", group=group.name, key="jobs")
                for job_name in group.job_names
                if job_name not in self.jobs
            )
        return problems

    def _cycles(self, starts: Iterable[str]) -> list[Problem]:
        """The dependence cycles that pass through any of `starts`, each reported once."""
        problems: list[Problem] = []
        reported: set[str] = set()
        jobs = self.jobs
        for start in starts:
            if start in reported or jobs[start].dependence is None:
                continue  # a cycle passes only through jobs that have a dependence
            path: list[str] = []
            seen: set[str] = set()
            name: str | None = start
            while name is not None and name in jobs and name not in seen:
                seen.add(name)
                path.append(name)
                dep = jobs[name].dependence
                name = None if dep is None else dep.job_name
            if name is not None and name == start:
                cycle = path[path.index(name) :]
                reported.update(cycle)
                chain = " -> ".join([*cycle, name])
                problems.append(
                    Problem(f"dependence cycle: {chain}", job=start, key="dependence.job")
                )
        return problems

    # -- operations (each returns a new catalog) -----------------------------------------------

    def add_jobs(self, jobs: Sequence[Job]) -> Catalog:
        """Add `jobs` together (a job may depend on another added with it)."""
        added: dict[str, Job] = {}
        existing, groups = self.jobs, self.groups
        dependent: list[str] = []
        for job in jobs:
            if not isinstance(job, Job):
                raise InvalidJobError(f"add_job expects a Job, not {type(job).__name__}")
            name = job.name
            if name in added or name in existing:
                raise DuplicateNameError(
                    Problem("a job with this name exists already", job=name, key="name")
                )
            if name in groups:
                raise DuplicateNameError(
                    Problem("a group has this name already", job=name, key="name")
                )
            added[name] = job
            if job.dependence is not None:
                dependent.append(name)
        new = Catalog._derived(self._jobs.set_many(added.items()), groups, self.email)
        # A new job takes part in a spanning rule only through its dependence (its name was
        # checked against the groups above): the others need no further check.
        return new._checked(jobs=dependent) if dependent else new

    def modify_job(self, job: Job) -> Catalog:
        """Replace the job of the same name (which must exist)."""
        self.job(job.name)
        new = Catalog._derived(self._jobs.set(job.name, job), self.groups, self.email)
        return new._checked(jobs=[job.name])

    def remove_job(self, name: str) -> Catalog:
        """Remove job `name`, and take it out of every group that lists it.

        Refused while other jobs depend on it, or when it is the only job of a group (a group
        has at least one job: remove the group first); the message names them all.
        """
        self.job(name)
        listing = self.groups_of(name)
        self._check_removable(name, listing)
        groups: Mapping[str, JobGroup] = self.groups
        if listing:
            groups = self._groups.set_many(
                (g.name, JobGroup(g.name, [n for n in g.job_names if n != name], g.messages))
                for g in listing
            )
        return Catalog._derived(self._jobs.delete(name), groups, self.email)

    def _check_removable(self, name: str, listing: Sequence[JobGroup]) -> None:
        """Refuse to remove job `name` while other jobs depend on it or it is the only job of
        one of the groups `listing` it."""
        dependents = [j.name for j in self.dependents(name)]
        emptied = [g.name for g in listing if len(g.job_names) == 1]
        parts = []
        if dependents:
            parts.append(f"jobs {', '.join(map(repr, dependents))} depend on it")
        if emptied:
            parts.append(
                f"it is the only job of groups {', '.join(map(repr, emptied))}, which would "
                "be left empty"
            )
        if parts:
            raise InvalidJobError(
                Problem(
                    f"cannot remove: {'; '.join(parts)} (remove or change them first)", job=name
                )
            )

    def add_group(self, group: JobGroup) -> Catalog:
        if group.name in self.groups:
            raise DuplicateNameError(
                Problem("a group with this name exists already", group=group.name, key="name")
            )
        new = Catalog._derived(self.jobs, self._groups.set(group.name, group), self.email)
        return new._checked(groups=[group.name])

    def modify_group(self, group: JobGroup) -> Catalog:
        self.group(group.name)
        new = Catalog._derived(self.jobs, self._groups.set(group.name, group), self.email)
        return new._checked(groups=[group.name])

    def remove_group(self, name: str) -> Catalog:
        """Remove group `name`; its jobs stay."""
        self.group(name)
        return Catalog._derived(self.jobs, self._groups.delete(name), self.email)

    def with_email(self, email: EmailConfiguration | None) -> Catalog:
        return Catalog._derived(self.jobs, self.groups, email)

    def _checked(
        self, *, jobs: Iterable[str] | None = None, groups: Iterable[str] | None = None
    ) -> Catalog:
        """Self, after checking the rules the changed `jobs` and `groups` take part in."""
        problems = self.problems(jobs=jobs or (), groups=groups or ())
        if problems:
            raise InvalidJobError(problems)
        return self
