"""`RunContext`: one run's identity and its stop switch, shared by the processor and a runner.

Also `Outcome`, what a runner found out about a run before the `Execution` is written.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.node import default_node_name

if TYPE_CHECKING:
    from ..clock import Clock
    from ..model.job import Job

__all__ = ["Outcome", "RunContext"]

log = logging.getLogger("jobscheduler.runners")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Stopper = Callable[[str], None]
Probe = Callable[[], Mapping[str, Any]]


class _State(enum.Enum):
    NEW = "new"  # not handed to a runner yet
    RUNNING = "running"  # a runner is setting it up or running it: stops take effect
    SETTLED = "settled"  # the work has ended: stops no longer change the outcome
    FINISHED = "finished"  # the final Execution is written


# The states as module constants: on Python 3.11 an Enum member's look-up (`_State.NEW`) in
# a function costs ~0.2 µs, a global's ~0.03, and every run passes half a dozen of them.
_NEW, _RUNNING, _SETTLED, _FINISHED = _State.NEW, _State.RUNNING, _State.SETTLED, _State.FINISHED


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as a runner saw it (the Execution adds identity and times)."""

    event: Event
    result: SchedulerResult
    reason: str | None = None
    error: str | None = None
    exit_code: int | None = None
    output_tail: str = ""
    output_bytes: int = 0
    running_status: str | None = None
    message_data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    pid: int | None = None

    @classmethod
    def not_started(cls, reason: str, error: str | None = None) -> Outcome:
        """A run that could not be launched (or was stopped before it was): ABNORMAL."""
        return cls(Event.NOT_STARTED, SchedulerResult.ABNORMAL, reason=reason, error=error)


class RunContext:
    """One run's identity and its stop switch.

    The identity: `job` (the definition it runs), `run_id` (a UUIDv7 text, see
    `jobscheduler.model.runid`), `slot` (the scheduled instant; None outside the schedule),
    `trigger` (why it runs: ``"schedule"``, ``"run_now"`` or ``"dependence"``), `node` (the
    scheduler process running it; `default_node_name` when not given), `args` (the arguments
    of a submitted run, read-only; None for every other run), `attempt` (1 for a first
    try) and `fence` (the fencing token, see `fence`). External commands get it in their
    environment, internal jobs through `jobscheduler.current_run`. `created` (optional) is
    when the run was queued; a snapshot taken before a runner starts the run uses it (else
    the slot, else the Unix epoch) as ``started``.

    `stop` is thread-safe and idempotent and may be called at any time:

    - before the run starts: the runner does not start it; the run is NOT_STARTED / ABNORMAL
      with the stop's reason (nothing was launched);
    - while it runs: the first call wins; its reason is kept, the runner's stop action (SIGTERM
      to the process group, or the instance's ``stop()``) is taken once, and the run ends
      FAILED / ABNORMAL with that reason;
    - once the work has ended (the process exited and its output was read, ``run()``
      returned): nothing changes.

    A context is for one run: a runner refuses to run it twice.
    """

    __slots__ = (
        "_changed",
        "_final",
        "_lock",
        "_probe",
        "_started",
        "_state",
        "_stop_reason",
        "_stopper",
        "args",
        "attempt",
        "created",
        "job",
        "node",
        "on_launch",
        "run_id",
        "slot",
        "trigger",
    )

    def __init__(
        self,
        job: Job,
        run_id: str,
        slot: datetime | None,
        trigger: str = "schedule",
        *,
        created: datetime | None = None,
        node: str | None = None,
        args: Mapping[str, Any] | None = None,
        attempt: int = 1,
    ) -> None:
        self.job = job
        self.run_id = run_id
        self.slot = slot
        self.trigger = trigger
        self.created = created
        self.node = default_node_name() if node is None else node
        # A copy, read-only: the run's arguments cannot change under it.
        self.args = None if args is None else MappingProxyType(dict(args))
        self.attempt = attempt
        # Called with (ctx, pid) once an external command's process group is launched (the
        # scheduler records it in the state store); an error there is logged, never raised.
        self.on_launch: Callable[[RunContext, int], None] | None = None
        self._lock = threading.Lock()
        # Made on the first wait only: most runs never wait, and a Condition costs ~2 µs.
        self._changed: threading.Condition | None = None
        self._state = _NEW
        self._stop_reason: str | None = None
        self._stopper: Stopper | None = None
        self._probe: Probe | None = None
        self._started: datetime | None = None
        self._final: Execution | None = None

    # -- the processor's side -------------------------------------------------------------

    def stop(self, reason: str = "stopped") -> None:
        """Stop the run with `reason` (see the class notes); never raises, never blocks long."""
        with self._lock:
            if self._stop_reason is not None or self._state in (_SETTLED, _FINISHED):
                return
            self._stop_reason = reason
            stopper = self._stopper
            if self._changed is not None:
                self._changed.notify_all()
        if stopper is not None:
            self._call(stopper, reason)

    @property
    def stop_reason(self) -> str | None:
        """The reason of the stop that took effect, or None."""
        with self._lock:
            return self._stop_reason

    @property
    def started(self) -> datetime | None:
        """When a runner started the run; None before."""
        with self._lock:
            return self._started

    @property
    def settled(self) -> bool:
        """Whether the work has ended (its call returned, its process was reaped): a stop
        changes nothing any more."""
        with self._lock:
            return self._state is _SETTLED or self._state is _FINISHED

    @property
    def finished(self) -> bool:
        """Whether the final Execution is written."""
        with self._lock:
            return self._state is _FINISHED

    def snapshot(self) -> Execution:
        """The final Execution once finished; before, a running snapshot (never raises).

        A running snapshot has ``event``, ``ended`` and ``result`` None and carries what is
        known so far: ``pid`` and the output so far for an external run, the job's current
        ``running_status`` and ``message_data`` for a ScheduledEnable one, and ``reason`` set
        to the stop's reason once a stop is under way.
        """
        with self._lock:
            if self._final is not None:
                return self._final
            started = self._started or self.created or self.slot or _EPOCH
            probe = self._probe
            reason = self._stop_reason
        live: Mapping[str, Any] = {}
        if probe is not None:
            try:
                live = probe()
            except Exception:
                log.exception("reading the state of run %s of %r failed", self.run_id, self.name)
        return Execution(
            job_name=self.job.name,
            run_id=self.run_id,
            slot=self.slot,
            started=started,
            reason=reason,
            trigger=self.trigger,
            attempt=self.attempt,
            **live,
        )

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def fence(self) -> int:
        """The run's fencing token: rises with every attempt of a slot, across nodes.

        It is the attempt under which the state store claimed the run: the claim's key is
        (job, slot, attempt), unique, and a rerun (or a retry) claims the next attempt only
        after the one it replaces was claimed, so two attempts of one slot never share a
        token and the later one's is larger, whichever nodes made them. Compare tokens of
        one (job, slot) only: runs of other slots are not ordered by it.
        """
        return self.attempt

    def __repr__(self) -> str:
        return f"RunContext({self.job.name!r}, run_id={self.run_id!r}, {self._state.value})"

    # -- the cluster's side, before the run's claim ------------------------------------------

    def rerun_of(self, slot: datetime | None, attempt: int) -> None:
        """This run reruns `slot` as its `attempt`th try (known only once it is taken)."""
        self.slot = slot
        self.attempt = attempt

    def give_args(self, args: Mapping[str, Any]) -> None:
        """The arguments of a submitted run (a read-only copy, as the constructor's)."""
        self.args = MappingProxyType(dict(args))

    def report_launch(self, callback: Callable[[RunContext, int], None]) -> None:
        """Call `callback(ctx, pid)` once an external command's process group is launched."""
        self.on_launch = callback

    # -- the runner's side ----------------------------------------------------------------

    def _begin(self, started: datetime) -> str | None:
        """Mark the run started. Returns the reason of a stop that came first, if any.

        Raises RuntimeError if the context was already run.
        """
        with self._lock:
            if self._state is not _NEW:
                raise RuntimeError(f"run {self.run_id} of {self.job.name!r} was already run")
            self._state = _RUNNING
            self._started = started
            return self._stop_reason

    def _attach_unless_stopped(self, stopper: Stopper, probe: Probe | None = None) -> str | None:
        """`_attach` in one step with the check before it: if a stop came already, the work
        must not start: returns its reason (the context is settled, `stopper` not called);
        else attaches `stopper` (and `probe`) and returns None."""
        with self._lock:
            reason = self._stop_reason
            if reason is not None:
                if self._state is _RUNNING:
                    self._state = _SETTLED
                self._stopper = None
                return reason
            self._stopper = stopper
            self._probe = probe
            return None

    def _attach(self, stopper: Stopper, probe: Probe | None = None) -> None:
        """Set the action that stops this run; if a stop came already, take it now."""
        with self._lock:
            self._stopper = stopper
            self._probe = probe
            reason = self._stop_reason if self._state is _RUNNING else None
        if reason is not None:
            self._call(stopper, reason)

    def _settle(self) -> str | None:
        """The work has ended: later stops change nothing. Returns the stop reason, if any."""
        with self._lock:
            if self._state is _RUNNING:
                self._state = _SETTLED
            self._stopper = None
            return self._stop_reason

    def _finish(self, execution: Execution) -> None:
        with self._lock:
            self._state = _FINISHED
            self._stopper = None
            self._probe = None
            self._final = execution
            if self._changed is not None:
                self._changed.notify_all()

    def _pause(self, clock: Clock, timeout: float) -> None:
        """Wait up to `timeout` seconds of `clock`; a stop wakes the wait early.

        Callers re-check what they wait for: a wake-up may also be spurious.
        """
        with self._lock:
            if self._changed is None:
                self._changed = threading.Condition(self._lock)
            clock.wait(self._changed, timeout)

    def _call(self, stopper: Stopper, reason: str) -> None:
        try:
            stopper(reason)
        except Exception:
            log.exception("stopping run %s of %r failed", self.run_id, self.job.name)
