"""`lazy_module`: a package's public names imported when first used (PEP 562).

A package whose ``__init__`` imports all its modules makes every command pay for all of them;
with this, ``jobscheduler --help`` or ``validate`` imports only what it uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_module"]


def lazy_module(
    package: str, namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package` (its ``__name__``), whose globals
    are `namespace`: name ``N`` is imported from module ``where[N]`` (relative to the package)
    when first asked for, then kept in `namespace`."""

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # asked once: later lookups find it directly
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where})

    return getattr_, dir_
