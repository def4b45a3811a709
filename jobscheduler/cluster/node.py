"""`NodeKeeper`: this scheduler process as a node of the state store — join, heartbeats,
leases, the take-over of dead nodes, fencing, restart clean-up, missed ranges, retention.

Every wait is on the `Clock` (one thread, ``jobscheduler-node``); leases are measured on the
*store's* clock (`StateStore.beat` / `expired_nodes`), never on this machine's.

- **Lease** `lease` (default 15 s), a heartbeat every ``lease / 3``: a dead node's runs are
  taken over within ``lease + lease / 3`` (20 s); on this same host (its pid gone, or reused:
  another start time) at the next heartbeat, without waiting for its lease.
- **Take-over**: the dead node's leftover process groups (same host: pid and start time) are
  killed, its ``running`` runs become ``abandoned`` ("node lost, may have run: NAME"; "node
  lost: NAME" for a slot claimed ahead and not due) and are reported (the job's FAILED event
  with that reason); with ``on_node_loss: rerun`` a run goes again `RERUN_DELAY` of the lease
  later (the same slot, trigger ``rerun``, the next attempt); a submitted run's queue row goes
  back to the queue instead (its args and priority kept, its ``attempt`` one more), for the
  next node with a free worker, and ends with that run's state and run id.
- **Leash** (`runners.leash`): a process beside the node, told of each renewal and of each
  external run, stops those runs at 90-95 % of the lease after the last renewal even when
  the node's process is frozen (SIGSTOP, a GC or swap pause) and cannot stop them itself.
- **Outages** (`outage`): a failure of the store anywhere in the node is handed to
  `StoreOutage` (one WARNING when it goes, one when it is back, no traceback per call);
  meanwhile scheduled slots are not claimed, and once a heartbeat gets through they are
  recorded ``missed`` (`record_gaps`: the slots no node recorded), which is the write that
  tells the store is back.
- **Fencing**: while heartbeats fail nothing new starts; at ``FENCE`` of the lease after the
  last heartbeat that got through, it stops its running jobs, before the lease could end: a
  run never has two live attempts. Once the store answers, its unfinished runs are
  ``abandoned`` and it rejoins.
- **Clock skew** (`skew`): every heartbeat reads the database's clock; past `skew.LIMIT` the
  node claims no scheduled slot (recorded ``missed`` unless another node runs it).
- **Restart under the same name**: the runs its previous process left ``running`` are found,
  their live process groups killed, the runs recorded ``abandoned``.
- **Missed ranges** (`nodemarks`): at `start`, with no other node up, one ``missed`` record
  per job for the slots after its mark; marks move once per heartbeat, not once per run
  (`PendingMarks`: one `set_marks` for every job that ran).
- **Cost**: a heartbeat is one statement (`StateStore.beat`) that also says whether another
  node's lease expired, another node shares this host, an alert is due: the node lists the
  nodes, or retries alerts, only then.
- **Retention**: every `PRUNE_EVERY`, `StateStore.prune` by age and count (`Retention`).
- **Definitions**: the node publishes the names of its jobs with its join, and the digest of
  their definitions (`digest.DefinitionsDigest`) from its thread right after; both again once
  they change (`definitions_changed` wakes the thread: published at once, not at the next
  heartbeat); an unchanged set costs nothing. The jobs not digested yet are digested
  `DIGEST_PIECE` at a time while no run is queued or running and none is due within
  `DIGEST_CLEAR` (so a burst of runs never waits for a large catalog's digest), and whole at
  the next heartbeat at the latest. A node whose store nobody else can see (`compare`
  False: a memory store its scheduler made) publishes the names only, and digests nothing.
- **Unknown jobs in the queue**: when the heartbeat says a pending queue row is older than
  the lease (`Beat.stale_rows`), the node reads the live nodes' job names; a row whose job
  none of them defines ends ``not_started`` with reason "unknown job NAME" (a run record of
  its own, trigger ``submit``). Every live node has published its names with its join, so a
  node that just joined is counted; a node of an older version (no names) holds this back.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..clock import Clock, SystemClock
from ..engine.processor import JobProcessor
from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.job import Job, JobType
from ..model.runid import RunIds
from ..runners.context import RunContext
from ..runners.leash import RUN_SHARE, Leash
from ..runners.procs import process_alive, process_start_time, stop_group
from ..state.base import StateStore, StoreUnavailableError
from ..state.records import RunRecord, RunState, lost_reason
from ..state.values import NodeInfo
from ..state.writes import write_run
from .digest import DefinitionsDigest
from .nodemarks import (
    PendingMarks,
    Retention,
    mark_unmarked,
    prune_history,
    record_gaps,
    record_missed,
)
from .nodenames import names_joined, names_left
from .outage import UNREACHABLE, StoreOutage, is_store_failure
from .skew import ClockSkew

__all__ = ["DEFAULT_LEASE", "FENCE", "PRUNE_EVERY", "RERUN_DELAY", "NodeKeeper", "Retention"]

log = logging.getLogger("jobscheduler.node")

DEFAULT_LEASE = timedelta(seconds=15)
FENCE = 0.8
"""The part of the lease after which a node that could not renew it stops its runs."""
PRUNE_EVERY = timedelta(hours=1)
UNKNOWN_ROWS = 1000
"""The old pending rows of jobs no live node defines a node settles at most per heartbeat
(oldest first: `StateStore.pending_before` leaves the defined jobs' rows out)."""

UNREACHABLE_AFTER = timedelta(seconds=1)
"""How long after its slot a slot not claimed while the store was away is recorded missed
(the other nodes claim theirs when due; a claim's answer may be on its way)."""

DIGEST_PIECE = 200
"""The jobs digested at a time between runs (about 10 ms of CPU): a run due meanwhile waits
for one piece at most."""
DIGEST_CLEAR = 0.5
"""Seconds before a timeline entry is due from which the node digests no more jobs (until
the runs are over, or the next heartbeat)."""
DIGEST_PAUSE = 0.05
"""Seconds the node waits before it looks again whether the runs are over."""

RERUN_DELAY = 0.2
"""The part of the lease a rerun waits after the take-over: the lost node's leash stops its
external runs by 95 % of the lease after its last renewal, so by the take-over (100 % at the
earliest) plus this they are certainly stopped, with a quarter of the lease to spare for a
leash late on a loaded machine."""

Report = Callable[[Job, Execution], None]


class NodeKeeper:
    """This process as node `name` of `store` (see the module notes). Thread-safe."""

    def __init__(
        self,
        store: StateStore,
        processor: JobProcessor,
        *,
        name: str,
        clock: Clock,
        jobs: Callable[[], Mapping[str, Job]],
        report: Report,
        lease: timedelta = DEFAULT_LEASE,
        retention: Retention | None = None,
        max_workers: int = 0,
        compare: bool = True,
    ) -> None:
        if lease <= timedelta(0):
            raise ValueError(f"lease must be positive, not {lease}")
        self.store = store
        self.name = name
        self.lease = lease
        self.retention = retention if retention is not None else Retention()
        self._processor = processor
        self._clock = clock
        self._jobs = jobs
        self._report = report
        self._max_workers = max_workers
        self._host = socket.gethostname()
        self._cond = threading.Condition()
        self._beating = threading.Lock()  # one beat at a time (the thread's, or a test's)
        self._thread: threading.Thread | None = None
        self._fence_thread: threading.Thread | None = None
        self._stopping = False
        self._marks = PendingMarks()
        self._reruns: defaultdict[str, deque[tuple[datetime | None, int]]] = defaultdict(deque)
        self._renewed: datetime | None = None  # when the last renewal that got through was sent
        self._unreachable_since: datetime | None = None
        # Whether this node lost its lease and has not joined again: it claims nothing (a
        # field, not a property: every claim reads it).
        self.fenced = False
        self._in_flight: datetime | None = None  # when the heartbeat under way was sent
        self._next_prune: datetime | None = None
        self._cut_off: set[str] = set()  # run ids stopped by fencing
        self.takeovers = 0  # nodes taken over by this one (for tests and status)
        self.outage = StoreOutage(name, clock)
        self.skew = ClockSkew(name)
        # The process that stops this node's external runs if the node is frozen past its
        # lease (runners/leash.py): only where other processes share the store, and on the
        # real clock (the leash counts real seconds; a FakeClock's lease is not real time).
        shared = not store.in_process and isinstance(clock, SystemClock)
        self._leash = Leash(name, lease.total_seconds()) if shared else None
        # Called after a heartbeat that got through and found an alert of the outbox due
        # (the scheduler hands it back to the mail queues).
        self._on_beat: Callable[[], object] | None = None
        self._digest = DefinitionsDigest()
        self._compare = compare  # False: nobody else sees the store, no digest is needed
        self._run_ids = RunIds(clock.now)
        # The digest and names the store has of this node (after the join: the names only).
        self._published: tuple[str | None, tuple[str, ...]] | None = None
        self._publish_due = False  # the definitions changed: publish before the next beat
        self.unknown_settled = 0  # queue rows of unknown jobs settled here (tests, status)

    def definitions_changed(self) -> None:
        """The jobs changed (a reload, an API change): publish their digest soon, from the
        node's thread (never blocking the caller on the store)."""
        with self._cond:
            self._publish_due = True
            self._cond.notify_all()

    def when_alerts_due(self, callback: Callable[[], object]) -> None:
        """Call `callback` after a heartbeat that got through and found an alert of the
        outbox due."""
        self._on_beat = callback

    @property
    def period(self) -> float:
        """Seconds between heartbeats: a third of the lease."""
        return self.lease.total_seconds() / 3

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> datetime:
        """Clean up after a previous process of this name, join (`NodeNameTakenError` if a
        live node has the name), take over dead nodes, record missed ranges, then heartbeat
        on a thread of its own. A store that fails here raises (the caller reports it).
        Once started, nothing (the node stays joined across `Scheduler.stop` / `start`).

        Returns the instant the missed ranges end at (slots up to it included): the engine
        schedules from it, so no slot falls between the two."""
        with self._cond:
            if self._thread is not None:
                return self._clock.now()
        self._clean_up_own()
        self._join()
        names_joined(self.name)
        log.info(
            "node %s joined %s (lease %gs, a heartbeat every %gs)",
            self.name,
            getattr(self.store, "url", type(self.store).__name__),
            self.lease.total_seconds(),
            self.period,
        )
        self._sweep()
        now = self._clock.now()
        self._record_missed(now)
        with self._cond:
            self._stopping = False
            self._next_prune = self._clock.now()
            if self._thread is None:
                self._renewed = self._clock.now()
                self._renew_leash(self._renewed)
                self._thread = threading.Thread(
                    target=self._loop, name="jobscheduler-node", daemon=True
                )
                self._thread.start()
                # Its own thread: a heartbeat may block (a locked file, a server that does
                # not answer) past the moment the runs must be stopped; nothing to fence
                # over a store in this process's memory (`StateStore.in_process`).
                if not self.store.in_process:
                    self._fence_thread = threading.Thread(
                        target=self._fence_loop, name="jobscheduler-fence", daemon=True
                    )
                    self._fence_thread.start()
        return now

    def stop(self, *, leave: bool = True) -> None:
        """End the heartbeats; write the marks; with `leave`, say goodbye in the store (its
        runs must have ended: `Scheduler.shutdown` calls it after the processor's)."""
        with self._cond:
            self._stopping = True
            threads = [self._thread, self._fence_thread]
            self._thread = self._fence_thread = None
            self._cond.notify_all()
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join()
        names_left(self.name)
        if self._leash is not None:
            self._leash.close()  # its runs have ended (or go on unleashed: `leave` False)
        try:
            self._record_unclaimed(self._clock.now(), final=True)
            self._marks.flush(self.store)
            if leave:
                self.store.leave(self.name)
        except Exception as exc:
            log.error("node %s: the state store could not be told it leaves: %s", self.name, exc)

    # -- what the scheduler tells it ------------------------------------------------------------

    def record(
        self, execution: Execution, settle: int | None = None, *, durable: bool = False
    ) -> bool:
        """A finished run into the store (`write_run`; `settle`: the queue row it was taken
        from, settled with it), and its job's mark moved; a store that fails costs the
        record, not the run's audit line and events (logged). False when the store failed.

        `durable` (a job with ``on_node_loss: rerun``): the finish is committed before this
        returns, not posted to be written with the next batch (`SqlStateStore`'s linger):
        a node that dies after it cannot leave the run ``running`` to be rerun, and what
        follows (audit line, dependents, handlers) comes after the commit. A node that dies
        between the run's end and this commit still leaves it to be rerun: that window is
        measured in docs/state.md. With the store away, the finish is posted after all
        (kept, and written once the store is back)."""
        written = True
        try:
            if execution.run_id in self._cut_off:  # stopped by fencing: lost with the lease
                self._cut_off.discard(execution.run_id)
                # Not finished (and its row not settled) when the take-over came first: that
                # settled its row, or put it back in the queue for another node.
                self.store.finish(
                    execution.run_id,
                    state=RunState.ABANDONED,
                    ended=execution.ended or self._clock.now(),
                    exit_code=execution.exit_code,
                    reason=lost_reason(self.name),
                    output_tail=execution.output_tail,
                    settle=settle,
                )
            else:
                name = self.name
                try:
                    write_run(
                        self.store,
                        execution,
                        node=name,
                        settle=settle,
                        claimed=True,
                        durable=durable,
                    )
                except StoreUnavailableError:
                    if not durable:
                        raise
                    # Posted instead: kept and written once the store is back, as any finish
                    # (a run left `running` would be rerun when this node rejoins).
                    write_run(self.store, execution, node=name, settle=settle, claimed=True)
        except Exception as exc:
            written = False
            self._unrecorded(execution, exc)
        self.ended(execution.job_name, execution.slot)
        return written

    def record_many(self, executions: Sequence[Execution]) -> None:
        """`record` for a batch of finished runs taken from no queue row and not `durable`
        (the notice thread's batches of a burst): each finish posted as `record` posts it
        (a failed one logged and counted as there), and the jobs' marks moved in one go. A
        run cut off by fencing goes through `record` alone."""
        store = self.store
        name = self.name
        cut_off = self._cut_off
        ends: list[tuple[str, datetime]] = []
        for execution in executions:
            if cut_off and execution.run_id in cut_off:
                self.record(execution)
                continue
            try:
                write_run(store, execution, node=name, claimed=True)
            except Exception as exc:
                self._unrecorded(execution, exc)
            if execution.slot is not None:
                ends.append((execution.job_name, execution.slot))
        if ends:
            self._marks.moved_many(ends)

    def _unrecorded(self, execution: Execution, exc: Exception) -> None:
        """Tell that `execution`'s finish failed to be written with `exc`: a store failure
        once per outage (counted when the store is back), anything else with its traceback."""
        if is_store_failure(exc):
            self.outage.failed(exc, f"recording run {execution.run_id}")
            self.outage.unrecorded()
        else:
            log.exception(
                "recording run %s of %r in the state store failed",
                execution.run_id,
                execution.job_name,
            )

    def prepare(self, ctx: RunContext) -> None:
        """Before a run's claim: a rerun gets its slot and attempt; an external command's
        process group will be recorded in the store once launched."""
        if ctx.trigger == "rerun":
            with self._cond:
                waiting = self._reruns.get(ctx.job.name)
                if waiting:
                    ctx.rerun_of(*waiting.popleft())
        if ctx.job.type is not JobType.INTERNAL:  # only a command has a process group
            ctx.report_launch(self._launched)

    def _launched(self, ctx: RunContext, pid: int) -> None:
        started = process_start_time(pid)
        if self._leash is not None:
            self._leash.watch(pid, started)  # first: it must not wait for the store
        try:
            self.store.set_process(ctx.run_id, pid=pid, process_started=started)
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            # Only a restart's clean-up of this node's leftover processes misses it.
            self.outage.failed(exc, f"recording the process of run {ctx.run_id}")

    def _renew_leash(self, sent: datetime) -> None:
        """Tell the leash the lease renewed by the heartbeat sent at `sent` holds: the runs
        may live until `RUN_SHARE` of the lease after `sent`."""
        if self._leash is not None:
            deadline = sent + self.lease * RUN_SHARE
            self._leash.renew((deadline - self._clock.now()).total_seconds())

    def ended(self, job: str, slot: datetime | None) -> None:
        """A run of `job` for `slot` ended: the job's mark moves (written at the next beat)."""
        if slot is not None:
            self._marks.moved(job, slot)

    # -- the thread ----------------------------------------------------------------------------

    def _loop(self) -> None:
        period = timedelta(seconds=self.period)
        with self._cond:
            due = self._clock.now() + period
            while not self._stopping:
                left = (due - self._clock.now()).total_seconds()
                if left > 0 and not self._publish_due:
                    self._clock.wait(self._cond, left)
                    continue
                beating = left <= 0
                if beating:
                    due = self._clock.now() + period
                self._publish_due = False
                self._cond.release()
                later = False
                try:
                    if beating:
                        self.beat()
                    elif self._digest_ready():
                        self.publish()
                    else:
                        later = True  # runs due or under way: the rest after them
                except Exception:  # never let the node's thread die
                    log.exception("node %s: heartbeat failed", self.name)
                finally:
                    self._cond.acquire()
                if later and not self._stopping:
                    self._publish_due = True
                    self._clock.wait(self._cond, min(DIGEST_PAUSE, max(left, 0.0)))

    def _fence_loop(self) -> None:
        """Stop this node's runs once `FENCE` of the lease has passed since the last renewal
        that got through: before the store could count the node dead."""
        spared: datetime | None = None  # the renewal already given its extra time
        with self._cond:
            while not self._stopping:
                renewed = self._renewed
                if self.fenced or renewed is None:
                    self._clock.wait(self._cond, self.period)
                    continue
                deadline = renewed + self.lease * FENCE
                left = (deadline - self._clock.now()).total_seconds()
                if left > 0:
                    self._clock.wait(self._cond, left)
                    continue
                flying = self._in_flight
                if self._unreachable_since is None and (flying is None or flying >= deadline):
                    # No renewal failed or hangs: the beat is merely late (a loaded machine,
                    # a FakeClock moved far at once). The lease is the store's to judge.
                    self._clock.wait(self._cond, self.period)
                    continue
                if self._unreachable_since is None and flying is not None and flying != spared:
                    # Under way since before the deadline (or the clock jumped while it was
                    # sent): half the margin left before it counts as hanging.
                    spared = flying
                    self._clock.wait(self._cond, (self.lease * (1 - FENCE) / 2).total_seconds())
                    continue
                self.fenced = True
                self._cond.release()
                try:
                    self._fence()
                except Exception:
                    log.exception("node %s: stopping its runs failed", self.name)
                finally:
                    self._cond.acquire()

    def _fence(self) -> None:
        self._cut_off.update(e.run_id for e in self._processor.executing)
        stopped = self._stop_runs("state store unreachable: the node's lease ran out")
        since = self._unreachable_since
        log.log(
            logging.ERROR if stopped else logging.INFO,  # the outage itself is told once
            "node %s: state store unreachable since %s: lease about to end, stopped %d "
            "running runs; starting nothing until the store is back",
            self.name,
            since.isoformat(timespec="seconds") if since is not None else "the last heartbeat",
            stopped,
        )

    def beat(self) -> None:
        """One heartbeat and what follows it (the thread calls it every `period`)."""
        with self._beating:
            try:
                self._beat()
            except Exception as exc:
                if not is_store_failure(exc):
                    raise
                self.outage.failed(exc, "after the heartbeat")

    def _beat(self) -> None:
        sent = self._in_flight = self._clock.now()
        try:
            beat = self.store.beat(self.name, lease=self.lease, clock_skew=self.skew.seconds)
        except Exception as exc:
            self._unreachable(sent, exc)
            return
        finally:
            self._in_flight = None
        self.skew.measured(sent, self._clock.now(), beat.clock)
        self._unreachable_since = None
        if not beat.alive or self.fenced:
            self._rejoin(beat.alive)
            self._record_unclaimed(beat.clock or sent)
            return
        with self._cond:
            self._renewed = sent
            self._cond.notify_all()
        self._renew_leash(sent)
        if beat.expired or beat.neighbours:  # else nobody to take over: no need to list
            self._sweep()
        self._marks.flush(self.store)
        self._record_unclaimed(beat.clock or sent)
        if self._next_prune is not None and sent >= self._next_prune:
            self._next_prune = sent + PRUNE_EVERY
            self._prune(sent)
        self._publish()
        if beat.stale_rows:
            self._settle_unknown()
        if beat.alerts_due and self._on_beat is not None:
            self._on_beat()

    def publish(self) -> None:
        """Publish the digest and names of the jobs in force, if they changed since (the
        jobs not digested yet digested now, whole)."""
        digest, names = self._definitions()  # a large catalog: outside the lock
        with self._beating:
            if not self.fenced and self._unreachable_since is None:
                self._send(digest, names)

    def _publish(self) -> None:
        self._send(*self._definitions())

    def _definitions(self) -> tuple[str | None, tuple[str, ...]]:
        jobs = self._jobs()
        if not self._compare:
            return None, self._digest.names(jobs)
        return self._digest.of(jobs)

    def _digest_ready(self) -> bool:
        """Digest the jobs in force not digested yet, `DIGEST_PIECE` at a time, while no
        run is queued or running and none is due within `DIGEST_CLEAR`; True once they all
        are (publishing then only combines their digests)."""
        if not self._compare:
            return True
        jobs = self._jobs()
        done = self._digest.prepare(jobs, 0)
        while not done:
            if self._processor.busy_within(DIGEST_CLEAR):
                return False
            done = self._digest.prepare(jobs, DIGEST_PIECE)
        return True

    def _send(self, digest: str | None, names: tuple[str, ...]) -> None:
        if (digest, names) != self._published and self.store.set_definitions(
            self.name, digest=digest, jobs=names
        ):
            self._published = (digest, names)

    def _settle_unknown(self) -> None:
        """Queue rows pending for over a lease whose job no live node defines end
        ``not_started`` ("unknown job NAME"); nothing while a live node has not said what
        it defines."""
        now = self.store.now()
        known: set[str] = set()
        for node in self.store.nodes():
            if node.state != "up" or node.lost_since(now, self.lease) is not None:
                continue  # left, taken over, or lost: it runs nothing
            if node.defined_jobs is None:
                return
            known.update(node.defined_jobs)
        before = now - self.lease
        for row in self.store.pending_before(before, excluding=known, limit=UNKNOWN_ROWS):
            run_id = self._run_ids.new(now)
            if not self.store.settle_pending(row.id, "not_started", run_id):
                continue  # taken meanwhile
            self.unknown_settled += 1
            reason = f"unknown job {row.job}"
            self.store.record(
                row.job,
                None,
                "submit",
                run_id,
                node=self.name,
                state=RunState.NOT_STARTED,
                started=now,
                ended=now,
                reason=reason,
            )
            log.warning("node %s: queue row %d ended not_started: %s", self.name, row.id, reason)

    def _unreachable(self, sent: datetime, exc: Exception) -> None:
        if self._unreachable_since is None:
            self._unreachable_since = sent
        if not is_store_failure(exc):
            log.error("node %s: heartbeat failed", self.name, exc_info=exc)
        self.outage.failed(exc, "heartbeat")

    def _rejoin(self, alive: bool) -> None:
        """The store answers again after the lease was lost (or the node was taken over):
        nothing of this node may still run; its unfinished runs become abandoned; join again."""
        # Nothing of this node may run on (also what started while the store came back),
        # and nothing starts (claims refused) until it has joined again.
        was_fenced, self.fenced = self.fenced, True
        self._cut_off.update(e.run_id for e in self._processor.executing)
        stopped = self._stop_runs("the node lost its lease")
        if not was_fenced:
            log.error(
                "node %s: declared dead by the store (taken over); stopped %d running runs",
                self.name,
                stopped,
            )
        lost = self.store.take_over(self.name, by=self.name, requeue=self._rerun_jobs())
        self._join()
        with self._cond:
            self.fenced = False
            self._renewed = self._clock.now()
            self._cond.notify_all()
        self._renew_leash(self._renewed)
        log.log(
            logging.WARNING if lost else logging.INFO,  # the outage itself is told once
            "node %s: joined the store again (%d runs recorded abandoned)",
            self.name,
            len(lost),
        )
        for record in lost:
            self._lost(record, self.name, rerun=True)

    def _stop_runs(self, reason: str) -> int:
        names = dict.fromkeys(e.job_name for e in self._processor.executing)
        return sum(self._processor.stop_job(name, reason) for name in names)

    # -- joining and taking over -----------------------------------------------------------------

    def _join(self) -> None:
        pid = os.getpid()
        info = NodeInfo(
            name=self.name,
            host=self._host,
            pid=pid,
            process_started=process_start_time(pid),
            started=self._clock.now(),
            max_workers=self._max_workers,
            lease=self.lease,
        )
        # The job names now (cheap, and what the queue's unknown jobs are judged by); the
        # digest from the node's thread right after (a large catalog takes seconds).
        names = self._digest.names(self._jobs())
        self.store.join(replace(info, defined_jobs=names), lease=self.lease)
        with self._cond:
            self._published = None if self._compare else (None, names)
            self._publish_due = True
            self._cond.notify_all()

    def _clean_up_own(self) -> None:
        """Runs a previous process of this node's name left behind: its live process groups
        killed, its runs abandoned. Nothing if that process still lives (join then refuses)."""
        old = next((n for n in self.store.nodes() if n.name == self.name), None)
        if old is None:
            return
        if old.state == "up" and self._alive(old):
            return  # a live node: `join` raises NodeNameTakenError
        self._take_over(old)

    def _alive(self, node: NodeInfo) -> bool:
        """Whether `node` still lives: on this host, by its pid and start time; elsewhere,
        by its lease."""
        if node.host == self._host:
            return process_alive(node.pid, node.process_started)
        expired = {n.name for n in self.store.expired_nodes(lease=self.lease)}
        return node.name not in expired

    def _sweep(self) -> None:
        """Take over the nodes whose lease expired, and dead nodes of this host at once."""
        dead = {n.name: n for n in self.store.expired_nodes(lease=self.lease)}
        for node in self.store.nodes():
            if (
                node.state == "up"
                and node.name != self.name
                and node.name not in dead
                and node.host == self._host
                and not process_alive(node.pid, node.process_started)
            ):
                dead[node.name] = node
        dead.pop(self.name, None)
        for node in dead.values():
            self._take_over(node)

    def _take_over(self, node: NodeInfo) -> None:
        if node.host == self._host:
            for _run_id, pid, started in self.store.processes(node.name):
                stop_group(pid, started)
        lost = self.store.take_over(node.name, by=self.name, requeue=self._rerun_jobs())
        if node.name != self.name:
            self.takeovers += 1
        log.warning(
            "node %s: took over node %s (host %s, pid %d): %d runs abandoned",
            self.name,
            node.name,
            node.host,
            node.pid,
            len(lost),
        )
        for record in lost:
            self._lost(record, node.name, rerun=True)

    def _rerun_jobs(self) -> list[str]:
        """The jobs with ``on_node_loss: rerun``: a dead node's queue rows of these go back to
        the queue (their args and priority kept), those of the others end ``failed``."""
        return [name for name, job in self._jobs().items() if job.on_node_loss == "rerun"]

    def _lost(self, record: RunRecord, dead: str, *, rerun: bool) -> None:
        """Report an abandoned run (its job's FAILED event), and rerun it if the job says so."""
        job = self._jobs().get(record.job)
        if job is None:
            return
        execution = Execution(
            job_name=record.job,
            run_id=record.run_id,
            slot=record.slot,
            started=record.started,
            ended=record.ended,
            event=Event.FAILED,
            result=SchedulerResult.ABNORMAL,
            reason=record.reason or lost_reason(dead),
            trigger=record.trigger,
            attempt=record.attempt,
        )
        try:
            self._report(job, execution)
        except Exception:
            log.exception("reporting the lost run %s of %r failed", record.run_id, record.job)
        if rerun and job.on_node_loss == "rerun":
            if record.trigger == "submit":  # its queue row went back to the queue (take_over)
                log.info(
                    "run %s of %r (lost with node %s): its queue row is pending again",
                    record.run_id,
                    job.name,
                    dead,
                )
                return
            with self._cond:
                self._reruns[job.name].append((record.slot, record.attempt + 1))
            # Not at once: the lost node's external runs are certainly stopped by its leash
            # by then, even if it was only frozen (see `RERUN_DELAY`).
            when = self._clock.now() + self.lease * RERUN_DELAY
            self._processor.run_at(job, when, trigger="rerun")
            log.info("rerunning run %s of %r (lost with node %s)", record.run_id, job.name, dead)

    # -- marks, missed ranges, retention ---------------------------------------------------------

    def _record_missed(self, now: datetime) -> None:
        """Missed ranges at start (slots up to `now` included: the engine schedules the
        slots after it), only when no other node is up (then nobody ran them)."""
        others = [n for n in self.store.nodes() if n.state == "up" and n.name != self.name]
        if not others:
            until = now + timedelta(microseconds=1)
            record_missed(self.store, self._jobs().values(), self.name, until)
        mark_unmarked(self.store, self._jobs().values(), now)

    def _record_unclaimed(self, clock: datetime, *, final: bool = False) -> None:
        """After a heartbeat that got through (`clock`: the store's time): the scheduled
        slots this node did not claim (store away, clock skewed) recorded ``missed`` where no
        node recorded them, and, once that write got through, the outage told over. `final`
        (the node stops): all the slots noted, whatever their age."""
        outage = self.outage
        skewed = self.skew.cause
        # A skewed node's slots are left to the others up to the limit past them.
        cutoffs = [
            (UNREACHABLE, clock - UNREACHABLE_AFTER),
            (skewed, clock - timedelta(seconds=self.skew.limit + 1)),
        ]
        if final:
            cutoffs = [(cause, clock + timedelta(days=1)) for cause, _until in cutoffs]
        taken: dict[tuple[str, str], tuple[datetime, datetime]] = {}
        for cause, until in cutoffs:
            taken.update(outage.take_slots(until, cause))
        if not taken:
            if outage.away and not outage.noted and not final:  # the heartbeat's write
                outage.back(0, 0)
            return
        jobs = self._jobs()
        missed = 0
        try:
            for (name, cause), (first, last) in taken.items():
                job = jobs.get(name)
                if job is None:
                    continue  # removed meanwhile: nothing to record
                missed += record_gaps(
                    self.store, job, first, last, node=self.name, cause=cause, now=clock
                )
                self._marks.moved(name, last)
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            outage.keep(taken)  # the recorded ones are found recorded next time
            outage.failed(exc, "recording the slots not claimed as missed")
            return
        outage.back(missed, len({name for name, _cause in taken}))

    def _prune(self, now: datetime) -> None:
        prune_history(self.store, self.retention, now, self.name)
