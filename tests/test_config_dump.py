"""The writer's direct path gives exactly PyYAML's text, or steps aside."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler import Dependence, Interval, Job, JobType, Unit
from jobscheduler.config.dump import (
    Flow,
    FlowMap,
    _yaml_lines,
    dump_config,
    fast_lines,
    job_entries,
    render,
)
from jobscheduler.model.catalog import Catalog

# Text that is often almost plain: indicators, colons, spaces, '#', quotes, digits, words
# that read as other types, non-ASCII and control characters.
_PIECES = st.sampled_from(
    [
        "a", "job", "x.y:z", ":", ": ", " ", "#", " #", "-", "- ", "?", "[", "]", "{", "}",
        ",", "'", '"', "&", "*", "!", "|", ">", "%", "@", "`", "...", "---", "yes", "no",
        "true", "null", "~", "12", "1.5", "0x1f", "1_000", "2024-01-01", "é", "\t", "\n",
        "1 day", "bench._jobs:noop", "/usr/bin/env", "=", "+", "(", ")", "$HOME",
    ]
)  # fmt: skip
_WORDS = st.sampled_from(
    ["a", "job", "x.y:z", "1 day", "bench._jobs:noop", "/usr/bin", "-v", "b-c"]
)
TEXT = (
    _WORDS
    | st.lists(_WORDS, min_size=1, max_size=3).map(" ".join)
    | st.lists(_PIECES, min_size=0, max_size=6).map("".join)
    | st.text(max_size=12)
)
LONG_TEXT = st.lists(st.sampled_from(["word", " ", "a:b", "x" * 30]), max_size=12).map("".join)
ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5))])
DATETIMES = st.builds(
    lambda d, z: d.replace(tzinfo=z),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
    ZONES,
)
SCALARS = (
    TEXT
    | LONG_TEXT
    | st.integers(-(10**20), 10**20)
    | st.booleans()
    | DATETIMES
    | st.floats(allow_nan=False)
    | st.none()
)
FLOW_ITEMS = TEXT | st.integers() | st.booleans() | DATETIMES | st.floats(allow_nan=False)
FLOWS = st.lists(FLOW_ITEMS, max_size=4).map(Flow) | st.dictionaries(
    TEXT, FLOW_ITEMS, max_size=3
).map(FlowMap)
VALUES = SCALARS | FLOWS | st.lists(TEXT, max_size=2)
ENTRIES = st.dictionaries(TEXT, VALUES | st.dictionaries(TEXT, VALUES, max_size=4), max_size=3)


@settings(max_examples=1500, deadline=None)
@given(ENTRIES, st.sampled_from([2, 4]))
def test_the_direct_path_writes_what_pyyaml_writes(data: dict[str, Any], step: int) -> None:
    fast = fast_lines(data, step)
    if fast is not None:
        assert fast == _yaml_lines(data, step)


@given(DATETIMES)
def test_an_object_met_twice_is_left_to_pyyaml(when: datetime) -> None:
    """PyYAML writes it as an anchor and an alias; the direct path does not try."""
    for data in ({"j": {"start": when, "stop": when}}, {"j": Flow([when, when])}):
        assert fast_lines(data, 2) is None
        assert render(data) == _yaml_lines(data, 2)


def _jobs() -> list[Job]:
    start = datetime(2031, 1, 1, 2, 30)
    return [
        Job("plain", command="echo hello", start=start, interval="1 day"),
        Job(
            "internal",
            type=JobType.INTERNAL,
            command="bench._jobs:noop",
            start=start,
            interval=Interval(2, Unit.HOUR),
            timezone="Europe/Berlin",
            priority=3,
            max_instances=2,
            enabled=False,
            timeout=timedelta(minutes=5),
        ),
        Job("argv", command=["ls", "-l", "/tmp"], start=start, interval="1 week", cwd="/srv"),
        Job("after", command="/bin/true", dependence=Dependence("plain"), env={"LANG": "C"}),
    ]


def test_usual_jobs_take_the_direct_path_and_match_pyyaml() -> None:
    for job in _jobs():
        data = {job.name: job_entries(job)}
        for step in (2, 4):
            fast = fast_lines(data, step)
            assert fast is not None, job.name
            assert fast == _yaml_lines(data, step)


def test_dump_config_is_what_pyyaml_alone_writes() -> None:
    catalog = Catalog.build(_jobs())
    expected = ["jobs:\n"]
    for i, job in enumerate(_jobs()):
        if i:
            expected.append("\n")
        expected += ["  " + line for line in _yaml_lines({job.name: job_entries(job)}, 2)]
    assert dump_config(catalog) == "".join(expected)


@settings(max_examples=3000, deadline=None)
@given(TEXT | LONG_TEXT | st.integers(-(10**20), 10**20) | st.booleans() | DATETIMES)
def test_each_scalar_is_written_plain_only_as_pyyaml_writes_it(value: Any) -> None:
    """The decision that matters most, on one value at a time: in a block mapping and in a
    flow list."""
    for data in ({"key": value}, {"key": Flow([value])}):
        fast = fast_lines(data, 2)
        if fast is not None:
            assert fast == _yaml_lines(data, 2)
