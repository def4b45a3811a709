"""The audit line: one per run, on the logger ``jobscheduler.audit`` (the spec's 1.6.4).

``name : launched : stopped : scheduler result : job status``

Times are ISO-8601 in the job's zone, to the second. The job status is the run's own running
status when it reported one (a ``ScheduledEnable`` job), else the event name, followed by the
reason in parentheses when there is one: ``FAILED (exit code 2)``, ``NOT_STARTED (already
running)``.

The line stays the specification's five fields. The run's identity travels on the log record
instead, as attributes a formatter or a structured handler can use: ``run_id`` (the run's id,
as in its `Execution`, the history and the command's ``JOBSCHEDULER_RUN_ID``), ``job_name``,
``slot`` (None outside the schedule) and ``trigger``; e.g. a handler of
``jobscheduler.audit`` with the format ``"%(message)s [%(run_id)s]"``.
"""

from __future__ import annotations

import logging
from datetime import datetime, tzinfo

from ..model.execution import Execution

__all__ = ["audit_line", "log_audit"]

audit_log = logging.getLogger("jobscheduler.audit")


def _when(value: datetime | None, zone: tzinfo | None) -> str:
    if value is None:
        return "-"
    if zone is not None:
        value = value.astimezone(zone)
    return value.isoformat(timespec="seconds")


def audit_line(execution: Execution, zone: tzinfo | None = None) -> str:
    """The audit line of a finished `execution`."""
    event = execution.event.name if execution.event is not None else "RUNNING"
    status = execution.running_status or event
    if execution.reason:
        status = f"{status} ({execution.reason})"
    result = execution.result.value if execution.result is not None else "-"
    return " : ".join(
        (
            execution.job_name,
            _when(execution.started, zone),
            _when(execution.ended, zone),
            result,
            status,
        )
    )


def log_audit(execution: Execution, zone: tzinfo | None = None) -> None:
    """Log the audit line of `execution`, its identity on the record (see the module notes)."""
    if audit_log.isEnabledFor(logging.INFO):
        audit_log.info(
            "%s",
            audit_line(execution, zone),
            extra={
                "run_id": execution.run_id,
                "job_name": execution.job_name,
                "slot": execution.slot,
                "trigger": execution.trigger,
            },
        )
