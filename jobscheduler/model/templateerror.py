"""`TemplateError`: an alert template that does not compile or failed while rendering.

A module of its own, below the reader and Jinja2's wrapper (`templates`), so that reading a
configuration file without templates never imports Jinja2 (the command line's start-up).
"""

from __future__ import annotations

__all__ = ["TemplateError"]


class TemplateError(ValueError):
    """A template that does not compile (`line`: its line number when Jinja2 knows it), or
    that failed while rendering (`limit`: True when it went past a bound)."""

    def __init__(self, message: str, line: int | None = None, *, limit: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.limit = limit
