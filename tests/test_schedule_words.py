"""A job's schedule in words (the job page): cron through cron-descriptor, calendar
expressions and intervals in words as far as they go, always with the job's zone; the short
form tools read (`describe_schedule`) unchanged."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from jobscheduler import Job
from jobscheduler.model.event import Event
from jobscheduler.model.job import Dependence
from jobscheduler.model.jobschedule import describe_schedule
from jobscheduler.model.schedulewords import cron_in_words, schedule_in_words


def job(**options: object) -> Job:
    options.setdefault("timezone", "UTC")
    return Job("j", command=["true"], **options)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def fresh_words() -> Iterator[None]:
    cron_in_words.cache_clear()
    yield
    cron_in_words.cache_clear()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}, "At 02:30 AM (Europe/Berlin)"),
        ({"cron": "0 9 * * MON-FRI"}, "At 09:00 AM, Monday through Friday (UTC)"),
        ({"cron": "*/10 * * * * *"}, "Every 10 seconds (UTC)"),
        ({"cron": "0 0 L * *"}, "At 12:00 AM, on the last day of the month (UTC)"),
        (
            {"cron": "0 3 * * *", "timezone": "Asia/Tokyo", "start": datetime(2026, 1, 1)},
            "At 03:00 AM, from 2026-01-01 00:00 (Asia/Tokyo)",
        ),
        (
            {"calendar": "Mon..Fri 09:00", "timezone": "Europe/Berlin"},
            "Monday through Friday at 09:00 (Europe/Berlin)",
        ),
        ({"calendar": "*-*~03 23:00"}, "On the 3rd last day of the month at 23:00 (UTC)"),
        ({"calendar": "*:0/15"}, "Every 15 minutes (UTC)"),
        ({"calendar": "daily"}, "Every day at 00:00 (UTC)"),
        ({"calendar": "hourly"}, "Every hour at minute 0 (UTC)"),
        ({"calendar": "Mon,Thu 12:30:15"}, "On Monday and Thursday at 12:30:15 (UTC)"),
        ({"calendar": "*-*-01 06:00"}, "On day 1 of the month at 06:00 (UTC)"),
        ({"calendar": "yearly"}, "On January 1 at 00:00 (UTC)"),
        # The expression's own zone wins over the job's, as it does for the slots.
        (
            {"calendar": "*-*~01 23:00 UTC", "timezone": "Europe/Berlin"},
            "On the last day of the month at 23:00 (UTC)",
        ),
        # A shape not put in words: systemd's normalised form, still with the zone.
        ({"calendar": "*-*-01/2 04:00"}, "Calendar *-*-01/2 04:00:00 (UTC)"),
        (
            {"interval": "90 minutes", "start": datetime(2024, 1, 1)},
            "Every 90 minutes, from 2024-01-01 00:00 (UTC)",
        ),
        (
            {
                "interval": "1 day", "start": datetime(2024, 1, 1, 2, 30),
                "stop": datetime(2025, 1, 1), "timezone": "Europe/Berlin",
            },
            "Every day, from 2024-01-01 02:30, until 2025-01-01 00:00 (Europe/Berlin)",
        ),
        ({"start": datetime(2026, 1, 1, 3)}, "Once, at 2026-01-01 03:00 (UTC)"),
        ({"on_demand": True}, "On demand (submitted or run now)"),
        (
            {"dependence": Dependence("nightly", Event.SUCCESSFUL, timedelta(seconds=10))},
            "When nightly succeeds, 10 seconds later",
        ),
    ],
)  # fmt: skip
def test_the_schedule_in_words(options: dict[str, object], words: str) -> None:
    assert schedule_in_words(job(**options)) == words


def test_the_short_form_tools_read_is_unchanged() -> None:
    berlin = job(cron="30 2 * * *", timezone="Europe/Berlin")
    assert describe_schedule(berlin) == "cron 30 2 * * *"
    assert describe_schedule(job(calendar="Mon..Fri 09:00")) == "calendar Mon..Fri 09:00"


def test_without_cron_descriptor_a_cron_is_shown_plainly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cron_descriptor", None)  # the import fails
    berlin = job(cron="30 2 * * *", timezone="Europe/Berlin")
    assert schedule_in_words(berlin) == "Cron 30 2 * * * (Europe/Berlin)"
