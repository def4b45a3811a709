"""ConfigStore: atomic, locked writes that merge with human edits and keep their comments."""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobscheduler import (
    Catalog,
    ConfigFileError,
    ConflictError,
    Dependence,
    DuplicateNameError,
    EmailConfiguration,
    Event,
    InvalidJobError,
    Job,
    JobGroup,
    Message,
    UnknownNameError,
)
from jobscheduler.config import (
    ConfigStore,
    DefinitionStore,
    FileStore,
    MemoryStore,
    dump_config,
    load_config,
)
from jobscheduler.config.store import FileStore as StoreClass

HAND_WRITTEN = """\
# Production jobs. Ask ops@ before changing anything.
email:
  from_address: scheduler@example.com   # the sender
  smtp: {host: mail.example.com, port: 587, security: starttls}

jobs:
  # Clean /tmp every night.
  cleanup:
    command: [find, /tmp, -name, "*.tmp", -delete]
    start: 2024-01-01 01:00:00   # one in the morning
    interval: 1 day
    timezone: Europe/Berlin

  # The daily report, after the cleanup.
  report:
    type: internal
    command: jobscheduler.examples:Report
    dependence: {job: cleanup, status: successful, delay: 10s}
    priority: 3   # more important than the rest

  backup:
    command: pg_dump app
    start: 2024-01-01 02:00:00
    interval: 6 hours

groups:
  ops:
    jobs: [cleanup, report]   # the nightly chain
"""


def job(name: str, **kw: Any) -> Job:
    if "dependence" not in kw:
        kw.setdefault("start", datetime(2024, 1, 1))
        kw.setdefault("interval", "1 hour")
    kw.setdefault("command", ["echo", name])
    return Job(name, **kw)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "jobs.yaml"
    p.write_text(HAND_WRITTEN)
    return p


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """Lines only in `before`, lines only in `after` (as multisets, order ignored)."""
    a, b = before.splitlines(), after.splitlines()
    only_a = list(a)
    only_b: list[str] = []
    for line in b:
        if line in only_a:
            only_a.remove(line)
        else:
            only_b.append(line)
    return only_a, only_b


# -- reading ------------------------------------------------------------------------------------


def test_missing_file_is_empty_and_the_first_write_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    store = ConfigStore(path)
    assert store.read() == Catalog()
    store.add_job(job("a"))
    assert list(load_config(path).jobs) == ["a"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    assert (tmp_path / "new.yaml.lock").exists()


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def test_manual_edit_then_read(path: Path) -> None:
    store = ConfigStore(path)
    assert list(store.read().jobs) == ["cleanup", "report", "backup"]
    text = path.read_text().replace("interval: 6 hours", "interval: 12 hours")
    extra = "  # added by hand\n  extra:\n    command: ls\n    dependence: backup\n\ngroups:"
    path.write_text(text.replace("groups:", extra))
    assert store.changed_on_disk()
    catalog = store.read()
    assert not store.changed_on_disk()
    assert str(catalog.jobs["backup"].interval) == "12 hours"
    assert catalog.jobs["extra"].dependence == Dependence("backup")
    assert store.catalog is catalog


def test_a_broken_file_keeps_the_last_catalog(path: Path) -> None:
    store = ConfigStore(path)
    before = store.read()
    path.write_text(HAND_WRITTEN.replace("interval: 1 day", "interval: often"))
    with pytest.raises(ConfigFileError) as info:
        store.read()
    assert info.value.problem.line == 11 and info.value.problem.job == "cleanup"
    assert store.catalog is before


# -- writing without losing anything --------------------------------------------------------------


def test_modifying_a_job_rewrites_only_the_changed_keys(path: Path) -> None:
    store = ConfigStore(path)
    old = store.read().jobs["report"]
    store.modify_job(old.with_changes(priority=5, timeout=timedelta(minutes=5)))
    removed, added = changed_lines(HAND_WRITTEN, path.read_text())
    assert removed == ["    priority: 3   # more important than the rest"]
    assert added == ["    priority: 5  # more important than the rest", "    timeout: 5m"]
    assert load_config(path) == store.catalog


def test_adding_removing_and_regrouping_keep_every_comment(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    store.add_jobs([job("new-one", command="echo hi")])
    text = path.read_text()
    assert text.startswith(HAND_WRITTEN.split("groups:")[0])  # untouched, byte for byte
    assert "\n\n  new-one:\n    type: external\n    command: echo hi\n" in text
    store.remove_job("backup")
    removed, added = changed_lines(HAND_WRITTEN, path.read_text())
    assert removed == [
        "  backup:",
        "    command: pg_dump app",
        "    start: 2024-01-01 02:00:00",
        "    interval: 6 hours",
    ]
    assert "  new-one:" in added
    store.modify_group(JobGroup("ops", ["cleanup", "report", "new-one"]))
    assert "    jobs: [cleanup, report, new-one]   # the nightly chain\n" not in path.read_text()
    assert "    jobs: [cleanup, report, new-one]  # the nightly chain\n" in path.read_text()
    for comment in ("# Production jobs.", "# the sender", "# Clean /tmp", "# one in the morning"):
        assert comment in path.read_text()
    assert load_config(path) == store.catalog


def test_removing_a_job_takes_its_leading_comment(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    store.modify_group(JobGroup("ops", ["cleanup"]))
    store.remove_job("report")
    text = path.read_text()
    assert "The daily report" not in text and "report:" not in text
    assert "# Clean /tmp every night." in text
    assert "\n\n\n" not in text  # no double blank line left behind


def test_new_sections_are_appended(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "# only jobs here\njobs:\n  a:\n    command: 'true'\n    dependence: b\n"
        "  b: {command: 'true', start: 2024-01-01, interval: 1 day}\n"
    )
    store = ConfigStore(path)
    store.read()
    store.set_email(EmailConfiguration("s@example.com"))
    store.add_group(JobGroup("g", ["a"]))
    text = path.read_text()
    assert text.startswith("# only jobs here\njobs:\n  a:\n")
    assert "\nemail:\n  from_address: s@example.com\n" in text
    assert "\ngroups:\n  g:\n    jobs: [a]\n" in text
    store.remove_group("g")
    store.set_email(None)
    assert path.read_text() == (
        "# only jobs here\njobs:\n  a:\n    command: 'true'\n    dependence: b\n"
        "  b: {command: 'true', start: 2024-01-01, interval: 1 day}\n"
    )


def test_a_write_that_changes_nothing_leaves_the_file_alone(path: Path) -> None:
    store = ConfigStore(path)
    catalog = store.read()
    before = path.stat()
    store.modify_job(catalog.jobs["report"])
    store.modify_group(catalog.groups["ops"])
    assert path.read_text() == HAND_WRITTEN
    assert path.stat().st_ino == before.st_ino and path.stat().st_mtime_ns == before.st_mtime_ns


def test_dump_of_an_unchanged_catalog_is_identical(path: Path) -> None:
    catalog = load_config(path)
    text = dump_config(catalog)
    rewritten = path.with_name("rewritten.yaml")
    rewritten.write_text(text)
    assert dump_config(load_config(rewritten)) == text


def test_order_of_jobs_and_groups_is_kept(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "jobs.yaml")
    store.add_jobs([job(n) for n in ("c", "a", "b")])
    store.remove_job("a")
    store.add_job(job("0"))
    store.add_group(JobGroup("z", ["c"]))
    store.add_group(JobGroup("y", ["b"]))
    expected = ["c", "b", "0"]
    assert list(store.catalog.jobs) == expected
    assert list(load_config(tmp_path / "jobs.yaml").jobs) == expected
    assert list(load_config(tmp_path / "jobs.yaml").groups) == ["z", "y"]


def test_add_jobs_is_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[str] = []
    original = StoreClass._write

    def counting(self: StoreClass, text: str) -> None:
        writes.append(text)
        original(self, text)

    monkeypatch.setattr(StoreClass, "_write", counting)
    store = ConfigStore(tmp_path / "jobs.yaml")
    batch = [job(f"j{i}") for i in range(50)]
    batch.append(job("after", dependence=Dependence("j0")))  # may depend on its batch
    store.add_jobs(batch)
    assert len(writes) == 1
    assert len(load_config(tmp_path / "jobs.yaml").jobs) == 51


# -- merging with edits made by others ------------------------------------------------------------


def test_external_edit_and_api_write_keep_both(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    edited = HAND_WRITTEN.replace("interval: 6 hours", "interval: 4 hours  # more often")
    edited = edited.replace(
        "groups:",
        "  # a job added by hand\n  manual:\n"
        "    command: [echo, manual]\n    dependence: backup\n\ngroups:",
    )
    path.write_text(edited)
    catalog = store.add_job(job("api-job"))
    on_disk = load_config(path)
    assert set(on_disk.jobs) == {"cleanup", "report", "backup", "manual", "api-job"}
    assert str(on_disk.jobs["backup"].interval) == "4 hours"
    assert on_disk == catalog == store.catalog
    assert "interval: 4 hours  # more often" in path.read_text()
    assert "# a job added by hand" in path.read_text()


def test_the_same_job_changed_both_ways_is_a_conflict(path: Path) -> None:
    store = ConfigStore(path)
    catalog = store.read()
    edited = HAND_WRITTEN.replace("priority: 3", "priority: 4")
    path.write_text(edited)
    with pytest.raises(ConflictError) as info:
        store.modify_job(catalog.jobs["report"].with_changes(priority=7))
    problem = info.value.problem
    assert (problem.file, problem.line, problem.job) == (str(path), 15, "report")
    assert "changed in the file" in problem.message and "reload()" in problem.message
    assert path.read_text() == edited  # left alone
    with pytest.raises(ConflictError, match="changed in the file"):
        store.remove_job("report")
    # after a reload the change applies on top of the edit
    store.read()
    store.modify_job(store.catalog.jobs["report"].with_changes(priority=7))
    assert load_config(path).jobs["report"].priority == 7


def test_conflicts_for_removed_added_groups_and_email(path: Path) -> None:
    store = ConfigStore(path)
    catalog = store.read()
    path.write_text(
        HAND_WRITTEN.replace("    jobs: [cleanup, report]", "    jobs: [cleanup]")
        .replace("port: 587", "port: 25")
        .replace(
            "  backup:\n    command: pg_dump app\n    start: 2024-01-01 02:00:00\n"
            "    interval: 6 hours\n",
            "  twin:\n    command: ls\n    dependence: cleanup\n",
        )
    )
    with pytest.raises(ConflictError, match="removed from the file"):
        store.modify_job(catalog.jobs["backup"].with_changes(priority=1))
    with pytest.raises(ConflictError, match="added to the file by someone else"):
        store.add_job(job("twin"))
    with pytest.raises(ConflictError) as info:
        store.modify_group(JobGroup("ops", ["report"]))
    assert info.value.problem.group == "ops"
    with pytest.raises(ConflictError, match="email section was changed"):
        store.set_email(EmailConfiguration("other@example.com"))
    # a change to something nobody else touched goes through, on top of their edits
    store.add_job(job("fresh"))
    on_disk = load_config(path)
    assert "twin" in on_disk.jobs and "fresh" in on_disk.jobs and "backup" not in on_disk.jobs


def test_an_edit_keeping_size_and_mtime_is_still_seen(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    st = path.stat()
    path.write_text(HAND_WRITTEN.replace("priority: 3", "priority: 4"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    with pytest.raises(ConflictError):
        store.modify_job(store.catalog.jobs["report"].with_changes(priority=9))


def test_a_broken_file_on_disk_is_never_overwritten(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    broken = HAND_WRITTEN.replace("interval: 1 day", "interval: [")
    path.write_text(broken)
    with pytest.raises(ConfigFileError) as info:
        store.add_job(job("x"))
    assert "nothing is written" in info.value.problems[0].message
    assert any(p.line is not None for p in info.value.problems[1:])
    assert path.read_text() == broken


# -- refusals ----------------------------------------------------------------------------------


def test_removing_a_grouped_job_rewrites_its_group_and_nothing_else(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    store.remove_job("report")
    text = path.read_text()
    assert "    jobs: [cleanup]  # the nightly chain\n" in text
    assert load_config(path).groups["ops"].job_names == ("cleanup",)
    removed, added = changed_lines(HAND_WRITTEN, text)
    assert added == ["    jobs: [cleanup]  # the nightly chain"]
    assert "    jobs: [cleanup, report]   # the nightly chain" in removed
    with pytest.raises(InvalidJobError, match="only job of groups 'ops'"):
        store.remove_job("cleanup")


def test_refused_changes_leave_the_file_alone(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    with pytest.raises(InvalidJobError, match="'report' depend on it"):
        store.remove_job("cleanup")
    with pytest.raises(DuplicateNameError):
        store.add_job(job("backup"))
    with pytest.raises(UnknownNameError):
        store.modify_job(job("ghost"))
    with pytest.raises(InvalidJobError, match="unknown job"):
        store.add_job(job("orphan", dependence=Dependence("ghost")))
    assert path.read_text() == HAND_WRITTEN


@pytest.mark.parametrize("memory", [True, False])
def test_what_a_file_cannot_hold_is_refused(tmp_path: Path, memory: bool) -> None:
    store = ConfigStore(None if memory else tmp_path / "jobs.yaml")
    store.set_email(EmailConfiguration("s@example.com"))
    with pytest.raises(InvalidJobError) as info:
        store.add_job(
            job("objects", type="internal", command="m:C", args={"lock": threading.Lock()})
        )
    assert info.value.problem.key == "args" and info.value.problem.job == "objects"
    bad_template = {Event.FAILED: Message(("a@example.com",), template="{% if %}")}
    with pytest.raises(InvalidJobError) as info:
        store.add_job(job("alert", messages=bad_template))
    assert info.value.problem.key == "messages.failed"
    missing_file = {Event.FAILED: Message(("a@example.com",), template_file="nope.txt")}
    with pytest.raises(InvalidJobError, match="does not exist"):
        store.add_job(job("alert", messages=missing_file))
    store.set_email(None)
    good = {Event.FAILED: Message(("a@example.com",))}
    with pytest.raises(InvalidJobError, match="email"):
        store.add_job(job("alert", messages=good))
    assert store.catalog.jobs == {}


def test_memory_store_has_no_file_and_the_same_rules() -> None:
    store = ConfigStore(None)
    assert store.path is None and store.lock_path is None and store.read() == Catalog()
    store.add_jobs([job("a"), job("b", dependence=Dependence("a"))])
    store.add_group(JobGroup("g", ["a", "b"]))
    with pytest.raises(DuplicateNameError):
        store.add_job(job("g"))
    with pytest.raises(InvalidJobError):
        store.remove_job("a")
    store.modify_job(store.catalog.jobs["a"].with_changes(priority=2))
    assert store.read().jobs["a"].priority == 2
    assert not store.changed_on_disk()


def test_template_files_are_found_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "failed.txt").write_text("{{ JobName }} failed")
    (tmp_path / "body.txt").write_text("Body of {{ JobName }}")
    store = ConfigStore(tmp_path / "jobs.yaml")
    catalog = store.set_email(EmailConfiguration("s@example.com", default_template_file="body.txt"))
    assert catalog.email is not None and catalog.email.default_template == "Body of {{ JobName }}"
    alert = {Event.FAILED: Message(("a@example.com",), template_file="templates/failed.txt")}
    store.add_job(job("a", messages=alert))
    assert load_config(tmp_path / "jobs.yaml") == store.catalog
    with pytest.raises(InvalidJobError, match="does not exist"):
        store.set_email(EmailConfiguration("s@example.com", default_template_file="none.txt"))


# -- files ----------------------------------------------------------------------------------------


def test_file_mode_is_kept_and_stale_temp_files_are_removed(path: Path) -> None:
    path.chmod(0o640)
    stale = path.with_name(".jobs.yaml.tmp-abc123xy")
    stale.write_text("half a file")
    other = path.with_name(".other.yaml.tmp-abc123xy")
    other.write_text("someone else's")
    store = ConfigStore(path)
    store.read()
    store.add_job(job("x"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert not stale.exists() and other.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".other.yaml.tmp-abc123xy",
        "jobs.yaml",
        "jobs.yaml.lock",
    ]


def test_writes_go_through_a_symbolic_link(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text(HAND_WRITTEN)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    store = ConfigStore(link)
    store.read()
    store.add_job(job("x"))
    assert link.is_symlink()
    assert "x" in load_config(real).jobs


def test_a_failed_write_leaves_the_file_and_no_temp_file(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ConfigStore(path)
    store.read()

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(ConfigFileError, match=r"cannot write the file \(No space left"):
        store.add_job(job("x"))
    assert path.read_text() == HAND_WRITTEN
    assert sorted(p.name for p in path.parent.iterdir()) == ["jobs.yaml", "jobs.yaml.lock"]
    assert "x" not in store.catalog.jobs
    with pytest.raises(ConfigFileError, match="lock file"):
        ConfigStore(path.parent / "missing-dir" / "jobs.yaml").add_job(job("x"))


def test_a_write_waits_for_the_lock(path: Path) -> None:
    store = ConfigStore(path)
    store.read()
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()

    def write() -> None:
        store.add_job(job("late"))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        # a real process lock, so a real (short) wait: the writer must still be blocked
        writer.join(timeout=0.3)
        assert not done.is_set() and "late" not in path.read_text()
    finally:
        os.close(fd)
    writer.join(timeout=10)
    assert done.is_set() and "late" in load_config(path).jobs


# -- the DefinitionStore seam ---------------------------------------------------------------------


def test_both_stores_follow_the_protocol_and_a_write_says_when_it_merged(path: Path) -> None:
    memory: DefinitionStore = ConfigStore(None)
    filed: DefinitionStore = ConfigStore(path)
    assert isinstance(memory, MemoryStore) and isinstance(filed, FileStore)
    memory.add_job(job("a"))
    assert not memory.merged and memory.path is None
    filed.read()
    filed.add_job(job("x"))
    assert not filed.merged  # nothing changed on disk: the catalog is the old one plus x
    ConfigStore(path).add_job(job("by-someone-else"))
    catalog = filed.add_job(job("y"))
    assert filed.merged and "by-someone-else" in catalog.jobs  # edits made elsewhere came in
    filed.add_job(job("z"))
    assert not filed.merged
