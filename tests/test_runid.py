"""Run ids (UUIDv7): format, time prefix, order, and uniqueness across threads and processes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobscheduler.clock import FakeClock
from jobscheduler.model.runid import RunIds, is_run_id, run_id_instant

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)

instants = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
)


def floor_ms(instant: datetime) -> datetime:
    return EPOCH + ((instant - EPOCH) // MS) * MS


@given(instants)
def test_format_is_a_canonical_uuid7_carrying_the_instant(instant: datetime) -> None:
    run_id = RunIds(lambda: instant).new(instant)
    assert is_run_id(run_id)
    parsed = uuid.UUID(run_id)
    assert str(parsed) == run_id  # canonical: lower case, 8-4-4-4-12
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == (instant - EPOCH) // MS  # the 48-bit ms timestamp
    assert run_id_instant(run_id) == floor_ms(instant)


@given(st.lists(instants, min_size=2, max_size=50))
def test_ids_from_one_generator_strictly_increase_as_text_and_number(
    moments: list[datetime],
) -> None:
    ids = RunIds(lambda: T0)
    made = [ids.new(moment) for moment in sorted(moments)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    numbers = [uuid.UUID(run_id).int for run_id in made]
    assert numbers == sorted(numbers)
    # The time prefix follows the instants (to the millisecond).
    assert [run_id_instant(r) for r in made] == [floor_ms(m) for m in sorted(moments)]


@given(instants, instants)
def test_an_earlier_instant_gives_an_earlier_id_across_generators(a: datetime, b: datetime) -> None:
    if floor_ms(a) == floor_ms(b):
        return  # same millisecond: ordered only within one process (see the next tests)
    first, second = RunIds(lambda: a).new(a), RunIds(lambda: b).new(b)
    assert (first < second) == (a < b)


def test_next_reads_the_clock_it_was_given() -> None:
    clock = FakeClock(T0)
    ids = RunIds(clock.now)
    first = next(ids)
    assert run_id_instant(first) == T0
    clock.advance(timedelta(seconds=1.5))
    second = next(ids)
    assert run_id_instant(second) == T0 + timedelta(seconds=1.5)
    assert first < second
    assert iter(ids) is ids


def test_the_same_millisecond_many_times_keeps_increasing() -> None:
    ids = RunIds(lambda: T0)
    # 70,000 ids in one millisecond: the counter's low 16 bits wrap (a new cached head).
    made = [next(ids) for _ in range(70_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert {run_id_instant(r) for r in made} == {T0}


def test_a_clock_stepping_back_does_not_make_ids_go_back() -> None:
    ids = RunIds(lambda: T0)
    late = ids.new(T0 + timedelta(seconds=10))
    earlier = ids.new(T0)  # the clock stepped back 10 s
    assert earlier > late
    assert run_id_instant(earlier) == T0 + timedelta(seconds=10)
    again = ids.new(T0 + timedelta(seconds=11))
    assert again > earlier and run_id_instant(again) == T0 + timedelta(seconds=11)


def test_the_last_instant_a_datetime_holds() -> None:
    latest = datetime.max.replace(tzinfo=UTC)
    ids = RunIds(lambda: latest)
    first, second = next(ids), next(ids)
    assert first < second
    assert run_id_instant(second) == floor_ms(latest)


def test_instants_before_1970_count_as_1970() -> None:
    run_id = RunIds(lambda: T0).new(datetime(1960, 1, 1, tzinfo=UTC))
    assert is_run_id(run_id) and run_id_instant(run_id) == EPOCH


@pytest.mark.parametrize(
    "text",
    [
        "",
        42,
        "0190a1b2-c3d4-4e5f-8a6b-1c2d3e4f5a6b",  # version 4
        "0190a1b2-c3d4-7e5f-ca6b-1c2d3e4f5a6b",  # variant 110
        "0190A1B2-C3D4-7E5F-8A6B-1C2D3E4F5A6B",  # upper case: not as made here
        "0190a1b2c3d47e5f8a6b1c2d3e4f5a6b",
        "0190a1b2-c3d4-7e5f-8a6b-1c2d3e4f5a6g",
    ],
)
def test_is_run_id_refuses_what_is_not_one(text: object) -> None:
    assert not is_run_id(text)
    if isinstance(text, str):
        with pytest.raises(ValueError, match="not a run id"):
            run_id_instant(text)


def test_threads_sharing_a_generator_never_get_the_same_id() -> None:
    ids = RunIds(FakeClock(T0).now)
    results: list[list[str]] = [[] for _ in range(8)]

    def make(out: list[str]) -> None:
        for _ in range(10_000):
            out.append(next(ids))

    threads = [threading.Thread(target=make, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [run_id for out in results for run_id in out]
    assert len(set(everything)) == 80_000
    for out in results:  # each thread's own ids increase
        assert out == sorted(out)


def test_two_generators_of_one_process_never_meet() -> None:
    a, b = RunIds(lambda: T0), RunIds(lambda: T0)
    made = [a.new(T0) if i % 2 else b.new(T0) for i in range(10_000)]
    assert len(set(made)) == 10_000
    assert made == sorted(made)  # one counter per process: even across generators


_PRODUCER = """
import sys
from jobscheduler.clock import SystemClock
from jobscheduler.model.runid import RunIds
ids = RunIds(SystemClock().now)
print("\\n".join(next(ids) for _ in range(int(sys.argv[1]))))
"""


def test_100000_runs_on_each_of_two_processes_are_unique_and_increasing(tmp_path: Path) -> None:
    count = 100_000
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    outputs = [tmp_path / "a.txt", tmp_path / "b.txt"]
    processes = []
    for output in outputs:  # both at once: their clocks meet in the same milliseconds
        with output.open("w") as file:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", _PRODUCER, str(count)], stdout=file, env=env
                )
            )
    assert [p.wait(120) for p in processes] == [0, 0]
    per_process = [output.read_text().split() for output in outputs]
    for ids in per_process:
        assert len(ids) == count
        assert all(is_run_id(run_id) for run_id in ids)
        assert all(a < b for a, b in itertools.pairwise(ids))  # strictly increasing
    assert len(set(per_process[0]) | set(per_process[1])) == 2 * count
    # Each process's random part differs: the last 8 hex digits.
    tails = [{run_id[-8:] for run_id in ids} for ids in per_process]
    assert all(len(t) == 1 for t in tails) and tails[0] != tails[1]


def test_a_forked_child_makes_other_ids_than_its_parent() -> None:
    ids = RunIds(lambda: T0)
    parent_first = ids.new(T0)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the same instant, the parent's generator and cache
        try:
            os.write(write_end, ids.new(T0).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 100).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    parent_next = ids.new(T0)
    assert is_run_id(child)
    assert child not in (parent_first, parent_next)
    assert child[-8:] != parent_next[-8:]
