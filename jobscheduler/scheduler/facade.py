"""`Scheduler`: the facade that wires definitions, the processor, runners and handlers.

It owns the definitions store (a `DefinitionStore`: every API change is written to the file
at once), the `JobProcessor` (when runs start), the `Runner` (how they run), the handlers, the
audit log and the state store (what ran and what runs). It holds no scheduling logic of its
own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType

from ..clock import Clock, SystemClock
from ..cluster.backfill import BACKFILL, Backfill, BackfillError, SlotDecision, check_range
from ..cluster.claims import StoreClaims
from ..cluster.liveoutput import LiveOutput
from ..cluster.node import Retention
from ..cluster.nodenames import local_name
from ..cluster.nodesetup import default_state, make_keeper
from ..cluster.overdue import OverdueWatch
from ..cluster.pauses import PauseFollower
from ..cluster.queue import JobPausedError, QueueConsumer
from ..engine.processor import JobProcessor
from ..errors import Problem, UnknownNameError
from ..events.alerts import FileAlerts
from ..events.audit import audit_log, log_audit
from ..events.base import EventHandler
from ..events.dependences import DependenceStarts, TriggerEventHandler
from ..events.dispatch import HandlerRegistry
from ..events.email import EmailEventHandler
from ..events.outboxstore import StoredAlerts
from ..model.catalog import Catalog
from ..model.catalogdiff import CatalogDiff, diff_catalogs, drops_pending
from ..model.emailconfig import EmailConfiguration
from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job, JobGroup
from ..model.node import default_node_name
from ..policies.runpolicies import RunPolicies, Verdict
from ..policies.slottrigger import SlotTrigger
from ..runners.runner import Runner
from ..state.base import StateStore
from ..state.open import open_store
from ..state.records import RunRecord
from ..state.values import JobPause, NodeInfo
from .pythonface import PythonFace

__all__ = ["Scheduler"]

log = logging.getLogger("jobscheduler")


class Scheduler(PythonFace):
    """Runs jobs on their schedules; the one object an application holds.

    ``Scheduler("jobs.yaml")`` keeps its definitions in that YAML file (created on the first
    write if missing); ``Scheduler()`` keeps them in memory only. Every change made through
    the API is checked, written to the file atomically, then applied to the running schedule.
    Edits made to the file by hand take effect on `reload`, or on `stop` then `start`.

    Used as a context manager, it is started on entry and shut down (waiting for running
    jobs) on exit.

    `node` names this scheduler process in every run's context (``JOBSCHEDULER_NODE``,
    `current_run`); the default is ``HOSTNAME-PID`` (`default_node_name`). ValueError for an
    empty name or one with control characters.

    `state` (docs/state.md): a URL, ``"memory"`` or a `StateStore`; None: $JOBSCHEDULER_STATE,
    else ``jobs.state.db`` beside ``jobs.yaml``, else memory. `lease`, `retention`: cluster.node.
    """

    def __init__(
        self,
        config_path: str | Path | None = None,
        *,
        state: str | StateStore | None = None,
        node: str | None = None,
        max_workers: int = 10,
        clock: Clock | None = None,
        history_limit: int = 1000,
        handler_threads: int = 4,
        lease: timedelta | float | None = None,
        retention: Retention | None = None,
    ) -> None:
        from ..config import ConfigStore  # lazy: kept off the import path
        from ..config.codejobs import CodeJobStore

        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.RLock()
        self._node = local_name(node, default_node_name())  # checked: ValueError
        self._runner = Runner(self._clock)
        self._overdue = OverdueWatch(
            self._runner.execute,
            self._store_now,
            self._clock,
            self._on_overdue,
            start=self._runner.start,
        )
        self._live = LiveOutput(
            self._overdue.execute, self._store_now, self._clock, start=self._overdue.start
        )
        # Made before the file is read: it refuses a bad max_workers first.
        self._processor = JobProcessor(
            self._live.execute,
            self._on_finished,
            clock=self._clock,
            max_workers=max_workers,
            node=self._node,
            on_finished_many=self._on_finished_many,
            # Async jobs: on the runner's event loop, holding no worker (watched for their
            # output and warn_after as any run).
            start=self._live.start,
        )
        state = default_state(state, config_path)
        self._state, self._owns_state = open_store(state, history_limit=history_limit)
        self._keeper = make_keeper(
            self._state, self._processor, name=self._node, clock=self._clock,
            jobs=lambda: self._catalog.jobs, report=self._on_finished, lease=lease,
            retention=retention, max_workers=max_workers,
            # A memory store made here: no other node sees it, nothing to compare with.
            compare=not (self._owns_state and self._state.in_process),
        )  # fmt: skip
        self._store: CodeJobStore = CodeJobStore(ConfigStore(config_path))  # + code jobs
        self._catalog: Catalog = Catalog()
        catalog = self._store.read()
        self.queue = QueueConsumer(
            self._processor, self._state, self._node, lambda: self._catalog,
            paused=lambda: self._policies.paused_names(),
        )  # fmt: skip
        self.queue.tell_store_failures(self._keeper.outage.failed)
        self._runner.when_given_up(self._processor.given_up)
        self._handlers = HandlerRegistry(handler_threads)
        kept = StoredAlerts(
            self._state, self._handlers.outbox, self._clock, lambda: self._catalog.email
        )
        self._keeper.when_alerts_due(kept.retry_due)
        self._trigger = TriggerEventHandler(
            DependenceStarts(
                lambda: self._catalog,
                self._processor,
                self._clock,
                self._on_finished,
                paused=lambda name: self._policies.is_paused(name),
            )
        )
        self._alerts = FileAlerts(self._clock)
        self._running = False
        self._closed = False
        self._backfills: tuple[Backfill, ...] = ()  # running now: told of every run's end
        self._policies = RunPolicies(
            store=self._state, node=self._node, clock=self._clock, catalog=lambda: self._catalog,
            run_at=self._processor.run_at, schedule=self._schedule_again,
            report=self._on_finished,
        )  # fmt: skip
        self._pauses = PauseFollower(self._state, self._policies, self._clock)
        self._claims = StoreClaims(self._keeper, self._policies, self.queue, self._clock)
        self._claims.limits.follow_definitions(lambda: self._catalog.jobs)
        # A store in another process: a claim is a commit, so together, and ahead of slots.
        self._claims.attach(self._processor, together=not self._state.in_process)
        self._sync(catalog, rebuild=True)

    # -- definitions ---------------------------------------------------------------------

    @property
    def node(self) -> str:
        """This scheduler's node name (see the class notes)."""
        return self._node

    @property
    def nodes(self) -> list[NodeInfo]:
        """Every node the state store knows (up, left or dead), by name."""
        return self._state.nodes()

    @property
    def config_path(self) -> Path | None:
        return self._store.path

    @property
    def jobs(self) -> list[Job]:
        """Every defined job, in definition order (the spec's getJobList)."""
        return list(self._catalog.jobs.values())

    @property
    def groups(self) -> list[JobGroup]:
        return list(self._catalog.groups.values())

    @property
    def catalog(self) -> Catalog:
        """The definitions as one immutable value."""
        return self._catalog

    def get_job(self, name: str) -> Job:
        """The job called `name`; `UnknownNameError` if there is none."""
        return self._catalog.job(name)

    def get_group(self, name: str) -> JobGroup:
        return self._catalog.group(name)

    def add_job(self, job: Job) -> None:
        """Add `job`; refused (`JobActionError`) for a duplicate name or a broken rule."""
        self.add_jobs([job])

    def add_jobs(self, jobs: Iterable[Job]) -> None:
        """Add many jobs with a single write of the file (all or none)."""
        jobs = list(jobs)
        with self._lock:
            self._apply(self._store.add_jobs(jobs), jobs=[job.name for job in jobs])

    def modify_job(self, job: Job) -> None:
        """Replace the definition of job ``job.name``; its running executions continue.

        A pending dependent start (the delay after its parent ended) is kept, and runs the new
        definition, unless the change pauses the job or changes its dependence.
        """
        with self._lock:
            self._catalog.job(job.name)  # UnknownNameError before anything is read
            self._apply(self._store.modify_job(job), jobs=[job.name])

    def remove_job(self, name: str) -> None:
        """Remove job `name` from the file and the schedule; running executions continue.

        It leaves every group that lists it. Refused while other jobs depend on it or when it
        is the last job of a group: the message names them.
        """
        with self._lock:
            self._apply(self._store.remove_job(name), jobs=[name])

    def pause_job(
        self, name: str, *, note: str | None = None, until: datetime | None = None
    ) -> None:
        """Pause job `name` on every node sharing the state store (each follows within
        2 s; this one at once): its slots are not run, nor recorded one by one, until
        `resume_job`, or until `until` (an aware datetime) when given. The pause is kept in
        the store with this node's name, the time, and `note`; the definitions (the YAML
        file) are not touched. Pausing a paused job replaces its pause. `UnknownNameError`
        for no such job; ValueError for a naive or past `until`; a store that fails raises
        (`StoreError`) and nothing is paused."""
        self._catalog.job(name)
        self._policies.pause([name], _checked_note(note), self._checked_until(until))

    def resume_job(self, name: str) -> None:
        """End job `name`'s pause (by hand or by `pause_after_failures`, whoever made it) and
        its count of failures; it runs again from its next slot after now, on every node.
        A job not paused: nothing happens. `UnknownNameError` for no such job."""
        self._catalog.job(name)
        self._policies.resume([name])

    def pause_all(self, *, note: str | None = None, until: datetime | None = None) -> None:
        """Pause every job defined now, as `pause_job` does each (one write); a job added
        later is not paused."""
        note, until = _checked_note(note), self._checked_until(until)
        names = list(self._catalog.jobs)
        if names:
            self._policies.pause(names, note, until)

    def resume_all(self) -> list[str]:
        """End every pause kept in the store (of any job, defined here or not); the names of
        the jobs that had one."""
        return self._policies.resume(None)

    def pause_of(self, name: str) -> JobPause | None:
        """Job `name`'s pause in force (who paused it, when, the note, until), as this node
        follows the store; None when it is not paused."""
        self._catalog.job(name)
        return self._policies.pause_of(name)

    def _checked_until(self, until: datetime | None) -> datetime | None:
        if until is None:
            return None
        if not isinstance(until, datetime) or until.tzinfo is None:
            raise ValueError(f"until must be an aware datetime, not {until!r}")
        if until <= self._clock.now():
            raise ValueError(f"until {until.isoformat()} has passed already")
        return until

    def add_group(self, group: JobGroup) -> None:
        with self._lock:
            self._apply(self._store.add_group(group), groups=[group.name])

    def remove_group(self, name: str) -> None:
        """Remove group `name` and its handlers; its jobs stay."""
        with self._lock:
            self._apply(self._store.remove_group(name), groups=[name])

    def set_email(self, email: EmailConfiguration | None) -> None:
        """Set (or, with None, remove) the e-mail settings, persisted in the file's ``email:``.

        Refused while jobs or groups have ``messages:`` and `email` is None.
        """
        with self._lock:
            self._apply(self._store.set_email(email), jobs=[])

    def add_handler(self, name: str, handler: EventHandler) -> None:
        """Let `handler` hear every event of job `name`, or of every job of group `name`.

        Handlers added in code live in memory; alerts that belong in the file are the
        ``messages:`` of a job or group (change them with `modify_job`).
        """
        with self._lock:
            if name not in self._catalog.jobs and name not in self._catalog.groups:
                raise UnknownNameError(Problem("no job or group has this name", job=name))
            if isinstance(handler, EmailEventHandler) and not handler.has_own_config:
                handler.inherit_config(self._catalog.email)
            self._handlers.add(name, handler)

    def remove_handler(self, name: str, handler: EventHandler) -> None:
        if not self._handlers.remove(name, handler):
            raise UnknownNameError(Problem(f"handler {handler!r} is not registered", job=name))

    def handlers(self, name: str) -> list[EventHandler]:
        """The handlers added in code to job or group `name`."""
        return self._handlers.handlers(name)

    def _apply(
        self, catalog: Catalog, *, jobs: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> None:
        """Make `catalog`, the result of an API write, current. `jobs` names the jobs the write
        touched (`groups` its groups): only they are compared, O(1) per change, unless the
        store merged edits made to the file meanwhile: then every job is."""
        del groups  # groups are always compared whole (see diff_catalogs)
        self._sync(catalog, jobs=None if self._store.merged else jobs)

    def _sync(
        self, catalog: Catalog, *, jobs: Iterable[str] | None = None, rebuild: bool = False
    ) -> CatalogDiff:
        """Make `catalog` current and bring the running schedule and the alerts to exactly it.

        The one path every change of the catalog takes (API writes, merged hand edits,
        `reload`, `start`): jobs added are scheduled, changed ones updated (a pending dependent
        start dropped as `drops_pending` says), removed ones dropped with their pending starts
        and handlers; alerts are rebuilt for the jobs and groups that changed (all of them with
        `rebuild`, or when the e-mail settings changed). `jobs`: as for `diff_catalogs`.
        """
        diff = diff_catalogs(self._catalog, catalog, jobs)
        self._catalog = catalog
        if diff.added or diff.changed or diff.removed:
            self._keeper.definitions_changed()  # their digest, published by the node
        if diff.changed or diff.removed:
            self._claims.limits.definitions_changed()  # waiting runs look at their jobs
        updated, changed = diff.added, diff.changed
        if diff.removed or diff.removed_groups:
            for name in diff.removed:
                self._processor.remove_job(name)  # also when stopped: its pending starts go
                self._handlers.drop(name)
            for name in diff.removed_groups:
                self._handlers.drop(name)
        if self._running:
            if changed:
                for before, after in changed:
                    if drops_pending(before, after):
                        self._processor.cancel_pending(after.name, "job changed")
                updated = [*updated, *(after for _, after in changed)]
            if updated:
                self._processor.add_jobs(self._policies.engine_view(updated), self._clock.now())
        if rebuild or diff.email:
            self._update_file_handlers(list(catalog.jobs), list(catalog.groups), rebuild=True)
        elif self._alerts.needs_update(diff):
            self._update_file_handlers(diff.jobs, diff.groups)
        return diff

    def _update_file_handlers(
        self, jobs: list[str], groups: list[str], *, rebuild: bool = False
    ) -> None:
        """Alerts of `jobs` and `groups` (all of them with `rebuild`): see `FileAlerts`."""
        path = self._store.path
        self._alerts.update(
            self._catalog,
            self._store.templates,
            str(path) if path is not None else None,
            jobs,
            groups,
            rebuild=rebuild,
            code_handlers=self._handlers.all_handlers() if rebuild else (),
        )

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start scheduling. After a `stop`, the file is read again first.

        The next run of each job is its first slot strictly after now: slots missed while
        stopped are not made up.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("this scheduler was shut down; create a new one")
            if self._running:
                return
            if self._store.path is not None and self._processor.started_once:
                from ..config.dropguard import read_existing  # lazy, as ConfigStore is

                self._sync(read_existing(self._store), rebuild=True)
            self._handlers.reopen()
            # The node first (join, missed ranges recorded, marks moved up to them), then the
            # policies' catch-up runs from those marks (cluster/nodemarks.py leaves the slots
            # catch_up makes up out of the missed ranges).
            now = self._keeper.start()  # NodeNameTakenError, StoreError: nothing started
            jobs, _ = self._policies.starting(self._catalog.jobs.values())
            self._processor.set_jobs(jobs, now)
            self._processor.start()
            self.queue.start()
            self._pauses.start()
            self._running = True

    def stop(self) -> None:
        """Stop scheduling; running jobs go on to their end, and report their events."""
        with self._lock:
            if not self._running:
                return
            self.queue.stop()
            self._pauses.stop()
            self._processor.stop()
            self._running = False

    def shutdown(self, wait: bool = True) -> None:
        """Start nothing new and end.

        ``wait=True``: running jobs finish, their events are handled, then it returns.
        ``wait=False``: running jobs are stopped (process groups killed, ``stop()`` called on
        internal jobs; each ends FAILED and abnormal), pending dependent starts are dropped.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._running = False
        self.queue.stop()
        self._pauses.stop()
        self._claims.stop()
        self._processor.shutdown(wait=wait)
        self._handlers.close(wait=wait)
        self._runner.close()
        self._live.close()
        self._overdue.close()
        self._keeper.stop()
        if self._owns_state:
            self._state.close()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def queued_count(self) -> int:
        """How many due runs wait for a free worker."""
        return self._processor.queued_count

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown(wait=True)

    def reload(self) -> None:
        """Read the file again and apply the differences.

        Changed jobs are rescheduled from now, new ones added, removed ones dropped (their
        running executions continue). A pending dependent start is kept unless its job is
        removed, paused, or its dependence changed (the same rule as `modify_job`). Template
        files are read again and every alert rebuilt. A bad file raises `JobActionError` and
        the old definitions stay; so does a file that defines no job where there were some,
        unless it says ``jobs: {}`` (then the drop is logged at WARNING), and a file that
        defines a name a job defined in code has (`DuplicateNameError`, logged).
        """
        from ..config.dropguard import reread  # lazy

        with self._lock:
            self._sync(reread(self._store, self._catalog), rebuild=True)
            self._policies.refresh()  # pauses by failures set or cleared elsewhere

    # -- runs ------------------------------------------------------------------------------

    def backfill(
        self,
        name: str,
        start: datetime,
        end: datetime,
        *,
        reprocess: str = "missing",
        dry_run: bool = False,
        max_parallel: int = 1,
        yes: bool = False,
    ) -> list[SlotDecision]:
        """Run job `name`'s slots in [`start`, `end`] (aware datetimes) with trigger
        ``backfill``, oldest first, at most `max_parallel` at once, within the job's limits;
        returns each slot's decision (`cluster.backfill.SlotDecision`), with its run's outcome
        once it ended. `reprocess`: ``missing`` (slots no run started for), ``failed`` (and
        those whose last run failed), ``all``. `dry_run`: decide, run nothing. A range over a
        year needs `yes`. Bad input (`BackfillError`, `UnknownNameError`) runs nothing; a
        backfill that runs needs the scheduler started. Blocks until the runs ended."""
        job = self._catalog.job(name)
        start, end = check_range(
            job, start, end, reprocess=reprocess, max_parallel=max_parallel, yes=yes,
            node=self._node,
        )  # fmt: skip
        backfill = Backfill(
            self._state, self._clock, self._start_backfill_run, lambda: self._running
        )
        decisions = backfill.decide(job, start, end, reprocess)
        if dry_run or not any(d.action == "run" for d in decisions):
            return decisions
        if not self._running:
            raise BackfillError(f"backfill {name}: start the scheduler first (or use dry_run)")
        with self._lock:
            self._backfills = (*self._backfills, backfill)
        try:
            return backfill.run(job, decisions, max_parallel=max_parallel)
        finally:
            with self._lock:
                self._backfills = tuple(b for b in self._backfills if b is not backfill)

    def _start_backfill_run(self, job: Job, slot: datetime, attempt: int) -> None:
        self._processor.run_at(job, self._clock.now(), SlotTrigger(BACKFILL, slot, attempt))

    def run_now(self, name: str) -> None:
        """One extra run of job `name` now, outside its schedule (its dependents follow)."""
        job = self._catalog.job(name)
        self._processor.run_now(job)

    def submit(
        self, name: str, args: dict[str, object] | None = None, *, priority: int | None = None
    ) -> int:
        """Queue an on-demand run of job `name` for any node; its queue id (`QueueConsumer`).
        `JobPausedError` for a paused job."""
        if self._policies.is_paused(name):
            raise JobPausedError(Problem("the job is paused: resume it first", job=name))
        return self.queue.submit(name, args, priority=priority)

    def stop_job(self, name: str) -> int:
        """Stop the running executions of job `name` (each ends FAILED, abnormal).

        Returns how many were stopped. A job removed while it runs is still reached (removal
        never cuts a run short, so this is how such a run is stopped): `UnknownNameError` only
        when no job has this name and nothing of that name runs.
        """
        stopped = self._processor.stop_job(name, "stopped")
        if stopped == 0:
            self._catalog.job(name)  # raises for a name that is unknown and not running
        return stopped

    @property
    def executing(self) -> list[Execution]:
        """The running executions (the spec's getJobExecutionList), as snapshots."""
        return self._processor.executing

    def next_run(self, name: str) -> datetime | None:
        """When job `name` runs next (None: paused, dependent, or past its stop)."""
        job = self._catalog.job(name)
        if self._running:
            return self._processor.next_run(name)
        if not job.enabled or self._policies.is_paused(name):
            return None
        return job.next_after(self._clock.now())

    def next_runs(self, count: int = 10) -> list[tuple[str, datetime]]:
        """The `count` jobs that run soonest, (name, when) earliest first, each at its
        `next_run` (paused jobs and jobs with nothing ahead left out)."""
        if self._running:
            return [(name, when) for when, name in self._processor.soonest(count)]
        upcoming = [(name, when) for name in self._catalog.jobs if (when := self.next_run(name))]
        upcoming.sort(key=lambda entry: entry[1].timestamp())
        return upcoming[:count]

    def history(
        self, job: str | None = None, *, limit: int = 100, since: datetime | None = None
    ) -> list[RunRecord]:
        """The runs the state store keeps (of `job`, or all), newest first: at most `limit`,
        started at or after `since` (aware), running ones included (docs/state.md). A removed
        job's runs are still found by name; a name with no runs gives an empty list."""
        return self._state.history(job, limit=limit, since=since)

    @property
    def state_store(self) -> StateStore:
        return self._state

    def store_failed(self, exc: BaseException, doing: str) -> None:
        """Tell this node that its state store failed with `exc` while `doing` something
        outside the node (the HTTP server): an outage is logged once each way, never a
        traceback per failed call (see `cluster.outage`)."""
        self._keeper.outage.failed(exc, doing)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is executing or queued and the handlers are done (tests, demo)."""
        return self._processor.wait_idle(timeout) and self._handlers.join(timeout)

    # -- the processor's and the trigger's callbacks -----------------------------------------

    def _on_finished(self, job: Job, execution: Execution) -> None:
        """Every run ends here, exactly once: state store, audit line, then the event.

        Called for every run, so the common case is kept cheap: the zone is resolved only
        when the audit line is logged, and dependents and handlers are looked at only when the
        job has some (the catalog indexes them).
        """
        self._finished_with(job, execution, self._policies.verdict(job, execution))

    def _on_finished_many(self, notices: Sequence[tuple[Job, Execution]]) -> None:
        """`_on_finished` for a batch of runs, in order (the notice thread's, in a burst).

        The runs with nothing but a record to make (no run policy, no queue row, no
        ``on_node_loss: rerun``, no dependents, no handler or alert listening) have their
        finishes posted together (`NodeKeeper.record_many`: their jobs' marks in one go),
        then what follows each record (`_told`, as `_recorded` does for any run); any other
        run goes through `_on_finished`'s way alone, after the plain ones before it. One run
        that raises is logged; the others go on.
        """
        verdict_of = self._policies.verdict
        row_of = self.queue.row_of
        dependents = self._catalog.dependents
        listening = self._handlers.listening or self._alerts.by_name
        plain: list[tuple[Job, Execution]] = []
        for job, execution in notices:
            try:
                verdict = verdict_of(job, execution)
                if (
                    verdict is None
                    and not listening
                    and job.on_node_loss != "rerun"
                    and row_of(execution) is None
                    and not dependents(job.name)
                ):
                    plain.append((job, execution))
                    continue
                if plain:
                    self._record_plain(plain)
                    plain = []
                self._finished_with(job, execution, verdict)
            except Exception:
                log.exception("on_finished for run %s of job %r raised", execution.run_id, job.name)
        if plain:
            self._record_plain(plain)

    def _record_plain(self, notices: list[tuple[Job, Execution]]) -> None:
        """The end of runs with nothing but a record to make (see `_on_finished_many`): what
        `_recorded` does for them (no verdict, queue row, dependents or listeners: the caller
        checked), with the backfills and the audit level read once per batch."""
        self._keeper.record_many([execution for _, execution in notices])
        backfills = self._backfills  # a tuple replaced whole: read without the lock
        audit = audit_log.isEnabledFor(logging.INFO)
        for job, execution in notices:
            try:
                self._told(job, execution, False, backfills, audit)
            except Exception:
                log.exception("on_finished for run %s of job %r raised", execution.run_id, job.name)

    def _finished_with(self, job: Job, execution: Execution, verdict: Verdict | None) -> None:
        """The end of one run once its run policies gave their `verdict` (see `_on_finished`)."""
        if verdict is not None:  # run policies
            if not verdict.record:
                return  # a slot skipped by `overlap`: recorded as such, without an event
            execution = verdict.execution
        row = self.queue.row_of(execution)
        durable = job.on_node_loss == "rerun"  # a lost finish would run the slot again
        settled = self._keeper.record(execution, row, durable=durable) and row is not None
        self._recorded(job, execution, verdict, settled=settled)

    def _recorded(
        self, job: Job, execution: Execution, verdict: Verdict | None, *, settled: bool
    ) -> None:
        """What follows a run's record (`settled`: its queue row with it): backfills, the
        queue, the audit line, then dependents and handlers, as its `verdict` allows."""
        # The backfills: a tuple replaced whole, read without the lock.
        self._told(job, execution, settled, self._backfills, audit_log.isEnabledFor(logging.INFO))
        event = execution.event
        if event is None:
            event = Event.FAILED
        name = job.name
        catalog = self._catalog
        if catalog.dependents(name) and (verdict is None or verdict.follow):
            try:
                self._trigger.handle(job, event, execution)
            except Exception:
                log.exception("starting the dependents of %r failed", name)
        if (verdict is None or verdict.tell) and (self._handlers.listening or self._alerts.by_name):
            groups = catalog.groups_of(name)
            names = [name, *[g.name for g in groups]] if groups else [name]
            self._handlers.dispatch(job, event, execution, names, self._alerts.for_names(names))

    def _told(
        self,
        job: Job,
        execution: Execution,
        settled: bool,
        backfills: tuple[Backfill, ...],
        audit: bool,
    ) -> None:
        """What every run's record is followed by: the running `backfills` and the queue are
        told (`settled`: its queue row with it), the audit line written if `audit`."""
        for backfill in backfills:
            backfill.heard(execution)
        self.queue.finished(execution, settled=settled)
        if audit:
            log_audit(execution, job.zone)

    def _schedule_again(self, jobs: Iterable[Job], now: datetime) -> None:
        """The engine takes `jobs` again (paused: a disabled copy, or resumed); a paused
        one's pending dependent start is dropped, as a pause by `modify_job` did."""
        jobs = list(jobs)
        for job in jobs:
            if not job.enabled:
                self._processor.cancel_pending(job.name, "job paused")
        self._processor.add_jobs(jobs, now)

    def _store_now(self) -> StateStore:
        """The state store (for the run watches made before it is opened)."""
        return self._state

    def _on_overdue(self, job: Job, execution: Execution) -> None:
        """A run still goes after its job's ``warn_after``: its handlers and alerts hear
        `Event.OVERDUE` (once; the run goes on, and ends as any run does)."""
        log.warning(
            "run %s of %r is overdue: running since %s (warn_after %s)",
            execution.run_id, job.name, execution.started.isoformat(), job.warn_after,
        )  # fmt: skip
        name = job.name
        groups = self._catalog.groups_of(name)
        names = [name, *[g.name for g in groups]] if groups else [name]
        self._handlers.dispatch(job, Event.OVERDUE, execution, names, self._alerts.for_names(names))

    def __repr__(self) -> str:
        where = self._store.path if self._store.path is not None else "memory"
        return f"Scheduler({where}, jobs={len(self._catalog.jobs)}, running={self._running})"


def _checked_note(note: str | None) -> str | None:
    if note is not None and not isinstance(note, str):
        raise TypeError(f"note must be a string or None, not {note!r}")
    return note
