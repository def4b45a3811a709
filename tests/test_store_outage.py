"""A state store that goes away under a running daemon, and a node whose clock is skewed.

- PostgreSQL stopped with ``pg_ctl stop -m immediate`` under a real ``jobscheduler run``
  daemon running a job every second (a server of this module's own: stopping the session's
  would break the other tests), then started again: the daemon's log holds exactly one
  warning when the store goes and one when it is back (no traceback), and every slot of the
  outage either ran or is covered by a ``missed`` record.
- SQLite on a full tmpfs (mounted here: the tests run as root, as CI does): the same two
  warnings, "back" only once a write got through after the disk was freed.
- A store whose heartbeat gets through while its inserts fail (SQLite rewriting a row in
  place on a full disk): not "back" until a record is written.
- A node whose clock is 10 s ahead (an offset `Clock`) on PostgreSQL: `status` shows the
  skew, the node claims no scheduled slot, and its slots are recorded missed.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pg_server
import pytest
from pg_server import PgServer

from jobscheduler import FakeClock, Job
from jobscheduler.app.http.server import serve_http
from jobscheduler.clock import SystemClock
from jobscheduler.cluster.nodemarks import record_gaps
from jobscheduler.cluster.skew import ClockSkew
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunRecord, RunState, StoreUnavailableError, open_store
from jobscheduler.state.memory import MemoryStateStore

LEASE = 3.0  # a heartbeat every second: the test takes seconds, not minutes
WAIT = 60.0  # deadlines only a failure reaches

JOBS = """\
jobs:
  tick:
    command: [sleep, "0.2"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
"""

AHEAD = timedelta(seconds=10)  # past the skew limit (5 s): its slots wait 6 s past it

WARNING = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) ")


def until(check: Any, what: str, timeout: float = WAIT) -> Any:
    """`check()`'s first truthy answer, asked every 0.1 s until `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Daemon:
    """A ``jobscheduler run`` process on `url`, logging to a file."""

    def __init__(self, directory: Path, url: str, name: str = "n1") -> None:
        self.config = directory / "jobs.yaml"
        self.config.write_text(JOBS)
        self.log = directory / f"{name}.log"
        self.url = url
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobscheduler",
                "run",
                str(self.config),
                "--state",
                url,
                "--node",
                name,
                "--lease",
                str(LEASE),
                "--log-file",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def says(self, text: str) -> bool:
        return any(text in line for line in self.lines())

    def warnings(self) -> list[str]:
        return [line for line in self.lines() if WARNING.match(line)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


def succeeded_runs(url: str) -> list[RunRecord]:
    store = open_store(url)[0]
    try:
        return [r for r in store.history("tick", limit=10_000) if r.state is RunState.SUCCEEDED]
    finally:
        store.close()


def uncovered(url: str, first: datetime, last: datetime) -> list[datetime]:
    """The job's slots from `first` to `last` with no record (neither run nor in a missed
    range); also checks that no slot has two records."""
    store = open_store(url)[0]
    try:
        runs = store.history("tick", limit=100_000)
    finally:
        store.close()
    covered: list[datetime] = []
    for run in runs:
        assert run.slot is not None
        end = run.last_slot if run.state is RunState.MISSED and run.last_slot else run.slot
        slot = run.slot
        while slot <= end:
            covered.append(slot)
            slot += timedelta(seconds=1)
    assert len(covered) == len(set(covered)), "a slot recorded twice"
    holes = []
    slot = first
    while slot <= last:
        if slot not in set(covered):
            holes.append(slot)
        slot += timedelta(seconds=1)
    return holes


def check_outage(daemon: Daemon, away: float, back: float) -> None:
    """The daemon's log of an outage: one warning when the store went (after `away`, a
    `time.time()`), one when it was back (after `back`), no other line about the store at
    WARNING or above, no ERROR, no traceback. (A loaded machine may add "ran late" lines.)"""
    warnings = daemon.warnings()
    about_store = [line for line in warnings if "state store" in line]
    assert len(about_store) == 2, "\n".join(daemon.lines()[-60:])
    assert [line for line in warnings if " ERROR " in line] == []
    went, returned = about_store
    assert "state store unreachable" in went and "logged once per outage" in went, went
    assert "state store back after" in returned and "recorded missed" in returned, returned
    assert not daemon.says("Traceback"), "\n".join(daemon.lines())
    stamp = datetime.strptime(returned[:19], "%Y-%m-%d %H:%M:%S").timestamp()
    assert stamp >= int(back) - 1, (returned, back)  # not before a write could get through
    assert stamp >= away


# -- PostgreSQL stopped under a daemon -----------------------------------------------------------


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of this test's own (stopping the session's would break others)."""
    server = pg_server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_postgresql_outage_is_two_warnings_and_its_slots_are_recorded_missed(
    own_pg: PgServer, tmp_path: Path, nodes: int
) -> None:
    url = own_pg.url()
    daemons = [Daemon(tmp_path, url, f"n{n}") for n in range(nodes)]
    try:
        until(lambda: len(succeeded_runs(url)) >= 3, "the job to run")
        first = max(r.slot for r in succeeded_runs(url) if r.slot is not None)
        away = time.time()
        own_pg.halt()
        for daemon in daemons:
            until(lambda d=daemon: d.says("state store unreachable"), "the warning of the outage")
        time.sleep(LEASE * 2)  # past the lease: the nodes fence themselves too
        own_pg.resume()
        back = time.time()
        for daemon in daemons:
            until(lambda d=daemon: d.says("state store back"), "the warning of its end")
        done = len(succeeded_runs(url))
        until(lambda: len(succeeded_runs(url)) >= done + 3, "runs after the outage")
        for daemon in daemons:
            daemon.stop()
        last = max(r.slot for r in succeeded_runs(url) if r.slot is not None)
        for daemon in daemons:
            check_outage(daemon, away, back)
        assert uncovered(url, first, last) == []  # and no slot recorded twice
        store = open_store(url)[0]
        missed = store.history("tick", state=RunState.MISSED)
        store.close()
        assert missed and all("the state store was unreachable" in (r.reason or "") for r in missed)
        assert sum(r.last_slot is not None for r in missed) >= 1
    finally:
        for daemon in daemons:
            daemon.kill()


# -- SQLite on a full disk -------------------------------------------------------------------


@pytest.fixture
def small_tmpfs() -> Iterator[Path]:
    """A 4 MB tmpfs mounted for the test (root: as the tests and CI run)."""
    where = Path(tempfile.mkdtemp(prefix="jobscheduler-fulldisk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)
    shutil.rmtree(where, ignore_errors=True)


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` (a file written until ENOSPC)."""
    filler = directory / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_under_sqlite_is_two_warnings_and_back_only_once_written(
    small_tmpfs: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{small_tmpfs}/state.db"
    daemon = Daemon(tmp_path, url)
    try:
        until(lambda: len(succeeded_runs(url)) >= 3, "the job to run")
        first = max(r.slot for r in succeeded_runs(url) if r.slot is not None)
        away = time.time()
        filler = fill(small_tmpfs)
        until(lambda: daemon.says("state store unreachable"), "the warning of the full disk")
        time.sleep(LEASE * 2)  # heartbeats go on meanwhile: none may say "back"
        assert not daemon.says("state store back"), "\n".join(daemon.lines()[-30:])
        back = time.time()
        filler.unlink()
        until(lambda: daemon.says("state store back"), "the warning of its end")
        done = len(succeeded_runs(url))
        until(lambda: len(succeeded_runs(url)) >= done + 3, "runs after the outage")
        daemon.stop()
        last = max(r.slot for r in succeeded_runs(url) if r.slot is not None)
        check_outage(daemon, away, back)
        assert uncovered(url, first, last) == []
    finally:
        daemon.kill()


# -- a heartbeat that gets through is not enough ---------------------------------------------------


class InsertsFail(MemoryStateStore):
    """A store whose heartbeats get through while every insert fails, as SQLite's on a full
    disk can (a row rewritten in place needs no new page)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.full = False

    def _check(self) -> None:
        if self.full:
            raise StoreUnavailableError("state store 'x': database or disk is full")

    def claim(self, *args: Any, **kwargs: Any) -> bool:
        self._check()
        return super().claim(*args, **kwargs)

    def claim_many(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return super().claim_many(*args, **kwargs)

    def record(self, *args: Any, **kwargs: Any) -> bool:
        self._check()
        return super().record(*args, **kwargs)


def test_the_store_is_back_only_once_a_record_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobscheduler")
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = InsertsFail(clock)
    s = Scheduler(clock=clock, state=store, node="n", lease=timedelta(seconds=30))
    try:
        s.add_job(Job("tick", command=["true"], start=clock.now(), interval="1 second"))
        s.start()
        keeper = s._keeper
        assert keeper is not None
        store.full = True
        for _ in range(5):  # slots come, their claims fail: noted
            clock.advance(timedelta(seconds=1))
            until(lambda: keeper.outage.away, "the outage")
        time.sleep(0.2)
        for _ in range(3):  # heartbeats get through; the missed records do not
            clock.advance(timedelta(seconds=2))
            keeper.beat()
        assert keeper.outage.away
        assert "state store back" not in caplog.text
        store.full = False
        clock.advance(timedelta(seconds=2))
        keeper.beat()
        assert not keeper.outage.away
        assert caplog.text.count("state store unreachable") == 1
        assert caplog.text.count("state store back") == 1
        missed = store.history("tick", state=RunState.MISSED)
        assert missed and missed[0].reason is not None
        assert "the state store was unreachable" in missed[0].reason
    finally:
        s.shutdown(wait=False)


# -- clock skew ------------------------------------------------------------------------------


class OffsetClock:
    """The system clock moved by `offset`: a node whose clock is skewed."""

    def __init__(self, offset: timedelta) -> None:
        self._system = SystemClock()
        self._offset = offset

    def now(self) -> datetime:
        return self._system.now() + self._offset

    def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
        return self._system.wait(condition, timeout)

    def sleep(self, seconds: float) -> None:
        self._system.sleep(seconds)


def status_json(config: Path, url: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "status", str(config), "--state", url, "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_node_10s_ahead_shows_its_skew_and_claims_no_scheduled_slot(
    pg_server: PgServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobscheduler")
    url = pg_server.fresh_schema_url()
    config = tmp_path / "jobs.yaml"
    config.write_text(JOBS)
    s = Scheduler(state=url, clock=OffsetClock(AHEAD), node="ahead", lease=LEASE)
    try:
        s.add_job(
            Job("tick", command=["true"], start=datetime(2024, 1, 1, tzinfo=UTC), interval="1s")
        )
        s.start()
        keeper = s._keeper
        assert keeper is not None
        until(lambda: keeper.skew.blocked, "the node to stop claiming")
        assert keeper.skew.seconds is not None and 8 < keeper.skew.seconds < 12
        # On the node's clock; a slot claimed ahead (0.25 s before it is due) before the
        # limit was seen still runs.
        blocked_at = datetime.now(UTC) + AHEAD + timedelta(seconds=1)
        text = subprocess.run(
            [sys.executable, "-m", "jobscheduler", "status", str(config), "--state", url],
            capture_output=True,
            text=True,
            timeout=WAIT,
        ).stdout
        node = until(
            lambda: next(
                (n for n in status_json(config, url)["nodes"] if n["clock_skew"] is not None),
                None,
            ),
            "the skew in status",
        )
        assert node["name"] == "ahead" and 8 < node["clock_skew"] < 12
        assert node["clock_past_limit"] is True
        if "clock +" not in text:  # the skew is written at the beat after it was measured
            text = subprocess.run(
                [sys.executable, "-m", "jobscheduler", "status", str(config), "--state", url],
                capture_output=True,
                text=True,
                timeout=WAIT,
            ).stdout
        assert re.search(r"clock \+(9|10|11)\.\d s \(past the limit", text), text
        # The page, the API and the metrics of the node's own HTTP server say it too.
        server = serve_http(s, "127.0.0.1", 0)
        try:
            with httpx.Client(base_url=server.url, timeout=WAIT) as client:
                [shown] = client.get("/api/status").json()["nodes"]
                assert 8 < shown["clock_skew"] < 12 and shown["clock_past_limit"]
                metrics = client.get("/metrics").text
                found = re.search(r'jobscheduler_clock_skew_seconds\{node="ahead"\} (\S+)', metrics)
                assert found and 8 < float(found.group(1)) < 12, metrics
                page = client.get("/").text
                assert re.search(r'title="past the limit[^"]*">\+(9|10|11)\.\d s<', page)
        finally:
            server.close()
        # Its slots are left, then recorded missed once the others had their chance.
        store = s.state_store

        def missed() -> list[RunRecord]:
            return [
                r
                for r in store.history("tick", state=RunState.MISSED)
                if "clock was off" in (r.reason or "")
            ]

        until(missed, "the skewed node's slots recorded missed", timeout=2 * WAIT)
        ran = [
            r
            for r in store.history("tick", limit=1000)
            if r.state is RunState.SUCCEEDED and r.slot is not None and r.slot > blocked_at
        ]
        assert ran == []
        assert caplog.text.count("past the limit of 5s") == 1
        assert caplog.text.count("ahead of the database's (more than 1s)") == 1
    finally:
        s.shutdown(wait=False)


def test_skew_is_told_once_each_way_and_claims_stop_only_past_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobscheduler")
    skew = ClockSkew("n")
    base = datetime(2030, 1, 1, tzinfo=UTC)

    def measure(ahead: float, trip: float = 0.0) -> None:
        sent = base + timedelta(seconds=ahead)
        skew.measured(sent, sent + timedelta(seconds=trip), base + timedelta(seconds=trip / 2))

    measure(0.5)
    assert (skew.warned, skew.blocked) == (False, False)
    measure(1.5)
    measure(2.0)
    assert (skew.warned, skew.blocked) == (True, False)
    measure(-30)
    measure(-31)
    assert skew.blocked and skew.seconds == -31
    measure(6.0, trip=4.0)  # 6 s give or take 2: not surely past 5 s, not surely within
    assert skew.blocked
    measure(4.0)
    assert skew.blocked is False and skew.warned
    measure(0.2)
    assert (skew.warned, skew.blocked) == (False, False)
    measure(0.2)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("(more than 1s)" in m for m in messages) == 1
    assert sum("past the limit of 5s" in m for m in messages) == 1
    assert sum("claiming scheduled slots again" in m for m in messages) == 1
    assert sum("back within 1s" in m for m in messages) == 1
    assert ClockSkew("n").seconds is None


def test_the_database_clock_is_not_measured_on_sqlite(tmp_path: Path) -> None:
    s = Scheduler(state=f"sqlite:///{tmp_path}/s.db", clock=OffsetClock(timedelta(hours=1)))
    try:
        s.add_job(
            Job("tick", command=["true"], start=datetime(2024, 1, 1, tzinfo=UTC), interval="1s")
        )
        s.start()
        keeper = s._keeper
        assert keeper is not None
        keeper.beat()
        keeper.beat()
        assert keeper.skew.seconds is None and not keeper.skew.blocked
        assert [n.clock_skew for n in s.state_store.nodes()] == [None]
    finally:
        s.shutdown(wait=False)


class ReadsFail(MemoryStateStore):
    """A store whose reads of the queue fail while `away` (its depth is what /metrics reads,
    its rows what the page and /api/status read)."""

    away = False

    def queue(self, *args: Any, **kwargs: Any) -> Any:
        if self.away:
            raise StoreUnavailableError("state store 'x': connection refused")
        return super().queue(*args, **kwargs)

    def pending_count(self, *, limit: int) -> int:
        if self.away:
            raise StoreUnavailableError("state store 'x': connection refused")
        return super().pending_count(limit=limit)


def test_http_reads_while_the_store_is_away_are_503s_told_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    store = ReadsFail()
    s = Scheduler(state=store, node="web")
    s.start()
    server = serve_http(s, "127.0.0.1", 0)
    try:
        store.away = True
        with httpx.Client(base_url=server.url, timeout=WAIT) as client:
            for path in ("/metrics", "/metrics", "/", "/api/status"):
                answer = client.get(path)
                assert answer.status_code == 503, (path, answer.text)
                assert "state store unavailable" in answer.json()["error"]
        assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)
        told = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(told) == 1 and "state store unreachable (HTTP GET /metrics" in told[0], told
    finally:
        server.close()
        s.shutdown(wait=False)
    assert not any("state store back" in r.getMessage() for r in caplog.records)  # no write


def test_record_gaps_covers_only_the_slots_no_node_recorded_and_once() -> None:
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    store = MemoryStateStore()
    job = Job("tick", command=["true"], start=t0, interval="1 second")

    def at(n: int) -> datetime:
        return t0 + timedelta(seconds=n)

    assert store.claim("tick", at(5), "schedule", "ran-5", node="other", started=at(5))
    now = at(20)
    written = record_gaps(store, job, at(1), at(10), node="n", cause="why", now=now)
    assert written == 9  # 1-4 and 6-10: slot 5 ran elsewhere
    missed = sorted(
        (r.slot, r.last_slot, r.reason) for r in store.history("tick", state=RunState.MISSED)
    )
    assert missed == [
        (at(1), at(4), f"4 slots missed (from {at(1).isoformat()} to {at(4).isoformat()}): why"),
        (at(6), at(10), f"5 slots missed (from {at(6).isoformat()} to {at(10).isoformat()}): why"),
    ]
    assert record_gaps(store, job, at(1), at(10), node="n", cause="why", now=now) == 0
    assert record_gaps(store, job, at(3), at(12), node="n", cause="why", now=now) == 2  # 11, 12
