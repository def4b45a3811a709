"""The benchmarks' throwaway PostgreSQL server: started for one run, stopped after it."""

from __future__ import annotations

from collections.abc import Callable

from bench import _common as common


def repeat_on_postgres(
    script: str,
    opts: common.Options,
    cases: Callable[[bool, str], list[common.Case]],
) -> tuple[list[common.Case], dict[str, list[common.Measure]]]:
    """Start PostgreSQL (tests/pg_server.py, fsync on), build the cases with its URL and run
    each `opts.reps` times in fresh processes; the server is stopped whatever happens.
    Returns the cases and the measurements by case key."""
    import pg_server

    server = pg_server.start(fsync=True)
    try:
        all_cases = cases(opts.smoke, server.url())
        measures = common.repeat(script, all_cases, opts.reps, quiet=opts.quiet, timeout=600)
    finally:
        server.stop()
    return all_cases, measures
