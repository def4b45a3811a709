"""``manage.py runjobs``: run the project's jobs in this process until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from jobsapp.jobs import scheduler


class Command(BaseCommand):
    help = "Run the scheduled and submitted jobs until SIGTERM or Ctrl-C."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        scheduler.start()
        self.stdout.write(f"running jobs as node {scheduler.node}", ending="\n")
        self.stdout.flush()
        stop.wait()
        scheduler.shutdown()  # running jobs finish first
