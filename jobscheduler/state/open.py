"""`open_store`: the state store a scheduler's ``state=`` argument names."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ..errors import JobActionError, Problem
from .base import StateStore
from .memory import DEFAULT_HISTORY_LIMIT, MemoryStateStore

__all__ = ["mask_url", "open_store"]

MEMORY = "memory"


def open_store(
    state: str | StateStore | None, *, history_limit: int = DEFAULT_HISTORY_LIMIT
) -> tuple[StateStore, bool]:
    """The store `state` names, and whether the caller opened it (and so must close it).

    - None (the default) or ``"memory"``: a new `MemoryStateStore` keeping `history_limit`
      finished runs.
    - A `StateStore` instance: used as it is; its owner closes it.
    - Any other string is a store URL (``sqlite:///…``, ``postgresql://…``): refused with a
      `JobActionError` naming it (password masked), since this version has no durable store.
    """
    if state is None or state == MEMORY:
        return MemoryStateStore(history_limit), True
    if isinstance(state, str):
        raise JobActionError(
            Problem(
                f"state store {mask_url(state)!r} is not supported: this version keeps its "
                f"state in memory only (use state={MEMORY!r} or a StateStore instance)",
                key="state",
            )
        )
    if not isinstance(state, StateStore):
        raise TypeError(
            f"state must be {MEMORY!r}, a state store URL or a StateStore, not {state!r}"
        )
    return state, False


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
