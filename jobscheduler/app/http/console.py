"""What the job page (``/jobs/NAME``) and the run page (``/runs/ID``) show, from a live
`Scheduler` and its state store: the job's definition and schedule, its next runs, pause
state, success rate and durations over its last runs, its history a page at a time; a run's
record and output."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...cluster.overdue import percentile
from ...config.dump import job_entries, render
from ...errors import JobActionError
from ...model.job import Job
from ...model.jobfunction import callable_name
from ...model.jobschedule import describe_schedule
from ...model.schedulewords import schedule_in_words
from ...scheduler import Scheduler
from ...state.records import RunRecord, RunState
from ...state.values import JobPause
from .. import opsdata
from .actions import HttpError

__all__ = ["HISTORY_PER_PAGE", "LAST_RUNS", "job_view", "percentile", "run_stats", "run_view"]

LAST_RUNS = 100  # the runs the chart and the figures are drawn from
NEXT_RUNS = 10
HISTORY_PER_PAGE = 50
MAX_HISTORY_PAGE = 200  # 10,000 runs back: older ones are the CLI's (history -n) or the API's
# Runs a job was meant to run: the success rate leaves out slots a policy skipped and
# ranges no node was up for.
_COUNTED = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.ABANDONED, RunState.NOT_STARTED}
)


def run_stats(records: Sequence[RunRecord]) -> dict[str, Any]:
    """Over `records`: how many ended, the share of them that succeeded (runs skipped or
    missed not counted; None when none), the median and 95th percentile of the durations of
    the runs that ran."""
    counted = [r for r in records if r.state in _COUNTED]
    succeeded = sum(1 for r in counted if r.state is RunState.SUCCEEDED)
    durations = [d for r in records if r.state.finished and (d := r.duration) is not None]
    return {
        "runs": len(counted),
        "success_rate": succeeded / len(counted) if counted else None,
        "p50": percentile(durations, 50),
        "p95": percentile(durations, 95),
    }


def pause_text(pause: JobPause) -> str:
    """A pause in words: by whom, since when, until when, and its note."""
    by = f" by {pause.node}" if pause.node else ""
    until = f", until {pause.until.isoformat()}" if pause.until is not None else ""
    note = f": {pause.note}" if pause.note else ""
    return f"paused{by} since {pause.paused_at.isoformat()}{until}{note}"


def job_view(scheduler: Scheduler, name: str, now: datetime, *, page: int = 1) -> dict[str, Any]:
    """The job page's data (its running runs and the runs waiting for it included);
    `HttpError` 404 for a job this scheduler does not define."""
    job = scheduler.catalog.jobs.get(name)
    if job is None:
        raise HttpError(404, f"no job named {name!r}")
    if not 1 <= page <= MAX_HISTORY_PAGE:
        raise HttpError(400, f"page must be between 1 and {MAX_HISTORY_PAGE}")
    store = scheduler.state_store
    paused = scheduler.pause_of(name)
    if not job.enabled:
        pause = "disabled: enabled is false"
    elif paused is not None:
        pause = pause_text(paused)
    else:
        pause = None
    scheduled = job.enabled and pause is None and not job.on_demand and job.dependence is None
    last = store.history(name, limit=max(LAST_RUNS, page * HISTORY_PER_PAGE + 1))
    shown = last[(page - 1) * HISTORY_PER_PAGE : page * HISTORY_PER_PAGE]
    definition = _definition(job)
    return {
        "name": name,
        **opsdata.live_of_job(store, name, now),
        "definition": definition,
        "schedule": describe_schedule(job),
        "schedule_words": schedule_in_words(job),
        "next": [opsdata.iso(slot) for slot in job.slots_after(now, NEXT_RUNS)]
        if scheduled
        else [],
        "pause": pause,
        "paused": None if paused is None else paused.as_dict(),
        "enabled": job.enabled,
        "stats": run_stats(last[:LAST_RUNS]),
        "last_runs": last[:LAST_RUNS],
        "history": [opsdata.record_json(r) for r in shown],
        "page": page,
        "more": len(last) > page * HISTORY_PER_PAGE and page < MAX_HISTORY_PAGE,
    }


def _definition(job: Job) -> str:
    """The job as its YAML entry; a job defined in code names its function as its command."""
    try:
        entries = job_entries(job)
    except JobActionError as exc:  # arguments a file cannot hold (a job defined in code)
        return f"(not shown as YAML: {exc})"
    if callable(job.command):  # `@scheduler.job` or `Job(command=function)`: no YAML value
        entries["command"] = f"{callable_name(job.command)} (defined in code)"
    return "".join(render({job.name: entries}))


def run_view(scheduler: Scheduler, run_id: str) -> dict[str, Any]:
    """A run's record and its `output` (the output kept, so far while it runs: the record's
    `output_tail`); `HttpError` 404 for a run id the store does not keep."""
    record = scheduler.state_store.run(run_id)
    if record is None:
        raise HttpError(404, f"no run has the id {run_id!r}")
    return {**opsdata.record_json(record), "output": record.output_tail}
