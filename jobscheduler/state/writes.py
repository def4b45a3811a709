"""`write_run`: a finished `Execution` into a state store, the one way the scheduler does it."""

from __future__ import annotations

import logging

from ..model.event import Event
from ..model.execution import Execution
from .base import StateStore
from .records import RunState, outcome_of, queue_state_of

__all__ = ["write_run"]

log = logging.getLogger("jobscheduler.state")

_SUCCESSFUL = Event.SUCCESSFUL
_SUCCEEDED = RunState.SUCCEEDED
_NOT_STARTED = RunState.NOT_STARTED


def write_run(
    store: StateStore,
    execution: Execution,
    *,
    node: str,
    settle: int | None = None,
    claimed: bool = False,
    durable: bool = False,
) -> bool:
    """Write the finished `execution`, run on `node`: its claim is finished or, for a run that
    never claimed (refused before it, or every run while the engine does not claim), its
    record is added. False when neither could be written: its key is taken (another node
    handled the slot, or the run was found abandoned). A store's errors propagate.

    `settle`: the queue row the run was taken from, settled with its outcome: in the finish's
    transaction, else (a run that never claimed) right after its record. `claimed`: every
    run that started claimed first (the engine claims each run), so the finish of a run
    that succeeded or failed need not be waited for (``finish(wait=False)``); a run that did
    not start may never have claimed, and is written as before. `durable`: waited for all
    the same (the caller reports the run only once its outcome cannot be lost with this
    process: a job whose lost runs are run again, see `NodeKeeper.record`).
    """
    # `outcome_of`'s most common case written out: it runs for every run.
    if execution.event is _SUCCESSFUL and execution.error is None:
        state, reason = _SUCCEEDED, execution.reason
    else:
        state, reason = outcome_of(execution)
    run_id = execution.run_id
    if run_id.__class__ is not str:
        run_id = str(run_id)
    ended = execution.ended
    if ended is None:  # a finished execution has one; a running one is not written here
        raise ValueError(f"run {run_id} of {execution.job_name!r} has not ended")
    exit_code = execution.exit_code
    tail = execution.output_tail
    if store.finish(
        run_id,
        state=state,
        ended=ended,
        exit_code=exit_code,
        reason=reason,
        output_tail=tail,
        settle=settle,
        wait=durable or not claimed or state is _NOT_STARTED,
        started=execution.started,
    ):
        return True
    written = store.record(
        execution.job_name,
        execution.slot,
        execution.trigger,
        run_id,
        node=node,
        attempt=execution.attempt,
        state=state,
        started=execution.started,
        ended=ended,
        exit_code=exit_code,
        reason=reason,
        output_tail=tail,
    )
    if not written:
        log.debug("run %s of %r: its key is taken; not recorded", run_id, execution.job_name)
    if settle is not None and written:
        # Not when its key is taken: the run was found abandoned, and the take-over settled
        # its row or put it back in the queue (where another node may have taken it since).
        store.settle(settle, queue_state_of(state), run_id)
    return written
