"""Running an async INTERNAL job — a coroutine function, or a class whose ``run()`` is
``async def`` — on the runner's event loop (`eventloop`), without holding a thread.

- The worker thread that starts the run finds the job's function or class (`internal.resolve`),
  creates the instance (its constructor runs there), hands the coroutine to the loop and goes
  on: it does not wait. The run ends when the coroutine does; `finish` is then called, in the
  loop's thread, with the run's `Outcome`.
- It is SUCCESSFUL when the coroutine returns, FAILED when it raises (``SystemExit``
  included, as for a sync job).
- A stop (timeout, ``stop_job``, ``shutdown(wait=False)``, ``overlap: replace``) cancels its
  task: the job sees ``asyncio.CancelledError`` at the ``await`` it is in, and the run ends
  FAILED / ABNORMAL with the stop's reason, whatever the job does with the cancellation. A job
  that swallows it and goes on is given up `kill_grace` after the stop, like a sync run that
  ignores its stop (`internal.Abandon`); its task runs on until it ends or the loop closes. An
  async class's ``stop()`` is not called: the cancellation is its stop.
- The coroutine runs in a task of its own whose context holds the run: `current_run()` works
  in it, and in the tasks it creates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..model.event import Event
from ..model.execution import SchedulerResult
from .context import Outcome
from .external import describe
from .identity import enter
from .internal import Abandon, call_args, describe_target

if TYPE_CHECKING:
    from ..model.job import Job
    from .context import RunContext
    from .eventloop import EventLoopThread

__all__ = ["AsyncRun"]

log = logging.getLogger("jobscheduler.runners")

_SUCCESS = Outcome(Event.SUCCESSFUL, SchedulerResult.NORMAL)


class AsyncRun:
    """One async run: created and `begin`-ed in a worker thread, then lives on the loop."""

    __slots__ = (
        "_abandon",
        "_exit",
        "_finish",
        "_job",
        "_loop",
        "_make",
        "_stopped",
        "_task",
        "ctx",
    )

    def __init__(
        self,
        job: Job,
        ctx: RunContext,
        loop: EventLoopThread,
        finish: Callable[[Outcome], None],
        abandon: Abandon | None,
    ) -> None:
        self._job = job
        self.ctx = ctx
        self._loop = loop
        self._finish = finish
        self._abandon = abandon
        self._make: Callable[[], Awaitable[object]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False  # a stop came before the task was made (loop thread only)
        self._exit: str | None = None  # the job raised SystemExit (kept off the loop)

    def begin(self, target: Any) -> Outcome | None:
        """Create the instance (for a class) and hand the run to the loop (worker thread).
        Returns the NOT_STARTED Outcome of a run that could not start, else None: `finish`
        will be called with the Outcome once the coroutine ended."""
        job, ctx = self._job, self.ctx
        if isinstance(target, type):
            try:
                instance = target(**call_args(job, ctx))
            except (Exception, SystemExit) as exc:
                error = describe(exc)
                return Outcome.not_started(f"cannot create {describe_target(job)}: {error}", error)
            self._make = instance.run
        else:
            args = call_args(job, ctx)
            self._make = lambda: target(**args)
        early_stop = ctx._attach_unless_stopped(self._stop)
        if early_stop is not None:
            return Outcome.not_started(early_stop)
        self._loop.call_soon(self._launch)
        return None

    def _stop(self, reason: str) -> None:
        """The run's stopper (any thread): cancel the task, in the loop's thread."""
        if self._abandon is not None:
            self._abandon.stopped()
        log.info("stopping job %r (%s): cancelling it", self._job.name, reason)
        self._loop.call_soon(self._cancel)

    def _cancel(self) -> None:
        if self._task is None:
            self._stopped = True  # the stop overtook `_launch`: it cancels at once
        else:
            self._task.cancel()

    def _launch(self) -> None:
        task = asyncio.get_running_loop().create_task(self._main())
        self._task = task
        task.add_done_callback(self._done)
        if self._stopped:
            task.cancel()

    async def _main(self) -> None:
        # Set in the task's own context (a copy, gone with the task): nothing to reset.
        enter(self.ctx)
        try:
            assert self._make is not None  # set by `begin`
            await self._make()
        except SystemExit as exc:  # a task re-raises it out of the loop: kept here instead
            self._exit = describe(exc)

    def _done(self, task: asyncio.Task[None]) -> None:
        """The coroutine ended (loop thread): make the Outcome and hand it to `finish`."""
        job = self._job
        error = self._exit
        cancelled = task.cancelled()
        if not cancelled:
            exc = task.exception()
            if exc is not None:
                error = describe(exc)
                log.warning("job %r raised %s", job.name, error, exc_info=exc)
        if self._abandon is not None:
            self._abandon.returned()
        stop_reason = self.ctx._settle()
        if stop_reason is not None:
            outcome = Outcome(
                Event.FAILED, SchedulerResult.ABNORMAL, reason=stop_reason, error=error
            )
        elif cancelled:
            outcome = Outcome(Event.FAILED, SchedulerResult.NORMAL, reason="cancelled")
        elif error is not None:
            reason = f"raised {error.partition(':')[0]}"
            outcome = Outcome(Event.FAILED, SchedulerResult.NORMAL, reason=reason, error=error)
        else:
            outcome = _SUCCESS
        try:
            self._finish(outcome)
        except Exception:
            log.exception("reporting run %s of job %r failed", self.ctx.run_id, job.name)
