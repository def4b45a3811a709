"""The command line's `next` and `list` for cron, calendar, one-off and on-demand jobs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobscheduler.app.cli import main

CONFIG = """\
jobs:
  nightly:
    command: [backup]
    cron: 0 3 * * *
    timezone: Europe/Berlin
  office:
    command: [poll]
    calendar: "Mon..Fri 09:00 UTC"
    stop: 2099-01-01 00:00:00
  later:
    command: [migrate]
    start: 2099-06-01 12:00:00
    timezone: UTC
  done:
    command: [migrate]
    start: 2001-06-01 12:00:00
    timezone: UTC
  asked:
    command: [reindex]
    on_demand: true
  ended:
    command: [old]
    cron: "*/5 * * * *"
    start: 2001-01-01 00:00:00
    stop: 2002-01-01 00:00:00
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(CONFIG)
    return path


def test_next_previews_every_kind(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, _ = run(capsys, "next", str(config), "nightly", "-n", "3")
    slots = [datetime.fromisoformat(line) for line in out.splitlines()]
    assert code == 0 and len(slots) == 3
    assert all(s.hour == 3 and s.minute == 0 for s in slots)
    _, out, _ = run(capsys, "next", str(config), "office", "-n", "5")
    slots = [datetime.fromisoformat(line).astimezone(UTC) for line in out.splitlines()]
    assert len(slots) == 5 and all(s.weekday() < 5 and s.hour == 9 for s in slots)
    _, out, _ = run(capsys, "next", str(config), "later", "-n", "5")
    assert out == "2099-06-01T12:00:00+00:00\n"  # one slot
    _, out, _ = run(capsys, "next", str(config), "done")
    assert out == "done has no slot left: it ran once at 2001-06-01T12:00:00+00:00\n"
    _, out, _ = run(capsys, "next", str(config), "asked")
    assert out == "asked has no schedule: it runs on demand\n"
    _, out, _ = run(capsys, "next", str(config), "ended")
    assert out.startswith("ended has no slot left (stop 2002-01-01")


def test_list_shows_the_kind_of_schedule(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, _ = run(capsys, "list", str(config))
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "cron 0 3 * * *" in rows["nightly"]
    assert "calendar Mon..Fri 09:00 UTC until 2099-01-01" in rows["office"]
    assert "once at 2099-06-01T12:00:00+00:00" in rows["later"]
    assert "on demand" in rows["asked"]


def test_validate_refuses_two_triggers_with_file_line_job_and_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "jobs:\n  j:\n    command: [x]\n    cron: 0 3 * * *\n    calendar: daily\n"
        "  k:\n    command: [x]\n    calendar: '*-*-* 25:00'\n"
        "  m:\n    command: [x]\n    on_demand: true\n    start: 2030-01-01 00:00:00\n"
    )
    code, _, err = run(capsys, "validate", str(path))
    assert code == 2
    lines = err.splitlines()
    assert any(f"{path}:5, job 'j', key 'calendar': a job has exactly one of" in x for x in lines)
    assert any(
        f"{path}:8, job 'k', key 'calendar': invalid calendar expression" in x for x in lines
    )
    assert any(f"{path}:11, job 'm', key 'on_demand': an on-demand job" in x for x in lines)
