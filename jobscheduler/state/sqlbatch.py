"""Group commit: concurrent writes to a SQL store share one transaction.

A worker's `claim` is a write that must be durable before the run starts. One transaction per
claim caps a store at its engine's commits per second (~4,600/s on PostgreSQL here, see
docs/performance.md). So the writes of every thread are queued; the first writer to find no
transaction under way becomes the *leader*: it takes every write queued so far (its own
included), runs them in one transaction, hands each caller its answer and steps down; a
writer that queued meanwhile waits for that answer or becomes the next leader. Nothing waits
for a batch to fill: a write alone is written at once, and writes pile up only while a commit
is under way, which is when sharing it pays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Claim", "GroupCommit", "Write"]

# A write: run on the transaction's cursor, returns the caller's answer.
Write = Callable[[Any], Any]


class Claim:
    """A claim, kept as values so a dialect may insert many in one statement."""

    __slots__ = ("key", "run_id", "values")

    def __init__(self, run_id: str, key: tuple[Any, ...] | None, values: tuple[Any, ...]) -> None:
        self.run_id = run_id
        self.key = key
        self.values = values


class _Request:
    __slots__ = ("done", "error", "op", "result")

    def __init__(self, op: Claim | Write) -> None:
        self.op = op
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


# Runs a batch in one transaction: gives one answer per op, in order, or raises.
BatchRunner = Callable[[Sequence[Claim | Write]], list[Any]]


class GroupCommit:
    """Queues writes from many threads and runs them in shared transactions (see above).

    `run_batch` is given the ops of one batch; it commits them together and returns their
    answers, or raises (then each op of the batch is tried again alone, so one op's failure
    is its caller's only; an error of the lone op goes to its caller).
    """

    def __init__(self, run_batch: BatchRunner, *, max_batch: int = 1000) -> None:
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._cond = threading.Condition(threading.Lock())
        self._pending: list[_Request] = []
        self._leading = False
        self.batches = 0  # transactions run (for measurements)
        self.writes = 0

    def run(self, op: Claim | Write) -> Any:
        """`op`'s answer, once the transaction that holds it committed."""
        return self.run_many([op])[0]

    def run_many(self, ops: Sequence[Claim | Write]) -> list[Any]:
        """The answers of `ops`, written in one transaction with whatever else is queued."""
        requests = [_Request(op) for op in ops]
        last = requests[-1]
        cond = self._cond
        with cond:
            self._pending.extend(requests)
            while self._leading and not last.done:
                cond.wait()
            if not last.done:
                self._leading = True
        if not last.done:
            self._lead()
        answers = []
        for request in requests:
            if request.error is not None:
                raise request.error
            answers.append(request.result)
        return answers

    def _lead(self) -> None:
        """Run the queued writes (one batch), then step down and wake the waiters."""
        cond = self._cond
        try:
            with cond:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
            self._run(batch)
        finally:
            with cond:
                self._leading = False
                cond.notify_all()

    def _run(self, batch: list[_Request]) -> None:
        self.batches += 1
        self.writes += len(batch)
        try:
            answers = self._run_batch([r.op for r in batch])
        except BaseException as exc:
            if len(batch) == 1:
                batch[0].error = exc
                batch[0].done = True
                return
            # One op may have failed the whole transaction: each alone, so only its caller
            # gets its error.
            for request in batch:
                self._run([request])
            return
        for request, answer in zip(batch, answers, strict=True):
            request.result = answer
            request.done = True
