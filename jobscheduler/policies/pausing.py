"""Pauses: the jobs no node of the store runs for now, and `pause_after_failures`.

A pause is state in the state store (`JobPause`: who paused the job, when, a note, until
when), shared by every node; the definitions (the YAML file) are never edited by a pause, and
a job's ``enabled: false`` stays what it is: a definition, a job disabled. `Pauses` is this
node's copy of the store's pauses: `load` reads them again (when the store says they changed:
see `cluster.pauses`), `settle(now)` says which are in force now (a pause whose `until` has
come ends by itself on every node, no one writing it).

`pause_after_failures`: a FAILED final outcome counts one failure (a run with retries counts
once, after its last try), a SUCCESSFUL one resets the count, NOT_STARTED and skipped slots
change nothing. The count is kept and decided in the store, in one transaction
(`StateStore.count_outcome`), so with several nodes the job is paused after exactly N
consecutive failures whichever nodes ran them. Runs that overlap the pause (started before
it was made, ending after) are recorded and told as any run, and not counted, even once the
pause has ended (`JobPause.lets_count`: their start against the pause's). The run that
reaches N tells its handlers
FAILED with the reason "paused after N consecutive failures", which is the pause's note; with
``resume_after`` the pause lasts that long. While paused the job is off the timeline (the
engine is handed a disabled copy of it).

A store that fails while counting is logged; the run's outcome and events are not held up by
it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

from ..model.event import Event
from ..model.job import Job
from ..state.base import StateStore
from ..state.values import JobPause

__all__ = ["Pauses", "pause_reason"]

log = logging.getLogger("jobscheduler")


def pause_reason(count: int) -> str:
    return f"paused after {count} consecutive failures"


class Pauses:
    """This node's copy of the store's pauses (see the module notes); node `node` writes
    the pauses it makes under its name."""

    def __init__(self, store: StateStore, node: str) -> None:
        self._store = store
        self._node = node
        self.kept: dict[str, JobPause] = {}  # every pause read from the store
        self.paused: dict[str, JobPause] = {}  # those in force at the last `settle`

    def load(self) -> bool:
        """Read the pauses from the store; False (logged, the copy kept) when it fails."""
        try:
            self.kept = self._store.pauses()
        except Exception:
            log.exception("reading the paused jobs from the state store failed")
            return False
        return True

    def settle(self, now: datetime) -> set[str]:
        """Which pauses are in force at `now`; the names of the jobs paused or resumed since
        the last `settle`."""
        before = self.paused
        self.paused = {name: p for name, p in self.kept.items() if p.in_force(now)}
        return set(before).symmetric_difference(self.paused)

    def next_end(self) -> datetime | None:
        """When the first pause in force with an `until` ends (None: none has one)."""
        ends = [p.until for p in self.paused.values() if p.until is not None]
        return min(ends) if ends else None

    def pause(
        self, names: Sequence[str], now: datetime, note: str | None, until: datetime | None
    ) -> None:
        """Pause `names` in the store, by this node, at `now` (raises when the store fails:
        the caller is told)."""
        self._store.pause(names, node=self._node, paused_at=now, note=note, until=until)
        for name in names:
            self.kept[name] = JobPause(
                job=name, node=self._node, paused_at=now, note=note, until=until
            )

    def resume(self, names: Sequence[str] | None) -> list[str]:
        """End the pauses of `names` (None: all) in the store, and their failure counts; the
        jobs that had one. Raises when the store fails."""
        resumed = self._store.resume(names)
        if names is None:
            self.kept = {}
        else:
            for name in names:
                self.kept.pop(name, None)
        return resumed

    def counted(
        self, job: Job, event: Event, now: datetime, started: datetime | None = None
    ) -> str | None:
        """Count the final outcome `event` of a run of `job` (which has
        `pause_after_failures`) that started at `started`, in the store; the pause reason
        when this run paused the job."""
        policy = job.pause_after_failures
        if policy is None or event is Event.NOT_STARTED:
            return None
        name = job.name
        reason = pause_reason(policy.failures)
        until = now + policy.resume_after if policy.resume_after is not None else None
        try:
            made = self._store.count_outcome(
                name,
                failed=event is Event.FAILED,
                limit=policy.failures,
                node=self._node,
                at=now,
                note=reason,
                until=until,
                started=started,
            )
        except Exception:
            log.exception("job %r: counting its failures in the state store failed", name)
            return None
        if made is None:
            return None
        self.kept[name] = self.paused[name] = made
        if until is None:
            log.warning("job %r is %s; resume it to schedule it again", name, reason)
        else:
            log.warning("job %r is %s, until %s", name, reason, until.isoformat())
        return reason

    def in_store(self, name: str, now: datetime) -> bool:
        """Whether job `name` is paused at `now` as the store says this moment (one read:
        what a node asks right before a run of a job with `pause_after_failures`, so that
        a pause another node just made stops it here too)."""
        pause = self._store.pause_of(name)
        return pause is not None and pause.in_force(now)

    def engine_view(self, jobs: Iterable[Job]) -> list[Job]:
        """`jobs` as the engine gets them: a paused one as a disabled copy."""
        paused = self.paused
        if not paused:
            return list(jobs)
        return [
            job.with_changes(enabled=False) if job.enabled and job.name in paused else job
            for job in jobs
        ]
