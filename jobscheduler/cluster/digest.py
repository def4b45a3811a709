"""The digest of a node's job definitions, published with its heartbeat so that nodes whose
files differ can be told apart (`status`, the page, ``/api/nodes``).

What it covers: every job the node defines (from its file or in code), each as the keys it is
written with in the file (`config.dump.job_entries`: its non-default keys, start times in the
job's zone, durations as written) with its name. Each job's digest is the SHA-256 of that
canonical JSON text (keys sorted, no spaces); the definitions' digest is the SHA-256 of the
jobs' digests in name order. The same definitions give the same digest on every machine,
whatever the order of the file, its comments, or its groups and e-mail settings (which are
not part of it: they change no run). A job defined in code is covered by its keys too, its
function by its qualified name. A job's digest costs about as much as writing it to the file
(about 40 microseconds), so a node digests each job once and then only the jobs that changed
(`DefinitionsDigest`), a few at a time between runs (`cluster.node`), and only where another
node can see its store.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from ..config.dump import job_entries
from ..errors import JobActionError
from ..model.job import Job

__all__ = ["DefinitionsDigest", "definitions_digest", "job_digest"]


def _entries(job: Job) -> dict[str, Any]:
    try:
        return job_entries(job)
    except JobActionError:  # arguments a file cannot hold (a job defined in code)
        return {"repr": repr(job.args)}


def _plain(value: Any) -> str:
    """A value JSON has no form for: a function or class by its qualified name (its address
    would differ from process to process), anything else as text."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return str(value)


# One encoder for every job (`json.dumps` with options makes one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_plain)


def job_digest(name: str, job: Job) -> str:
    """The hex SHA-256 of one job's canonical JSON (its name and its entries)."""
    text = _CANONICAL.encode([name, _entries(job)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def combined(each: Mapping[str, str]) -> str:
    """The digest of jobs whose own digests are `each` (by name): the SHA-256 of theirs, in
    name order."""
    whole = hashlib.sha256()
    for name in sorted(each):
        whole.update(each[name].encode("ascii"))
    return whole.hexdigest()


def definitions_digest(jobs: Mapping[str, Job]) -> str:
    """The digest of `jobs`' definitions (see the module notes), computed whole."""
    return combined({name: job_digest(name, job) for name, job in jobs.items()})


class DefinitionsDigest:
    """The digest and sorted job names of the definitions in force, computed again only when
    the jobs' map is another one (a `Catalog`'s maps are immutable: a change makes a new one,
    so an unchanged map is known by identity; the map is kept, so its id is never reused),
    and then only for the jobs that changed: each job's own digest is kept with the job, and
    reused while the job is the same (the same object, or an equal one: a reload reads every
    job anew). So each job is digested once, however many changes follow. The jobs still to
    digest can be digested a few at a time (`prepare`), between runs, before `of` combines
    them. Thread-safe: one computation at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: Mapping[str, Job] | None = None
        self._digest: str | None = None  # of `_jobs`, once every job of it is digested
        self._names: tuple[str, ...] = ()
        self._each: dict[str, tuple[Job, str]] = {}  # the jobs of `_jobs` digested
        self._pending: list[str] = []  # the names of the jobs of `_jobs` still to digest

    @staticmethod
    def names(jobs: Mapping[str, Job]) -> tuple[str, ...]:
        """The sorted names of `jobs` (cheap: no digest)."""
        return tuple(sorted(jobs))

    def prepare(self, jobs: Mapping[str, Job], count: int) -> bool:
        """Digest at most `count` more of the jobs of `jobs` not digested yet; True when none
        is left (`of(jobs)` then only combines the jobs' digests). `count` 0 only tells."""
        with self._lock:
            self._switch(jobs)
            self._digest_pending(count)
            return not self._pending

    def of(self, jobs: Mapping[str, Job]) -> tuple[str, tuple[str, ...]]:
        """(digest, sorted job names) of `jobs`."""
        with self._lock:
            self._switch(jobs)
            if self._digest is None:
                self._digest_pending(len(self._pending))
                each = self._each
                self._names = tuple(sorted(each))
                whole = hashlib.sha256()
                for name in self._names:
                    whole.update(each[name][1].encode("ascii"))
                self._digest = whole.hexdigest()  # = combined(), names sorted once
            return self._digest, self._names

    def _switch(self, jobs: Mapping[str, Job]) -> None:
        """Make `jobs` the map digested: its jobs digested already kept, the others pending."""
        if jobs is self._jobs:
            return
        known: dict[str, tuple[Job, str]] = self._each
        each: dict[str, tuple[Job, str]] = {}
        pending: list[str] = []
        for name, job in jobs.items():
            kept = known.get(name)
            if kept is not None and (kept[0] is job or kept[0] == job):
                each[name] = kept
            else:
                pending.append(name)
        pending.reverse()  # popped from the end: digested in the map's order
        self._jobs, self._each, self._pending, self._digest = jobs, each, pending, None

    def _digest_pending(self, count: int) -> None:
        jobs, each, pending = self._jobs, self._each, self._pending
        assert jobs is not None
        for _ in range(min(count, len(pending))):
            name = pending.pop()
            job = jobs[name]
            each[name] = (job, job_digest(name, job))
