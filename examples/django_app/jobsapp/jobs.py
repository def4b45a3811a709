"""The project's jobs, defined in code: imported by the web processes (to submit runs and
show them) and by ``manage.py runjobs`` (to run them)."""

from __future__ import annotations

from django.conf import settings

from jobscheduler import Scheduler, current_run

scheduler = Scheduler(state=settings.JOBS_STATE)


@scheduler.job(on_demand=True, timeout=300)
def export(table: str = "orders") -> None:
    run = current_run()
    print(f"exported {table} in run {run.run_id if run else '?'}", flush=True)


@scheduler.job(cron="0 3 * * *")
def nightly_cleanup() -> None:
    print("cleaned up", flush=True)
