"""`ClaimsAhead`: the store's claims of scheduled slots, made before the slots are due.

A claim made when its slot is due puts the store between the slot and the run: with a store in
another process, a burst of 1,000 slots waits for its claims' transactions and for the CPU
that makes them, which is what the runs' start is short of then. So the slots due in the next
`LEAD` seconds are claimed together, in one transaction, by a thread of their own, before they
are due; when a slot comes it starts as it would without a store. The loop body is
`claim_due(now)`, which returns how long to wait (tests call it directly on a `FakeClock`).

What is claimed ahead: scheduled slots (attempt 1) of jobs not pinned to hosts (``host``).
Other runs (``run_now``, dependences, retries, reruns, submitted runs, and slots that came on
the timeline after their round) are claimed when they start, as before (see `workers`).

A slot of a job with a limit (``max_instances``, or ``overlap`` other than ``allow``) is
claimed ahead under its limit, counted over the job's live runs on every node in the claim's
transaction (`cluster.claims`, `cluster.limits`): won only while the job has room, and from
then on its claim counts as a live run of the job on every node (a ``run_now`` of a
``max_instances`` job then is refused "already running", a submitted run waits in the queue,
a rerun waits), so nothing starts beside it that its limit forbids. A slot whose job was busy
when claimed ahead is answered *due* (None): nothing was written, it is forgotten here, and
its run is claimed when it starts, under the limit, exactly as without a claim ahead (the job
may be idle by then: the decision, skip, wait or refuse, is made at the slot); a job busy in
this process (its runs queued or running here reach its limit) is not asked about. Only the
slot's owner (below) claims such a slot ahead: the others' claims would count a busy job's
runs again for nothing; they claim it when due, as without a claim ahead (taken then, most
often, which needs no lock; a dead owner's slot is theirs then).

Several nodes claim the same slots ahead; a transaction that claims a tick's slots would take
them all from a node whose transaction came a moment later, leaving it idle while this one
runs everything. So each slot has an owner, one of the live nodes (``up`` in the store, read at
most every `NODES_EVERY` seconds) picked by a hash of the job and the slot: a node claims the
slots it owns at once, and the others' `SHARE_DELAY` seconds later (most are then taken; a
slot whose owner is dead, slow or does not know the job is claimed so). A tick's runs spread
over the nodes as evenly as the hash does.

Each slot claimed ahead has its run id from then on (`ReadyRuns.claim` gives it to the run),
and its claim's answer: won (the run starts without asking the store again, unless this node
lost its lease meanwhile), lost to another node (the run is dropped when due, as a claim said
no), due (its job was busy, see above) or failed (the store was away): the run is claimed when
it starts, as without a claim ahead. A run that comes before its round has its answer waits
for it.

A slot claimed ahead that does not start here:

- refused when due (``max_instances``, ``overlap``), or dropped by a stop: its NOT_STARTED
  record is its claim, finished (the refusal takes its run id);
- never dispatched (its job removed, paused or rescheduled meanwhile; or merged into a run of
  the job still queued): the claim is *released* (its row deleted, as if never made) once the
  slot is `GRACE` seconds past and no run of it is queued or held.

A stop (`close`) claims nothing more; the processor lets the slots claimed so far come (at
most `LEAD` seconds on the system clock: other nodes count on this one to run them) before it
stops, and releases the claims left. A crash leaves the slots claimed and not started: they
are abandoned when the node is taken over, as runs in flight are (docs/state.md).
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from ..clock import Clock, SystemClock
from ..model.job import Job
from ..policies.overlap import limited
from .keys import EPOCH, MICROSECOND, micros
from .timeline import Timeline

__all__ = ["GRACE", "LEAD", "ROUND", "AheadFn", "Answer", "ClaimsAhead", "ReleaseFn", "Round"]

log = logging.getLogger("jobscheduler.processor")

LEAD = 0.25
"""Seconds before its slot a slot is claimed: more than a round of 1,000 claims takes on
PostgreSQL here (~30 ms), little against what a crash then leaves claimed."""

GRACE = 5.0
"""Seconds past its slot before a claim whose run never came is released."""

SHARE_DELAY = 0.05
"""Seconds a node leaves the slots other nodes own to them before it claims them too."""

NODES_EVERY = 5.0
"""Seconds between two reads of the live nodes (for the owners of slots)."""

ANSWER_WAIT = 10.0
"""Seconds a run waits for its round's answer before it is claimed as it starts instead (a
store that slow fails the claim too; this bounds the wait whatever happens)."""

ROUND = 2_000
"""Slots claimed in one transaction at most: a larger round is sent in parts, soonest first."""

# µs after a slot when its job's next slot is looked for: after the burst it may belong to
# (a look takes the processor's lock), before LEAD ahead of a next slot 1 s later.
_AFTER_DISPATCH = 100_000

# A slot's answer: True (won), False (another node's), None (due: its job was busy, the slot
# is claimed when it starts), or the exception that stopped the claim.
Answer = bool | Exception | None
# (job, slot, run id) of each slot claimed ahead -> an answer each, in order.
AheadFn = Callable[[Sequence[tuple[Job, datetime, str]]], list[Answer]]
# Deletes the claims of these run ids (still running: never started).
ReleaseFn = Callable[[Sequence[str]], object]


class Round:
    """The slots of one round: their jobs and run ids and, once the store answered, the
    answers."""

    __slots__ = ("answers", "done", "jobs", "run_ids")

    def __init__(self, jobs: list[Job], run_ids: list[str]) -> None:
        self.jobs = jobs
        self.run_ids = run_ids
        self.answers: Sequence[Answer] = ()
        self.done = threading.Event()

    def answer(self, index: int) -> Answer:
        """Slot `index`'s answer, once the round has it (waits for it, at most
        `ANSWER_WAIT` seconds: then an error, and the run is claimed as it starts)."""
        if not self.done.wait(ANSWER_WAIT):
            # INFO: a store that hangs is told by the node (cluster/outage.py), once per
            # outage; a line per slot would flood the log.
            log.info("no answer from the claims ahead in %g s: claiming when due", ANSWER_WAIT)
            return TimeoutError("no answer from the claims made ahead")
        return self.answers[index]

    def fail(self, error: Exception) -> None:
        """Answer every slot with `error` (a round that will not be sent)."""
        self.answered([error] * len(self.run_ids))

    def answered(self, answers: Sequence[Answer]) -> None:
        """The store's answers, one a slot: the round is done."""
        self.answers = answers
        self.done.set()


# What `ReadyRuns.ahead` holds per slot claimed ahead: its round and its place in it.
Entry = tuple[Round, int]


class ClaimsAhead:
    """The claims ahead of one processor (see the module notes). `lock` is the processor's;
    `timeline` its timeline; `ids` its run ids."""

    def __init__(
        self,
        lock: threading.Lock,
        timeline: Timeline,
        ids: Iterator[str],
        clock: Clock,
        claim: AheadFn,
        release: ReleaseFn,
        *,
        lead: float = LEAD,
        max_wait: float | None = None,
        nodes: Callable[[], Sequence[str]] | None = None,
        name: str = "",
    ) -> None:
        self._lock = lock
        self._timeline = timeline
        self._ids = ids
        self._clock = clock
        self._claim = claim
        self._release = release
        self.lead = lead
        self._lead_us = round(lead * 1_000_000)
        self._grace_us = round(GRACE * 1_000_000)
        self._max_wait = max_wait
        # The ready runs look a slot's claim up there (`ReadyRuns.ahead`).
        self.slots: dict[tuple[str, datetime], Entry] = timeline.ready.ahead
        self._done_us = 0  # slots up to this instant (µs) were looked at
        self._active = False
        self._wake = threading.Condition(lock)
        self._deadline = float("inf")  # when the thread looks next (µs)
        self._thread: threading.Thread | None = None
        self._failing = False  # a round failed: logged once until one works
        self._nodes = nodes  # the live nodes' names (None: this node is alone)
        self._name = name
        self._peers: tuple[list[str], int] = ([], -1)  # as last read, and when (µs; -1: never)
        # Rounds of slots other nodes own, registered and not sent yet: (when to send, µs).
        self._later: list[tuple[int, Round, list[tuple[Job, datetime, str]]]] = []
        self.rounds = 0

    # -- the loop body ---------------------------------------------------------------------

    def claim_due(self, now: datetime) -> float | None:
        """Claim the slots due up to `LEAD` after `now` not claimed yet, and release the claims
        whose run never came (see the module notes). Returns the seconds until the next
        round, or None when there is nothing to claim or release."""
        now_us = micros(now)
        peers, me = self._live(now_us)
        with self._lock:
            if not self._active:
                return None
            until = now_us + self._lead_us
            found, soonest, following = self._timeline.upcoming(max(self._done_us, now_us), until)
            self._done_us = max(self._done_us, until)
            found.sort(key=lambda pair: pair[1])  # the soonest slots are answered first
            timeline = self._timeline
            # A limited job busy in this process is busy for the store too: its slot is
            # left to its claim when due, without counting the job's runs ahead.
            picked = [
                (job, slot, next(self._ids))
                for job, slot in found
                if job.host is None and not (limited(job) and timeline.busy_here(job))
            ]
            mine, theirs = _shares(picked, peers, me, now_us + 2 * _us(SHARE_DELAY))
            # Another node's slots of jobs with a limit are left to their claims when due
            # (see the module notes).
            theirs = [claim for claim in theirs if not limited(claim[0])]
            unused = self._sweep(now_us)
            # Registered last: a slot registered is answered (`_send` never raises), or a
            # run of it would wait for an answer that never comes.
            batches = self._register(mine)
            self._later.extend((now_us + _us(SHARE_DELAY), *b) for b in self._register(theirs))
            batches += [(b, c) for when, b, c in self._later if when <= now_us]
            self._later = [entry for entry in self._later if entry[0] > now_us]
            later = min((when for when, _b, _c in self._later), default=None)
            waiting = bool(self.slots)
        for batch, claims in batches:
            self._send(batch, claims)
        if unused:
            try:
                self._release(unused)
            except Exception:
                log.exception("releasing %d claim(s) made ahead failed", len(unused))
        return self._delay(now_us, soonest, following, later, waiting)

    def _register(
        self, picked: list[tuple[Job, datetime, str]]
    ) -> list[tuple[Round, list[tuple[Job, datetime, str]]]]:
        """Rounds of at most `ROUND` of `picked`, their slots registered (lock held)."""
        slots = self.slots
        batches = []
        for first in range(0, len(picked), ROUND):
            claims = picked[first : first + ROUND]
            batch = Round([job for job, _, _ in claims], [rid for _, _, rid in claims])
            for index, (job, slot, _rid) in enumerate(claims):
                slots[(job.name, slot)] = (batch, index)
            batches.append((batch, claims))
        return batches

    def _live(self, now_us: int) -> tuple[int, int]:
        """How many live nodes share the slots, and this node's place among them (0 of 1
        when alone, unknown, or the store cannot say). Read at most every `NODES_EVERY`."""
        names, read = self._peers
        if self._nodes is not None and (read < 0 or now_us - read >= _us(NODES_EVERY)):
            try:
                names = sorted(self._nodes())
            except Exception:
                log.warning("reading the live nodes failed: claiming every slot", exc_info=True)
                names = []
            self._peers = (names, now_us)
        if self._name not in names:
            return 1, 0
        return len(names), names.index(self._name)

    def _send(self, batch: Round, claims: list[tuple[Job, datetime, str]]) -> None:
        """The store's answers for `batch` (never raises: an error is every slot's answer)."""
        try:
            answers: Sequence[Answer] = self._claim(claims)
        except Exception as exc:
            answers = [exc] * len(claims)
        failed = next((a for a in answers if isinstance(a, Exception)), None)
        if failed is not None and not self._failing:
            log.warning("claiming %d slot(s) ahead failed (%s): they are claimed when due",
                        len(claims), failed)  # fmt: skip
        self._failing = failed is not None
        if None in answers:  # (a list's `in` compares by identity first: cheap)
            self._forget_due(batch, claims, answers)
        batch.answered(answers)
        self.rounds += 1

    def _forget_due(
        self, batch: Round, claims: list[tuple[Job, datetime, str]], answers: Sequence[Answer]
    ) -> None:
        """Forget the slots of `batch` answered due (their jobs were busy): their runs, not
        dispatched yet, are claimed when they start, as without a claim ahead (batched with
        the others then); one dispatched already reads its answer and does the same."""
        slots = self.slots
        with self._lock:
            for index, answer in enumerate(answers):
                if answer is None:
                    key = (claims[index][0].name, claims[index][1])
                    if slots.get(key) == (batch, index):
                        del slots[key]

    def _sweep(self, now_us: int) -> list[str]:
        """Forget the slots `GRACE` past whose run never came, and name the claims of them
        this node won (lock held; see the module notes)."""
        slots = self.slots
        limit = now_us - self._grace_us
        unused: list[str] = []
        timeline = self._timeline
        for key, entry in list(slots.items()):
            name, slot = key
            if (slot - EPOCH) // MICROSECOND > limit or not entry[0].done.is_set():
                continue
            if timeline.waits(name, slot):
                continue  # queued or held: it will start, or be refused on its claim
            if slots.pop(key, None) is not entry:
                continue  # a worker took it meanwhile
            batch, index = entry
            if batch.answers[index] is True:
                unused.append(batch.run_ids[index])
        return unused

    def _delay(
        self,
        now_us: int,
        soonest: int | None,
        following: int | None,
        later: int | None,
        waiting: bool,
    ) -> float | None:
        """Seconds until the next round: `LEAD` before the next slot not looked at; right
        after the `soonest` slot looked at is dispatched (its job's next slot is then on the
        timeline, to be looked at); when the others' slots are to be sent (`later`); and no
        later than `GRACE` while slots claimed ahead are held (to release unused ones)."""
        wake = None if following is None else following - self._lead_us
        if later is not None:
            wake = later if wake is None else min(wake, later)
        if soonest is not None:
            after = max(soonest, now_us) + _AFTER_DISPATCH
            wake = after if wake is None else min(wake, after)
        if waiting:
            check = now_us + self._grace_us
            wake = check if wake is None else min(wake, check)
        with self._lock:
            self._deadline = float("inf") if wake is None else wake
        return None if wake is None else max(wake - now_us, 0) / 1e6

    # -- the thread ------------------------------------------------------------------------

    def start(self, *, thread: bool = True) -> None:
        """Start claiming (the processor started; lock held): in a thread of its own, or
        (`thread=False`: tests, lock not needed) when `claim_due` is called."""
        self._active = True
        self._done_us = 0
        if not thread:
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._loop, name="jobscheduler-claims-ahead", daemon=True
            )
            self._thread.start()
        else:
            self._wake.notify()

    def changed_at(self, earliest: float) -> None:
        """A change put an entry at `earliest` (a timestamp): look again before it is due
        (lock held)."""
        if self._active and (earliest * 1_000_000 - self._lead_us) < self._deadline:
            self._deadline = earliest * 1_000_000 - self._lead_us
            self._wake.notify()

    def close(self) -> datetime | None:
        """Claim nothing more (lock held); returns the last instant claimed ahead for (the
        processor lets it come before it stops), None when nothing is."""
        self._active = False
        self._wake.notify()
        for _when, batch, _claims in self._later:  # not to be sent: claimed when due
            batch.fail(RuntimeError("the claims ahead stopped"))
        self._later = []
        if not self.slots:
            return None
        return max(slot for _name, slot in self.slots)

    def let_come(self, dispatch: Callable[[datetime], object]) -> None:
        """Before a stop (lock not held): claim nothing more, and let the slots claimed so far
        come and be dispatched (`dispatch(now)`): other nodes leave them to this one. On the
        system clock only; under another clock, time moves when its owner says, and they
        are dropped on their claims (`drop_future`)."""
        with self._lock:
            if not self._active:
                return
            last = self.close()
        clock = self._clock
        if last is None or not isinstance(clock, SystemClock):
            return
        left = (last - clock.now()).total_seconds()
        if 0 < left <= 2 * self.lead:
            clock.sleep(left)
        dispatch(clock.now())

    def drop_future(self, now: datetime, reason: str) -> int:
        """The processor stops before slots claimed ahead came (lock held): each that this
        node won, or may have (not answered due or another node's), ends NOT_STARTED with
        `reason` on its claim (other nodes leave it to this one). Returns how many."""
        dropped = 0
        for (_name, slot), (batch, index) in list(self.slots.items()):
            if slot < now:
                continue  # past and never dispatched: released by `release_all`
            answered = batch.done.is_set()
            if answered and (batch.answers[index] is False or batch.answers[index] is None):
                self.slots.pop((_name, slot), None)
                continue
            self._timeline.ready.refuse(batch.jobs[index], slot, "schedule", now, reason)
            dropped += 1
        return dropped

    def release_all(self) -> None:
        """Release every claim ahead this node won and did not start (after a stop: the
        runs left were refused on their claims already)."""
        with self._lock:
            entries = list(self.slots.values())
            self.slots.clear()
        unused = [b.run_ids[i] for b, i in entries if b.done.is_set() and b.answers[i] is True]
        if unused:
            try:
                self._release(unused)
            except Exception:
                log.exception("releasing %d claim(s) made ahead failed", len(unused))

    def _loop(self) -> None:
        clock = self._clock
        delay: float | None = 0.0
        while True:
            with self._lock:
                if not self._active:
                    return
                if delay is None or delay > 0:
                    if self._max_wait is not None:
                        delay = self._max_wait if delay is None else min(delay, self._max_wait)
                    clock.wait(self._wake, delay)
                if not self._active:
                    return
            try:
                delay = self.claim_due(clock.now())
            except Exception:
                log.exception("claiming slots ahead raised")
                delay = 1.0


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _shares(
    picked: list[tuple[Job, datetime, str]], peers: int, me: int, soon_us: int
) -> tuple[list[tuple[Job, datetime, str]], list[tuple[Job, datetime, str]]]:
    """`picked` split into the slots this node (place `me` of `peers`) owns, with those due
    before `soon_us` (no time to leave them to others), and the others' (see the module
    notes). The owner is a hash every node computes alike (CRC-32, not Python's salted
    `hash`) of the job's name and the slot."""
    if peers <= 1:
        return picked, []
    mine, theirs = [], []
    for claim in picked:
        job, slot, _rid = claim
        key = f"{job.name}\0{micros(slot)}".encode()
        if zlib.crc32(key) % peers == me or micros(slot) < soon_us:
            mine.append(claim)
        else:
            theirs.append(claim)
    return mine, theirs
