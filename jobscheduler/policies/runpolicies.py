"""`RunPolicies`: the run policies around the engine, for the `Scheduler` to wire.

They act on the engine through two callbacks the scheduler hands them: `run_at(job, when,
trigger)` starts one run later (a retry, a catch-up run, a host's second look), and
`schedule(jobs, now)` hands the engine jobs again (paused or resumed).

The scheduler asks it three things, each cheap for a job that uses no policy:

- `verdict(job, execution)` when a run ends: None (no policy of the job applies: the usual
  path), or a `Verdict` saying whether the run is recorded, whether its handlers hear it and
  whether its dependents follow it — a slot skipped by `overlap` is recorded here (state
  ``skipped``, no event); a try that `retry` will repeat is recorded but heard only with
  ``alert_each_attempt`` and never followed; the run that pauses its job
  (`pause_after_failures`) is told with the reason "paused after N consecutive failures".
  A job with `catch_up` has its mark's ``last_slot`` moved to the slot of each run that ends.
- `runs_here(job, ctx)` before a run of a job with a `host`, or a retry, is claimed in the
  state store (see `hosts`).
- `catch_up(jobs, now)` at start, and `engine_view(jobs)`, `pause`, `resume`, `refresh` for
  pauses (kept in the store: `pausing`).

Each policy is a module of its own: `overlap` (asked by the engine's dispatch), `retry`,
`pausing`, `catchup`, `hosts`.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import NamedTuple

from ..clock import Clock
from ..model.catalog import Catalog
from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job
from ..runners.context import RunContext
from ..state.base import StateStore
from ..state.records import RunState
from ..state.values import JobPause
from .catchup import CATCH_UP, missed_slots
from .hosts import RECHECK, Hosts, no_node_reason
from .overlap import SKIPPED
from .pausing import Pauses
from .retry import Retries
from .slottrigger import SlotTrigger

__all__ = ["RunPolicies", "Verdict"]

log = logging.getLogger("jobscheduler")

# `run_at(job, when, trigger)`: one run of `job` at `when` (`JobProcessor.run_at`).
RunAtFn = Callable[[Job, datetime, str], None]
# `schedule(jobs, now)`: the engine takes `jobs` again (`JobProcessor.add_jobs`).
ScheduleFn = Callable[[Iterable[Job], datetime], None]


class Verdict(NamedTuple):
    """What the scheduler does with an ended run (see the module notes)."""

    execution: Execution
    record: bool
    tell: bool
    follow: bool


class RunPolicies:
    """The run policies of one scheduler: node `node` on `store`, its `clock`, and
    `catalog()` (the definitions in force); `run_at` and `schedule` act on its engine (see
    the module notes); `report(job, execution)` is the scheduler's end of a run (for a run
    this node records NOT_STARTED for `host`). Reads the paused jobs from the store at once.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        node: str,
        clock: Clock,
        catalog: Callable[[], Catalog],
        run_at: RunAtFn,
        schedule: ScheduleFn,
        report: Callable[[Job, Execution], None],
    ) -> None:
        self._store = store
        self._node = node
        self._clock = clock
        self._catalog = catalog
        self._run_at = run_at
        self._schedule = schedule
        self._report = report
        self.retries = Retries()
        self.pauses = Pauses(store, node)
        self._settling = threading.Lock()
        self.hosts = Hosts(store, node)
        # `catch_up: all`: the slots still to make up, by job, started one after another
        self._catching: dict[str, deque[datetime]] = {}
        self.pauses.load()
        self.pauses.settle(clock.now())

    # -- a run ended ---------------------------------------------------------------------------

    def verdict(self, job: Job, execution: Execution) -> Verdict | None:
        """None for a job without a policy to apply (the common case), else a `Verdict`."""
        if execution.reason is SKIPPED:
            self._record_skipped(job, execution)
            return Verdict(execution, False, False, False)
        if not job.has_after_run_policy:  # every run comes here, nearly all without one
            return None
        return self._after(job, execution)

    def _after(self, job: Job, execution: Execution) -> Verdict:
        name = job.name
        slot = execution.slot
        if job.catch_up != "none" and slot is not None:
            self._advance(name, slot)
            if execution.trigger == CATCH_UP and name in self._catching:
                self._next_catch_up(job)
        attempt = self.retries.attempt_of(execution.run_id)  # forgotten here, whatever comes
        current = self._catalog().jobs.get(name)
        if job.retry is not None and current is not None and current.enabled:
            retried = self._retry(current, execution, attempt)
            if retried is not None:
                return retried
        if job.pause_after_failures is not None:
            execution = self._count_failure(job, current, execution)
        return Verdict(execution, True, True, True)

    def _retry(self, current: Job, execution: Execution, attempt: int) -> Verdict | None:
        """Start the next try (after `attempt`) of a run that failed, if its job's `retry`
        allows one: the try is recorded, heard only with ``alert_each_attempt`` and never
        followed."""
        if current.name in self.pauses.paused:
            return None
        again = self.retries.next_try(current, execution, attempt, self._clock.now())
        if again is None:
            return None
        when, trigger = again
        self._run_at(current, when, trigger)
        each = current.retry is not None and current.retry.alert_each_attempt
        return Verdict(execution, True, each, False)

    def _count_failure(self, job: Job, current: Job | None, execution: Execution) -> Execution:
        """Count the run for `pause_after_failures`: the run that pauses its job is told with
        the reason, and the job leaves the engine."""
        event = execution.event if execution.event is not None else Event.FAILED
        reason = self.pauses.counted(job, event, self._clock.now(), execution.started)
        if reason is None:
            return execution
        if current is not None and current.enabled:
            self._schedule([current.with_changes(enabled=False)], self._clock.now())
        return replace(execution, reason=reason)

    def _advance(self, name: str, slot: datetime) -> None:
        try:
            self._store.set_mark(name, last_slot=slot)
        except Exception:
            log.exception("job %r: moving its mark to %s failed", name, slot.isoformat())

    def _record_skipped(self, job: Job, execution: Execution) -> None:
        slot = execution.slot
        if job.catch_up != "none" and slot is not None:
            self._advance(job.name, slot)
        ended = execution.ended if execution.ended is not None else execution.started
        try:
            if self._store.record(
                job.name,
                slot,
                execution.trigger,
                execution.run_id,
                node=self._node,
                state=RunState.SKIPPED,
                started=execution.started,
                ended=ended,
                reason=SKIPPED,
            ):
                return
            # Its key is taken: by a claim of this very run made before the slot was due
            # (`engine.ahead`), ``running``, which is settled ``skipped`` here (else another
            # node handled the slot, and the finish finds no running run of this id).
            self._store.finish(
                execution.run_id,
                state=RunState.SKIPPED,
                ended=ended,
                reason=SKIPPED,
                started=execution.started,
            )
        except Exception:
            log.exception("job %r: recording a skipped slot failed", job.name)

    # -- a run starts ------------------------------------------------------------------------

    def runs_here(self, job: Job, ctx: RunContext) -> bool:
        """Before the store's claim of a run of a job with a `host` or of a retry: False when
        this node does not run it (see `hosts`)."""
        if ctx.attempt != 1:
            self.retries.claimed(ctx.run_id, ctx.attempt)
        pattern = job.host
        if pattern is None or self.hosts.here(pattern):
            return True
        if self.hosts.anywhere(pattern):
            return False  # a matching node takes it
        now = self._clock.now()
        slot = ctx.slot
        if slot is not None and not self.hosts.late(slot, now):
            # Ask again once the slot is a lease period late: a matching node may come.
            trigger = SlotTrigger(RECHECK, slot, ctx.attempt, reported=ctx.trigger)
            self._run_at(job, slot + self.hosts.lease, trigger)
            return False
        reason = no_node_reason(pattern)
        written = self._store.record(
            job.name,
            slot,
            ctx.trigger,
            ctx.run_id,
            node=self._node,
            attempt=ctx.attempt,
            state=RunState.NOT_STARTED,
            started=now,
            ended=now,
            reason=reason,
        )
        if written:  # this node tells it (others sharing the store found the key taken)
            execution = Execution.not_started(
                job.name, ctx.run_id, slot, now, reason, ctx.trigger, ctx.attempt
            )
            self._report(job, execution)
        return False

    # -- start, pause, resume ------------------------------------------------------------------

    def starting(self, jobs: Iterable[Job]) -> tuple[list[Job], datetime]:
        """The scheduler starts with `jobs`: their catch-up runs are started (`catch_up`),
        and the jobs as the engine gets them (`engine_view`) are returned, with now."""
        jobs = list(jobs)
        now = self._clock.now()
        if self.pauses.load():  # paused or resumed elsewhere while stopped
            self.pauses.settle(now)
        self.catch_up(jobs, now)
        return self.engine_view(jobs), now

    def catch_up(self, jobs: Iterable[Job], now: datetime) -> int:
        """Start the catch-up runs of `jobs` (see `catchup`); returns how many."""
        wanted = [
            job
            for job in jobs
            if job.catch_up != "none" and job.enabled and job.name not in self.pauses.paused
        ]
        if not wanted:
            return 0
        try:
            marks = self._store.marks()
        except Exception:
            log.exception("reading the jobs' marks for catch_up failed; nothing is caught up")
            return 0
        started = 0
        for job in wanted:
            mark = marks.get(job.name)
            if mark is None or mark.last_slot is None:
                continue  # no mark: it has missed nothing
            slots = missed_slots(job, mark.last_slot, now, window=job.catch_up_window)
            if job.catch_up == "latest":
                slots = slots[-1:]
            if slots:  # one after another: the next when this one has ended
                self._catching[job.name] = deque(slots)
                self._next_catch_up(job)
                log.info("job %r: %d catch-up run(s), up to %s", job.name, len(slots), slots[-1])
            started += len(slots)
        return started

    def _next_catch_up(self, job: Job) -> None:
        """Start the next catch-up run of `job`, if any is left (run from its start, and
        when a catch-up run of it ends: one at a time, oldest first)."""
        left = self._catching.get(job.name)
        if not left:
            self._catching.pop(job.name, None)
            return
        slot = left.popleft()
        if not left:
            del self._catching[job.name]
        current = self._catalog().jobs.get(job.name, job)
        self._run_at(current, self._clock.now(), SlotTrigger(CATCH_UP, slot))

    def engine_view(self, jobs: Iterable[Job]) -> list[Job]:
        """`jobs` as the engine gets them (a job paused by its failures: disabled)."""
        return self.pauses.engine_view(jobs)

    def refresh(self) -> bool:
        """Read the pauses from the store again (another process may have paused or resumed
        a job: the CLI, another node) and bring the engine in step (`cluster.pauses` calls it
        when the store's pauses changed; `Scheduler.reload` too). False when the read failed
        (logged)."""
        if not self.pauses.load():
            return False
        self.settle()
        return True

    def settle(self) -> None:
        """Bring the engine in step with the pauses in force now (a pause whose `until` has
        come ends here, without a read). One caller at a time (the follower's thread, a
        worker's claim, the API): each change is handed to the engine once, in order."""
        with self._settling:
            changed = self.pauses.settle(self._clock.now())
            self._reschedule(changed)

    def _reschedule(self, names: Iterable[str]) -> None:
        jobs = self._catalog().jobs
        changed = [jobs[name] for name in names if name in jobs and jobs[name].enabled]
        if changed:
            self._schedule(self.engine_view(changed), self._clock.now())
            if log.isEnabledFor(logging.INFO):  # the line bench/pause_reach.py times
                paused = sorted(job.name for job in changed if job.name in self.pauses.paused)
                resumed = sorted(job.name for job in changed if job.name not in self.pauses.paused)
                log.info(
                    "node %s follows the pauses: %d job(s) paused %s, %d resumed %s",
                    self._node, len(paused), _few(paused), len(resumed), _few(resumed),
                )  # fmt: skip

    def next_end(self) -> datetime | None:
        """When the first pause in force with an `until` ends (None: none has one)."""
        return self.pauses.next_end()

    def is_paused(self, name: str) -> bool:
        return name in self.pauses.paused

    def paused_names(self) -> Collection[str]:
        """The jobs paused now, as this node follows the store (the queue takes none of
        theirs)."""
        return self.pauses.paused.keys()

    def pause_of(self, name: str) -> JobPause | None:
        """Job `name`'s pause in force (as this node last read it), or None."""
        return self.pauses.paused.get(name)

    def pause(self, names: Sequence[str], note: str | None, until: datetime | None) -> None:
        """Pause `names` in the store (every node follows) and take them off this engine at
        once. Raises when the store fails (nothing changed)."""
        self.pauses.pause(names, self._clock.now(), note, until)
        self.settle()

    def resume(self, names: Sequence[str] | None) -> list[str]:
        """End the pauses of `names` (None: every pause) and their failure counts, in the
        store; schedule them again here from their next slot. The jobs that had a pause."""
        resumed = self.pauses.resume(names)
        self.settle()
        return resumed

    def paused_in_store(self, job: Job) -> bool:
        """Right before a run of `job` is claimed: whether the store has it paused now (asked
        for jobs with `pause_after_failures` only: a pause by failures made on another node
        this moment stops the next run here too, so the cluster runs exactly N)."""
        if job.pause_after_failures is None:
            return False
        if self.pauses.in_store(job.name, self._clock.now()):
            if job.name not in self.pauses.paused:
                self.refresh()
            return True
        return False


def _few(names: list[str], most: int = 5) -> str:
    """Up to `most` of `names` for a log line (a pause of every job names thousands)."""
    shown = ", ".join(repr(name) for name in names[:most])
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"[{shown}{more}]"
