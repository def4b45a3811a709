"""Backfill: the slot decisions (pure), `Scheduler.backfill` in one process, ``jobscheduler
backfill`` from two processes at once on one store (each slot run once), and bad input
refused with nothing run (Python, CLI and HTTP)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from daemons import start_daemon

from jobscheduler import Job, Scheduler
from jobscheduler.app import cli_backfill
from jobscheduler.app.http.server import serve_http
from jobscheduler.clock import SystemClock
from jobscheduler.cluster.backfill import (
    Backfill,
    BackfillError,
    SlotDecision,
    check_range,
    plan,
    slots_between,
)
from jobscheduler.errors import UnknownNameError
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution
from jobscheduler.state import MemoryStateStore, RunRecord, RunState, open_store

T0 = datetime(2024, 3, 1, tzinfo=UTC)
TOKEN = "backfill-token-0123456789abcdef"
HOURLY = Job("hourly", command=["true"], start=T0, interval="1 hour")


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def record(slot: datetime, state: str, attempt: int = 1, **extra: object) -> RunRecord:
    values: dict[str, object] = {
        "run_id": f"{slot:%H}-{attempt}-{state}", "job": "hourly", "slot": slot,
        "trigger": "schedule", "attempt": attempt, "node": "n", "state": RunState(state),
        "started": slot, "ended": None if state == "running" else slot + timedelta(minutes=1),
    }  # fmt: skip
    values.update(extra)
    return RunRecord(**values)  # type: ignore[arg-type]


# -- decisions -------------------------------------------------------------------------------


def test_slots_between_is_inclusive_and_oldest_first() -> None:
    assert slots_between(HOURLY, at(1), at(3)) == [at(1), at(2), at(3)]
    assert slots_between(HOURLY, at(1.5), at(2.5)) == [at(2)]
    assert slots_between(HOURLY, at(1.2), at(1.4)) == []


def test_plan_decides_by_reprocess_mode() -> None:
    slots = [at(h) for h in range(7)]
    records = [
        record(at(1), "succeeded"),
        record(at(2), "failed"),
        record(at(3), "abandoned"),
        record(at(4), "running"),
        record(at(5), "missed", last_slot=at(6), reason="2 slots missed"),
        record(at(6), "skipped", reason="overlap: skip"),
        record(at(2), "failed", attempt=2, trigger="retry"),
        record(at(9), "failed"),  # outside the range: ignored
    ]
    missing = plan(slots, records, "missing")
    assert [(d.action, d.attempt) for d in missing] == [
        ("run", 1), ("skip", 2), ("skip", 3), ("skip", 2), ("skip", 2), ("run", 2), ("run", 2),
    ]  # fmt: skip
    assert missing[0].reason == "never ran" and missing[1].reason == "already ran (succeeded)"
    assert missing[4].reason.startswith("running now")
    assert missing[5].reason == "did not run (missed)"  # the missed record holds attempt 1
    failed = plan(slots, records, "failed")
    assert [d.action for d in failed] == ["run", "skip", "run", "run", "skip", "run", "run"]
    assert failed[2] == SlotDecision(at(2), "run", 3, "ran before (failed): run again")
    everything = plan(slots, records, "all")
    assert [d.action for d in everything] == ["run", "run", "run", "run", "skip", "run", "run"]


def test_bad_input_is_refused() -> None:
    def check(job: Job = HOURLY, **changes: object) -> None:
        args: dict[str, object] = {
            "start": at(0), "end": at(5), "reprocess": "missing", "max_parallel": 1,
            "yes": False, "node": "n",
        }  # fmt: skip
        args.update(changes)
        check_range(job, **args)  # type: ignore[arg-type]

    check()
    cases: list[tuple[dict[str, object], str]] = [
        ({"end": at(-1)}, "the range is backwards"),
        ({"end": at(24 * 400)}, "spans more than a year (400 days); confirm it (yes=True)"),
        ({"reprocess": "some"}, "reprocess must be one of missing, failed, all"),
        ({"max_parallel": 0}, "max_parallel must be a whole number >= 1"),
        ({"start": datetime(2024, 3, 1)}, "start must be an aware datetime"),
    ]
    for changes, message in cases:
        with pytest.raises(BackfillError, match=message.replace("(", r"\(").replace(")", r"\)")):
            check(**changes)
    check(end=at(24 * 400), yes=True)
    on_demand = Job("od", command=["true"], on_demand=True)
    with pytest.raises(BackfillError, match="the job has no schedule"):
        check(on_demand)
    pinned = Job("pinned", command=["true"], start=T0, interval="1 hour", host="db-*")
    with pytest.raises(BackfillError, match="runs only on hosts matching 'db-\\*'"):
        check(pinned)


# -- Backfill.run: every slot answered ------------------------------------------------------------


def test_every_refusal_is_its_slots_answer_and_already_running_waits_its_turn() -> None:
    """`Backfill.run` with an engine that refuses: "already running" once (a run of the
    job came first): the slot runs again as its next attempt; "job paused": that is the
    slot's outcome, with its reason. Nothing is waited for beyond the answers."""
    store = MemoryStateStore()
    started: list[tuple[datetime, int]] = []
    answers = {
        (at(1), 1): ("already running", None),
        (at(1), 2): (None, "ok"),
        (at(2), 1): ("job paused", None),
    }

    def start_run(job: Job, slot: datetime, attempt: int) -> None:
        started.append((slot, attempt))
        refused, _ = answers[(slot, attempt)]
        if refused is not None:
            execution = Execution.not_started(
                job.name, f"r-{len(started)}", slot, slot, refused, "backfill", attempt
            )
        else:
            execution = Execution(
                job.name, f"r-{len(started)}", slot, slot, slot, Event.SUCCESSFUL,
                trigger="backfill", attempt=attempt,
            )  # fmt: skip
        backfill.heard(execution)

    backfill = Backfill(store, SystemClock(), start_run)
    decisions = [SlotDecision(at(1), "run", 1, "never ran"), SlotDecision(at(2), "run", 1, "x")]
    done = backfill.run(HOURLY.with_changes(max_instances=1), decisions, max_parallel=2)
    assert started == [(at(1), 1), (at(1), 2), (at(2), 1)]  # one at a time, in turn
    assert [(d.attempt, d.state, d.run_reason) for d in done] == [
        (2, "succeeded", None),
        (1, "not_started", "job paused"),
    ]


def test_a_slot_refused_while_another_backfill_ran_it_is_answered_by_that_run() -> None:
    """Refused "already running" here while another process's backfill of the same range
    ran the slot (its record holds the slot's key): that run answers the slot, which is
    never run a second time."""
    store = MemoryStateStore()
    started: list[tuple[datetime, int]] = []

    def start_run(job: Job, slot: datetime, attempt: int) -> None:
        started.append((slot, attempt))
        now = store.now()
        store.record(
            job.name, slot, "backfill", "theirs", node="other", attempt=attempt,
            state=RunState.SUCCEEDED, started=now, ended=now,
        )  # fmt: skip
        refused = Execution.not_started(
            job.name, "mine", slot, now, "already running", "backfill", attempt
        )
        backfill.heard(refused)  # its record was not written: the key is theirs

    backfill = Backfill(store, SystemClock(), start_run)
    [done] = backfill.run(
        HOURLY.with_changes(max_instances=1),
        [SlotDecision(at(1), "run", 1, "never ran")],
        max_parallel=1,
    )
    assert started == [(at(1), 1)]
    assert (done.attempt, done.state, done.run_id) == (1, "succeeded", "theirs")


def test_a_backfill_of_a_job_paused_after_failures_is_answered(tmp_path: Path) -> None:
    """A job paused in the store by its failures (``pause_after_failures``): its backfill's
    runs are refused "job paused", each its slot's answer (a scheduled slot is dropped so,
    silently), and the backfill returns."""
    sched = Scheduler(state=f"sqlite:///{tmp_path}/state.db", node="bf", max_workers=2)
    sched.add_job(
        Job("fragile", command=["true"], start=T0, interval="1 day", enabled=False,
            pause_after_failures=3)
    )  # fmt: skip
    sched.start()
    try:
        sched.state_store.pause(["fragile"], node="other", paused_at=datetime.now(UTC))
        done = sched.backfill("fragile", T0, T0 + timedelta(days=1), max_parallel=2)
    finally:
        sched.shutdown(wait=False)
    assert [(d.state, d.run_reason) for d in done] == [("not_started", "job paused")] * 2


def test_the_command_line_prints_each_slots_answer(capsys: pytest.CaptureFixture[str]) -> None:
    decisions = [
        SlotDecision(at(1), "run", 1, "never ran", "succeeded", "r1"),
        SlotDecision(at(2), "run", 2, "did not run (missed)", "not_started", "r2", "job paused"),
        SlotDecision(at(3), "run", 1, "never ran"),  # not answered: the scheduler stopped
        SlotDecision(at(4), "skip", 2, "already ran (succeeded)"),
    ]
    cli_backfill._print(decisions, False, False)
    assert capsys.readouterr().out.splitlines() == [
        "2024-03-01T01:00:00+00:00  run (attempt 1): never ran -> succeeded",
        "2024-03-01T02:00:00+00:00  run (attempt 2): did not run (missed) -> not_started "
        "(job paused)",
        "2024-03-01T03:00:00+00:00  run (attempt 1): never ran -> not answered (stopped)",
        "2024-03-01T04:00:00+00:00  skip: already ran (succeeded)",
        "4 slot(s), 3 run",
    ]


def test_a_backfill_ends_when_its_scheduler_stops(tmp_path: Path) -> None:
    """The scheduler shut down while a backfill waits: it returns, the slots not answered
    without an outcome, and the command line would say so."""
    flag = tmp_path / "go"
    script = f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)"
    sched = Scheduler(state="memory", node="bf", max_workers=2)
    sched.add_job(
        Job("slow", command=[sys.executable, "-c", script], start=T0, interval="1 day",
            enabled=False, max_instances=1)
    )  # fmt: skip
    sched.start()
    outcome: list[list[SlotDecision]] = []
    thread = threading.Thread(
        target=lambda: outcome.append(sched.backfill("slow", T0, T0 + timedelta(days=1)))
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not sched.executing:
            assert time.monotonic() < deadline, "the first slot did not start"
            time.sleep(0.02)
        sched.shutdown(wait=False)
        thread.join(60)
        assert not thread.is_alive(), "the backfill did not end with its scheduler"
    finally:
        flag.touch()
    [done] = outcome
    assert done[1].state is None and done[1].action == "run"


# -- Scheduler.backfill ------------------------------------------------------------------------


@pytest.fixture
def sched(tmp_path: Path) -> Iterator[Scheduler]:
    flag = tmp_path / "fail"
    command = [
        sys.executable,
        "-c",
        f"import os, sys; sys.exit(3 if os.path.exists({str(flag)!r}) else 0)",
    ]
    scheduler = Scheduler(state=f"sqlite:///{tmp_path}/state.db", node="bf", max_workers=4)
    scheduler.add_job(Job("nightly", command=command, start=T0, interval="1 day"))
    scheduler.start()
    yield scheduler
    scheduler.shutdown(wait=False)


def backfilled(sched: Scheduler) -> list[RunRecord]:
    return [r for r in sched.history("nightly", limit=1000) if r.trigger == "backfill"]


def test_a_backfill_runs_each_missing_slot_once_oldest_first(
    sched: Scheduler, tmp_path: Path
) -> None:
    start, end = T0 + timedelta(days=1), T0 + timedelta(days=4)
    dry = sched.backfill("nightly", start, end, dry_run=True)
    assert [(d.slot, d.action, d.reason) for d in dry] == [
        (start + timedelta(days=n), "run", "never ran") for n in range(4)
    ]
    assert backfilled(sched) == []  # a dry run runs nothing
    done = sched.backfill("nightly", start, end, max_parallel=2)
    assert [d.state for d in done] == ["succeeded"] * 4
    runs = backfilled(sched)
    assert sorted(r.slot for r in runs) == [d.slot for d in done]  # type: ignore[type-var]
    assert {r.run_id for r in runs} == {d.run_id for d in done}
    assert all(r.attempt == 1 and r.duration is not None for r in runs)
    oldest_first = sorted(runs, key=lambda r: r.started)
    # Two at once (max_parallel=2): the two oldest first, in either order of their clock
    # reads (each worker reads its own), then the rest as room comes.
    assert {r.slot for r in oldest_first[:2]} == {start, start + timedelta(days=1)}
    assert oldest_first[-1].slot in (end, end - timedelta(days=1))
    # Again: every slot has run, nothing runs twice.
    again = sched.backfill("nightly", start, end)
    assert [d.action for d in again] == ["skip"] * 4
    assert len(backfilled(sched)) == 4
    # `failed` runs only the failed ones again, as their next attempt; `all` every one.
    (tmp_path / "fail").touch()
    sched.backfill("nightly", end + timedelta(days=1), end + timedelta(days=1))
    (tmp_path / "fail").unlink()
    redo = sched.backfill("nightly", start, end + timedelta(days=1), reprocess="failed")
    assert [(d.action, d.attempt) for d in redo] == [("skip", 2)] * 4 + [("run", 2)]
    assert redo[-1].state == "succeeded"
    everything = sched.backfill("nightly", start, start, reprocess="all")
    assert [(d.action, d.attempt, d.state) for d in everything] == [("run", 2, "succeeded")]


def test_bad_input_runs_nothing(sched: Scheduler) -> None:
    with pytest.raises(UnknownNameError):
        sched.backfill("nope", T0, T0)
    with pytest.raises(BackfillError, match="backwards"):
        sched.backfill("nightly", T0 + timedelta(days=2), T0)
    with pytest.raises(BackfillError, match="more than a year"):
        sched.backfill("nightly", T0, T0 + timedelta(days=800))
    assert sched.history("nightly") == []


# -- the command line and HTTP ----------------------------------------------------------------

CONFIG = """\
jobs:
  daily:
    command: [sh, -c, 'sleep 0.2; echo "slot $JOBSCHEDULER_SLOT"']
    start: 2024-01-01 02:00:00
    interval: 1 day
    timezone: Europe/Berlin
  asked:
    command: [sh, -c, 'true']
    on_demand: true
"""


def cli(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "jobscheduler", "backfill", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
    )


def test_two_backfills_at_once_run_each_slot_once(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    Scheduler(config, node="setup").shutdown()  # makes the store beside the file
    args = (
        "daily",
        "--from",
        "2024-01-01",
        "--to",
        "2024-01-10 23:00",
        "--json",
        "--max-parallel",
        "3",
    )
    first, second = cli(config, *args), cli(config, *args)
    outputs = [proc.communicate(timeout=120) for proc in (first, second)]
    for proc, (_, err) in zip((first, second), outputs, strict=True):
        assert proc.returncode == 0, err
    answers = [json.loads(out) for out, _ in outputs]
    for answer in answers:
        assert len(answer) == 10  # 2024-01-01 02:00 … 2024-01-10 02:00, Berlin time
        assert answer[0]["slot"] == "2024-01-01T01:00:00+00:00"
    # Each slot ran once: the two backfills ran it, or found it run, or lost its claim.
    sched = Scheduler(config, node="reader")
    try:
        runs = [r for r in sched.history("daily", limit=100) if r.trigger == "backfill"]
    finally:
        sched.shutdown()
    assert len(runs) == 10 and len({r.slot for r in runs}) == 10
    assert all(r.state is RunState.SUCCEEDED and r.attempt == 1 for r in runs)
    assert {r.node for r in runs} <= {
        a for a in (r.node for r in runs) if a.startswith("backfill-")
    }
    # A third, later: every slot is found run.
    third = cli(config, *args[:5], "--dry-run")
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0, err
    assert out.strip().endswith("10 slot(s), 0 to run")
    assert out.count("skip: already ran (succeeded)") == 10


def test_bad_backfills_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    Scheduler(config, node="setup").shutdown()
    cases = [
        (("daily", "--from", "2024-02-01", "--to", "2024-01-01"), "the range is backwards"),
        (("daily", "--from", "2020-01-01", "--to", "2024-01-01"), "confirm it (--yes)"),
        (("nope", "--from", "2024-01-01", "--to", "2024-01-02"), "no job"),
        (("asked", "--from", "2024-01-01", "--to", "2024-01-02"), "the job has no schedule"),
        (("daily", "--from", "yesterday", "--to", "2024-01-02"), "--from: 'yesterday' is not"),
    ]
    for args, message in cases:
        proc = cli(config, *args)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and out == "", (args, err)
        assert len(err.splitlines()) == 1 and message in err, (args, err)


def test_backfill_over_http(tmp_path: Path) -> None:
    sched = Scheduler(state="memory", node="web", max_workers=2)
    sched.add_job(Job("daily", command=["true"], start=T0, interval="1 day"))
    sched.add_job(Job("asked", command=["true"], on_demand=True))
    sched.start()
    server = serve_http(sched, "127.0.0.1", 0, token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with httpx.Client(base_url=server.url, timeout=30, headers=auth) as client:
            body = {"from": "2024-03-02T00:00:00+00:00", "to": "2024-03-04T00:00:00+00:00"}
            dry = client.post("/api/jobs/daily/backfill", json={**body, "dry_run": True})
            assert dry.status_code == 200, dry.text
            assert [s["action"] for s in dry.json()["slots"]] == ["run"] * 3
            assert sched.history() == []
            started = client.post("/api/jobs/daily/backfill", json=body)
            assert started.status_code == 202 and len(started.json()["slots"]) == 3
            deadline = datetime.now(UTC) + timedelta(seconds=20)
            while len([r for r in sched.history() if r.state is RunState.SUCCEEDED]) < 3:
                assert datetime.now(UTC) < deadline, sched.history()
                sched.wait_idle(0.1)
            assert {r.trigger for r in sched.history()} == {"backfill"}
            refusals = [
                ("daily", {"from": body["to"], "to": body["from"]}, 400, "backwards"),
                ("daily", {**body, "reprocess": "some"}, 400, "reprocess must be one of"),
                (
                    "daily",
                    {**body, "from": "2020-01-01T00:00:00+00:00"},
                    400,
                    'the range spans more than a year (1524 days); confirm it ("yes": true)',
                ),
                ("daily", {**body, "when": 1}, 400, "unknown fields: when"),
                ("daily", {"from": "x", "to": "y"}, 400, "not an ISO 8601 time"),
                ("asked", body, 400, "no schedule"),
                ("nope", body, 404, "no job named 'nope'"),
            ]
            for name, request, status, message in refusals:
                answer = client.post(f"/api/jobs/{name}/backfill", json=request)
                assert answer.status_code == status, (request, answer.text)
                assert message in answer.json()["error"]
            assert (
                client.post(
                    "/api/jobs/daily/backfill", json=body, headers={"Authorization": ""}
                ).status_code
                == 401
            )
            assert len(sched.history()) == 3
    finally:
        server.close()
        sched.shutdown(wait=False)


# -- within the job's limits ---------------------------------------------------------------------


def overlapping(runs: list[RunRecord]) -> list[tuple[str, str]]:
    """The pairs of `runs` that ran at the same time, measured from their own records."""
    spans = sorted((r.started, r.ended or datetime.max.replace(tzinfo=UTC), r.run_id) for r in runs)
    # Sorted by start: a run overlapping a later one overlaps the next one too.
    return [(a[2], b[2]) for a, b in itertools.pairwise(spans) if b[0] < a[1]]


@pytest.mark.parametrize("state", ["memory", "sqlite"])
@pytest.mark.parametrize("limit", [{"max_instances": 1}, {"overlap": "skip"}])
def test_a_backfill_never_runs_more_at_once_than_the_job_allows(
    tmp_path: Path, state: str, limit: dict[str, object]
) -> None:
    """`max_instances: 1` (or an `overlap` policy) with `max_parallel` 2: every slot runs,
    one at a time, none refused, skipped or replaced; the call returns."""
    url = "memory" if state == "memory" else f"sqlite:///{tmp_path}/state.db"
    sched = Scheduler(state=url, node="bf", max_workers=4)
    command = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    lim = Job("lim", command=command, start=T0, interval="1 day", enabled=False, **limit)  # type: ignore[arg-type]
    sched.add_job(lim)
    sched.start()
    try:
        done = sched.backfill("lim", T0, T0 + timedelta(days=3), max_parallel=3)
        assert [(d.state, d.attempt) for d in done] == [("succeeded", 1)] * 4
        runs = sched.history("lim", limit=100)
    finally:
        sched.shutdown(wait=False)
    assert sorted(r.slot for r in runs) == [d.slot for d in done]  # type: ignore[type-var]
    assert all(r.state is RunState.SUCCEEDED for r in runs)
    assert overlapping(runs) == []


@pytest.mark.parametrize("state", ["memory", "sqlite"])
def test_a_backfill_waits_for_a_live_scheduled_run_of_the_job(tmp_path: Path, state: str) -> None:
    """The job's own scheduled run is going (it waits for a file): the backfill starts none
    of its slots beside it, and runs every one once the job has room."""
    url = "memory" if state == "memory" else f"sqlite:///{tmp_path}/state.db"
    flag = tmp_path / "go"
    script = (
        f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)\n"
        "time.sleep(0.2)"
    )
    sched = Scheduler(state=url, node="bf", max_workers=4)
    sched.add_job(
        Job("busy", command=[sys.executable, "-c", script], start=T0, interval="2 seconds",
            max_instances=1)
    )  # fmt: skip
    sched.start()
    outcome: list[list[SlotDecision]] = []
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=60)
        while not sched.state_store.history("busy", state=RunState.RUNNING):
            assert datetime.now(UTC) < deadline, "no scheduled run started"
            sched.wait_idle(0.05)
        thread = threading.Thread(
            target=lambda: outcome.append(
                sched.backfill("busy", T0, T0 + timedelta(seconds=6), max_parallel=2)
            )
        )
        thread.start()
        flag.touch()  # the scheduled run may end now
        thread.join(120)
        assert not thread.is_alive(), "the backfill did not return"
        runs = sched.history("busy", limit=1000)
    finally:
        sched.shutdown(wait=False)
    [done] = outcome
    assert [d.state for d in done] == ["succeeded"] * 4
    ran = [r for r in runs if r.state is not RunState.NOT_STARTED]
    assert overlapping(ran) == []
    first = min((r for r in ran if r.trigger == "schedule"), key=lambda r: r.started).ended
    backfilled = [r for r in ran if r.trigger == "backfill"]
    assert sorted(r.slot for r in backfilled) == [d.slot for d in done]  # type: ignore[type-var]
    assert first is not None and min(r.started for r in backfilled) >= first


def test_the_command_line_backfill_of_a_limited_job_returns(tmp_path: Path) -> None:
    """``jobscheduler backfill`` of a ``max_instances: 1`` job with ``--max-parallel 2`` on
    the daemon's SQLite store: every slot runs, one at a time, and the command ends."""
    config = tmp_path / "jobs.yaml"
    config.write_text(
        "jobs:\n  lim:\n    command: [sh, -c, 'sleep 0.3']\n    start: 2024-01-01 00:00:00\n"
        "    interval: 1 day\n    max_instances: 1\n"
    )
    Scheduler(config, node="setup").shutdown()
    proc = cli(config, "lim", "--from", "2024-01-01", "--to", "2024-01-04", "--max-parallel", "2")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.count("-> succeeded") == 4 and out.strip().endswith("4 slot(s), 4 run"), out
    sched = Scheduler(config, node="reader")
    try:
        runs = sched.history("lim", limit=100)
    finally:
        sched.shutdown()
    assert len(runs) == 4 and all(r.state is RunState.SUCCEEDED for r in runs)
    assert overlapping(runs) == []


def test_a_backfill_beside_a_daemon_running_the_job_shares_its_limit(tmp_path: Path) -> None:
    """A daemon runs the ``max_instances: 1`` job every 2 s (each run 1 s); the command
    line's backfill of four slots, ``--max-parallel 2``, on the daemon's SQLite store, runs
    none of them beside the daemon's runs nor beside each other (measured from the runs'
    own records, every node's), and ends."""
    config = tmp_path / "jobs.yaml"
    config.write_text(
        "jobs:\n  busy:\n    command: [sleep, '1']\n    start: 2024-01-01 00:00:00\n"
        "    timezone: UTC\n    interval: 2 seconds\n    max_instances: 1\n"
    )
    url = f"sqlite:///{tmp_path / 'jobs.state.db'}"
    daemon = start_daemon(config, url, "d", tmp_path / "d.log", new_session=True)
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=60)
        while not (tmp_path / "jobs.state.db").exists() or not _daemon_ran(url):
            assert datetime.now(UTC) < deadline, (tmp_path / "d.log").read_text()
            assert daemon.poll() is None, (tmp_path / "d.log").read_text()
            time.sleep(0.1)
        proc = cli(config, "busy", "--from", "2024-01-01 00:00:00", "--to", "2024-01-01 00:00:06",
                   "--max-parallel", "2", "--state", url)  # fmt: skip
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out, err)
        assert out.count("-> succeeded") == 4, out
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(60)
    store = open_store(url)[0]
    try:
        runs = store.history("busy", limit=10_000)
    finally:
        store.close()
    backfilled = [r for r in runs if r.trigger == "backfill" and r.state is RunState.SUCCEEDED]
    assert len(backfilled) == 4 and {r.node for r in runs} >= {"d"}
    ran = [r for r in runs if r.state not in (RunState.NOT_STARTED, RunState.SKIPPED)]
    assert len(ran) > 4  # the daemon's runs too
    assert overlapping(ran) == []


def _daemon_ran(url: str) -> bool:
    store = open_store(url)[0]
    try:
        return bool(store.history("busy", limit=1))
    finally:
        store.close()
