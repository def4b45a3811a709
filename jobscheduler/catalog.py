"""The set of definitions — jobs, groups, e-mail settings — and the rules that span jobs.

A `Catalog` is immutable: each operation returns a new one or raises `JobActionError`. Rules
that one job cannot check alone live here: unique names (jobs and groups share one name space,
since handlers are added by name), dependences on known jobs without cycles, groups of known
jobs, and no removal of a job that others depend on or a group lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .emailconfig import EmailConfiguration
from .errors import DuplicateNameError, InvalidJobError, Problem, UnknownNameError
from .job import Job, JobGroup

__all__ = ["Catalog"]


@dataclass(frozen=True)
class Catalog:
    """Jobs and groups by name, in their order of definition, and the e-mail settings."""

    jobs: Mapping[str, Job] = field(default_factory=lambda: MappingProxyType({}))
    groups: Mapping[str, JobGroup] = field(default_factory=lambda: MappingProxyType({}))
    email: EmailConfiguration | None = None

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
        catalog = cls(MappingProxyType(job_map), MappingProxyType(group_map), email)
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
        return [
            job
            for job in self.jobs.values()
            if job.dependence is not None and job.dependence.job_name == name
        ]

    def groups_of(self, name: str) -> list[JobGroup]:
        """The groups that list job `name`."""
        return [group for group in self.groups.values() if name in group.job_names]

    def problems(self) -> list[Problem]:
        """Every rule that spans jobs and is broken, each as a `Problem`."""
        problems: list[Problem] = []
        for job in self.jobs.values():
            dep = job.dependence
            if dep is not None and dep.job_name not in self.jobs:
                problems.append(
                    Problem(
                        f"depends on unknown job {dep.job_name!r}",
                        job=job.name,
                        key="dependence.job",
                    )
                )
        problems.extend(self._cycles())
        for group in self.groups.values():
            if group.name in self.jobs:
                problems.append(
                    Problem("a group cannot have the name of a job", group=group.name, key="name")
                )
            for job_name in group.job_names:
                if job_name not in self.jobs:
                    problems.append(
                        Problem(f"lists unknown job {job_name!r}", group=group.name, key="jobs")
                    )
        return problems

    def _cycles(self) -> list[Problem]:
        problems: list[Problem] = []
        reported: set[str] = set()
        for start in self.jobs:
            path: list[str] = []
            seen: set[str] = set()
            name: str | None = start
            while name is not None and name in self.jobs and name not in seen:
                seen.add(name)
                path.append(name)
                dep = self.jobs[name].dependence
                name = None if dep is None else dep.job_name
            if name is not None and name == start and start not in reported:
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
        new = dict(self.jobs)
        for job in jobs:
            if not isinstance(job, Job):
                raise InvalidJobError(f"add_job expects a Job, not {type(job).__name__}")
            if job.name in new:
                raise DuplicateNameError(
                    Problem("a job with this name exists already", job=job.name, key="name")
                )
            if job.name in self.groups:
                raise DuplicateNameError(
                    Problem("a group has this name already", job=job.name, key="name")
                )
            new[job.name] = job
        return self._checked(jobs=new)

    def modify_job(self, job: Job) -> Catalog:
        """Replace the job of the same name (which must exist)."""
        self.job(job.name)
        new = dict(self.jobs)
        new[job.name] = job
        return self._checked(jobs=new)

    def remove_job(self, name: str) -> Catalog:
        """Remove job `name`; refused while other jobs depend on it or groups list it."""
        self.job(name)
        dependents = [j.name for j in self.dependents(name)]
        groups = [g.name for g in self.groups_of(name)]
        if dependents or groups:
            parts = []
            if dependents:
                parts.append(f"jobs {', '.join(map(repr, dependents))} depend on it")
            if groups:
                parts.append(f"groups {', '.join(map(repr, groups))} list it")
            raise InvalidJobError(
                Problem(
                    f"cannot remove: {'; '.join(parts)} (remove or change them first)", job=name
                )
            )
        new = dict(self.jobs)
        del new[name]
        return Catalog(MappingProxyType(new), self.groups, self.email)

    def add_group(self, group: JobGroup) -> Catalog:
        if group.name in self.groups:
            raise DuplicateNameError(
                Problem("a group with this name exists already", group=group.name, key="name")
            )
        new = dict(self.groups)
        new[group.name] = group
        return self._checked(groups=new)

    def modify_group(self, group: JobGroup) -> Catalog:
        self.group(group.name)
        new = dict(self.groups)
        new[group.name] = group
        return self._checked(groups=new)

    def remove_group(self, name: str) -> Catalog:
        """Remove group `name`; its jobs stay."""
        self.group(name)
        new = dict(self.groups)
        del new[name]
        return Catalog(self.jobs, MappingProxyType(new), self.email)

    def with_email(self, email: EmailConfiguration | None) -> Catalog:
        return Catalog(self.jobs, self.groups, email)

    def _checked(
        self, *, jobs: Mapping[str, Job] | None = None, groups: Mapping[str, JobGroup] | None = None
    ) -> Catalog:
        catalog = Catalog(
            MappingProxyType(dict(jobs)) if jobs is not None else self.jobs,
            MappingProxyType(dict(groups)) if groups is not None else self.groups,
            self.email,
        )
        problems = catalog.problems()
        if problems:
            raise InvalidJobError(problems)
        return catalog
