"""The audit line: one per run, on the logger ``jobscheduler.audit`` (the spec's 1.6.4).

``name : launched : stopped : scheduler result : job status``

Times are ISO-8601 in the job's zone, to the second. The job status is the run's own running
status when it reported one (a ``ScheduledEnable`` job), else the event name, followed by the
reason in parentheses when there is one: ``FAILED (exit code 2)``, ``NOT_STARTED (already
running)``.
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
    if audit_log.isEnabledFor(logging.INFO):
        audit_log.info("%s", audit_line(execution, zone))
