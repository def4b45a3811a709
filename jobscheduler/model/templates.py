"""Alert templates: Jinja2, always in its sandbox.

Undefined variables render as empty text (`jinja2.ChainableUndefined`, so ``{{ a.b.c }}`` is
empty too) rather than failing at send time: an alert with a blank is better than no alert.
Syntax errors are found when the configuration loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["TemplateError", "compile_template", "render"]

_ENV = ImmutableSandboxedEnvironment(
    undefined=jinja2.ChainableUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)


class TemplateError(ValueError):
    """A template that does not compile; `line` is its line number when Jinja2 knows it."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def compile_template(source: str, name: str = "<template>") -> jinja2.Template:
    """Compile `source` in the sandbox; raise `TemplateError` naming the template's line."""
    if not isinstance(source, str):
        raise TemplateError(f"template {name} must be text, not {type(source).__name__}")
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"template {name}, line {exc.lineno}: {exc.message}", exc.lineno
        ) from None


def render(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    """Render; any failure (a sandbox refusal, ``{{ 1/0 }}``) becomes `TemplateError`."""
    try:
        return template.render(dict(context))
    except Exception as exc:  # a template is user code: 1/0, sandbox refusals, anything
        raise TemplateError(f"template failed: {type(exc).__name__}: {exc}") from None
