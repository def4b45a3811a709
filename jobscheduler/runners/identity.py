"""What a running job learns about its own run: `current_run()` and the ``JOBSCHEDULER_*``
environment variables.

An internal job calls `current_run()` (exported as ``jobscheduler.current_run``) and gets a
`RunInfo`: the identity of the run executing in the calling thread, read-only, without the
run's stop switch. The internal runner sets it (a `contextvars.ContextVar`) for the whole run
— importing the job, creating the instance, ``run()``, and waiting for ``is_done()`` — and
resets it after, so it is None outside a run. Like any context variable it follows the
thread: a thread the job starts itself sees None (pass it the `RunInfo`), while asyncio
tasks created inside the run copy it and see the run.

An external command gets the same in its environment (`run_environment`, added by the
external runner on top of what it inherits): ``JOBSCHEDULER_JOB``, ``JOBSCHEDULER_RUN_ID``,
``JOBSCHEDULER_SLOT`` (`utc_text`; empty for a run outside the schedule),
``JOBSCHEDULER_TRIGGER``, ``JOBSCHEDULER_NODE``, ``JOBSCHEDULER_FENCE`` (the run's fencing
token, a whole number), and ``JOBSCHEDULER_ARGS`` (compact JSON) only for a run with
arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import RunContext

__all__ = ["ENV_PREFIX", "RunInfo", "current_run", "run_environment", "utc_text"]

ENV_PREFIX = "JOBSCHEDULER_"

_current: ContextVar[RunContext | None] = ContextVar("jobscheduler_current_run", default=None)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The identity of one run, as the job sees it (see `current_run`).

    - `job`: the job's name;
    - `run_id`: the run's id, a UUIDv7 text unique across nodes and restarts, sorted by time;
    - `slot`: the scheduled instant the run is for (an aware datetime, in the job's time
      zone), or None for a run outside the schedule (``run_now``, a dependent run);
    - `trigger`: why it runs: ``"schedule"``, ``"run_now"`` or ``"dependence"``;
    - `node`: the name of the scheduler process running it;
    - `args`: the arguments of a submitted run (read-only), else None;
    - `attempt`: 1 for a first try;
    - `fence`: the run's fencing token, a whole number that rises with every attempt of a
      slot, whichever node makes it: a rerun after a node loss (or a retry) has a larger one
      than the attempt it replaces. Hand it to what the run writes, which refuses a write
      with a smaller token than one it has seen for the same (`job`, `slot`): a run that
      lives on after its node was declared dead cannot overwrite its successor's work.

    (`job`, `slot`) names a scheduled run for good: a run of the same slot repeated later
    (after its node died) has the same pair and a new `run_id`. `slot_text` is the slot as
    the environment gives it to commands.
    """

    job: str
    run_id: str
    slot: datetime | None
    trigger: str
    node: str
    args: Mapping[str, Any] | None
    attempt: int
    fence: int

    @property
    def slot_text(self) -> str:
        """The slot in ISO 8601, UTC, ``Z`` form (``2026-11-23T03:00:00Z``); "" for none."""
        return utc_text(self.slot)


def current_run() -> RunInfo | None:
    """The run executing in this thread, or None outside a run (see the module notes).

    A new `RunInfo` at each call, cheap enough to call whenever needed.
    """
    ctx = _current.get()
    if ctx is None:
        return None
    return RunInfo(
        job=ctx.job.name,
        run_id=ctx.run_id,
        slot=ctx.slot,
        trigger=ctx.trigger,
        node=ctx.node,
        args=ctx.args,
        attempt=ctx.attempt,
        fence=ctx.fence,
    )


# The internal runner's side: ``token = enter(ctx)`` makes `ctx` the current run of this
# thread, ``leave(token)`` undoes it. The context variable's own methods, not functions
# around them: they run twice for every internal run.
enter: Callable[[RunContext], Token[RunContext | None]] = _current.set
leave: Callable[[Token[RunContext | None]], None] = _current.reset


def utc_text(moment: datetime | None) -> str:
    """`moment` in ISO 8601, in UTC, with a ``Z``: ``2026-11-23T03:00:00Z``; fractions of
    a second only when there are some (``…:00.250000Z``); "" for None. A naive `moment`
    is taken to be UTC."""
    if moment is None:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat() + "Z"


def run_environment(ctx: RunContext) -> dict[str, str]:
    """The ``JOBSCHEDULER_*`` variables of a run (see the module notes).

    ``JOBSCHEDULER_ARGS`` is the run's arguments as compact JSON (keys in their order, UTF-8
    kept as is); a value JSON cannot hold is written as its ``str()``.
    """
    env = {
        "JOBSCHEDULER_JOB": ctx.job.name,
        "JOBSCHEDULER_RUN_ID": ctx.run_id,
        "JOBSCHEDULER_SLOT": utc_text(ctx.slot),
        "JOBSCHEDULER_TRIGGER": ctx.trigger,
        "JOBSCHEDULER_NODE": ctx.node,
        "JOBSCHEDULER_FENCE": str(ctx.fence),
    }
    if ctx.args is not None:
        env["JOBSCHEDULER_ARGS"] = json.dumps(
            dict(ctx.args), separators=(",", ":"), ensure_ascii=False, default=str
        )
    return env
