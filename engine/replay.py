"""Replay: the fold and verification of a trace live in :mod:`engine.trace` (the one trace reader).

This name stays for the callers that think of it as "replay" (``calbench trace``, the
replay viewer); it holds no logic of its own.
"""

from __future__ import annotations

from .trace import FoldResult, TraceError, errand_cost_values, fold_trace
from .verify import check_metrics, verify_trace

__all__ = ["FoldResult", "TraceError", "check_metrics", "errand_cost_values", "fold_trace", "verify_trace"]
