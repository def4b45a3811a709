"""Several processes writing one configuration file, and writers killed at random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from jobscheduler import Job
from jobscheduler.config import ConfigStore, load_config

ADDER = """
import sys
from datetime import datetime
from jobscheduler import Job
from jobscheduler.config import ConfigStore

path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = ConfigStore(path)
for i in range(count):
    store.add_job(Job(f"{tag}-{i}", command=["echo", tag, str(i)],
                      start=datetime(2024, 1, 1), interval="1 hour"))
print("done", flush=True)
"""


# 400 writes of a growing file: CPU-bound, minutes beside the suite's other workers on a busy
# machine (over 200 s seen). The timeouts only catch a hang.
@pytest.mark.timeout(900)
def test_two_processes_adding_200_jobs_each(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("# shared by two writers\njobs: {}\n")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(path), tag, "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("left", "right")
    ]
    for child in children:
        out, err = child.communicate(timeout=840)
        assert child.returncode == 0, err
        assert out.strip() == "done"
    catalog = load_config(path)
    assert len(catalog.jobs) == 400
    for tag in ("left", "right"):
        names = [n for n in catalog.jobs if n.startswith(f"{tag}-")]
        assert names == [f"{tag}-{i}" for i in range(200)]  # each writer's order kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.yaml", "jobs.yaml.lock"]


def _writer(path: Path, trial: int, ack: int) -> None:
    """The child: write and acknowledge, forever (until killed)."""
    store = ConfigStore(path)
    store.read()
    os.write(ack, b"ready\n")
    added: list[str] = []
    i = 0
    while True:
        if i % 3 == 2:
            counter = store.catalog.jobs["counter"].with_changes(priority=trial * 1000 + i)
            store.modify_job(counter)
            line = f"P {trial * 1000 + i}"
        elif i % 5 == 4 and added:
            name = added.pop(0)
            os.write(ack, f"removing {name}\n".encode())  # it may be gone before the ack
            store.remove_job(name)
            line = f"R {name}"
        else:
            name = f"t{trial}-{i}"
            store.add_job(
                Job(name, command=["echo", str(i)], start=datetime(2024, 1, 1), interval="1 day")
            )
            added.append(name)
            line = f"A {name}"
        os.write(ack, f"{line}\n".encode())  # only after the write has returned
        i += 1


def _run_and_kill(path: Path, trial: int, rng: random.Random) -> list[str]:
    """Fork a writer, kill -9 it at a random moment after it is ready, return its acks."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns to pytest
        os.close(read_end)
        try:
            _writer(path, trial, write_end)
        finally:
            os._exit(1)
    os.close(write_end)
    buffer = b""
    while b"ready\n" not in buffer:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        buffer += chunk
    # Real processes are the point here: let the child write for a random few milliseconds.
    time.sleep(rng.uniform(0, 0.03))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    while chunk := os.read(read_end, 65536):
        buffer += chunk
    os.close(read_end)
    lines = buffer.decode().splitlines()
    assert lines and lines[0] == "ready", lines
    return lines[1:]


@pytest.mark.timeout(300)
def test_kill_9_while_writing_never_loses_an_acknowledged_change(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "# killed writers must never corrupt this\n"
        "jobs:\n  counter:\n    command: [echo, counter]\n    start: 2024-01-01\n"
        "    interval: 1 day\n"
    )
    rng = random.Random(20240601)
    present: set[str] = set()
    removed: set[str] = set()
    acknowledged = 0
    for trial in range(1, 101):
        acks = _run_and_kill(path, trial, rng)
        acknowledged += len(acks)
        catalog = load_config(path)  # always parses and loads
        for line in acks:
            kind, value = line.split(" ", 1)
            if kind == "A":
                present.add(value)
            elif kind == "removing":
                present.discard(value)
            elif kind == "R":
                removed.add(value)
            else:
                assert catalog.jobs["counter"].priority >= int(value)
        assert present <= set(catalog.jobs), present - set(catalog.jobs)
        assert not removed & set(catalog.jobs)
        temp_files = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
        assert len(temp_files) <= 1  # at most the one of the writer just killed
    assert acknowledged > 0  # the writers did write (few acks per trial on a loaded machine)
    # the next writer removes what the last killed one left behind
    ConfigStore(path).add_job(
        Job("final", command="true", start=datetime(2024, 1, 1), interval="1 day")
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.yaml", "jobs.yaml.lock"]
    assert "# killed writers must never corrupt this" in path.read_text()


ACKING_ADDER = """
import sys
from datetime import datetime
from jobscheduler import Job
from jobscheduler.config import ConfigStore

path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = ConfigStore(path)
for i in range(count):
    try:
        store.add_job(Job(f"{tag}-{i}", command=["echo", tag, str(i)],
                          start=datetime(2024, 1, 1), interval="1 hour"))
    except Exception as exc:
        print("error", type(exc).__name__, exc, flush=True)
    else:
        print("ack", f"{tag}-{i}", flush=True)
"""


@pytest.mark.timeout(300)
def test_writers_through_a_symlink_and_the_real_path_share_one_lock(tmp_path: Path) -> None:
    """Half the writers reach the file through a symbolic link in another directory: all of
    them must take the one lock beside the real file, or they overwrite each other."""
    real_dir, link_dir = tmp_path / "real", tmp_path / "links"
    real_dir.mkdir()
    link_dir.mkdir()
    real = real_dir / "jobs.yaml"
    real.write_text("jobs: {}\n")
    link = link_dir / "jobs.yaml"
    link.symlink_to(real)
    paths = [real, link, real, link]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", ACKING_ADDER, str(path), f"w{n}", "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, path in enumerate(paths)
    ]
    acked: list[str] = []
    errors: list[str] = []
    for child in children:
        out, err = child.communicate(timeout=280)
        assert child.returncode == 0, err
        for line in out.splitlines():
            kind, rest = line.split(" ", 1)
            (acked if kind == "ack" else errors).append(rest)
    catalog = load_config(real)
    lost = [name for name in acked if name not in catalog.jobs]
    assert (len(lost), errors) == (0, []), f"{len(lost)} of {len(acked)} acknowledged adds lost"
    assert len(acked) == 160
    assert link.is_symlink()  # written through, not replaced
    assert sorted(p.name for p in real_dir.iterdir()) == ["jobs.yaml", "jobs.yaml.lock"]
    assert list(link_dir.iterdir()) == [link]
