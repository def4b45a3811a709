"""How far a template may go: Jinja2's immutable sandbox, with bounds on work, size and time.

A template is user code run inside the scheduler, on every alert. The sandbox keeps it away
from Python's internals; this module keeps it from running for ever or filling the memory:

- ``range`` yields at most `MAX_RANGE` (10,000) items, lazily, and each item is a step;
- every attribute or item lookup, call and arithmetic operator is a step; the render's
  `Budget` is checked at each step: more than `max_steps` steps, or (every 256 steps) past its
  time limit, ends the render with `TemplateLimitError`;
- values are checked where they are made: a text, list or mapping longer than the output cap,
  an integer of more than `MAX_INT_BITS` bits, ``'x' * 10**9``, ``2 ** 10**9``, a format
  width or ``center``/``indent`` width above `MAX_WIDTH`, a ``replace`` that would grow past
  the cap, ``slice`` into more than `MAX_RANGE` parts, are refused before they are computed;
- ``lipsum`` is gone (it makes text of any size).

What is not bounded: text joined with ``~`` in a chain of ``set`` statements grows with the
template's own length (each statement can double it); templates come from the configuration,
so an operator would have to write that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any

import jinja2
from jinja2 import filters as jinja_filters
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..clock import Clock

__all__ = [
    "MAX_INT_BITS",
    "MAX_RANGE",
    "MAX_WIDTH",
    "BoundedEnvironment",
    "Budget",
    "TemplateLimitError",
    "budget_scope",
]

MAX_RANGE = 10_000
MAX_INT_BITS = 100_000
MAX_WIDTH = 10_000
_BIG_NUMBER = re.compile(r"\d{6,}")  # a width or precision of 100,000 or more


class TemplateLimitError(Exception):
    """A template went past a bound (steps, time, size). Not a ValueError: the caller turns
    it into a `TemplateError` with its own wording."""


class Budget:
    """The bounds of one render: output characters, steps, and a deadline on `clock`."""

    __slots__ = ("clock", "deadline", "max_chars", "max_steps", "steps", "time_limit")

    def __init__(self, clock: Clock, time_limit: float, max_chars: int, max_steps: int) -> None:
        self.clock = clock
        self.time_limit = time_limit
        self.deadline: datetime = clock.now() + timedelta(seconds=time_limit)
        self.max_chars = max_chars
        self.max_steps = max_steps
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise TemplateLimitError(f"more than {self.max_steps} steps")
        if self.steps & 255 == 0:
            self.check_time()

    def check_time(self) -> None:
        if self.clock.now() > self.deadline:
            raise TemplateLimitError(f"took longer than {self.time_limit:g} s")

    def check_size(self, value: Any) -> Any:
        """`value`, unless it is too big to keep."""
        if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
            if len(value) > self.max_chars:
                raise TemplateLimitError(f"a value of more than {self.max_chars} items")
        elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise TemplateLimitError(f"a number of more than {MAX_INT_BITS} bits")
        return value


_BUDGET: ContextVar[Budget | None] = ContextVar("jobscheduler_template_budget", default=None)


class budget_scope:
    """``with budget_scope(budget):`` renders in this context are bounded by `budget`."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._token: Any = None

    def __enter__(self) -> Budget:
        self._token = _BUDGET.set(self._budget)
        return self._budget

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self._token)


def _step() -> Budget | None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.step()
    return budget


def _checked(value: Any) -> Any:
    budget = _BUDGET.get()
    return value if budget is None else budget.check_size(value)


def _cap() -> int:
    budget = _BUDGET.get()
    return 1_000_000 if budget is None else budget.max_chars


def _bounded_range(*args: int) -> Iterator[int]:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise TemplateLimitError(f"range of {len(numbers)} items (at most {MAX_RANGE})")
    for number in numbers:
        _step()
        yield number


def _check_format(text: Any) -> None:
    if isinstance(text, str) and _BIG_NUMBER.search(text):
        raise TemplateLimitError("a format width or precision of 100000 or more")


def _check_width(width: Any) -> None:
    if isinstance(width, int) and width > MAX_WIDTH:
        raise TemplateLimitError(f"a width of {width} (at most {MAX_WIDTH})")


def _replace_size(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        count = len(text) + 1 if old == "" else text.count(old)
        if len(text) + count * (len(new) - len(old)) > _cap():
            raise TemplateLimitError("replace would make a text longer than the output cap")


def _guard_filter(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    original = jinja_filters.FILTERS[name]

    passes_first = hasattr(original, "jinja_pass_arg")  # an eval context, say: not a value

    def guarded(*args: Any, **kwargs: Any) -> Any:
        _step()
        check(*(args[1:] if passes_first else args), **kwargs)
        return _checked(original(*args, **kwargs))

    for attribute in ("jinja_pass_arg",):  # keep pass_eval_context & co.
        if hasattr(original, attribute):
            setattr(guarded, attribute, getattr(original, attribute))
    return guarded


def _center_check(value: Any, width: Any = 80, *rest: Any, **kw: Any) -> None:
    _check_width(width)


def _indent_check(value: Any, width: Any = 4, *rest: Any, **kw: Any) -> None:
    _check_width(width)


def _format_check(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_format(value)


def _replace_check(text: Any, old: Any, new: Any, *rest: Any, **kw: Any) -> None:
    _replace_size(text, old, new)


def _slice_check(value: Any, slices: Any, *rest: Any, **kw: Any) -> None:
    if isinstance(slices, int) and slices > MAX_RANGE:
        raise TemplateLimitError(f"slice into {slices} parts (at most {MAX_RANGE})")


_GUARDED_FILTERS: dict[str, Callable[..., None]] = {
    "center": _center_check,
    "indent": _indent_check,
    "format": _format_check,
    "replace": _replace_check,
    "slice": _slice_check,
}

# str methods whose first argument is a width, or that format
_WIDTH_METHODS = {"center", "ljust", "rjust", "zfill", "expandtabs"}


def _check_power(left: Any, right: Any) -> None:
    if (
        isinstance(right, int)
        and isinstance(left, int | float)
        and abs(right) > 10_000
        and abs(left) > 1
    ):
        raise TemplateLimitError(f"a power of {right}")


def _check_product(left: Any, right: Any) -> None:
    for seq, times in ((left, right), (right, left)):
        if (
            isinstance(seq, str | list | tuple)
            and isinstance(times, int)
            and len(seq) * times > _cap()
        ):
            raise TemplateLimitError("a repetition longer than the output cap")
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS
    ):
        raise TemplateLimitError(f"a number of more than {MAX_INT_BITS} bits")


def _check_remainder(left: Any, right: Any) -> None:
    _check_format(left)  # ``'%999999999s' % x``


_BINOP_CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "**": _check_power,
    "*": _check_product,
    "%": _check_remainder,
}
"""The checks of an operation before it is done, by operator."""


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with the steps and checks described in the module docstring. The
    checks apply while a `Budget` is in force (`budget_scope`); compiling needs none."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _bounded_range
        self.globals.pop("lipsum", None)
        for name, check in _GUARDED_FILTERS.items():
            self.filters[name] = _guard_filter(name, check)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        _step()
        check = _BINOP_CHECKS.get(operator)
        if check is not None:
            check(left, right)
        return _checked(super().call_binop(context, operator, left, right))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        # ``'{:>999999999}'.format`` reaches the template as the sandbox's wrapper.
        if getattr(value, "__name__", "") in ("format", "format_map"):
            _check_format(getattr(value, "__self__", None))
        return super().wrap_str_format(value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _step()
        return _checked(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        _step()
        return _checked(super().getitem(obj, argument))

    def call(
        __self,  # the sandbox's own signature: keyword arguments may be "self"
        __context: jinja2.runtime.Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        _step()
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        if isinstance(owner, str):
            if name in _WIDTH_METHODS and args:
                _check_width(args[0])
            elif name == "replace" and len(args) >= 2:
                _replace_size(owner, args[0], args[1])
        return _checked(super().call(__context, __obj, *args, **kwargs))
