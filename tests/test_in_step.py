"""What `jobs` says and what runs always agree, whatever mix of hand edits of the file, API
writes and `reload()` came before (a hypothesis state machine on a FakeClock).

After every step: `jobs` and `get_job` agree; `next_run` of each job is its first slot after
now (None while paused), which is what the processor holds; a job no longer defined has
nothing scheduled; the alerts built are those of the jobs' ``messages:``, no more, no fewer;
after `reload()` the definitions are the file's. When the clock advances, exactly the enabled
jobs whose next slot came ran, and nothing else did.
"""

from __future__ import annotations

import contextlib
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs_for_tests as jft
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from jobscheduler import (
    EmailConfiguration,
    Event,
    FakeClock,
    Job,
    JobActionError,
    JobType,
    Message,
    Scheduler,
)
from jobscheduler.config import dump_config, load_config
from jobscheduler.model.catalog import Catalog

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NAMES = st.sampled_from(["a", "b", "c", "d"])
SECONDS = st.sampled_from([60, 90, 120])
ALERTS = st.sampled_from([None, "a@example.com", "b@example.com"])  # whom a failure is mailed
_runs = itertools.count()


def make_job(name: str, seconds: int, prefix: str, alert: str | None = None) -> Job:
    messages = {} if alert is None else {Event.FAILED: Message(alert, template="{{ JobName }}")}
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:add",
        args={"key": f"{prefix}{name}"},
        start=T0 + timedelta(seconds=30),
        interval=f"{seconds} seconds",
        timezone="UTC",
        messages=messages,
    )


class InStep(RuleBasedStateMachine):
    directory: Path  # set by the test: each example has its own file in it

    def __init__(self) -> None:
        super().__init__()
        self.path = self.directory / f"jobs-{next(_runs)}.yaml"
        self.prefix = f"in-step-{self.path.name}-"
        self.clock = FakeClock(T0)
        self.scheduler = Scheduler(self.path, clock=self.clock, max_workers=4, state="memory")
        self.scheduler.set_email(EmailConfiguration("scheduler@example.com"))
        self.scheduler.add_job(make_job("a", 60, self.prefix))
        self.scheduler.start()
        self.seen: set[str] = {"a"}

    def teardown(self) -> None:
        self.scheduler.shutdown(wait=False)

    # -- hand edits of the file -----------------------------------------------------------

    def _edit(self, change: Any) -> None:
        catalog = load_config(self.path)
        try:
            new = change(catalog)
        except JobActionError:
            return  # not a valid edit of this file (unknown or duplicate name)
        self.path.write_text(dump_config(new))

    @rule(name=NAMES, seconds=SECONDS)
    def hand_set_interval(self, name: str, seconds: int) -> None:
        self._edit(lambda c: c.modify_job(c.job(name).with_changes(interval=f"{seconds} seconds")))

    @rule(name=NAMES, alert=ALERTS)
    def hand_set_alert(self, name: str, alert: str | None) -> None:
        def change(c: Catalog) -> Catalog:
            job = c.job(name)
            return c.modify_job(
                make_job(name, 60, self.prefix, alert).with_changes(
                    interval=job.interval, enabled=job.enabled
                )
            )

        self._edit(change)

    @rule(name=NAMES)
    def hand_remove(self, name: str) -> None:
        self._edit(lambda c: c.remove_job(name))

    @rule(name=NAMES, seconds=SECONDS, alert=ALERTS)
    def hand_add(self, name: str, seconds: int, alert: str | None) -> None:
        self.seen.add(name)
        self._edit(lambda c: c.add_jobs([make_job(name, seconds, self.prefix, alert)]))

    # -- API writes --------------------------------------------------------------------------

    def _api(self, action: Any) -> None:
        # Refused (duplicate, unknown, or a conflict with a hand edit): nothing changes.
        with contextlib.suppress(JobActionError):
            action()

    @rule(name=NAMES, seconds=SECONDS, alert=ALERTS)
    def api_add(self, name: str, seconds: int, alert: str | None) -> None:
        self.seen.add(name)
        job = make_job(name, seconds, self.prefix, alert)
        self._api(lambda: self.scheduler.add_job(job))

    @rule(name=NAMES, seconds=SECONDS, alert=ALERTS)
    def api_modify(self, name: str, seconds: int, alert: str | None) -> None:
        job = make_job(name, seconds, self.prefix, alert)
        self._api(lambda: self.scheduler.modify_job(job))

    @rule(name=NAMES)
    def api_remove(self, name: str) -> None:
        self._api(lambda: self.scheduler.remove_job(name))

    @rule(name=NAMES)
    def pause(self, name: str) -> None:
        self._api(lambda: self.scheduler.pause_job(name))

    @rule(name=NAMES)
    def resume(self, name: str) -> None:
        self._api(lambda: self.scheduler.resume_job(name))

    @rule()
    def reload(self) -> None:
        self.scheduler.reload()
        on_disk = load_config(self.path) if self.path.exists() else Catalog()
        assert self.scheduler.jobs == list(on_disk.jobs.values())

    # -- time --------------------------------------------------------------------------------

    @precondition(lambda self: self.scheduler.jobs)
    @rule(seconds=st.sampled_from([7, 30, 59]))
    def advance(self, seconds: int) -> None:
        """At most one slot per job passes (every interval is a minute or more)."""
        target = self.clock.now() + timedelta(seconds=seconds)
        due = {
            job.name
            for job in self.scheduler.jobs
            if (when := self.scheduler.next_run(job.name)) is not None and when <= target
        }
        before = {name: len(jft.calls(self.prefix + name)) for name in self.seen}
        self.clock.advance(timedelta(seconds=seconds))
        assert self.scheduler.wait_idle(10.0)
        ran = {name for name in self.seen if len(jft.calls(self.prefix + name)) > before[name]}
        assert ran == due

    # -- what must always hold ---------------------------------------------------------------

    @invariant()
    def jobs_and_schedule_agree(self) -> None:
        now = self.clock.now()
        jobs = self.scheduler.jobs
        for job in jobs:
            assert self.scheduler.get_job(job.name) is job
            paused = self.scheduler.pause_of(job.name) is not None  # the store's, not the file's
            expected = job.next_after(now) if job.enabled and not paused else None
            assert self.scheduler.next_run(job.name) == expected, job.name
        names = {job.name for job in jobs}
        for name in self.seen - names:
            assert self.scheduler._processor.next_run(name) is None, name

    @invariant()
    def alerts_are_those_of_the_jobs(self) -> None:
        built = self.scheduler._alerts.by_name
        alerting = {job.name: job for job in self.scheduler.jobs if job.messages}
        assert set(built) == set(alerting)
        for name, job in alerting.items():
            [handler] = built[name]
            assert handler.recipients == job.messages[Event.FAILED].recipients, name  # type: ignore[attr-defined]


InStep.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_in_step(tmp_path: Path) -> None:
    InStep.directory = tmp_path
    InStep.TestCase().runTest()
