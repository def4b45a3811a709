"""The `pause_after_failures` policy: a job that failed N times in a row is paused.

Runtime state, kept in the state store's marks (``failures``, ``paused_reason``), never in
the definitions: the job stays ``enabled`` in its YAML file, and a restart (or another node
sharing the store) finds it paused. A FAILED final outcome counts one failure (a run with
retries counts once, after its last try), a SUCCESSFUL one resets the count, NOT_STARTED
and skipped slots change nothing. The run that reaches N tells its handlers FAILED with
the reason "paused after N consecutive failures". While paused the job is off the
timeline (the engine is handed a disabled copy of it); `resume` clears the mark.

A store that fails is logged; the run's outcome and events are not held up by it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..model.event import Event
from ..model.job import Job
from ..state.base import StateStore

__all__ = ["Pauses", "pause_reason"]

log = logging.getLogger("jobscheduler")


def pause_reason(count: int) -> str:
    return f"paused after {count} consecutive failures"


class Pauses:
    """Which jobs are paused by their failures (a cache of the store's marks)."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.paused: dict[str, str] = {}  # job name -> reason

    def load(self) -> None:
        """Read the paused jobs from the store (at start: they stay paused)."""
        try:
            marks = self._store.marks()
        except Exception:
            log.exception("reading the paused jobs from the state store failed")
            return
        self.paused = {name: m.paused_reason for name, m in marks.items() if m.paused_reason}

    def counted(self, job: Job, event: Event) -> str | None:
        """Count the final outcome `event` of a run of `job` (which has
        `pause_after_failures`); the pause reason when this run paused the job."""
        limit = job.pause_after_failures
        name = job.name
        if limit is None or event is Event.NOT_STARTED:
            return None
        try:
            mark = self._store.mark(name)
            failures = mark.failures if mark is not None else 0
            if event is not Event.FAILED:
                if failures:
                    self._store.set_mark(name, failures=0)
                return None
            failures += 1
            if failures < limit:
                self._store.set_mark(name, failures=failures)
                return None
            reason = pause_reason(failures)
            self._store.set_mark(name, failures=failures, paused_reason=reason)
        except Exception:
            log.exception("job %r: counting its failures in the state store failed", name)
            return None
        self.paused[name] = reason
        log.warning("job %r is %s; resume it to schedule it again", name, reason)
        return reason

    def resume(self, name: str) -> bool:
        """Clear job `name`'s pause and failure count; True if it was paused."""
        was = self.paused.pop(name, None) is not None
        try:
            mark = self._store.mark(name)
            if mark is not None and (mark.failures or mark.paused_reason):
                self._store.set_mark(name, failures=0, paused_reason=None)
                was = was or mark.paused_reason is not None
        except Exception:
            log.exception("job %r: clearing its pause in the state store failed", name)
        return was

    def engine_view(self, jobs: Iterable[Job]) -> list[Job]:
        """`jobs` as the engine gets them: a paused one as a disabled copy."""
        paused = self.paused
        if not paused:
            return list(jobs)
        return [
            job.with_changes(enabled=False) if job.enabled and job.name in paused else job
            for job in jobs
        ]
