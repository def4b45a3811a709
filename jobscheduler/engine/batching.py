"""Claims of runs in the state store, one by one or several together, for the `WorkerPool`.

A run is claimed right before it starts (see `JobProcessor`). With a store in another process
or on another machine, a claim each makes every run of a burst wait for a commit of its own:
1,000 slots due at once behind 10 workers wait for ~100 commits in a row. So a worker that
takes a run while others wait to start (`claim_together`) takes up to `BATCH` of them, makes
their contexts, and claims them all with one ``claim_many`` (one transaction); it runs the
first and leaves the others, each with its answer (`Run.verdict`), on the pool's ``claimed``
queue, where the next free workers take them before anything in the ready queue.

The order of a claim's steps is the one `WorkerPool.run` follows for a single run: the run is
registered as running, then its context is made and the stops asked for so far are read (see
`workers`), then the store is asked. A run another node took is dropped without a report,
as a single run's is.

A run whose slot was claimed before it was due (`ahead`) is not claimed again: `claimed_ahead`
reads its claim's answer, and a worker claiming a batch leaves such runs to the others.

What a crash costs: the runs a node claimed and had not started yet (at most a batch per busy
worker) are recorded as abandoned when the node is taken over (see docs/state.md).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from ..clock import Clock
from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.job import Job
from ..runners.context import RunContext
from .ready import ReadyQueue, Run
from .timeline import RunQueue

__all__ = ["BATCH", "ClaimFn", "ClaimManyFn", "ask", "claim_together", "claimed_ahead", "failed"]

log = logging.getLogger("jobscheduler.processor")

# Runs claimed together at most. A batch's first run waits for the whole batch's claim: 64
# rows are one statement on PostgreSQL (~0.5 ms here), and 1,000 runs are 16 batches, which
# the workers' concurrent claims share commits for (`state.sqlbatch`).
BATCH = 64

ClaimFn = Callable[[Job, RunContext], bool]
# Answers in order: True (run it), False (another node runs it), or the claim's exception.
ClaimManyFn = Callable[[Sequence[tuple[Job, RunContext]]], list[bool | Exception]]


class WorkerPool(Protocol):
    """What of `workers.WorkerPool` the claims use (see there)."""

    lock: threading.Lock
    queue: RunQueue
    ready: ReadyQueue
    clock: Clock
    running: dict[str, Run]
    claiming: set[int]
    claimed: deque[Run]
    unclaimed: int
    claims_refused: int

    def open_run(self, run: Run) -> RunContext: ...
    def wake(self, count: int) -> None: ...
    def spawn(self) -> None: ...
    def settle(self) -> None: ...


def ask(pool: WorkerPool, claim: ClaimFn, run: Run, ctx: RunContext) -> bool | Execution:
    """Ask `claim` whether this node runs `run` (lock not held). True: go ahead. False:
    another node took it; the run is dropped here (no longer running, not reported). An
    exception: logged, and the run's report, NOT_STARTED "claim failed: …"."""
    try:
        answer: bool | Exception = claim(run.job, ctx)
    except Exception as exc:
        log.error("run %s of job %r: claim raised", run.run_id, run.job.name, exc_info=True)
        answer = exc
    return _verdict(pool, run, answer, counted=True)


def claimed_ahead(pool: WorkerPool, run: Run, confirm: ClaimFn, claim: ClaimFn) -> bool | Execution:
    """The verdict on `run`, registered, whose slot was claimed ahead (``run.ahead``; see
    `ahead`), as `ask` gives it: won, it goes ahead once `confirm` agrees (this node still
    holds its lease); another node's, it is dropped; a claim that failed is made now."""
    batch, index = run.ahead  # type: ignore[misc]
    answer = batch.answer(index)
    if answer is False:
        return _verdict(pool, run, False, counted=True)
    ctx = pool.open_run(run)
    return ask(pool, confirm if answer is True else claim, run, ctx)


def claim_together(pool: WorkerPool, first: Run, claim_many: ClaimManyFn) -> bool | Execution:
    """Claim `first` (registered, its context made) with up to `BATCH` - 1 more runs waiting
    to start; returns `first`'s verdict, as `ask` does (lock not held)."""
    runs = [first]
    aside: list[Run] = []  # claimed ahead: for the next free workers (`claimed_ahead`)
    ready = pool.ready
    running = pool.running
    ident = threading.get_ident()
    pool.claiming.add(ident)
    try:
        while len(runs) < BATCH:
            run = ready.claim()
            if run is None:
                break
            running[run.run_id] = run
            if run.ahead is not None:
                aside.append(run)
                continue
            pool.open_run(run)
            runs.append(run)
    finally:
        pool.claiming.discard(ident)
    if aside:
        with pool.lock:
            pool.claimed.extend(aside)
            pool.wake(len(aside))
    try:
        answers = claim_many([(run.job, run.ctx) for run in runs])  # type: ignore[misc]
    except Exception as exc:
        answers = [exc] * len(runs)
    if isinstance(answers[0], Exception):
        log.error("claims of %d runs raised", len(runs), exc_info=answers[0])
    mine = _verdict(pool, first, answers[0], counted=True)
    kept: list[Run] = []
    for run, answer in zip(runs[1:], answers[1:], strict=True):
        verdict = _verdict(pool, run, answer, counted=False)
        if verdict is not False:
            run.verdict = verdict
            kept.append(run)
    if kept:
        with pool.lock:
            pool.claimed.extend(kept)
            pool.wake(len(kept))
        pool.spawn()
    return mine


def _verdict(
    pool: WorkerPool, run: Run, answer: bool | Exception, *, counted: bool
) -> bool | Execution:
    """What `answer` means for `run` (see `ask`). `counted`: the run was counted as started
    by the worker that took it (taken back off unless it runs); a run claimed together with
    it is counted when a worker takes it from ``claimed``, which a dropped one never is."""
    if answer is True:
        return True
    job = run.job
    if isinstance(answer, Exception):  # logged by the caller
        with pool.lock:  # counted as started by whoever takes it: taken back off
            pool.unclaimed += 1
        return Execution.not_started(
            job.name,
            run.run_id,
            run.slot,
            pool.clock.now(),
            f"claim failed: {type(answer).__name__}: {answer}",
            run.trigger,
        )
    log.debug("run %s of job %r: claimed by another node, not run here", run.run_id, job.name)
    act = run.state.act
    assert act is not None  # made when the run was queued
    pool.running.pop(run.run_id, None)
    act.runs.remove(run.run_id)
    with pool.lock:
        if counted:
            pool.unclaimed += 1
        pool.claims_refused += 1
        pool.queue.forget_if_idle(run.state)
        pool.settle()
    return False


def failed(pool: WorkerPool, run: Run, exc: BaseException) -> Execution:
    """The report of `run` when running it raised in the scheduler: FAILED / ABNORMAL."""
    now = pool.clock.now()
    ctx = run.ctx
    if ctx is not None:
        base = ctx.snapshot()
    else:
        base = Execution(run.job.name, run.run_id, run.slot, now, trigger=run.trigger)
    return replace(
        base,
        ended=base.ended or now,
        event=Event.FAILED,
        result=SchedulerResult.ABNORMAL,
        error=f"{type(exc).__name__}: {exc}",
        reason="scheduler error",
    )
