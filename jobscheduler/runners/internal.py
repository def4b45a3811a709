"""Running an INTERNAL job: import ``"package.module:name"`` (or take the function or class
a job defined in code holds) and run it in this thread. Async ones run on the event loop
instead: see `asyncjob`.

- A class is instantiated with the job's ``args`` as keyword arguments (a new instance per
  run) and its ``run()`` is called; see `jobscheduler.protocols` for how a `Schedulable` and a
  `ScheduledEnable` are judged.
- Anything else callable (a function) is called with the job's ``args``; its return value is
  ignored. It is SUCCESSFUL when it returns, FAILED when it raises. It cannot be stopped: a stop
  is logged, the call runs on, and the run is FAILED with the stop's reason when it returns.
- An import error (or any exception while importing), a missing attribute, a class without
  ``run()``, or an exception from the constructor (wrong ``args`` included) is NOT_STARTED /
  ABNORMAL with the reason.

While the run is on (import, creation, ``run()``, waiting for ``is_done()``),
``jobscheduler.current_run()`` in the running thread gives the run's identity (see
`jobscheduler.runners.identity`); outside a run it is None.

The instance's ``stop()`` is called in a short-lived thread of its own, so a slow ``stop()``
never holds up the thread that stopped the run (the watchdog, the processor).

A run that is stopped (timeout, ``stop_job``, shutdown) and whose ``run()`` (or function) has
not returned `kill_grace` later is given up: the `GiveUp` hooks (the `Runner`) make its final
Execution, FAILED / ABNORMAL "did not stop", and report it at once, so its worker can be
replaced and a shutdown need not wait for it. Python cannot end a thread from outside: the
call runs on in its thread, whose result is then ignored. A ScheduledEnable whose ``run()``
returned is not given up this way: its wait for ``is_done()`` ends by itself at `kill_grace`.

``SystemExit`` raised by a job counts as an exception like any other; ``KeyboardInterrupt``
is let through.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from inspect import CO_COROUTINE
from types import FunctionType, MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from ..model.event import Event
from ..model.execution import SchedulerResult
from .context import Outcome
from .external import describe
from .identity import enter, leave

if TYPE_CHECKING:
    from ..clock import Clock
    from ..model.execution import Execution
    from ..model.job import Job
    from .context import RunContext
    from .watchdog import Timer

__all__ = [
    "SUCCESS",
    "Abandon",
    "GiveUp",
    "call_args",
    "describe_target",
    "is_async",
    "is_plain_function",
    "is_scheduled_enable",
    "resolve",
    "run_function",
    "run_internal",
]

log = logging.getLogger("jobscheduler.runners")

_JOB_ERRORS = (Exception, SystemExit)
_FIRST_CHECK = 0.01  # seconds before is_done() is asked again; doubles up to _LAST_CHECK
_LAST_CHECK = 1.0
_PROTOCOL = ("run", "stop", "is_done", "running_status", "message_data")
_EMPTY: Mapping[str, Any] = MappingProxyType({})
SUCCESS = Outcome(Event.SUCCESSFUL, SchedulerResult.NORMAL)  # immutable: shared by every run
_PARSED_MAX = 4096
_parsed: dict[str, tuple[str, tuple[str, ...]]] = {}
_modules = sys.modules


def is_scheduled_enable(instance: object) -> bool:
    """Whether `instance` has every member of `ScheduledEnable`.

    Looked up statically: unlike ``isinstance`` with the runtime protocol, this does not run
    the job's property getters, which may fail before ``run()``.
    """
    for name in _PROTOCOL:
        try:
            inspect.getattr_static(instance, name)
        except AttributeError:
            return False
    return True


class GiveUp(Protocol):
    """What `run_internal` needs to give up on a run that ignores its stop (the `Runner`)."""

    def _schedule_kill(self, delay: timedelta, callback: Callable[[], None]) -> Timer:
        """Call `callback` after `delay`, even after the runner is closed."""
        ...

    def _give_up(self, job: Job, ctx: RunContext) -> Execution:
        """Make and keep (``ctx._finish``) the run's final Execution, "did not stop"."""
        ...

    def _report_given_up(self, job: Job, ctx: RunContext, execution: Execution) -> None:
        """Tell whoever runs the run that it was given up (its thread runs on)."""
        ...


class Abandon:
    """Gives up on a stopped run whose call has not returned `kill_grace` after the stop."""

    __slots__ = ("_ctx", "_hooks", "_job", "_lock", "_returned", "_timer")

    def __init__(self, job: Job, ctx: RunContext, hooks: GiveUp) -> None:
        self._job = job
        self._ctx = ctx
        self._hooks = hooks
        self._lock = threading.Lock()
        self._returned = False
        self._timer: Timer | None = None

    def stopped(self) -> None:
        """A stop came (any thread): give up `kill_grace` from now unless the call returns
        (or has returned: its context is settled, see `run_function`)."""
        with self._lock:
            if self._returned or self._timer is not None or self._ctx.settled:
                return
            # Essential: a shutdown closes the runner, and must still get past this run.
            self._timer = self._hooks._schedule_kill(self._job.kill_grace, self._expire)

    def _expire(self) -> None:
        with self._lock:
            if self._returned:
                return
            self._returned = True  # the call's own result, when it comes, is ignored
            execution = self._hooks._give_up(self._job, self._ctx)
        self._hooks._report_given_up(self._job, self._ctx, execution)

    def returned(self) -> None:
        """The call returned (in the run's thread): no giving up any more."""
        with self._lock:
            self._returned = True
            timer = self._timer
        if timer is not None:
            timer.cancel()


def run_internal(
    job: Job, ctx: RunContext, clock: Clock, hooks: GiveUp | None = None, target: object = None
) -> Outcome:
    """Run the internal job `job` to its end in this thread (see the module notes).

    With `hooks`, a stopped run whose call does not return within `kill_grace` is given up
    (see the module notes): the caller then finds `ctx.finished` set when this returns, and
    the final Execution is ``ctx.snapshot()``, not this Outcome. While it runs,
    `current_run()` in this thread gives the run's identity. `target`: the job's class or
    function when the caller found it already (`resolve`), else None.
    """
    token = enter(ctx)
    try:
        return _run(job, ctx, clock, hooks, resolve(job) if target is None else target)
    finally:
        leave(token)


def _run(job: Job, ctx: RunContext, clock: Clock, hooks: GiveUp | None, target: Any) -> Outcome:
    if isinstance(target, Outcome):
        return target
    if isinstance(target, type):
        abandon = None if hooks is None else Abandon(job, ctx, hooks)
        try:
            instance = target(**call_args(job, ctx))
        except _JOB_ERRORS as exc:
            what = describe_target(job)
            return Outcome.not_started(f"cannot create {what}: {describe(exc)}", describe(exc))
        if not callable(getattr(instance, "run", None)):
            return Outcome.not_started(f"{describe_target(job)} has no run() method")
        return _run_instance(job, ctx, clock, instance, abandon)
    return run_function(job, ctx, target, hooks)


def resolve(job: Job) -> Any:
    """What internal job `job` runs: its class or function (a job defined in code holds it;
    else ``"package.module:name"`` is imported and looked up, on every run, so a module
    reloaded or patched since is seen at once), or the NOT_STARTED `Outcome` saying why
    there is none."""
    command = job.command
    if not isinstance(command, (str, tuple)):
        return command  # defined in code: the callable itself
    reference = str(command)
    module_name, parts = _parse(reference)
    module = _modules.get(module_name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        # Not imported yet, or being imported by another thread (import_module waits for it).
        try:
            module = importlib.import_module(module_name)
        except _JOB_ERRORS as exc:
            error = describe(exc)
            return Outcome.not_started(f"cannot import {module_name}: {error}", error)
    target: Any = module
    try:
        for part in parts:
            target = getattr(target, part)
    except AttributeError as exc:
        qualname = reference.partition(":")[2]
        return Outcome.not_started(f"{module_name} has no attribute {qualname!r}", describe(exc))
    if not callable(target):  # a class is callable too
        return Outcome.not_started(f"{reference} is not a class or a function")
    return target


def describe_target(job: Job) -> str:
    """How messages name what `job` runs: its ``"package.module:name"``."""
    command = job.command
    if isinstance(command, (str, tuple)):
        return str(command)
    return f"{getattr(command, '__module__', '?')}:{getattr(command, '__qualname__', command)}"


def call_args(job: Job, ctx: RunContext) -> Mapping[str, Any]:
    """The keyword arguments of the job's function or constructor: its ``args``; for a job
    defined in code, a submitted run's arguments on top (``.submit(**args)`` calls it with
    them). A job named by ``"package.module:name"`` reads those through `current_run`."""
    if ctx.args is None or job.source != "code":
        return job.args
    return {**job.args, **ctx.args}


def _parse(reference: str) -> tuple[str, tuple[str, ...]]:
    """``"package.module:A.b"`` as ``("package.module", ("A", "b"))``, remembered."""
    parsed = _parsed.get(reference)
    if parsed is None:
        module_name, _, qualname = reference.partition(":")
        parsed = (module_name, tuple(qualname.split(".")))
        if len(_parsed) >= _PARSED_MAX:
            _parsed.clear()  # a bound, for programs that make up commands without end
        _parsed[reference] = parsed
    return parsed


class _InstanceStopper:
    """Calls the instance's ``stop()`` once, in a thread of its own, while the run is on."""

    def __init__(self, job: Job, instance: object, abandon: Abandon | None) -> None:
        self._job = job
        self._instance = instance
        self._lock = threading.Lock()
        self._closed = False
        self._abandon = abandon

    def __call__(self, reason: str) -> None:
        if self._abandon is not None:
            self._abandon.stopped()
        stop = getattr(self._instance, "stop", None)
        if not callable(stop):
            log.warning("job %r cannot be stopped (%s): it has no stop()", self._job.name, reason)
            return
        name = f"jobscheduler-stop-{self._job.name}"
        threading.Thread(target=self._stop, args=(stop, reason), name=name, daemon=True).start()

    def _stop(self, stop: Callable[[], object], reason: str) -> None:
        with self._lock:
            if self._closed:
                return  # run() returned meanwhile: nothing left to stop
        log.info("stopping job %r (%s)", self._job.name, reason)
        try:
            stop()
        except Exception:
            log.exception("stop() of job %r raised", self._job.name)

    def close(self) -> None:
        with self._lock:
            self._closed = True


def _run_instance(
    job: Job, ctx: RunContext, clock: Clock, instance: Any, abandon: Abandon | None
) -> Outcome:
    reports = is_scheduled_enable(instance)
    stopper = _InstanceStopper(job, instance, abandon)
    probe = (lambda: _report(job, instance)) if reports else None
    early_stop = ctx._attach_unless_stopped(stopper, probe)
    if early_stop is not None:
        # Stopped while being imported or created: run() is not called at all.
        return Outcome.not_started(early_stop)
    error: str | None = None
    try:
        instance.run()
    except _JOB_ERRORS as exc:
        error = describe(exc)
        log.warning("job %r raised %s", job.name, error, exc_info=True)
    if abandon is not None:
        abandon.returned()
    if reports and error is None:
        _wait_until_done(job, ctx, clock, instance)
    stop_reason = ctx._settle()
    stopper.close()
    report: Mapping[str, Any] = _report(job, instance) if reports else {}
    if stop_reason is not None:
        return Outcome(
            Event.FAILED, SchedulerResult.ABNORMAL, reason=stop_reason, error=error, **report
        )
    if error is not None:
        reason = f"raised {error.partition(':')[0]}"
        return Outcome(Event.FAILED, SchedulerResult.NORMAL, reason=reason, error=error, **report)
    if not reports:
        return SUCCESS
    event, judged = judge_status(report.get("running_status"))
    return Outcome(event, SchedulerResult.NORMAL, reason=judged, **report)


def run_function(
    job: Job, ctx: RunContext, function: Callable[..., object], hooks: GiveUp | None
) -> Outcome:
    """Call the internal job's function `function` (ctx begun, and this thread's current
    run): `run_internal`'s work once its target is known to be a function."""
    # The `Abandon` is made by the first stop, not for every run (most are never stopped):
    # the call's return settles the context before `abandon` is read, and a stop's Abandon
    # is in `abandon` before it looks whether the context is settled, so one of the two
    # sees the other (under the GIL), and a run that returned is never given up.
    abandon: list[Abandon] = []

    def cannot_stop(reason: str) -> None:
        if hooks is not None:
            made = Abandon(job, ctx, hooks)
            abandon.append(made)
            made.stopped()
        log.warning("job %r is a function and cannot be stopped (%s)", job.name, reason)

    early_stop = ctx._attach_unless_stopped(cannot_stop)
    if early_stop is not None:
        return Outcome.not_started(early_stop)
    error: str | None = None
    try:
        function(**call_args(job, ctx))
    except _JOB_ERRORS as exc:
        error = describe(exc)
        log.warning("job %r raised %s", job.name, error, exc_info=True)
    stop_reason = ctx._settle()
    if abandon:
        abandon[0].returned()
    if stop_reason is not None:
        return Outcome(Event.FAILED, SchedulerResult.ABNORMAL, reason=stop_reason, error=error)
    if error is not None:
        reason = f"raised {error.partition(':')[0]}"
        return Outcome(Event.FAILED, SchedulerResult.NORMAL, reason=reason, error=error)
    return SUCCESS


def _bare_function(target: object) -> TypeGuard[FunctionType]:
    """Whether `target` is a plain function without attributes: its code says whether it is
    a coroutine, without inspect's unwrapping (a function with attributes may carry a
    coroutine marker: inspect reads those)."""
    return type(target) is FunctionType and not target.__dict__


def is_plain_function(target: object) -> bool:
    """Whether `target` is the usual job: a plain synchronous function (no attributes that
    could mark it a coroutine), which `run_function` calls without further checks."""
    return _bare_function(target) and not target.__code__.co_flags & CO_COROUTINE


def is_async(target: object) -> bool:
    """Whether `target` (a job's function or class) runs as a coroutine (see `asyncjob`)."""
    if _bare_function(target):  # the usual job: its code says it
        return bool(target.__code__.co_flags & CO_COROUTINE)
    if isinstance(target, type):
        return inspect.iscoroutinefunction(getattr(target, "run", None))
    return inspect.iscoroutinefunction(target)


def judge_status(status: str | None) -> tuple[Event, str | None]:
    """The event and reason for a ScheduledEnable's ``running_status`` (see the protocol)."""
    if status is None or not status.strip():
        return Event.FAILED, "no running status"
    try:
        event = Event.parse(status)
    except ValueError:
        return Event.FAILED, status.strip()
    if event is Event.SUCCESSFUL:
        return event, None
    if event is Event.FAILED:
        return event, "job reported failed"
    if event is Event.NOT_STARTED:
        return event, "job reported not started"
    return Event.FAILED, status.strip()  # "both" is a filter, not an outcome


def _report(job: Job, instance: Any) -> dict[str, Any]:
    """The instance's running_status and message_data, as Execution fields (never raises)."""
    status: str | None = None
    data: Mapping[str, Any] = _EMPTY
    try:
        raw = instance.running_status
        status = None if raw is None else str(raw)
    except Exception:
        log.exception("reading running_status of job %r failed", job.name)
    try:
        raw_data = instance.message_data
        if isinstance(raw_data, Mapping):
            data = MappingProxyType({str(k): v for k, v in raw_data.items()})
        elif raw_data is not None:
            log.warning("message_data of job %r is not a mapping: ignored", job.name)
    except Exception:
        log.exception("reading message_data of job %r failed", job.name)
    return {"running_status": status, "message_data": data}


def _is_done(job: Job, instance: Any) -> bool:
    try:
        return bool(instance.is_done())
    except Exception:
        log.exception("is_done() of job %r raised; taking the job as done", job.name)
        return True


def _wait_until_done(job: Job, ctx: RunContext, clock: Clock, instance: Any) -> None:
    """After ``run()`` returned: wait for ``is_done()``, or kill_grace after a stop."""
    delay = _FIRST_CHECK
    give_up = None
    while not _is_done(job, instance):
        if ctx.stop_reason is not None:
            now = clock.now()
            if give_up is None:
                give_up = now + job.kill_grace
            if now >= give_up:
                log.warning("job %r not done %s after it was stopped", job.name, job.kill_grace)
                return
            delay = min(delay, (give_up - now) / timedelta(seconds=1))
        ctx._pause(clock, delay)
        delay = min(delay * 2, _LAST_CHECK)
