"""Jobs defined in code with ``@scheduler.job(...)``: listed with the file's jobs, never
written into the file, one name in one place only, the function still callable and
``.submit(**args)`` asking for a run with those arguments."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobscheduler import (
    Dependence,
    DuplicateNameError,
    FakeClock,
    Interval,
    InvalidJobError,
    Job,
    JobActionError,
    JobFunction,
    Unit,
    current_run,
)
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine
PY = "python3"


def wait_until(check: Callable[[], object], within: float = WAIT) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def yaml_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "jobs:\n"
        "  from-file:\n"
        "    type: external\n"
        f"    command: [{PY}, -c, pass]\n"
        "    start: 2026-06-01 09:00:00\n"
        "    interval: 1 day\n"
        "    timezone: UTC\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def sched(clock: FakeClock, yaml_file: Path) -> Iterator[Scheduler]:
    s = Scheduler(yaml_file, clock=clock, state="memory")
    yield s
    s.shutdown(wait=False)


def test_a_decorated_function_is_a_job_listed_with_the_files(
    sched: Scheduler, clock: FakeClock, yaml_file: Path
) -> None:
    calls: list[tuple[str, str | None]] = []

    @sched.job(interval="90 minutes", timeout=timedelta(minutes=5), max_instances=1)
    def tidy(where: str = "here") -> str:
        run = current_run()
        calls.append((where, None if run is None else run.job))
        return where

    assert isinstance(tidy, JobFunction)
    assert tidy.__name__ == "tidy" and tidy.job_name == "tidy"
    assert tidy("there") == "there"  # still callable, here and now
    assert calls == [("there", None)]
    assert [(j.name, j.source) for j in sched.jobs] == [("from-file", "file"), ("tidy", "code")]
    job = sched.get_job("tidy")
    assert job.interval == Interval(90, Unit.MINUTE)
    assert (job.timeout, job.max_instances) == (timedelta(minutes=5), 1)
    assert job.command is tidy.function
    assert sched.next_run("tidy") == T0 + timedelta(minutes=90)  # counted from now
    assert "tidy" not in yaml_file.read_text(encoding="utf-8")
    sched.start()
    clock.advance(timedelta(minutes=90))
    wait_until(lambda: calls[1:] == [("here", "tidy")])
    assert sched.wait_idle(WAIT)
    assert [r.state for r in sched.history("tidy")] == [RunState.SUCCEEDED]


def test_jobs_defined_in_code_never_reach_the_file(
    sched: Scheduler, yaml_file: Path, clock: FakeClock
) -> None:
    @sched.job("named", cron="0 3 * * *", timezone="UTC")
    def anything() -> None:
        pass

    sched.add_job(Job("added", command=[PY, "-c", "pass"], start=T0, interval="1 hour"))
    sched.pause_job("named")  # a pause is the store's: the definition is untouched
    assert sched.pause_of("named") is not None and sched.get_job("named").enabled
    sched.remove_job("named")
    text = yaml_file.read_text(encoding="utf-8")
    assert "added:" in text and "named" not in text and "anything" not in text
    assert [j.name for j in sched.jobs] == ["from-file", "added"]
    again = Scheduler(yaml_file, clock=clock, state="memory")
    assert [j.name for j in again.jobs] == ["from-file", "added"]
    again.shutdown()


def test_a_name_in_code_and_in_the_file_is_refused_naming_both(
    sched: Scheduler, yaml_file: Path
) -> None:
    with pytest.raises(DuplicateNameError) as caught:

        @sched.job("from-file", on_demand=True)
        def clash() -> None:
            pass

    message = str(caught.value)
    assert "in code (" in message and "clash" in message and str(yaml_file) in message

    @sched.job(on_demand=True)
    def only_code() -> None:
        pass

    with pytest.raises(DuplicateNameError, match="only_code"):
        sched.add_job(Job("only_code", command=[PY, "-c", "pass"], on_demand=True))
    assert "only_code" not in yaml_file.read_text(encoding="utf-8")
    with pytest.raises(DuplicateNameError, match="defined in code already"):
        sched.job("only_code", on_demand=True)(lambda: None)


def test_a_reload_that_brings_a_code_jobs_name_is_refused_and_logged(
    sched: Scheduler, yaml_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @sched.job(on_demand=True)
    def report() -> None:
        pass

    sched.start()
    yaml_file.write_text(
        yaml_file.read_text(encoding="utf-8")
        + f"  report:\n    type: external\n    command: [{PY}, -c, pass]\n    on_demand: true\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.ERROR), pytest.raises(DuplicateNameError, match="report"):
        sched.reload()
    assert any("reload refused" in r.getMessage() for r in caplog.records)
    assert sched.get_job("report").source == "code"  # the definitions in force are kept
    assert [j.name for j in sched.jobs] == ["from-file", "report"]


def test_submit_calls_the_function_with_its_args(tmp_path: Path) -> None:
    s = Scheduler()  # the real clock: submitted runs are polled from the store's queue
    got: list[dict[str, object]] = []

    @s.job(on_demand=True, args={"base": 1})
    async def compute(base: int, extra: int = 0) -> None:
        await asyncio.sleep(0)
        run = current_run()
        assert run is not None and run.trigger == "submit"
        got.append({"base": base, "extra": extra, "args": dict(run.args or {})})

    s.start()
    try:
        queue_id = compute.submit(extra=41)
        wait_until(lambda: got)
        assert got == [{"base": 1, "extra": 41, "args": {"extra": 41}}]
        wait_until(
            lambda: [r.state for r in s.state_store.queue() if r.id == queue_id] == ["succeeded"]
        )
    finally:
        s.shutdown()


def test_a_code_job_may_depend_on_a_file_job(sched: Scheduler, clock: FakeClock) -> None:
    ran: list[str] = []

    @sched.job(dependence=Dependence("from-file"))
    def after() -> None:
        ran.append("after")

    with pytest.raises(InvalidJobError, match="depend"):
        sched.remove_job("from-file")
    sched.start()
    clock.advance(timedelta(hours=1))  # from-file's slot: 09:00
    wait_until(lambda: ran == ["after"])
    assert sched.wait_idle(WAIT)


def test_bad_uses_are_clear_errors(sched: Scheduler) -> None:
    with pytest.raises(TypeError, match="parentheses"):
        sched.job(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="colour"):
        sched.job(on_demand=True, colour="red")
    with pytest.raises(TypeError, match="function or class"):
        sched.job(on_demand=True)(42)  # type: ignore[arg-type]
    with pytest.raises(JobActionError, match="dependence"):

        @sched.job()
        def no_schedule() -> None:
            pass

    with pytest.raises(InvalidJobError, match="internal"):
        Job("ext", command=print, on_demand=True)  # a callable is an internal job's command
    assert [j.name for j in sched.jobs] == ["from-file"]
