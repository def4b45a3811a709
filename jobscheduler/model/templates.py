"""Alert templates: Jinja2, always in its sandbox, bounded in time and size.

Undefined variables render as empty text (`jinja2.ChainableUndefined`, so ``{{ a.b.c }}`` is
empty too) rather than failing at send time: an alert with a blank is better than no alert.
A value that is None renders empty too (``{{ execution.reason }}`` of a successful run), never
"None". Syntax errors are found when the configuration loads.

The specification's Document Generator fields are filled as well, so templates written for the
Java component work unchanged: ``%Name%`` in the template's text (not inside ``{{ }}`` or
``{% %}``, where ``strftime('%Y%m%d')`` must stay as written) is replaced by the value of
``Name`` when the template's context has it (``JobName``, ``JobStatus``, any key of the run's
message data; not ``execution``), rendered like ``{{ Name }}``. Any other ``%...%`` and every
lone percent sign are left as written.

Rendering is bounded (`jobscheduler.model.templatelimits`): at most `MAX_OUTPUT` characters
of output (checked as the output is made, not afterwards), `TIME_LIMIT` seconds and
`MAX_STEPS` steps, ``range`` of at most 10,000 items. A template that goes past a bound fails
with `TemplateError` (``limit`` True), like any other failing template.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import jinja2
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream

from ..clock import Clock, SystemClock
from .templateerror import TemplateError
from .templatelimits import BoundedEnvironment, Budget, TemplateLimitError, budget_scope

__all__ = [
    "MAX_OUTPUT",
    "MAX_STEPS",
    "TIME_LIMIT",
    "TemplateError",
    "compile_template",
    "render",
]

MAX_OUTPUT = 1_000_000
TIME_LIMIT = 2.0
MAX_STEPS = 1_000_000

_FIELD = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)%")
_FIELD_FUNCTION = "_jobscheduler_percent_field"


@jinja2.pass_context
def _percent_field(context: jinja2.runtime.Context, name: str) -> Any:
    """The value of ``%name%``: the context's, or the text as written when it has none."""
    if name != "execution" and name != _FIELD_FUNCTION and name in context:
        return context.resolve_or_missing(name)
    return f"%{name}%"


class _PercentFields(Extension):
    """Turns ``%Name%`` in template text into ``{{ _jobscheduler_percent_field('Name') }}``."""

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        for token in stream:
            if token.type != "data" or "%" not in token.value:
                yield token
                continue
            text, position, line = token.value, 0, token.lineno
            for match in _FIELD.finditer(text):
                if match.start() > position:
                    yield Token(line, "data", text[position : match.start()])
                    line += text.count("\n", position, match.start())
                yield Token(line, "variable_begin", "{{")
                yield Token(line, "name", _FIELD_FUNCTION)
                yield Token(line, "lparen", "(")
                yield Token(line, "string", match.group(1))
                yield Token(line, "rparen", ")")
                yield Token(line, "variable_end", "}}")
                position = match.end()
            if position < len(text):
                yield Token(line, "data", text[position:])


def _finalize(value: Any) -> Any:
    return "" if value is None else value


_ENV = BoundedEnvironment(
    undefined=jinja2.ChainableUndefined,
    autoescape=False,
    keep_trailing_newline=True,
    finalize=_finalize,
    extensions=[_PercentFields],
)
_ENV.globals[_FIELD_FUNCTION] = _percent_field


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


def render(
    template: jinja2.Template,
    context: Mapping[str, Any],
    *,
    max_chars: int = MAX_OUTPUT,
    time_limit: float = TIME_LIMIT,
    max_steps: int = MAX_STEPS,
    clock: Clock | None = None,
) -> str:
    """Render within the bounds (see the module docstring); any failure (a sandbox refusal,
    ``{{ 1/0 }}``, a bound) becomes `TemplateError`. `clock` times the render (default: the
    real one)."""
    budget = Budget(clock if clock is not None else SystemClock(), time_limit, max_chars, max_steps)
    parts: list[str] = []
    size = 0
    try:
        with budget_scope(budget):
            for chunk in template.generate(dict(context)):
                size += len(chunk)
                if size > max_chars:
                    raise TemplateLimitError(f"output longer than {max_chars} characters")
                parts.append(chunk)
                budget.step()
            budget.check_time()
    except TemplateLimitError as exc:
        raise TemplateError(f"template cut: {exc}", limit=True) from None
    except Exception as exc:  # a template is user code: 1/0, sandbox refusals, anything
        raise TemplateError(f"template failed: {type(exc).__name__}: {exc}") from None
    return "".join(parts)
