"""The `Scheduler` facade: wires the layers, holds no scheduling logic (`facade`)."""

from __future__ import annotations

from .facade import Scheduler

__all__ = ["Scheduler"]
