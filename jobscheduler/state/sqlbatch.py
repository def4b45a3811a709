"""Group commit: concurrent writes to a SQL store share one transaction.

A worker's `claim` is a write that must be durable before the run starts. One transaction per
claim caps a store at its engine's commits per second (~4,600/s on PostgreSQL here, see
docs/performance.md). So the writes of every thread are queued; the first writer to find no
transaction under way becomes the *leader*: it takes every write queued so far (its own
included), runs them in one transaction, hands each caller its answer and steps down; a
writer that queued meanwhile waits for that answer or becomes the next leader. Nothing waits
for a batch to fill: a write alone is written at once, and writes pile up only while a commit
is under way, which is when sharing it pays.

A write nobody needs the answer of at once (a finished run's outcome) may be *posted*: queued
without waiting. A flusher thread leads a transaction for posted writes `linger` seconds after
the first of them (unless another leader takes them first), sharing transactions like the
rest: the outcomes of a burst's runs are then written together, after the burst, instead of
taking CPU from the runs still starting (measured: docs/performance.md); `flush` writes what
was posted so far at once and waits for it (a read of the store that must see them calls it
first), and `close` does not wait for the linger. A posted write that fails because the
database is away is kept and tried again: after the next transaction that works, or every
`retry` seconds (a warning is logged once per outage); `close` tries once more and logs what
it could not write. Any other error of a posted write is logged: its caller has gone on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .base import StoreUnavailableError

__all__ = ["Claim", "Finish", "GroupCommit", "LimitedClaim", "Submit", "Write"]

log = logging.getLogger("jobscheduler.state")

# A write: run on the transaction's cursor, returns the caller's answer.
Write = Callable[[Any], Any]


class Claim:
    """A claim, kept as the parameters of the query ``claim`` so a dialect may insert many
    in one statement."""

    __slots__ = ("key", "run_id", "values")

    def __init__(self, run_id: str, key: tuple[Any, ...] | None, values: dict[str, Any]) -> None:
        self.run_id = run_id
        self.key = key
        self.values = values


class Finish:
    """A finish (the outcome of a claimed run), kept as values so a dialect may write many in
    one statement: `values` are the parameters of the query ``finish``;
    `settle`, the queue row (id, state) settled with it when the finish is written."""

    __slots__ = ("run_id", "settle", "values")

    def __init__(self, run_id: str, values: dict[str, Any], settle: tuple[int, str] | None) -> None:
        self.run_id = run_id
        self.values = values
        self.settle = settle


class Submit:
    """A queue row to insert, kept as the parameters of the query ``submit`` (job, args
    JSON, priority, host) so a dialect may insert many in one statement; its answer is the
    row's id."""

    __slots__ = ("values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values


class LimitedClaim:
    """A claim of a job with a limit (`StateStore.claim_within`), written in its batch's
    transaction after the other claims and the finishes (a run that ended in the same batch
    no longer counts), once the transaction holds the lock of every such `job` in it:
    `values` are the parameters of the query ``claim_within``, `skip` the reason of the
    slot's ``skipped`` record when the job is busy; `write` writes it alone (a dialect may
    write many in one statement instead). `yielding`: when another transaction holds the
    job's lock, the claim is left (answered ``locked``) instead of waiting for it."""

    __slots__ = ("job", "run_id", "skip", "values", "write", "yielding")

    def __init__(
        self,
        job: str,
        run_id: str,
        values: dict[str, Any],
        skip: str | None,
        write: Write,
        yielding: bool = False,
    ) -> None:
        self.job = job
        self.run_id = run_id
        self.values = values
        self.skip = skip
        self.write = write
        self.yielding = yielding


Op = Claim | Finish | Submit | LimitedClaim | Write


def _nothing(cur: Any) -> None:
    """The write `flush` waits for: it follows whatever was posted before it."""


class _Request:
    __slots__ = ("done", "error", "last", "op", "posted", "result", "wake")

    def __init__(self, op: Op, last: bool, posted: bool = False) -> None:
        self.op = op
        self.done = False
        self.last = last  # its caller waits on this one
        self.posted = posted  # nobody waits on it: an error is logged
        self.result: Any = None
        self.error: BaseException | None = None
        # Held from the start; released once the answer is in, or to make its caller the
        # next leader. Its caller waits by acquiring it: only the threads that have something
        # to do are woken. Only the last op of a caller's has one: its caller waits on that
        # one alone (a posted write has no caller waiting).
        self.wake: threading.Lock | None = None
        if last:
            self.wake = threading.Lock()
            self.wake.acquire()

    def answer(self, result: Any, error: BaseException | None) -> None:
        """Its answer is in: `result`, or the `error` its op raised."""
        self.result = result
        self.error = error
        self.done = True


# Runs a batch in one transaction: gives one answer per op, in order, or raises.
BatchRunner = Callable[[Sequence[Op]], list[Any]]


class GroupCommit:
    """Queues writes from many threads and runs them in shared transactions (see above).

    `run_batch` is given the ops of one batch; it commits them together and returns their
    answers, or raises (then each op of the batch is tried again alone, so one op's failure
    is its caller's only; an error of the lone op goes to its caller).
    """

    def __init__(
        self,
        run_batch: BatchRunner,
        *,
        max_batch: int = 1000,
        retry: float = 1.0,
        linger: float = 0.0,
    ) -> None:
        self._run_batch = run_batch
        self._linger = linger
        self._closed = threading.Event()  # cuts a linger short
        self._max_batch = max_batch
        self._mutex = threading.Lock()
        self._idle = threading.Condition(self._mutex)  # notified when no leader is left
        self._pending: list[_Request] = []
        self._leading = False
        self._queued_posts = 0  # posted writes not yet taken by a leader (for the flusher)
        self._unwritten = 0  # posted writes not yet written (for `flush`)
        self._flusher: threading.Thread | None = None
        self._flusher_wake = threading.Condition(self._mutex)
        self._closing = False
        self._retry = retry
        self._again: list[Op] = []  # posted writes the database was away for (see above)
        self.batches = 0  # transactions run (for measurements)
        self.writes = 0

    def post(self, op: Op) -> None:
        """Queue `op` without waiting for its answer (see the module notes)."""
        with self._mutex:
            self._pending.append(_Request(op, False, posted=True))
            self._queued_posts += 1
            self._unwritten += 1
            if self._flusher is None and not self._closing:
                self._flusher = threading.Thread(
                    target=self._flush_posted, name="jobscheduler-store-writes", daemon=True
                )
                self._flusher.start()
            if self._queued_posts == 1:  # the flusher waits only while none is queued
                self._flusher_wake.notify()

    @property
    def posted(self) -> int:
        """Posted writes not yet written (queued, or in a transaction under way)."""
        return self._unwritten

    def flush(self) -> None:
        """Write every write posted so far, and wait until they are committed (a write queued
        after them is answered after them: the transactions run one after another)."""
        if self._unwritten:
            self.run(_nothing)

    @property
    def kept(self) -> int:
        """Posted writes kept while the database is away, to be tried again."""
        return len(self._again)

    def close(self) -> None:
        """Write what was posted, then stop the flusher thread (idempotent)."""
        self._closed.set()
        with self._mutex:
            self._closing = True
            self._flusher_wake.notify()
            flusher = self._flusher
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join()
        with self._mutex:
            self._post_again()
        try:
            self.flush()
        except Exception as exc:
            log.error("closing the state store: posted writes not written: %s", exc)

    def _post_again(self) -> None:
        """Queue the kept writes again (mutex held)."""
        for op in self._again:
            self._pending.append(_Request(op, False, posted=True))
        self._queued_posts += len(self._again)
        self._unwritten += len(self._again)
        self._again = []

    def _flush_posted(self) -> None:
        away = False  # the database was away at the last try (warned once)
        while True:
            with self._mutex:
                while not self._queued_posts and not self._closing:
                    if not self._again:
                        self._flusher_wake.wait()
                    elif not self._flusher_wake.wait(self._retry):
                        self._post_again()  # `retry` seconds without a post: try again
                if not self._queued_posts:
                    return
            if self._linger:
                self._closed.wait(self._linger)  # the rest of a burst's posts join these
            try:
                self.run(_nothing)
            except StoreUnavailableError as exc:
                if not away:  # INFO: the node tells the outage itself (cluster/outage.py)
                    log.info("state store away: %d writes kept, tried every %gs: %s",
                                len(self._again), self._retry, exc)  # fmt: skip
                away = True
            except Exception:
                log.exception("writing posted writes failed")
            else:
                if away:
                    log.info("state store back: writing the writes kept meanwhile")
                away = False
                with self._mutex:
                    if self._again:  # it works again: the kept writes go next
                        self._post_again()

    def run(self, op: Op) -> Any:
        """`op`'s answer, once the transaction that holds it committed."""
        return self.run_many([op])[0]

    def run_many(self, ops: Sequence[Op]) -> list[Any]:
        """The answers of `ops`, written in one transaction with whatever else is queued."""
        n = len(ops)
        requests = [_Request(op, k == n - 1) for k, op in enumerate(ops)]
        last = requests[-1]
        with self._mutex:
            self._pending.extend(requests)
            lead = not self._leading
            self._leading = True
        if not lead:
            assert last.wake is not None
            last.wake.acquire()  # the answer is in, or this thread leads next
            lead = not last.done
        if lead:
            self._lead(last)
        answers = []
        for request in requests:
            if request.error is not None:
                raise request.error
            answers.append(request.result)
        return answers

    def drain(self) -> None:
        """Wait until every write queued so far is answered (the caller stops new ones)."""
        with self._mutex:
            while self._leading:
                self._idle.wait()

    def _lead(self, mine: _Request) -> None:
        """Run batches until `mine` is answered, then hand the lead to a waiting caller."""
        try:
            while not mine.done:
                with self._mutex:
                    batch = self._pending[: self._max_batch]
                    del self._pending[: self._max_batch]
                    self._queued_posts -= sum(1 for r in batch if r.posted)
                self._run(batch)
        finally:
            with self._mutex:
                following = next((r for r in self._pending if r.last), None)
                if following is None:
                    self._leading = False
                    self._idle.notify_all()
                else:
                    assert following.wake is not None
                    following.wake.release()  # not done: its caller leads

    def _run(self, batch: list[_Request]) -> None:
        if any(r.op is _nothing for r in batch):
            # `flush`'s marker writes nothing: kept out of the batch, it leaves it of one kind
            # (a burst's finishes alone are one statement on PostgreSQL, in autocommit), and
            # is answered after it, as it would have been in it: the database away, that
            # error, else nothing (another op's error stays that op's).
            markers = [r for r in batch if r.op is _nothing]
            rest = [r for r in batch if r.op is not _nothing]
            if rest:
                self._run(rest)
            away = next((r.error for r in rest if isinstance(r.error, StoreUnavailableError)), None)
            for request in markers:
                self._answer(request, None, away)
            return
        self.batches += 1
        self.writes += len(batch)
        try:
            answers = self._run_batch([r.op for r in batch])
        except BaseException as exc:
            if len(batch) == 1 or isinstance(exc, StoreUnavailableError):
                # The database is away: every op of the batch gets that answer at once (one
                # at a time, each would wait out the busy or connect timeout again).
                for request in batch:
                    self._answer(request, None, exc)
                return
            # One op may have failed the whole transaction: each alone, so only its caller
            # gets its error.
            for request in batch:
                self._run([request])
            return
        for request, answer in zip(batch, answers, strict=True):
            self._answer(request, answer, None)

    def _answer(self, request: _Request, result: Any, error: BaseException | None) -> None:
        request.answer(result, error)
        if request.posted:
            with self._mutex:
                self._unwritten -= 1
                if isinstance(error, StoreUnavailableError) and not self._closing:
                    self._again.append(request.op)  # tried again (see the module notes)
                    return
            if error is not None:
                log.error("a posted write to the state store failed: %s", error)
            elif result is False:
                log.debug("a posted write to the state store changed nothing")
            return
        if request.wake is not None:
            request.wake.release()
