"""How a Job is stored: core slots, options shared while they are the defaults."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobscheduler import Event, Job, JobGroup, JobType, Message
from jobscheduler.model.job import JOB_OPTIONS
from jobscheduler.model.joblayout import DEFAULT_OPTIONS, OPTION_NAMES, shares_default_options

START = datetime(2030, 1, 1, tzinfo=UTC)


def plain(name: str = "a", **changes: object) -> Job:
    return Job(name, command="true", start=START, interval="1 hour", **changes)  # type: ignore[arg-type]


def test_a_job_without_options_shares_the_default_object() -> None:
    a, b = plain("a"), plain("b")
    assert shares_default_options(a) and shares_default_options(b)
    assert not hasattr(a, "__dict__")


def test_options_given_as_their_defaults_still_share() -> None:
    job = plain(
        timeout=None,
        kill_grace=5,  # seconds: normalised to the default timedelta
        args={},
        messages={},
        shell=False,
        output_limit=64 * 1024,
    )
    assert shares_default_options(job)
    assert job == plain()


def test_a_job_with_an_option_has_its_own_and_the_default_is_untouched() -> None:
    job = plain(timeout=30, description="nightly")
    assert not shares_default_options(job)
    assert job.timeout == timedelta(seconds=30) and job.description == "nightly"
    assert DEFAULT_OPTIONS.timeout is None and DEFAULT_OPTIONS.description is None
    assert plain().timeout is None


def test_options_cannot_be_assigned() -> None:
    job = plain()
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.timeout = timedelta(seconds=1)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "b"  # type: ignore[misc]
    assert DEFAULT_OPTIONS.timeout is None


def test_fields_and_their_defaults_are_the_dataclass_ones() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(Job)}
    assert list(defaults)[:3] == ["name", "type", "command"]
    assert set(OPTION_NAMES) < set(defaults)
    assert defaults["shell"] is False and defaults["priority"] == 0
    assert defaults["name"] is dataclasses.MISSING


def test_replace_back_to_the_defaults_shares_again() -> None:
    job = plain(timeout=30)
    back = dataclasses.replace(job, timeout=None)
    assert shares_default_options(back)
    assert back == plain()


@pytest.mark.parametrize(
    "clone", [copy.copy, copy.deepcopy, lambda j: pickle.loads(pickle.dumps(j))]
)
def test_copies_and_pickles_are_equal_jobs(clone: object) -> None:
    rich = plain(
        timeout=30,
        env={"A": "1"},
        messages={Event.FAILED: Message(("ops@example.com",))},
        stop=START + timedelta(days=1),
    )
    internal = Job(
        "i", type="internal", command="m:f", start=START, interval="1 day", args={"x": [1, 2]}
    )
    for job in (plain(), rich, internal):
        copied = clone(job)  # type: ignore[operator]
        assert copied == job
        assert copied.next_after(START) == job.next_after(START)
        assert shares_default_options(copied) == shares_default_options(job)


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda g: pickle.loads(pickle.dumps(g))])
def test_groups_copy_and_pickle(clone: object) -> None:
    group = JobGroup("g", ["a", "b"], messages={"failed": Message(("x@example.com",))})
    assert clone(group) == group  # type: ignore[operator]


_OPTION_VALUES = {
    "timeout": st.none() | st.integers(1, 10_000),
    "max_instances": st.none() | st.integers(1, 10),
    "shell": st.booleans(),
    "cwd": st.none() | st.just("/tmp"),
    "env": st.none() | st.just({"A": "1"}),
    "kill_grace": st.integers(0, 60),
    "output_limit": st.integers(0, 1 << 20),
    "description": st.none() | st.text(max_size=5),
    "warn_after": st.none() | st.integers(1, 10_000),
}


@given(st.fixed_dictionaries({}, optional=_OPTION_VALUES))  # type: ignore[arg-type]
def test_every_option_reads_back_and_jobs_compare_by_value(options: dict[str, object]) -> None:
    job = plain(**options)
    again = plain(**options)
    assert job == again
    for name, value in options.items():
        read = getattr(job, name)
        if isinstance(read, timedelta):
            assert read == timedelta(seconds=value)  # type: ignore[arg-type]
        elif name == "env" and value is not None:
            assert dict(read) == value
        else:
            assert read == value
    assert shares_default_options(plain())
    assert DEFAULT_OPTIONS.values() == tuple(getattr(plain(), name) for name in OPTION_NAMES)


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Zulu", " UTC "])
def test_the_names_of_utc_resolve_to_datetime_utc(name: str) -> None:
    from jobscheduler.triggers.zones import resolve_zone

    assert resolve_zone(name) is UTC


def test_a_start_in_the_jobs_zone_gives_its_slots() -> None:
    utc = Job("u", command="true", start=START, interval="1 day", timezone="UTC")
    assert utc.next_after(START) == START + timedelta(days=1)
    berlin = Job(
        "b", command="true", start=datetime(2030, 3, 30, 2, 30), interval="1 day",
        timezone="Europe/Berlin",
    )  # fmt: skip
    # The day after lands in the spring gap: the slot is the gap's end, as before.
    assert berlin.next_after(berlin.start).isoformat() == "2030-03-31T03:00:00+02:00"


def test_the_shared_options_cannot_be_written_by_mistake() -> None:
    with pytest.raises(AttributeError, match="read-only"):
        DEFAULT_OPTIONS.timeout = timedelta(seconds=1)  # type: ignore[attr-defined]
    assert DEFAULT_OPTIONS.timeout is None


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC"])
@pytest.mark.parametrize("tz", [UTC, ZoneInfo("Etc/UTC"), ZoneInfo("UTC")])
def test_a_utc_start_is_written_as_a_wall_time_whatever_utc_object_it_carries(
    name: str, tz: tzinfo
) -> None:
    from jobscheduler.config.values import datetime_data

    start = datetime(2030, 1, 1, 6, 0, tzinfo=tz)
    job = Job("u", command="true", start=start, interval="1 day", timezone=name)
    assert datetime_data(job.start, job.zone) == datetime(2030, 1, 1, 6, 0)


def test_the_options_and_the_core_fields_are_the_declared_ones() -> None:
    declared = [option.name for option in JOB_OPTIONS]
    assert [f.name for f in dataclasses.fields(Job)] == ["name", *declared]
    assert set(OPTION_NAMES) < set(declared)
    for option in JOB_OPTIONS:
        assert getattr(plain(), option.name) == option.default or option.name in (
            "command", "start", "interval"
        )  # fmt: skip


def test_unknown_and_doubled_arguments_are_refused_like_a_function_call() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'timout'"):
        Job("a", command="true", start=START, interval="1 hour", timout=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'type'"):
        Job("a", "external", type="external", command="true", start=START)  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required argument: 'name'"):
        Job(command="true", start=START)  # type: ignore[call-arg]
    positional = Job("a", "internal", "m:f", start=START)
    assert positional.type is JobType.INTERNAL and positional.command == "m:f"
