"""`ClusterLimits`: ``max_instances`` and ``overlap`` over the job's live runs on every node.

The engine decides a job's limits over this node's runs (`engine.timeline`, `policies.overlap`):
exact for one process alone on its store. Nodes sharing a store in other processes see each
other's runs only there, so the claim of a run of a job with a limit (``max_instances``, or
``overlap`` other than ``allow``) asks the store for it under the limit
(`StateStore.claim_within`): the count of the job's live runs and the insert are one
transaction, so two nodes never both pass it. What the answer means:

- *claimed*: the run starts, as with a plain claim; *taken*: another node has the slot, the
  run is dropped here;
- a scheduled slot of an ``overlap: skip`` job that finds the job busy, on any node (this
  one's runs too: on a shared store the engine leaves such slots to their claims,
  `JobProcessor.skip_in_claims`, so that a burst's skipped records are written together):
  the store wrote the slot's ``skipped`` record (reason `overlap.SKIPPED`) in the claim's
  transaction; the run is dropped here, with no event, as the engine's own skips are;
- a scheduled slot of an ``overlap: queue`` or ``replace`` job that finds it busy (on any
  node: on a shared store the engine leaves these slots to their claims too) becomes the
  job's one waiting slot across the cluster, written in the store
  (`StateStore.wait_in_line`), unless another slot waits already: then it is recorded
  ``skipped`` at once. The waiting slot waits, off the engine's timeline, in the worker
  that took it, and asks again every `POLL` seconds until the job is idle on every node
  (``replace`` first asks, through the store's kill requests, that its running runs stop,
  wherever they run, with the reason "replaced"); meanwhile it counts
  as a live run for every other claim of the job, so it runs first. A stop of the
  scheduler, or of the run, a pause, the job's removal (`REMOVED`) or a change of its
  definition that no longer waits (`CHANGED`) ends the wait: NOT_STARTED with its reason;
- any other run of a job with ``max_instances`` (``overlap: allow``, a ``run_now``, a
  dependence, a retry, a catch-up run) that finds it at its limit ends NOT_STARTED "already
  running", as the engine's refusals do; of the nodes refusing one slot, the one whose
  record of it is written tells it. So does a backfill's run of a job with an ``overlap``
  policy and no ``max_instances`` (its limit is then 1): the backfill waits for room and
  runs the slot again as its next attempt (`cluster.backfill`).

Several nodes try every slot; they would all wait on the same jobs' locks, one transaction
after another. So, as the claims ahead do, each slot has an owner among the live nodes, picked
by a hash every node computes alike: a node claims the slots it owns at once, together, and
the others' `SHARE_DELAY` after the slot (most are then taken, and their locks free; a slot
whose owner is dead or slow is claimed so); a batch whose slots are all that late already is
claimed in one transaction, the others' slots with this node's. A batch's claims never wait
for another node's transaction: a job whose lock another transaction holds (its owner
claiming it, most often) is left by the store (`LOCKED`, see `StateStore.claim_many_within`)
and asked again `LOCK_POLL` later, when its slot is mostly taken (no lock needed then); what
waits is that job's claim, not the transaction holding this node's other claims and finishes.

Submitted runs (the queue) and reruns after a node loss are claimed under the limit too:

- a submitted run of a job with ``max_instances`` (its row taken only while the job had room
  on every node: `StateStore.take`'s `limits`) that finds the job at its limit when it is
  claimed (another node's run started between the take and the claim) is not run here and
  not refused: its row goes back to the queue, pending as it was (`QueueConsumer.put_back`),
  and waits there until a run of the job ends, as a submitted run waits on one node;
- a rerun after a node loss (``on_node_loss: rerun``) of a job with a limit waits, in the
  worker that took it, until the job has room on every node (asking again every `POLL`
  seconds): it never runs beside a live run the limit forbids, and is never refused for it.
  It is shown waiting in the store meanwhile (`StateStore.wait_for_room`, counted by no
  claim). A stop of the scheduler, or of the run, a pause or the job's removal ends the
  wait: NOT_STARTED with its reason; a definition changed meanwhile gives its limit.

A run of a dead node counts as live until the node is taken over (its runs then become
``abandoned``): a lease period, plus a heartbeat.

A store in this process (`StateStore.in_process`) has no other node's runs: the engine's
decision is the whole of it, and nothing here is asked.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ..clock import Clock
from ..engine.workers import ClaimRefused
from ..model.job import Job
from ..policies.overlap import REPLACED, SKIPPED, limited, waits
from ..runners.context import RunContext
from ..state.records import RunState
from ..state.values import BUSY, CLAIMED, LOCKED, SKIPPED_BY_LIMIT, WAITING
from .node import NodeKeeper

__all__ = [
    "ALREADY_RUNNING",
    "CHANGED",
    "LOCK_POLL",
    "LOCK_TRIES",
    "NODES_EVERY",
    "POLL",
    "REMOVED",
    "SHARE_DELAY",
    "ClusterLimits",
]

log = logging.getLogger("jobscheduler.processor")

POLL = 0.5
"""Seconds between two asks of a slot waiting for its busy job (``overlap: queue, replace``);
the first ask again comes after a tenth of it."""

SHARE_DELAY = 0.05
"""Seconds after a slot a node leaves it to the node that owns it before it claims it too."""

LOCK_POLL = 0.02
"""Seconds before a claim of a burst left to the node claiming its job right now is asked
again (doubling each time, up to a fifth of `POLL`)."""

LOCK_TRIES = 8
"""Asks of such a claim (about 0.9 s apart in all): the last one waits for the lock."""

NODES_EVERY = 5.0
"""Seconds between two reads of the live nodes (the owners of slots)."""

ALREADY_RUNNING = "already running"
"""The reason of a run refused for ``max_instances`` (as the engine's refusals)."""

REMOVED = "job removed"
"""The reason a waiting run ends with when its job is no longer defined (as the engine's)."""

CHANGED = "job changed: its overlap is no longer queue or replace"
"""The reason the waiting slot ends with when its job's definition no longer waits."""

_NO_LIMIT = 2**31 - 1  # a rerun whose job lost its limit while it waited: room for it

# Triggers whose claim under a limit is made for a slot (1 for ``overlap`` alone).
_SLOTS = frozenset({"schedule", "rerun"})
BACKFILL = "backfill"  # a backfill's run: claimed under 1 for ``overlap`` alone too


class ClusterLimits:
    """The limits of one node's runs across the nodes of its store (see the module notes).
    `check()` raises when this node may claim nothing (it lost its lease). Thread-safe."""

    def __init__(self, keeper: NodeKeeper, clock: Clock, check: Callable[[], None]) -> None:
        self._keeper = keeper
        self._clock = clock
        self._check = check
        self._running: Callable[[], bool] = lambda: True
        self._paused: Callable[[str], bool] = lambda name: False
        self._defined: Callable[[], Mapping[str, Job]] | None = None
        self.shared = not keeper.store.in_process
        # What a waiting slot sleeps on, so that `stop` ends its wait at once (on any clock).
        self._cond = threading.Condition()
        self._stopped = False
        self._nodes: tuple[list[str], datetime | None] = ([], None)  # the live nodes, read when

    def follow(self, running: Callable[[], bool]) -> None:
        """From now on, a wait ends once `running()` says False (the scheduler stopped)."""
        self._running = running

    def follow_pauses(self, paused: Callable[[str], bool]) -> None:
        """From now on, a waiting slot whose job `paused(name)` says is paused (as this node
        follows the store's pauses) ends NOT_STARTED "job paused", as a held run does."""
        self._paused = paused

    def follow_definitions(self, jobs: Callable[[], Mapping[str, Job]]) -> None:
        """From now on, a waiting run reads its job's definition in `jobs()` at each ask: a
        job removed ends its wait NOT_STARTED "job removed", a job disabled "job paused", a
        slot's job no longer ``overlap: queue`` or ``replace`` `CHANGED`; a rerun is
        claimed under the job's limit as it is now (no limit left: it runs)."""
        self._defined = jobs

    def definitions_changed(self) -> None:
        """The definitions changed: every waiting run looks at its job again now."""
        with self._cond:
            self._cond.notify_all()

    def stop(self) -> None:
        """End every wait of a busy job's slot now (the scheduler is stopping): each such
        run ends NOT_STARTED "scheduler stopped"."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def applies(self, job: Job, ctx: RunContext) -> bool:
        """Whether `job`'s run is claimed under a limit here (cheap: every claim asks)."""
        if not self.shared or not limited(job):
            return False
        return ctx.trigger in _SLOTS or job.max_instances is not None or ctx.trigger == BACKFILL

    def claim(self, job: Job, ctx: RunContext) -> bool:
        """The claim of a run that `applies`: True (run it), False (dropped here: another
        node's slot, a slot skipped and recorded so, or a submitted run whose row goes back
        to the queue); raises `ClaimRefused` for a run that ends NOT_STARTED (see the module
        notes)."""
        limit, skip = self.terms(job, ctx)
        answer = self._ask(job, ctx, limit, skip)
        if answer == BUSY:
            if ctx.trigger == "schedule" and waits(job):
                return self._wait_in_line(job, ctx, limit)
            if ctx.trigger == "rerun":
                return self._wait_for_room(job, ctx, limit)
        return self.outcome(job, ctx, answer)

    def terms(self, job: Job, ctx: RunContext) -> tuple[int, str | None]:
        """The limit a run that `applies` is claimed under, and the reason its slot is
        recorded skipped with when the job is busy (None: not skipped)."""
        limit = job.max_instances if job.max_instances is not None else 1
        skip = SKIPPED if ctx.trigger == "schedule" and job.overlap == "skip" else None
        return limit, skip

    def outcome(self, job: Job, ctx: RunContext, answer: str) -> bool:
        """What the store's `answer` to a run's claim under its limit means for the run (as
        `claim`; a busy slot that waits is not asked here)."""
        if answer == CLAIMED:
            return True
        if answer == SKIPPED_BY_LIMIT:
            self._keeper.ended(job.name, ctx.slot)  # the job's mark moves past the slot
            return False
        if answer == BUSY:
            if ctx.trigger == "submit":
                return False  # its row goes back to the queue (`StoreClaims`)
            return self._refuse(job, ctx)
        return False  # taken: another node's

    def claim_many(self, runs: Sequence[tuple[Job, RunContext]]) -> list[bool | Exception]:
        """The claims of `runs` (each `applies`, none that waits), answered in order as
        `claim` answers (an exception: its run's, or the store's): the slots this node owns
        in one store transaction at once, the others' in another `SHARE_DELAY` after their
        slots; slots all `SHARE_DELAY` past already: every one in one transaction (see the
        module notes)."""
        mine, theirs = self._shares(runs)
        out: list[bool | Exception] = [False] * len(runs)
        if theirs:
            latest = max(slot for k in theirs if (slot := runs[k][1].slot) is not None)
            wait = (latest - self._clock.now()).total_seconds() + SHARE_DELAY
            if wait <= 0:
                self._claim_together(runs, sorted(mine + theirs), out)
                return out
            self._claim_together(runs, mine, out)
            self._clock.sleep(min(wait, SHARE_DELAY))
            self._claim_together(runs, theirs, out)
            return out
        self._claim_together(runs, mine, out)
        return out

    def _claim_together(
        self,
        runs: Sequence[tuple[Job, RunContext]],
        picked: list[int],
        out: list[bool | Exception],
    ) -> None:
        """Claim `runs[k]` for each `k` of `picked` in one transaction; answers into `out`.
        A claim of a job another node is claiming right now (the store answers `LOCKED`) is
        asked again `LOCK_POLL` seconds later, with the others so left, instead of waiting
        for that node's transaction (see the module notes); after `LOCK_TRIES` asks, the
        last waits."""
        delay = LOCK_POLL
        for tries in range(1, LOCK_TRIES + 1):
            picked = self._claim_round(runs, picked, out, yielding=tries < LOCK_TRIES)
            if not picked:
                return
            self._clock.sleep(delay)
            delay = min(2 * delay, 2 * POLL / 5)

    def _claim_round(
        self,
        runs: Sequence[tuple[Job, RunContext]],
        picked: list[int],
        out: list[bool | Exception],
        *,
        yielding: bool,
    ) -> list[int]:
        """One ask of `_claim_together`: answers into `out`; returns the places of the claims
        left `LOCKED` (only when `yielding`)."""
        keeper = self._keeper
        name, now = keeper.name, self._clock.now()
        claims = []
        for k in picked:
            job, ctx = runs[k]
            limit, skip = self.terms(job, ctx)
            claims.append(
                (job.name, ctx.slot, ctx.trigger, ctx.run_id, name, ctx.attempt, now, limit, skip)
            )
        try:
            self._check()
            answers = keeper.store.claim_many_within(claims, yielding=yielding)
        except Exception as exc:
            for k in picked:
                out[k] = exc
            return []
        locked: list[int] = []
        for k, answer in zip(picked, answers, strict=True):
            if answer == LOCKED:
                locked.append(k)
                continue
            job, ctx = runs[k]
            try:
                out[k] = self.outcome(job, ctx, answer)
            except Exception as exc:
                out[k] = exc
        return locked

    def _shares(self, runs: Sequence[tuple[Job, RunContext]]) -> tuple[list[int], list[int]]:
        """The places in `runs` of the slots this node owns (and of runs that are no slot),
        and of the slots other live nodes own: a hash every node computes alike (CRC-32 of
        the job's name and the slot, as the claims ahead share theirs) over the live nodes,
        read at most every `NODES_EVERY` seconds."""
        peers = self._peers()
        if len(peers) <= 1 or self._keeper.name not in peers:
            return list(range(len(runs))), []
        me, count = peers.index(self._keeper.name), len(peers)
        mine: list[int] = []
        theirs: list[int] = []
        for k, (job, ctx) in enumerate(runs):
            slot = ctx.slot
            if slot is None or ctx.trigger != "schedule":
                mine.append(k)
                continue
            key = f"{job.name}\0{round(slot.timestamp() * 1_000_000)}".encode()
            (mine if zlib.crc32(key) % count == me else theirs).append(k)
        return mine, theirs

    def _peers(self) -> list[str]:
        """The live nodes' names, sorted (read at most every `NODES_EVERY` seconds)."""
        now = self._clock.now()
        names, read = self._nodes
        if read is None or (now - read).total_seconds() >= NODES_EVERY:
            try:
                names = sorted(n.name for n in self._keeper.store.nodes() if n.state == "up")
            except Exception:
                log.warning("reading the live nodes failed: claiming every slot", exc_info=True)
                names = []
            self._nodes = (names, now)
        return names

    def _ask(self, job: Job, ctx: RunContext, limit: int, skip: str | None) -> str:
        keeper = self._keeper
        return keeper.store.claim_within(
            job.name,
            ctx.slot,
            ctx.trigger,
            ctx.run_id,
            node=keeper.name,
            attempt=ctx.attempt,
            started=self._clock.now(),
            limit=limit,
            skip=skip,
        )

    def _refuse(self, job: Job, ctx: RunContext) -> bool:
        """A run refused for ``max_instances``: its NOT_STARTED record is written under its
        key, and the node that wrote it tells it (raises `ClaimRefused`); another node's
        refusal of the same slot was first: False (dropped here: one report a slot)."""
        keeper = self._keeper
        now = self._clock.now()
        written = keeper.store.record(
            job.name,
            ctx.slot,
            ctx.trigger,
            ctx.run_id,
            node=keeper.name,
            attempt=ctx.attempt,
            state=RunState.NOT_STARTED,
            started=now,
            ended=now,
            reason=ALREADY_RUNNING,
        )
        if not written:
            return False
        raise ClaimRefused(ALREADY_RUNNING)

    def _wait_in_line(self, job: Job, ctx: RunContext, limit: int) -> bool:
        """A scheduled slot of the busy `job` (``queue``, ``replace``): the job's one waiting
        slot across the cluster (`StateStore.wait_in_line`), which waits for the job to be
        idle on every node; or, when another slot waits already, recorded ``skipped`` at
        once (False: dropped here, with no event); or, when this very slot waits on another
        node, left to it (False)."""
        keeper = self._keeper
        answer = keeper.store.wait_in_line(
            job.name,
            ctx.slot,
            ctx.run_id,
            node=keeper.name,
            started=self._clock.now(),
            skip=SKIPPED,
        )
        if answer == SKIPPED_BY_LIMIT:
            keeper.ended(job.name, ctx.slot)  # the job's mark moves past the slot
            return False
        if answer != WAITING:
            return False  # this slot waits on another node
        return self._wait_shown(job, ctx, limit, job.overlap)

    def _limit_now(self, job: Job, ctx: RunContext, limit: int, policy: str) -> int:
        """The limit the waiting run of `job` is asked under now, as its definition is now
        (`follow_definitions`); raises `ClaimRefused` when the wait is over (its job removed,
        disabled, or no longer waiting for a busy job)."""
        if self._defined is None:
            return limit
        now = self._defined().get(job.name)
        if now is None:
            raise ClaimRefused(REMOVED)
        if not now.enabled:
            raise ClaimRefused("job paused")
        if policy == "rerun":
            return self.terms(now, ctx)[0] if limited(now) else _NO_LIMIT
        if not waits(now):
            raise ClaimRefused(CHANGED)
        return self.terms(now, ctx)[0]

    def _wait_for_room(self, job: Job, ctx: RunContext, limit: int) -> bool:
        """A rerun of the busy `job` waits for room under its limit, shown as waiting in the
        store (`StateStore.wait_for_room`) while it does (see the module notes)."""
        keeper = self._keeper
        try:
            keeper.store.wait_for_room(
                job.name,
                ctx.slot,
                ctx.run_id,
                node=keeper.name,
                attempt=ctx.attempt,
                started=self._clock.now(),
            )
        except Exception:  # only shown: the rerun waits all the same
            log.warning("job %r: showing the wait of rerun %s failed", job.name, ctx.run_id)
        return self._wait_shown(job, ctx, limit, "rerun")

    def _wait_shown(self, job: Job, ctx: RunContext, limit: int, policy: str) -> bool:
        """`_wait`, then the run's wait shown in the store ended (`StateStore.leave_line`),
        however the wait ends; a failure to end it is only logged."""
        try:
            return self._wait(job, ctx, limit, policy)
        finally:
            try:
                self._keeper.store.leave_line(job.name, ctx.run_id)
            except Exception:  # a node no longer up waits no longer (`waiting_runs`)
                what = f"rerun {ctx.run_id}" if policy == "rerun" else f"slot {ctx.slot}"
                log.warning("job %r: ending the wait of %s failed", job.name, what)

    def _wait(self, job: Job, ctx: RunContext, limit: int, policy: str) -> bool:
        """The waiting slot of the busy `job` waits for it to be idle on every node
        (``replace`` first asks its running runs to stop, wherever they run, with the reason
        `overlap.REPLACED`, exactly as on one node; this node logs which slot replaced them);
        a rerun (`policy` ``"rerun"``) waits until the job has room, however long (see the
        module notes)."""
        slot = ctx.slot
        if policy == "replace":
            stopping = self._keeper.store.request_kill(job=job.name, reason=REPLACED)
            log.info(
                "job %r: slot %s on node %s replaces %d running run(s)",
                job.name,
                slot,
                self._keeper.name,
                stopping,
            )
        delay = POLL / 10
        while True:
            with self._cond:
                if not self._stopped:
                    self._clock.wait(self._cond, delay)
                stopped = self._stopped
            if stopped:
                raise ClaimRefused("scheduler stopped")
            delay = min(delay * 2, POLL)
            self._check()
            reason = ctx.stop_reason
            if reason is not None:
                raise ClaimRefused(reason)
            if not self._running():
                raise ClaimRefused("scheduler stopped")
            if self._paused(job.name):
                raise ClaimRefused("job paused")
            limit = self._limit_now(job, ctx, limit, policy)
            answer = self._ask(job, ctx, limit, None)
            if answer == CLAIMED:
                return True
            if answer != BUSY:
                return False  # taken: another node ran the slot meanwhile
