"""Every run knows who it is: ``JOBSCHEDULER_*`` in a command's environment, `current_run()`
in an internal job, and the same run id in the events, the history, the audit record and the
alerts — through a real `Scheduler` on a FakeClock, with real subprocesses."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from smtp_server import SmtpServer

from jobscheduler import (
    Dependence,
    EmailEventHandler,
    Event,
    Execution,
    FakeClock,
    Job,
    JobType,
    RunInfo,
    current_run,
)
from jobscheduler.clock import SystemClock
from jobscheduler.events.mailer import SmtpMailer
from jobscheduler.model.emailconfig import EmailConfiguration, SmtpSettings
from jobscheduler.model.node import check_node_name, default_node_name
from jobscheduler.model.runid import is_run_id, run_id_instant
from jobscheduler.runners.identity import run_environment, utc_text
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, NodeInfo

WAIT = 30.0
# 02:59 UTC; the scheduled jobs below start at 04:00 Berlin time, which is 03:00 UTC.
T0 = datetime(2026, 11, 23, 2, 59, tzinfo=UTC)
SLOT_TEXT = "2026-11-23T03:00:00Z"
NODE = "node-a"

# Writes the environment it was given, as JSON, to DIR/<its run id>.json.
DUMP_ENV = (
    "import json, os, sys; "
    "path = os.path.join(sys.argv[1], os.environ['JOBSCHEDULER_RUN_ID'] + '.json'); "
    "open(path, 'w').write(json.dumps(dict(os.environ)))"
)

SEEN: dict[str, list[RunInfo | None]] = {}
_seen_lock = threading.Lock()


def record_run(key: str) -> None:
    """An internal job (a function): notes what `current_run()` says, here and in a thread
    it starts itself (which is outside the run)."""
    inside = current_run()
    elsewhere: list[RunInfo | None] = []
    thread = threading.Thread(target=lambda: elsewhere.append(current_run()))
    thread.start()
    thread.join()
    with _seen_lock:
        SEEN.setdefault(key, []).extend([inside, *elsewhere])


class RecordingJob:
    """An internal job (a class): `current_run()` in its constructor and in ``run()``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.at_creation = current_run()

    def run(self) -> None:
        with _seen_lock:
            SEEN.setdefault(self.key, []).extend([self.at_creation, current_run()])

    def stop(self) -> None:
        pass


class Failing:
    def __init__(self, key: str) -> None:
        self.key = key

    def run(self) -> None:
        with _seen_lock:
            SEEN.setdefault(self.key, []).append(current_run())
        raise RuntimeError("boom")


def seen(key: str) -> list[RunInfo | None]:
    with _seen_lock:
        return list(SEEN.get(key, []))


class Events:
    """An EventHandler that keeps every Execution it hears of, by job name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_job: dict[str, list[Execution]] = {}

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        with self.lock:
            self.by_job.setdefault(job.name, []).append(execution)

    def of(self, name: str) -> list[Execution]:
        with self.lock:
            return list(self.by_job.get(name, []))


def external(name: str, out: Path, **fields: Any) -> Job:
    if "dependence" not in fields:
        fields.setdefault("start", datetime(2026, 11, 23, 4, 0))
        fields.setdefault("interval", "1 day")
    return Job(
        name,
        command=[sys.executable, "-c", DUMP_ENV, str(out)],
        timezone="Europe/Berlin",
        **fields,
    )


def plain(name: str, command: Any, **fields: Any) -> Job:
    """A job run here through a `Runner` (its schedule is not used)."""
    return Job(name, command=command, start=T0, interval="1 day", **fields)


def internal(name: str, key: str, command: str = "record_run", **fields: Any) -> Job:
    if "dependence" not in fields:
        fields.setdefault("start", datetime(2026, 11, 23, 4, 0))
        fields.setdefault("interval", "1 day")
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{__name__}:{command}",
        args={"key": key},
        timezone="Europe/Berlin",
        **fields,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def scheduler(clock: FakeClock) -> Iterator[Scheduler]:
    s = Scheduler(clock=clock, max_workers=4, node=NODE)
    yield s
    s.shutdown(wait=False)


def settle(s: Scheduler) -> None:
    assert s.wait_idle(WAIT)


def environment_of(out: Path, execution: Execution) -> dict[str, str]:
    return dict(json.loads((out / f"{execution.run_id}.json").read_text()))


def identity(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key.startswith("JOBSCHEDULER_")}


# -- external commands ------------------------------------------------------------------------


def test_commands_get_their_identity_for_each_trigger(
    scheduler: Scheduler, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDENTITY_TEST_INHERITED", "kept")
    monkeypatch.setenv("JOBSCHEDULER_ARGS", '{"stale": true}')  # as if we ran under another
    events = Events()
    scheduler.add_jobs(
        [
            external("nightly", tmp_path, env={"FROM_JOB": "yes"}),
            external("after", tmp_path, dependence=Dependence("nightly", Event.SUCCESSFUL)),
        ]
    )
    for name in ("nightly", "after"):
        scheduler.add_handler(name, events)
    scheduler.start()
    clock.advance(timedelta(seconds=60))  # 03:00 UTC: the slot
    settle(scheduler)
    scheduler.run_now("nightly")
    settle(scheduler)

    scheduled, by_hand = events.of("nightly")
    first_after, second_after = events.of("after")
    assert [e.event for e in (scheduled, by_hand, first_after, second_after)] == [
        Event.SUCCESSFUL
    ] * 4
    expected = [
        (scheduled, "nightly", SLOT_TEXT, "schedule"),
        (by_hand, "nightly", "", "run_now"),
        (first_after, "after", "", "dependence"),
        (second_after, "after", "", "dependence"),
    ]
    for execution, job, slot, trigger in expected:
        env = environment_of(tmp_path, execution)
        assert identity(env) == {
            "JOBSCHEDULER_JOB": job,
            "JOBSCHEDULER_RUN_ID": execution.run_id,
            "JOBSCHEDULER_SLOT": slot,
            "JOBSCHEDULER_TRIGGER": trigger,
            "JOBSCHEDULER_NODE": NODE,
            "JOBSCHEDULER_FENCE": "1",  # a first attempt
        }  # no JOBSCHEDULER_ARGS: none of these runs has arguments
        assert env["IDENTITY_TEST_INHERITED"] == "kept"  # added to, nothing taken away
        assert env["PATH"] == os.environ["PATH"]
        assert is_run_id(execution.run_id)
        assert run_id_instant(execution.run_id) <= clock.now()  # the engine's (fake) time
    assert environment_of(tmp_path, scheduled)["FROM_JOB"] == "yes"
    assert "FROM_JOB" not in environment_of(tmp_path, first_after)
    assert scheduled.slot is not None and utc_text(scheduled.slot) == SLOT_TEXT
    run_ids = [e.run_id for e in (scheduled, first_after, by_hand, second_after)]
    assert len(set(run_ids)) == 4
    assert run_ids == sorted(run_ids)  # in the order the runs were taken
    # The history records the same ids.
    assert {r.run_id for r in scheduler.history()} == set(run_ids)


def test_the_run_variables_win_over_the_job_env_and_args_are_json(tmp_path: Path) -> None:
    job = plain(
        "j",
        [sys.executable, "-c", DUMP_ENV, str(tmp_path)],
        env={"JOBSCHEDULER_NODE": "forged", "JOBSCHEDULER_ARGS": "forged", "OWN": "1"},
    )
    args = {"day": "mon", "n": 3, "städte": ["Köln"], "when": datetime(2026, 1, 1)}
    with Runner(SystemClock()) as runner:
        ctx = RunContext(job, "0190a1b2-c3d4-7e5f-8a6b-1c2d3e4f5a6b", None, "run_now", args=args)
        with_args = runner.execute(job, ctx)
        no_args = runner.execute(job, RunContext(job, "run-2", None, "run_now", node="n2"))
    assert with_args.event is Event.SUCCESSFUL, with_args
    env = environment_of(tmp_path, with_args)
    assert env["JOBSCHEDULER_NODE"] == default_node_name()
    assert env["OWN"] == "1"
    assert json.loads(env["JOBSCHEDULER_ARGS"]) == {
        "day": "mon",
        "n": 3,
        "städte": ["Köln"],
        "when": "2026-01-01 00:00:00",  # not JSON: its text
    }
    env = environment_of(tmp_path, no_args)
    assert env["JOBSCHEDULER_NODE"] == "n2"
    assert "JOBSCHEDULER_ARGS" not in env  # the job's env cannot give a run arguments


def test_run_environment_and_slot_text() -> None:
    job = plain("j", ["true"])
    berlin_slot = datetime(2026, 11, 23, 4, 0, tzinfo=UTC) + timedelta(hours=-1)
    ctx = RunContext(job, "id-1", berlin_slot, node="n")
    assert run_environment(ctx) == {
        "JOBSCHEDULER_JOB": "j",
        "JOBSCHEDULER_RUN_ID": "id-1",
        "JOBSCHEDULER_SLOT": SLOT_TEXT,
        "JOBSCHEDULER_TRIGGER": "schedule",
        "JOBSCHEDULER_NODE": "n",
        "JOBSCHEDULER_FENCE": "1",
    }
    rerun = RunContext(job, "id-2", berlin_slot, "rerun", node="n", attempt=3)
    assert run_environment(rerun)["JOBSCHEDULER_FENCE"] == "3"
    assert rerun.fence == 3 and rerun.fence > ctx.fence
    assert utc_text(None) == ""
    assert utc_text(datetime(2026, 1, 1, 12, 0, 0, 250000)) == "2026-01-01T12:00:00.250000Z"
    zoned = datetime.fromisoformat("2026-07-01T05:00:00+02:00")
    assert utc_text(zoned) == "2026-07-01T03:00:00Z"


def test_a_shell_job_is_idempotent_by_job_and_slot(tmp_path: Path) -> None:
    """The docs' example: the report of a slot is written once, however often it runs."""
    script = (
        'out="reports/report-$JOBSCHEDULER_SLOT"\n'
        'if [ -e "$out" ]; then echo "already done"; exit 0; fi\n'
        'echo "$JOBSCHEDULER_RUN_ID" > "$out.tmp" && mv "$out.tmp" "$out"\n'
    )
    (tmp_path / "reports").mkdir()
    job = plain("report", script, shell=True, cwd=str(tmp_path))
    slot = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
    with Runner(SystemClock()) as runner:
        first = runner.execute(job, RunContext(job, "run-1", slot))
        again = runner.execute(job, RunContext(job, "run-2", slot, "run_now"))
    assert (first.event, again.event) == (Event.SUCCESSFUL, Event.SUCCESSFUL)
    assert again.output_tail == "already done\n"
    assert os.listdir(tmp_path / "reports") == [f"report-{SLOT_TEXT}"]
    assert (tmp_path / "reports" / f"report-{SLOT_TEXT}").read_text() == "run-1\n"


# -- internal jobs ----------------------------------------------------------------------------


def test_internal_jobs_see_current_run_for_each_trigger(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = request.node.nodeid
    events = Events()
    scheduler.add_jobs(
        [
            internal("fn", f"{k}/fn"),
            internal("cls", f"{k}/cls", "RecordingJob", dependence=Dependence("fn")),
        ]
    )
    for name in ("fn", "cls"):
        scheduler.add_handler(name, events)
    assert current_run() is None
    scheduler.start()
    clock.advance(timedelta(seconds=60))
    settle(scheduler)
    scheduler.run_now("fn")
    settle(scheduler)
    scheduler.run_now("cls")
    settle(scheduler)

    scheduled, by_hand = events.of("fn")
    dependent_1, dependent_2, cls_by_hand = events.of("cls")
    fn_seen = seen(f"{k}/fn")
    # Each run: the view inside, then None in the thread the job started.
    assert fn_seen[1::2] == [None, None]
    assert fn_seen[0::2] == [
        RunInfo("fn", scheduled.run_id, scheduled.slot, "schedule", NODE, None, 1, 1),
        RunInfo("fn", by_hand.run_id, None, "run_now", NODE, None, 1, 1),
    ]
    info = fn_seen[0]
    assert info is not None and info.slot_text == SLOT_TEXT and info.slot == scheduled.slot
    cls_seen = seen(f"{k}/cls")
    runs = [
        (dependent_1, "dependence"),
        (dependent_2, "dependence"),
        (cls_by_hand, "run_now"),
    ]
    expected = [RunInfo("cls", e.run_id, None, trigger, NODE, None, 1, 1) for e, trigger in runs]
    assert cls_seen[0::2] == expected  # in the constructor
    assert cls_seen[1::2] == expected  # in run()
    assert current_run() is None


def test_a_rerun_after_a_node_loss_sees_the_next_attempt_and_a_larger_fence(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """Node "b" claimed a slot and died; this node takes it over and reruns it: the rerun's
    `current_run()` has the slot, trigger ``rerun``, attempt 2 and fence 2."""
    k = request.node.nodeid
    lease = timedelta(seconds=15)
    store = MemoryStateStore(clock=clock)
    dead = NodeInfo(name="b", host="elsewhere", pid=1, process_started=1.0, started=T0)
    store.join(dead, lease=lease)
    slot = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
    assert store.claim("fn", slot, "schedule", "r1", node="b", started=T0)
    s = Scheduler(clock=clock, state=store, node=NODE, lease=lease)
    s.add_job(internal("fn", f"{k}/fn", on_node_loss="rerun", start=datetime(2030, 1, 1)))
    try:
        s.start()
        for _ in range(6):  # the lease runs out, then a fifth of it for the rerun
            clock.advance(lease / 3 + timedelta(milliseconds=1))
            s._keeper.beat()
        settle(s)
        [info] = seen(f"{k}/fn")[0::2]
        assert info is not None
        assert (info.slot, info.trigger, info.attempt, info.fence) == (slot, "rerun", 2, 2)
        assert info.fence > 1  # the lost attempt's
    finally:
        s.shutdown(wait=False)
        store.close()


def test_current_run_is_reset_after_a_run_even_a_failing_one(
    request: pytest.FixtureRequest,
) -> None:
    k = request.node.nodeid
    job = internal("bad", k, "Failing")
    with Runner(SystemClock()) as runner:
        execution = runner.execute(job, RunContext(job, "run-9", None, "run_now", args={"a": 1}))
        assert execution.event is Event.FAILED
        assert current_run() is None
        [info] = seen(k)
    assert info is not None
    assert (info.job, info.run_id, info.trigger, info.args, info.attempt) == (
        "bad",
        "run-9",
        "run_now",
        {"a": 1},
        1,
    )
    assert info.node == default_node_name()
    with pytest.raises(AttributeError):
        info.run_id = "other"  # type: ignore[misc]
    assert not hasattr(info, "stop")  # the view has no stop switch
    assert info.args is not None
    with pytest.raises(TypeError):
        info.args["a"] = 2  # type: ignore[index]


def test_run_context_args_are_a_read_only_copy() -> None:
    args = {"x": 1}
    job = plain("j", ["true"])
    ctx = RunContext(job, "r", None, args=args, attempt=2)
    args["x"] = 99
    assert ctx.args == {"x": 1} and ctx.attempt == 2
    assert RunContext(job, "r", None).args is None


# -- the same id everywhere -------------------------------------------------------------------


def test_the_audit_record_carries_the_run_id(
    scheduler: Scheduler,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    events = Events()
    scheduler.add_job(internal("fn", request.node.nodeid))
    scheduler.add_handler("fn", events)
    scheduler.start()
    with caplog.at_level(logging.INFO, logger="jobscheduler.audit"):
        clock.advance(timedelta(seconds=60))
        settle(scheduler)
    [execution] = events.of("fn")
    [record] = [r for r in caplog.records if r.name == "jobscheduler.audit"]
    assert record.getMessage().startswith("fn : ")
    assert record.getMessage().count(" : ") == 4  # the specification's five fields, unchanged
    assert record.run_id == execution.run_id  # type: ignore[attr-defined]
    assert record.job_name == "fn"  # type: ignore[attr-defined]
    assert record.slot == execution.slot  # type: ignore[attr-defined]
    assert record.trigger == "schedule"  # type: ignore[attr-defined]
    formatted = logging.Formatter("%(message)s [%(run_id)s]").format(record)
    assert formatted.endswith(f"[{execution.run_id}]")


def test_an_alert_shows_the_run_id(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    events = Events()
    scheduler.add_job(internal("bad", request.node.nodeid, "Failing"))
    scheduler.add_handler("bad", events)
    with SmtpServer() as server:
        config = EmailConfiguration(
            from_address="scheduler@example.com",
            subject="{{ JobName }} {{ JobStatus }}",
            smtp=SmtpSettings(host="127.0.0.1", port=server.port, timeout=5.0, retries=0),
        )
        mailer = SmtpMailer(clock=SystemClock(), local_hostname="localhost")
        handler = EmailEventHandler(
            "run {{ execution.run_id }} of {{ JobName }} on slot {{ execution.slot }}",
            ["ops@example.com"],
            Event.FAILED,
            config=config,
            mailer=mailer,
        )
        scheduler.add_handler("bad", handler)
        scheduler.start()
        clock.advance(timedelta(seconds=60))
        settle(scheduler)
        [mail] = server.wait_for(1)
    [execution] = events.of("bad")
    assert mail.body.strip().startswith(f"run {execution.run_id} of bad on slot ")


# -- node names -------------------------------------------------------------------------------


def test_the_default_node_is_host_and_pid() -> None:
    assert default_node_name() == f"{socket.gethostname()}-{os.getpid()}"
    with Scheduler(clock=FakeClock(T0)) as s:
        assert s.node == default_node_name()


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "tab\there", 7, None])
def test_bad_node_names_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="node name"):
        check_node_name(bad)
    if bad is not None:
        with pytest.raises(ValueError, match="node name"):
            Scheduler(clock=FakeClock(T0), node=bad)  # type: ignore[arg-type]


def test_the_daemon_takes_its_node_name_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    config = tmp_path / "jobs.yaml"
    config.write_text(
        "jobs:\n"
        "  tick:\n"
        "    command: [sh, -c, 'echo \"$JOBSCHEDULER_NODE|$JOBSCHEDULER_TRIGGER|"
        "$JOBSCHEDULER_SLOT|$JOBSCHEDULER_RUN_ID\" >> out.txt']\n"
        "    start: 2024-01-01 00:00:00\n"
        "    interval: 1 second\n"
    )
    command = [sys.executable, "-m", "jobscheduler", "run", str(config)]
    bad = subprocess.run(
        [*command, "--node", ""], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert bad.returncode == 2 and "--node" in bad.stderr
    process = subprocess.Popen(
        [*command, "--node", "night-1"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        clock = SystemClock()
        deadline = clock.now() + timedelta(seconds=WAIT)
        while not (out.exists() and len(out.read_text().splitlines()) >= 2):
            assert clock.now() < deadline, "the daemon's job never ran twice"
            assert process.poll() is None, "the daemon ended"
            clock.sleep(0.05)
    finally:
        process.terminate()
        process.wait(WAIT)
    rows = [line.split("|") for line in out.read_text().splitlines()]
    for node, trigger, slot, run_id in rows:
        assert (node, trigger) == ("night-1", "schedule")
        assert slot.endswith("Z") and datetime.fromisoformat(slot).second >= 0
        assert is_run_id(run_id)
    assert len({row[3] for row in rows}) == len(rows)
