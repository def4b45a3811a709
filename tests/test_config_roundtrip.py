"""The configuration file format: every key read, written and read back unchanged."""

from __future__ import annotations

import dataclasses
import shlex
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobscheduler import (
    Catalog,
    Dependence,
    EmailConfiguration,
    Event,
    Interval,
    Job,
    JobGroup,
    JobType,
    Message,
    SmtpSecurity,
    SmtpSettings,
    Unit,
)
from jobscheduler.config import ConfigStore, dump_config, load_config, parse_config
from jobscheduler.config.values import JOB_KEYS, format_duration, parse_duration
from jobscheduler.model.policies import Retry

REPO = Path(__file__).resolve().parent.parent
BERLIN = ZoneInfo("Europe/Berlin")


def full_catalog(template_dir: Path) -> Catalog:
    """A catalog in which every field of every definition differs from its default."""
    (template_dir / "templates").mkdir(exist_ok=True)
    (template_dir / "templates" / "failed.txt").write_text("{{ JobName }} failed\n")
    (template_dir / "templates" / "default.txt").write_text("Job {{ JobName }}: {{ JobStatus }}\n")
    email = EmailConfiguration(
        "scheduler@example.com",
        subject="[{{ JobStatus }}] {{ JobName }}",
        default_template="Job {{ JobName }}: {{ JobStatus }}\n",
        default_template_file="templates/default.txt",
        smtp=SmtpSettings(
            host="mail.example.com",
            port=465,
            security=SmtpSecurity.SSL,
            username="alerts",
            password_env="SMTP_PASSWORD",
            timeout=2.5,
            retries=7,
        ),
    )
    cleanup = Job(
        "nightly-cleanup",
        type=JobType.EXTERNAL,
        command=("find", "/tmp", "-name", "*.tmp", "-delete"),
        start=datetime(2003, 5, 10, 1, 0),
        stop=datetime(2004, 5, 10, 1, 0),
        interval=Interval(1, Unit.DAY),
        timezone="Europe/Berlin",
        enabled=False,
        timeout=timedelta(minutes=30),
        max_instances=2,
        priority=10,
        cwd="/var/tmp",
        env={"LANG": "C", "PORT": "8080", "EMPTY": ""},
        kill_grace=timedelta(milliseconds=2500),
        output_limit=1024,
        warn_after=timedelta(minutes=45),
        messages={
            Event.FAILED: Message(("ops@example.com",), template_file="templates/failed.txt"),
            Event.NOT_STARTED: Message(
                ("ops@example.com", "oncall@example.com"),
                template="Line one {{ JobName }}\n  line two\n",
            ),
        },
        description="Delete old temporary files: 'quoted', #not a comment",
        overlap="queue",
        catch_up="all",
        catch_up_window=timedelta(hours=6),
        retry=Retry(3, timedelta(seconds=30), timedelta(minutes=5), alert_each_attempt=True),
        pause_after_failures=4,
        host="worker-[12]",
        on_node_loss="rerun",
    )
    report = Job(
        "report",
        type=JobType.INTERNAL,
        command="jobscheduler.examples:Report",
        args={
            "directory": "/tmp",
            "max_files": 10,
            "ratio": 0.5,
            "flags": [True, False, None],
            "nested": {"when": date(2024, 2, 29), "at": datetime(2024, 1, 1, 12, 0)},
            "yes": "no",
        },
        dependence=Dependence("nightly-cleanup", Event.BOTH, delay=timedelta(seconds=10)),
    )
    shell = Job(
        "shell-job",
        command="ls -l | wc -l > /tmp/count",
        shell=True,
        start=datetime(2024, 1, 1, 2, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        interval=Interval(90, Unit.MINUTE),
    )
    # Issue 13 and 18: the other ways to start a job.
    cron = Job(
        "cron-job",
        command="true",
        cron="30 2 * * MON-FRI",
        timezone="Europe/Berlin",
        start=datetime(2024, 1, 1),
        stop=datetime(2030, 1, 1),
    )
    calendar = Job("calendar-job", command="true", calendar="*:0/15")
    on_demand = Job("on-demand-job", command="true", on_demand=True)
    once = Job("one-off", command="true", start=datetime(2026, 12, 31, 23, 0))
    group = JobGroup(
        "ops",
        ("nightly-cleanup", "report"),
        messages={Event.SUCCESSFUL: Message(("a@example.com", "b@example.com"))},
    )
    return Catalog.build([cleanup, report, shell, cron, calendar, on_demand, once], [group], email)


def test_every_job_field_has_a_key() -> None:
    names = {f.name for f in dataclasses.fields(Job)} - {"name"}
    assert set(JOB_KEYS) == names


def test_the_full_catalog_sets_every_field_to_a_non_default(tmp_path: Path) -> None:
    # Guards the round trip below: a field added to Job must be added here and to the file.
    catalog = full_catalog(tmp_path)
    for field in dataclasses.fields(Job):
        if field.name == "name":
            continue
        default = Job("x", command="true", start=datetime(2024, 1, 1), interval="1 day")
        values = [getattr(job, field.name) for job in catalog.jobs.values()]
        assert any(v != getattr(default, field.name) for v in values), field.name


def test_round_trip_of_every_field_through_a_file(tmp_path: Path) -> None:
    catalog = full_catalog(tmp_path)
    store = ConfigStore(tmp_path / "jobs.yaml")
    store.set_email(catalog.email)
    store.add_jobs(catalog.jobs.values())
    for group in catalog.groups.values():
        store.add_group(group)
    loaded = load_config(tmp_path / "jobs.yaml")
    assert loaded == catalog
    assert list(loaded.jobs) == list(catalog.jobs)
    assert dump_config(loaded) == dump_config(catalog)
    # and through a second store, as another process would see it
    assert ConfigStore(tmp_path / "jobs.yaml").read() == catalog


def test_dump_is_stable_and_reads_back_equal(tmp_path: Path) -> None:
    catalog = full_catalog(tmp_path)
    text = dump_config(catalog)
    again = parse_config(text, base_dir=tmp_path)
    assert again == catalog
    assert dump_config(again) == text
    assert dump_config(parse_config(dump_config(again), base_dir=tmp_path)) == text


def test_dump_layout_is_readable(tmp_path: Path) -> None:
    text = dump_config(full_catalog(tmp_path))
    assert text.startswith("email:\n")
    assert "\njobs:\n  nightly-cleanup:\n    description:" in text
    assert "    command: [find, /tmp, -name, '*.tmp', -delete]\n" in text
    assert "    start: 2003-05-10 01:00:00\n" in text  # naive: in the job's own zone
    assert "    start: 2024-01-01 02:30:00+05:30\n" in text  # an explicit offset is kept
    assert "    dependence: {job: nightly-cleanup, status: both, delay: 10s}\n" in text
    assert "    kill_grace: 2500ms\n" in text
    assert "        template: |\n          Line one {{ JobName }}\n            line two\n" in text
    assert "  ops:\n    jobs: [nightly-cleanup, report]\n" in text
    assert "    cron: 30 2 * * MON-FRI\n" in text
    assert "    calendar: '*:0/15'\n" in text
    assert "    on_demand: true\n" in text


def test_the_sample_configuration_loads_and_uses_every_feature() -> None:
    catalog = load_config(REPO / "sample_config.yaml")
    jobs = catalog.jobs
    assert catalog.email is not None and catalog.email.smtp.password_env == "SMTP_PASSWORD"
    assert catalog.email.smtp.security is SmtpSecurity.STARTTLS
    assert isinstance(jobs["nightly-cleanup"].command, tuple)
    assert isinstance(jobs["backup-db"].command, str)
    assert jobs["backup-db"].argv[3] == "/var/backups/app db.dump"
    assert jobs["backup-db"].env == {"PGHOST": "db.example.com", "PGPORT": "5432"}
    assert jobs["rotate-logs"].shell and not jobs["rotate-logs"].enabled
    assert jobs["disk-report"].type is JobType.INTERNAL and jobs["disk-report"].args
    statuses = {j.dependence.event for j in jobs.values() if j.dependence is not None}
    assert statuses == {Event.SUCCESSFUL, Event.FAILED, Event.BOTH}
    assert any(j.dependence and j.dependence.delay for j in jobs.values())
    assert {j.timezone for j in jobs.values()} >= {"Europe/Berlin", "America/New_York"}
    assert all(g.messages for g in catalog.groups.values())
    used = {f.name for j in jobs.values() for f in dataclasses.fields(Job) if getattr(j, f.name)}
    assert used >= set(JOB_KEYS) - {"enabled"}
    # the internal jobs it names exist and follow the protocols
    from jobscheduler import examples

    assert callable(examples.Report) and callable(examples.Touch)


def test_sample_report_and_touch_examples(tmp_path: Path) -> None:
    from jobscheduler.examples import Report, Touch

    (tmp_path / "a.tmp").write_text("12345")
    (tmp_path / "b.log").write_text("x")
    report = Report(directory=str(tmp_path), pattern="*.tmp")
    assert report.running_status is None and not report.is_done()
    report.run()
    assert report.is_done() and report.running_status == "successful"
    assert report.message_data["files"] == 1 and report.message_data["bytes"] == 5
    too_many = Report(directory=str(tmp_path), max_files=0)
    too_many.run()
    assert too_many.running_status == "2 files, more than 0"
    missing = Report(directory=str(tmp_path / "nope"))
    missing.run()
    assert "not a directory" in (missing.running_status or "")
    stopped = Report(directory=str(tmp_path))
    stopped.stop()
    stopped.run()
    assert stopped.running_status == "stopped"
    Touch(str(tmp_path / "beat")).run()
    assert (tmp_path / "beat").exists()


# -- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10s", timedelta(seconds=10)),
        ("500ms", timedelta(milliseconds=500)),
        ("2m", timedelta(minutes=2)),
        ("1h", timedelta(hours=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5s", timedelta(milliseconds=1500)),
        ("90 seconds", timedelta(seconds=90)),
        ("2 minutes", timedelta(minutes=2)),
        ("1d", timedelta(days=1)),
        ("10", timedelta(seconds=10)),
        (10, timedelta(seconds=10)),
        (2.5, timedelta(seconds=2.5)),
        (0, timedelta(0)),
    ],
)
def test_durations(text: str | float, expected: timedelta) -> None:
    assert parse_duration(text, "delay") == expected


@pytest.mark.parametrize("text", ["10 parsecs", "-5s", "abc", "", "s", "1h 2", True, None, [1]])
def test_bad_durations_name_the_key(text: object) -> None:
    with pytest.raises(ValueError, match="delay"):
        parse_duration(text, "delay")


@given(st.integers(min_value=0, max_value=10 * 365 * 86400 * 1_000_000))
def test_durations_are_written_so_that_they_read_back(micro: int) -> None:
    value = timedelta(microseconds=micro)
    written = format_duration(value)
    assert parse_duration(written, "timeout") == value


def _start_of(text: str) -> datetime:
    catalog = parse_config(f"jobs:\n  j:\n    command: 'true'\n    interval: 1 day\n{text}")
    start = catalog.jobs["j"].start
    assert start is not None
    return start


def test_datetimes_naive_in_the_job_zone_or_with_an_offset() -> None:
    berlin = "    timezone: Europe/Berlin\n"
    assert _start_of(f"    start: 2024-07-01 09:00:00\n{berlin}") == datetime(
        2024, 7, 1, 9, tzinfo=BERLIN
    )
    assert _start_of(f"    start: '2024-07-01T09:00'\n{berlin}") == datetime(
        2024, 7, 1, 9, tzinfo=BERLIN
    )
    assert _start_of(f"    start: 2024-07-01\n{berlin}") == datetime(2024, 7, 1, tzinfo=BERLIN)
    assert _start_of("    start: 2024-07-01 09:00:00Z\n") == datetime(2024, 7, 1, 9, tzinfo=UTC)
    assert _start_of("    start: '2024-07-01T09:00:00+02:00'\n") == datetime(
        2024, 7, 1, 7, tzinfo=UTC
    )
    assert _start_of("    start: 2024-07-01T09:00:00.250-05:00\n") == datetime(
        2024, 7, 1, 14, 0, 0, 250000, tzinfo=UTC
    )


def test_a_time_in_the_job_zone_is_written_as_wall_time_unless_ambiguous() -> None:
    first = datetime(2024, 10, 27, 2, 30, tzinfo=BERLIN)  # the first of two 02:30s
    second = datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=BERLIN)
    jobs = [
        Job("first", command="true", start=first, interval="1 day", timezone="Europe/Berlin"),
        Job("second", command="true", start=second, interval="1 day", timezone="Europe/Berlin"),
        Job("other", command="true", start=first, interval="1 day", timezone="Asia/Tokyo"),
    ]
    catalog = Catalog.build(jobs)
    text = dump_config(catalog)
    assert "start: 2024-10-27 02:30:00\n" in text
    assert "start: 2024-10-27 02:30:00+01:00\n" in text  # the second 02:30, in winter time
    assert "start: 2024-10-27 02:30:00+02:00\n" in text  # another zone: the offset is kept
    again = parse_config(text)
    for name in ("first", "second", "other"):
        # In UTC: Python never finds a fold=1 time equal to one of another tzinfo (PEP 495).
        read, written = again.jobs[name].start, catalog.jobs[name].start
        assert read is not None and written is not None
        assert read.astimezone(UTC) == written.astimezone(UTC)


def test_command_string_list_and_shell() -> None:
    catalog = parse_config(
        "jobs:\n"
        "  a: {command: 'tar -czf \"my backup.tgz\" /home', interval: 1h, start: 2024-01-01}\n"
        "  b: {command: [sleep, 10, 2.5, yes], interval: 1h, start: 2024-01-01}\n"
        "  c: {command: 'echo $HOME | wc', shell: true, interval: 1h, start: 2024-01-01}\n"
    )
    assert catalog.jobs["a"].argv == ["tar", "-czf", "my backup.tgz", "/home"]
    assert catalog.jobs["b"].command == ("sleep", "10", "2.5", "yes")  # written text stays text
    assert catalog.jobs["c"].shell and catalog.jobs["c"].command == "echo $HOME | wc"
    assert shlex.split(catalog.jobs["a"].command)  # type: ignore[arg-type]


def test_empty_values_mean_the_default_and_short_dependence() -> None:
    catalog = parse_config(
        "jobs:\n"
        "  a:\n    command: 'true'\n    start: 2024-01-01\n    interval: 1 day\n"
        "    timeout:\n    timezone: ~\n    env:\n    enabled:\n"
        "  b:\n    command: 'true'\n    dependence: a\n"
    )
    a = catalog.jobs["a"]
    assert a.timeout is None and a.timezone is None and a.env is None and a.enabled
    assert catalog.jobs["b"].dependence == Dependence("a")


def test_anchors_and_merge_keys() -> None:
    catalog = parse_config(
        "jobs:\n"
        "  a: &base\n"
        "    command: [echo, a]\n"
        "    start: 2024-01-01 06:00:00\n"
        "    interval: 1 day\n"
        "    priority: 3\n"
        "  b:\n"
        "    <<: *base\n"
        "    command: [echo, b]\n"
        "  c:\n"
        "    <<: [*base]\n"
        "    priority: 9\n"
    )
    a, b, c = catalog.jobs["a"], catalog.jobs["b"], catalog.jobs["c"]
    assert b.command == ("echo", "b") and b.priority == 3 and b.start == a.start
    assert c.command == ("echo", "a") and c.priority == 9


def test_empty_and_comment_only_files_are_empty_catalogs() -> None:
    assert parse_config("") == Catalog()
    assert parse_config("# nothing yet\n") == Catalog()
    assert parse_config("jobs:\ngroups:\n") == Catalog()
    assert dump_config(Catalog()) == "jobs: {}\n"
    assert parse_config(dump_config(Catalog())) == Catalog()


def test_names_that_look_like_other_types_stay_names() -> None:
    jobs = [
        Job(name, command="true", start=datetime(2024, 1, 1), interval="1 day")
        for name in ("yes", "123", "2024-01-01", "null", "<<", "a: b", "#x", "- y")
    ]
    catalog = Catalog.build(jobs)
    again = parse_config(dump_config(catalog))
    assert list(again.jobs) == list(catalog.jobs)
    assert again == catalog


def test_email_default_template_file_is_read_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "body.txt").write_text("Body {{ JobName }}\n")
    (tmp_path / "jobs.yaml").write_text(
        "email: {from_address: s@example.com, default_template_file: body.txt}\n"
    )
    email = load_config(tmp_path / "jobs.yaml").email
    assert email is not None
    assert email.default_template == "Body {{ JobName }}\n"
    assert email.default_template_file == "body.txt"
    assert "default_template_file: body.txt" in dump_config(Catalog(email=email))
    assert "Body" not in dump_config(Catalog(email=email))


def test_spec_event_names_are_accepted_in_messages() -> None:
    catalog = parse_config(
        "email: {from_address: s@example.com}\n"
        "jobs:\n  a:\n    command: 'true'\n    start: 2024-01-01\n    interval: 1 day\n"
        "    messages:\n      NOTSTARTED: {recipients: x@example.com}\n"
        "      Successful: {recipients: [y@example.com]}\n"
    )
    messages = catalog.jobs["a"].messages
    assert set(messages) == {Event.NOT_STARTED, Event.SUCCESSFUL}
    assert messages[Event.NOT_STARTED].recipients == ("x@example.com",)
