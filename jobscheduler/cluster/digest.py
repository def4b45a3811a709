"""The digest of a node's job definitions, published with its heartbeat so that nodes whose
files differ can be told apart (`status`, the page, ``/api/nodes``).

What it covers: every job the node defines (from its file or in code), each as the keys it is
written with in the file (`config.dump.job_entries`: its non-default keys, start times in the
job's zone, durations as written), by name. The SHA-256 of their canonical JSON text (keys
sorted, no spaces) is the digest: the same definitions give the same digest on every machine,
whatever the order of the file, its comments, or its groups and e-mail settings (which are
not part of it: they change no run). A job defined in code is covered by its keys too, its
function by its qualified name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..config.dump import job_entries
from ..errors import JobActionError
from ..model.job import Job

__all__ = ["DefinitionsDigest", "definitions_digest"]


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


def definitions_digest(jobs: Mapping[str, Job]) -> str:
    """The hex SHA-256 of the canonical JSON of `jobs`' definitions (see the module notes)."""
    data = {name: _entries(job) for name, job in jobs.items()}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DefinitionsDigest:
    """The digest and sorted job names of the definitions in force, computed again only when
    the jobs' map is another one (a `Catalog`'s maps are immutable: a change makes a new one,
    so an unchanged map is known by identity; the map is kept, so its id is never reused)."""

    def __init__(self) -> None:
        self._jobs: Mapping[str, Job] | None = None
        self._digest = ""
        self._names: tuple[str, ...] = ()

    def of(self, jobs: Mapping[str, Job]) -> tuple[str, tuple[str, ...]]:
        """(digest, sorted job names) of `jobs`."""
        if jobs is not self._jobs:
            self._digest = definitions_digest(jobs)
            self._names = tuple(sorted(jobs))
            self._jobs = jobs
        return self._digest, self._names
