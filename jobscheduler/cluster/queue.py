"""`QueueConsumer`: on-demand runs from the state store's queue, and kill requests.

A run is asked for on demand by `Scheduler.submit`, ``jobscheduler submit``, the HTTP API,
or any program inserting a row into the queue table (docs/operations.md). Every node runs one
consumer thread. It takes pending rows of the jobs it defines (`StateStore.take`: by priority
with aging, then age; each row taken by one node only) as far as it has room, hands each to
the engine as a one-off start with trigger ``"submit"``, and settles the row with the run's
outcome (``succeeded``, ``failed`` or ``not_started``, and its run id).

- **The take claims the run** (`TakeClaims`): the run of each row is inserted ``running`` in
  the take's transaction, under a run id made here before the take (`JobProcessor.new_run_id`,
  one per free worker); `Submitted` carries it to the engine, whose run gets that id, and the
  worker starts it without claiming it again (`cluster.claims`). So two commits stand between
  a submit and its run's start (the row's insert, the take); one for a local submit alone
  while the node has a free worker (below). A row taken whose run does not
  come ends with its claim (`_end_quietly`: the claim finished ``not_started``, the row settled
  with it). A job with a limit is the exception (`_claimed_in_take`): its run is claimed by its
  worker, under the limit counted over every node (`cluster.limits`).

- **Room**: a node takes a row only for a free worker (`JobProcessor.free_workers`, less
  the rows it handed to the engine that no worker has picked up yet), all it has room for
  in one `take` (one transaction), and leaves the rest pending: so the next free worker on
  any node takes the highest priority pending then (priority, then age, cluster-wide), and
  a row shows ``running`` only once it has a worker. Rows of a job with ``max_instances``
  are taken only as far as the job has room on every node (``limits``: counted by the store
  in the take's transaction) and here (``most``), and the rows of other jobs are taken in
  their place; one taken while such a job filled up here stays with this node and starts
  when a run of that job ends; one whose claim finds the job at its limit on another node
  goes back to the queue (`put_back`), and the end of a run of such a job here wakes the
  thread for another take. A round
  that left rows pending for want of a worker has the end of any run here wake the thread
  for another take.
- **Bad rows**: a row whose arguments no run can be given (too large, not JSON, nested too
  deep: `values.read_args`) ends ``not_started`` with its reason inside the take's
  transaction (`StateStore.take`); the rows taken with it run.
- **A local submit alone** (no other under way on this node: a burst's inserts share the
  store's commits instead) while the node has a free worker takes in its insert's own
  transaction (`StateStore.submit_take`: the take the thread would make right after, same
  room, priorities and limits), in the submitting thread, holding `_taking` as the thread
  does for its takes, and hands the runs taken to the engine itself: one commit, no
  wake-up. Its row left pending (a row came first), it wakes the thread as below.
- **When**: any other local `submit` wakes the thread at once (it takes straight away); rows
  inserted by other programs or nodes, and kill requests from other machines, are found by
  a poll: one read (`StateStore.look`: "a pending row I may take? a kill request for one of
  my runs?"), and the `take` or `kill_requests` only when it says so. A take that found
  nothing while the look saw only rows of jobs with ``max_instances`` (each full on some
  node) is not made again for those rows until something may have changed: a run here ends
  (the thread is woken), a row of another job is seen, the definitions change, or
  `HELD_BACK_RETAKE` seconds passed (`_held_back`); a row that waits so costs an idle node
  its one read a poll, not a write transaction. The poll comes every
  `poll` seconds (1 s by default) while the node has runs on hand (running, waiting for a
  worker, or taken from the queue), every `idle_poll` (``IDLE_FACTOR`` × `poll`: 2 s) when
  it has none: an idle node makes one store query per 2 s here (docs/operations.md). A
  local `request_kill` wakes it for its kill requests at once. A store that tells of new
  rows and kill requests itself (`StateStore.watch`: PostgreSQL's ``LISTEN``) wakes it for
  them from any process, and an idle node then looks only every `WATCHED_IDLE_POLL` seconds
  (for rows inserted by SQL without a ``NOTIFY``, or a notification lost with a connection).
- **Hosts**: a node takes only rows whose ``host`` pattern (the row's) and whose job's
  ``host`` pattern match its node name or host name (`fnmatch`).
- **Paused jobs** (disabled in the file, or paused in the store: `paused()`): `submit`
  refuses them (`JobPausedError`); rows of a job paused after they were queued stay pending
  until it is resumed. Rows of a job no live node defines end ``not_started`` after a lease
  (`node.NodeKeeper`, at its heartbeat).
- **Limit**: `submit` refuses a run while `max_pending` rows are pending (`QueueFullError`).
  The depth is read from the store at most once a second (and at every submit once it is
  past half the limit); programs inserting rows by SQL are not limited.
- **Kill requests** (`StateStore.request_kill`, from any machine): the node that runs the run
  stops it, as `stop_job` does, with the request's reason ("killed" for an operator's kill;
  "replaced" for an ``overlap: replace`` slot), and closes the request.

A submitted run's trigger is `Submitted`: the text ``"submit"`` that also carries its queue
row (id and arguments). The engine hands a run's trigger from its start to its `Execution`
untouched, so the row travels with the run without the engine knowing of queues.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ..engine.processor import JobProcessor
from ..engine.threads import LoopThread
from ..errors import JobActionError, Problem
from ..model.catalog import Catalog
from ..model.execution import Execution
from ..model.job import Job
from ..policies.hosts import Hosts
from ..policies.overlap import limited
from ..runners.context import RunContext
from ..state.base import StateStore
from ..state.records import RunState, outcome_of, queue_state_of
from ..state.values import QueuedRun, TakeClaims
from .outage import is_store_failure

__all__ = [
    "DEFAULT_MAX_PENDING",
    "IDLE_FACTOR",
    "POLL",
    "WATCHED_IDLE_POLL",
    "JobPausedError",
    "QueueConsumer",
    "QueueFullError",
    "Submitted",
]

log = logging.getLogger("jobscheduler.queue")

POLL = 1.0
"""Seconds between two looks at the store for rows inserted elsewhere and kill requests,
while the node has runs on hand."""

IDLE_FACTOR = 2.0
"""How many times `poll` a node with no run on hand waits between two looks (a kill request
only matters to a node that runs something; a row inserted elsewhere waits that long)."""

WATCHED_IDLE_POLL = 30.0
"""Seconds between two looks of a node with no run on hand when its store wakes it for new
rows and kill requests (`StateStore.watch`)."""

KILL_RETRY = 3.0
"""Seconds a kill request for a run this node does not have running is kept open, asked again
at each look (a `POLL` apart while the node has runs): the run may have been claimed a moment
before its worker registered it. After that the request is closed: the run had ended."""

DEFAULT_MAX_PENDING = 10_000
"""Pending rows beyond which `submit` refuses a run."""

HELD_BACK_RETAKE = 10.0
"""Seconds after a take that found only rows held back by ``max_instances`` before a look
that finds the same rows takes again by itself (a run of their job ending here, a new row,
a change of the definitions take again at once; this bounds the wait of a row whose job's
room came on a node that could not take it, its workers busy)."""

_DEPTH_AGE = 1.0  # seconds a read of the queue's depth is trusted


class JobPausedError(JobActionError):
    """A submit of a paused job: it would never run until resumed."""


class QueueFullError(JobActionError):
    """A submit while the queue holds its limit of pending rows."""


class Submitted(str):
    """The trigger of a run taken from the queue: equal to ``"submit"`` (it is that text), and
    carrying its row's `queue_id` and `args` (see the module notes), and `run_id`: the id of
    the run claimed with the row's take (the engine gives the run that id), None when its
    worker claims it."""

    queue_id: int
    args: dict[str, Any] | None
    attempt: int
    run_id: str | None

    def __new__(
        cls,
        queue_id: int,
        args: dict[str, Any] | None,
        attempt: int = 1,
        run_id: str | None = None,
    ) -> Submitted:
        self = super().__new__(cls, "submit")
        self.queue_id = queue_id
        self.args = args
        self.attempt = attempt  # above 1: the row went back to the queue after a node loss
        self.run_id = run_id
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Submitted, (self.queue_id, self.args, self.attempt, self.run_id))


@dataclass(frozen=True)
class _Take:
    """A take's arguments but the node's own (see `QueueConsumer._take_args`)."""

    jobs: list[str]
    limit: int
    most: dict[str, int]
    claims: TakeClaims
    limits: dict[str, int]


class QueueConsumer:
    """Takes this node's share of the queue and carries out its kill requests (see the
    module notes). `catalog()` gives the current definitions, `paused()` the jobs paused in
    the state store now (their rows are not taken). Thread-safe."""

    def __init__(
        self,
        processor: JobProcessor,
        store: StateStore,
        node: str,
        catalog: Callable[[], Catalog],
        *,
        poll: float = POLL,
        max_pending: int = DEFAULT_MAX_PENDING,
        paused: Callable[[], Collection[str]] = tuple,
    ) -> None:
        if poll <= 0:
            raise ValueError(f"poll must be above 0 seconds, not {poll!r}")
        self._processor = processor
        self._store = store
        self._catalog = catalog
        self._clock = processor.clock
        self._node = node
        self._hosts = Hosts(store, node)  # the `host` policy's matching of this node
        self.poll = poll
        self.max_pending = max_pending
        # Called with every finished run (the HTTP server's metrics and last results).
        self.observers: list[Callable[[Execution], None]] = []
        # The jobs paused in the store now (the scheduler's pauses): none of their rows taken.
        self._paused = paused
        self._cond = threading.Condition()
        self._thread = LoopThread(self._cond, self._loop, "jobscheduler-queue")
        self._woken = False
        self._kills_due = False
        self._watched: bool | None = None  # whether the store wakes it (None: not asked yet)
        # Held by whoever takes (the thread, or a local submit: `_submit_taken`), so that
        # the room a take asks for and the rows it hands over are one step.
        self._taking = threading.Lock()
        self._submits = 0  # local submits under way (one alone may take its row)
        self._held: list[QueuedRun] = []  # taken, waiting for max_instances (`_taking`)
        self._inflight = 0  # rows handed to the engine and not settled
        self._handed: set[int] = set()  # rows handed to the engine, no worker's yet (by id)
        # The runs claimed with their rows' take and handed to the engine, no worker's yet
        # (by run id), and the stops kill requests asked of them: given when a worker binds
        # the run, which then ends NOT_STARTED with that reason (`StoreClaims`).
        self._unbound: set[str] = set()
        self._stops: dict[str, str] = {}
        self._kills_missed: dict[int, float] = {}  # request -> when first not found (thread)
        self._wanting = False  # rows were left pending for want of a worker
        self._rows_seen = False  # rows may be pending: the last look found some, or a take came
        self._depth = 0  # pending rows at the last read, plus local submits since
        self._depth_read = float("-inf")  # the clock's time of that read (a timestamp)
        self._last_look = float("-inf")  # the clock's time of the last look (a timestamp)
        # After a take that found nothing while the look saw rows of jobs with a limit only
        # (each full on some node): the catalog, those jobs and when (thread only). A look
        # that sees only rows of these takes nothing until woken, the catalog changes, or
        # `HELD_BACK_RETAKE` passed: an empty take is a write transaction.
        self._held_back: tuple[Catalog, frozenset[str], float] | None = None
        self._look_jobs: frozenset[str] | None = None  # the jobs of the last look's rows
        # The jobs this node may take, for the catalog they were read from (the thread, and
        # a local submit that takes: both write the same, whole):
        # a catalog is immutable and the node's names are fixed, so one walk per catalog.
        # With them, those of a `max_instances` (looked at before each take, and at a run's
        # end: read from other threads, the tuple is replaced whole), and those whose runs the
        # take claims (`_claimed_in_take`).
        self._jobs_of: tuple[Catalog | None, list[str], frozenset[str], frozenset[str]] = (
            None,
            [],
            frozenset(),
            frozenset(),
        )
        # Where a failure of the store goes (the node's outage, told once: cluster/outage.py).
        self._store_failed: Callable[[BaseException, str], None] | None = None

    def tell_store_failures(self, failed: Callable[[BaseException, str], None]) -> None:
        """Hand each failure of the store (`failed(exc, doing)`) to `failed` instead of
        logging it: the node tells an outage once (see `cluster.outage`)."""
        self._store_failed = failed

    def _told(self, exc: Exception, doing: str) -> bool:
        """Whether `exc`, a failure of the store, went to `tell_store_failures`'s callback;
        False for anything else (a bug: its caller logs it)."""
        failed = self._store_failed
        if failed is None or not is_store_failure(exc):
            return False
        failed(exc, doing)
        return True

    # -- the callers' side ---------------------------------------------------------------

    def submit(
        self, name: str, args: dict[str, Any] | None = None, *, priority: int | None = None
    ) -> int:
        """Queue a run of job `name` (defined here) at `priority` (None: the job's); its
        queue id. `JobPausedError` for a paused job, `QueueFullError` past `max_pending`,
        `UnknownNameError` for no such job, `TypeError` for `args` that are no JSON object.
        """
        job = self._catalog().job(name)
        priority = job.priority if priority is None else priority
        if not job.enabled:
            raise JobPausedError(Problem("the job is paused: resume it first", job=name))
        if args is not None and not isinstance(args, dict):
            raise TypeError(f"args must be a dict or None, not {args!r}")
        self._check_depth(name)
        with self._cond:
            alone = not self._submits  # no other submit under way here: not a burst
            self._submits += 1
        try:
            taken = self._submit_taken(name, args, priority) if alone else None
            if taken is not None:
                return taken
            queue_id = self._store.submit(name, args, priority=priority)
        finally:
            with self._cond:
                self._submits -= 1
        self._left_pending()
        return queue_id

    def _left_pending(self) -> None:
        """A local submit's row was left pending: counted in the depth, and the thread woken
        to take it."""
        with self._cond:
            self._depth += 1
            self._woken = True
            self._cond.notify()

    def _submit_taken(self, name: str, args: dict[str, Any] | None, priority: int) -> int | None:
        """A submit alone (no other under way here: in a burst, the inserts share commits
        instead) while this node has a free worker: its row inserted and taken in one
        transaction (`StateStore.submit_take`: the take's own choice, by priority and limits,
        as if it came right after), and the runs taken handed to the engine here, no wake-up
        of the thread in between (it waits for a take of the thread's under way). Its queue
        id; None when it is not for this path (the thread not running, no free worker, or
        the job not this node's to take): then the row is only inserted, and the thread
        takes it."""
        if not self._thread.running:
            return None
        with self._taking:
            if self._thread.stopping:
                return None
            catalog = self._catalog()
            take = self._take_args(catalog)
            if take is None or name not in take.jobs:  # not this node's: the thread's
                return None
            queue_id, rows = self._store.submit_take(
                name,
                args,
                priority=priority,
                node=self._node,
                jobs=take.jobs,
                limit=take.limit,
                hostname=self._hosts.hostname,
                most=take.most,
                claims=take.claims,
                limits=take.limits,
            )
            self._hand(rows, take.limit, catalog)
        if all(row.id != queue_id for row in rows):  # other rows came first: this one waits
            self._left_pending()
        return queue_id

    def put_back(self, ctx: RunContext) -> None:
        """A worker took a submitted run and it is not run here (its claim found the job at
        its ``max_instances`` on another node, or paused): its row goes back to the queue,
        pending, for the next take once the job has room. Not a submitted run: nothing."""
        trigger = ctx.trigger
        if type(trigger) is not Submitted:
            return
        try:
            self._store.put_back(trigger.queue_id)
        except Exception as exc:
            # Left `running`: a lost node's rows go back to the queue, or end `failed`.
            if not self._told(exc, f"putting queue row {trigger.queue_id} back"):
                log.exception("putting queue row %d back", trigger.queue_id)
        with self._cond:
            self._inflight -= 1
            self._handed.discard(trigger.queue_id)
            self._wanting = True  # a worker is free: another take once a run ends
            self._rows_seen = True

    def wake(self, *, kills: bool = False) -> None:
        """Look at the store now (`kills`: for kill requests too, e.g. after a local one)."""
        with self._cond:
            self._woken = True
            self._kills_due = self._kills_due or kills
            self._cond.notify()

    def bind(self, ctx: RunContext) -> None:
        """A worker took a submitted run (before its claim: it has not started): it gets its
        arguments, and its attempt when its row went back to the queue after a node loss."""
        trigger = ctx.trigger
        if type(trigger) is Submitted:
            if trigger.args is not None:
                ctx.give_args(trigger.args)
            if trigger.attempt > 1:
                ctx.rerun_of(None, trigger.attempt)
            with self._cond:
                self._handed.discard(trigger.queue_id)
                if trigger.run_id is not None:
                    self._unbound.discard(trigger.run_id)
                    reason = self._stops.pop(trigger.run_id, None)
                    if reason is not None:
                        ctx.stop(reason)

    @staticmethod
    def row_of(execution: Execution) -> int | None:
        """The queue row a run was taken from (None: not a submitted run)."""
        trigger = execution.trigger
        return trigger.queue_id if type(trigger) is Submitted else None

    def finished(self, execution: Execution, *, settled: bool = False) -> None:
        """Every run's end: observers hear of it; a submitted run's row is settled (unless
        `settled`: written with the run's record, see `StateStore.finish`); held rows get
        another look."""
        for observer in self.observers:
            try:
                observer(execution)
            except Exception:
                log.exception("an observer of finished runs failed")
        trigger = execution.trigger
        if type(trigger) is not Submitted:
            # A worker is free: rows wait for one, or (the last look saw pending rows) for
            # this job with a limit to have room.
            if (
                self._held
                or self._wanting
                or (self._rows_seen and execution.job_name in self._jobs_of[2])
            ):
                self.wake()
            return
        if not settled:
            try:
                self._store.settle(
                    trigger.queue_id, queue_state_of(outcome_of(execution)[0]), execution.run_id
                )
            except Exception as exc:
                if not self._told(exc, f"settling queue row {trigger.queue_id}"):
                    log.exception(
                        "settling queue row %d (run %s)", trigger.queue_id, execution.run_id
                    )
        with self._cond:
            self._inflight -= 1
            self._handed.discard(trigger.queue_id)
            if trigger.run_id is not None:  # ended without a worker: refused, shut down
                self._unbound.discard(trigger.run_id)
                self._stops.pop(trigger.run_id, None)
            self._woken = True
            self._cond.notify()

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        with self._cond:
            if self._thread.running:
                return
            self._woken = True
            if self._watched is None:  # once: the store keeps calling until it closes
                self._watched = self._store.watch(self._notified)
            self._thread.start()

    def stop(self) -> None:
        """Take nothing more; rows held for `max_instances` are settled ``not_started``."""
        self._thread.stop()
        with self._taking:  # a submit's take under way hands its rows first
            for row in self._held:
                self._end_quietly(row, "shutdown")
            self._held = []

    # -- the thread ---------------------------------------------------------------------------

    def _notified(self, kills: bool) -> None:
        """The store's word that a row may have been queued (`kills`: a kill requested)."""
        self.wake(kills=kills)

    @property
    def idle_poll(self) -> float:
        """Seconds between two looks while the node has no run on hand."""
        if self._watched:
            return max(WATCHED_IDLE_POLL, self.poll * IDLE_FACTOR)
        return self.poll * IDLE_FACTOR

    def _period(self) -> float:
        processor = self._processor
        busy = processor.running_count + processor.queued_count + self._inflight + len(self._held)
        return self.poll if busy else self.idle_poll

    def _loop(self) -> None:
        while True:
            with self._cond:
                # Waits end early on any wake-up of the clock, and at most a `poll` apart:
                # a node that got runs since is looked for at its busy pace (unless the
                # store wakes it for kill requests: then it sleeps until its look is due).
                while not self._woken and not self._thread.stopping:
                    now = self._clock.now().timestamp()
                    remaining = self._last_look + self._period() - now
                    if remaining <= 0:
                        break
                    self._clock.wait(
                        self._cond, remaining if self._watched else min(remaining, self.poll)
                    )
                if self._thread.stopping:
                    return
                woken, self._woken = self._woken, False
                kills, self._kills_due = self._kills_due, False
            try:
                self._round(woken=woken, kills=kills)
            except Exception as exc:
                # The store is away (told once), or a bug (logged): tried again at the next poll.
                if not self._told(exc, "reading the queue and kill requests"):
                    log.exception("reading the queue and kill requests failed")

    def _round(self, *, woken: bool, kills: bool) -> None:
        """One pass: a look at the store when the poll is due (at most one a period, however
        often the thread is woken: every end of a submitted run wakes it), then the kill
        requests and the take, each when asked for (`wake`) or when the look found some."""
        catalog = self._catalog()
        now = self._clock.now().timestamp()
        pending = woken
        if now - self._last_look >= self._period():
            self._last_look = now
            look = self._store.look(
                self._node, jobs=self._jobs(catalog), hostname=self._hosts.hostname
            )
            kills = kills or look.kills
            self._look_jobs = look.jobs if look.pending else frozenset()
            if not look.pending:
                self._held_back = None
            pending = pending or (look.pending and not self._still_held_back(catalog, now))
            self._rows_seen = look.pending
        if kills:
            self._kills()
        if pending:
            # Rows may be left waiting for a job with a limit: the end of its run here takes
            # again, until a look finds the queue empty.
            self._rows_seen = True
            with self._taking:
                taken = self._take(catalog)
            if taken is not None:
                self._note_held_back(catalog, taken, now)
        elif self._held:
            with self._taking:
                self._start_held(catalog)

    def _still_held_back(self, catalog: Catalog, now: float) -> bool:
        """Whether the rows the last look saw are those a take found held back already (see
        `_held_back`): no take for them until something may have changed."""
        held_back, jobs = self._held_back, self._look_jobs
        if held_back is None or jobs is None:
            return False
        read_from, names, since = held_back
        return read_from is catalog and jobs <= names and now - since < HELD_BACK_RETAKE

    def _note_held_back(self, catalog: Catalog, taken: int, now: float) -> None:
        """After a take that got `taken` rows: when none, while every row the last look saw is
        of a job with ``max_instances``, those rows are held back by their limits."""
        jobs = self._look_jobs
        if taken or not jobs or jobs - self._jobs_of[2]:
            self._held_back = None
        else:
            self._held_back = (catalog, jobs, now)

    def _kills(self) -> None:
        for request_id, run_id, reason in self._store.kill_requests(self._node):
            # An operator's kill gives no reason; an ``overlap: replace`` slot gives its own.
            why = reason or "killed"
            stop = self._processor.stop_run
            # Tried again after `_stop_before_start`: a worker may have bound it in between.
            if stop(run_id, why) or self._stop_before_start(run_id, why) or stop(run_id, why):
                log.info("run %s stopped by a kill request (%s)", run_id, why)
            else:
                now = self._clock.now().timestamp()
                first = self._kills_missed.setdefault(request_id, now)
                if now - first < KILL_RETRY:
                    continue  # claimed, not registered yet: asked again at the next look
            self._kills_missed.pop(request_id, None)
            self._store.kill_done(request_id)

    def _stop_before_start(self, run_id: str, reason: str) -> bool:
        """A kill request for a run claimed with its row's take that no worker has yet: it
        is stopped when a worker binds it (it ends NOT_STARTED with `reason`). False: not
        such a run of this node's."""
        with self._cond:
            if run_id not in self._unbound:
                return False
            self._stops[run_id] = reason
            return True

    def _jobs(self, catalog: Catalog) -> list[str]:
        """The jobs whose rows this node may take: enabled, their ``host`` letting it."""
        read_from, names, _limited, _claimed = self._jobs_of
        if read_from is not catalog:
            names = [name for name, job in catalog.jobs.items() if job.enabled and self._here(job)]
            limited = frozenset(n for n in names if catalog.jobs[n].max_instances is not None)
            claimed = frozenset(n for n in names if self._claimed_in_take(catalog.jobs[n]))
            self._jobs_of = (catalog, names, limited, claimed)
        paused = self._paused()
        return [name for name in names if name not in paused] if paused else names

    def _take(self, catalog: Catalog) -> int | None:
        """Take as many rows as this node has free workers for, in one `take` (`_taking`
        held); how many it got (None: the store was not asked)."""
        self._start_held(catalog)
        take = self._take_args(catalog)
        if take is None:
            return None
        rows = self._store.take(
            self._node,
            jobs=take.jobs,
            limit=take.limit,
            hostname=self._hosts.hostname,
            most=take.most,
            claims=take.claims,
            limits=take.limits,
        )
        self._hand(rows, take.limit, catalog)
        return len(rows)

    def _take_args(self, catalog: Catalog) -> _Take | None:
        """What a take asks for now (`_taking` held): rows for every free worker, of the
        jobs with room; None when there is no room (no free worker, or every job full)."""
        with self._cond:
            handed = len(self._handed)
        room = self._processor.free_workers - handed - len(self._held)
        if room <= 0:
            self._wanting = True  # the end of a run here brings the next take
            return None
        jobs = self._jobs(catalog)
        most = self._room_of_limited(catalog)
        jobs = [name for name in jobs if most.get(name) != 0] if most else jobs
        if not jobs:
            return None
        new_id = self._processor.new_run_id
        claims = TakeClaims(
            jobs=self._jobs_of[3],
            run_ids=[new_id() for _ in range(room)],
            started=self._clock.now(),
        )
        limits = {name: catalog.jobs[name].max_instances or 1 for name in most}
        return _Take(jobs, room, most, claims, limits)

    def _hand(self, rows: list[QueuedRun], room: int, catalog: Catalog) -> None:
        """The rows a take of `room` rows took (`_taking` held): each run handed to the
        engine, or held while its job has no room here; a row ended in the take logged."""
        # A full take may have left more: look again once a worker frees up.
        self._wanting = len(rows) >= room
        for row in rows:
            if row.state == "running":
                self._held.append(row)
            else:  # ended in the take: its arguments cannot be given to a run
                log.warning("queue row %d of %r not started: %s", row.id, row.job, row.reason)
        if self._held:
            self._start_held(catalog)

    @staticmethod
    def _claimed_in_take(job: Job) -> bool:
        """Whether a submitted run of `job` is claimed with its row's take (one commit fewer
        before it starts) rather than by the worker that starts it. Not for a job with a
        limit (``max_instances``, ``overlap``): its run is claimed under the limit, counted
        over every node in the claim's transaction (`cluster.limits`). The one place that
        decides it: a check that a submitted run needs before its claim goes here. Nor for a
        job with ``pause_after_failures``: the store is asked whether it is paused right
        before each run, and a run held back by that goes back to the queue unclaimed."""
        return not limited(job) and job.pause_after_failures is None

    def _room_of_limited(self, catalog: Catalog) -> dict[str, int]:
        """The room each job of a ``max_instances`` (of `_jobs`) has here: the rows of it a
        take may have (the others are left to other nodes, or to later)."""
        room = {}
        for name in self._jobs_of[2]:
            most = catalog.jobs[name].max_instances
            if most is not None:
                held = sum(row.job == name for row in self._held)
                room[name] = max(0, most - self._processor.active(name) - held)
        return room

    def _here(self, job: Job) -> bool:
        """Whether this node may run `job`: its ``host`` pattern, as the `host` policy reads
        it (`Hosts.here`); None lets any node."""
        return job.host is None or self._hosts.here(job.host)

    def _start_held(self, catalog: Catalog) -> None:
        """Hand the held rows whose job has room to the engine, in the order taken."""
        if not self._held:
            return
        waiting: list[QueuedRun] = []
        counts: dict[str, int] = {}
        now = self._clock.now()
        for row in self._held:
            job = catalog.jobs.get(row.job)
            if job is None:  # removed after the take
                self._end_quietly(row, "job removed")
                continue
            active = counts.get(row.job)
            if active is None:
                active = self._processor.active(row.job)
            # A row whose run was claimed with it goes at once: it has its claim.
            if job.max_instances is not None and active >= job.max_instances and not row.run_id:
                waiting.append(row)
                counts[row.job] = active
                continue
            counts[row.job] = active + 1
            with self._cond:
                self._inflight += 1
                self._handed.add(row.id)
                if row.run_id is not None:
                    self._unbound.add(row.run_id)
            trigger = Submitted(row.id, row.args, row.attempt, row.run_id)
            self._processor.run_at(job, now, trigger=trigger)
        self._held = waiting

    def _end_quietly(self, row: QueuedRun, reason: str) -> None:
        """A row taken that no run will come of ends ``not_started``: with its run's claim
        (finished so, the row settled with it) when the take claimed one."""
        if row.run_id is None:
            self._settle_quietly(row.id, "not_started")
            return
        try:
            self._store.finish(
                row.run_id,
                state=RunState.NOT_STARTED,
                ended=self._clock.now(),
                reason=reason,
                settle=row.id,
            )
        except Exception as exc:
            if not self._told(exc, f"ending queue row {row.id}"):
                log.exception("ending queue row %d (run %s)", row.id, row.run_id)

    def _settle_quietly(self, queue_id: int, state: str) -> None:
        try:
            self._store.settle(queue_id, state, None)
        except Exception as exc:
            if not self._told(exc, f"settling queue row {queue_id}"):
                log.exception("settling queue row %d", queue_id)

    def _check_depth(self, name: str) -> None:
        limit = self.max_pending
        now = self._clock.now().timestamp()
        with self._cond:
            fresh = now - self._depth_read < _DEPTH_AGE and self._depth < limit // 2
            if not fresh:  # the other submitters meanwhile go by the last read
                self._depth_read = now
        if not fresh:
            depth = self._store.pending_count(limit=limit)
            with self._cond:
                self._depth, self._depth_read = depth, now
        if self._depth >= limit:
            raise QueueFullError(
                Problem(f"the queue is full: {limit} runs wait already; try later", job=name)
            )
