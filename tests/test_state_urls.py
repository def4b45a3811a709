"""Which store a scheduler or a command on a config file uses: one rule, one function."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobscheduler import FakeClock
from jobscheduler.app.cli import main
from jobscheduler.scheduler import Scheduler
from jobscheduler.state.urls import default_state_url, state_file

CONFIG = """\
jobs:
  report:
    type: external
    command: ["true"]
    on_demand: true
"""
REASON = "paused after 3 consecutive failures"


def test_given_wins_then_the_environment_then_the_file_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBSCHEDULER_STATE", raising=False)
    config = tmp_path / "jobs.prod.yaml"
    beside = f"sqlite:///{tmp_path.resolve() / 'jobs.prod.state.db'}"
    assert default_state_url(config) == beside
    assert default_state_url(config, "") == beside  # an empty value is not a choice
    assert default_state_url(config, "memory") == "memory"
    assert default_state_url(None) is None
    monkeypatch.setenv("JOBSCHEDULER_STATE", "  ")
    assert default_state_url(config) == beside
    monkeypatch.setenv("JOBSCHEDULER_STATE", " postgresql://db/x ")
    assert default_state_url(config) == "postgresql://db/x"
    assert default_state_url(None) == "postgresql://db/x"
    assert default_state_url(config, "sqlite:///x.db") == "sqlite:///x.db"


def test_every_name_of_one_config_file_gives_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real" / "jobs.yaml"
    real.parent.mkdir()
    real.write_text(CONFIG)
    link = tmp_path / "other.yaml"
    link.symlink_to(real)
    through_dir = tmp_path / "linked"
    through_dir.symlink_to(real.parent)
    monkeypatch.chdir(real.parent)
    names = [real, link, through_dir / "jobs.yaml", Path("jobs.yaml"), Path("../other.yaml")]
    expected = real.resolve().with_name("jobs.state.db")
    assert {state_file(name) for name in names} == {expected}


def test_the_cli_status_and_resume_and_a_scheduler_on_a_linked_config_share_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JOBSCHEDULER_STATE", raising=False)
    real = tmp_path / "real" / "jobs.yaml"
    real.parent.mkdir()
    real.write_text(CONFIG)
    link = tmp_path / "etc" / "jobs.yaml"  # the same stem: only the link tells them apart
    link.parent.mkdir()
    link.symlink_to(real)
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    with Scheduler(link, clock=clock) as s:
        s.start()
        store = s.state_store
        store.pause(["report"], node="n1", paused_at=clock.now(), note=REASON)

        assert main(["status", str(link), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert [node["name"] for node in status["nodes"]] == [s.node]
        assert [p["job"] for p in status["paused"]] == ["report"]
        assert status["paused"][0]["note"] == REASON and status["paused"][0]["node"] == "n1"
        assert main(["status", str(real), "--json"]) == 0
        assert [node["name"] for node in json.loads(capsys.readouterr().out)["nodes"]] == [s.node]

        assert main(["resume", str(real), "report"]) == 0
        assert "resumed report" in capsys.readouterr().out
        assert store.pause_of("report") is None
        assert main(["pause", str(link), "report"]) == 0
        assert link.is_symlink()
        assert store.pause_of("report") is not None
        assert main(["resume", str(link), "report"]) == 0
        assert store.pause_of("report") is None
    assert not (link.parent / "jobs.state.db").exists()
    assert (real.parent / "jobs.state.db").is_file()


def test_resume_clears_the_pause_in_the_store_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBSCHEDULER_STATE", raising=False)
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    with Scheduler(config, state=url, clock=clock) as s:
        s.state_store.pause(["report"], node="n1", paused_at=clock.now(), note=REASON)
        assert main(["resume", str(config), "report"]) == 0  # beside the config: none there
        assert s.state_store.pause_of("report") is not None
        assert main(["resume", str(config), "report", "--state", url]) == 0
        assert s.state_store.pause_of("report") is None
