"""Clocks: FakeClock moves only when told and wakes its waiters; SystemClock is real time.

Threads here block on a FakeClock, never on real time; a join with a generous timeout only
bounds a failing test. "Is it still blocked?" checks wait briefly for it to finish, and pass
when it does not.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobscheduler.clock import Clock, FakeClock, SystemClock, utc

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
JOIN = 10.0  # seconds: only reached when a test is about to fail
STILL_BLOCKED = 0.05


class Waiter(threading.Thread):
    """Calls clock.wait(condition, timeout) and records what it returned."""

    def __init__(self, clock: FakeClock, condition: threading.Condition, timeout: float | None):
        super().__init__(daemon=True)
        self.clock = clock
        self.condition = condition
        self.timeout = timeout
        self.result: bool | None = None
        self._holding = threading.Event()

    def run(self) -> None:
        with self.condition:
            self._holding.set()
            self.result = self.clock.wait(self.condition, self.timeout)

    def start_waiting(self) -> Waiter:
        """Start, and return once the thread is inside wait (it released the condition)."""
        self.start()
        assert self._holding.wait(JOIN)
        with self.condition:  # only free once the waiter sleeps in condition.wait()
            pass
        return self


def finished(thread: threading.Thread, timeout: float = JOIN) -> bool:
    thread.join(timeout)
    return not thread.is_alive()


def test_now_advance_and_set() -> None:
    clock = FakeClock(T0)
    assert clock.now() == T0
    assert clock.now() == T0  # it does not move by itself
    assert clock.advance(timedelta(minutes=5)) == T0 + timedelta(minutes=5)
    assert clock.advance(30) == T0 + timedelta(minutes=5, seconds=30)  # seconds
    assert clock.advance(0.25) == T0 + timedelta(minutes=5, seconds=30.25)
    later = datetime(2024, 3, 2, tzinfo=UTC)
    assert clock.set(later) == later
    assert clock.now() == later
    assert clock.set(later) == later  # standing still is fine


def test_times_are_aware_utc() -> None:
    clock = FakeClock(datetime(2024, 3, 1, 13, 0, tzinfo=ZoneInfo("Europe/Berlin")))
    assert clock.now() == T0
    assert clock.now().tzinfo is UTC
    clock.set(datetime(2024, 3, 1, 12, 30))  # naive: taken as UTC
    assert clock.now() == T0 + timedelta(minutes=30)
    assert FakeClock(datetime(2024, 3, 1, 12)).now() == T0
    assert utc(datetime(2024, 3, 1, 12)) == T0


def test_refuses_to_go_backwards() -> None:
    clock = FakeClock(T0)
    with pytest.raises(ValueError, match="cannot go backwards"):
        clock.set(T0 - timedelta(microseconds=1))
    with pytest.raises(ValueError, match="cannot go backwards"):
        clock.advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="cannot go backwards"):
        clock.advance(-0.5)
    assert clock.now() == T0


def test_clocks_satisfy_the_protocol() -> None:
    assert isinstance(FakeClock(T0), Clock)
    assert isinstance(SystemClock(), Clock)


def test_wait_times_out_when_advanced_past_the_deadline() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    waiter = Waiter(clock, condition, 10).start_waiting()
    clock.advance(10)
    assert finished(waiter)
    assert waiter.result is False


def test_wait_timing_out_on_set() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    waiter = Waiter(clock, condition, 60).start_waiting()
    clock.set(T0 + timedelta(hours=1))
    assert finished(waiter)
    assert waiter.result is False


def test_wait_woken_by_notify_returns_true() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    waiter = Waiter(clock, condition, 10).start_waiting()
    with condition:
        condition.notify_all()
    assert finished(waiter)
    assert waiter.result is True
    assert clock.now() == T0


def test_wait_without_timeout_needs_a_notify() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    waiter = Waiter(clock, condition, None).start_waiting()
    clock.advance(timedelta(days=365))  # wakes it (spuriously allowed) but it cannot time out
    assert finished(waiter)
    assert waiter.result is True


def test_wait_with_no_time_left_returns_at_once() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    with condition:
        assert clock.wait(condition, 0) is False
        assert clock.wait(condition, -1) is False


def test_several_threads_wait_on_one_condition() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()
    waiters = [Waiter(clock, condition, 5).start_waiting() for _ in range(3)]
    clock.advance(5)
    assert all(finished(w) for w in waiters)
    assert [w.result for w in waiters] == [False, False, False]

    woken = [Waiter(clock, condition, 5).start_waiting() for _ in range(3)]
    with condition:
        condition.notify_all()
    assert all(finished(w) for w in woken)
    assert [w.result for w in woken] == [True, True, True]


def test_waiters_with_different_deadlines_each_time_out_at_theirs() -> None:
    """A waiter woken before its deadline returns True (a spurious wake-up, which callers
    handle by re-checking); waiting again, it times out once the clock passes its deadline."""
    clock = FakeClock(T0)
    condition = threading.Condition()
    deadline = T0 + timedelta(seconds=20)
    timeouts: list[bool] = []

    def patient() -> None:
        with condition:
            while True:
                left = (deadline - clock.now()).total_seconds()
                if not clock.wait(condition, left):
                    timeouts.append(True)
                    return

    long = threading.Thread(target=patient, daemon=True)
    short = Waiter(clock, condition, 5).start_waiting()
    long.start()
    clock.advance(6)
    assert finished(short) and short.result is False
    assert not finished(long, STILL_BLOCKED)
    clock.advance(14)
    assert finished(long)
    assert timeouts == [True]


def test_waiting_on_two_conditions() -> None:
    clock = FakeClock(T0)
    first, second = threading.Condition(), threading.Condition()
    a = Waiter(clock, first, 3).start_waiting()
    b = Waiter(clock, second, 3).start_waiting()
    clock.advance(3)
    assert finished(a) and finished(b)
    assert (a.result, b.result) == (False, False)


def test_advance_while_holding_the_condition_does_not_deadlock() -> None:
    clock = FakeClock(T0)
    condition = threading.Condition()  # an RLock underneath: re-entrant
    waiter = Waiter(clock, condition, 1).start_waiting()
    with condition:
        clock.advance(1)
    assert finished(waiter)
    assert waiter.result is False


def test_sleep_returns_once_the_clock_has_moved_far_enough() -> None:
    clock = FakeClock(T0)
    woke_at: list[datetime] = []
    ready = threading.Event()

    def sleeper() -> None:
        ready.set()
        clock.sleep(5)
        woke_at.append(clock.now())

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    assert ready.wait(JOIN)
    # The sleep began at T0 or later: 3 seconds are not enough, whenever it began.
    clock.advance(3)
    assert not finished(thread, STILL_BLOCKED)
    clock.advance(2)
    if not finished(thread, 1.0):
        # The sleeper read the clock only after the first advance: 3 more seconds do it.
        clock.advance(3)
    assert finished(thread)
    assert len(woke_at) == 1
    assert T0 + timedelta(seconds=5) <= woke_at[0] <= T0 + timedelta(seconds=8)


def test_sleep_of_nothing_returns_at_once() -> None:
    clock = FakeClock(T0)
    clock.sleep(0)
    clock.sleep(-3)
    assert clock.now() == T0


def test_system_clock() -> None:
    clock = SystemClock()
    before = datetime.now(UTC)
    now = clock.now()
    assert now.tzinfo is UTC
    assert before <= now <= datetime.now(UTC)
    condition = threading.Condition()
    with condition:
        assert clock.wait(condition, 0) is False
        assert clock.wait(condition, -1) is False
        assert clock.wait(condition, 0.001) is False  # a real, one-millisecond wait
    clock.sleep(0)
    clock.sleep(-1)
    assert repr(clock) == "SystemClock()"


def test_system_clock_wait_woken_by_notify() -> None:
    clock = SystemClock()
    condition = threading.Condition()
    result: list[bool] = []
    holding = threading.Event()

    def run() -> None:
        with condition:
            holding.set()
            result.append(clock.wait(condition, JOIN))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert holding.wait(JOIN)
    with condition:
        condition.notify_all()
    assert finished(thread)
    assert result == [True]


def test_concurrent_advances_add_up() -> None:
    clock = FakeClock(T0)

    def advance_100() -> None:
        for _ in range(100):
            clock.advance(1)

    threads = [threading.Thread(target=advance_100, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    assert all(finished(thread) for thread in threads)
    assert clock.now() == T0 + timedelta(seconds=400)
