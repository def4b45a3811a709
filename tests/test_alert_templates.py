"""Alert templates: one reader for the file and the API, read and compiled once, and alerts
rebuilt only for the jobs and groups a change touched."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jobs_for_tests as jft
import pytest
from smtp_server import SmtpServer

from jobscheduler import (
    EmailConfiguration,
    Event,
    FakeClock,
    InvalidJobError,
    Job,
    JobType,
    Message,
    Scheduler,
)
from jobscheduler.config import load_config
from jobscheduler.model import templatereader

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def failing(name: str, **fields: object) -> Job:
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:explode",
        start=T0 + timedelta(hours=1),
        interval="1 day",
        timezone="UTC",
        **fields,  # type: ignore[arg-type]
    )


def config_text(port: int, template_file: str, jobs: int = 1) -> str:
    entries = "".join(
        f"  job{i}:\n"
        f"    type: internal\n"
        f"    command: {jft.__name__}:explode\n"
        f"    start: 2024-01-01 01:00:00\n"
        f"    interval: 1 day\n"
        f"    timezone: UTC\n"
        f"    messages:\n"
        f"      failed: {{recipients: [ops@example.com], template_file: {template_file}}}\n"
        for i in range(jobs)
    )
    return (
        "email:\n"
        "  from_address: scheduler@example.com\n"
        f"  smtp: {{host: 127.0.0.1, port: {port}, timeout: 5s}}\n"
        f"jobs:\n{entries}"
    )


def test_a_template_file_in_the_home_directory_is_found_by_the_file_and_the_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "t.txt").write_text("Home template: {{ JobName }} {{ JobStatus }}\n")
    path = tmp_path / "conf" / "jobs.yaml"
    path.parent.mkdir()
    with SmtpServer() as server:
        path.write_text(config_text(server.port, "~/t.txt"))
        load_config(path)  # the file reader accepts it ...
        scheduler = Scheduler(path, clock=FakeClock(T0))  # ... and so does the scheduler
        try:
            scheduler.start()
            scheduler.run_now("job0")
            assert scheduler.wait_idle(10.0)
            [mail] = server.wait_for(1)
        finally:
            scheduler.shutdown(wait=False)
    assert mail.body == "Home template: job0 FAILED\n"


def test_the_api_reads_template_files_as_the_file_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "t.txt").write_text("{{ JobName }}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for scheduler in (Scheduler(), Scheduler(tmp_path / "sub" / "jobs.yaml")):
        try:
            scheduler.set_email(EmailConfiguration("s@example.com"))
            home = {Event.FAILED: Message("a@example.com", template_file="~/t.txt")}
            scheduler.add_job(failing("ok", messages=home))
            missing = {Event.FAILED: Message("a@example.com", template_file="~/none.txt")}
            with pytest.raises(
                InvalidJobError, match=re.escape(str(tmp_path / "none.txt"))
            ) as info:
                scheduler.add_job(failing("bad", messages=missing))
            assert info.value.problem.key == "messages.failed.template_file"
        finally:
            scheduler.shutdown(wait=False)


def test_templates_are_read_once_and_alerts_rebuilt_only_where_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    original = templatereader.read_template_file

    def counting(name: str, base_dir: Path) -> tuple[Path, str]:
        reads.append(name)
        return original(name, base_dir)

    monkeypatch.setattr(templatereader, "read_template_file", counting)
    (tmp_path / "t.txt").write_text("{{ JobName }} v1")
    (tmp_path / "other.txt").write_text("{{ JobName }} other")
    path = tmp_path / "jobs.yaml"
    path.write_text(config_text(25, "t.txt", jobs=3))
    scheduler = Scheduler(path, clock=FakeClock(T0))
    try:
        assert reads == ["t.txt"]  # three jobs, one file: read once, for file and alerts
        before = dict(scheduler._alerts.by_name)
        other = {Event.FAILED: Message("a@example.com", template_file="other.txt")}
        scheduler.add_job(failing("new", messages=other))
        assert reads == ["t.txt", "other.txt"]  # checked, written, read back, alerts: once
        after = scheduler._alerts.by_name
        assert set(after) == {"job0", "job1", "job2", "new"}
        assert all(after[name] is before[name] for name in before)  # untouched: kept
        scheduler.modify_job(scheduler.get_job("job1").with_changes(priority=3))
        assert scheduler._alerts.by_name["job1"] is not before["job1"]
        assert scheduler._alerts.by_name["job0"] is before["job0"]
        assert reads == ["t.txt", "other.txt"]

        # A template file edited takes effect on reload, like an edit of the file.
        (tmp_path / "t.txt").write_text("{{ JobName }} v2")
        scheduler.reload()
        assert sorted(reads) == sorted(["t.txt", "other.txt", "t.txt", "other.txt"])
        [handler] = scheduler._alerts.by_name["job0"]
        assert handler.template.render(JobName="x") == "x v2"  # type: ignore[attr-defined]

        # A changed email: section rebuilds every alert.
        kept = dict(scheduler._alerts.by_name)
        scheduler.set_email(EmailConfiguration("other@example.com"))
        assert all(scheduler._alerts.by_name[name] is not kept[name] for name in kept)
        assert all(
            h.config.from_address == "other@example.com"  # type: ignore[attr-defined]
            for handlers in scheduler._alerts.by_name.values()
            for h in handlers
        )
    finally:
        scheduler.shutdown(wait=False)
