"""`WorkerPool`: the threads that run what the `ReadyRuns` holds, and the pool's lifecycle.

Part of `JobProcessor`, which shares its lock with the pool and moves it through its phases
with `start`, `stop`, `begin_close` and `close` (see `lifecycle` for the phases):

- up to `max_workers` worker threads, started when runs are ready and none is idle (one is
  started with the processor, so the first run finds one waiting), then kept, each waiting
  on a lock of its own. A worker takes the next run, makes its `RunContext`, asks the
  owner's `claim` (if any), calls ``execute(job, ctx)`` (or `start`, which may detach it:
  `detached`) and then ``on_finished`` — all without the lock while runs are ready (see
  `ready`); it takes the lock only to go idle when there is nothing to do. Waking an idle
  worker takes no lock either (`wake_idle`), so the processor hands out the first runs of a
  burst while it is still moving the rest, lock held. Threads are started outside the lock
  (`spawn`): starting one takes a while;
- the `NoticeThread` (`notices`), which reports runs that never started and the finished
  runs a worker hands over while other runs wait to start, a batch at a time (`report_many`:
  one ``on_finished_many`` call per batch when the owner gave one).

An exception from ``execute`` makes the run FAILED / ABNORMAL ("scheduler error"); one from
``on_finished`` is logged. Neither ends a thread. `claim` (see `JobProcessor`): False drops
the run without a report; an exception makes it NOT_STARTED "claim failed: …", except
`ClaimRefused`, a limit the store found reached: NOT_STARTED with its reason, not an error.

A burst taken a few at a time: while `_BURST` runs or more are ready, and more than twice as
many as there are workers, a worker that finds nothing on ``claimed`` moves up to ``ready //
max_workers`` of them (at most `_TAKE_MOST`) there with one `ReadyRuns.take_batch` call (one
call for their `Run` objects and run ids), then takes the first from ``claimed`` as every free
worker does, before anything in the ready runs (`_take_batch`: one worker at a time, so that
``claimed`` keeps the ready runs' order). So a long run holds back none of a batch while
another worker is free. A run on ``claimed`` is taken (it counts for max_instances, and its
stops are counted from then on, as for a run a worker takes) but not yet registered as
running: the worker that takes it from there registers it, makes its context and claims it,
as for any run, so `executing` and `stop_runs` see it from then on. A run made ready later
with a higher priority waits behind the batch on ``claimed`` (at most `_TAKE_MOST` runs).
When the phase leaves RUNNING (`halt`), the runs waiting on ``claimed`` end NOT_STARTED for
the halt's reason with the queued runs (`_drop_shared`), and so does one a worker finds there
later (`_drop_taken`). With claims together (below), a worker takes one run and its claim
takes the batch instead.

Claims together (`claim_together_with`): with a store in another process or on another machine,
a claim each makes every run of a burst wait for a commit of its own (1,000 slots due at once
behind 10 workers wait for ~100 commits in a row). So a worker that takes a run while others
wait to start takes up to `BATCH` of them, makes their contexts, and claims them all with one
``claim_many`` (one transaction); it runs the first and leaves the others, each with its answer
(`Run.answer`), on ``claimed``, where the next free workers take them before anything in the
ready runs. A run of a job with ``overlap: queue`` or ``replace`` is claimed alone, by the
worker that takes it from ``claimed`` (its claim may wait for the job to be idle on other
nodes: see `cluster.limits`), never in another run's batch. The steps are those of a single
run: the run is registered as running, then its context is made and the stops asked for so far
are read, then the store is asked. A run another node took is dropped without a report, as a
single run's is. A run whose slot was claimed before it was due (`ahead`) is not claimed again:
its claim's answer is read (`confirm_with`), and a worker claiming a batch leaves such runs to
the others. What a crash costs: the runs a node claimed and had not started yet (at most a
batch per busy worker) are recorded as abandoned when the node is taken over.

A run given up because it ignored its stop (`give_up`, see `runners.internal`) is reported at
once through the notice thread and stops counting as running; the worker stuck in it leaves
the pool (a new one may start in its place, so the pool keeps its size) and is not waited
for by a shutdown. When its call returns at last, its result is dropped and the thread ends.

Stopping a run that a worker is just taking: `stop_runs` writes its reason (on the job's
state, on each run it finds, or for all) *before* it reads which runs are running and their
contexts; a worker registers its run and makes its context *before* it reads those reasons.
Under the GIL one of the two sees the other's write, so no run escapes a stop.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..clock import Clock
from ..errors import ClaimError
from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.job import Job
from ..policies.overlap import waits
from ..runners.context import RunContext
from .detached import DetachedRuns, StartFn
from .lifecycle import RUNNING, Lifecycle
from .notices import NoticeThread
from .ready import Run
from .threads import Waiter, join, new_waiter, release_all
from .timeline import Timeline

__all__ = [
    "BATCH",
    "ClaimFn",
    "ClaimManyFn",
    "ClaimRefused",
    "ExecuteFn",
    "FinishedFn",
    "FinishedManyFn",
    "WorkerPool",
]

log = logging.getLogger("jobscheduler.processor")

_HAND_OFF_BELOW = timedelta(microseconds=200)  # see `_short`

# Runs claimed together at most. A batch's first run waits for the whole batch's claim: 64
# rows are one statement on PostgreSQL (~0.5 ms here), and 1,000 runs are 16 batches, which
# the workers' concurrent claims share commits for (`state.sqlbatch`).
BATCH = 64
# Ready runs moved to ``claimed`` at once in a burst at most, and the ready runs that make a
# burst (fewer are taken one at a time, as they always were: see the module notes).
_TAKE_MOST = 16
_BURST = 64

ExecuteFn = Callable[[Job, RunContext], Execution]
FinishedFn = Callable[[Job, Execution], None]
# ``on_finished`` for a batch of ended runs, in order (see `WorkerPool.report_many`).
FinishedManyFn = Callable[[Sequence[tuple[Job, Execution]]], None]
ClaimFn = Callable[[Job, RunContext], bool]
# Answers in order: True (run it), False (another node runs it), or the claim's exception.
ClaimManyFn = Callable[[Sequence[tuple[Job, RunContext]]], list[bool | Exception]]


class ClaimRefused(Exception):
    """Raised by a claim for a run that does not start because a limit is reached on the
    nodes sharing the store (`cluster.limits`): it ends NOT_STARTED with `reason` (kept as
    given: `overlap.SKIPPED` is told by identity), and is not logged as an error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WorkerPool(Lifecycle):
    """Worker threads and the notice thread of one processor (see the module notes).

    Methods marked "lock held" are called with the processor's lock, `lock`, held.
    """

    def __init__(
        self,
        lock: threading.Lock,
        timeline: Timeline,
        execute: ExecuteFn,
        on_finished: FinishedFn,
        clock: Clock,
        max_workers: int,
        node: str,
        claim: ClaimFn | None = None,
        start: StartFn | None = None,
        on_finished_many: FinishedManyFn | None = None,
    ) -> None:
        super().__init__(lock)
        self.timeline = timeline
        self.ready = timeline.ready
        self.max_workers = max_workers
        self.node = node  # every run's RunContext carries it
        self.workers: set[threading.Thread] = set()
        # Changed without the lock (one C call each); copy before iterating.
        self.running: dict[str, Run] = {}  # claimed runs by run id, until they end
        self.taking: set[int] = set()  # threads between taking a run and registering it
        self.reporting: set[str] = set()  # run ids whose on_finished has not returned
        self.stop_all: str | None = None  # a stop for every run, at shutdown(wait=False)
        self._halted = "scheduler stopped"  # why the phase left RUNNING (see `halt`)
        self._batch_lock = threading.Lock()  # see `_take_batch`
        self.detached = DetachedRuns(lock, execute, start, self.hand_over)
        self._on_finished = on_finished
        self._on_finished_many = on_finished_many
        self._claim = claim
        # See `claim_together_with`: runs taken while others wait are claimed together.
        self._claim_many: ClaimManyFn | None = None
        self.claimed: deque[Run] = deque()  # claimed together, waiting for a worker
        # See `confirm_with`: a run whose slot was claimed ahead goes on once this says the
        # node may still start runs (see `ahead`).
        self._confirm: ClaimFn | None = None
        self.clock = clock
        self.notices = NoticeThread(
            self, self.report, self.report_many, timeline.notices, self.starting
        )
        # Idle workers each wait on a lock of their own (see `threads`), woken without a lock.
        self._sleepers: list[Waiter] = []  # idle workers, the last to go idle on top
        self._tasks: dict[Waiter, Callable[[], None]] = {}  # see `delegate`
        self.to_spawn = 0  # workers asked for by `wake`, started by `spawn`
        self._starting = 0  # threads `spawn` is starting right now
        self._all_started = threading.Condition(lock)
        self._started: dict[int, int] = {}  # runs taken, by thread (each writes its own)
        self.unclaimed = 0  # runs taken whose claim said no or raised (lock held)
        self.claims_refused = 0  # runs another node took (claim returned False; lock held)
        self._thread_of: dict[str, threading.Thread] = {}  # run id -> the worker running it
        self._given_up: set[str] = set()  # run ids given up whose call has not returned
        self._stuck: set[threading.Thread] = set()  # workers left in a given-up run

    @property
    def started(self) -> int:
        """Runs handed to ``execute`` (a run is counted when a worker takes it, and taken
        back off if its claim says no or raises)."""
        return sum(list(self._started.values())) - self.unclaimed

    def free_workers(self) -> int:
        """How many more runs could start on a worker now: `max_workers` less the runs that
        hold one (taken and not finished, detached ones aside) and those due and waiting for
        one. No lock: a few lengths, read at once, that may be a run off while workers move."""
        holding = len(self.running) - self.detached.away + len(self.ready) + len(self.claimed)
        return max(0, self.max_workers - holding)

    def starting(self) -> bool:
        """Whether runs are being started: due runs wait, and a worker is free to take them
        (fewer runs hold one than there are workers). No lock: lengths read at once."""
        if not (self.ready.waiting or self.claimed):
            return False
        return len(self.running) - self.detached.away < self.max_workers

    def busy(self) -> bool:
        """Whether a run is queued, being claimed, running or being reported (lock held)."""
        return bool(
            self.ready.waiting
            or self.claimed
            or self.taking
            or self.running
            or self.reporting
            or self.timeline.notices
            or self.notices.out
        )

    # -- workers -------------------------------------------------------------------------------

    def wake(self, count: int) -> None:
        """`count` runs became ready (lock held): wake idle workers, start more if allowed."""
        if self._phase != RUNNING:
            return
        count = self.wake_idle(count)
        more = min(count, self.max_workers - len(self.workers) - self.to_spawn)
        if more > 0:
            self.to_spawn += more

    def wake_idle(self, count: int) -> int:
        """Wake up to `count` idle workers (lock held or not); returns how many runs are
        left without one."""
        sleepers = self._sleepers
        while count > 0 and sleepers and self._phase == RUNNING:
            try:
                waiter = sleepers.pop()
            except IndexError:
                break
            waiter.release()
            count -= 1
        return count

    def delegate(self, task: Callable[[], None]) -> bool:
        """Have an idle worker call `task` before it looks for runs (lock held). False (and
        nothing done) when no worker is idle."""
        if self._phase != RUNNING or not self._sleepers:
            return False
        waiter = self._sleepers.pop()
        self._tasks[waiter] = task
        waiter.release()
        return True

    def prestart(self) -> None:
        """Ask for one worker and the notice thread ahead of need (lock held); the caller
        then calls `spawn`."""
        if self._phase == RUNNING:
            if not self.workers and not self.to_spawn:
                self.to_spawn = 1
            self.notices.notify()

    def spawn(self) -> None:
        """Start the workers `wake` asked for (lock NOT held: a thread start waits for the
        new thread, which must not find the lock taken)."""
        while True:
            with self.lock:
                if not self.to_spawn or self._phase != RUNNING:
                    self.to_spawn = 0
                    return
                self.to_spawn -= 1
                worker = threading.Thread(
                    target=self._worker,
                    name=f"jobscheduler-worker-{len(self.workers) + 1}",
                    daemon=True,
                )
                self.workers.add(worker)
                self._starting += 1
            try:
                worker.start()
            except BaseException:
                with self.lock:
                    self.workers.discard(worker)  # never started: nothing to join
                raise
            finally:
                with self.lock:
                    self._starting -= 1
                    if not self._starting:
                        self._all_started.notify_all()

    def started_workers(self) -> list[threading.Thread]:
        """The worker threads, once none is being started (lock held; for joining them:
        `spawn` runs in any thread, a worker's included, and may be starting one)."""
        while self._starting:
            self._all_started.wait()
        return list(self.workers)

    def halt(self, reason: str) -> None:
        """The phase left RUNNING (lock held) for `reason` (the queued runs' report): idle
        workers end, the notice thread finishes."""
        self._halted = reason
        self._drop_shared()
        release_all(self._sleepers)
        self.notices.halt()

    def _worker(self) -> None:
        me = threading.current_thread()
        ident = threading.get_ident()
        lock = self.lock
        ready = self.ready
        running = self.running
        taking = self.taking
        sleepers = self._sleepers
        claimed = self.claimed
        waiter = new_waiter()
        started = 0
        try:
            while True:
                taking.add(ident)
                run = None
                if claimed:  # another worker's batch, or claimed together (module notes)
                    try:
                        run = claimed.popleft()
                    except IndexError:  # another worker took the last one
                        pass
                    else:
                        if run.answer is None and self._phase != RUNNING:
                            self._drop_taken(run)  # of a batch, not started
                            continue
                if run is None:
                    waiting = len(ready.waiting)
                    most = waiting // self.max_workers
                    if most > 1 and waiting >= _BURST and self._claim_many is None:
                        self._take_batch(most if most < _TAKE_MOST else _TAKE_MOST)
                        continue  # take the first of it from `claimed`, as any worker
                    run = ready.take()
                if run is None:
                    taking.discard(ident)
                    with lock:  # nothing ready: wait, unless a run came meanwhile
                        if ready.waiting or claimed:
                            continue  # claim it without the lock (another may be quicker)
                        if self._phase != RUNNING:
                            return
                        # This thread no longer `taking`: a `wait_idle` that looked while it
                        # was may have found the pool busy for it alone.
                        self.wake_if_quiet()
                        sleepers.append(waiter)
                    waiter.acquire()  # until `wake_idle`, `delegate` or `halt` releases it
                    task = self._tasks.pop(waiter, None)
                    if task is not None:
                        try:
                            task()
                        except Exception:
                            log.exception("a task handed to a worker raised")
                    continue
                running[run.run_id] = run
                taking.discard(ident)
                started += 1
                self._started[ident] = started
                self._thread_of[run.run_id] = me
                given_up = self.run(run)
                self._thread_of.pop(run.run_id, None)
                if given_up:
                    return  # replaced meanwhile: leave (the finally wakes and spawns)
        except BaseException:
            log.exception("a worker thread crashed")
        finally:
            taking.discard(ident)
            with lock:
                if waiter in sleepers:
                    sleepers.remove(waiter)
                self.workers.discard(me)
                self._stuck.discard(me)
                if self.ready.waiting or self.claimed:
                    self.wake(len(self.ready.waiting) + len(self.claimed))
                self.wake_quiet()
            self.spawn()

    def _take_batch(self, most: int) -> None:
        """Move up to `most` ready runs onto ``claimed`` with one `ReadyRuns.take_batch` call
        (see the module notes), unless runs wait there already. One worker at a time: a
        batch goes onto ``claimed`` whole before the next is taken, so ``claimed`` keeps the
        ready runs' order (a worker waits only for another's take, a few µs)."""
        with self._batch_lock:
            if not self.claimed:
                self.claimed.extend(self.ready.take_batch(most))

    def _drop_shared(self) -> None:
        """At the halt (lock held): the runs of batches waiting on ``claimed`` (taken, not
        registered, not claimed) end NOT_STARTED for the halt's reason now, with the queued
        runs; runs claimed together stay, to start (their claims were made)."""
        claimed = self.claimed
        if not claimed:
            return
        now = self.clock.now()
        kept: list[Run] = []
        while True:
            try:
                run = claimed.popleft()  # workers pop too, without the lock: each run once
            except IndexError:
                break
            if run.answer is not None:
                kept.append(run)
                continue
            execution = self._halted_run(run, now)
            state = run.state
            act = state.act
            assert act is not None  # made when the run was queued
            self.timeline.notices.append((run.job, execution))
            _discard(act.runs, run.run_id)  # counted since its batch was taken
            if not state.registered:
                self.timeline.forget_if_idle(state)
        claimed.extendleft(reversed(kept))

    def _drop_taken(self, run: Run) -> None:
        """A run of a batch found on ``claimed`` once the phase left RUNNING (taken, not
        registered, not claimed): it ends NOT_STARTED for the halt's reason, as the runs still
        queued did (lock not held)."""
        self.hand_over(run, self._halted_run(run, self.clock.now()))

    def _halted_run(self, run: Run, now: datetime) -> Execution:
        """The report of `run`, taken in a batch and never started: NOT_STARTED at `now` for
        the halt's reason, as the `run.attempt`th try of its slot (as `_ask` reports one)."""
        return Execution.not_started(
            run.job.name, run.run_id, run.slot, now, self._halted, run.trigger, run.attempt
        )

    def open_run(self, run: Run) -> RunContext:
        """Make the context of a run just registered as running, with the stops asked for so
        far (read after writing it: see the module notes)."""
        job = run.job
        # `run.attempt`: above 1 for a retry (see `ready.SlotTrigger`).
        ctx = RunContext(
            job, run.run_id, run.slot, run.trigger, created=run.due, node=self.node,
            attempt=run.attempt,
        )  # fmt: skip
        run.set_context(ctx)
        reason = run.stop_reason
        act = run.state.act
        assert act is not None  # made when the run was queued
        if reason is None and act.stops != run.stops_seen:
            reason = act.stop_reason
        if reason is None:
            reason = self.stop_all
        if reason is not None:
            ctx.stop(reason)
        return ctx

    def run(self, run: Run, hand_off: bool = True) -> bool:
        """Execute a taken, registered run and report it (lock not held). Returns True
        when the run was given up meanwhile (`give_up`): nothing left to do for it here.

        The run stops counting as running (for `executing`, `stop_runs`, max_instances)
        before ``on_finished`` is called. With `hand_off`, while other runs wait to start the
        report of a short run goes to the notice thread, and this thread goes on to start
        them (after a longer run, reporting here costs less than waking that thread).
        """
        job = run.job
        run_id = run.run_id
        try:
            answer = run.answer  # set when claimed together with another run
            if answer is None:
                answer = self._claim_run(run)
            if answer is False:
                return False  # another node took it: dropped, without a report
            if answer is True:
                assert run.ctx is not None  # made when it was claimed
                if (done := self.detached.execute(run, run.ctx)) is None:
                    return False  # detached: reported when it ends
                execution = done
            else:  # the claim raised: the run ends NOT_STARTED
                execution = answer
        except BaseException as exc:
            log.exception("run %s of job %r: execute raised", run_id, job.name)
            execution = _failed(run, exc, self.clock.now())
        if self._given_up and run_id in self._given_up:
            with self.lock:
                self._given_up.discard(run_id)
            return True  # reported by `give_up` already
        # A run whose lost finish would be rerun is reported here, its finish committed
        # before its report (`NodeKeeper.record`): the workers' commits share transactions,
        # where the notice thread would write them one after the other.
        if (
            hand_off
            and (self.ready.waiting or self.claimed)
            and self._phase == RUNNING
            and job.on_node_loss != "rerun"
            and _short(execution)
        ):
            self.hand_over(run, execution)  # runs wait to start: they go first
        else:
            self._report_here(run, execution)
        return False

    def hand_over(self, run: Run, execution: Execution) -> None:
        """Have the notice thread report `run`, ended (lock not held): a run ended while
        others wait to start, or a detached run (an async job) that ended."""
        if self._given_up and run.run_id in self._given_up:  # a detached run, given up
            with self.lock:
                self._given_up.discard(run.run_id)
            return  # reported by `give_up` already
        state = run.state
        act = state.act
        assert act is not None  # made when the run was queued
        # Appended before the run leaves `running`: busy() sees one or the other.
        self.timeline.notices.append((run.job, execution))
        self.running.pop(run.run_id, None)
        _discard(act.runs, run.run_id)
        self.notices.wake()
        if not state.registered:
            with self.lock:
                self.timeline.forget_if_idle(state)

    def _report_here(self, run: Run, execution: Execution) -> None:
        """Report `run`, ended, in this thread (lock not held)."""
        run_id = run.run_id
        state = run.state
        act = state.act
        assert act is not None  # made when the run was queued
        reporting = self.reporting
        reporting.add(run_id)
        self.running.pop(run_id, None)
        _discard(act.runs, run_id)
        self.report(run.job, execution)
        reporting.discard(run_id)
        if not state.registered or self._quiet_waiters:
            with self.lock:
                self.timeline.forget_if_idle(state)
                self.wake_if_quiet()

    # -- claims ---------------------------------------------------------------------------

    def claim_with(self, claim: ClaimFn | None) -> None:
        """From now on, ask `claim(job, ctx)` right before each run starts (lock held)."""
        self._claim = claim

    def claim_together_with(self, claim_many: ClaimManyFn) -> None:
        """From now on, a worker that takes a run while others wait to start claims up to
        `BATCH` of them with one `claim_many` (see the module notes; lock held)."""
        self._claim_many = claim_many

    def confirm_with(self, confirm: ClaimFn) -> None:
        """From now on, a run whose slot was claimed ahead starts once `confirm(job, ctx)`
        says True, without being claimed again (lock held)."""
        self._confirm = confirm

    def _claim_run(self, run: Run) -> bool | Execution:
        """The answer on `run`, registered: True (run it), False (dropped: another node took
        it), or the Execution it ends with (its claim failed); its context is made."""
        claim = self._claim
        if claim is None:  # (without a claim, this test is all it costs)
            self.open_run(run)
            return True
        if run.ahead is not None and self._confirm is not None:
            return self._claimed_ahead(run, self._confirm, claim)
        ctx = self.open_run(run)
        if self._claim_many is not None and self.ready.waiting and not _alone(run):
            return self._claim_together(run, self._claim_many)
        return self._ask(claim, run, ctx)

    def _ask(self, claim: ClaimFn, run: Run, ctx: RunContext) -> bool | Execution:
        """Ask `claim` whether this node runs `run` (lock not held). True: go ahead. False:
        another node took it; the run is dropped here (no longer running, not reported). An
        exception: logged, and the run's report, NOT_STARTED "claim failed: …"."""
        try:
            answer: bool | Exception = claim(run.job, ctx)
            if answer is True:
                return True  # the common answer: nothing to count or undo (`_outcome`)
        except ClaimRefused as exc:
            answer = exc
        except Exception as exc:
            told = isinstance(exc, ClaimError)  # its claimer logged why: no traceback
            log.log(
                logging.INFO if told else logging.ERROR,
                "run %s of job %r: claim raised%s",
                run.run_id,
                run.job.name,
                f": {exc}" if told else "",
                exc_info=not told,
            )
            answer = exc
        return self._outcome(run, answer, counted=True)

    def _claimed_ahead(self, run: Run, confirm: ClaimFn, claim: ClaimFn) -> bool | Execution:
        """The answer on `run`, registered, whose slot was claimed ahead (``run.ahead``; see
        `ahead`), as `_ask` gives it: won, it goes ahead once `confirm` agrees (this node still
        holds its lease); another node's, it is dropped; a claim that failed, or was answered
        due (its job was busy then), is made now."""
        batch, index = run.ahead  # type: ignore[misc]
        answer = batch.answer(index)
        if answer is False:
            return self._outcome(run, False, counted=True)
        ctx = self.open_run(run)
        return self._ask(confirm if answer is True else claim, run, ctx)

    def _claim_together(self, first: Run, claim_many: ClaimManyFn) -> bool | Execution:
        """Claim `first` (registered, its context made) with up to `BATCH` - 1 more runs
        waiting to start; returns `first`'s answer, as `_ask` does (lock not held)."""
        runs = [first, *self._take_more(BATCH - 1)]
        try:
            answers = claim_many([(run.job, run.ctx) for run in runs])  # type: ignore[misc]
        except Exception as exc:
            answers = [exc] * len(runs)
        failed = answers[0]
        if isinstance(failed, ClaimError):  # its claimer logged why: no traceback
            log.info("claims of %d runs raised: %s", len(runs), failed)
        elif isinstance(failed, Exception) and not isinstance(failed, ClaimRefused):
            log.error("claims of %d runs raised", len(runs), exc_info=failed)
        mine = self._outcome(first, answers[0], counted=True)
        kept: list[Run] = []
        for run, answer in zip(runs[1:], answers[1:], strict=True):
            outcome = self._outcome(run, answer, counted=False)
            if outcome is not False:
                run.set_answer(outcome)
                kept.append(run)
        if kept:
            with self.lock:
                self.claimed.extend(kept)
                self.wake(len(kept))
            self.spawn()
        return mine

    def _take_more(self, most: int) -> list[Run]:
        """Take up to `most` ready runs to claim together, registered and their contexts made;
        those whose slots were claimed ahead go to ``claimed`` for the next free workers
        (`_claimed_ahead`), and so do runs whose claim may wait (`overlap.waits`: alone)."""
        runs: list[Run] = []
        aside: list[Run] = []
        ready = self.ready
        running = self.running
        ident = threading.get_ident()
        self.taking.add(ident)
        try:
            while len(runs) < most:
                run = ready.take()
                if run is None:
                    break
                running[run.run_id] = run
                if run.ahead is not None or _alone(run):
                    aside.append(run)
                    continue
                self.open_run(run)
                runs.append(run)
        finally:
            self.taking.discard(ident)
        if aside:
            with self.lock:
                self.claimed.extend(aside)
                self.wake(len(aside))
        return runs

    def _outcome(self, run: Run, answer: bool | Exception, *, counted: bool) -> bool | Execution:
        """What the claim's `answer` means for `run` (see `_ask`). `counted`: the run was
        counted as started by the worker that took it (taken back off unless it runs); a run
        claimed together with it is counted when a worker takes it from ``claimed``, which a
        dropped one never is."""
        if answer is True:
            return True
        job = run.job
        if isinstance(answer, Exception):  # logged by the caller
            with self.lock:  # counted as started by whoever takes it: taken back off
                self.unclaimed += 1
            if isinstance(answer, ClaimRefused):
                reason = answer.reason
            else:
                reason = f"claim failed: {type(answer).__name__}: {answer}"
            return Execution.not_started(
                job.name, run.run_id, run.slot, self.clock.now(), reason, run.trigger,
                run.attempt,
            )  # fmt: skip
        log.debug("run %s of job %r: claimed by another node, not run here", run.run_id, job.name)
        act = run.state.act
        assert act is not None  # made when the run was queued
        self.running.pop(run.run_id, None)
        act.runs.remove(run.run_id)
        with self.lock:
            if counted:
                self.unclaimed += 1
            self.claims_refused += 1
            self.timeline.forget_if_idle(run.state)
            self.wake_if_quiet()
        return False

    # -- a run's end ---------------------------------------------------------------------

    def give_up(self, job: Job, run_id: str, execution: Execution) -> None:
        """Run `run_id` ignored its stop and was given up with its final `execution` (lock
        not held; from the runner's watchdog): report it now, and let its worker go."""
        with self.lock:
            run = self.running.pop(run_id, None)
            if run is None:
                return  # it returned meanwhile, and its worker reports it
            self._given_up.add(run_id)
            self.detached.forget(run_id)
            act = run.state.act
            if act is not None:
                _discard(act.runs, run_id)
            thread = self._thread_of.get(run_id)
            if thread is not None and thread in self.workers:
                self.workers.discard(thread)  # no longer counts: a new worker may start
                self._stuck.add(thread)
            self.timeline.notices.append((job, execution))
            self.notices.notify()
            if self.ready.waiting:
                self.wake(len(self.ready.waiting))
            self.wake_quiet()
        self.spawn()

    def join_worker(self, worker: threading.Thread) -> None:
        """Wait until `worker` has ended, or was left stuck in a given-up run (lock not held):
        a shutdown does not wait for such a run."""
        with self.lock:
            while worker in self.workers and worker.is_alive():
                if worker is threading.current_thread():
                    return
                self._quiet.wait()
            if worker in self._stuck:
                return
        join(worker)

    def report(self, job: Job, execution: Execution) -> None:
        """``on_finished(job, execution)``; an exception is logged (lock not held)."""
        try:
            self._on_finished(job, execution)
        except BaseException:
            log.exception("on_finished for run %s of job %r raised", execution.run_id, job.name)
        if self.timeline.held:  # a run waits for this job's end (`overlap`)
            self._release_held(job.name)

    def report_many(self, notices: Sequence[tuple[Job, Execution]]) -> None:
        """`report` for each of `notices`, in order, with one ``on_finished_many`` call when
        the owner gave one (the notice thread's batches: a burst's finishes recorded, marked
        and told per batch, not per run). What it raises is logged, as `report` logs what
        ``on_finished`` raises: each run still has its one report (lock not held)."""
        many = self._on_finished_many
        if many is None or len(notices) == 1:
            for job, execution in notices:
                self.report(job, execution)
            return
        try:
            many(notices)
        except BaseException:
            log.exception("on_finished for a batch of %d runs raised", len(notices))
        if self.timeline.held:  # runs wait for these jobs' ends (`overlap`)
            for name in dict.fromkeys(job.name for job, _ in notices):
                self._release_held(name)

    def _release_held(self, name: str) -> None:
        """A run of job `name` was reported: queue its held run, if any, and wake a worker for
        it (lock not held; called only while some run is held)."""
        with self.lock:
            if self.timeline.release(name, self.clock.now()):
                self.wake(1)
            if self.timeline.notices:
                self.notices.notify()
        self.spawn()

    def stop_runs(self, name: str | None, reason: str) -> int:
        """Stop the running runs of job `name` (None: every run) with `reason`; returns how
        many. Queued runs are not touched. Lock not held."""
        with self.lock:
            if name is None:
                self.stop_all = reason
            else:
                state = self.timeline.states.get(name)
                if state is not None:
                    state.activity().count_stop(reason)
            runs = [r for r in list(self.running.values()) if name is None or r.job.name == name]
            for run in runs:
                run.note_stop(reason)
            contexts = [run.ctx for run in runs]  # read after the writes: see the module notes
        for ctx in contexts:
            if ctx is not None:
                ctx.stop(reason)
        return len(runs)

    def stop_run(self, run_id: str, reason: str) -> bool:
        """Stop the running run `run_id` with `reason`; False when no run of that id runs
        here. Lock not held."""
        with self.lock:
            run = self.running.get(run_id)
            if run is None:
                return False
            run.note_stop(reason)
            ctx = run.ctx  # read after the write: see the module notes
        if ctx is not None:
            ctx.stop(reason)
        return True

    def executing(self) -> list[Execution]:
        """Snapshots of the running runs, by run id (lock not held)."""
        snapshots = []
        for run_id, run in sorted(list(self.running.items())):
            ctx = run.ctx
            if ctx is not None:
                snapshots.append(ctx.snapshot())
            else:  # claimed a moment ago: not started yet
                snapshots.append(
                    Execution(
                        run.job.name,
                        run_id,
                        run.slot,
                        run.due,
                        trigger=run.trigger,
                        attempt=run.attempt,
                    )
                )
        return snapshots

    def drain(self) -> int:
        """Deliver every notice and run every ready run in the calling thread, in order."""
        count = 0
        ident = threading.get_ident()
        notices = self.notices
        waiting_notices = self.timeline.notices
        claimed = self.claimed
        taking = self.taking
        while True:
            if waiting_notices:  # the lock only when there is a notice to take
                with self.lock:
                    notice = notices.take()
                if notice is not None:
                    notices.deliver(notice)
                    count += 1
                    continue
            # Taken without the lock, as a worker takes a run (see `ready`).
            taking.add(ident)
            run: Run | None = None
            if claimed:
                try:
                    run = claimed.popleft()
                except IndexError:  # a worker took the last one
                    run = None
            if run is None:
                run = self.ready.take()
            if run is not None:
                self.running[run.run_id] = run
            taking.discard(ident)
            if run is None:
                if waiting_notices:
                    continue  # one came meanwhile: delivered before returning
                return count
            self._started[ident] = self._started.get(ident, 0) + 1
            self.run(run, hand_off=False)
            count += 1

    def close(self) -> None:
        """After the workers ended: phase CLOSED, the notice thread finishes and is joined,
        and any notice left is delivered here (lock not held)."""
        with self.lock:
            self._closed()
            notifier = self.notices.close()
        join(notifier)
        self.notices.deliver_closed()


def _failed(run: Run, exc: BaseException, now: datetime) -> Execution:
    """The report of `run` when running it raised in the scheduler: FAILED / ABNORMAL."""
    ctx = run.ctx
    if ctx is not None:
        base = ctx.snapshot()
    else:
        base = Execution(
            run.job.name, run.run_id, run.slot, now, trigger=run.trigger, attempt=run.attempt
        )
    return replace(
        base,
        ended=base.ended or now,
        event=Event.FAILED,
        result=SchedulerResult.ABNORMAL,
        error=f"{type(exc).__name__}: {exc}",
        reason="scheduler error",
    )


def _short(execution: Execution) -> bool:
    """Whether a run was short enough for its report to be handed off (see `WorkerPool.run`).

    A report costs about 10 µs here; handing it over costs two context switches and a
    contended GIL, worth it only when runs are that short (a burst of trivial runs: the
    starts go first). After a run of 0.2 ms or more, reporting it in place costs under 5%.
    """
    ended = execution.ended
    return ended is None or ended - execution.started < _HAND_OFF_BELOW


def _discard(ids: list[int | str], run_id: str) -> None:
    """Remove `run_id` from a job's list of runs (one C call: atomic under the GIL)."""
    ids.remove(run_id)


def _alone(run: Run) -> bool:
    """Whether `run`'s claim may wait for its busy job on other nodes (a slot of ``overlap:
    queue`` or ``replace``, a rerun after a node loss: `cluster.limits`), so that it is
    claimed alone, never holding up a batch of others' claims."""
    return run.trigger == "rerun" or waits(run.job)
