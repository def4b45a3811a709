"""What starts a job, in a few words (the rules themselves: `schedulerules`)."""

from __future__ import annotations

from .job import Job

__all__ = ["describe_schedule"]


def describe_schedule(job: Job) -> str:
    """What starts `job`, in a few words, its kind first (``jobscheduler list``, ``status``,
    the status page): ``every 1 day from …``, ``cron 0 3 * * * from …``, ``calendar Mon..Fri
    09:00``, ``once at …``, ``after JOB successful +10s``, ``on demand``; a `stop` adds
    ``until …``."""
    if job.dependence is not None:
        dep = job.dependence
        delay = f" +{dep.delay.total_seconds():g}s" if dep.delay else ""
        return f"after {dep.job_name} {dep.event.value}{delay}"
    if job.on_demand:
        return "on demand"
    start = job.start.isoformat(timespec="seconds") if job.start else None
    stop = job.stop.isoformat(timespec="seconds") if job.stop else None
    bounds = (f" from {start}" if start else "") + (f" until {stop}" if stop else "")
    if job.cron is not None:
        return f"cron {job.cron}{bounds}"
    if job.calendar is not None:
        return f"calendar {job.calendar}{bounds}"
    if job.interval is None:
        return f"once at {start}"
    return f"every {job.interval}{bounds}"
