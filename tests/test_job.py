"""Job, Dependence, JobGroup and Message: normalisation and every validation rule.

Each invalid definition raises `InvalidJobError` (a `JobActionError`) whose `Problem` names
the job and the key at fault, with a message saying what is wrong.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobscheduler import (
    Dependence,
    Event,
    Interval,
    InvalidJobError,
    Job,
    JobActionError,
    JobGroup,
    JobType,
    Message,
    Problem,
    Unit,
)
from jobscheduler.triggers.interval import IntervalError

START = datetime(2024, 1, 1, 1, 0)


def make(**changes: Any) -> Job:
    values: dict[str, Any] = {
        "name": "j",
        "command": "true",
        "start": START,
        "interval": "1 day",
        "timezone": "UTC",
    }
    values.update(changes)
    return Job(**values)


def refused(**changes: Any) -> InvalidJobError:
    with pytest.raises(InvalidJobError) as caught:
        make(**changes)
    return caught.value


def only_problem(error: JobActionError) -> Problem:
    assert len(error.problems) == 1, error.problems
    return error.problems[0]


UNSCHEDULED = {"start": None, "interval": None}

# (changes, key, words of the message)
RULES: list[tuple[dict[str, Any], str, str]] = [
    # The specification's invalid jobs (§1.6, "Invalid Jobs").
    (
        {"start": datetime(2024, 1, 2), "stop": datetime(2024, 1, 1)},
        "stop",
        "start 2024-01-02T00:00:00+00:00 is after stop 2024-01-01T00:00:00+00:00",
    ),
    ({"interval": "0 days"}, "interval", "interval value must be above 0, not 0"),
    ({"interval": "-2 hours"}, "interval", "interval value must be above 0, not -2"),
    ({"interval": "3 fortnights"}, "interval", "unknown interval unit 'fortnights'"),
    ({"interval": "3 m"}, "interval", "'m' is ambiguous: write 'minute' or 'month'"),
    ({"interval": "weekly"}, "interval", "interval 'weekly' is not '<number> <unit>'"),
    ({"interval": 5}, "interval", "interval must be an Interval or text such as '1 day'"),
    ({"type": "batch"}, "type", "unknown job type 'batch' (expected 'external' or 'internal')"),
    ({"type": 3}, "type", "unknown job type 3"),
    ({"start": None}, "start", "a scheduled job needs a start date and time"),
    # The additions.
    # Issue 18: start alone is a one-off; with a stop it is refused.
    (
        {"interval": None, "stop": datetime(2024, 2, 1)},
        "stop",
        "a one-off job (start alone) runs once, at start: it has no stop",
    ),
    (
        {"dependence": Dependence("parent")},
        "dependence",
        "a job has exactly one of interval, cron, calendar, dependence or on_demand, not both "
        "interval and dependence",
    ),
    (
        UNSCHEDULED,
        "dependence",
        "a job needs a schedule (start and interval, cron, calendar, or start alone for one "
        "run), a dependence, or on_demand: true",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": "parent", "delay": timedelta(seconds=-5)}},
        "dependence.delay",
        "dependence delay must not be negative (-5 seconds)",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": "parent", "delay": "soon"}},
        "dependence.delay",
        "dependence delay must be a timedelta, e.g. timedelta(seconds=10), not 'soon'",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": "parent", "event": "not_started"}},
        "dependence.status",
        "dependence status must be successful, failed or both, not not_started",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": "parent", "event": "maybe"}},
        "dependence.status",
        "unknown event 'maybe'",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": ""}},
        "dependence.job",
        "dependence needs the name of the job it follows",
    ),
    (
        {**UNSCHEDULED, "dependence": {"job_name": "p", "when": "later"}},
        "dependence",
        "unexpected keyword argument 'when'",
    ),
    ({**UNSCHEDULED, "dependence": "parent"}, "dependence", "dependence must be a Dependence"),
    ({**UNSCHEDULED, "dependence": Dependence("j")}, "dependence", "a job cannot depend on itself"),
    ({"timezone": "Mars/Olympus_Mons"}, "timezone", "unknown time zone 'Mars/Olympus_Mons'"),
    ({"timezone": ""}, "timezone", "time zone must be an IANA name such as 'Europe/Berlin'"),
    ({"command": ""}, "command", "command must not be empty"),
    ({"command": "   "}, "command", "command must not be empty"),
    ({"command": []}, "command", "command must not be empty"),
    # The other field checks of job.py.
    ({"command": ["", "-x"]}, "command", "command must not start with an empty program name"),
    ({"command": ["ls", 3]}, "command", "every argument of command must be text"),
    ({"command": 42}, "command", "command must be text or a list of text, not 42"),
    ({"command": "echo 'open"}, "command", 'command "echo \'open" cannot be split'),
    (
        {"type": "internal", "command": "not a reference"},
        "command",
        "an internal job's command is 'package.module:name', not 'not a reference'",
    ),
    (
        {"type": JobType.INTERNAL, "command": ["pkg.mod:Job"]},
        "command",
        "an internal job's command is one 'package.module:name' text",
    ),
    ({"start": "2024-01-01"}, "start", "start must be a date and time, not '2024-01-01'"),
    ({"stop": "never"}, "stop", "stop must be a date and time, not 'never'"),
    ({"timeout": 0}, "timeout", "timeout must be above 0, not 0 seconds"),
    ({"timeout": timedelta(seconds=-1.5)}, "timeout", "timeout must be above 0, not -1.5 seconds"),
    ({"timeout": "1h"}, "timeout", "timeout must be a timedelta or a number of seconds"),
    ({"kill_grace": -1}, "kill_grace", "kill_grace must not be negative (-1 seconds)"),
    ({"max_instances": 0}, "max_instances", "max_instances must be at least 1, not 0"),
    ({"max_instances": 1.5}, "max_instances", "max_instances must be a whole number, not 1.5"),
    ({"max_instances": True}, "max_instances", "max_instances must be a whole number, not True"),
    ({"priority": "high"}, "priority", "priority must be a whole number, not 'high'"),
    ({"output_limit": -1}, "output_limit", "output_limit must not be negative, not -1"),
    ({"enabled": "yes"}, "enabled", "enabled must be true or false, not 'yes'"),
    ({"shell": 1}, "shell", "shell must be true or false, not 1"),
    ({"env": {"A": 1}}, "env", "env entries must be text: 'A': 1"),
    ({"env": "A=1"}, "env", "env must be a mapping of names to text"),
    ({"args": {"x": 1}}, "args", "args are for internal jobs"),
    (
        {"type": "internal", "command": "pkg.mod:Job", "args": {"1x": 1}},
        "args",
        "args keys must be Python identifiers, not '1x'",
    ),
    ({"args": ["x"]}, "args", "args must be a mapping of keyword arguments"),
    ({"messages": {"sometimes": Message(("a@example.com",))}}, "messages", "unknown event"),
    ({"messages": {Event.FAILED: "ops@example.com"}}, "messages.failed", "must be a Message"),
    ({"messages": {3: Message(("a@example.com",))}}, "messages", "must be an Event, not 3"),
    ({"cwd": 5}, "cwd", "cwd must be a path, not 5"),
    ({"name": " j "}, "name", "job name must not start or end with spaces"),
]


@pytest.mark.parametrize(
    ("changes", "key", "message"), RULES, ids=[f"{r[1]}:{r[2][:40]}" for r in RULES]
)
def test_each_rule_names_the_job_and_the_key(
    changes: dict[str, Any], key: str, message: str
) -> None:
    error = refused(**changes)
    problem = only_problem(error)
    assert problem.key == key
    assert problem.job == changes.get("name", "j")
    assert message in problem.message
    # The error's text says where: the job, the key, then what is wrong.
    assert str(error) == f"job {problem.job!r}, key {key!r}: {problem.message}"
    assert isinstance(error, JobActionError)


@pytest.mark.parametrize("name", ["", "   ", None, 7])
def test_empty_or_missing_name(name: object) -> None:
    error = refused(name=name)
    problem = only_problem(error)
    assert problem.key == "name"
    assert problem.job is None  # there is no name to give
    assert problem.message == f"a job needs a non-empty name, not {name!r}"


def test_name_is_required() -> None:
    with pytest.raises(TypeError):
        Job()  # type: ignore[call-arg]


def test_every_problem_is_reported_at_once() -> None:
    error = refused(command="", timezone="Nowhere/Land", timeout=-1, priority=None)
    assert [p.key for p in error.problems] == ["timezone", "command", "timeout", "priority"]
    assert all(p.job == "j" for p in error.problems)
    assert str(error).startswith("4 problems:\n  job 'j', key 'timezone': unknown time zone")


def test_interval_built_alone_is_refused_before_the_job_exists() -> None:
    """Interval(0, …) raises at once: an InvalidJobError naming the key (not yet a job)."""
    with pytest.raises(IntervalError) as caught:
        make(interval=Interval(0, Unit.DAY))
    assert caught.value.problem == Problem("interval value must be above 0, not 0", key="interval")
    assert isinstance(caught.value, InvalidJobError)


def test_dependence_built_alone_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Dependence("parent", delay=timedelta(seconds=-1))
    assert caught.value.problem.key == "dependence.delay"
    assert caught.value.problem.message == ("dependence delay must not be negative (-1 seconds)")
    with pytest.raises(InvalidJobError) as caught:
        Dependence("  ")
    assert caught.value.problem.key == "dependence.job"


def test_start_after_stop_compares_instants_not_wall_fields() -> None:
    """02:30 fold=1 is an hour after 02:30 fold=0 in Berlin, though the fields are equal."""
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    error = refused(
        start=datetime(2024, 10, 27, 2, 30, tzinfo=berlin, fold=1),
        stop=datetime(2024, 10, 27, 2, 30, tzinfo=berlin, fold=0),
        timezone="Europe/Berlin",
    )
    assert only_problem(error).key == "stop"
    # Equal instants are fine: the job runs once.
    j = make(start=START, stop=START)
    assert j.start == j.stop


# -- what a valid job becomes -----------------------------------------------------------


def test_values_are_normalised() -> None:
    j = make(
        type="INTERNAL",
        command=" pkg.jobs:Report ",
        interval="90 minutes",
        timeout=30,
        kill_grace=2.5,
        env={"A": "1"},
        args={"level": 3},
        messages={"failed": Message("ops@example.com")},  # type: ignore[arg-type]
    )
    assert j.type is JobType.INTERNAL
    assert j.command == "pkg.jobs:Report"
    assert j.interval == Interval(90, Unit.MINUTE)
    assert j.timeout == timedelta(seconds=30)
    assert j.kill_grace == timedelta(seconds=2.5)
    assert dict(j.env or {}) == {"A": "1"}
    assert dict(j.args) == {"level": 3}
    assert list(j.messages) == [Event.FAILED]
    assert j.messages[Event.FAILED].recipients == ("ops@example.com",)
    assert j.start == datetime(2024, 1, 1, 1, 0, tzinfo=UTC)


def test_command_forms() -> None:
    assert make(command=["ls", "-l"]).command == ("ls", "-l")
    assert make(command=["ls", "-l"]).argv == ["ls", "-l"]
    assert make(command="echo 'a b' c").argv == ["echo", "a b", "c"]
    assert make(command="echo $HOME | wc", shell=True).command == "echo $HOME | wc"


def test_dependence_as_mapping_and_text_event() -> None:
    j = make(
        **UNSCHEDULED,
        dependence={"job_name": "parent", "event": "failed", "delay": timedelta(seconds=10)},
    )
    assert j.dependence == Dependence("parent", Event.FAILED, timedelta(seconds=10))
    assert j.is_dependent
    assert Dependence("p", "both").event is Event.BOTH  # type: ignore[arg-type]
    assert Dependence("p").delay == timedelta(0)


def test_job_is_immutable_and_with_changes_validates() -> None:
    j = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.name = "other"  # type: ignore[misc]
    assert j.with_changes(interval="2 days").interval == Interval(2, Unit.DAY)
    assert j.with_changes(interval="2 days") != j
    assert j.with_changes() == j
    with pytest.raises(InvalidJobError) as caught:
        j.with_changes(stop=datetime(2000, 1, 1))
    assert only_problem(caught.value).key == "stop"


def test_zone_defaults_to_the_machines_zone() -> None:
    from jobscheduler.triggers.zones import local_zone

    j = make(timezone=None)
    assert j.zone is local_zone()


def test_aware_start_is_kept_as_given() -> None:
    start = datetime(2024, 1, 1, 9, tzinfo=UTC)
    j = make(start=start, timezone="Asia/Tokyo")
    assert j.start is start
    slot = j.next_after(start)
    assert slot is not None and slot.isoformat() == "2024-01-02T18:00:00+09:00"


# -- JobGroup and Message --------------------------------------------------------------


def test_group_normalises_job_names() -> None:
    group = JobGroup("ops", ["a", "b"])  # type: ignore[arg-type]
    assert group.job_names == ("a", "b")


@pytest.mark.parametrize(
    ("name", "job_names", "key", "message", "group"),
    [
        ("", ["a"], "name", "a group needs a non-empty name, not ''", None),
        (None, ["a"], "name", "a group needs a non-empty name, not None", None),
        ("ops", [], "jobs", "a group lists at least one job", "ops"),
        ("ops", "a", "jobs", "job_names must be a list of job names, not one text", "ops"),
        ("ops", ["a", "a"], "jobs", "job 'a' is listed twice", "ops"),
        ("ops", ["a", ""], "jobs", "job names must be non-empty text, not ''", "ops"),
        ("ops", ["a", 3], "jobs", "job names must be non-empty text, not 3", "ops"),
    ],
)
def test_group_rules(
    name: object, job_names: object, key: str, message: str, group: str | None
) -> None:
    with pytest.raises(InvalidJobError) as caught:
        JobGroup(name, job_names)  # type: ignore[arg-type]
    problem = only_problem(caught.value)
    assert (problem.key, problem.message, problem.group) == (key, message, group)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipients": ()}, "an alert needs at least one recipient"),
        ({"recipients": ("nobody",)}, "recipient 'nobody' is not an e-mail address"),
        ({"recipients": ("a@b.c\nBcc: x@y.z",)}, "contains a line break"),
        (
            {"recipients": ("a@b.c",), "template": "x", "template_file": "y"},
            "give template or template_file, not both",
        ),
    ],
)
def test_message_rules(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Message(**kwargs)


@pytest.mark.parametrize("delay", [10000, 10, 0, 1.5, -5])
def test_a_bare_number_delay_is_refused_the_spec_s_are_milliseconds(delay: float) -> None:
    """`Dependence("jobA", Event.SUCCESSFUL, 10000)` (the spec's 10 s) used to wait 2 h 46 min."""
    with pytest.raises(InvalidJobError) as caught:
        Dependence("jobA", Event.SUCCESSFUL, delay)  # type: ignore[arg-type]
    problem = caught.value.problem
    assert problem.key == "dependence.delay"
    assert "give a timedelta, e.g. timedelta(seconds=10)" in problem.message
    assert "the spec's bare numbers are milliseconds" in problem.message


@pytest.mark.parametrize("bad", ["a\x0bb", "a\x85b", "a\u2028b", "a\x00b", "tab\there", "x\xa0"])
def test_job_and_group_names_must_be_printable(bad: str) -> None:
    error = refused(name=bad)
    problems = [p for p in error.problems if "not printable" in p.message]
    assert [(p.job, p.key) for p in problems] == [(bad, "name")]
    with pytest.raises(InvalidJobError) as caught:
        JobGroup(bad, ["j"])
    assert (caught.value.problem.group, caught.value.problem.key) == (bad, "name")
    assert "not printable" in caught.value.problem.message
    with pytest.raises(InvalidJobError) as caught:
        Dependence(bad)
    assert caught.value.problem.key == "dependence.job"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, False),
        ({"timeout": 30, "description": "no policy acts after a run"}, False),
        ({"overlap": "skip", "host": "db-*"}, False),  # decided before a run, not after
        ({"catch_up": "none"}, False),
        ({"retry": {"attempts": 3}}, True),
        ({"pause_after_failures": 2}, True),
        ({"catch_up": "latest"}, True),
    ],
)
def test_has_after_run_policy_says_whether_a_runs_end_calls_for_a_policy(
    changes: dict[str, Any], expected: bool
) -> None:
    assert make(**changes).has_after_run_policy is expected


def test_every_problem_of_a_job_is_reported_at_once_in_field_order() -> None:
    with pytest.raises(InvalidJobError) as info:
        make(timezone="Mars/Olympus", shell="yes", timeout=-1, on_node_loss="retry", cwd=3)
    keys = [problem.key for problem in info.value.problems]
    assert keys == ["timezone", "shell", "cwd", "timeout", "on_node_loss"]
