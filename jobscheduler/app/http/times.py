"""The zone a page shows its times in (``?tz=Europe/Berlin``; UTC by default), and a time as
the page shows it: every time on a page carries its zone."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from ...triggers.zones import resolve_zone
from .actions import HttpError

__all__ = ["page_zone", "shown_time", "zone_name"]


def page_zone(text: str | None) -> tzinfo:
    """The zone named by a page's ``tz`` parameter: UTC when absent or empty; an `HttpError`
    400 with the reason for a name that is no zone."""
    if text is None or not text.strip():
        return UTC
    try:
        return resolve_zone(text)
    except ValueError as exc:
        raise HttpError(400, f"tz: {exc}; give an IANA name such as Europe/Berlin") from None


def zone_name(zone: tzinfo) -> str:
    """The zone's IANA name (``Europe/Berlin``), ``UTC`` for UTC."""
    return str(getattr(zone, "key", None) or "UTC")


def shown_time(value: str | datetime | None, zone: tzinfo) -> str:
    """`value` (an aware datetime, or ISO 8601 text as the API writes it) in `zone`, to the
    second, with the zone's abbreviation at that instant: ``2026-11-23 16:50:18 CET``."""
    if value is None or value == "":
        return ""
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    local = when.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or zone_name(zone)}"
