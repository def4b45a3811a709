"""What an alert's template sees: the run's message data, its name, status and execution."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job
from ..triggers.zones import resolve_zone

__all__ = ["ExecutionView", "template_context"]


@dataclass(frozen=True, slots=True)
class ExecutionView:
    """What a template sees as ``execution``: plain values of one run, read-only.

    Times are aware datetimes in the job's time zone (None when unknown: ``ended`` of a run
    that never ended, ``slot`` of a run that had no scheduled slot). ``duration`` is in
    seconds; ``result`` is ``"normal"`` or ``"abnormal"``; ``trigger`` is ``"schedule"``,
    ``"run_now"`` or ``"dependence"``.
    """

    job_name: str
    run_id: str
    slot: datetime | None
    started: datetime
    ended: datetime | None
    duration: float | None
    exit_code: int | None
    output_tail: str
    error: str | None
    reason: str | None
    running_status: str | None
    result: str | None
    trigger: str

    @classmethod
    def of(cls, execution: Execution, zone: tzinfo = UTC) -> ExecutionView:
        def local(moment: datetime | None) -> datetime | None:
            if moment is None:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.astimezone(zone)

        started = local(execution.started)
        assert started is not None
        return cls(
            job_name=execution.job_name,
            run_id=execution.run_id,
            slot=local(execution.slot),
            started=started,
            ended=local(execution.ended),
            duration=execution.duration,
            exit_code=execution.exit_code,
            output_tail=execution.output_tail,
            error=execution.error,
            reason=execution.reason,
            running_status=execution.running_status,
            result=None if execution.result is None else str(execution.result),
            trigger=execution.trigger,
        )


def _zone_of(job: Job) -> tzinfo:
    try:
        return resolve_zone(job.timezone)
    except ValueError:
        return UTC


def template_context(job: Job, event: Event, execution: Execution) -> dict[str, Any]:
    """The names a template sees: message data, then ``JobName``, ``JobStatus`` and
    ``execution`` (which win over message data keys of the same name)."""
    context: dict[str, Any] = {str(key): value for key, value in execution.message_data.items()}
    context["JobName"] = job.name
    context["JobStatus"] = event.name
    context["execution"] = ExecutionView.of(execution, _zone_of(job))
    return context
