"""Where the scheduler starts in a Django project (docs/applications.md, "Django").

By default no web process runs jobs: ``manage.py runjobs`` does, in a process of its own,
and the web processes only submit runs and read the history, through the state store they
share. With ``JOBS_RUN_IN_WEB=1`` each web process runs the scheduler itself instead; every
one of them then claims each slot in the shared store before running it, so a slot runs once
however many processes serve the site.
"""

from __future__ import annotations

import atexit
import os
import sys

from django.apps import AppConfig
from django.conf import settings


class JobsConfig(AppConfig):
    name = "jobsapp"

    def ready(self) -> None:
        if not settings.JOBS_RUN_IN_WEB or "runjobs" in sys.argv:
            return
        # `runserver` with its autoreloader imports the project twice: only the child that
        # serves (RUN_MAIN set) runs jobs. `--noreload` and gunicorn have a single import.
        if (
            "runserver" in sys.argv
            and "--noreload" not in sys.argv
            and not os.environ.get("RUN_MAIN")
        ):
            return
        from .jobs import scheduler

        scheduler.start()
        atexit.register(scheduler.shutdown)
