"""`LoopThread`: an owner's background thread, started and stopped under the owner's condition."""

from __future__ import annotations

import threading

from jobscheduler.engine.threads import LoopThread
from tests.waiting import DEADLINE, wait_until


class Looper:
    """An owner as the queue consumer is: its loop waits on its condition until stopping."""

    def __init__(self, *, stop_itself: bool = False) -> None:
        self.cond = threading.Condition()
        self.thread = LoopThread(self.cond, self._loop, "test-looper")
        self.stop_itself = stop_itself
        self.rounds = 0
        self.ran_in: list[threading.Thread] = []
        self.returned = threading.Event()

    def _loop(self) -> None:
        self.ran_in.append(threading.current_thread())
        while True:
            with self.cond:
                if self.stop_itself:
                    self.thread.stop()  # from the loop thread itself: must not join
                if self.thread.stopping:
                    self.returned.set()
                    return
                self.rounds += 1
                self.cond.wait(DEADLINE)


def test_start_runs_one_named_daemon_thread_until_stop() -> None:
    looper = Looper()
    assert not looper.thread.running and not looper.thread.stopping
    assert looper.thread.start() is True
    assert looper.thread.start() is False  # one runs already: nothing done
    wait_until(lambda: looper.rounds >= 1, "the first round")
    assert looper.thread.running
    (thread,) = looper.ran_in
    assert thread.name == "test-looper" and thread.daemon
    looper.thread.stop()  # returns once the thread ended
    assert not thread.is_alive()
    assert looper.thread.stopping and not looper.thread.running
    assert looper.rounds == 1  # woken by `stop`, it returned without another round


def test_start_after_stop_starts_a_new_thread() -> None:
    looper = Looper()
    looper.thread.start()
    looper.thread.stop()
    assert looper.thread.start() is True
    assert not looper.thread.stopping
    wait_until(lambda: len(looper.ran_in) == 2, "the second thread")
    looper.thread.stop()
    assert looper.ran_in[0] is not looper.ran_in[1]
    assert not looper.ran_in[1].is_alive()


def test_stop_before_start_sets_stopping() -> None:
    looper = Looper()
    looper.thread.stop()  # no thread: nothing to join
    assert looper.thread.stopping and not looper.thread.running


def test_stop_from_the_loop_thread_does_not_join_it() -> None:
    looper = Looper(stop_itself=True)
    looper.thread.start()
    # Joining itself would raise RuntimeError in the thread, and the loop would not return.
    assert looper.returned.wait(DEADLINE)
    wait_until(lambda: not looper.ran_in[0].is_alive(), "the thread's end")
    assert looper.thread.stopping and not looper.thread.running
