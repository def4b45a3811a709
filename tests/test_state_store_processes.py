"""`set_process` / `processes` over every store of `STORES`: the process group of each
running run, which a node restarted under its old name reads back to stop what its lost
runs left behind."""

from __future__ import annotations

from datetime import timedelta

from test_state_store import NODE, at, claim

from jobscheduler.state import RunState, StateStore


def test_a_running_runs_process_is_kept_until_it_ends(store: StateStore) -> None:
    assert claim(store, "j", at(0), "r1")
    assert claim(store, "k", None, "r2")
    assert store.claim("j", at(1), "schedule", "r3", node="other", started=at(1))
    assert store.set_process("r1", pid=4321, process_started=1_700_000_000.5)
    assert store.set_process("r2", pid=99, process_started=12.25)
    assert store.set_process("r3", pid=7, process_started=1.0)
    assert not store.set_process("nope", pid=1, process_started=1.0)
    assert store.processes(NODE) == [("r1", 4321, 1_700_000_000.5), ("r2", 99, 12.25)]
    assert store.processes("other") == [("r3", 7, 1.0)]
    assert store.processes("nobody") == []
    assert store.finish("r1", state=RunState.SUCCEEDED, ended=at(2))
    assert store.processes(NODE) == [("r2", 99, 12.25)]
    assert not store.set_process("r1", pid=5, process_started=1.0)  # no longer running


def test_a_taken_over_nodes_runs_have_no_processes_left(store: StateStore) -> None:
    assert claim(store, "j", at(0), "r1")
    assert store.set_process("r1", pid=4321, process_started=3.5)
    assert [r.run_id for r in store.take_over(NODE, by="b")] == ["r1"]
    assert store.processes(NODE) == []


def test_a_run_without_a_process_is_not_listed(store: StateStore) -> None:
    assert claim(store, "j", at(0), "r1")
    assert store.processes(NODE) == []
    assert store.heartbeat(NODE, lease=timedelta(seconds=1)) is False
