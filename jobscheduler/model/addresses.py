"""E-mail addresses and header values, checked where a definition is made.

The checks live in the model so that a `Message` or an `EmailConfiguration` refuses, when it
is made (``validate``, ``add``, ``Scheduler()``), exactly what the e-mail handler would refuse
when the daemon starts: one validation path, so a file that validates also runs.
"""

from __future__ import annotations

import re

__all__ = ["check_header", "parse_address"]

# Line breaks of every kind (what str.splitlines splits on) and the other C0/C1 controls
# except TAB: none of them belongs in a header.
_BAD_HEADER_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# A plain addr-spec: no quoting, comments, groups or routes; one "@".
_ADDR_SPEC = re.compile(r"[^\s@<>()\[\],;:\"\\]+@[^\s@<>()\[\],;:\"\\]+")


def check_header(value: str, what: str) -> str:
    """Return `value` if it is safe in a mail header; raise ValueError naming `what` when it
    holds a line break (CR, LF, or any other Unicode line break) or a control character."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, not {type(value).__name__}")
    bad = _BAD_HEADER_CHARS.search(value)
    if bad is not None:
        kind = "a line break" if len(f"a{bad.group()}b".splitlines()) > 1 else "a control character"
        raise ValueError(f"{what} {value!r} contains {kind}; refused")
    return value


def parse_address(text: str, what: str = "address") -> tuple[str, str]:
    """Check one e-mail address and return (as written, the bare addr-spec for the envelope).

    ``ops@example.com`` and ``Ops Team <ops@example.com>`` are accepted; line breaks, control
    characters, several addresses in one (``a@x, b@y``), groups and quoted local parts are
    refused with a ValueError naming `what`.
    """
    from email.utils import getaddresses  # imported by the first address: a file without
    # e-mail settings does not pay for the e-mail package

    check_header(text, what)
    stripped = text.strip()
    pairs = getaddresses([stripped])
    if len(pairs) != 1:
        raise ValueError(f"{what} {text!r} must be exactly one e-mail address")
    _, addr = pairs[0]
    if not _ADDR_SPEC.fullmatch(addr) or (stripped != addr and not stripped.endswith(f"<{addr}>")):
        raise ValueError(f"{what} {text!r} is not a plain e-mail address")
    return stripped, addr
