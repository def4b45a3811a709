"""The `retry` policy: when a FAILED run is tried again, and as which attempt.

A run FAILED with attempts left (``retry.attempts`` counts every try, the first included) is
tried again after ``backoff × 2^(n-1)`` (n: the try that failed) times a jitter share drawn
from 0.5 to 1.0, capped at ``max_backoff`` after the jitter: a one-off start with trigger
``retry`` that keeps the failed run's slot (None outside the schedule) and the next attempt
number (`slottrigger.SlotTrigger`). The store keys a slot's try by (job, slot, attempt), so
among nodes sharing a store each attempt runs once.

Not retried, whatever attempts are left: a run stopped on purpose (``stop_job``: reason
"stopped"; "shutdown"; "replaced" by ``overlap: replace``; "killed"), a NOT_STARTED or
SUCCESSFUL one, and a run of a job that is gone, disabled or paused meanwhile. A retry
runs the job's definition as it is when the retry is scheduled.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Final

from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job
from .slottrigger import SlotTrigger

__all__ = ["NOT_RETRIED", "RETRY", "Retries"]

RETRY: Final = "retry"
NOT_RETRIED: Final = frozenset({"stopped", "shutdown", "replaced", "killed"})
_KEEP: Final = 10_000  # attempts of claimed runs remembered until their end (a bound)


class Retries:
    """The attempt of each run that is not a first try, and the next try of a failed run."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng if rng is not None else random.Random()
        # run id -> attempt, for runs past their first try, from their claim to their end. A
        # run whose claim said no never ends here: the bound keeps such leftovers few.
        self._attempts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # workers claim and end runs at the same time

    def claimed(self, run_id: str, attempt: int) -> None:
        """Run `run_id` (attempt `attempt` > 1) is about to start (from its worker)."""
        with self._lock:
            self._attempts[run_id] = attempt
            if len(self._attempts) > _KEEP:
                self._attempts.popitem(last=False)

    def attempt_of(self, run_id: str) -> int:
        """The attempt of the run `run_id` that has ended (1 unless `claimed` said more)."""
        if not self._attempts:  # no retry runs: no lock taken
            return 1
        with self._lock:
            return self._attempts.pop(run_id, 1)

    def next_try(
        self, job: Job, execution: Execution, attempt: int, now: datetime
    ) -> tuple[datetime, SlotTrigger] | None:
        """When and as what the failed `execution` (try `attempt` of `job`) runs again; None
        when it does not (see the module notes)."""
        retry = job.retry
        if (
            retry is None
            or execution.event is not Event.FAILED
            or attempt >= retry.attempts
            or execution.reason in NOT_RETRIED
        ):
            return None
        delay: timedelta = retry.delay(attempt, self.rng.uniform(0.5, 1.0))
        return now + delay, SlotTrigger(RETRY, execution.slot, attempt + 1)
