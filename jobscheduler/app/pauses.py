"""`jobscheduler resume` and the pause of `pause_after_failures`, kept in the state store."""

from __future__ import annotations

from pathlib import Path

__all__ = ["clear_pause"]


def clear_pause(config: Path, job: str, state: str | None = None) -> str | None:
    """Clear job `job`'s pause by failures (and its count) in the state store the daemon of
    `config` uses (`state`, else as `state.urls.default_state_url` decides; a SQLite file
    not made yet: nothing to clear). Returns the reason
    it was paused for, or None. A running daemon takes it up at its next reload (SIGHUP)."""
    from ..state.open import open_url
    from ..state.urls import default_state_url

    url = default_state_url(config, state)
    assert url is not None  # there is a config file
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).is_file():
        return None
    store = open_url(url)
    try:
        mark = store.mark(job)
        if mark is None or not (mark.paused_reason or mark.failures):
            return None
        store.set_mark(job, failures=0, paused_reason=None)
        return mark.paused_reason
    finally:
        store.close()
