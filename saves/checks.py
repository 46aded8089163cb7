"""What the save database refuses to hold: the one checker, ``engine.tracecheck`` (shared with
``calbench trace``, issue 35 (5)), raising the store's :class:`StoreError`."""

from __future__ import annotations

from typing import Any

from engine.tracecheck import MAX_DEPTH
from engine.tracecheck import check_trace as _check

from .errors import StoreError

__all__ = ["MAX_DEPTH", "check_trace"]


def check_trace(trace: Any, *, trusted: bool = False) -> None:
    """``engine.tracecheck.check_trace`` raising :class:`StoreError`."""
    _check(trace, trusted=trusted, error=StoreError)
