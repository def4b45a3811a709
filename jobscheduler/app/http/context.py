"""`Context`: what the HTTP handlers share."""

from __future__ import annotations

import threading

from ...scheduler import Scheduler
from .metrics import Metrics
from .security import Guard
from .views import LastResults

__all__ = ["Context"]


class Context:
    """What the handlers share: the scheduler, the guard, the last results and the metrics."""

    def __init__(self, scheduler: Scheduler, guard: Guard) -> None:
        self.scheduler = scheduler
        self.guard = guard
        self.last = LastResults(scheduler)
        self.metrics = Metrics(scheduler)
        # Set when the server closes: streams still open end (`stream.output_events`).
        self.closing = threading.Event()
        scheduler.queue.observers.append(self.last.observe)
        scheduler.queue.observers.append(self.metrics.observe)

    def close(self) -> None:
        self.closing.set()
        for observer in (self.last.observe, self.metrics.observe):
            if observer in self.scheduler.queue.observers:
                self.scheduler.queue.observers.remove(observer)
