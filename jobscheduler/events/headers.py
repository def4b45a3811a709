"""Mail headers of an alert: plain addresses, a one-line subject, the message itself."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses

__all__ = ["MAX_SUBJECT", "build_message", "check_header", "clean_subject", "parse_address"]

MAX_SUBJECT = 250

# Line breaks of every kind (what str.splitlines splits on) and the other C0/C1 controls
# except TAB: none of them belongs in a header.
_BAD_HEADER_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# What a rendered subject may not hold, with the blanks around it: replaced by one space.
_SUBJECT_BREAKS = re.compile(
    r"[ \t]*[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029][\x00-\x20\x7f-\x9f\u2028\u2029]*"
)
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


def clean_subject(text: str) -> str:
    """`text` as a one-line subject: each run of line breaks and control characters (with the
    blanks around it) becomes one space; surrounding white space is stripped."""
    return _SUBJECT_BREAKS.sub(" ", text).strip()


def parse_address(text: str, what: str = "address") -> tuple[str, str]:
    """Check one e-mail address and return (as written, the bare addr-spec for the envelope).

    ``ops@example.com`` and ``Ops Team <ops@example.com>`` are accepted; line breaks, control
    characters, several addresses in one (``a@x, b@y``), groups and quoted local parts are
    refused with a ValueError naming `what`.
    """
    check_header(text, what)
    stripped = text.strip()
    pairs = getaddresses([stripped])
    if len(pairs) != 1:
        raise ValueError(f"{what} {text!r} must be exactly one e-mail address")
    _, addr = pairs[0]
    if not _ADDR_SPEC.fullmatch(addr) or (stripped != addr and not stripped.endswith(f"<{addr}>")):
        raise ValueError(f"{what} {text!r} is not a plain e-mail address")
    return stripped, addr


def build_message(
    *,
    sender: str,
    recipients: Iterable[str],
    subject: str,
    body: str,
    date: datetime,
) -> EmailMessage:
    """An `EmailMessage` with From, To, Subject, Date, Message-ID and ``Auto-Submitted:
    auto-generated`` (RFC 3834: auto-responders stay quiet). Raises ValueError when the sender,
    a recipient or the subject is not safe in a header."""
    from_header, from_addr = parse_address(sender, "sender")
    to_headers = [parse_address(r, "recipient")[0] for r in recipients]
    if not to_headers:
        raise ValueError("an alert needs at least one recipient")
    check_header(subject, "subject")
    message = EmailMessage()
    message["From"] = from_header
    message["To"] = ", ".join(to_headers)
    message["Subject"] = subject
    message["Date"] = format_datetime(date if date.tzinfo else date.replace(tzinfo=UTC))
    domain = from_addr.rsplit("@", 1)[1]
    message["Message-ID"] = f"<{uuid.uuid4().hex}@{domain}>"
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(body)
    return message
