"""`StateStore.claim_many_within`: a batch of first claims of their jobs, written together,
answers as each claim alone answers (SQLite and the memory store write each claim alone: the
same answers over every store, `stores` of test_state_store_limits).

On PostgreSQL the batch's claims under a limit are written in one statement after the jobs'
locks, whatever their answers: the busy claims without a skip reason ask nothing more.
"""

from __future__ import annotations

from datetime import datetime

from test_state_store import at
from test_state_store_limits import SKIP, stores, within

from jobscheduler.state import RunState, StateStore
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.values import BUSY, CLAIMED, SKIPPED_BY_LIMIT, TAKEN

__all__ = ["stores"]  # the fixture, over every store

Claim = tuple[str, datetime, str, str, str, int, datetime, int, str | None]


def claim(job: str, slot: float, run_id: str, limit: int, skip: str | None) -> Claim:
    return (job, at(slot), "schedule", run_id, "node-a", 1, at(slot), limit, skip)


def test_first_claims_of_their_jobs_answer_as_alone(stores: list[StateStore]) -> None:
    a, b, _ = stores
    # Before the batch, from node b: "busy" and "taken" run; "taken" also owns slot 20 of
    # "room"; "two" has 1 of its 2 runs.
    for job, slot, run_id in [
        ("busy", 1, "b1"),
        ("busyskip", 1, "b2"),
        ("taken", 1, "b3"),
        ("room", 20, "b4"),
        ("two", 1, "b5"),
        ("takenskip", 1, "b6"),
    ]:
        assert within(b, slot, run_id, node="node-b", job=job, limit=2) == CLAIMED
    assert within(b, 30, "b7", node="node-b", job="taken", limit=2) == CLAIMED
    assert within(b, 30, "b8", node="node-b", job="takenskip", limit=2) == CLAIMED
    claims = [
        claim("free", 10, "r1", 1, SKIP),  # no run: claimed
        claim("busy", 10, "r2", 1, None),  # at its limit, no skip: nothing written
        claim("busyskip", 10, "r3", 1, SKIP),  # at its limit: recorded skipped
        claim("taken", 30, "r4", 1, None),  # at its limit, its key taken by b7
        claim("room", 20, "r5", 1, SKIP),  # room, but its key taken by b4
        claim("two", 10, "r6", 2, None),  # 1 of 2: claimed
        claim("takenskip", 30, "r7", 1, SKIP),  # at its limit, its key taken by b8
    ]
    answers = a.claim_many_within(claims)
    assert answers == [CLAIMED, BUSY, SKIPPED_BY_LIMIT, TAKEN, TAKEN, CLAIMED, TAKEN]
    states = {r.run_id: r.state for r in a.history(limit=100)}
    assert states["r1"] is RunState.RUNNING and states["r6"] is RunState.RUNNING
    assert states["r3"] is RunState.SKIPPED
    assert not {"r2", "r4", "r5", "r7"} & states.keys()


def test_a_batch_under_limits_is_two_statements_on_postgresql(stores: list[StateStore]) -> None:
    a, b, _ = stores
    if not isinstance(a, PostgresStateStore):
        return  # the statement count is PostgreSQL's alone (SQLite writes each claim)
    for k in range(50):
        assert within(b, 1, f"b{k}", node="node-b", job=f"j{k}") == CLAIMED
    claims = [claim(f"j{k}", 2, f"r{k}", 1, None if k % 2 else SKIP) for k in range(100)]
    before = a.statements
    answers = a.claim_many_within(claims)
    assert a.statements - before == 2  # the jobs' locks, then the claims and skips
    assert answers == [SKIPPED_BY_LIMIT, BUSY] * 25 + [CLAIMED] * 50
