"""Store URLs in messages: `mask_url` hides the password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["mask_url"]


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
