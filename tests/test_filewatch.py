"""`FileWatch` on real files: what counts as a change of the configuration file (an edit in
place, an editor's write to a temporary file renamed over it, a link pointed elsewhere, a
file gone), and when it is reported (two looks in a row alike, each state once). The looks
are called directly: no waiting. The daemon's side too: its looks at the file reload a change
once, refuse a bad one once, and a SIGHUP's reload counts as taking the file up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobscheduler.app.daemon import Daemon
from jobscheduler.app.filewatch import FileWatch, signature
from jobscheduler.scheduler import Scheduler


def edit(path: Path, text: str) -> None:
    """Write `text` with a modification time of its own (a file system's clock may be coarse:
    two writes within one tick would keep one mtime; the size or the ctime tells them apart
    here, and the explicit time makes sure)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def reported(watch: FileWatch) -> list[bool]:
    """Three looks in a row: whether each reported a change."""
    return [watch.poll()[0] for _ in range(3)]


def test_an_edit_in_place_is_reported_once_after_two_looks_alike(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: {}\n")
    watch = FileWatch(path)
    assert reported(watch) == [False, False, False]
    edit(path, "jobs:\n  a: {}\n")
    changed, state = watch.poll()
    assert not changed and watch.settling  # seen once: maybe still being written
    changed, state = watch.poll()
    assert changed and state == signature(path)
    watch.taken(state)
    assert not watch.settling
    assert reported(watch) == [False, False, False]


def test_a_file_still_changing_waits_until_two_looks_agree(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: {}\n")
    watch = FileWatch(path)
    edit(path, "jobs:\n")
    assert not watch.poll()[0]
    edit(path, "jobs:\n  a:\n")  # written on between the two looks
    assert not watch.poll()[0]
    assert watch.poll()[0]


def test_a_rename_over_the_file_and_a_link_pointed_elsewhere_are_changes(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "jobs.yaml").write_text("jobs: {}\n")
    link = tmp_path / "jobs.yaml"
    link.symlink_to(real / "jobs.yaml")
    watch = FileWatch(link)
    # An editor: a temporary file of the same size and time, renamed over the target.
    temporary = real / ".jobs.yaml.swp"
    temporary.write_text("jobs: {}\n")
    stat = (real / "jobs.yaml").stat()
    os.utime(temporary, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    temporary.replace(real / "jobs.yaml")
    assert reported(watch)[1]  # another inode behind the link
    watch.taken(signature(link))
    # The link pointed at another file (a Kubernetes ConfigMap's swap).
    (tmp_path / "v2.yaml").write_text("jobs: {}\n")
    link.unlink()
    link.symlink_to(tmp_path / "v2.yaml")
    assert reported(watch)[1]


def test_a_file_gone_is_a_change_and_so_is_its_return(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: {}\n")
    watch = FileWatch(path)
    path.unlink()
    assert reported(watch) == [False, True, True]  # reported until taken up
    watch.taken(None)
    assert reported(watch) == [False, False, False]
    path.write_text("jobs: {}\n")
    assert reported(watch)[1]


# -- the daemon's looks, called directly (no signal, no waiting) -----------------------------

JOB = """\
  {name}:
    command: ["true"]
    start: 2099-01-01 00:00:00
    interval: 1 day
"""


def test_the_daemon_reloads_a_change_once_and_refuses_a_bad_one_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n" + JOB.format(name="a"))
    scheduler = Scheduler(path, state="memory")
    daemon = Daemon(scheduler)
    try:

        def looks(count: int) -> None:
            for _ in range(count):
                daemon._look_at_file()

        looks(3)
        assert [j.name for j in scheduler.jobs] == ["a"]
        edit(path, "jobs:\n" + JOB.format(name="a") + JOB.format(name="b"))
        looks(1)
        assert [j.name for j in scheduler.jobs] == ["a"]  # seen once: not yet
        looks(1)
        assert [j.name for j in scheduler.jobs] == ["a", "b"]
        caplog.clear()
        edit(path, path.read_text() + "  broken:\n    colour: blue\n")
        looks(5)
        refusals = [r for r in caplog.records if "reload refused" in r.getMessage()]
        assert len(refusals) == 1  # each state of the file once
        problems = [r.getMessage() for r in caplog.records if r.getMessage().startswith("  ")]
        assert any(f"{path}:11, job 'broken', key 'colour'" in p for p in problems)
        assert [j.name for j in scheduler.jobs] == ["a", "b"]  # kept
        edit(path, "jobs:\n" + JOB.format(name="c"))
        looks(2)
        assert [j.name for j in scheduler.jobs] == ["c"]
        path.unlink()  # gone: the definitions stay
        looks(3)
        assert [j.name for j in scheduler.jobs] == ["c"]
        assert "no such file" in caplog.text
    finally:
        scheduler.shutdown(wait=False)


def test_a_sighup_reload_takes_the_files_state_up(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n" + JOB.format(name="a"))
    scheduler = Scheduler(path, state="memory")
    daemon = Daemon(scheduler)
    watch = daemon._watch
    assert watch is not None
    try:
        edit(path, "jobs:\n" + JOB.format(name="b"))
        daemon._reload()  # SIGHUP
        assert [j.name for j in scheduler.jobs] == ["b"]
        assert [watch.poll()[0] for _ in range(3)] == [False, False, False]
        assert Daemon(scheduler, watch_poll=None)._watch is None
    finally:
        scheduler.shutdown(wait=False)
