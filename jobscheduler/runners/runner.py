"""The `Runner`: carries out one run of a job, blocking, and writes its `Execution`.

``Runner.execute(job, ctx)`` runs in the caller's (worker) thread until the run is over and
returns the final `Execution`, with exactly one event and a scheduler result:

========================================  ===========  =========  ==============================
what happened                             event        result     reason
========================================  ===========  =========  ==============================
exit code 0 / ``run()`` returned          SUCCESSFUL   NORMAL     —
non-zero exit code                        FAILED       NORMAL     ``exit code 3``
killed by a signal (not by a stop)        FAILED       NORMAL     ``killed by signal SIGSEGV``
``run()`` raised                          FAILED       NORMAL     ``raised ValueError``
ScheduledEnable's own status              (its own)    NORMAL     see `jobscheduler.protocols`
timeout / ``ctx.stop(reason)``            FAILED       ABNORMAL   ``timed out``, the stop reason
cannot launch / import / create           NOT_STARTED  ABNORMAL   ``command not found: x`` …
stopped before it started                 NOT_STARTED  ABNORMAL   the stop reason
a bug in the runner itself                FAILED       ABNORMAL   ``runner error``
========================================  ===========  =========  ==============================

``execute`` never raises (``KeyboardInterrupt`` aside). The job's ``timeout`` is enforced by
one `Watchdog` thread per Runner, started at the first need: on expiry it calls
``ctx.stop("timed out")``. An internal run that ignores its stop is given up `kill_grace`
after it (FAILED / ABNORMAL "did not stop", reported through the hook of `when_given_up`;
its call runs on in its thread, which `execute` then returns the given-up Execution to). How
external and internal runs are carried out and stopped:
`jobscheduler.runners_external`, `jobscheduler.runners_internal`.

``Runner.start(job, ctx, done)`` is `execute` for a caller that need not wait: an async
internal job (`asyncjob`) is handed to the Runner's event loop thread (`eventloop`, started at
the first such run) and ``done(execution)`` is called from there when it ends; any other run
is executed in the calling thread and its Execution returned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from ..clock import Clock
from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.job import Job, JobType
from .context import Outcome, RunContext
from .eventloop import EventLoopThread
from .external import describe, run_external
from .identity import enter, leave
from .internal import (
    SUCCESS,
    Abandon,
    is_async,
    is_plain_function,
    resolve,
    run_function,
    run_internal,
)
from .watchdog import Timer, Watchdog

__all__ = ["RunContext", "Runner"]

log = logging.getLogger("jobscheduler.runners")

# A global: on Python 3.11 an Enum member's look-up in a function costs ~0.2 µs, a global's
# ~0.03, and every run asks it.
_INTERNAL = JobType.INTERNAL


class Runner:
    """Runs jobs, one `execute` call per run, from any number of threads at once.

    Starts no thread until a run needs a timeout. `close` ends the watchdog thread: the
    timeouts of runs still going are dropped, but SIGKILL steps already under way still happen
    (the thread ends after the last of them), so ``stop`` every run, then ``close``, never
    leaves a process that ignores SIGTERM behind. A closed Runner can still be used; it starts
    a new watchdog when needed.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._watchdog: Watchdog | None = None
        self.loop = EventLoopThread()  # where async jobs run (see the module notes)
        self._on_given_up: Callable[[Job, RunContext, Execution], None] | None = None

    def execute(self, job: Job, ctx: RunContext, target: object = None) -> Execution:
        """Run `job` to its end in this thread and return the final Execution; never raises.
        `target`: an internal job's class or function, found already (`start`)."""
        return self._execute(job, ctx, target, None)

    def _execute(
        self,
        job: Job,
        ctx: RunContext,
        target: object,
        function: Callable[..., object] | None,
    ) -> Execution:
        """`execute`; with `function` (a plain synchronous function, `ctx` this thread's
        current run already: `start`), that function is called without `run_internal`'s
        second `enter` and look-ups (the usual run's path)."""
        now = self.clock.now
        started = now()
        try:
            early_stop = ctx._begin(started)
        except RuntimeError as exc:
            # Not this context's final Execution: it belongs to the run that used it first.
            log.error("%s", exc)
            return _execution(job, ctx, started, now(), Outcome.not_started(str(exc)))
        if early_stop is not None:
            return self._finish(job, ctx, started, Outcome.not_started(early_stop))
        timer: Timer | None = None
        try:
            if job.timeout is not None:
                timer = self.schedule(job.timeout, lambda: ctx.stop("timed out"))
            if function is not None:
                outcome = run_function(job, ctx, function, self)
            elif job.type is _INTERNAL:
                outcome = run_internal(job, ctx, self.clock, self, target)
            else:
                outcome = run_external(job, ctx, self._schedule_kill)
            # Given up while it ran (an internal job that was stopped, so never SUCCESS):
            # that Execution is the final one.
            if outcome is not SUCCESS and job.type is _INTERNAL and ctx.finished:
                return ctx.snapshot()
        except Exception as exc:
            outcome = self._runner_error(job, ctx, exc)
        finally:
            if timer is not None:
                timer.cancel()
        return self._finish(job, ctx, started, outcome)

    def start(
        self, job: Job, ctx: RunContext, done: Callable[[Execution], None]
    ) -> Execution | None:
        """Start the run: an async job goes to the event loop, and None is returned (`done`
        gets the final Execution, from the loop's thread); any other run is executed here and
        its final Execution returned (`done` is not called). Never raises."""
        if job.type is not _INTERNAL:
            return self.execute(job, ctx)
        try:
            token = enter(ctx)  # an import the job's module does sees its run, as in `execute`
            try:
                target = resolve(job)
                if is_plain_function(target):  # the usual job: called in this one `enter`
                    return self._execute(job, ctx, None, target)
            finally:
                leave(token)
            if isinstance(target, Outcome) or not is_async(target):
                return self.execute(job, ctx, None if isinstance(target, Outcome) else target)
            return self._start_async(job, ctx, target, done)
        except Exception as exc:
            outcome = self._runner_error(job, ctx, exc)
            return self._finish(job, ctx, ctx.started or self.clock.now(), outcome)

    def _runner_error(self, job: Job, ctx: RunContext, exc: Exception) -> Outcome:
        """The outcome of a run the runner itself failed (logged; the context settled)."""
        log.exception("run %s of job %r: runner error", ctx.run_id, job.name)
        ctx._settle()
        return Outcome(
            Event.FAILED, SchedulerResult.ABNORMAL, reason="runner error", error=describe(exc)
        )

    def _start_async(
        self, job: Job, ctx: RunContext, target: object, done: Callable[[Execution], None]
    ) -> Execution | None:
        started = self.clock.now()
        try:
            early_stop = ctx._begin(started)
        except RuntimeError as exc:
            log.error("%s", exc)
            return _execution(job, ctx, started, self.clock.now(), Outcome.not_started(str(exc)))
        if early_stop is not None:
            return self._finish(job, ctx, started, Outcome.not_started(early_stop))
        timer: Timer | None = None
        abandon = Abandon(job, ctx, self)

        def finish(outcome: Outcome) -> None:  # in the loop's thread, once it ended
            if timer is not None:
                timer.cancel()
            # After `abandon.returned()`: given up already, or never will be.
            done(ctx.snapshot() if ctx.finished else self._finish(job, ctx, started, outcome))

        from .asyncjob import AsyncRun  # here: asyncio is loaded by the first async run only

        run = AsyncRun(job, ctx, self.loop, finish, abandon)
        if job.timeout is not None:
            timer = self.schedule(job.timeout, lambda: ctx.stop("timed out"))
        outcome = run.begin(target)
        if outcome is None:
            return None
        if timer is not None:
            timer.cancel()
        return self._finish(job, ctx, started, outcome)

    def schedule(
        self, delay: timedelta, callback: Callable[[], None], *, essential: bool = False
    ) -> Timer:
        """Call `callback` after `delay` on this Runner's clock, from its watchdog thread.

        An `essential` callback (a SIGKILL step) still runs after `close`.
        """
        with self._lock:
            if self._watchdog is None:
                self._watchdog = Watchdog(self.clock)
            watchdog = self._watchdog
        return watchdog.schedule(delay, callback, essential=essential)

    def _schedule_kill(self, delay: timedelta, callback: Callable[[], None]) -> Timer:
        return self.schedule(delay, callback, essential=True)

    def _give_up(self, job: Job, ctx: RunContext) -> Execution:
        """The final Execution of a run that ignored its stop (see `run_internal`)."""
        log.error(
            "run %s of job %r did not stop within its kill_grace (%s) after %s: given up, "
            "reported FAILED; its call goes on in its thread, whose result will be ignored",
            ctx.run_id,
            job.name,
            job.kill_grace,
            ctx.stop_reason,
        )
        started = ctx.started or self.clock.now()
        outcome = Outcome(Event.FAILED, SchedulerResult.ABNORMAL, reason="did not stop")
        return self._finish(job, ctx, started, outcome)

    def when_given_up(self, hook: Callable[[Job, RunContext, Execution], None]) -> None:
        """`hook` is called (from the watchdog thread) with the final Execution of a run
        given up because it ignored its stop, while `execute` still waits in the run's thread:
        the processor reports it and replaces that worker."""
        self._on_given_up = hook

    def _report_given_up(self, job: Job, ctx: RunContext, execution: Execution) -> None:
        hook = self._on_given_up
        if hook is not None:
            try:
                hook(job, ctx, execution)
            except Exception:
                log.exception("reporting run %s of job %r as given up failed", ctx.run_id, job.name)

    @property
    def watchdog(self) -> Watchdog | None:
        """The watchdog, once a run needed one (for tests and status pages)."""
        with self._lock:
            return self._watchdog

    def close(self) -> None:
        """End the watchdog thread and the event loop thread, if any (see the class notes;
        async runs still going are cancelled); idempotent."""
        with self._lock:
            watchdog, self._watchdog = self._watchdog, None
        self.loop.close()
        if watchdog is not None:
            watchdog.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _finish(self, job: Job, ctx: RunContext, started: datetime, outcome: Outcome) -> Execution:
        execution = _execution(job, ctx, started, self.clock.now(), outcome)
        ctx._finish(execution)
        return execution


def _execution(
    job: Job, ctx: RunContext, started: datetime, ended: datetime, outcome: Outcome
) -> Execution:
    # The outcome's fields are exactly the Execution's other fields (tested). A copy of them
    # and seven stores: half the time of a dict display merging them (~0.3 against ~0.6 µs).
    fields = outcome.__dict__.copy()
    fields["job_name"] = job.name
    fields["run_id"] = ctx.run_id
    fields["slot"] = ctx.slot
    fields["started"] = started
    fields["ended"] = ended
    fields["trigger"] = ctx.trigger
    fields["attempt"] = ctx.attempt
    return Execution.from_fields(fields)
