"""`RunRecord`: checked when made, datetimes in UTC, built from an `Execution`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobscheduler import Event, Execution, SchedulerResult
from jobscheduler.state import RunRecord, RunState
from jobscheduler.state.records import TRIGGERS, run_key

T0 = datetime(2024, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def fields(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "run_id": "7",
        "job": "j",
        "slot": T0,
        "trigger": "schedule",
        "attempt": 1,
        "node": "n",
        "state": RunState.SUCCEEDED,
        "started": T0,
        "ended": T0 + timedelta(seconds=2),
    }
    values.update(changes)
    return values


def test_fields_and_defaults() -> None:
    record = RunRecord(**fields())
    assert (record.exit_code, record.reason, record.output_tail, record.last_slot) == (
        None,
        None,
        "",
        None,
    )
    assert record.duration == 2.0
    assert RunRecord(**fields(state="running", ended=None)).duration is None
    for never_ran in ("not_started", "skipped"):
        assert RunRecord(**fields(state=never_ran)).duration is None
    assert RunRecord(**fields(state="abandoned")).duration == 2.0
    assert record.key == ("j", T0, 1)
    assert RunRecord(**fields(slot=None, trigger="run_now")).key == "7"
    assert RunState.SUCCEEDED == "succeeded" and str(RunState.NOT_STARTED) == "not_started"
    assert [s.finished for s in RunState].count(False) == 1


def test_datetimes_are_converted_to_utc() -> None:
    record = RunRecord(
        **fields(
            slot=datetime(2024, 7, 1, 12, tzinfo=BERLIN),
            started=datetime(2024, 7, 1, 12, tzinfo=BERLIN),
            ended=datetime(2024, 7, 1, 13, tzinfo=timezone(timedelta(hours=2))),
        )
    )
    assert record.slot == datetime(2024, 7, 1, 10, tzinfo=UTC) and record.slot.tzinfo is UTC
    assert record.started.tzinfo is UTC and record.ended is not None
    assert record.ended.tzinfo is UTC and record.ended.hour == 11


def test_a_plain_state_string_is_accepted() -> None:
    assert RunRecord(**fields(state="failed")).state is RunState.FAILED


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"run_id": ""}, ValueError, "run_id must not be empty"),
        ({"run_id": 7}, TypeError, "run_id must be a string"),
        ({"job": ""}, ValueError, "job must not be empty"),
        ({"node": None}, TypeError, "node must be a string"),
        ({"trigger": "cron"}, ValueError, "trigger must be one of"),
        ({"attempt": 0}, ValueError, "attempt must be a whole number >= 1"),
        ({"attempt": True}, ValueError, "attempt"),
        ({"state": "done"}, ValueError, "'done' is not a valid RunState"),
        ({"started": datetime(2024, 1, 1)}, ValueError, "started must be an aware datetime"),
        ({"slot": datetime(2024, 1, 1)}, ValueError, "slot must be an aware datetime"),
        ({"started": "2024-01-01"}, TypeError, "started must be a datetime"),
        ({"exit_code": "0"}, TypeError, "exit_code"),
        ({"reason": 3}, TypeError, "reason must be a string"),
        ({"ended": None}, ValueError, "a succeeded record needs its ended time"),
        ({"state": RunState.RUNNING}, ValueError, "a running record has no ended time"),
        ({"last_slot": T0}, ValueError, "only a missed record has a last_slot"),
        (
            {"state": RunState.MISSED, "last_slot": T0 - timedelta(seconds=1)},
            ValueError,
            "before its last_slot",
        ),
    ],
)
def test_bad_values_are_refused(
    changes: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        RunRecord(**fields(**changes))


def test_records_are_frozen() -> None:
    record = RunRecord(**fields())
    with pytest.raises(AttributeError):
        record.state = RunState.FAILED  # type: ignore[misc]


def execution(**changes: Any) -> Execution:
    values: dict[str, Any] = {
        "job_name": "j",
        "run_id": 41,
        "slot": datetime(2024, 7, 1, 3, tzinfo=BERLIN),
        "started": T0,
        "ended": T0 + timedelta(seconds=5),
        "event": Event.SUCCESSFUL,
        "result": SchedulerResult.NORMAL,
        "exit_code": 0,
        "output_tail": "hello\n",
    }
    values.update(changes)
    return Execution(**values)


@pytest.mark.parametrize(
    ("event", "state"),
    [
        (Event.SUCCESSFUL, RunState.SUCCEEDED),
        (Event.FAILED, RunState.FAILED),
        (Event.NOT_STARTED, RunState.NOT_STARTED),
    ],
)
def test_from_execution_maps_the_event(event: Event, state: RunState) -> None:
    record = RunRecord.from_execution(execution(event=event), node="box-1")
    assert record == RunRecord(
        run_id="41",
        job="j",
        slot=datetime(2024, 7, 1, 1, tzinfo=UTC),
        trigger="schedule",
        attempt=1,
        node="box-1",
        state=state,
        started=T0,
        ended=T0 + timedelta(seconds=5),
        exit_code=0,
        output_tail="hello\n",
    )
    assert record.slot is not None and record.slot.tzinfo is UTC


def test_from_execution_of_a_running_run() -> None:
    running = execution(ended=None, event=None, result=None, exit_code=None, slot=None)
    record = RunRecord.from_execution(running, node="n", trigger="run_now", attempt=2)
    assert (record.state, record.ended, record.trigger, record.attempt) == (
        RunState.RUNNING,
        None,
        "run_now",
        2,
    )


@pytest.mark.parametrize(
    ("reason", "error", "expected"),
    [
        (None, None, None),
        ("exit code 3", None, "exit code 3"),
        ("raised ValueError", "ValueError: boom", "raised ValueError: boom"),
        ("raised KeyError", "KeyError", "raised KeyError"),
        ("timed out", "RuntimeError: late", "timed out (RuntimeError: late)"),
        (None, "OSError: gone", "OSError: gone"),
    ],
)
def test_from_execution_keeps_the_error_in_the_reason(
    reason: str | None, error: str | None, expected: str | None
) -> None:
    record = RunRecord.from_execution(
        execution(event=Event.FAILED, reason=reason, error=error), node="n"
    )
    assert record.reason == expected


def test_from_execution_bounds_the_output() -> None:
    record = RunRecord.from_execution(execution(output_tail="abcdef"), node="n", output_limit=4)
    assert record.output_tail == "cdef"
    record = RunRecord.from_execution(execution(output_tail="abcdef"), node="n", output_limit=0)
    assert record.output_tail == ""


def test_from_execution_checks_what_it_is_given() -> None:
    with pytest.raises(ValueError, match="trigger"):
        RunRecord.from_execution(execution(), node="n", trigger="later")
    with pytest.raises(ValueError, match="node must not be empty"):
        RunRecord.from_execution(execution(), node="")
    with pytest.raises(ValueError, match="attempt"):
        RunRecord.from_execution(execution(), node="n", attempt=0)
    with pytest.raises(ValueError, match="cannot end with"):
        RunRecord.from_execution(execution(event=Event.BOTH), node="n")


@given(
    st.datetimes(
        min_value=datetime(1990, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.sampled_from([UTC, BERLIN, ZoneInfo("America/New_York")]),
        allow_imaginary=False,
    ),
    st.sampled_from(sorted(TRIGGERS)),
    st.integers(1, 10),
)
def test_fast_and_checked_paths_agree(slot: datetime, trigger: str, attempt: int) -> None:
    """`from_execution` skips the checks; what it makes equals what the checks would make."""
    ran = execution(slot=slot, started=slot, ended=slot + timedelta(seconds=1), trigger=trigger)
    fast = RunRecord.from_execution(ran, node="n", attempt=attempt)
    checked = RunRecord(**{**fast.__dict__})
    assert fast == checked
    # (Compared in UTC: PEP 495 makes an ambiguous time unequal to every other zone's.)
    assert fast.slot == slot.astimezone(UTC) and fast.slot is not None
    assert fast.slot.tzinfo is UTC
    assert fast.started.tzinfo is UTC
    assert fast.key == run_key("j", slot.astimezone(UTC), attempt, "41")
