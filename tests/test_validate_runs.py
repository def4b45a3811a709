"""Whatever `validate` accepts, `run` starts: one validation path, and only JobActionError.

Job mappings with random values for each key (extreme dates, durations, zones, recipients
among them) are written to a real file; `load_config` (what ``jobscheduler validate`` runs)
either refuses the file with problems that name file, line, job and key, or accepts it, and
then a `Scheduler` on that file starts on a `FakeClock`, reports its next runs and shuts
down, raising nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobscheduler import ConfigFileError, FakeClock, JobActionError
from jobscheduler.config import load_config
from jobscheduler.scheduler import Scheduler

FUZZ = settings(
    max_examples=int(os.environ.get("JOBSCHEDULER_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

EXTREME_DATES = st.sampled_from(
    [
        "9999-12-31 23:59:59",
        "9999-12-31T23:59:59-05:00",
        "9999-12-31T23:59:59+14:00",
        "0001-01-01 00:00:00",
        "0001-01-01T00:00:00+14:00",
        "0001-01-01T00:00:00-12:00",
        "1970-01-01",
        "2038-01-19 03:14:08",
        "2024-03-31 02:30:00",
        "2024-10-27 02:30:00",
        "2024-02-29",
        "not a date",
    ]
)
DATES = st.one_of(
    EXTREME_DATES,
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)).map(
        lambda d: d.isoformat(sep=" ")
    ),
    st.dates().map(date.isoformat),
)
UNITS = ["ms", "s", "m", "h", "d", " seconds", " minutes", " hours", " days", "", "x"]
DURATIONS = st.one_of(
    st.builds(
        lambda n, unit: f"{n}{unit}",
        st.one_of(
            st.integers(min_value=-(10**20), max_value=10**20),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        st.sampled_from(UNITS),
    ),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["999999999999999s", "315360000s", "315360001s", "1h30m", "0s", "0"]),
    st.sampled_from(["10s", "500ms", "2m", "1h", "1d", "3650d"]),
)
INTERVAL_UNITS = ["second", "minute", "hour", "day", "week", "month", "year", "fortnight"]
INTERVALS = st.one_of(
    st.builds(
        lambda n, unit: f"{n} {unit}",
        st.integers(min_value=-(10**12), max_value=10**22),
        st.sampled_from(INTERVAL_UNITS),
    ),
    st.sampled_from(["1 day", "99999999999 years", "9999999999999999999999 seconds", "0 day"]),
    st.sampled_from(["1 second", "1 month", "1 year", "10000 years", "315576000000 seconds"]),
)
ZONES = st.one_of(
    st.sampled_from(
        [
            "UTC",
            "America/New_York",
            "Pacific/Kiritimati",
            "Etc/GMT+12",
            "Europe/Berlin",
            "Australia/Lord_Howe",
            "A" * 300,
            "../../etc/passwd",
            "/etc/localtime",
            "Europe/",
            "\0",
            "",
            " ",
        ]
    ),
    st.text(max_size=20),
)
RECIPIENTS = st.one_of(
    st.sampled_from(
        [
            "ops@example.com",
            "Ops Team <ops@example.com>",
            "ops@ex ample.com",
            '"q"@b.c',
            "a@[1.2.3.4]",
            "a\tb@c.d",
            "a@b, c@d",
            "a@b\u2028",
            "@",
            "a@",
            "é@exämple.com",
        ]
    ),
    st.text(max_size=15).map(lambda t: t + "@example.com"),
)
INTS = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20), st.integers(min_value=0, max_value=100)
)

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "start": DATES,
    "stop": DATES,
    "interval": INTERVALS,
    "timezone": ZONES,
    "timeout": DURATIONS,
    "kill_grace": DURATIONS,
    "max_instances": INTS,
    "priority": INTS,
    "output_limit": INTS,
    "enabled": st.booleans(),
    "dependence": st.fixed_dictionaries(
        {"job": st.sampled_from(["base", "j", "nosuch"])},
        optional={
            "status": st.sampled_from(["successful", "failed", "both", "never"]),
            "delay": DURATIONS,
        },
    ),
    "messages": st.fixed_dictionaries(
        {},
        optional={
            "failed": st.fixed_dictionaries({"recipients": st.lists(RECIPIENTS, max_size=2)}),
            "successful": st.fixed_dictionaries({"recipients": st.lists(RECIPIENTS, max_size=2)}),
        },
    ),
}

JOBS = st.dictionaries(st.sampled_from(sorted(VALUES)), st.none(), max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries({key: VALUES[key] for key in keys})
)


SCHEDULE = {"start": "2024-01-01 00:00:00", "interval": "1 day"}


def _config_text(job: dict[str, Any], name: str) -> str:
    """The file: an e-mail section, a plain job "base", and the job under test, scheduled
    unless the fuzzed keys say otherwise (a dependence replaces the default schedule)."""
    fields = dict(job) if "dependence" in job else {**SCHEDULE, **job}
    data = {
        # No server: an alert fails at once (connection refused, no retry) and is logged.
        "email": {
            "from_address": "scheduler@example.com",
            "smtp": {"host": "127.0.0.1", "port": 9, "retries": 0, "timeout": "1s"},
        },
        "jobs": {"base": {"command": ["true"], **SCHEDULE}, name: {"command": ["true"], **fields}},
    }
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


def _starts(path: Path, name: str) -> None:
    """`Scheduler(path)` + start on a FakeClock: nothing may raise."""
    scheduler = Scheduler(path, clock=FakeClock(NOW), max_workers=1)
    try:
        scheduler.start()
        for job in scheduler.jobs:
            scheduler.next_run(job.name)
            job.next_after(NOW)
            if job.next_after(NOW) is not None:
                job.next_after(job.next_after(NOW))  # type: ignore[arg-type]
        if scheduler.get_job(name).enabled:
            scheduler.run_now(name)  # a real process: `true`, with the job's limits
            assert scheduler.wait_idle(30)
            # A slot due within the claims-ahead lead is claimed already (a `running` row
            # whose start is its slot, which the FakeClock never reaches): only the asked
            # run is checked here.
            [record] = [r for r in scheduler.history(name) if r.trigger == "run_now"]
            assert record.state != "running"
    finally:
        scheduler.shutdown(wait=False)


@FUZZ
@given(job=JOBS, name=st.sampled_from(["j", "a job", "j\u00e9"]))
def test_whatever_validate_accepts_the_scheduler_starts(job: dict[str, Any], name: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "jobs.yaml"
        path.write_text(_config_text(job, name), encoding="utf-8")
        try:
            load_config(path)
        except ConfigFileError as exc:
            for problem in exc.problems:
                assert problem.file == str(path), problem
                assert problem.line is not None, problem
                assert problem.job is not None or problem.group is not None, problem
            return
        except JobActionError:
            raise AssertionError("a JobActionError that is not a ConfigFileError") from None
        _starts(path, name)


def test_the_examples_of_the_issue_are_refused_with_their_place(tmp_path: Path) -> None:
    """Each used to pass `validate` or end in a bare OverflowError/OSError."""
    cases = {
        "stop": {"stop": "9999-12-31 23:59:59", "timezone": "America/New_York"},
        "kill_grace": {"kill_grace": "999999999999999s"},
        "timeout": {"timeout": "999999999999999s"},
        "timezone": {"timezone": "A" * 300},
        "messages.failed.recipients": {"messages": {"failed": {"recipients": ["a@[1.2.3.4]"]}}},
    }
    for key, job in cases.items():
        path = tmp_path / f"{key}.yaml"
        job = {"start": "2024-01-01 00:00:00", "interval": "1 day", **job}
        path.write_text(_config_text(job, "j"))
        done = subprocess.run(
            [sys.executable, "-m", "jobscheduler", "validate", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (key, done.stdout, done.stderr)
        [line] = done.stderr.splitlines()
        assert line.startswith(f"jobscheduler: {path}:"), line
        assert f"job 'j', key '{key}'" in line, line
        assert "Traceback" not in done.stderr and "OverflowError" not in line


def test_add_refuses_what_run_would_refuse(tmp_path: Path) -> None:
    """`jobscheduler add` goes through the same checks: nothing reaches the file."""
    path = tmp_path / "jobs.yaml"
    path.write_text(_config_text({}, "j"))
    before = path.read_bytes()
    for settings_ in (
        ["stop=9999-12-31 23:59:59", "timezone=America/New_York"],
        ["kill_grace=999999999999999s"],
        [f"timezone={'A' * 300}"],
        ["messages={failed: {recipients: ['a@[1.2.3.4]']}}"],
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "jobscheduler",
                "add",
                str(path),
                "x",
                "command=[true]",
                "start=2024-01-01",
                "interval=1 day",
                *settings_,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (settings_, done.stdout, done.stderr)
        assert "job 'x'" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert path.read_bytes() == before
