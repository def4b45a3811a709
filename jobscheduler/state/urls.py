"""Store URLs: which store a config file's scheduler and commands use (`default_state_url`),
and `mask_url`, which hides a password in messages."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ENV_STATE", "default_state_url", "mask_url", "state_file"]

ENV_STATE = "JOBSCHEDULER_STATE"


def state_file(config: str | Path) -> Path:
    """The SQLite file beside a config file: ``jobs.yaml`` → ``jobs.state.db``, absolute.

    Beside the file itself: ``~`` is expanded and links are followed (`Path.resolve`), so
    every name of one config file (a link, a relative path, one through a linked directory)
    gives the same store, and a scheduler, its daemon and the command line on that file never
    use two."""
    path = Path(config).expanduser().resolve()
    return path.with_name(f"{path.stem}.state.db")


def default_state_url(config: str | Path | None, given: str | None = None) -> str | None:
    """The store a scheduler or a command on `config` uses: `given` (``state=``,
    ``--state``) if not empty; else ``$JOBSCHEDULER_STATE`` if set and not empty; else
    ``sqlite:///`` + the `state_file` of `config`; None without a config file (memory)."""
    if given:
        return given
    env = os.environ.get(ENV_STATE, "").strip()
    if env:
        return env
    if config is None:
        return None
    return f"sqlite:///{state_file(config)}"


def mask_url(url: str) -> str:
    """`url` with its password (if any) shown as ``***``, for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # malformed (an unclosed bracket): hide all before the host
        if "@" not in url:
            return url
        scheme, sep, rest = url.rpartition("://")
        return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"

    if not password:
        return url
    netloc = parts.netloc
    userinfo, _, hostport = netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))
