"""`StoreClaims`: this node's claims of runs in the state store, one run or a batch at once.

`attach` hands them to the engine: the `Scheduler` calls it where it assembles its parts, and
from then on a worker asks `claim` (or `claim_many`, or `confirm` for a slot claimed ahead)
itself, right before the run starts.

Right before a run starts, its key is inserted in the store (see `StateStore.claim`); a key
already taken means another node runs it, and the run is dropped here. Before the store is
asked, each run goes through what decides whether this node may run it at all:

- a run of a job pinned to other nodes (`host`) is refused (`RunPolicies.runs_here`), and a
  retry is noted there;
- a run of a job with `pause_after_failures` that the store has paused this moment (by
  another node's failure) is dropped, so the cluster runs no more than N failing runs in a
  row (`RunPolicies.paused_in_store`: one read, for such jobs only; a slot claimed ahead has
  its claim released); a backfill's run ends NOT_STARTED "job paused" instead (its backfill
  waits for its slot's answer);
- a submitted run is given its arguments (`QueueConsumer.bind`); one claimed with its queue
  row's take (its trigger carries the run id: `queue.Submitted`) is not claimed again: it
  goes through these checks and starts, or ends NOT_STARTED (its claim finished so, its row
  settled), never dropped (see `_claimed_in_take`);
- a rerun after a node loss gets the slot and attempt it reruns (`NodeKeeper.prepare`);
- a scheduled slot (attempt 1) is not claimed while the store is away, while this node lost
  its lease, or while its clock is past the skew limit: it is dropped here (as a slot
  another node took) and noted in `StoreOutage`, to be recorded ``missed`` once a heartbeat
  gets through, unless a node records it (see `cluster.outage`, `cluster.skew`);
- any other run (on demand, a retry, a rerun) is claimed if the store answers; a node that
  lost its lease claims nothing until it has joined again: such a claim raises (a
  `ClaimError`, logged without a traceback), so the run ends NOT_STARTED "claim failed: …"
  and its handlers hear of it;
- a run of a job with a limit (``max_instances``, ``overlap``) on a store shared with other
  processes is claimed under the limit, counted over the job's live runs on every node in
  the claim's transaction (`ClusterLimits`, see `cluster.limits`);
- a submitted run not claimed here (its job at its limit on some node, or paused by
  failures) is not run and not refused: its row goes back to the queue, pending
  (`QueueConsumer.put_back`).

`claim_many` does the same for the runs a worker takes together while many are due (see
`engine.workers`): one store transaction for all of them, where a claim each would make
every run of a burst wait for a commit of its own.

`claim_ahead` claims scheduled slots before they are due (see `engine.ahead`), each under the
run id its run will have, with the slot as its start until the run's own is written; when such
a run comes, `confirm` does the checks of a run that starts (a fenced node starts nothing)
without asking the store again. `release` deletes the claims whose runs never came. A slot of
a job with a limit is claimed ahead under it (`StateStore.claim_many_within`, in a transaction
of its own): only while the job is idle enough on every node, its claim then a live run of the
job for every other claim; a busy job's slot is answered *due* (nothing written) and claimed
when it starts, where the limit decides (`ClusterLimits`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ..clock import Clock
from ..engine.ahead import Answer
from ..engine.processor import JobProcessor
from ..engine.workers import ClaimRefused
from ..errors import ClaimError
from ..model.job import Job
from ..policies.overlap import limited, waits
from ..policies.runpolicies import RunPolicies
from ..runners.context import RunContext
from ..state.values import BUSY, CLAIMED, LOCKED, TAKEN
from .limits import BACKFILL, ClusterLimits
from .node import NodeKeeper
from .outage import is_store_failure
from .queue import QueueConsumer, Submitted

__all__ = ["FencedError", "StoreClaims"]


class FencedError(ClaimError):
    """This node lost its lease: it claims nothing until the store has it back."""

    def __init__(self) -> None:
        super().__init__("this node lost its lease: waiting for the state store")


class StoreClaims:
    """The claims of one scheduler's runs (see the module notes). Thread-safe."""

    def __init__(
        self, keeper: NodeKeeper, policies: RunPolicies, queue: QueueConsumer, clock: Clock
    ) -> None:
        self._keeper = keeper
        self._policies = policies
        self._queue = queue
        self._clock = clock
        self.limits = ClusterLimits(keeper, clock, self._check_lease)
        self.limits.follow_pauses(policies.is_paused)

    def _check_lease(self) -> None:
        """Raise `FencedError` when this node lost its lease (it claims nothing then)."""
        if self._keeper.fenced:
            raise FencedError()

    def _left(self, job: str, slot: datetime) -> bool:
        """Whether this node leaves scheduled `slot` of `job` unclaimed (store away, lease
        lost, clock skewed): noted, to be recorded missed (see the module notes)."""
        keeper = self._keeper
        if keeper.fenced or keeper.outage.away:
            keeper.outage.unclaimed(job, slot)
            return True
        if keeper.skew.blocked:
            keeper.outage.unclaimed(job, slot, keeper.skew.cause)
            return True
        return False

    def _failed(self, exc: Exception, job: str, slot: datetime | None) -> Exception:
        """A claim of `job` (`slot`: a scheduled slot's) raised `exc`: a failure of the store
        goes to the outage (the slot noted) and comes back as a `ClaimError`; anything else
        (a bug) as it is."""
        if not is_store_failure(exc):
            return exc
        outage = self._keeper.outage
        outage.failed(exc, f"claiming a run of {job!r}")
        if slot is not None:
            outage.unclaimed(job, slot)
        return ClaimError(f"state store unreachable: {exc}")

    def _here(self, job: Job, ctx: RunContext) -> bool:
        """Whether this node goes on to claim the run in the store (see the module notes)."""
        if (job.host is not None or ctx.attempt != 1) and not self._policies.runs_here(job, ctx):
            return False  # pinned to other nodes (see policies/hosts.py)
        if job.pause_after_failures is not None and self._policies.paused_in_store(job):
            if ctx.trigger == BACKFILL:  # its backfill waits for an answer: it gets one
                raise ClaimRefused("job paused")
            self._queue.put_back(ctx)  # a submitted run's row waits for the resume
            return False  # paused by failures on another node (see policies/pausing.py)
        self._queue.bind(ctx)  # a submitted run's arguments (any other run: nothing)
        self._keeper.prepare(ctx)
        return True

    def claim(self, job: Job, ctx: RunContext) -> bool:
        """The claim of one run (``JobProcessor.claim_with``): False when another node runs
        it or it is not for this node; raises when the store fails."""
        trigger = ctx.trigger
        if trigger.__class__ is Submitted and trigger.run_id is not None:
            return self._claimed_in_take(job, ctx)
        if not self._here(job, ctx):
            return False
        keeper = self._keeper
        slot = _scheduled(ctx)
        if slot is not None:
            if self._left(job.name, slot):  # (fenced included: noted, not raised)
                return False
        elif keeper.fenced:
            raise FencedError()
        try:
            if self.limits.applies(job, ctx):
                return self._limited(job, ctx)
            return keeper.store.claim(
                job.name,
                ctx.slot,
                trigger,
                ctx.run_id,
                node=keeper.name,
                attempt=ctx.attempt,
                started=self._clock.now(),
            )
        except Exception as exc:
            failure = self._failed(exc, job.name, slot)
            if slot is not None and failure is not exc:
                return False  # noted: recorded missed once the store is back
            raise failure from exc

    def stop(self) -> None:
        """Before the processor's shutdown: slots waiting for their busy job give up."""
        self.limits.stop()

    def attach(self, processor: JobProcessor, *, together: bool) -> None:
        """Have `processor` claim every run through this before it starts; with `together`
        (a store where every claim is a commit), a burst's runs together and scheduled
        slots ahead of time too (see the module notes). Before the processor starts."""
        processor.claim_with(self.claim)
        self.limits.follow(lambda: processor.running)
        if together:
            processor.skip_in_claims()  # the claims count every node's runs (`limits`)
            processor.batch_claims(self.claim_many)
            processor.claim_ahead(self.claim_ahead, self.confirm, self.release, self.live_nodes)

    def claim_ahead(self, slots: Sequence[tuple[Job, datetime, str]]) -> list[Answer]:
        """Claim scheduled `slots` (job, slot, run id), answered in order: True (this node's),
        False (another's), None (due: its job has a limit and was busy; nothing written), or
        the exception that stopped it. The slots of jobs without a limit in one store
        transaction, those with one in another (see the module notes)."""
        if any([self._left(job.name, slot) for job, slot, _rid in slots]):
            return [False] * len(slots)  # each noted: recorded missed unless run elsewhere
        plain = [k for k, (job, _slot, _rid) in enumerate(slots) if not limited(job)]
        within = [k for k, (job, _slot, _rid) in enumerate(slots) if limited(job)]
        answers: list[Answer] = [False] * len(slots)
        for places, claim in ((plain, self._claim_plain), (within, self._claim_within)):
            if places:
                got = self._ahead([slots[k] for k in places], claim)
                for k, answer in zip(places, got, strict=True):
                    answers[k] = answer
        return answers

    def _ahead(
        self,
        slots: Sequence[tuple[Job, datetime, str]],
        claim: Callable[[Sequence[tuple[Job, datetime, str]]], Sequence[Answer]],
    ) -> list[Answer]:
        """`claim(slots)` in one store transaction; a failure of the store is told to the
        outage and every slot's answer is False (noted: recorded missed unless run elsewhere),
        any other error is every slot's answer."""
        try:
            return list(claim(slots))
        except Exception as exc:
            if not is_store_failure(exc):
                return [exc] * len(slots)
            for job, slot, _rid in slots:
                self._failed(exc, job.name, slot)
            return [False] * len(slots)

    def _claim_plain(self, slots: Sequence[tuple[Job, datetime, str]]) -> list[bool]:
        name = self._keeper.name
        claims = [(job.name, slot, "schedule", rid, name, 1, slot) for job, slot, rid in slots]
        return self._keeper.store.claim_many(claims)

    def _claim_within(self, slots: Sequence[tuple[Job, datetime, str]]) -> list[Answer]:
        """Slots of jobs with a limit claimed ahead under it (never skipped ahead: a busy
        job's slot is decided when it starts, the job may be idle by then); the store's
        answers as `claim_ahead`'s. A job whose lock another node's transaction holds (it is
        claiming the job now) is not waited for: its slot is due (`LOCKED`), as a busy one."""
        name = self._keeper.name
        claims = []
        for job, slot, rid in slots:
            limit = job.max_instances if job.max_instances is not None else 1
            claims.append((job.name, slot, "schedule", rid, name, 1, slot, limit, None))
        answers = self._keeper.store.claim_many_within(claims, yielding=True)
        return [_AHEAD[answer] for answer in answers]

    def confirm(self, job: Job, ctx: RunContext) -> bool:
        """The start of a run whose slot was claimed ahead: True, once its launch is set to
        be recorded; raises when this node lost its lease meanwhile."""
        keeper = self._keeper
        if keeper.fenced:
            raise FencedError()
        if job.pause_after_failures is not None and self._policies.paused_in_store(job):
            keeper.store.release([ctx.run_id])  # never started: as if never claimed
            return False
        keeper.prepare(ctx)
        return True

    def live_nodes(self) -> list[str]:
        """The names of the nodes ``up`` in the store, this one's included once joined;
        none while the store fails (told to the outage)."""
        try:
            return [node.name for node in self._keeper.store.nodes() if node.state == "up"]
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            self._keeper.outage.failed(exc, "reading the live nodes")
            return []

    def release(self, run_ids: Sequence[str]) -> int:
        """Delete the claims of `run_ids` (made ahead, never started): see `engine.ahead`.
        While the store fails (told to the outage) they stay, abandoned when the node is
        taken over."""
        try:
            return self._keeper.store.release(run_ids)
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            self._keeper.outage.failed(exc, "releasing claims made ahead")
            return 0

    def claim_many(self, runs: Sequence[tuple[Job, RunContext]]) -> list[bool | Exception]:
        """The claims of `runs` in one store transaction, answered in order: True (run it),
        False (not here), or the exception that stopped the claim (the run ends NOT_STARTED).
        One run's error in the checks is that run's answer; the store's is every run's."""
        keeper = self._keeper
        name = keeper.name
        answers: list[bool | Exception] = []
        asked: list[int] = []
        claims: list[tuple[str, datetime | None, str, str, str, int, datetime]] = []
        now = self._clock.now()
        limited: list[int] = []  # claimed under their limits, in a transaction of their own
        slots: list[datetime | None] = []
        for job, ctx in runs:
            try:
                trigger = ctx.trigger
                if trigger.__class__ is Submitted and trigger.run_id is not None:
                    answers.append(self._claimed_in_take(job, ctx))
                    continue
                if not self._here(job, ctx):
                    answers.append(False)
                    continue
                slot = _scheduled(ctx)
                if slot is not None and self._left(job.name, slot):
                    answers.append(False)
                    continue
                if self.limits.applies(job, ctx):
                    if _alone(job, ctx):  # (the engine claims these alone: not here)
                        answers.append(self._limited(job, ctx))
                        continue
                    limited.append(len(answers))
                    answers.append(False)
                    continue
            except Exception as exc:
                answers.append(exc)
                continue
            slots.append(slot)
            asked.append(len(answers))
            answers.append(False)
            claims.append((job.name, ctx.slot, ctx.trigger, ctx.run_id, name, ctx.attempt, now))
        if claims:
            try:
                if keeper.fenced:
                    raise FencedError()
                won: Sequence[bool | Exception] = keeper.store.claim_many(claims)
            except FencedError as exc:
                won = [exc] * len(claims)
            except Exception as exc:
                won = []
                for claim, slot in zip(claims, slots, strict=True):
                    failure = self._failed(exc, claim[0], slot)
                    won.append(False if slot is not None and failure is not exc else failure)
            for index, answer in zip(asked, won, strict=True):
                answers[index] = answer
        if limited:
            pairs = [runs[index] for index in limited]
            within = [FencedError()] * len(pairs) if keeper.fenced else None
            for index, answer in zip(limited, within or self.limits.claim_many(pairs), strict=True):
                answers[index] = answer
                if answer is False:
                    self._queue.put_back(runs[index][1])  # a submitted run: back to the queue
        return answers

    def _claimed_in_take(self, job: Job, ctx: RunContext) -> bool:
        """The start of a submitted run claimed with its queue row's take: the checks of a
        run that starts, the store not asked again. True, or raises: a run dropped here
        would leave its claim ``running``, so one that may not start ends NOT_STARTED (its
        claim finished so and its row settled, as any run's end: `NodeKeeper.record`)."""
        if not self._here(job, ctx):
            raise ClaimRefused("not started here: its job's host, or paused after failures")
        reason = ctx.stop_reason
        if reason is not None:  # a kill request came before a worker had it (`bind`)
            raise ClaimRefused(reason)
        self._check_lease()
        return True

    def _limited(self, job: Job, ctx: RunContext) -> bool:
        """`claim` of a run under its limit, its checks made already; a submitted run not
        claimed (its job at its limit) goes back to the queue."""
        self._check_lease()
        claimed = self.limits.claim(job, ctx)
        if not claimed:
            self._queue.put_back(ctx)
        return claimed


def _alone(job: Job, ctx: RunContext) -> bool:
    """Whether a claim under a limit may wait for its busy job (a slot of ``overlap: queue``
    or ``replace``, a rerun): claimed alone, not with a batch."""
    return ctx.trigger == "rerun" or (ctx.trigger == "schedule" and waits(job))


def _scheduled(ctx: RunContext) -> datetime | None:
    """The slot of a run that is a scheduled slot's first attempt; None for any other run."""
    if ctx.trigger == "schedule" and ctx.attempt == 1:
        return ctx.slot
    return None


# A claim ahead under a limit: the store's answer -> the slot's (`engine.ahead`): claimed,
# another node's, or due (the job busy, or being claimed by another node: claimed when it
# starts). Without a skip reason, the store answers nothing else.
_AHEAD: dict[str, Answer] = {CLAIMED: True, TAKEN: False, BUSY: None, LOCKED: None}
