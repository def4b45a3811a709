"""A rendered subject as one header line: line breaks and controls become spaces."""

from __future__ import annotations

import re

__all__ = ["clean_subject"]

# What a rendered subject may not hold, with the blanks around it: replaced by one space.
_SUBJECT_BREAKS = re.compile(
    r"[ \t]*[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029][\x00-\x20\x7f-\x9f\u2028\u2029]*"
)


def clean_subject(text: str) -> str:
    """`text` as a one-line subject: each run of line breaks and control characters (with the
    blanks around it) becomes one space; surrounding white space is stripped."""
    return _SUBJECT_BREAKS.sub(" ", text).strip()
