"""`jobscheduler resume` and the pause of `pause_after_failures`, kept in the state store."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["clear_pause"]


def clear_pause(config: Path, job: str) -> str | None:
    """Clear job `job`'s pause by failures (and its count) in the state store the daemon of
    `config` uses: ``$JOBSCHEDULER_STATE``, else the SQLite file beside `config`
    (``jobs.yaml`` → ``jobs.state.db``; none yet: nothing to clear). Returns the reason
    it was paused for, or None. A running daemon takes it up at its next reload (SIGHUP)."""
    from ..state.open import open_url

    url = os.environ.get("JOBSCHEDULER_STATE") or (
        f"sqlite:///{config.resolve().with_suffix('.state.db')}"
    )
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
